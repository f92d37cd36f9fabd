"""Which host buffers the host function must zero before its launches.

The kernel interpreter's memory starts at zero, so the native entry zeroes every buffer
that is not an input — unless nothing can see the zeros: a buffer whose first use, in
launch order, is a launch that stores every one of its elements (`covers`) and reads none
of them is written whole before anything reads it, and a buffer no launch binds and the
entry does not return is never seen. Skipping their zeroing changes no bit.
"""

from __future__ import annotations

import math

from presk_kernel.ir import (
    Affine,
    GemmStmt,
    Kernel,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    plain,
)
from presk_kernel.layout import parallel_loops


def _loads(node, out: set[int]) -> None:
    """The kernel buffers read anywhere under `node` (statements or expressions)."""
    if isinstance(node, tuple):
        for x in node:
            _loads(x, out)
    elif isinstance(node, Load):
        out.add(node.buf)
        _loads(node.index, out)
    elif isinstance(node, Op):
        _loads(node.args, out)
    elif isinstance(node, Let):
        _loads(node.expr, out)
    elif isinstance(node, Store):
        _loads(node.index, out)
        _loads(node.expr, out)
    elif isinstance(node, Loop):
        _loads(node.body, out)
    elif isinstance(node, Reduce):
        _loads(node.body, out)
        _loads(node.terms, out)


def covers(k: Kernel) -> set[int]:
    """The kernel's output buffers it stores whole: an unconditional store in the innermost
    loop of its parallel nest (the kernel's body for a 0-d output) whose index is one
    distinct loop variable per axis, each running over the axis's whole length."""
    loops = parallel_loops(k)
    body = loops[-1].body if loops else k.body
    extents = {lp.var: lp.extent for lp in loops}
    out = set()
    for s in body:
        if not isinstance(s, Store) or s.buf < len(k.inputs):
            continue
        axes = k.buffers[s.buf].axes
        used = []
        for ax, i in zip(axes, s.index, strict=True):
            if not (isinstance(i, Affine) and i.const == 0 and len(i.terms) == 1):
                break
            ((v, c),) = i.terms
            if c != 1 or extents.get(v) != ax.length:
                break
            used.append(v)
        else:
            if len(set(used)) == len(axes):
                out.add(s.buf)
    return out


def zeroed(schedule: Schedule) -> list[int]:
    """The host buffers, not inputs, that must start at zero (in the schedule's order)."""
    size = {b.id: math.prod(a.length for a in b.axes) for b in schedule.buffers}
    first: dict[int, bool] = {}  # host buffer -> written whole before any read
    for launch in schedule.launches:
        k = launch.kernel
        reads: set[int] = set()
        _loads(plain(k.body), reads)  # a laid-out body: the nest it lays out
        # a GEMM statement over no term stores nothing (the generated GEMM's)
        empty = any(isinstance(s, GemmStmt) and s.gemm.depth == 0 for s in k.body)
        whole = set() if empty else covers(k)
        for i, (buf, arg) in enumerate(zip(k.buffers, launch.args, strict=True)):
            if arg.buf in first:
                continue
            n = math.prod(a.length for a in buf.axes)
            ok = i in whole and i not in reads and arg.offset == 0 and n == size[arg.buf]
            # an input binding is a read; an output not stored whole leaves zeros to see
            first[arg.buf] = ok and i >= len(k.inputs)
    inputs, outputs = set(schedule.inputs), set(schedule.outputs)
    return [
        b.id
        for b in schedule.buffers
        if b.id not in inputs and not first.get(b.id) and (b.id in first or b.id in outputs)
    ]


def used(schedule: Schedule) -> set[int]:
    """The host buffers the entry uses: its inputs and outputs and those a launch binds
    (fusion leaves the temporaries it removed in the schedule's list, unused)."""
    out = set(schedule.inputs) | set(schedule.outputs)
    for launch in schedule.launches:
        out.update(arg.buf for arg in launch.args)
    return out
