"""Layout spaces (step 17): every way a nest can be laid out, as an integer set in islpy.

A nest's layout is a handful of decisions (L1007, L1036, L1048):

- `tile` [m, n]: a register tile of m × n over a contraction's two innermost parallel loops
  (its rows and columns);
- `kblock`: none, or a block over the summed axis (the fold resumes each block from the
  partial sum the previous one stored: one accumulator running through the blocks in order);
- `order`: the order of the block loops: IJ or JI without a k-block, one of the six orders
  of IJK with one;
- `lanes`: 1, or the full vector on the innermost parallel loop (never the summed axis),
  when its extent holds a full vector: a decision of a contraction's register tile (L1007
  names lanes among the two eins' decisions; an elementwise nest's and a softmax's spaces
  are their splits and passes, 7 and 14 points on the spec's twenty workers, "lanes 1");
- `split` (depth, workers): the laid-out loop at that depth (block loops first) divided
  among workers ∈ {half, all} of the machine's (one worker: `split none`);
- `pack`: the operands copied to panels (the generated GEMM's statement), only where an
  operand is read across the lanes (its index does not run along the lanes' loop);
- `passes`: 2 or 3 for a softmax (two: each term stored as it is added, then divided in
  place; the same bits, presk_kernel.layout._two_pass_body).

Each kind of nest (contraction, elementwise, reduction, softmax) has its decisions and the
constraints between them as an isl set over integer coordinates, whose parameters are the
nest's extents, its vector width and worker counts; its points are enumerated from the
set (`isl.Set.foreach_point`), mapped to a `Layout`, and ordered. Point 0 is the default
layout on one worker without lanes (L1078), the reference every point's bits are compared
with, first in every space.

Spaces (`--space`): `full` (the plan's default), `small` (a daily subset: tiles of 1 or 4
rows and 4 or 16 columns, no k-block, split none or at depth 0 over half or all the
workers: 3 and 6 points for the spec's elementwise nest and softmax on twenty), `calib`
(the GEMM calibration's, L1036: five register tiles [1, 4], [2, 8], [4, 4], [4, 8],
[4, 16]; IJ and JI; the six IJK orders with a block of 128 and IJK, JIK with 32; lanes 1 or
the full vector; workers 1, half, all on the outermost parallel loop (depth 0, or 1 under a
k-block loop); no pack). The calib space is not cut to
the shapes: a point ill-formed at given shapes (a tile or a block longer than its loop,
lanes without a full vector) is kept with the reason (`Point.why`), counted, not run.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import islpy as isl

from presk_kernel.contract import linear, recognize
from presk_kernel.ir import Kernel, Layout, Load, Reduce
from presk_kernel.layout import (
    LANE_WIDTH,
    _heads,
    check_layout,
    fold_parts,
    parallel_loops,
    run_layout,
    two_pass,
    with_gemm,
)

SPACES = ("full", "small", "calib")
ORDERS = ("IJ", "JI", "IJK", "IKJ", "JIK", "JKI", "KIJ", "KJI")
TILE_M = (1, 2, 4)
TILE_N = (1, 2, 4, 8, 16)
KBLOCKS = (32, 128)
DEPTHS = 3  # a split at the depths 0, 1, 2 of the laid-out loops
CALIB_TILES = ((1, 4), (2, 8), (4, 4), (4, 8), (4, 16))
CALIB_ORDERS = (("IJ", 0), ("JI", 0)) + tuple((o, 128) for o in ORDERS[2:])
CALIB_ORDERS += (("IJK", 32), ("JIK", 32))


class SpaceError(ValueError):
    """A space that is not one of SPACES, or a point outside its space (E7110)."""

    code = "E7110"


@dataclass(frozen=True)
class Point:
    """One layout of a nest: its `Layout`, its decisions ({tile, kblock, order, lanes, split,
    pack, passes}: what the nest's kind decides, the rest None), its text in the spec's words
    (R17.13), and why it cannot run at the nest's shapes (None: it can)."""

    layout: Layout
    decisions: dict = field(hash=False, compare=False)
    text: str
    why: str | None = None


def kind(k: Kernel) -> str:
    """contraction, softmax, reduction or elementwise."""
    loops = parallel_loops(k)
    body = loops[-1].body if loops else k.body
    if (
        fold_parts(k) is not None
        or recognize(k) is not None
        or (len(loops) >= 2 and any(isinstance(s, Reduce) and s.op == "fma" for s in body))
    ):  # a narrowed product (its columns a bounded loop, issue 26) is recognised a GEMM
        return "contraction"
    if any(isinstance(s, Reduce) and s.op == "max" for s in body) and any(
        isinstance(s, Reduce) and s.op == "add" for s in body
    ):
        return "softmax"
    if _has_reduce(body):
        return "reduction"
    return "elementwise"


def _has_reduce(body) -> bool:
    return any(isinstance(s, Reduce) or (hasattr(s, "body") and _has_reduce(s.body)) for s in body)


def workers_options(workers: int) -> list[int]:
    """The worker counts of a split: half the machine and all of it, each more than one,
    once each (on two workers, half is one: no split)."""
    return sorted({w for w in (workers // 2, workers) if w > 1})


def text(kind_: str, d: dict) -> str:
    """A point's decisions in the spec's words (R17.13)."""
    split = "split none" if d["split"] is None else f"split ({d['split'][0]}, {d['split'][1]})"
    lanes = f"lanes {d['lanes']}"
    if kind_ == "contraction":
        m, n = d["tile"]
        kb = "none" if not d["kblock"] else str(d["kblock"])
        pack = "pack" if d["pack"] else "no pack"
        return f"tiled, tile [{m}, {n}], kblock {kb}, order {d['order']}, {lanes}, {split}, {pack}"
    out = f"{lanes}, {split}"
    if kind_ == "softmax":
        out += f", passes {d['passes']}"
    return out


def describe(k: Kernel, layout: Layout) -> str:
    """A layout's text in the spec's words (R17.13), whether or not it is a point: the
    default a run compiles, which a plan keeps where no point is priced below it."""
    kind_ = kind(k)
    d = {"lanes": layout.width if layout.lanes else 1}
    d["split"] = [layout.depth, layout.threads] if layout.split and layout.threads > 1 else None
    d["passes"] = layout.passes or 3
    if kind_ == "contraction":
        loops = parallel_loops(k)
        tiles = dict(layout.tiles)
        d["tile"] = [tiles.get(loops[-2].var, 1), tiles.get(loops[-1].var, 1)]
        d["kblock"] = layout.kblock
        blocks = "".join(
            "I" if v == loops[-2].var else "J" if v == loops[-1].var else "K" for v in layout.blocks
        )
        d["order"] = blocks or "IJ"
        d["pack"] = bool(layout.pack)
    return text(kind_, d)


def _read_across_lanes(k: Kernel, lanes: str) -> bool:
    """Whether an input is read across the lanes: some load's index runs along the lanes'
    loop with a stride other than one."""
    found = False

    def expr(e) -> None:
        nonlocal found
        if isinstance(e, Load) and e.buf < len(k.inputs):
            lin = linear(k.buffers[e.buf], e.index)
            if lin is not None and lin[0].get(lanes, 0) not in (0, 1):
                found = True
        for a in getattr(e, "args", ()):
            expr(a)

    def walk(body) -> None:
        for s in body:
            for attr in ("expr", "resume"):
                if getattr(s, attr, None) is not None:
                    expr(getattr(s, attr))
            for t in getattr(s, "terms", ()):
                expr(t)
            walk(getattr(s, "body", ()))

    walk(k.body)
    return found


# ---- the integer sets -------------------------------------------------------------------

# Coordinates, in order: tm, tn, kb (0, 32, 128), o (index in ORDERS), l (0/1), d (split
# depth; -1 none), w (workers; 1 none), p (pack 0/1), ps (passes 0, 2, 3).
_DIMS = "tm, tn, kb, o, l, d, w, p, ps"
_PARAMS = "M, N, K, V, W1, W2, PK, KB, TP, NL"


@functools.cache  # nine sets: a kind and a space (parsing one costs milliseconds)
def _set(kind_: str, space: str) -> isl.Set:
    """The decisions of a kind of nest in a space and the constraints between them, over the
    parameters: M, N (the tiled loops' extents), K (the summed axis's), V (1 when the lanes'
    loop holds a full vector), W1, W2 (the split's worker counts, 0 when absent), PK (1 when
    a pack is possible), KB (1 when a k-block is possible), TP (1 when two passes are
    possible), NL (the laid-out loops a split may take)."""
    splits = "(d = -1 and w = 1) or (0 <= d < NL and d < 3 and ((w = W1 and W1 > 1) or (w = W2 and W2 > 1)))"
    if space == "small":
        splits = (
            "(d = -1 and w = 1) or (d = 0 and NL > 0 and"
            " ((w = W1 and W1 > 1) or (w = W2 and W2 > 1)))"
        )
    if space == "calib":
        splits = "(d = -1 and w = 1) or (d = 0 and ((w = W1 and W1 > 1) or (w = W2 and W2 > 1)))"
    lanes = "(l = 0 or (l = 1 and V = 1))"  # lanes: a contraction's decision alone
    if space == "calib":
        lanes = "0 <= l <= 1"
    if kind_ != "contraction":
        lanes = "l = 0"
    if kind_ == "contraction":
        if space == "calib":
            tiles = " or ".join(f"(tm = {m} and tn = {n})" for m, n in CALIB_TILES)
            orders = " or ".join(f"(o = {ORDERS.index(o)} and kb = {b})" for o, b in CALIB_ORDERS)
            rest = f"({tiles}) and ({orders}) and p = 0 and ps = 0"
        else:
            ms = TILE_M if space == "full" else (1, 4)
            ns = TILE_N if space == "full" else (4, 16)
            tm = " or ".join(f"tm = {m}" for m in ms)
            tn = " or ".join(f"tn = {n}" for n in ns)
            kbs = (
                "kb = 0"
                if space == "small"
                else "kb = 0 or ((kb = 32 or kb = 128) and kb < K and KB = 1)"
            )
            rest = (
                f"({tm}) and tm <= M and ({tn}) and tn <= N and ({kbs})"
                " and ((kb = 0 and 0 <= o <= 1) or (kb > 0 and 2 <= o <= 7))"
                " and ps = 0"
                # a pack is the generated GEMM's: its own tiles, order and blocks, in lanes,
                # split at depth 0
                " and (p = 0 or (p = 1 and PK = 1 and l = 1 and kb = 0 and o = 0 and d <= 0))"
            )
    else:
        passes = "(ps = 3 or (ps = 2 and TP = 1))" if kind_ == "softmax" else "ps = 0"
        rest = f"tm = 0 and tn = 0 and kb = 0 and o = 0 and p = 0 and {passes}"
    text_ = f"[{_PARAMS}] -> {{ [{_DIMS}] : ({splits}) and {lanes} and {rest} }}"
    return isl.Set(text_)


@functools.lru_cache(maxsize=1024)
def _coordinates(kind_: str, space: str, params: tuple[tuple[str, int], ...]) -> tuple:
    """The points of the kind's set in `space` at `params`, enumerated once a process: most
    nests of a program share their kind and parameters (a tenth of them differ: the
    tutorial's and the examples' 454 spaces are 62 sets of points)."""
    return tuple(_enumerate(_set(kind_, space), dict(params)))


def _enumerate(s: isl.Set, params: dict[str, int]) -> list[tuple[int, ...]]:
    for i, name in enumerate(_PARAMS.split(", ")):
        s = s.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(s.get_ctx(), params[name]))
    out: list[tuple[int, ...]] = []
    s.foreach_point(
        lambda p: out.append(
            tuple(p.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(9))
        )
    )
    return sorted(out)


# ---- points -----------------------------------------------------------------------------


def point0(k: Kernel) -> Layout:
    """The default layout on one worker without lanes (L1078): the layout a run compiles
    (`run_layout`), so a contraction the run lays out as the generated GEMM statement (its
    operands packed, its own register tile and blocks, presk_cback.gemm) is that statement
    on one worker; its lanes are the statement's own, not the space's decision."""
    return dataclasses.replace(run_layout(k, 1), lanes=None, width=1)


def default_060(k: Kernel) -> Layout | None:
    """The 0.6.0 default of a contraction whose point 0 is the generated GEMM statement: the
    loop nest point 0's decisions name (the default register tile, order IJ, no k-block, one
    worker, no lanes, no pack), as the default was before the GEMM statement (statement P,
    L1090; docs/spec-questions.md, issue 23, H5); None when point 0 is itself that loop
    nest (then it is point 0) or it cannot be laid out."""
    if kind(k) != "contraction":
        return None
    base = point0(k)
    if base.gemm is None:
        return None
    layout = dataclasses.replace(base, pack=(), gemm=None)
    return layout if check_layout(k, layout) is None else None


def _gemm_point(d: dict, d0: dict) -> bool:
    """Whether the decisions are point 0's, on one worker or split over the columns (depth
    0): those a GEMM statement realizes when point 0 is one (docs/spec-questions.md, issue
    23: the statement is how point 0 and its splits are realized, not points of its own)."""
    same = all(d[key] == d0[key] for key in ("tile", "kblock", "order", "lanes"))
    return same and (d["split"] is None or d["split"][0] == 0)


def _decisions0(k: Kernel, kind_: str) -> dict:
    d = {"tile": None, "kblock": None, "order": None, "lanes": 1, "split": None}
    d |= {"pack": None, "passes": None}
    if kind_ == "contraction":
        loops = parallel_loops(k)
        base = point0(k)
        tiles = dict(base.tiles)
        d |= {
            "tile": [tiles.get(loops[-2].var, 1), tiles.get(loops[-1].var, 1)],
            "kblock": 0,
            "order": "IJ",
            "pack": base.gemm is not None,
        }
    if kind_ == "softmax":
        d["passes"] = 3
    return d


def layout_of(
    k: Kernel, d: dict, base: Layout | None = None, d0: dict | None = None
) -> tuple[Layout | None, str | None]:
    """The layout a point's decisions give `k`, or why they cannot lay it out (`base`, `d0`:
    point 0's layout and decisions, when the caller has them)."""
    base = point0(k) if base is None else base
    loops = parallel_loops(k)
    width = LANE_WIDTH.get(k.compute, 1)
    kind_ = kind(k)
    if kind_ == "contraction" and base.gemm is not None:
        if _gemm_point(d, _decisions0(k, kind_) if d0 is None else d0):
            return _split(k, base, d["split"], loops)
        base = dataclasses.replace(base, pack=(), gemm=None)  # the loop nest's points
    layout = base
    if kind_ == "contraction":
        i, j = loops[-2], loops[-1]
        m, n = d["tile"]
        if m > i.extent or n > j.extent:
            return None, f"the tile [{m}, {n}] is larger than the loops ({i.extent}, {j.extent})"
        tiles = tuple((v, t) for v, t in ((i.var, m), (j.var, n)) if not (i.serial and v == i.var))
        blocks: tuple[str, ...] = ()
        kb = d["kblock"] or 0
        order = d["order"]
        names = {"I": i.var, "J": j.var}
        if kb:
            parts = fold_parts(k)
            if parts is None:
                return None, "no fold of this nest is blocked over its summed axis"
            kn = parts[1].vars[0][2]
            if kb >= kn:
                return None, f"a k-block of {kb} does not block a sum of {kn}"
            names["K"] = parts[1].vars[0][0]
        if order not in (("IJ", "JI") if not kb else ORDERS[2:]):
            return None, f"the order {order} is not one of the block loops' orders"
        blocks = tuple(names[c] for c in order)
        if order == "IJ":
            blocks = ()  # the tiles in the loops' order: the default's
        layout = dataclasses.replace(layout, tiles=tiles, kblock=kb, blocks=blocks)
    if d["lanes"] > 1:
        inner = loops[-1] if loops else None
        if inner is None or inner.extent < width or inner.serial:
            return None, "the innermost loop does not hold a full vector"
        layout = dataclasses.replace(layout, lanes=inner.var, width=width)
    if d.get("pack"):
        g = recognize(k)
        if g is None:
            return None, "no GEMM statement takes this nest's operands"
        layout = with_gemm(k, dataclasses.replace(layout, pack=(g.a, g.b)))
        layout = dataclasses.replace(layout, tiles=base.tiles, blocks=(), kblock=0)
    if d.get("passes") == 2:
        layout = dataclasses.replace(layout, passes=2)
    return _split(k, layout, d["split"], loops)


def _split(k: Kernel, layout: Layout, split, loops) -> tuple[Layout | None, str | None]:
    """`layout` split as the decision says (None: one worker), checked."""
    if split is not None:
        depth, w = split
        if layout.gemm is not None:
            if depth != 0:
                return None, "a GEMM statement splits its columns only (depth 0)"
            layout = dataclasses.replace(layout, split=loops[0].var, threads=w)
        else:
            heads = _heads(k, layout)
            if depth >= len(heads):
                return None, f"the nest has no loop at depth {depth}"
            layout = dataclasses.replace(layout, split=heads[depth][1], threads=w, depth=depth)
    why = check_layout(k, layout)
    return (None, why) if why is not None else (layout, None)


def _params(k: Kernel, kind_: str, workers: int) -> dict[str, int]:
    loops = parallel_loops(k)
    width = LANE_WIDTH.get(k.compute, 1)
    inner = loops[-1] if loops else None
    full = inner is not None and inner.extent >= width and not inner.serial
    ws = workers_options(workers)
    w1, w2 = (ws + [0, 0])[:2] if len(ws) == 2 else (0, ws[0] if ws else 0)
    parts = fold_parts(k) if kind_ == "contraction" else None
    pk = 0
    if kind_ == "contraction" and full and recognize(k) is not None:
        pk = int(_read_across_lanes(k, inner.var))
    return {
        "M": loops[-2].extent if kind_ == "contraction" else 0,
        "N": loops[-1].extent if kind_ == "contraction" else 0,
        "K": parts[1].vars[0][2] if parts else 0,
        "V": int(full),
        "W1": w1,
        "W2": w2,
        "PK": pk,
        "KB": int(parts is not None),
        "TP": int(kind_ == "softmax" and two_pass(k)),
        "NL": len(loops) + (2 if kind_ == "contraction" else 0),
    }


def points(k: Kernel, space: str = "full", workers: int = 1) -> list[Point]:
    """Every point of `k`'s layout space, point 0 first (the default layout on one worker
    without lanes), then the set's points in their coordinates' order; a point whose
    decisions lay the nest out as an earlier point does is left out (one layout, one point);
    in the calib space a point ill-formed at these shapes is kept with its reason."""
    if space not in SPACES:
        raise SpaceError(f"no space `{space}`: the spaces are {', '.join(SPACES)}")
    kind_ = kind(k)
    width = LANE_WIDTH.get(k.compute, 1)
    d0 = _decisions0(k, kind_)
    base = point0(k)
    first = Point(base, d0, text(kind_, d0))
    out, seen = [first], {first.layout}
    for tm, tn, kb, o, lanes, depth, w, p, ps in _coordinates(
        kind_, space, tuple(_params(k, kind_, workers).items())
    ):
        d = dict(d0)
        d["lanes"] = width if lanes else 1
        d["split"] = None if depth < 0 else [depth, w]
        if kind_ == "contraction":
            d |= {"tile": [tm, tn], "kblock": kb, "order": ORDERS[o], "pack": bool(p)}
            if p:  # the generated GEMM's own tiles: the default's, shown as the point's
                d["tile"] = d0["tile"]
        if kind_ == "softmax":
            d["passes"] = ps
        if space == "calib" and depth == 0 and kb and ORDERS[o].startswith("K"):
            d["split"] = [1, w]  # the outermost parallel loop: inside the summed axis's blocks
        layout, why = layout_of(k, d, base, d0)
        if layout is not None and layout.gemm is not None:
            d["pack"] = True  # the generated GEMM statement reads its operands packed
        if layout is None:
            if space == "calib":
                out.append(Point(base, d, text(kind_, d), why))
            continue
        if layout in seen:
            continue
        seen.add(layout)
        out.append(Point(layout, d, text(kind_, d)))
    return out


def find_point(k: Kernel, d: dict, space: str = "full", workers: int = 1) -> Point:
    """The point of `k`'s space with decisions `d`; SpaceError (E7110) when it is outside."""
    for pt in points(k, space, workers):
        if pt.why is None and all(pt.decisions.get(key) == d.get(key) for key in pt.decisions):
            return pt
    raise SpaceError(f"the layout {d} is not a point of the {space} space of {k.site}")


__all__ = [
    "ORDERS",
    "default_060",
    "SPACES",
    "Point",
    "SpaceError",
    "describe",
    "find_point",
    "kind",
    "points",
    "text",
]
