"""The arena: where each host buffer of an entry lives, and where its zeroing goes.

The entry's inputs and outputs (θ, the optimizer's state, the batch, everything the host
writes before a call or reads after it, and everything that persists from one call to the
next) each keep their own space at the start of the arena, in the schedule's order.

A temporary is live from the first launch that binds it to the last (in launch order,
both included: a buffer read by a later launch of the step lives until that read, an
accumulator written over several launches across all of them). Temporaries whose live
ranges do not overlap share space: largest first (then by first launch, then by id), each
takes the lowest 64-byte aligned offset above the persistent buffers where it overlaps no
temporary already placed whose range overlaps its own (first fit over the free intervals).

A temporary that must start at zero (`presk_kernel.written.zeroed`) is zeroed just before
its first launch, not at the entry's start: a buffer that shared its space may have left
bytes there. The inputs and outputs that must start at zero are zeroed at the start.

`PRESK_ARENA_SHARE=0` in the environment (or `share=False`) gives every used buffer its own
offset and zeroes them all at the start, as before sharing (for debugging).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from presk_kernel.ir import Schedule
from presk_kernel.written import used, zeroed

ITEMSIZE = {"f64": 8, "f32": 4, "bf16": 2, "i64": 8, "bool": 1, "i8": 1}
ALIGN = 64


@dataclass(frozen=True, slots=True)
class Arena:
    """An entry's arena: `offsets[buf]` (0 for an unused buffer), its size in bytes, and
    the zeroing: `zero_first`, the buffers zeroed at the entry's start, and `zero_at[i]`,
    those zeroed just before launch i (each list in the schedule's buffer order)."""

    offsets: dict[int, int]
    size: int
    zero_first: tuple[int, ...]
    zero_at: dict[int, tuple[int, ...]]


def sharing() -> bool:
    """Whether temporaries share space: not when `PRESK_ARENA_SHARE` is `0`."""
    return os.environ.get("PRESK_ARENA_SHARE", "1").strip() != "0"


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def live_ranges(schedule: Schedule) -> dict[int, tuple[int, int]]:
    """Each bound host buffer's first and last launch (both included)."""
    out: dict[int, tuple[int, int]] = {}
    for i, launch in enumerate(schedule.launches):
        for arg in launch.args:
            first = out.get(arg.buf, (i, i))[0]
            out[arg.buf] = (first, i)
    return out


def _first_fit(size: int, taken: list[tuple[int, int]], base: int) -> int:
    """The lowest offset from `base` where `size` bytes overlap none of `taken` (start, end)."""
    at = base
    for start, end in sorted(taken):
        if start >= at + size:
            break
        at = max(at, end)
    return at


def plan(schedule: Schedule, share: bool | None = None) -> Arena:
    """The arena of `schedule` (module docstring); `share=None` reads the environment."""
    share = sharing() if share is None else share
    live = used(schedule)
    size = {
        b.id: _aligned(math.prod(a.length for a in b.axes) * ITEMSIZE[b.dtype])
        for b in schedule.buffers
        if b.id in live
    }
    persistent = set(schedule.inputs) | set(schedule.outputs)
    ranges = live_ranges(schedule)
    offsets = {b.id: 0 for b in schedule.buffers}
    at = 0
    for b in schedule.buffers:
        if b.id in live and (b.id in persistent or not share):
            offsets[b.id] = at
            at += size[b.id]
    zero = zeroed(schedule)
    if not share:
        return Arena(offsets, max(at, ALIGN), tuple(zero), {})
    base, top = at, at
    temps = [b.id for b in schedule.buffers if b.id in live and b.id not in persistent]
    temps.sort(key=lambda t: (-size[t], ranges[t][0], t))
    placed: list[tuple[int, int, int, int]] = []  # (first, last, start, end)
    for t in temps:
        lo, hi = ranges[t]
        taken = [(s, e) for f, la, s, e in placed if f <= hi and lo <= la]
        offsets[t] = _first_fit(size[t], taken, base)
        placed.append((lo, hi, offsets[t], offsets[t] + size[t]))
        top = max(top, offsets[t] + size[t])
    zero_at: dict[int, list[int]] = {}
    first = []
    for buf in zero:
        if buf in persistent:
            first.append(buf)
        else:
            zero_at.setdefault(ranges[buf][0], []).append(buf)
    return Arena(offsets, max(top, ALIGN), tuple(first), {i: tuple(z) for i, z in zero_at.items()})


def arena_layout(schedule: Schedule, share: bool | None = None) -> tuple[dict[int, int], int]:
    """Each host buffer's byte offset in the arena (64-byte aligned), and the arena's size.
    A buffer the entry never uses (`written.used`) takes no space (its offset is 0)."""
    arena = plan(schedule, share)
    return arena.offsets, arena.size
