"""The kernel interpreter on laid-out kernels: each nest executed as the `layout` pass wrote
it (presk_kernel.layout.apply_layout), so that the bits of a layout are checked in Python
(L1067: every point of a layout space computes point 0's bits).

`run_laid_kernel(k, views)` runs the kernel's laid-out body, statement by statement:

- a `Tile` runs its tiles in order, its variable the tile's first index (its threads'
  pieces, OpenMP's static schedule, run one after another: the same order);
- a `For` runs its range (or, in a tile, the tile's part of it) in blocks: its threads'
  contiguous pieces, each in strips of `lanes` lanes when it is in lanes, each block one
  vectorized axis; a `For` in no lanes is one block (its iterations are independent);
- a `GemmStmt` runs as its GEMM says, from the flat buffers through its strides and
  offsets, once per point of its batch loops: C's rows × columns vectorized, the fold over
  k from the rounded first product then fma, in order — what the C emitter renders,
  checked here against the loops' bits (its packing into panels a copy: the same values).

No layout field is read here: a pack is the GEMM statement's (`check_layout`), and the
statements say the rest.

Below the laid-out loops (folds, serial loops, lets) the body is the plain interpreter's
(presk_kernel.interp.Run), so the arithmetic is the same rule for rule.
"""

from __future__ import annotations

import itertools

import numpy as np

from presk_kernel.contract import epilogue_nest
from presk_kernel.interp import NUMPY, Run, fma
from presk_kernel.ir import For, Gemm, GemmStmt, Kernel, Tile, TwoPass
from presk_kernel.layout import applies, is_laid, scratch_loops


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


def run_gemm(k: Kernel, views: list[np.ndarray], g: Gemm, fixed: dict | None = None) -> None:
    """The GEMM statement over the kernel's buffers, as flat arrays and the statement's
    strides, at each point of its batch loops (`fixed`: the values of the loops around it,
    `GemmStmt.bound`); a GEMM over no term stores nothing (as the generated GEMM)."""
    dt = NUMPY[k.compute]
    a, b = (np.ascontiguousarray(views[i]).reshape(-1) for i in (g.a, g.b))
    c = views[g.c].reshape(-1)
    assert np.shares_memory(c, views[g.c]), "C is written in place"
    rows, cols = np.arange(g.rows)[:, None], np.arange(g.cols)[None, :]
    sam, sak = g.stride(0, g.m), g.stride(0, g.k)
    sbk, sbn = g.stride(1, g.k), g.stride(1, g.n)
    scm = g.stride(2, g.m)
    fixed = fixed or {}
    free = [(v, n) for v, n in g.batch if v not in fixed]
    names = [v for v, _ in free]
    with np.errstate(all="ignore"):
        for point in itertools.product(*(range(n) for _, n in free)):
            at = dict(zip(names, point, strict=True)) | fixed
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


class LaidRun(Run):
    """A kernel's run through its laid-out statements (`Tile`, `For`, `GemmStmt`)."""

    def stmt(self, s) -> None:
        match s:
            case Tile(var, _, extent, size, body, _):
                for start in range(0, extent, size):  # the threads' pieces, one after another
                    self.env[var] = start
                    self.block(body)
            case For(var, _, extent, body, tile, size, threads, lanes):
                blocks = self.ranges(var, extent, tile, size, threads, lanes)
                if self.k.layout.scratch and var in scratch_loops(self.k.layout):
                    # (their points share a slice of the group's scratch: one at a time)
                    blocks = [(i, i + 1) for lo, hi in blocks for i in range(lo, hi)]
                for lo, hi in blocks:
                    shape = [1] * self.ndim
                    shape[self.positions[var]] = hi - lo
                    self.env[var] = np.arange(lo, hi, dtype=np.int64).reshape(shape)
                    self.block(body)
            case GemmStmt(gemm, _, nest) if any(t is not None for t in gemm.prologue):
                self.block(nest)  # a computed operand (its panels): the nest, the same fold
            case GemmStmt(gemm, _, nest, _, bound) if bound:  # at each point of the loops
                around = [v for v, _ in gemm.batch[:bound]]  # around it (a slice group's)
                values = [np.asarray(self.env[v]).reshape(-1) for v in around]
                for point in itertools.product(*values):
                    run_gemm(
                        self.k, self.views, gemm, dict(zip(around, map(int, point), strict=True))
                    )
            case GemmStmt(gemm, _, nest):
                run_gemm(self.k, self.views, gemm)
                if gemm.epilogue:  # on each element, its sum finished (in C)
                    self.block(epilogue_nest(nest, gemm))
            case TwoPass(body, _):
                self.block(body)
            case _:
                Run.stmt(self, s)

    def ranges(self, var, extent, tile, size, threads, lanes) -> list[tuple[int, int]]:
        """A `For`'s blocks, in the order they run: its range (in a tile, the tile's part),
        its threads' pieces, their strips of lanes (empty blocks left out)."""
        lo, hi = (
            (0, extent) if tile is None else (self.env[tile], min(self.env[tile] + size, extent))
        )
        out = [(lo, hi)] if hi > lo else []
        if threads > 1:
            out = [p for a, b in out for p in pieces(a, b, threads)]
        if lanes > 1:
            out = [c for a, b in out for c in chunks(a, b, lanes)]
        return out


class NotLaidOut(ValueError):
    """A kernel whose layout says more than its body does: a bug of the caller, which must
    apply it (presk_kernel.layout.apply_layout, the `layout` pass)."""


def run_laid_kernel(k: Kernel, views: list[np.ndarray]) -> None:
    """Run `k` over `views` as its laid-out body executes it (the bits of `run_kernel`'s,
    which a layout must not change)."""
    if applies(k.layout) and not is_laid(k):
        raise NotLaidOut(f"the layout of `{k.name}` at {k.site} is not applied to its body")
    run = LaidRun(k, views)
    with np.errstate(all="ignore"):
        run.block(k.body)


def block_count(k: Kernel) -> int:
    """The blocks `run_laid_kernel` runs `k`'s laid-out loops in (a GEMM statement's batch
    points; 1 for a body without laid-out loops)."""
    run = LaidRun(k, [])
    count = 0

    def walk(body) -> None:
        nonlocal count
        laid = [s for s in body if isinstance(s, (Tile, For, GemmStmt, TwoPass))]
        if not laid:
            count += 1
        for s in laid:
            match s:
                case Tile(var, _, extent, size, inner, _):
                    for start in range(0, extent, size):
                        run.env[var] = start
                        walk(inner)
                case For(var, _, extent, inner, tile, size, threads, lanes):
                    for _ in run.ranges(var, extent, tile, size, threads, lanes):
                        walk(inner)
                case GemmStmt(gemm, _, _, _, bound):
                    count += max(1, int(np.prod([n for _, n in gemm.batch[bound:]])))
                case TwoPass():
                    count += 1

    walk(k.body)
    return count
