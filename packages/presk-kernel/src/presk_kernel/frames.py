"""Each host function's own buffers, and its arena as a stack (step 18's model.c, L1148–L1170).

A schedule's buffers are the entry's: a call passes its caller's buffers and its body
launches on the buffers the lowering made while it ran. A host function written on its own
(a C function per Presk function) needs them as its own: its parameters and results (one
per tensor leaf, the caller's: the entry's named after the leaves, `θ.w`, a callee's `in0`,
`out0`), and its locals, each named after the `let` it holds where the program names one
(`s`, `a`), else after its site (`t4` for `attend/%4`). A function
takes its locals from one arena past a mark and releases them when it returns, so the
arena a call needs is its locals and, past them, the most any of its calls needs; a
function's results are its caller's (allocated before the callee's mark).

This is read from the call tree the schedule keeps (presk_kernel.calls), at each function's
first call: every call of a function runs the same kernels on buffers of the same types
(`host_schedule` inlines the calls that would not), so the first call's buffers stand for
every call's. Nothing here changes the kernel document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from presk_core.ir import Program

from presk_kernel.calls import calls_in, entry_call, host_functions
from presk_kernel.ir import Axis, Call, Schedule, elements
from presk_kernel.lower import site_in_source

ITEMSIZE = {"f64": 8, "f32": 4, "bf16": 2, "i64": 8, "bool": 1, "i8": 1}
ALIGN = 64  # every buffer of an arena starts at a multiple of 64 bytes, as the native one's


@dataclass(frozen=True, slots=True)
class FrameBuffer:
    """A buffer of a host function: `name` (a C identifier), `site` (what it holds, the
    schedule's name for it at the function's first call), its type, and for a local its
    place past the function's mark (bytes; None for a parameter or a result)."""

    name: str
    site: str
    dtype: str
    axes: tuple[Axis, ...]
    offset: int | None = None

    @property
    def bytes(self) -> int:
        return elements(self.axes) * ITEMSIZE[self.dtype]


@dataclass(frozen=True, slots=True)
class HostFrame:
    """A host function's buffers: its parameters, results and locals in the order its first
    call binds them; `own`, the bytes of its locals past its mark; `need`, the most it holds
    past its mark at once (its locals, then its deepest call's need)."""

    function: str
    params: tuple[FrameBuffer, ...]
    results: tuple[FrameBuffer, ...]
    locals: tuple[FrameBuffer, ...]
    own: int
    need: int


def let_names(core: Program) -> dict[str, str]:
    """Site (`attend/%3`) -> the name of the `let` that binds it (`s`), over a core
    program's functions."""
    names = {}
    for fn in core.functions:
        for ins in fn.body:
            if ins.out is not None and ins.out.name is not None:
                names.setdefault(site_in_source(fn, ins), ins.out.name)
    return names


def host_frames(schedule: Schedule, lets: dict[str, str] | None = None) -> tuple[HostFrame, ...]:
    """The frame of each host function the schedule calls (the entry's first, in the order
    of `schedule.functions`), its locals named after `lets` (site -> name, `let_names`)."""
    lets = lets or {}
    body = entry_call(schedule)
    first: dict[str, Call] = {}
    for c in (body, *calls_in(body)):
        first.setdefault(c.function, c)
    frames: dict[str, HostFrame] = {}
    for fn in reversed([f for f in host_functions(schedule) if f.name in first]):
        c = first[fn.name]
        frames[fn.name] = _frame(schedule, c, lets, frames, entry=c is body)
    return tuple(frames[f.name] for f in host_functions(schedule) if f.name in frames)


def _frame(
    schedule: Schedule, call: Call, lets: dict[str, str], done: dict, entry: bool
) -> HostFrame:
    hb = schedule.buffers
    taken: set[str] = set()

    def buffer(buf: int, name: str, offset: int | None = None) -> FrameBuffer:
        name = _identifier(name)
        while name in taken:
            name += "_"
        taken.add(name)
        return FrameBuffer(name, hb[buf].name, hb[buf].dtype, hb[buf].axes, offset)

    # the entry's parameters and results are named after the leaves they hold (`θ.w`,
    # `batch.0`); a callee's after their place (`in0`, `out0`): the caller's names for
    # what it passes are not the callee's
    params = tuple(
        buffer(a.buf, hb[a.buf].name if entry else f"in{i}") for i, a in enumerate(call.args)
    )
    results = tuple(
        buffer(a.buf, "result" if entry and len(call.results) == 1 else f"out{i}")
        for i, a in enumerate(call.results)
    )
    outside = {a.buf for a in (*call.args, *call.results)}
    local_ids: list[int] = []
    deepest = 0
    for item in call.body:
        if isinstance(item, Call):
            bufs = [a.buf for a in (*item.args, *item.results)]
            callee = done.get(item.function)
            deepest = max(deepest, callee.need if callee is not None else 0)
        else:
            bufs = [a.buf for a in schedule.launches[item].args]
        local_ids += [b for b in bufs if b not in outside and b not in local_ids]
    locals_, offset = [], 0
    for b in local_ids:
        site = hb[b].name
        local = buffer(b, lets.get(site) or _site_name(site, call.function) or f"t_{b}", offset)
        locals_.append(local)
        offset += -(-local.bytes // ALIGN) * ALIGN
    return HostFrame(call.function, params, results, tuple(locals_), offset, offset + deepest)


def _site_name(site: str, function: str) -> str | None:
    """`t4` for a site `attend/%4` of the function itself; `RMSNorm_apply_t7` for one of
    another function (a callee's result, an inlined call's); None for a name that is no
    site (`θ.w`, `batch.0`)."""
    m = re.fullmatch(r"(.*)/%(\d+)", site)
    if m is None:
        return None
    own = re.split(r"[{\[]", function, maxsplit=1)[0]
    return f"t{m.group(2)}" if m.group(1) == own else f"{m.group(1)}_t{m.group(2)}"


def _identifier(name: str) -> str:
    """A C identifier for a name: a leaf path's dots and primes become underscores
    (`θ.w` -> `θ_w`: C accepts Unicode letters in identifiers since C99)."""
    out = re.sub(r"\W", "_", name)
    return f"_{out}" if not out or out[0].isdigit() else out


__all__ = ["ALIGN", "ITEMSIZE", "FrameBuffer", "HostFrame", "host_frames", "let_names"]
