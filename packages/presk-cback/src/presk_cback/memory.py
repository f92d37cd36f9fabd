"""What one call of an entry needs in memory, from its schedule (`presk memory`, L59, L540).

Nothing is run or measured: the schedule the entry lowers to says which buffers exist, their
types at the run's realization, and which launches bind each. The parameters are the input
leaves of the entry's parameter trees; the inputs its other arguments; the outputs its
results. A temporary is live from the first launch that binds it to the last, both included
(the arena's rule, presk_cback.arena); the inputs and outputs are live throughout. The peak
is the most bytes live at one launch, each buffer counted at its exact size (elements ×
the item size, no alignment): what the program needs, not how an allocator rounds it.

Each temporary belongs to the call whose body first binds it (a callee's arguments and
results are its caller's, as a C function's are: presk_kernel.frames); a function's share
is the bytes of its calls' temporaries live at the peak, over the peak. Beside it, the two
arenas the backends allocate: the native backend's (temporaries sharing space, each at a
64-byte boundary, presk_cback.arena.plan, over the schedule it compiles: products with
their epilogues, rows fused, presk_kernel.passes.emitted) and the exported C program's
(each function's locals past a mark, released on return: step 18, presk_cback.export_c),
and what the latter would be if nothing were released.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from presk_kernel.calls import calls_in, entry_call
from presk_kernel.frames import host_frames
from presk_kernel.ir import Call, Schedule
from presk_kernel.passes import emitted

from presk_cback.arena import ITEMSIZE, live_ranges, plan


@dataclass(frozen=True, slots=True)
class FunctionMemory:
    """A Presk function the entry reaches: how many times it is called, the bytes of its
    first call's temporaries, and its calls' temporaries live at the peak."""

    function: str
    calls: int
    temporaries: int
    at_peak: int


@dataclass(frozen=True, slots=True)
class Memory:
    """One call of an entry in memory (the module's docstring)."""

    parameters: int
    state: int  # a training step's optimizer state (AdamW's moments)
    inputs: int
    outputs: int
    peak: int
    peak_launch: int  # the first launch at which the peak is live (0-based)
    launches: int
    functions: tuple[FunctionMemory, ...]
    native_arena: int
    c_arena: int
    c_unreleased: int
    rank: int  # the most axes of a buffer: a size is a product of as many lengths


def nbytes(schedule: Schedule, buf: int) -> int:
    b = schedule.buffers[buf]
    return math.prod(a.length for a in b.axes) * ITEMSIZE[b.dtype]


def c_arenas(schedule: Schedule, frames=None) -> tuple[int, int]:
    """The exported C program's arena (its inputs and outputs, each at a 64-byte boundary,
    then the entry function's need past its mark) and what it would be if no call released
    its locals."""
    frames = {f.function: f for f in (frames or host_frames(schedule))}
    body = entry_call(schedule)
    io = sum(-(-nbytes(schedule, b) // 64) * 64 for b in (*schedule.inputs, *schedule.outputs))
    unreleased = io + sum(frames[c.function].own for c in (body, *calls_in(body)))
    return io + frames[body.function].need, unreleased


def _owners(schedule: Schedule) -> dict[int, Call]:
    """Each temporary's call: the first (in the order the calls run) whose body binds it."""
    persistent = {*schedule.inputs, *schedule.outputs}
    owner: dict[int, Call] = {}
    for call in (entry_call(schedule), *calls_in(entry_call(schedule))):
        outside = {a.buf for a in (*call.args, *call.results)}
        for item in call.body:
            args = (
                (*item.args, *item.results)
                if isinstance(item, Call)
                else schedule.launches[item].args
            )
            for a in args:
                if a.buf not in outside and a.buf not in persistent:
                    owner.setdefault(a.buf, call)
    return owner


def memory(schedule: Schedule, trees: tuple[str, ...], state: tuple[str, ...] = ()) -> Memory:
    """One call of `schedule` in memory; `trees`: the names of the entry's parameter-tree
    arguments (their leaves, `θ.w`, are the parameters), `state` those of a training step's
    optimizer state (`m`, `v`)."""

    def leaf_of(buf: int, names: tuple[str, ...]) -> bool:
        name = schedule.buffers[buf].name
        return any(name == t or name.startswith(f"{t}.") for t in names)

    parameters = sum(nbytes(schedule, b) for b in schedule.inputs if leaf_of(b, trees))
    kept = sum(nbytes(schedule, b) for b in schedule.inputs if leaf_of(b, state))
    inputs = sum(nbytes(schedule, b) for b in schedule.inputs) - parameters - kept
    outputs = sum(nbytes(schedule, b) for b in schedule.outputs if b not in set(schedule.inputs))
    ranges = live_ranges(schedule)
    persistent = {*schedule.inputs, *schedule.outputs}
    temps = [b for b in ranges if b not in persistent]
    n = len(schedule.launches)
    live = [0] * max(n, 1)
    for b in temps:
        lo, hi = ranges[b]
        for i in range(lo, hi + 1):
            live[i] += nbytes(schedule, b)
    at = max(range(len(live)), key=lambda i: (live[i], -i))
    owners = _owners(schedule)
    first: dict[str, Call] = {}
    counts: dict[str, int] = {}
    for call in (entry_call(schedule), *calls_in(entry_call(schedule))):
        first.setdefault(call.function, call)
        counts[call.function] = counts.get(call.function, 0) + 1
    at_peak = dict.fromkeys(first, 0)
    own = dict.fromkeys(first, 0)
    for b in temps:
        call = owners.get(b)
        if call is None:
            continue
        if first[call.function] is call:
            own[call.function] += nbytes(schedule, b)
        lo, hi = ranges[b]
        if lo <= at <= hi:
            at_peak[call.function] += nbytes(schedule, b)
    functions = tuple(FunctionMemory(f, counts[f], own[f], at_peak[f]) for f in first)
    c_arena, unreleased = c_arenas(schedule)
    return Memory(
        parameters,
        kept,
        inputs,
        outputs,
        parameters + kept + inputs + outputs + live[at],
        at,
        n,
        functions,
        plan(emitted(schedule), share=True).size,  # the schedule the entry compiles
        c_arena,
        unreleased,
        max((len(b.axes) for b in schedule.buffers), default=0),
    )


__all__ = ["FunctionMemory", "Memory", "c_arenas", "memory", "nbytes"]
