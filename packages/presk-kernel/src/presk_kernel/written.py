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
from presk_kernel.narrow import dead_stores
from presk_kernel.slices import unfused


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


def _inner_stores(body: tuple, dead: frozenset[int]) -> list[tuple[Store, dict[str, int]]]:
    """The stores of the innermost parallel loop's body that run over their loops' whole
    extents, each with the extents of the loops between (issue 26's narrowing): a store
    in it; a loop split at a bound, `for j in 0 .. s` then `for j in s .. n`, each storing
    the same element of j (a narrowed quotients' loop and its hidden part); a store in a
    loop over a whole extent (a softmax row's loop after its folds); a loop bounded to the
    allowed prefix of an output whose other positions nothing reads (`dead`,
    presk_kernel.narrow.dead_stores)."""
    out: list[tuple[Store, dict[str, int]]] = [(s, {}) for s in body if isinstance(s, Store)]
    loops = [s for s in body if isinstance(s, Loop) and not s.serial]
    for a, b in zip(loops, loops[1:], strict=False):
        pair = a.var == b.var and a.extent == b.extent and a.start is None and b.stop is None
        if not (pair and a.stop is not None and a.stop == b.start):
            continue
        if len(a.body) == len(b.body) == 1 and isinstance(a.body[0], Store):
            sa, sb = a.body[0], b.body[0]
            if isinstance(sb, Store) and (sa.buf, sa.index) == (sb.buf, sb.index):
                out.append((sa, {a.var: a.extent}))
    for lp in loops:
        whole = lp.start is None and lp.stop is None  # a row's loop after its folds
        allowed = lp.start is None and lp.stop is not None
        for s in lp.body:
            if isinstance(s, Store) and (whole or (allowed and s.buf in dead)):
                out.append((s, {lp.var: lp.extent}))
    return out


def _axis_vars(i, extents: dict[str, int], length: int) -> list[str] | None:
    """The loop variables of an axis's index when it runs over the whole axis: one variable
    over the axis's length, or several in mixed radix (`32*i2 + i3`, i3 < 32, i2 < H: the
    merged heads), each step the extent of the ones below."""
    if not (isinstance(i, Affine) and i.const == 0 and i.terms):
        return None
    step = 1
    for v, c in sorted(i.terms, key=lambda t: t[1]):
        if c != step or v not in extents:
            return None
        step *= extents[v]
    return [v for v, _ in i.terms] if step == length else None


def covers(k: Kernel, dead: frozenset[int] = frozenset()) -> set[int]:
    """The kernel's output buffers it stores whole: an unconditional store in the innermost
    loop of its parallel nest (the kernel's body for a 0-d output) whose index is one
    distinct loop variable per axis, each running over the axis's whole length — or, below
    that loop, over a loop split in two or over the allowed prefix of a `dead` output
    (`_inner_stores`)."""
    loops = parallel_loops(k)
    body = loops[-1].body if loops else plain(k.body)
    out = set()
    for s, more in _inner_stores(body, dead):
        extents = {lp.var: lp.extent for lp in loops} | more
        if s.buf < len(k.inputs):
            continue
        axes = k.buffers[s.buf].axes
        used = []
        for ax, i in zip(axes, s.index, strict=True):
            vs = _axis_vars(i, extents, ax.length)
            if vs is None:
                break
            used += vs
        else:
            if len(set(used)) == len(used):
                out.add(s.buf)
    return out


def stored_first(k: Kernel) -> set[int]:
    """The outputs a kernel stores whole in each iteration of its parallel nest before it
    reads them there, at that iteration's own elements only (a row-fused kernel's
    temporaries, presk_kernel.rows: x − μ stored, then folded): a statement of the
    innermost parallel loop's body stores the buffer at the iteration's index (the
    parallel loops' variables first, `_inner_stores`), and every load of it comes in a later
    statement, at an index whose first entries are those variables. Its zeros are never
    read."""
    loops = parallel_loops(k)
    if not loops:
        return set()
    row = tuple(Affine.var(lp.var) for lp in loops)
    body = loops[-1].body
    firsts: dict[int, int] = {}
    for at, s in enumerate(body):
        for st, more in _inner_stores((s,), frozenset()):
            if st.buf < len(k.inputs) or st.buf in firsts:
                continue
            axes = k.buffers[st.buf].axes[len(row) :]
            if len(st.index) != len(row) + len(axes) or tuple(st.index[: len(row)]) != row:
                continue
            rest = [
                _axis_vars(i, more, ax.length)
                for i, ax in zip(st.index[len(row) :], axes, strict=True)
            ]
            flat = [v for vs in rest if vs is not None for v in vs]
            if all(vs is not None for vs in rest) and len(set(flat)) == len(flat):
                firsts[st.buf] = at  # the row's elements, every one
    out = set()
    for buf, at in firsts.items():
        before: set[int] = set()
        _loads(body[: at + 1], before)
        if buf in before:
            continue
        if all(tuple(idx[: len(row)]) == row for idx in _load_indices(body[at + 1 :], buf)):
            out.add(buf)
    return out


def _load_indices(node, buf: int) -> list:
    """The index of every load of `buf` under `node`."""
    out: list = []

    def walk(x) -> None:
        if isinstance(x, tuple):
            for y in x:
                walk(y)
        elif isinstance(x, Load):
            if x.buf == buf:
                out.append(x.index)
            walk(x.index)
        elif isinstance(x, Op):
            walk(x.args)
        elif isinstance(x, Let):
            walk(x.expr)
        elif isinstance(x, Store):
            walk(x.index)
            walk(x.expr)
        elif isinstance(x, Loop):
            walk(x.body)
        elif isinstance(x, Reduce):
            walk(x.body)
            walk(x.terms)

    walk(node)
    return out


def zeroed(schedule: Schedule) -> list[int]:
    """The host buffers, not inputs, that must start at zero (in the schedule's order); a
    slice group (presk_kernel.slices) seen as its members in order."""
    schedule = unfused(schedule)[0]
    size = {b.id: math.prod(a.length for a in b.axes) for b in schedule.buffers}
    first: dict[int, bool] = {}  # host buffer -> written whole before any read
    dead = dead_stores(schedule)
    for at, launch in enumerate(schedule.launches):
        k = launch.kernel
        reads: set[int] = set()
        _loads(plain(k.body), reads)  # a laid-out body: the nest it lays out
        # a GEMM statement over no term stores nothing (the generated GEMM's)
        empty = any(isinstance(s, GemmStmt) and s.gemm.depth == 0 for s in k.body)
        whole = set() if empty else covers(k, frozenset(dead.get(at, ())))
        for i, (buf, arg) in enumerate(zip(k.buffers, launch.args, strict=True)):
            if arg.buf in first:
                continue
            n = math.prod(a.length for a in buf.axes)
            fresh = i not in reads or i in stored_first(k)  # a read after its row's store
            ok = i in whole and fresh and arg.offset == 0 and n == size[arg.buf]
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
