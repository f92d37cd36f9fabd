"""Slice fusion at emission (issue 26): the launches that run over the same batch points —
an attention's products, its softmax and the copies of its heads, each over a (batch,
head) — become one kernel whose outer loops run over those points, each point's
launches in order, while that point's slices (its scores, its weights, its head of the
queries) are in cache.

Unfused, the scores of the course GPT's attention (B·H·T·T, 25 MB in f32) go to memory
between the product that makes them, the softmax that reads them and writes the weights,
and the product that reads those: each a pass through L3. A point's slice is 256 KB:
it stays in L2 from one launch to the next. A group here (`slice_groups`) is:

- a seed: a GEMM statement over batch loops (its nest's outer loops: the slices), without
  an epilogue or a prologue (their callbacks run its batch themselves);
- the launches before and after it, each moved to the group's place past at most AHEAD
  launches it does not touch (presk_kernel.rows's rule), that run the same loops outermost
  (the same extents) around one statement: another such GEMM statement, or a nest the
  layout can lay out inside those loops (no k-block: its tiles would run outside them);
- every buffer that two members touch, one of them writing it, accessed at its own slice
  only (its first indices the loops' variables: presk_kernel.rows.Member), under one view;
- at a place among the members' where every member can run: the launches between it and
  the place touch nothing it writes and write nothing it touches.

Each member computes, at each point, what it computed there, in the same order within the
point; two members meet only at the same point, where they run in their order. So every
element is the same fold of the same terms in the same type: the same bits (DESIGN §11).
The kernel's layout is a slice group's (`Layout.parts`, presk_kernel.layout): the loops,
the first among the members' threads, around each member laid out inside them — a GEMM
statement called at each point (`GemmStmt.bound`), a nest at its own lanes and strips.
It runs after row fusion (presk_kernel.passes.emitted), followed by the PSK-Kernel
verifier (`slice fusion`).

    compiled = fuse_slices(laid)   # laid: an emitted schedule (row kernels fused)
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from presk_kernel.calls import passed
from presk_kernel.contract import recognize
from presk_kernel.ir import (
    Affine,
    Buffer,
    GemmStmt,
    Kernel,
    Launch,
    Layout,
    Loop,
    Schedule,
    accesses,
    plain,
)
from presk_kernel.layout import (
    apply_layout,
    check_layout,
    default_layout,
    parallel_loops,
    part_problem,
    slice_nest,
    slice_part,
)
from presk_kernel.rows import (
    Member,
    compatible,
    fused_schedule,
    independent,
    merge_members,
    renumbered,
)
from presk_kernel.spec import verified

AHEAD = 4  # launches between two members (not members, moved past)


def fuse_slices(schedule: Schedule, scratch: bool = True) -> Schedule:
    """`schedule` (emitted) with each slice group (`slice_groups`) one kernel at its place,
    its own temporaries kept as scratch (`with_scratch`; `scratch=False`: not); unchanged
    where no group forms."""
    fused = []
    for at, group, r in slice_groups(schedule):
        launch = slice_kernel([schedule.launches[i] for i in group], r)
        if launch is not None:
            fused.append((at, group, launch))
    if not fused:
        return schedule
    fused_all = fused_schedule(schedule, fused)
    return verified(with_scratch(fused_all) if scratch else fused_all, "slice fusion")


def with_scratch(schedule: Schedule) -> Schedule:
    """`schedule` with each slice group's own temporaries kept as scratch (`Layout.scratch`:
    one slice for each point of its split loop, one in all at one thread, in cache from
    one point to the next): the outputs of the group that no other launch binds, that the
    entry neither takes nor returns nor passes to or from a host function, and that need
    not start at zero (presk_kernel.written.zeroed: every position a member reads was
    stored before at the same point, or is read only under a select that drops it), each
    access of them at its own point (its first indices the group's loops'). Each
    point writes its slice before it reads it, so what it reads is what it wrote: the same
    bits, the buffer's final contents aside, which nothing reads."""
    from presk_kernel.written import zeroed  # (it reads a group as its members: unfused)

    bound = Counter(a.buf for lc in schedule.launches for a in lc.args)
    fixed = {*schedule.inputs, *schedule.outputs, *zeroed(schedule), *passed(schedule.body)}
    temp = {b.id for b in schedule.buffers if b.role == "temp"}
    launches = list(schedule.launches)
    for n, lc in enumerate(launches):
        k = lc.kernel
        if not k.layout.parts:
            continue
        loops, stmts = slice_nest(k, k.layout)
        own = tuple(Affine.var(lp.var) for lp in loops)
        elsewhere = {b for b, index, _ in accesses(stmts) if tuple(index[: len(own)]) != own}
        mine = tuple(
            i
            for i, a in enumerate(lc.args)
            if i >= len(k.inputs)
            and i not in elsewhere
            and a.offset == 0
            and bound[a.buf] == 1
            and a.buf in temp
            and a.buf not in fixed
        )
        layout = dataclasses.replace(k.layout, scratch=mine)
        if mine and check_layout(k, layout) is None:
            launches[n] = Launch(apply_layout(k, layout), lc.args)
    return dataclasses.replace(schedule, launches=tuple(launches))


# ---- which launches form a group -----------------------------------------------------


def _gemm(lc: Launch):
    """The launch's GEMM statement when it can seed or join a group: a GEMM over batch
    loops, its own (no loops around it), without an epilogue or a prologue."""
    body = lc.kernel.body
    if len(body) != 1 or not isinstance(body[0], GemmStmt) or body[0].bound:
        return None
    g = body[0].gemm
    if not g.batch or g.epilogue or any(t is not None for t in g.prologue):
        return None
    return g


def _nest(lc: Launch, extents: tuple[int, ...]) -> tuple[list[Loop], tuple] | None:
    """The launch's plain nest as a member over loops of `extents`: those loops, parallel
    and whole, outermost, around one statement; None when it is no member."""
    k = lc.kernel
    body, loops = plain(k.body), []
    while len(loops) < len(extents) and len(body) == 1 and isinstance(body[0], Loop):
        lp = body[0]
        if lp.serial or lp.start is not None or lp.stop is not None:
            return None
        loops.append(lp)
        body = lp.body
    if tuple(lp.extent for lp in loops) != extents or len(body) != 1:
        return None
    if k.layout.gemm is not None and _gemm(lc) is None:
        return None
    if k.layout.kblock or k.layout.parts:
        return None
    if _part(slice_part(k, loops, body[0]), len(loops), k.layout) is None:
        return None
    return loops, body


def _loops(lp: Loop, r: int) -> list[Loop]:
    """`lp` and the loops below it, each the one statement of the one before, r in all."""
    out = [lp]
    while len(out) < r:
        out.append(out[-1].body[0])
    return out


def _member(lc: Launch, extents: tuple[int, ...]) -> Member | None:
    nest = _nest(lc, extents)
    return None if nest is None else Member(lc, nest[0], len(extents))


def _place(launches, at: list[int], members: list[Member]) -> int | None:
    """The position among `at` where every member can run (the launches between a member
    and it, not members, independent of it), or None."""
    mine = set(at)
    for p in reversed(at):
        ok = True
        for i, m in zip(at, members, strict=True):
            lo, hi = (i, p) if i < p else (p, i)
            between = [launches[j] for j in range(lo + 1, hi) if j not in mine]
            if not all(independent(a, m) for a in between):
                ok = False
                break
        if ok:
            return p
    return None


def slice_groups(schedule: Schedule) -> list[tuple[int, list[int], int]]:
    """The groups `fuse_slices` fuses, each (the position it runs at, its launches'
    positions in order, the number of its loops): around each seed (a GEMM over batch
    loops), the members before and after it (the module's rules), no more than AHEAD
    launches apart; where no place lets them all run, the last ones dropped."""
    launches = schedule.launches
    taken: set[int] = set()
    groups: list[tuple[int, list[int], int]] = []
    for i, lc in enumerate(launches):
        g = None if i in taken else _gemm(lc)
        if g is None:
            continue
        extents = tuple(n for _, n in g.batch)
        first = _member(lc, extents)
        if first is None:
            continue
        found = {i: first}
        for step in (-1, 1):  # the members before it, then after it
            gap, j = 0, i + step
            while 0 <= j < len(launches) and gap <= AHEAD and j not in taken:
                m = _member(launches[j], extents)
                if m is not None and compatible(list(found.values()), m):
                    found[j], gap = m, 0
                else:
                    gap += 1
                j += step
        at = sorted(found)
        while len(at) > 1:
            place = _place(launches, at, [found[j] for j in at])
            if place is not None:
                groups.append((place, at, len(extents)))
                taken.update(at)
                break
            at.pop(-1 if at[-1] != i else 0)
    return groups


# ---- one kernel of a group ------------------------------------------------------------


def slice_kernel(group: list[Launch], r: int) -> Launch | None:
    """The launches of a slice group as one kernel: the first's r loops around each one's
    statement inside them (names renamed apart, buffers renumbered: presk_kernel.rows
    .merge_members), laid out as a slice group (`Layout.parts`): the first loop among the
    members' threads, each member inside the loops at one thread — a GEMM statement at the
    kernel's contraction, a nest at its lanes and strips (its default layout without the
    tiles, which would run outside the loops). None where the first loop has fewer points
    than the members' threads (they keep their own splits)."""
    extents = tuple(lp.extent for lp in _loops(plain(group[0].kernel.body)[0], r))
    nests = [_nest(lc, extents) for lc in group]
    ins, outs, outer, bodies, _ = merge_members(group, nests, r)
    args = tuple(a for a, _ in ins + outs)
    bufs = [Buffer(n, b.dtype, b.axes) for n, (_, b) in enumerate(ins + outs)]
    stmts = tuple(s for body in bodies for s in body)
    nest: tuple = stmts
    for lp in reversed(outer):
        nest = (dataclasses.replace(lp, body=nest),)
    last = group[-1].kernel
    k = Kernel(
        f"slices of {len(group)} kernels",
        last.site,
        tuple(bufs[: len(ins)]),
        tuple(bufs[len(ins) :]),
        nest,
        last.compute,
        steps=tuple(s for lc in group for s in (lc.kernel.steps or (lc.kernel.site,))),
    )
    parts = [
        _part(slice_part(k, list(outer), s), r, lc.kernel.layout)
        for lc, s in zip(group, stmts, strict=True)
    ]
    threads = max(lc.kernel.layout.threads for lc in group)
    if threads > outer[0].extent:  # (a batch of one at two threads: the members' own split)
        return None
    layout = Layout(
        order=tuple(lp.var for lp in outer),
        split=outer[0].var if threads > 1 else None,
        threads=threads if threads > 1 else 1,
        parts=tuple(parts),
    )
    if None in parts or check_layout(k, layout) is not None:
        return None
    return Launch(apply_layout(k, layout), args)


def _part(sub: Kernel, r: int, own: Layout) -> Layout | None:
    """The layout of a member inside a group's r loops (`sub`: the loops around it alone;
    `own`: its layout unfused): a GEMM statement where it had one, else the default layout
    at one thread without tiles, with its own passes; None when that layout lays out the
    group's loops (lanes on one of them) or is not legal for the member."""
    layout = dataclasses.replace(default_layout(sub, 1), tiles=(), passes=own.passes)
    if own.gemm is not None:
        g = recognize(sub, prologues=True)
        if g is None:
            return None
        layout = dataclasses.replace(layout, pack=(g.a, g.b), gemm=g)
    return None if part_problem(sub, layout, parallel_loops(sub)[:r]) else layout


# ---- a group seen as its members -------------------------------------------------------


def unfused(schedule: Schedule) -> tuple[Schedule, set[int]]:
    """`schedule` with each slice group's launch as its members' launches, in order (what
    an analysis of launches in order sees: presk_kernel.written's zeroing), and the
    positions of those: each member the group's loops around its statement, not laid out,
    over the buffers it touches (an input where it only reads one, else an output); a GEMM
    statement over no term stores nothing, as unfused."""
    launches: list[Launch] = []
    members: set[int] = set()
    for lc in schedule.launches:
        k = lc.kernel
        if not k.layout.parts:
            launches.append(lc)
            continue
        loops, stmts = slice_nest(k, k.layout)
        for s, part in zip(stmts, k.layout.parts, strict=True):
            if part.gemm is not None and part.gemm.depth == 0:
                continue  # stores nothing
            members.add(len(launches))
            launches.append(_alone(k, lc, loops, s))
    return dataclasses.replace(schedule, launches=tuple(launches)), members


def _alone(k: Kernel, lc: Launch, loops: list[Loop], s) -> Launch:
    """One statement of a slice group as the launch of a kernel of its own buffers."""
    found = list(accesses((s,)))
    stored = sorted({b for b, _, store in found if store})
    read = sorted({b for b, _, store in found if not store} - set(stored))
    numbers = {b: n for n, b in enumerate(read + stored)}
    bufs = [dataclasses.replace(k.buffers[b], id=numbers[b]) for b in read + stored]
    body: tuple = (renumbered(s, numbers),)
    for lp in reversed(loops):
        body = (dataclasses.replace(lp, body=body),)
    alone = Kernel(
        k.name, k.site, tuple(bufs[: len(read)]), tuple(bufs[len(read) :]), body, k.compute
    )
    return Launch(alone, tuple(lc.args[b] for b in read + stored))


__all__ = ["AHEAD", "fuse_slices", "slice_groups", "slice_kernel", "unfused", "with_scratch"]
