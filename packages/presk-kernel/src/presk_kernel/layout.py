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
import math
from collections.abc import Mapping

from presk_kernel.contract import recognize, unbanded, whole_folds
from presk_kernel.ir import (
    Affine,
    Const,
    For,
    Gemm,
    GemmStmt,
    Kernel,
    Layout,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    Tile,
    TwoPass,
    Var,
    plain,
    stored,
)

LANE_WIDTH = {"f64": 4, "f32": 8}
SPLIT_AT = 1 << 15  # elements: below this a launch is not worth dividing among threads
WORK_AT = 1 << 18
"""Points, a row's included (`body_points`), from which a launch of few long rows is split
among threads (`_row_split`): about 130 µs of a norm's rows at one thread here, nine times
an empty parallel region's fork and join (15 µs with GOMP_SPINCOUNT 0, tools/bench_threads.py
--regions; issue 26)."""
REGIONS_AT = 64
"""Parallel regions a launch may open for a row split under its block loops (`_row_split`)."""
BATCH_EVEN = 8
"""Batch points a thread from which a GEMM statement's threads share its batch loops though
they do not divide among them evenly (`batch_split`)."""
PACK_AT = 1 << 15
"""Multiply-adds from which a contraction's layout packs its operands (the generated GEMM)."""
ROW_KBLOCK = 16
"""Rows of B a block of a product of one row folds across all of B's columns (`row_layout`):
in a C harness (issue 26, b26), 384 × 1536 f32 read a strip of 64 columns at a time down
every row at 7.5 GB/s, in blocks of 16 rows with a hint for the next block's lines
(presk_cback.strip) at 16.7 (1536 × 384: 8.4 and 13.0); blocks of 8 to 32 within 10 %."""


class LayoutError(Exception):
    """A plan's layout that cannot execute its nest without changing a bit (E7040), or that
    names a site the entry does not launch (E7041)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def is_laid(k: Kernel) -> bool:
    """Whether the kernel's body is laid out (the `layout` pass's explicit statements)."""
    return any(isinstance(s, (Tile, For, GemmStmt, TwoPass)) for s in k.body)


def applies(layout: Layout) -> bool:
    """Whether a layout says more than a loop order (a body not laid out runs its order)."""
    return bool(
        layout.tiles
        or layout.lanes
        or layout.split
        or layout.gemm  # a pack: a GEMM's
        or layout.kblock
        or layout.passes == 2
    )


def fold_parts(k: Kernel) -> tuple[list[Loop], Reduce, Store] | None:
    """A contraction's nest as a k-block needs it: the outer perfect nest's loops, whose
    innermost body is one fold by fma over one variable and the store of its accumulator
    to an output of the compute type (a block's partial sum is stored and read back
    exactly), or None."""
    loops = parallel_loops(k)
    if not loops:
        return None
    body = loops[-1].body
    if len(body) != 2 or not isinstance(body[0], Reduce) or not isinstance(body[1], Store):
        return None
    r, st = body
    if r.op != "fma" or len(r.vars) != 1 or r.body or st.expr != Var(r.acc):
        return None
    if k.buffers[st.buf].dtype != k.compute:
        return None
    return loops, r, st


def _two_pass_body(k: Kernel, body: tuple) -> tuple | None:
    """A softmax row's three passes (max; the sum of the terms; each term over the sum,
    stored) in two passes over its input: the max; each term stored to the output as it is
    added; then the output divided by the sum in place. The same values in the same order:
    the terms are stored exactly (an output of the compute type) and read back. None when
    the body is not such a softmax."""
    for at in range(len(body) - 2):
        red_m, red_s, store_loop = body[at : at + 3]
        if not (isinstance(red_m, Reduce) and red_m.op == "max"):
            continue
        if not (isinstance(red_s, Reduce) and red_s.op == "add" and not red_s.body):
            continue
        if not (isinstance(store_loop, Loop) and len(store_loop.body) == 1):
            continue
        (st,) = store_loop.body
        if not isinstance(st, Store) or k.buffers[st.buf].dtype != k.compute:
            continue
        if len(red_s.vars) != 1 or red_s.vars[0][0] != store_loop.var:
            continue
        (term,) = red_s.terms
        y, s = st.expr, Var(red_s.acc)
        out = Load(st.buf, st.index)
        t = f"{red_s.acc}_term"
        if y == Op("div", (term, s)):
            new_y = Op("div", (out, s))
        elif (
            isinstance(term, Op)
            and term.op == "select"
            and isinstance(term.args[2], Const)
            and term.args[2].value == 0
            and y == Op("select", (term.args[0], Op("div", (term.args[1], s)), term.args[2]))
        ):
            new_y = Op("select", (term.args[0], Op("div", (out, s)), term.args[2]))
        else:
            continue
        summed = Reduce(
            red_s.acc,
            "add",
            red_s.vars,
            (Let(t, term), Store(st.buf, st.index, Var(t))),
            (Var(t),),
            red_s.dtype,
            stop=red_s.stop,  # a narrowed sum (presk_kernel.narrow) stores its prefix
        )
        if red_s.stop != store_loop.stop or store_loop.start is not None:
            continue  # the quotients must be the terms the sum stored
        normed = dataclasses.replace(store_loop, body=(Store(st.buf, st.index, new_y),))
        return (*body[:at], red_m, summed, normed, *body[at + 3 :])
    return None


def two_pass(k: Kernel) -> bool:
    """Whether `k` is a softmax that can run in two passes over its input (`_two_pass_body`)."""
    loops = parallel_loops(k)
    body = loops[-1].body if loops else plain(k.body)
    return _two_pass_body(k, body) is not None


def parallel_loops(k: Kernel) -> list[Loop]:
    """The loops of the outer perfect nest: independent iterations, outermost first (of
    the nest a laid-out body lays out)."""
    out: list[Loop] = []
    body = plain(k.body)
    while len(body) == 1 and isinstance(body[0], Loop):
        if body[0].start is not None or body[0].stop is not None:
            break  # a triangular loop is body, not layout (presk_kernel.contract.perfect_nest)
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
    layout = Layout(
        order=order,
        tiles=tiles,
        lanes=lanes,
        width=width if lanes else 1,
        split=split,
        threads=threads if split else 1,
    )
    if split is None and loops and threads > 1 and not loops[0].serial:
        layout = _row_split(k, layout, loops, threads) or layout
    return layout


def body_points(body: tuple) -> int:
    """The points a body below the parallel nest runs, at least 1: its loops' and folds'
    (their whole extents): a row's work (a softmax's or a norm's row, T or D terms a pass)."""
    n = 0
    for s in body:
        match s:
            case Loop():
                n += s.extent * body_points(s.body)
            case Reduce():
                n += math.prod(e for _, _, e in s.vars) * body_points(s.body)
            case _:
                n += 1
    return max(1, n)


def _row_split(k: Kernel, layout: Layout, loops: list[Loop], threads: int) -> Layout | None:
    """A launch of few rows but long ones (a softmax's B·H·T rows of T terms, a norm's B·T
    rows of D, a sum over B·T rows into D columns), below SPLIT_AT points but of at least
    WORK_AT points with its rows' (`body_points`): split among the threads at the outermost
    laid-out loop (`depth`) whose pieces share evenly (a multiple of `threads`, or at least
    BATCH_EVEN a thread), under block loops that open at most REGIONS_AT regions: a block
    loop before the outermost loop when its rows' work does not depend on it (no triangular
    bound reads it: a causal softmax's rows grow), else the outermost loop itself."""
    size = math.prod(lp.extent for lp in loops) * body_points(loops[-1].body)
    if size < WORK_AT:
        return None
    v = loops[0].var
    heads = _heads(k, dataclasses.replace(layout, split=v, threads=threads))
    last = next((i for i, h in enumerate(heads) if h[1] == v), None)
    if last is None:
        return None
    by_var = {lp.var: lp for lp in loops}
    tiles = _tiles(layout, by_var)
    bounded = _bounded(loops[-1].body)
    regions = 1
    for at, (kind, u) in enumerate(heads[: last + 1]):
        if regions > REGIONS_AT:
            return None
        ext = by_var[u].extent
        pieces = -(-ext // tiles[u]) if kind == "tile" else ext
        whole = kind != "tile" or ext % tiles[u] == 0
        even = (whole and pieces % threads == 0) or pieces >= BATCH_EVEN * threads
        fits = (kind == "tile" and u not in bounded) or at == last
        if pieces >= threads and even and fits:
            trial = dataclasses.replace(layout, split=u, threads=threads, depth=at)
            if check_layout(k, trial) is None:
                return trial
        regions *= pieces
    return None


def _bounded(body: tuple) -> set[str]:
    """The variables a triangular bound in `body` reads (its loops' start and stop, its
    folds' stop): the loops whose iterations do not all do the same work."""
    out: set[str] = set()
    for s in body:
        for b in (getattr(s, "start", None), getattr(s, "stop", None)):
            if b is not None and hasattr(b, "terms"):
                out.update(v for v, c in b.terms if c)
        if isinstance(s, Loop | Reduce):
            out |= _bounded(s.body)
    return out


def check_layout(k: Kernel, layout: Layout) -> str | None:
    """Why `layout` cannot execute `k` without changing a bit, or None."""
    if layout.parts:
        return _check_parts(k, layout)
    if layout.scratch:
        return "only a slice group keeps scratch buffers"
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
    if any(i >= len(k.inputs) for i in layout.pack) and stored(plain(k.body)) & set(layout.pack):
        return "only inputs are packed"  # (in a slice group, a member's: what it reads)
    if len(set(layout.pack)) != len(layout.pack):
        return "an input is packed once"
    if layout.pack and layout.gemm is None:
        return "only a GEMM statement packs its operands (a nest in loops reads them in place)"
    if layout.passes not in (0, 2, 3):
        return f"a softmax takes 2 or 3 passes, not {layout.passes}"
    if layout.passes == 2 and not two_pass(k):
        return "only a softmax whose output is of its compute type takes two passes"
    if layout.kblock < 0 or layout.depth < 0:
        return "a k-block and a split depth are not negative"
    if layout.kblock:
        parts = fold_parts(k)
        if parts is None:
            return (
                "only a contraction storing its fold to an output of its compute type is"
                " blocked over its summed axis"
            )
        if layout.gemm is not None:
            return "a GEMM statement blocks its sum itself"
        if layout.kblock >= parts[1].vars[0][2]:
            return f"a k-block of {layout.kblock} does not block a sum of {parts[1].vars[0][2]}"
    fold = fold_parts(k) if layout.kblock else None
    kvar = fold[1].vars[0][0] if fold else None
    if layout.blocks:
        if len(set(layout.blocks)) != len(layout.blocks):
            return "a block loop is ordered once"
        if set(layout.blocks) != {v for v, _ in layout.tiles} | ({kvar} if kvar else set()):
            return "the block order names the tiled loops and the summed axis's block"
    if layout.split is not None and layout.threads > 1 and layout.gemm is None:
        heads = _heads(k, layout)  # at depth 0 a split of another loop splits none (0.6.0's)
        if layout.depth >= max(1, len(heads)) or (
            layout.depth and heads[layout.depth][1] != layout.split
        ):
            return f"the loop at depth {layout.depth} is not `{layout.split}`"
        if heads and heads[layout.depth] == ("tile", kvar):
            return "the summed axis's block is not split among threads"
    if layout.gemm is not None:  # as the layout pass or the emission writes it (its epilogues)
        if layout.gemm != recognize(k, prologues=True):
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
    from presk_kernel.strips import shared, strip_width

    layout = k.layout if layout is None else layout
    if layout.parts:
        return _apply_parts(k, layout)
    if layout.gemm is None and layout.pack:
        layout = dataclasses.replace(layout, pack=())
    nest = plain(k.body)
    if layout.kblock:  # a fold in blocks folds them all: a contraction's zero terms too
        nest = whole_folds(nest)
    base = dataclasses.replace(k, body=nest, layout=layout)
    if layout.gemm is not None:
        threads = layout.threads if layout.split else 1
        batched = threads > 1 and batch_split(layout.gemm, layout.split, threads)
        return dataclasses.replace(base, body=(GemmStmt(layout.gemm, threads, nest, batched),))
    loops = perfect_nest(base)
    if not loops:
        if layout.passes == 2:
            two = _two_pass_body(base, nest)
            if two is not None:
                return dataclasses.replace(base, body=(TwoPass(two, nest),))
        return base
    by_var = {lp.var: lp for lp in loops}
    order = _order(layout, loops)
    tiles = _tiles(layout, by_var)
    heads = _heads(base, layout)
    body = loops[-1].body
    fold = fold_parts(base) if layout.kblock else None
    if fold is not None:  # the fold resumes each block from the partial sum stored
        _, r, st = fold
        kv, _, kn = r.vars[0]
        by_var[kv] = Loop(kv, r.vars[0][1], kn, ())
        tiles[kv] = layout.kblock
        blocked = dataclasses.replace(
            r, block=f"{kv}_t", size=layout.kblock, resume=Load(st.buf, st.index)
        )
        body = (blocked, st)
    two = _two_pass_body(base, body) if layout.passes == 2 else None
    if two is not None:
        body = (TwoPass(two, body),)
    plainly = two is not None  # no strips: two passes
    lanes_inner = layout.lanes == order[-1] and not plainly
    strip = strip_width(k, body, order[-1]) if lanes_inner else None
    for at in reversed(range(len(heads))):
        kind, v = heads[at]
        lp = by_var[v]
        split = at == layout.depth and layout.split == v and layout.threads > 1
        threads = layout.threads if split else 1
        if kind == "tile":
            body = (Tile(f"{v}_t", v, lp.extent, tiles[v], body, threads),)
            continue
        lanes = layout.width if layout.lanes == v else 0
        width, rows = strip if strip and at == len(heads) - 1 else (0, False)
        if width and not rows:
            width = shared(width, lp.extent, threads, lanes)
        tile = f"{v}_t" if v in tiles else None
        body = (
            For(v, lp.axis, lp.extent, body, tile, tiles.get(v, 0), threads, lanes, width, rows),
        )
    return dataclasses.replace(base, body=body)


def slice_nest(k: Kernel, layout: Layout) -> tuple[list[Loop], tuple] | None:
    """A slice group's nest (`Layout.parts`, presk_kernel.slices): the loops of the
    layout's order, outermost first, each parallel and whole and the one statement of the
    loop around it, and the statements the innermost holds, its scratch buffers accessed at
    their own points (`Layout.scratch`); None for another nest."""
    loops: list[Loop] = []
    body = plain(k.body)
    for v in layout.order:
        if len(body) != 1 or not isinstance(body[0], Loop) or body[0].var != v:
            return None
        lp = body[0]
        if lp.serial or lp.start is not None or lp.stop is not None:
            return None
        loops.append(lp)
        body = lp.body
    if layout.scratch:  # (kept one slice a point: at their own points again)
        body = _own_points(body, layout, loops)
        return None if body is None else (loops, body)
    return loops, body


def plain_nest(k: Kernel) -> tuple:
    """The nest `k`'s body lays out, as the kernel interpreter runs it: its plain body
    (presk_kernel.ir.plain), a slice group's scratch buffers accessed at their own points
    (`Layout.scratch`: the laid-out body keeps one slice for the points of some loops,
    which its interpreter runs one at a time)."""
    if not k.layout.scratch:
        return plain(k.body)
    loops, body = slice_nest(k, k.layout)
    for lp in reversed(loops):
        body = (dataclasses.replace(lp, body=body),)
    return body


def slice_part(k: Kernel, loops: list[Loop], s) -> Kernel:
    """One statement of a slice group as a kernel of its own: the group's loops around it
    alone (what its part lays out)."""
    body: tuple = (s,)
    for lp in reversed(loops):
        body = (dataclasses.replace(lp, body=body),)
    return dataclasses.replace(k, body=body, layout=Layout())


def unwrap_slices(laid: tuple, loops: list[Loop]) -> tuple | None:
    """A part's laid-out body inside the group's loops: a GEMM statement with those loops
    bound around it (`GemmStmt.bound`), or the statements inside the plain `For`s of the
    loops (no tile, threads, lanes or strip on them); None when the part lays them out
    otherwise."""
    r = len(loops)
    if len(laid) == 1 and isinstance(laid[0], GemmStmt):
        g = laid[0]
        if g.bound or g.batched or [v for v, _ in g.gemm.batch[:r]] != [lp.var for lp in loops]:
            return None
        nest = g.nest
        for _ in range(r):
            nest = nest[0].body
        return (dataclasses.replace(g, nest=nest, bound=r),)
    for lp in loops:
        if len(laid) != 1 or not isinstance(laid[0], For):
            return None
        f = laid[0]
        if (f.var, f.extent) != (lp.var, lp.extent) or f.tile or f.threads > 1:
            return None
        if f.lanes or f.strip:
            return None
        laid = f.body
    return laid


def _apply_parts(k: Kernel, layout: Layout) -> Kernel:
    """A slice group's layout applied (`apply_layout`): its loops, the first among its
    threads, around each statement laid out by its part."""
    nest = slice_nest(k, layout)
    if nest is None or len(nest[1]) != len(layout.parts):
        raise ValueError(f"`{k.name}`: not the nest of its slice group's layout")
    loops, stmts = nest
    body: list = []
    for s, part in zip(stmts, layout.parts, strict=True):
        inner = unwrap_slices(apply_layout(slice_part(k, loops, s), part).body, loops)
        if inner is None:
            raise ValueError(f"`{k.name}`: a part lays out the slice group's loops")
        body.extend(inner)
    out = tuple(body)
    if layout.scratch:
        out = _scratch(out, frozenset(layout.scratch), frozenset(scratch_loops(layout)))
    for at in reversed(range(len(loops))):
        lp = loops[at]
        threads = layout.threads if at == 0 and layout.split == lp.var else 1
        out = (For(lp.var, lp.axis, lp.extent, out, threads=threads),)
    return dataclasses.replace(k, body=out, layout=layout)


def scratch_loops(layout: Layout) -> list[str]:
    """The loops of a slice group whose points share a slice of its scratch buffers
    (`Layout.scratch`): all but the one split among threads."""
    kept = layout.split if layout.threads > 1 else None
    return [v for v in layout.order if v != kept]


def _scratch(body: tuple, bufs: frozenset[int], drop: frozenset[str]):
    """A slice group's laid-out statements with the accesses of its scratch buffers at the
    slice the kept loop's point owns: the terms of the `drop` loops' variables left out of
    their indices and of a GEMM statement's strides."""

    def affine(i):
        if not isinstance(i, Affine):
            return i
        return Affine(tuple((v, c) for v, c in i.terms if v not in drop), i.const)

    def gemm(g: Gemm) -> Gemm:
        ops = (g.a, g.b, g.c)
        strides = tuple(
            tuple((v, c) for v, c in st if ops[n] not in bufs or v not in drop)
            for n, st in enumerate(g.strides)
        )
        return dataclasses.replace(g, strides=strides)

    return _reindexed(body, bufs, lambda ix: tuple(affine(i) for i in ix), gemm)


def _reindexed(body, bufs, index, gemm=None):
    """`body` (statements, laid out or not) with the index of every load and store of a
    buffer in `bufs` rewritten by `index`, and every GEMM by `gemm` where given."""

    def node(x):
        if isinstance(x, tuple):
            return tuple(node(y) for y in x)
        if not dataclasses.is_dataclass(x) or isinstance(x, Affine):
            return x
        x = dataclasses.replace(
            x, **{f.name: node(getattr(x, f.name)) for f in dataclasses.fields(x)}
        )
        if isinstance(x, Load | Store) and x.buf in bufs:
            return dataclasses.replace(x, index=index(x.index))
        if gemm is not None and isinstance(x, Gemm):
            return gemm(x)
        return x

    return node(body)


def _own_points(stmts: tuple, layout: Layout, loops: list[Loop]) -> tuple | None:
    """A slice group's plain statements with its scratch buffers' accesses at their own
    point (the group's loops' variables first, as before `Layout.scratch` kept one slice
    for the points of the loops it leaves out, whose indices there are 0); None where an
    access is not of that form or another index names a group loop."""
    names = [lp.var for lp in loops]
    dropped = set(scratch_loops(layout))
    own = tuple(Affine.var(v) for v in names)
    bad = []

    def index(ix: tuple) -> tuple:
        head, rest = ix[: len(own)], ix[len(own) :]
        forms = [
            i == Affine.var(v) or (v in dropped and i == Affine((), 0))
            for i, v in zip(head, names, strict=False)
        ]
        if (
            len(head) < len(own)
            or not all(forms)
            or any(not isinstance(i, Affine) or set(names) & {v for v, _ in i.terms} for i in rest)
        ):
            bad.append(ix)
        return own + tuple(rest)

    out = _reindexed(stmts, frozenset(layout.scratch), index)
    return None if bad else out


def _scratch_problem(k: Kernel, layout: Layout, loops: list[Loop], stmts: tuple) -> str | None:
    """Why `layout.scratch` cannot keep its buffers as one slice a point, or None: each an
    output of the kernel, accessed by the group's statements at its own point only."""
    if len(set(layout.scratch)) != len(layout.scratch):
        return "a scratch buffer is named once"
    if any(not len(k.inputs) <= b < len(k.buffers) for b in layout.scratch):
        return "only an output of a slice group is kept as scratch"
    if _own_points(stmts, layout, loops) is None:
        return "a scratch buffer is read or written at another point's slice"
    return None


def _check_parts(k: Kernel, layout: Layout) -> str | None:
    """Why a slice group's layout (`Layout.parts`) cannot execute `k`, or None."""
    nest = slice_nest(k, dataclasses.replace(layout, scratch=()))
    if nest is None or not layout.order:
        return "a slice group's loops are the outer loops of its nest, each around the next alone"
    loops, stmts = nest
    if layout.scratch:
        why = _scratch_problem(k, layout, loops, stmts)
        if why is not None:
            return why
        stmts = _own_points(stmts, layout, loops)
    if len(stmts) != len(layout.parts):
        return "a slice group lays out each statement inside its loops by a part"
    own = (layout.tiles, layout.lanes, layout.pack, layout.gemm, layout.kblock, layout.passes)
    if any(own) or layout.blocks or layout.depth:
        return "a slice group's loops are neither tiled, in lanes nor packed"
    if layout.split not in (None, layout.order[0]) or layout.threads < 1:
        return "a slice group splits its first loop among threads"
    for n, (s, part) in enumerate(zip(stmts, layout.parts, strict=True)):
        why = part_problem(slice_part(k, loops, s), part, loops)
        if why is not None:
            return f"part {n}: {why}"
    return None


def part_problem(sub: Kernel, part: Layout, loops: list[Loop]) -> str | None:
    """Why `part` cannot lay out one statement of a slice group inside the group's `loops`
    (`sub`: `slice_part`, the loops around the statement alone), or None."""
    why = check_layout(sub, part)
    if why is not None:
        return why
    if part.parts or part.split or part.threads > 1:
        return "one thread within a slice, no group inside a group"
    if part.gemm is not None and (part.gemm.epilogue or part.gemm.prologue):
        return "a GEMM statement with an epilogue or prologue runs its own batch"
    if unwrap_slices(apply_layout(sub, part).body, loops) is None:
        return "it lays out the slice group's loops (a tile, lanes or threads)"
    return None


def _order(layout: Layout, loops: list[Loop]) -> list[str]:
    by_var = {lp.var for lp in loops}
    order = [v for v in layout.order if v in by_var] or [lp.var for lp in loops]
    return order + [lp.var for lp in loops if lp.var not in order]


def _tiles(layout: Layout, by_var: dict[str, Loop]) -> dict[str, int]:
    return {v: n for v, n in layout.tiles if v in by_var and n < by_var[v].extent}


def _heads(k: Kernel, layout: Layout) -> list[tuple[str, str]]:
    """The laid-out loops of `k` under `layout`, outermost first: ("tile", v) for a block
    loop (a tiled loop whose tile is shorter than it, the summed axis's k-block), then
    ("point", v) for each parallel loop in the layout's order; a split's depth counts here."""
    from presk_kernel.contract import perfect_nest

    loops = perfect_nest(dataclasses.replace(k, body=plain(k.body)))
    if not loops or layout.gemm is not None:
        return []
    by_var = {lp.var: lp for lp in loops}
    order = _order(layout, loops)
    tiled = set(_tiles(layout, by_var))
    fold = fold_parts(k) if layout.kblock else None
    kvar = [fold[1].vars[0][0]] if fold is not None else []
    tiled.update(kvar)
    blocks = [v for v in (layout.blocks or order + kvar) if v in tiled]
    return [("tile", v) for v in blocks] + [("point", v) for v in order]


def batch_split(g, split: str | None, threads: int) -> bool:
    """Whether a GEMM statement split on `split` among `threads` shares the points of its
    batch loops (each call of the GEMM whole on one thread, one parallel region a launch)
    rather than each call's columns (a region a call): when the split loop is its outermost
    batch loop and its batch points share evenly, a multiple of `threads` or at least
    BATCH_EVEN of them a thread. Measured (issue 26, tools/bench_threads.py): the attention's
    B·H products of 256×32 by 32×256 (and back) split by columns did 1.4–1.8× their one-thread
    CPU time on two threads and opened 96 regions a launch."""
    if not g.batch or split != g.batch[0][0] or threads < 2:
        return False
    points = 1
    for _, n in g.batch:
        points *= n
    return points >= threads and (points % threads == 0 or points >= BATCH_EVEN * threads)


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
    of at least PACK_AT multiply-adds, its operands packed and its GEMM statement — except
    a product of one row by a matrix read along its rows (`row_layout`)."""
    layout = default_layout(k, threads)
    g = recognize(k)
    if g is not None and g.rows * g.cols * g.depth >= PACK_AT:
        row = row_layout(k, g, threads)
        if row is not None:
            return row
        layout = dataclasses.replace(layout, pack=(g.a, g.b), gemm=g)
        if threads > 1 and not layout.split and g.batch:  # a narrowed product's nest stops
            v, points = g.batch[0][0], 1  # at its triangle: its batch loops are its nest's
            for _, e in g.batch:
                points *= e
            outer = parallel_loops(k)[:1]
            big = g.rows * g.cols * g.depth * points >= SPLIT_AT
            if points >= threads and big and [lp.var for lp in outer] == [v]:
                layout = dataclasses.replace(layout, split=v, threads=threads)
    return layout


def row_layout(k: Kernel, g, threads: int = 1) -> Layout | None:
    """The layout of a contraction of one row (m = 1: `presk serve`'s step, a vector times
    a matrix) whose matrix B is contiguous along n, or None for another contraction: no
    GEMM statement (a GEMM of one row packs all of B, a pass over it that a product reading
    each of its elements once does not need, and multiplies MR rows where one is real), but
    loops reading B where it lies, n in strips of lanes (presk_kernel.strips: one
    accumulator per lane, the fold over k down B's rows). Past ROW_KBLOCK rows, the fold in
    blocks of that many, each block across every strip, resumed from the partial sums in C
    (B read in long runs). Among `threads`, n in as many runs of whole strips (a tile each,
    the outermost loop), each thread's blocks of k within its own: one parallel region. The
    same fold per element, so the same bits (DESIGN §11)."""
    from presk_kernel.strips import WIDTH

    if g.rows != 1 or g.stride(1, g.n) != 1 or k.compute not in WIDTH:
        return None
    layout = default_layout(k, 1)
    if layout.lanes != g.n or not any(v == g.n for v, _ in layout.tiles):
        return None
    strip = WIDTH[k.compute]
    split = threads > 1 and g.cols > strip
    run = strip * -(-g.cols // (strip * threads)) if split else g.cols  # n's tile: a thread's
    tiles = tuple((v, run if v == g.n else n) for v, n in layout.tiles)
    layout = dataclasses.replace(layout, tiles=tiles)
    if g.depth > ROW_KBLOCK and fold_parts(k) is not None:
        blocks = (g.n, g.k, *(v for v, _ in tiles if v != g.n))
        layout = dataclasses.replace(layout, kblock=ROW_KBLOCK, blocks=blocks)
    if split:
        heads = _heads(k, layout)
        if heads and heads[0] == ("tile", g.n):
            layout = dataclasses.replace(layout, split=g.n, threads=threads, depth=0)
    return layout if check_layout(k, layout) is None else None


def nest_names(launches) -> list[str]:
    """The name of each launch's nest, as a plan names it: its site, or, where one site
    launches kernels that differ (a function's backward pass at two shapes), `site#2`,
    `site#3`, … for the second kernel there and on, in launch order (layouts aside)."""
    kinds: dict[str, list] = {}
    out = []
    for launch in launches:
        k = launch.kernel
        key = dataclasses.replace(k, body=plain(k.body), layout=Layout())
        seen = kinds.setdefault(k.site, [])
        if key not in seen:
            seen.append(key)
        at = seen.index(key)
        out.append(k.site if at == 0 else f"{k.site}#{at + 1}")
    return out


def lay_out(
    schedule: Schedule, threads: int = 1, plan: Mapping[str, Layout] | None = None
) -> Schedule:
    """The `layout` pass: every kernel with the layout a run compiles (`run_layout`), or the
    plan's for its site (a layout per nest, step 17's), which must be legal (`check_layout`:
    E7040) and name a launched site (E7041). A planned layout that packs a contraction's
    operands gets its GEMM statement; one that packs where no GEMM statement takes the
    operands (not a contraction, mixed operand types, one operand) is E7040."""
    plan = dict(plan or {})
    names = nest_names(schedule.launches)
    sites = set(names)
    unknown = sorted(set(plan) - sites)
    if unknown:
        raise LayoutError(
            "E7041", f"the plan lays out `{unknown[0]}`, a site the entry does not launch"
        )
    launches = []
    for launch, nest in zip(schedule.launches, names, strict=True):
        k = launch.kernel
        if nest in plan:
            layout = plan[nest]
            if layout.gemm is None:
                layout = with_gemm(k, layout)
            why = check_layout(k, layout)
            narrow = narrowed_gemm(k, layout) if why is not None else None
            if narrow is not None:  # the GEMM statement on the live triangle, as a run has it
                layout, why = narrow, None
            if why is not None and check_layout(unbanded(k), layout) is None:
                k, why = (
                    unbanded(k),
                    None,
                )  # a plan lays out the whole product (presk_cli.plans.nests_of)
            if why is not None:
                raise LayoutError(
                    "E7040", f"the plan's layout of `{k.name}` at {k.site} ({layout}): {why}"
                )
        else:
            layout = run_layout(k, threads)
        launches.append(dataclasses.replace(launch, kernel=apply_layout(k, layout)))
    from presk_kernel.spec import verified  # the verifier imports check_layout from here

    return verified(dataclasses.replace(schedule, launches=tuple(launches)), "layout")


def narrowed_gemm(k: Kernel, layout: Layout) -> Layout | None:
    """A plan's GEMM statement point (a layout of the whole product, `contract.unbanded`)
    as the narrowed kernel `k` runs it: the run's own GEMM statement of `k` (its live
    triangle, presk_kernel.narrow) on the point's workers, its columns split as the point
    splits them; None when `k` is not narrowed, the layout is no GEMM statement, or the run
    does not take one for `k`. The same fold in the same order over every live element:
    the same bits; the planned point computes no dead position."""
    if layout.gemm is None or unbanded(k) is k:
        return None
    base = run_layout(k, 1)
    if base.gemm is None:
        return None
    if layout.split is not None and layout.threads > 1:
        loops = parallel_loops(k)
        if not loops:
            return None
        base = dataclasses.replace(base, split=loops[0].var, threads=layout.threads)
    return base if check_layout(k, base) is None else None


def layout_space(k: Kernel, threads: int = 1) -> list[Layout]:
    """The layouts of the small space of `k` at `threads` workers, point 0 first
    (presk_kernel.layout_space.points: the spaces and their points)."""
    from presk_kernel.layout_space import points

    return [p.layout for p in points(k, "small", threads) if p.why is None]
