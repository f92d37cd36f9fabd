"""Box–Muller over a whole array in C: the doubles of presk_core.random's 256-bit normals,
bit for bit, without a Python loop.

`random.normal` and `random.normal_init` compute, for each pair j of uniforms (v = 1 − u[2j],
w = u[2j+1]), at 256 bits in MPFR, round to nearest even (docs/randomness.md):

    r = √(−2·∘log v),  θ = ∘(∘(2π)·w),  z = ∘(r·∘cos θ), ∘(r·∘sin θ),

then the double nearest z, or the double nearest std·z (the product exact at 512 bits).
`presk_normal` makes the same MPFR calls (`mpfr_log`, `mpfr_sqrt`, `mpfr_sin_cos`, the
products) in a C loop (the 256-bit tier): the same bits, and as slow as MPFR (~25 µs a
pair). Two faster tiers come first; each keeps its double only where it is proved to be
the double of the 256-bit value (Ziv's test):

- z_256 is within E of the tier's z; it is in [z − E, z + E], each end rounded outwards,
  and std·z_256 in that interval times std, each end rounded outwards. ∘ to a double is
  monotone: if both ends round to the same double, it is the 256-bit path's (compared as
  bits, so a zero's sign too). Where they do not, the pair goes to the next tier. The
  double-double tier first tries a one-sided test in doubles (the value's high word, not
  a power of two, with its low word and E less than 0.49 of its ulp away: every value in
  the interval rounds to it), then the MPFR test; std·z is formed there as a
  double-double, its bound widened by std's own 2^−106 and the product's 2^−103.
- The 256-bit value itself is within 2^(7.2−256) of the exact R·cos Θ, R = √(−2 ln v),
  Θ = 2πw (the P-bit analysis below with P = 256), which each E below includes.

**Double-double tier** (~0.2 µs a pair; decides all but about 1 pair in 1000). Pairs of
doubles (Joldes, Muller & Popescu 2017: AccurateDWPlusDW, DWTimesDW1, relative errors
below 2^−102; Dekker's exact products). log v: for 1 − v ≤ 2^−9, log1p(−u) by its series;
else v = m·2^k, m·inv_i = 1 + r exactly (inv_i a double near 1/(1 + (i+½)/256)), log v =
k·ln 2 − log inv_i + log1p(r), |r| < 2^−8.9, the tables and ln 2 from MPFR at 256 bits
split into two doubles (2^−106). log1p(r) = r − r²/2 in double-doubles plus r³/3 − … −
r^11/11 by Horner in doubles: its error, below 2^−76·|r|, dominates; so |log − log v| <
2^−75 and R = √(−2 log) (one Newton step on the double root) errs by less than 2^−75/R.
cos and sin: w = j/1024 + h exactly, α = 2πh < 2^−7.3, the table's cos and sin of 2πj/1024
(2^−106), cos α − 1 and sin α by their series (truncated below 2^−95), the angle-sum
formulas in double-doubles: below 2^−82. So |z − R cos Θ| < 2^−75/R + 8.6·2^−82 +
2^−95 < 2^−74·(1 + 1/R); E = 2^−70·(1 + 1/R), sixteen times that. Measured on 10^5 pairs
and on the tables' and branches' edges, the error stays below 1/150 of 2^−74·(1 + 1/R)
(tests/test_normal_c.py). v = 1 (a zero radius) and v < 2^−53 skip the tier.

**P-bit tier** (P = 128, ~13 µs a pair): the 256-bit operations at P bits. Each errs by
at most ε = 2^−P relatively. r = R·√(1+a)·(1+b), |r − R| ≤ 1.6ε·R; θ = Θ(1+c)(1+d),
|θ − Θ| ≤ 2.01ε·2π < 12.7ε; |∘cos θ − cos Θ| ≤ ε + |θ − Θ| < 13.7ε (sin alike);
|z − R cos Θ| ≤ |r − R| + R·13.7ε + ε·|r|·(1 + 13.7ε) < 16.5ε·R. With v ≥ 2^−53 (v is
1 − k·2^−53, checked), R ≤ √(106 ln 2) < 8.58, so |z − R cos Θ| < 142ε < 2^7.2·ε, and
|z_P − z_256| < 2^(7.3−P); E = 2^(10−P).

Where no tier decides (every pair with r = 0 or θ = 0, where z is a zero), where v or w is
outside the uniforms' range, or std is not a finite nonzero number, the pair is computed
at 256 bits. tests/test_normal_c.py compares every tier with the Python loop on many
draws and on those edges. Large draws run in pieces, one a thread.

Built, cached and loaded like presk_core.fold_c (presk_core.cc); where it cannot be (no
compiler, `PRESK_INTERP_C=0`), `available()` is False and random.py keeps its Python loop.
"""

from __future__ import annotations

import ctypes
import os
import re
from concurrent.futures import ThreadPoolExecutor

import gmpy2
import numpy as np

from presk_core import fold_c

BITS = 256  # random.BITS: the precision every normal is defined at
FAST = 128  # the fast path's precision (two limbs)
PIECE = 2**15  # below this many pairs (~0.3 s), one thread

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <gmp.h>
#include <mpfr.h>

#define BITS 256

/* ---- the double-double tier: pairs of doubles hi + lo, about 2^-100 relatively per
   operation (Joldes, Muller, Popescu, "Tight and rigorous error bounds for basic building
   blocks of double-word arithmetic", 2017: AccurateDWPlusDW, DWTimesDW1); products exact
   by Dekker's split (no FMA needed). */

typedef struct {
    double hi, lo;
} dd;

static inline dd two_sum(double a, double b)
{
    double s = a + b, t = s - a;
    return (dd){s, (a - (s - t)) + (b - t)};
}

static inline dd fast_two_sum(double a, double b) /* |a| >= |b| or a = 0 */
{
    double s = a + b;
    return (dd){s, b - (s - a)};
}

static inline void split(double a, double *h, double *l)
{
    double c = 134217729.0 * a; /* 2^27 + 1 */
    *h = c - (c - a);
    *l = a - *h;
}

static inline dd two_prod(double a, double b)
{
    double p = a * b, ah, al, bh, bl;
    split(a, &ah, &al);
    split(b, &bh, &bl);
    return (dd){p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}

static inline dd dd_add(dd x, dd y)
{
    dd s = two_sum(x.hi, y.hi), t = two_sum(x.lo, y.lo);
    dd v = fast_two_sum(s.hi, s.lo + t.hi);
    return fast_two_sum(v.hi, t.lo + v.lo);
}

static inline dd dd_mul(dd x, dd y)
{
    dd c = two_prod(x.hi, y.hi);
    return fast_two_sum(c.hi, c.lo + (x.hi * y.lo + x.lo * y.hi));
}

static inline dd dd_mul_d(dd x, double y)
{
    dd c = two_prod(x.hi, y);
    return fast_two_sum(c.hi, c.lo + x.lo * y);
}

static inline dd dd_of(double x) { return (dd){x, 0.0}; }

#define TURNS 1024 /* sin and cos tabulated at 2 pi j / TURNS */
#define CELLS 256  /* log tabulated at inverses of 1 + (i + 1/2) / CELLS */
static dd two_pi_dd, ln2_dd, sixth_dd, cos_t[TURNS], sin_t[TURNS], log_t[CELLS];
static double inv_t[CELLS];
static int tables_built;

static dd dd_from(mpfr_srcptr x) /* hi = o(x), lo = o(x - hi): within 2^-106 |x| */
{
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(x));
    double hi = mpfr_get_d(x, MPFR_RNDN);
    mpfr_sub_d(t, x, hi, MPFR_RNDN); /* exact (Sterbenz-like: hi is x's nearest) */
    double lo = mpfr_get_d(t, MPFR_RNDN);
    mpfr_clear(t);
    return (dd){hi, lo};
}

static void build_tables(void)
{
    mpfr_t x, y, c;
    mpfr_inits2(BITS, x, y, c, (mpfr_ptr)0);
    mpfr_const_pi(x, MPFR_RNDN);
    mpfr_mul_2ui(x, x, 1, MPFR_RNDN);
    two_pi_dd = dd_from(x);
    mpfr_const_log2(y, MPFR_RNDN);
    ln2_dd = dd_from(y);
    mpfr_set_ui(y, 1, MPFR_RNDN);
    mpfr_div_ui(y, y, 6, MPFR_RNDN);
    sixth_dd = dd_from(y);
    for (int j = 0; j < TURNS; j++) {
        mpfr_mul_ui(y, x, j, MPFR_RNDN);
        mpfr_div_ui(y, y, TURNS, MPFR_RNDN);
        mpfr_sin_cos(y, c, y, MPFR_RNDN);
        sin_t[j] = dd_from(y);
        cos_t[j] = dd_from(c);
    }
    for (int i = 0; i < CELLS; i++) {
        inv_t[i] = 1.0 / (1.0 + (i + 0.5) / CELLS); /* any double near it */
        mpfr_set_d(y, inv_t[i], MPFR_RNDN);
        mpfr_log(y, y, MPFR_RNDN);
        mpfr_neg(y, y, MPFR_RNDN);
        log_t[i] = dd_from(y); /* -log(inv) */
    }
    mpfr_clears(x, y, c, (mpfr_ptr)0);
    tables_built = 1;
}

/* log(1 + r), |r| <= 2^-8.9, r = r.hi + r.lo with |r.lo| <= 2^-52 |r.hi|: r - r^2/2 as
   double-doubles, r^3/3 - r^4/4 + ... + r^11/11 in doubles on r.hi (error < 2^-76 |r|^3
   / 2^-27 ... < 2^-75 |r|, the terms beyond r^11 < 2^-98 |r|). */
static dd log1p_dd(dd r)
{
    double x = r.hi;
    double q = 1.0 / 11;
    q = 1.0 / 10 - x * q;  /* an alternating series in x: Horner from r^11 down */
    q = 1.0 / 9 - x * q;
    q = 1.0 / 8 - x * q;
    q = 1.0 / 7 - x * q;
    q = 1.0 / 6 - x * q;
    q = 1.0 / 5 - x * q;
    q = 1.0 / 4 - x * q;
    q = 1.0 / 3 - x * q;
    q = x * x * x * q;     /* r^3/3 - r^4/4 + ... */
    dd half = dd_mul(r, r);
    half.hi *= -0.5;
    half.lo *= -0.5;
    return dd_add(dd_add(r, half), dd_of(q));
}

/* The double-double tier of Box-Muller: (r cos, r sin) of 2 pi w within err of the exact
   values, err returned through *err; 0 where it does not apply (v = 1, v < 2^-53). */
static int box_muller_dd(double v, double w, dd *zc, dd *zs, double *err)
{
    if (!(v >= 0x1p-53 && v < 1.0 && w >= 0.0 && w < 1.0))
        return 0;
    dd lg;
    double u = 1.0 - v; /* exact */
    if (u <= 0x1p-9) {
        lg = log1p_dd(dd_of(-u)); /* relative error < 2^-74 */
    } else {
        int e;
        double m = frexp(v, &e) * 2.0; /* v = m 2^(e-1), m in [1, 2) */
        int i = (int)((m - 1.0) * CELLS);
        dd p = two_prod(m, inv_t[i]);
        dd r = fast_two_sum(p.hi - 1.0, p.lo); /* p.hi - 1 exact: p.hi in [1/2, 2] */
        lg = dd_add(dd_add(dd_mul_d(ln2_dd, (double)(e - 1)), log_t[i]), log1p_dd(r));
    }
    /* l = -2 log v > 0; R = sqrt(l), one Newton step on the double root */
    dd l = {-2.0 * lg.hi, -2.0 * lg.lo};
    if (!(l.hi > 0.0))
        return 0;
    double s = sqrt(l.hi);
    dd s2 = two_prod(s, s);
    double d = (((l.hi - s2.hi) - s2.lo) + l.lo) / (2.0 * s);
    dd radius = fast_two_sum(s, d);
    /* the angle: w = j / TURNS + h exactly, alpha = 2 pi h < 2^-7.3 */
    int j = (int)(w * TURNS);
    double h = w - (double)j / TURNS;
    dd a = dd_mul_d(two_pi_dd, h);
    dd a2 = dd_mul(a, a);
    double t = a2.hi;
    /* cos a - 1 = -a^2/2 + a^4 (1/24 - a^2/720 + a^4/40320) (beyond: < 2^-95) */
    double c4 = t * t * (1.0 / 24 - t * (1.0 / 720 - t * (1.0 / 40320)));
    dd cm = dd_add((dd){-0.5 * a2.hi, -0.5 * a2.lo}, dd_of(c4));
    /* sin a = a - a^3/6 + a^5 (1/120 - a^2/5040 + a^4/362880) (beyond: < 2^-104) */
    double s5 = a.hi * t * t * (1.0 / 120 - t * (1.0 / 5040 - t * (1.0 / 362880)));
    dd sn = dd_add(dd_add(a, dd_mul(dd_mul(a2, a), (dd){-sixth_dd.hi, -sixth_dd.lo})),
                   dd_of(s5));
    dd C = cos_t[j], S = sin_t[j];
    /* cos(t_j + a) = C + (C (cos a - 1) - S sin a), sin(t_j + a) = S + (S (cos a - 1) + C sin a) */
    dd Sn = dd_mul(S, sn), Cn = dd_mul(C, sn);
    dd cosv = dd_add(C, dd_add(dd_mul(C, cm), (dd){-Sn.hi, -Sn.lo}));
    dd sinv = dd_add(S, dd_add(dd_mul(S, cm), Cn));
    *zc = dd_mul(radius, cosv);
    *zs = dd_mul(radius, sinv);
    /* |z - exact| < 2^-74 (1 + 1/R) (docstring); E takes 16 times that */
    *err = 0x1p-70 * (1.0 + 1.0 / s);
    return 1;
}

/* Ziv's test in doubles, one-sided: 1 (and *out = y.hi) only if every x within err of
   y.hi + y.lo rounds to y.hi: |x - y.hi| <= |y.lo| + err < ulp(y.hi) / 2, and y.hi is
   not a power of two (whose lower neighbour is nearer), normal and finite. Else 0: the
   MPFR test decides. */
static int decided_d(dd y, double err, double *out)
{
    double a = fabs(y.hi);
    if (!(a >= 0x1p-1000 && a <= 0x1p1000))
        return 0;
    int e;
    double m = frexp(a, &e);
    if (m == 0.5)
        return 0;
    if (!(fabs(y.lo) + err <= 0.49 * ldexp(1.0, e - 53))) /* 0.49: the sum's rounding */
        return 0;
    *out = y.hi;
    return 1;
}

/* std * z as a double-double and its error bound, z within err of the 256-bit value:
   |std z_256 - y| <= |std| err + |std - sd| |z| + 2^-103 |std z| (sd = std within
   2^-106 |std|), bounded by |sd.hi| (err + 2^-102 |z.hi|) (1 + 2^-40). */
static dd scale_dd(dd sd, dd z, double err, double *scaled_err)
{
    *scaled_err = fabs(sd.hi) * (err + 0x1p-102 * fabs(z.hi)) * (1.0 + 0x1p-40);
    return dd_mul(sd, z);
}

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
/* The double-double tier alone, for the tests: out = (cos hi, lo, sin hi, lo, E); 0 where
   it does not apply. */
int presk_normal_probe(double v, double w, double *out)
{
    dd c, s;
    if (!tables_built || !box_muller_dd(v, w, &c, &s, &out[4]))
        return 0;
    out[0] = c.hi, out[1] = c.lo, out[2] = s.hi, out[3] = s.lo;
    return 1;
}

void presk_normal_tables(void)
{
    if (!tables_built)
        build_tables();
}

long presk_normal(size_t n, const double *radial, const double *angular, mpfr_srcptr std,
                  long fast, int tier, double *out, long *tiers)
{
    size_t pairs = (n + 1) / 2;
    long slow = 0;
    Work full, quick;
    mpfr_t in, product, e, lo, hi, zq;
    long quick_done = 0;
    work_init(&full, BITS);
    mpfr_init2(in, 53);
    mpfr_init2(product, 2 * BITS);
    int try_fast = fast > 1 && fast < BITS - 8
                   && (std == NULL || (mpfr_number_p(std) && !mpfr_zero_p(std)));
    dd sd = {0.0, 0.0};
    if (try_fast && std != NULL)
        sd = dd_from(std);
    if (try_fast) {
        work_init(&quick, fast);
        mpfr_inits2(fast, lo, hi, zq, (mpfr_ptr)0);
        mpfr_init2(e, 53);
        mpfr_set_ui_2exp(e, 1, 10 - fast, MPFR_RNDN);    /* E = 2^(10 - P) */
    }
    for (size_t j = 0; j < pairs; j++) {
        double v = radial[j], w = angular[j], zc, zs;
        int has_sine = 2 * j + 1 < n;
        if (try_fast && tier && tables_built) {
            dd c, s;
            double err;
            if (box_muller_dd(v, w, &c, &s, &err)) {
                double ec = err, es = err;
                dd yc = c, ys = s;
                if (std != NULL) {
                    yc = scale_dd(sd, c, err, &ec);
                    ys = scale_dd(sd, s, err, &es);
                }
                if (decided_d(yc, ec, &zc) && (!has_sine || decided_d(ys, es, &zs))) {
                    out[2 * j] = zc;
                    if (has_sine)
                        out[2 * j + 1] = zs;
                    quick_done++;
                    continue;
                }
                mpfr_set_d(e, err, MPFR_RNDU);
                mpfr_set_d(zq, c.hi, MPFR_RNDN);
                mpfr_add_d(zq, zq, c.lo, MPFR_RNDN); /* within 2^-128 |z|: in E's margin */
                int ok = decided(zq, e, std, lo, hi, &zc);
                if (ok && has_sine) {
                    mpfr_set_d(zq, s.hi, MPFR_RNDN);
                    mpfr_add_d(zq, zq, s.lo, MPFR_RNDN);
                    ok = decided(zq, e, std, lo, hi, &zs);
                }
                mpfr_set_ui_2exp(e, 1, 10 - fast, MPFR_RNDN);
                if (ok) {
                    out[2 * j] = zc;
                    if (has_sine)
                        out[2 * j + 1] = zs;
                    quick_done++;
                    continue;
                }
            }
        }
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
        mpfr_clears(lo, hi, e, zq, (mpfr_ptr)0);
    }
    work_clear(&full);
    mpfr_clears(in, product, (mpfr_ptr)0);
    tiers[0] = quick_done;
    tiers[1] = (long)pairs - quick_done - slow;
    tiers[2] = slow;
    return slow;
}

/* out[i] = the double nearest a * t[i], the product exact at 320 bits (a of at most 256
   bits, t[i] a double of at most 64 significant bits): xavier_uniform's values. */
void presk_scale(size_t n, mpfr_srcptr a, const double *t, double *out)
{
    mpfr_t x, p;
    mpfr_init2(x, 64);
    mpfr_init2(p, BITS + 64);
    for (size_t i = 0; i < n; i++) {
        mpfr_set_d(x, t[i], MPFR_RNDN);                 /* exact */
        mpfr_mul(p, a, x, MPFR_RNDN);                    /* exact */
        out[i] = mpfr_get_d(p, MPFR_RNDN);
    }
    mpfr_clears(x, p, (mpfr_ptr)0);
}

/* out[i] = Threefry-2x32-20 of the counter c = start + i, as (c >> 32, c mod 2^32), under
   (k0, k1), its first word high: random.random_bits from `start`. */
static inline uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

void presk_bits(uint32_t k0, uint32_t k1, uint64_t start, size_t n, uint64_t *out)
{
    static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
    uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
    for (size_t i = 0; i < n; i++) {
        uint64_t c = start + i;
        uint32_t x0 = (uint32_t)(c >> 32) + ks[0], x1 = (uint32_t)c + ks[1];
        for (int g = 0; g < 5; g++) {
            for (int q = 0; q < 4; q++) {
                x0 += x1;
                x1 = rotl(x1, rot[g % 2][q]) ^ x0;
            }
            x0 += ks[(g + 1) % 3];
            x1 += ks[(g + 2) % 3] + (uint32_t)(g + 1);
        }
        out[i] = ((uint64_t)x0 << 32) | x1;
    }
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

_DEFAULT = gmpy2.context()  # MPFR's exponent range


def _declare(lib: ctypes.CDLL) -> None:
    lib.presk_normal.restype = ctypes.c_long
    lib.presk_normal.argtypes = [ctypes.c_size_t] + [ctypes.c_void_p] * 3
    lib.presk_normal.argtypes += [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.presk_normal_probe.restype = ctypes.c_int
    lib.presk_normal_probe.argtypes = [ctypes.c_double, ctypes.c_double, ctypes.c_void_p]
    lib.presk_normal_tables.restype = None
    lib.presk_normal_tables()
    lib.presk_scale.restype = None
    lib.presk_scale.argtypes = [ctypes.c_size_t] + [ctypes.c_void_p] * 3
    lib.presk_bits.restype = None
    lib.presk_bits.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint64]
    lib.presk_bits.argtypes += [ctypes.c_size_t, ctypes.c_void_p]
    lib.presk_set_doubles.restype = None
    lib.presk_set_doubles.argtypes = [ctypes.c_size_t] + [ctypes.c_void_p] * 2


SYMBOLS = ("presk_normal", "presk_normal_probe", "presk_normal_tables", "presk_scale", "presk_bits")
# touches no Python object but std's
_C = fold_c.Helper("presk_normal", SOURCE, (*SYMBOLS, "presk_set_doubles"), _declare)
available = _C.available


EXPORTED = ("presk_normal_probe", "presk_normal_tables", "presk_normal", "presk_scale",
            "presk_bits", "presk_set_doubles")  # fmt: skip
"""SOURCE's functions with external linkage."""

ENTRY_WRAPPER = r"""
__attribute__((constructor)) static void presk_normal_init(void) { presk_normal_tables(); }
/* value c of normal(key, ·): pair c/2's Box–Muller at 256 bits, rounded to a double (an odd
   count drops its last sine, so the pair computed whole gives the same value) */
__attribute__((unused)) static double presk_normal_at(int64_t k0, int64_t k1, int64_t c) {
    int64_t j = c >> 1;
    double v = 1.0 - presk_uniform(k0, k1, 2 * j), w = presk_uniform(k0, k1, 2 * j + 1);
    double out[2];
    long tiers[3];
    presk_normal(2, &v, &w, NULL, 128, 1, out, tiers); /* FAST */
    return out[c & 1];
}
/* value c of the initializer normal(std = S): std·z exact (S's decimal text at 256 bits, as
   random._real reads it), rounded once to a double: random.normal_init(S) */
__attribute__((unused)) static double presk_normal_std_at(int64_t k0, int64_t k1, int64_t c, const char *text) {
    int64_t j = c >> 1;
    double v = 1.0 - presk_uniform(k0, k1, 2 * j), w = presk_uniform(k0, k1, 2 * j + 1);
    double out[2];
    long tiers[3];
    mpfr_t std;
    mpfr_init2(std, 256);
    mpfr_set_str(std, text, 10, MPFR_RNDN);
    presk_normal(2, &v, &w, std, 128, 1, out, tiers); /* FAST */
    mpfr_clear(std);
    return out[c & 1];
}
/* value c of xavier_uniform with fan_in + fan_out = fans: a·(2u − 1), a = √(6 / fans) at
   256 bits, the product exact, rounded once (random.xavier_uniform) */
__attribute__((unused)) static double presk_xavier_at(int64_t k0, int64_t k1, int64_t c, int64_t fans) {
    double t = 2.0 * presk_uniform(k0, k1, c) - 1.0, out;
    mpfr_t a;
    mpfr_init2(a, 256);
    mpfr_set_ui(a, 6, MPFR_RNDN);
    mpfr_div_si(a, a, (long)fans, MPFR_RNDN);
    mpfr_sqrt(a, a, MPFR_RNDN);
    presk_scale(1, a, &t, &out);
    mpfr_clear(a);
    return out;
}
"""

MPFR_CALLS = ("presk_normal_at(", "presk_normal_std_at(", "presk_xavier_at(")
"""The entry wrapper's functions: a native entry whose C calls one links MPFR."""


def calls_mpfr(text: str) -> bool:
    """The C of a native entry calls the entry wrapper's MPFR functions."""
    return any(name in text for name in MPFR_CALLS)


def entry_source() -> str:
    """SOURCE as a native entry embeds it (presk_cback): every function static (an entry may
    be several translation units), and `presk_normal_at(k0, k1, c)`, value c of
    `random.normal(Key(k0, k1), ·)`, the same bits. The entry's prelude defines
    presk_uniform; it links MPFR (`link()`)."""
    text = SOURCE
    for name in EXPORTED:
        text, n = re.subn(
            rf"^(int|void|long) {name}\(",
            rf"__attribute__((unused)) static \1 {name}(",
            text,
            flags=re.M,
        )
        assert n == 1, name
    rename = "".join(f"#define {n} presk_nc_{n}\n" for n in EXPORTED)
    restore = "".join(f"#undef {n}\n" for n in EXPORTED)
    wrapper = ENTRY_WRAPPER.replace("presk_normal(", "presk_nc_presk_normal(")
    wrapper = wrapper.replace("presk_normal_tables(", "presk_nc_presk_normal_tables(")
    wrapper = wrapper.replace("presk_scale(", "presk_nc_presk_scale(")
    return f"#define FAST {FAST}\n{rename}{text}{restore}#undef FAST\n{wrapper}"


def link() -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The flags (gmpy2's headers) and the libraries (gmpy2's MPFR and GMP) that a native
    entry drawing normals compiles with; None where the interpreter's helpers cannot be
    built here (then neither can that entry)."""
    mpfr = fold_c._mpfr_loaded()
    if mpfr is None:
        return None
    include = os.path.dirname(os.path.realpath(gmpy2.__file__))
    gmp = sorted(mpfr.parent.glob("libgmp*.so*"))[:1]
    return (f"-I{include}",), (str(mpfr), *map(str, gmp), f"-Wl,-rpath,{mpfr.parent}")


def normals(
    radial: np.ndarray,
    angular: np.ndarray,
    n: int,
    std: gmpy2.mpfr | None = None,
    *,
    fast: int = FAST,
    tier: bool = True,
) -> tuple[np.ndarray, tuple[int, int, int]] | None:
    """The n doubles of Box–Muller on the pairs (radial[j], angular[j]) (the ⌈n/2⌉ pairs'
    v = 1 − u[2j] and w = u[2j+1]), times `std` (an mpfr of at most 256 bits) when given,
    and how many pairs each tier decided (double-double, `fast` bits, 256 bits); None where
    C is not available. `tier=False` skips the double-double tier, `fast=0` both."""
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
    tiers = np.zeros((max(len(pieces), 1), 3), dtype=np.int64)

    def run(k: int) -> None:
        j, count = pieces[k]
        at = (v.ctypes.data + 8 * j, w.ctypes.data + 8 * j, out.ctypes.data + 16 * j)
        lanes = tiers.ctypes.data + 24 * k
        _C.lib.presk_normal(count, at[0], at[1], where, fast, int(tier), at[2], lanes)

    if len(pieces) == 1:
        run(0)
    elif pieces:
        with ThreadPoolExecutor(len(pieces)) as pool:
            list(pool.map(run, range(len(pieces))))
    counts = tiers.sum(axis=0)
    return out, (int(counts[0]), int(counts[1]), int(counts[2]))


def bits(k0: int, k1: int, n: int, start: int = 0) -> np.ndarray | None:
    """Draws start … start + n − 1 of random.random_bits(Key(k0, k1), ·) in C (below 2^63);
    None without C."""
    if not available() or start + n >= 2**63:
        return None
    out = np.empty(n, dtype=np.uint64)
    _C.lib.presk_bits(k0, k1, start, n, out.ctypes.data)
    return out


def scaled(a: gmpy2.mpfr, t: np.ndarray) -> np.ndarray | None:
    """The double nearest a·t[i] for each double t[i] (the product exact at 320 bits), as
    xavier_uniform computes it in gmpy2; None without C."""
    if not available():
        return None
    if type(a) is not fold_c.MPFR_TYPE or a.precision > BITS:
        raise ValueError(f"scaled: a is an mpfr of at most {BITS} bits, not {a!r}")
    flat = np.ascontiguousarray(t, dtype=np.float64).reshape(-1)
    out = np.empty(flat.size, dtype=np.float64)
    _C.lib.presk_scale(flat.size, id(a) + fold_c.OFFSET, flat.ctypes.data, out.ctypes.data)
    return out.reshape(np.shape(t))


def probe(v: float, w: float) -> tuple[float, float, float, float, float] | None:
    """The double-double tier on one pair: (cos hi, lo, sin hi, lo, E), for the tests."""
    out = np.zeros(5)
    if not available() or not _C.lib.presk_normal_probe(v, w, out.ctypes.data):
        return None
    return tuple(out.tolist())


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
    _C.lib.presk_set_doubles(flat.size, flat.ctypes.data, into.ctypes.data)
    return out.reshape(x.shape)
