"""Box–Muller over a whole array in C: the doubles of presk_core.random's 256-bit normals,
bit for bit, without a Python loop.

`random.normal` and `random.normal_init` compute, for each pair j of uniforms (v = 1 − u[2j],
w = u[2j+1]), at 256 bits in MPFR, round to nearest even (docs/randomness.md):

    r = √(−2·∘log v),  θ = ∘(∘(2π)·w),  z = ∘(r·∘cos θ), ∘(r·∘sin θ),

then the double nearest z, or the double nearest std·z (the product exact at 512 bits).
`presk_normal` makes the same MPFR calls (`mpfr_log`, `mpfr_sqrt`, `mpfr_sin_cos`, the
products) in a C loop: the same bits. It first tries a faster path at P = 128 bits, the
same operations at P bits, and keeps its double only where it is proved to be the double of
the 256-bit value (Ziv's test):

- Each P-bit operation errs by at most ε = 2^−P relatively (∘ to nearest). With R and Θ
  the exact √(−2 ln v) and 2πw: r = R·√(1+a)·(1+b), |r − R| ≤ 1.6ε·R; θ = Θ(1+c)(1+d),
  |θ − Θ| ≤ 2.01ε·2π < 12.7ε; |∘cos θ − cos Θ| ≤ ε + |θ − Θ| < 13.7ε (sin alike);
  |z − R cos Θ| ≤ |r − R| + R·13.7ε + ε·|r|·(1 + 13.7ε) < 16.5ε·R. With v ≥ 2^−53 (v is
  1 − k·2^−53, checked), R ≤ √(106 ln 2) < 8.58, so |z − R cos Θ| < 142ε < 2^7.2·ε.
- The 256-bit value obeys the same bound with 2^−256, so |z_P − z_256| < 2^(7.3−P).
  E = 2^(10−P) bounds it with a margin of 2^2.7.
- z_256 is in [z_P − E, z_P + E], each end rounded outwards; std·z_256 in that interval
  times std, each end rounded outwards. ∘ to a double is monotone: if both ends round to
  the same double, that double is the 256-bit path's (a sign of zero included: the test
  compares the bits).

Where the ends round apart (about 2^−60 of values at P = 128, and every pair with r = 0 or
θ = 0, where z is a zero), where v or w is outside the uniforms' range, or std is not a
finite nonzero number, the pair is computed at 256 bits. tests/test_normal_c.py compares
both paths with the Python loop on many draws and on those edges.

Built and loaded like presk_core.fold_c (into the user's cache); where it cannot be (no
compiler, `PRESK_INTERP_C=0`), `available()` is False and random.py keeps its Python loop.
"""

from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor

import gmpy2
import numpy as np

from presk_core import fold_c

BITS = 256  # random.BITS: the precision every normal is defined at
FAST = 128  # the fast path's precision (two limbs)
PIECE = 2**15  # below this many pairs (~0.3 s), one thread

SOURCE = r"""
#include <string.h>
#include <gmp.h>
#include <mpfr.h>

#define BITS 256

typedef struct {
    mpfr_t two_pi, l, r, t, s, c;
} Work;

static void work_init(Work *k, mpfr_prec_t p)
{
    mpfr_inits2(p, k->two_pi, k->l, k->r, k->t, k->s, k->c, (mpfr_ptr)0);
    mpfr_const_pi(k->two_pi, MPFR_RNDN);
    mpfr_mul_2ui(k->two_pi, k->two_pi, 1, MPFR_RNDN);   /* 2 * const_pi(): exact */
}

static void work_clear(Work *k)
{
    mpfr_clears(k->two_pi, k->l, k->r, k->t, k->s, k->c, (mpfr_ptr)0);
}

/* Box-Muller at the work's precision: k->c = r cos(theta), k->s = r sin(theta), each
   operation as random._normal_mpfr makes it in gmpy2. in: a 53-bit scratch. */
static void box_muller(Work *k, mpfr_ptr in, double v, double w)
{
    mpfr_set_d(in, v, MPFR_RNDN);                       /* exact */
    mpfr_log(k->l, in, MPFR_RNDN);
    mpfr_mul_si(k->l, k->l, -2, MPFR_RNDN);             /* exact, -0 for log 1 as gmpy2 */
    mpfr_sqrt(k->r, k->l, MPFR_RNDN);
    mpfr_set_d(in, w, MPFR_RNDN);
    mpfr_mul(k->t, k->two_pi, in, MPFR_RNDN);
    mpfr_sin_cos(k->s, k->c, k->t, MPFR_RNDN);
    mpfr_mul(k->c, k->r, k->c, MPFR_RNDN);
    mpfr_mul(k->s, k->r, k->s, MPFR_RNDN);
}

/* The double of z at 256 bits, or of std * z exact (512 bits). */
static double exact(mpfr_ptr z, mpfr_srcptr std, mpfr_ptr product)
{
    if (std == NULL)
        return mpfr_get_d(z, MPFR_RNDN);
    mpfr_mul(product, std, z, MPFR_RNDN);               /* exact: 256 + 256 bits */
    return mpfr_get_d(product, MPFR_RNDN);
}

/* Ziv's test: the double of every value within e of z (times std), if they share one. */
static int decided(mpfr_ptr z, mpfr_srcptr e, mpfr_srcptr std, mpfr_ptr lo, mpfr_ptr hi,
                   double *out)
{
    mpfr_sub(lo, z, e, MPFR_RNDD);
    mpfr_add(hi, z, e, MPFR_RNDU);
    if (std != NULL) {
        if (mpfr_sgn(std) > 0) {
            mpfr_mul(lo, lo, std, MPFR_RNDD);
            mpfr_mul(hi, hi, std, MPFR_RNDU);
        } else {
            mpfr_swap(lo, hi);
            mpfr_mul(lo, lo, std, MPFR_RNDD);           /* std * (z + e) */
            mpfr_mul(hi, hi, std, MPFR_RNDU);           /* std * (z - e) */
        }
    }
    double a = mpfr_get_d(lo, MPFR_RNDN), b = mpfr_get_d(hi, MPFR_RNDN);
    if (memcmp(&a, &b, sizeof a) != 0)
        return 0;
    *out = a;
    return 1;
}

/* out[i], i < n: the normals of the pairs (radial[j], angular[j]), value 2j the cosine's,
   2j+1 the sine's (an odd n drops the last sine), times std if std is not NULL. fast > 0:
   try the fast path at `fast` bits first. Returns the number of pairs computed at 256 bits. */
long presk_normal(size_t n, const double *radial, const double *angular, mpfr_srcptr std,
                  long fast, double *out)
{
    size_t pairs = (n + 1) / 2;
    long slow = 0;
    Work full, quick;
    mpfr_t in, product, e, lo, hi;
    work_init(&full, BITS);
    mpfr_init2(in, 53);
    mpfr_init2(product, 2 * BITS);
    int try_fast = fast > 1 && fast < BITS - 8
                   && (std == NULL || (mpfr_number_p(std) && !mpfr_zero_p(std)));
    if (try_fast) {
        work_init(&quick, fast);
        mpfr_inits2(fast, lo, hi, (mpfr_ptr)0);
        mpfr_init2(e, 2);
        mpfr_set_ui_2exp(e, 1, 10 - fast, MPFR_RNDN);    /* E = 2^(10 - P) */
    }
    for (size_t j = 0; j < pairs; j++) {
        double v = radial[j], w = angular[j], zc, zs;
        int has_sine = 2 * j + 1 < n;
        if (try_fast && v >= 0x1p-53 && v <= 1.0 && w >= 0.0 && w < 1.0) {
            box_muller(&quick, in, v, w);
            if (decided(quick.c, e, std, lo, hi, &zc)
                && (!has_sine || decided(quick.s, e, std, lo, hi, &zs))) {
                out[2 * j] = zc;
                if (has_sine)
                    out[2 * j + 1] = zs;
                continue;
            }
        }
        slow++;
        box_muller(&full, in, v, w);
        out[2 * j] = exact(full.c, std, product);
        if (has_sine)
            out[2 * j + 1] = exact(full.s, std, product);
    }
    if (try_fast) {
        work_clear(&quick);
        mpfr_clears(lo, hi, e, (mpfr_ptr)0);
    }
    work_clear(&full);
    mpfr_clears(in, product, (mpfr_ptr)0);
    return slow;
}

/* out[i] = x[i]: doubles into the mpfr_t of fresh objects (of 53 bits or more: exact); a
   NaN positive, as gmpy2 makes every NaN from a float. */
void presk_set_doubles(size_t n, const double *x, mpfr_ptr *out)
{
    for (size_t i = 0; i < n; i++) {
        mpfr_set_d(out[i], x[i], MPFR_RNDN);
        if (x[i] != x[i])
            mpfr_setsign(out[i], out[i], 0, MPFR_RNDN);
    }
}
"""

_lib: ctypes.CDLL | None | bool = False
_DEFAULT = gmpy2.context()  # MPFR's exponent range


def _load() -> ctypes.CDLL | None:
    path = fold_c.library("presk_normal", SOURCE)
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(str(path))  # no Python object is touched but std's, held alive
    except OSError:
        return None
    lib.presk_normal.restype = ctypes.c_long
    lib.presk_normal.argtypes = [ctypes.c_size_t] + [ctypes.c_void_p] * 3
    lib.presk_normal.argtypes += [ctypes.c_long, ctypes.c_void_p]
    lib.presk_set_doubles.restype = None
    lib.presk_set_doubles.argtypes = [ctypes.c_size_t] + [ctypes.c_void_p] * 2
    return lib


def available() -> bool:
    global _lib
    if _lib is False:
        _lib = _load()
    return _lib is not None


def normals(
    radial: np.ndarray,
    angular: np.ndarray,
    n: int,
    std: gmpy2.mpfr | None = None,
    *,
    fast: int = FAST,
) -> tuple[np.ndarray, int] | None:
    """The n doubles of Box–Muller on the pairs (radial[j], angular[j]) (the ⌈n/2⌉ pairs'
    v = 1 − u[2j] and w = u[2j+1]), times `std` (an mpfr of at most 256 bits) when given,
    and the number of pairs computed at 256 bits; None where C is not available. `fast=0`
    computes every pair at 256 bits."""
    if not available():
        return None
    pairs = (n + 1) // 2
    v = np.ascontiguousarray(radial, dtype=np.float64)
    w = np.ascontiguousarray(angular, dtype=np.float64)
    if v.shape != (pairs,) or w.shape != (pairs,):
        raise ValueError(f"normals: {pairs} pairs for {n} values, not {v.shape} and {w.shape}")
    if std is not None and (type(std) is not fold_c.MPFR_TYPE or std.precision > BITS):
        raise ValueError(f"normals: std is an mpfr of at most {BITS} bits, not {std!r}")
    out = np.empty(n, dtype=np.float64)
    where = id(std) + fold_c.OFFSET if std is not None else None
    # Pieces of whole pairs, one a thread (the C holds no GIL; MPFR's caches are per thread):
    # each value depends on its pair alone, so the pieces change no bit.
    step = max(-(-pairs // _threads(pairs)), 1)
    pieces = [(j, min(2 * (j + step), n) - 2 * j) for j in range(0, pairs, step)]

    def run(piece: tuple[int, int]) -> int:
        j, count = piece
        at = (v.ctypes.data + 8 * j, w.ctypes.data + 8 * j, out.ctypes.data + 16 * j)
        return _lib.presk_normal(count, at[0], at[1], where, fast, at[2])

    if len(pieces) <= 1:
        return out, int(run(pieces[0])) if pieces else 0
    with ThreadPoolExecutor(len(pieces)) as pool:
        slow = sum(pool.map(run, pieces))
    return out, int(slow)


def _threads(pairs: int) -> int:
    """Threads for a draw of this many pairs: one below `PIECE` pairs, else the machine's
    cores (at most 8; `PRESK_DRAW_THREADS` sets it)."""
    if pairs < PIECE:
        return 1
    wanted = os.environ.get("PRESK_DRAW_THREADS")
    if wanted is not None and wanted.isdigit() and int(wanted) >= 1:
        return int(wanted)
    return max(1, min(os.cpu_count() or 1, 8))


def reals(x: np.ndarray) -> np.ndarray | None:
    """The doubles of `x` as new mpfr objects of the context's precision, as `gmpy2.mpfr(v)`
    makes them (exactly: the context has 53 bits or more, round to nearest, MPFR's exponent
    range), ten times faster (θ's ten million doubles at the course GPT's size: 30 s → 3 s);
    None elsewhere or without C."""
    context = gmpy2.get_context()
    if not available() or x.dtype != np.float64 or context.precision < 53:
        return None
    if context.round != gmpy2.RoundToNearest or context.subnormalize:
        return None
    if context.emax != _DEFAULT.emax or context.emin != _DEFAULT.emin:
        return None
    flat = np.ascontiguousarray(x).reshape(-1)
    out = fold_c.fresh(flat.size)
    into = fold_c.slots(out)  # alive through the call
    _lib.presk_set_doubles(flat.size, flat.ctypes.data, into.ctypes.data)
    return out.reshape(x.shape)
