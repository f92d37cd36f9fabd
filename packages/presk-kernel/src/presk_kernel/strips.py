"""Which lane loops are written as strips: the `layout` pass's decision (presk_kernel.layout
records it on the loop, `For.strip`), which presk_cback.strip renders.

A nest whose innermost parallel loop is in lanes but whose body folds (a softmax's three
passes over a row, a `sum_to` down the rows of each column) does not vectorize as written:
the compiler will not vectorize a loop that holds other loops. Written as strips of lanes,
each statement of the body a short loop over the strip's lanes, the lane loop moves inside
the fold's loops. Every lane computes what its iteration computed, in the same order, so
the bits are the same.
"""

from __future__ import annotations

from presk_kernel.contract import linear
from presk_kernel.ir import Kernel, Let, Loop, Reduce, Store, accesses

# Lanes of a strip (four vector registers' worth).
WIDTH = {"f64": 32, "f32": 64}
ROWS = 8  # rows of a strip across rows: as many independent folds at once


def shared(width: int, extent: int, threads: int, lanes: int) -> int:
    """A strip's lanes when its loop is split among `threads` (OpenMP's static schedule:
    each thread a run of whole strips, the first ones one more): the widest, from `width`
    down to half of it by `lanes`, whose busiest thread has the fewest lanes, or within
    1/16 of an even share — a `sum_to` of 192 columns at two threads in 4 strips of 48, not
    3 of 64 shared 128 to 64. Each lane's fold is the same whatever its strip: the same
    bits."""

    def busiest(w: int) -> int:
        sizes = [min(w, extent - at) for at in range(0, extent, w)]
        q, r = divmod(len(sizes), threads)
        runs, at = [], 0
        for t in range(threads):
            n = q + (t < r)
            runs.append(sum(sizes[at : at + n]))
            at += n
        return max(runs)

    if threads <= 1 or lanes <= 0 or width <= lanes:
        return width
    widths = range(width, max(lanes, width // 2) - 1, -lanes)  # no narrower than half
    enough = max(min(busiest(w) for w in widths), -(-extent // threads) * 17 // 16)
    return next(w for w in widths if busiest(w) <= enough)


def straight(body) -> bool:
    """A body of lets and stores alone (it vectorizes as written)."""
    return all(isinstance(s, (Let, Store)) for s in body)


def fits(body) -> bool:
    """A body the strip form writes: lets, stores, folds whose bodies are lets, and loops
    over such bodies."""
    for s in body:
        if isinstance(s, Reduce) and not all(isinstance(b, Let) for b in s.body):
            return False
        if isinstance(s, Loop) and (s.serial or not fits(s.body)):
            return False
        bounded = isinstance(s, Loop) and (s.start is not None or s.stop is not None)
        if bounded and not straight(s.body):  # a triangular loop: its lanes guarded one by one
            return False
    return True


def strip_width(k: Kernel, body, var: str) -> tuple[int, bool] | None:
    """(lanes of a strip, whether they run across rows) when the lane loop `var`'s body
    holds a fold or a loop and the strip form writes it; None when the body is straight (it
    vectorizes as written). Lanes that run along `var` contiguously in every access are
    vector lanes; otherwise (a softmax's rows) they are ROWS rows interleaved, each fold's
    terms in vector lanes along its variable."""
    if straight(body) or not fits(body) or k.compute not in WIDTH:
        return None
    for buf, index, _ in accesses(body):
        lin = linear(k.buffers[buf], index)
        if lin is None or lin[0].get(var, 0) not in (0, 1):
            return ROWS, True
    return WIDTH[k.compute], False
