"""The kernel interpreter on laid-out kernels: each nest executed as its layout says, so that
the bits of a layout are checked in Python (L1067: every point of a layout space computes
point 0's bits).

`run_laid_kernel(k, views)` runs the outer perfect nest (presk_kernel.contract.perfect_nest)
block by block, as the layout cuts it:

- the split loop's range in `threads` contiguous pieces (OpenMP's static schedule), the
  pieces one after another;
- each tiled loop's range (or piece) in tiles of its size;
- the lanes loop in strips of `width` lanes, each strip a vectorized axis;
- the blocks in the layout's loop order, outermost first; within a block the loops that
  are neither split, tiled nor in lanes are vectorized over their whole range (numpy, as
  the plain interpreter does: their iterations are independent);
- packed inputs read from a copy (a panel in another memory order), the layout's `pack`;
- a layout's GEMM statement (`Layout.gemm`) executed as the statement says, from the flat
  buffers through its strides and offsets, once per point of its batch loops: C's rows ×
  columns vectorized, the fold over k from the rounded first product then fma, in order —
  the description the C emitter renders, checked here against the loops' bits.

The body below the perfect nest (folds, serial loops, lets) is the plain interpreter's
(presk_kernel.interp.Run), so the arithmetic is the same rule for rule.
"""

from __future__ import annotations

import itertools

import numpy as np

from presk_kernel.contract import perfect_nest
from presk_kernel.interp import NUMPY, Run, fma, run_kernel
from presk_kernel.ir import Gemm, Kernel


def pieces(lo: int, hi: int, count: int) -> list[tuple[int, int]]:
    """[lo, hi) in `count` contiguous pieces as OpenMP's static schedule makes them: the
    first ones one longer when the length does not divide (empty pieces left out)."""
    n = hi - lo
    base, extra = divmod(n, count)
    out, at = [], lo
    for i in range(count):
        size = base + (1 if i < extra else 0)
        if size:
            out.append((at, at + size))
        at += size
    return out


def chunks(lo: int, hi: int, size: int) -> list[tuple[int, int]]:
    """[lo, hi) in runs of `size` (the last one shorter)."""
    return [(a, min(a + size, hi)) for a in range(lo, hi, size)]


def _ranges(var: str, extent: int, layout) -> list[tuple[int, int]]:
    """The blocks of one loop, in the order they run: its split pieces, their tiles, their
    strips of lanes."""
    out = [(0, extent)]
    if layout.split == var and layout.threads > 1:
        out = [p for lo, hi in out for p in pieces(lo, hi, layout.threads)]
    tile = dict(layout.tiles).get(var)
    if tile is not None and tile < extent:
        out = [t for lo, hi in out for t in chunks(lo, hi, tile)]
    if layout.lanes == var and layout.width > 1:
        out = [s for lo, hi in out for s in chunks(lo, hi, layout.width)]
    return out


def packed(k: Kernel, views: list[np.ndarray]) -> list[np.ndarray]:
    """The views with each packed input replaced by a copy in column-major order (a panel:
    the same values, read through the same indices)."""
    return [np.array(v, order="F") if i in k.layout.pack else v for i, v in enumerate(views)]


def run_gemm(k: Kernel, views: list[np.ndarray], g: Gemm) -> None:
    """The GEMM statement over the kernel's buffers, as flat arrays and the statement's
    strides; a GEMM over no term stores nothing (as the generated GEMM)."""
    dt = NUMPY[k.compute]
    a, b = (np.ascontiguousarray(views[i]).reshape(-1) for i in (g.a, g.b))
    c = views[g.c].reshape(-1)
    assert np.shares_memory(c, views[g.c]), "C is written in place"
    rows, cols = np.arange(g.rows)[:, None], np.arange(g.cols)[None, :]
    sam, sak = g.stride(0, g.m), g.stride(0, g.k)
    sbk, sbn = g.stride(1, g.k), g.stride(1, g.n)
    scm = g.stride(2, g.m)
    names = [v for v, _ in g.batch]
    with np.errstate(all="ignore"):
        for point in itertools.product(*(range(n) for _, n in g.batch)):
            at = dict(zip(names, point, strict=True))
            base = [
                g.offsets[i] + sum(s * at[v] for v, s in g.strides[i] if v in at) for i in range(3)
            ]
            if g.depth == 0 or g.rows == 0 or g.cols == 0:
                continue
            acc = None
            for p in range(g.depth):
                x = a[base[0] + rows * sam + p * sak]
                y = b[base[1] + p * sbk + cols * sbn]
                if acc is None:
                    acc = np.asarray(x * y, dtype=dt)
                else:
                    acc = fma(*np.broadcast_arrays(x, y, acc), dt)
            c[base[2] + rows * scm + cols] = acc


def run_laid_kernel(k: Kernel, views: list[np.ndarray]) -> None:
    """Run `k` over `views` as its layout executes it (the bits of `run_kernel`'s, which a
    layout must not change)."""
    lay = k.layout
    views = packed(k, views)
    if lay.gemm is not None:
        run_gemm(k, views, lay.gemm)
        return
    loops = perfect_nest(k)
    if not loops:
        run_kernel(k, views)
        return
    if any(lp.extent == 0 for lp in loops):
        return
    by_var = {lp.var: lp for lp in loops}
    order = [v for v in lay.order if v in by_var]
    order += [lp.var for lp in loops if lp.var not in order]
    run = Run(k, views)
    blocks = [_ranges(v, by_var[v].extent, lay) for v in order]
    with np.errstate(all="ignore"):
        for block in itertools.product(*blocks):
            for v, (lo, hi) in zip(order, block, strict=True):
                shape = [1] * run.ndim
                shape[run.positions[v]] = hi - lo
                run.env[v] = np.arange(lo, hi, dtype=np.int64).reshape(shape)
            run.block(loops[-1].body)


def block_count(k: Kernel) -> int:
    """The blocks `run_laid_kernel` runs `k` in (1 for a GEMM statement's batch point)."""
    if k.layout.gemm is not None:
        return max(1, int(np.prod([n for _, n in k.layout.gemm.batch])))
    count = 1
    for lp in perfect_nest(k):
        count *= len(_ranges(lp.var, lp.extent, k.layout))
    return count
