"""Layouts: how a kernel's nest executes, and the default one (a heuristic, to be searched).

A layout never changes a bit (DESIGN §11): lanes run over a parallel loop only (never a
reduction's variable), threads split a parallel loop (each output element computed by one
thread), tiles and orders permute independent iterations, and a packed operand is a copy
(the GEMM statement's: a pack is only the GEMM's, a nest in loops reads its inputs in place).
`check_layout` refuses a layout that would break that; `default_layout` picks one from the
nest's shape alone, so that step 17's plans can search the same space (`layout_space`).

`lay_out(schedule, threads, plan)` is the `layout` pass: it gives every kernel the layout a
run compiles (the default at `threads`, or the plan's for its site), decides packing,
records a contraction's GEMM statement (presk_kernel.contract) on the layout, and applies
the layout to the kernel's body (`apply_layout`): explicit loops (`Tile`, `For` with its
threads, lanes and strips) or a `GemmStmt`, so that the executors (the laid-out kernel
interpreter, the C emitter) run what they are given and decide nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping

from presk_kernel.contract import recognize
from presk_kernel.ir import For, GemmStmt, Kernel, Layout, Loop, Reduce, Schedule, Tile, plain

LANE_WIDTH = {"f64": 4, "f32": 8}
SPLIT_AT = 1 << 15  # elements: below this a launch is not worth dividing among threads
PACK_AT = 1 << 15
"""Multiply-adds from which a contraction's layout packs its operands (the generated GEMM)."""


class LayoutError(Exception):
    """A plan's layout that cannot execute its nest without changing a bit (E7040), or that
    names a site the entry does not launch (E7041)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def is_laid(k: Kernel) -> bool:
    """Whether the kernel's body is laid out (the `layout` pass's explicit statements)."""
    return any(isinstance(s, (Tile, For, GemmStmt)) for s in k.body)


def applies(layout: Layout) -> bool:
    """Whether a layout says more than a loop order (a body not laid out runs its order)."""
    return bool(layout.tiles or layout.lanes or layout.split or layout.gemm)  # a pack: a GEMM's


def parallel_loops(k: Kernel) -> list[Loop]:
    """The loops of the outer perfect nest: independent iterations, outermost first (of
    the nest a laid-out body lays out)."""
    out: list[Loop] = []
    body = plain(k.body)
    while len(body) == 1 and isinstance(body[0], Loop):
        out.append(body[0])
        body = body[0].body
    return out


def _innermost_store_loop(k: Kernel) -> Loop | None:
    loops = parallel_loops(k)
    return loops[-1] if loops else None


def _serial(loops: list[Loop], var: str) -> bool:
    return any(lp.serial for lp in loops if lp.var == var)


def _reduces(k: Kernel) -> bool:
    def walk(body) -> bool:
        return any(isinstance(s, Reduce) or (isinstance(s, Loop) and walk(s.body)) for s in body)

    return walk(plain(k.body))


def natural_layout(k: Kernel) -> Layout:
    """The layout of a kernel before the `layout` pass: its loops in their order, nothing
    else (what a body not laid out runs)."""
    return Layout(order=tuple(lp.var for lp in parallel_loops(k)))


def default_layout(k: Kernel, threads: int = 1) -> Layout:
    """The natural order; lanes on the innermost parallel loop when it has a full vector;
    for a contraction, a register tile over its two innermost parallel loops; the outermost
    loop split among `threads` when the launch is large enough."""
    loops = parallel_loops(k)
    order = tuple(lp.var for lp in loops)
    width = LANE_WIDTH.get(k.compute, 1)
    inner = _innermost_store_loop(k)
    full = inner is not None and inner.extent >= width and not inner.serial
    lanes = inner.var if full else None
    tiles: tuple[tuple[str, int], ...] = ()
    if _reduces(k) and len(loops) >= 2:
        a, b = loops[-2], loops[-1]
        # a length-0 loop keeps a tile of 1 (it runs no iteration): a tile is positive
        tiles = ((a.var, max(1, min(4, a.extent))), (b.var, max(1, min(16, b.extent))))
        tiles = tuple((v, n) for v, n in tiles if not _serial(loops, v))  # keeps its order
    size = 1
    for lp in loops:
        size *= lp.extent
    big = loops and threads > 1 and size >= SPLIT_AT and not loops[0].serial
    split = loops[0].var if big else None
    return Layout(
        order=order,
        tiles=tiles,
        lanes=lanes,
        width=width if lanes else 1,
        split=split,
        threads=threads if split else 1,
    )


def check_layout(k: Kernel, layout: Layout) -> str | None:
    """Why `layout` cannot execute `k` without changing a bit, or None."""
    loops = {lp.var: lp for lp in parallel_loops(k)}
    if sorted(layout.order) != sorted(loops):
        return f"the order {layout.order} is not a permutation of the parallel loops"
    for v in [layout.lanes, layout.split, *(v for v, _ in layout.tiles)]:
        if v is not None and v not in loops:
            return f"`{v}` is not a parallel loop of the kernel (a reduction keeps its order)"
        if v is not None and loops[v].serial:
            return f"`{v}` is a serial loop (its iterations add in order): no lanes, split or tile"
    if any(n < 1 for _, n in layout.tiles) or layout.width < 1 or layout.threads < 1:
        return "tile sizes, lanes and threads are positive"
    if any(i >= len(k.inputs) for i in layout.pack):
        return "only inputs are packed"
    if len(set(layout.pack)) != len(layout.pack):
        return "an input is packed once"
    if layout.pack and layout.gemm is None:
        return "only a GEMM statement packs its operands (a nest in loops reads them in place)"
    if layout.gemm is not None:
        if layout.gemm != recognize(k):
            return "the GEMM statement is not the kernel's contraction"
        if not {layout.gemm.a, layout.gemm.b} <= set(layout.pack):
            return "a GEMM statement reads its two operands packed"
    return None


def apply_layout(k: Kernel, layout: Layout | None = None) -> Kernel:
    """`k` with `layout` (its own by default) applied to its body, as the emitter renders it
    and the laid-out interpreter runs it: a GEMM statement over the nest where the layout
    has one; else the outer perfect nest's loops in the layout's order, each tiled loop a
    `Tile` (outermost, in order) around its point loop (`For` within the tile), the
    outermost loop's threads when it is the split one, lanes on the lanes loop, and, when
    that loop is the innermost and its body folds, the strips it is written in
    (presk_kernel.strips). A pack without a GEMM statement is dropped (the GEMM packs its
    operands; loops read them in place, so it changes no statement). Legal layouts only
    (`check_layout`)."""
    from presk_kernel.contract import perfect_nest
    from presk_kernel.strips import strip_width

    layout = k.layout if layout is None else layout
    if layout.gemm is None and layout.pack:
        layout = dataclasses.replace(layout, pack=())
    nest = plain(k.body)
    base = dataclasses.replace(k, body=nest, layout=layout)
    if layout.gemm is not None:
        threads = layout.threads if layout.split else 1
        return dataclasses.replace(base, body=(GemmStmt(layout.gemm, threads, nest),))
    loops = perfect_nest(base)
    if not loops:
        return base
    by_var = {lp.var: lp for lp in loops}
    order = [v for v in layout.order if v in by_var] or [lp.var for lp in loops]
    order += [lp.var for lp in loops if lp.var not in order]
    tiles = {v: n for v, n in layout.tiles if v in by_var and n < by_var[v].extent}
    heads = [("tile", v) for v in order if v in tiles] + [("point", v) for v in order]
    body = loops[-1].body
    strip = strip_width(k, body, order[-1]) if layout.lanes == order[-1] else None
    for at in reversed(range(len(heads))):
        kind, v = heads[at]
        lp = by_var[v]
        split = at == 0 and layout.split == v and layout.threads > 1  # threads on the outermost
        threads = layout.threads if split else 1
        if kind == "tile":
            body = (Tile(f"{v}_t", v, lp.extent, tiles[v], body, threads),)
            continue
        lanes = layout.width if layout.lanes == v else 0
        width, rows = strip if strip and at == len(heads) - 1 else (0, False)
        tile = f"{v}_t" if v in tiles else None
        body = (
            For(v, lp.axis, lp.extent, body, tile, tiles.get(v, 0), threads, lanes, width, rows),
        )
    return dataclasses.replace(base, body=body)


def with_gemm(k: Kernel, layout: Layout) -> Layout:
    """`layout` with the kernel's GEMM statement when it packs the operands of a contraction
    (the generated GEMM reads them as panels), without one otherwise (a pack then left for
    `check_layout` to refuse: only a GEMM statement packs)."""
    g = recognize(k)
    if g is not None and {g.a, g.b} <= set(layout.pack):
        return dataclasses.replace(layout, gemm=g)
    return dataclasses.replace(layout, gemm=None)


def run_layout(k: Kernel, threads: int = 1) -> Layout:
    """The layout a run compiles for `k`: the default at `threads`, and, for a contraction
    of at least PACK_AT multiply-adds, its operands packed and its GEMM statement."""
    layout = default_layout(k, threads)
    g = recognize(k)
    if g is not None and g.rows * g.cols * g.depth >= PACK_AT:
        layout = dataclasses.replace(layout, pack=(g.a, g.b), gemm=g)
    return layout


def lay_out(
    schedule: Schedule, threads: int = 1, plan: Mapping[str, Layout] | None = None
) -> Schedule:
    """The `layout` pass: every kernel with the layout a run compiles (`run_layout`), or the
    plan's for its site (a layout per nest, step 17's), which must be legal (`check_layout`:
    E7040) and name a launched site (E7041). A planned layout that packs a contraction's
    operands gets its GEMM statement; one that packs where no GEMM statement takes the
    operands (not a contraction, mixed operand types, one operand) is E7040."""
    plan = dict(plan or {})
    sites = {launch.kernel.site for launch in schedule.launches}
    unknown = sorted(set(plan) - sites)
    if unknown:
        raise LayoutError(
            "E7041", f"the plan lays out `{unknown[0]}`, a site the entry does not launch"
        )
    launches = []
    for launch in schedule.launches:
        k = launch.kernel
        if k.site in plan:
            layout = plan[k.site]
            if layout.gemm is None:
                layout = with_gemm(k, layout)
            why = check_layout(k, layout)
            if why is not None:
                raise LayoutError(
                    "E7040", f"the plan's layout of `{k.name}` at {k.site} ({layout}): {why}"
                )
        else:
            layout = run_layout(k, threads)
        launches.append(dataclasses.replace(launch, kernel=apply_layout(k, layout)))
    from presk_kernel.spec import verified  # the verifier imports check_layout from here

    return verified(dataclasses.replace(schedule, launches=tuple(launches)), "layout")


def layout_space(k: Kernel, threads: int = 1) -> list[Layout]:
    """Every point of a small space: loop orders, lanes on or off, splits over threads."""
    loops = parallel_loops(k)
    width = LANE_WIDTH.get(k.compute, 1)
    out = []
    for order in itertools.permutations([lp.var for lp in loops]):
        inner = order[-1] if order and not _serial(loops, order[-1]) else None
        outer = order[0] if order and threads > 1 and not _serial(loops, order[0]) else None
        for lanes in dict.fromkeys((None, inner)):
            for split in dict.fromkeys((None, outer)):
                out.append(
                    Layout(
                        order=order,
                        lanes=lanes,
                        width=width if lanes else 1,
                        split=split,
                        threads=threads if split else 1,
                    )
                )
    return out
