"""erfc of a whole array in C, correctly rounded: the same bits as `gmpy2.erfc`, faster;
and gelu's derivative, element by element in C with the roundings of numpy's loops.

`gelu` and `gelu_grad` need ∘(erfc(−t)) for each element (presk_core.mpfr), and MPFR's
erfc takes 8–70 µs at 256 bits: in the tutorial's training step it was a third of the time.
Here each value is the Taylor series of erfc at the nearest centre c = m/32 (|m| ≤ 256),

    erfc(c + h) = erfc(c) − (2/√π)·e^(−c²)·Σ_{k≥1} (−1)^(k−1)·H_{k−1}(c)·h^k / k!,

|h| ≤ 2^−6, evaluated by Horner's rule at W = p + 40 bits (p the context's precision) with
coefficients kept for each centre and precision (built the first time a value falls near
that centre: erfc(c) by MPFR, the Hermite numbers H_j(c)·32^j exactly in integers; about
40 terms at 256 bits, in one block of memory). The
sum's error is bounded rigorously: each coefficient within 8 roundings at W bits, Horner's
rule within γ_2n (Higham, Accuracy and Stability, §5.1), the truncated tail by Cramér's
inequality |H_n(x)| ≤ 1.0865·2^(n/2)·√(n!)·e^(x²/2), all as upper bounds in MPFR rounding
up. `mpfr_can_round` then says whether that approximation determines ∘_p(erfc(x)); it does
but with a probability of about 2^−30, and then, as for NaN, ±inf and |x| > 8, the value
is left to `gmpy2.erfc`. So every value is MPFR's correctly rounded erfc, bit for bit
(tests/test_erfc_c.py compares them on thousands of points at several precisions). In the
tutorial's training step (|x| < 1.6) it is 2–3× faster than MPFR's erfc, 5–10× where
MPFR's is slowest (|x| near 1 and beyond).

Built, cached and loaded like presk_core.fold_c (presk_core.cc); where it cannot be (no
compiler, `PRESK_INTERP_C=0`), `erfc(x)` is gmpy2's, element by element.
"""

from __future__ import annotations

import ctypes

import gmpy2
import numpy as np

from presk_core import fold_c

SOURCE = (
    fold_c.layout_c("erfc")
    + r"""

#define SCALE 5                    /* centres m / 2^SCALE */
#define REACH 8                    /* |x| <= REACH: the table; beyond, MPFR's erfc */
#define HALF (REACH << SCALE)
#define COUNT (2 * HALF + 1)
#define GUARD 40                   /* W = p + GUARD */
#define TABLES 4

typedef struct {
    int n;            /* the series to h^n; 0: not built yet */
    size_t step;      /* bytes from one coefficient to the next in `a` */
    mpfr_exp_t err;   /* |error| <= 2^err for every |h| <= 2^-(SCALE+1) */
    mpfr_t *a;        /* a[0..n] at W bits, their significands after them: one block */
} Centre;

#define COEFF(z, k) ((mpfr_ptr)((char *)(z)->a + (k) * (z)->step))

typedef struct {
    mpfr_prec_t work; /* W; 0: free */
    Centre *centres;
} Table;

static Table tables[TABLES];
static int next_table;

static Table *table_for(mpfr_prec_t work)
{
    for (int i = 0; i < TABLES; i++)
        if (tables[i].work == work)
            return &tables[i];
    Table *t = &tables[next_table];
    next_table = (next_table + 1) % TABLES;
    if (t->centres != NULL) {
        for (int i = 0; i < COUNT; i++) {
            free(t->centres[i].a);  /* custom mpfr_t: nothing to clear */
        }
        free(t->centres);
    }
    t->centres = calloc(COUNT, sizeof(Centre));
    t->work = t->centres != NULL ? work : 0;
    return t->centres != NULL ? t : NULL;
}

/* The coefficients of the series at c = m / 2^SCALE and the bound of its error. */
static int build(Centre *z, long m, mpfr_prec_t work)
{
    /* a coefficient's mpfr_t, then its significand, rounded up to whole mpfr_t's */
    size_t step = sizeof(mpfr_t) * (2 + (mpfr_custom_get_size(work) - 1) / sizeof(mpfr_t));
    int cap = 16, n;
    mpfr_t c, e, t, b, hm, tail, sum, term;
    mpz_t g0, g1, g2, den;
    mpfr_t *a = malloc(cap * sizeof(mpfr_t));
    if (a == NULL)
        return 0;
    mpfr_inits2(work, c, e, t, (mpfr_ptr)0);
    mpfr_inits2(64, b, hm, tail, sum, term, (mpfr_ptr)0);
    mpz_inits(g0, g1, g2, den, NULL);
    mpfr_set_si_2exp(c, m, -SCALE, MPFR_RNDN);          /* exact */
    mpfr_init2(a[0], work);
    mpfr_erfc(a[0], c, MPFR_RNDN);                       /* 1 rounding */
    /* e = -(2/sqrt(pi)) exp(-c^2): 4.5 roundings */
    mpfr_sqr(t, c, MPFR_RNDN);                           /* exact: m^2 < 2^23 */
    mpfr_neg(t, t, MPFR_RNDN);
    mpfr_exp(e, t, MPFR_RNDN);
    mpfr_const_pi(t, MPFR_RNDN);
    mpfr_sqrt(t, t, MPFR_RNDN);
    mpfr_ui_div(t, 2, t, MPFR_RNDN);
    mpfr_mul(e, e, t, MPFR_RNDN);
    mpfr_neg(e, e, MPFR_RNDN);
    /* b_k >= |a_k| for k >= 1 (Cramer's inequality), hm = 2^-(SCALE+1): upper bounds */
    mpfr_set_si_2exp(hm, 1, -(SCALE + 1), MPFR_RNDN);
    mpfr_sqr(b, c, MPFR_RNDD);
    mpfr_div_2ui(b, b, 1, MPFR_RNDD);
    mpfr_neg(b, b, MPFR_RNDU);
    mpfr_exp(b, b, MPFR_RNDU);                           /* >= exp(-c^2/2) */
    mpfr_mul_d(b, b, 1.2261, MPFR_RNDU);                 /* >= (2/sqrt(pi)) 1.0865 */
    mpfr_abs(sum, a[0], MPFR_RNDU);                      /* sum >= sum |a_k| hm^k */
    mpfr_set(term, hm, MPFR_RNDU);                       /* hm^k */
    mpz_set_ui(g0, 1);                                   /* H_{k-1}(c) 2^(SCALE(k-1)) */
    mpz_set_si(g1, 2 * m);                               /* H_k(c) 2^(SCALE k) */
    mpz_set_ui(den, 1);                                  /* 2^(SCALE(k-1)) k! */
    for (n = 1;; n++) {
        if (n == cap) {
            mpfr_t *more = realloc(a, 2 * cap * sizeof(mpfr_t));
            if (more == NULL) {
                for (int k = 0; k < n; k++)
                    mpfr_clear(a[k]);
                free(a);
                a = NULL;
                break;
            }
            a = more;
            cap *= 2;
        }
        /* a_n = e (-1)^(n-1) H_{n-1}(c) / n!: 3.5 more roundings, 8 in all */
        if (n > 1)
            mpz_mul_2exp(den, den, SCALE);
        mpz_mul_ui(den, den, n);
        mpfr_init2(a[n], work);
        mpfr_set_z(t, g0, MPFR_RNDN);
        mpfr_div_z(t, t, den, MPFR_RNDN);
        if ((n - 1) & 1)
            mpfr_neg(t, t, MPFR_RNDN);
        mpfr_mul(a[n], e, t, MPFR_RNDN);
        /* sum += |a_n| hm^n; b_{n+1} = b_n sqrt(2n)/(n+1); the tail after n is at most
           2 b_{n+1} hm^(n+1) (each ratio of the bounds is at most 1/2) */
        mpfr_abs(tail, a[n], MPFR_RNDU);
        mpfr_mul(tail, tail, term, MPFR_RNDU);
        mpfr_add(sum, sum, tail, MPFR_RNDU);
        mpfr_set_ui(tail, 2 * n, MPFR_RNDU);
        mpfr_sqrt(tail, tail, MPFR_RNDU);
        mpfr_mul(b, b, tail, MPFR_RNDU);
        mpfr_div_ui(b, b, n + 1, MPFR_RNDU);
        mpfr_mul(term, term, hm, MPFR_RNDU);
        mpfr_mul(tail, b, term, MPFR_RNDU);
        mpfr_mul_2ui(tail, tail, 1, MPFR_RNDU);
        /* H_{n+1} = 2c H_n - 2n H_{n-1}, scaled: G_{n+1} = 2m G_n - 2n 2^(2 SCALE) G_{n-1} */
        mpz_mul_si(g2, g1, 2 * m);
        mpz_submul_ui(g2, g0, (unsigned long)(2 * n) << (2 * SCALE));
        mpz_swap(g0, g1);
        mpz_swap(g1, g2);
        /* stop when the tail is below 2^-W |a_0| */
        if (mpfr_get_exp(tail) < mpfr_get_exp(a[0]) - (mpfr_exp_t)work - 1 || n > 4000)
            break;
    }
    if (a != NULL) {
        /* the coefficients in one block, each mpfr_t then its significand, so that a sum
           reads them in one sweep of memory (they were scattered, one malloc each) */
        char *block = malloc((n + 1) * step);
        if (block != NULL)
            for (int k = 0; k <= n; k++) {
                mpfr_ptr x = (mpfr_ptr)(block + k * step);
                void *significand = block + k * step + sizeof(mpfr_t);
                mpfr_custom_init(significand, work);
                mpfr_custom_init_set(x, MPFR_ZERO_KIND, 0, work, significand);
                mpfr_set(x, a[k], MPFR_RNDN);  /* exact: the same precision */
            }
        for (int k = 0; k <= n; k++)
            mpfr_clear(a[k]);
        free(a);
        a = (mpfr_t *)block;
    }
    if (a != NULL) {
        /* err >= (2n + 17) 2^-W sum + tail */
        mpfr_mul_ui(sum, sum, 2 * n + 17, MPFR_RNDU);
        mpfr_div_2ui(sum, sum, work, MPFR_RNDU);
        mpfr_add(sum, sum, tail, MPFR_RNDU);
        z->err = mpfr_get_exp(sum);                      /* sum < 2^EXP(sum) */
        z->a = a;
        z->step = step;
        z->n = n;
    }
    mpfr_clears(c, e, t, b, hm, tail, sum, term, (mpfr_ptr)0);
    mpz_clears(g0, g1, g2, den, NULL);
    return a != NULL;
}

/* out[i] = erfc(x[i]) rounded to nearest at prec bits where the series decides it
   (done[i] = 1); elsewhere done[i] = 0 and out[i] untouched. x: objects; out: mpfr_t of
   fresh objects of prec bits. */
void presk_erfc(size_t count, char **x, mpfr_ptr *out, long prec, unsigned char *done)
{
    mpfr_prec_t work = prec + GUARD;
    Table *table = table_for(work);
    mpfr_t h, s;
    mpfr_init2(h, 2);
    mpfr_init2(s, work);
    for (size_t i = 0; i < count; i++) {
        done[i] = 0;
        if (table == NULL || *(const void **)(x[i] + at_type) != mpfr_type)
            continue;
        mpfr_ptr v = (mpfr_ptr)(x[i] + at_value);
        if (!mpfr_number_p(v) || mpfr_cmpabs_ui(v, REACH) > 0)
            continue;
        mpfr_prec_t hp = mpfr_get_prec(v) + SCALE + 2;
        if (mpfr_get_prec(h) != hp)
            mpfr_set_prec(h, hp);
        mpfr_mul_2ui(h, v, SCALE, MPFR_RNDN);            /* exact */
        long m = mpfr_get_si(h, MPFR_RNDN);
        if (m < -HALF || m > HALF)
            continue;
        mpfr_set_si_2exp(s, m, -SCALE, MPFR_RNDN);
        if (mpfr_sub(h, v, s, MPFR_RNDN) != 0)           /* h = x - c, exact */
            continue;
        Centre *z = &table->centres[m + HALF];
        if (z->n == 0 && !build(z, m, work))
            continue;
        mpfr_set(s, COEFF(z, z->n), MPFR_RNDN);
        for (int k = z->n - 1; k >= 0; k--) {
            mpfr_mul(s, s, h, MPFR_RNDN);
            mpfr_add(s, s, COEFF(z, k), MPFR_RNDN);
        }
        if (mpfr_zero_p(s) || !mpfr_can_round(s, mpfr_get_exp(s) - z->err, MPFR_RNDN,
                                              MPFR_RNDZ, prec + 1))
            continue;
        mpfr_set(out[i], s, MPFR_RNDN);
        done[i] = 1;
    }
    mpfr_clear(h);
    mpfr_clear(s);
}

static int is_mpfr(const char *object)
{
    return *(const void **)(object + at_type) == mpfr_type;
}

/* out[i] = ct[i] (twice[i] / 2 + x[i] (exp(-(x[i] x[i]) half) / root)), each operation
   rounded to nearest at prec bits, in the order presk_core.adjoints.gelu_grad makes them
   with numpy (twice: 2 Phi(x), half: 1/2, root: sqrt(2 pi)); 1, and out untouched, if an
   operand is not an mpfr. */
int presk_gelu_grad(size_t count, char **ct, char **x, char **twice, char *half, char *root,
                    mpfr_ptr *out, long prec)
{
    if (!is_mpfr(half) || !is_mpfr(root))
        return 1;
    for (size_t i = 0; i < count; i++)
        if (!is_mpfr(ct[i]) || !is_mpfr(x[i]) || !is_mpfr(twice[i]))
            return 1;
    mpfr_srcptr hv = (mpfr_srcptr)(half + at_value), rv = (mpfr_srcptr)(root + at_value);
    mpfr_t big_phi, t;
    mpfr_init2(big_phi, prec);
    mpfr_init2(t, prec);
    for (size_t i = 0; i < count; i++) {
        mpfr_srcptr c = (mpfr_srcptr)(ct[i] + at_value), v = (mpfr_srcptr)(x[i] + at_value);
        mpfr_div_ui(big_phi, (mpfr_srcptr)(twice[i] + at_value), 2, MPFR_RNDN); /* Phi */
        mpfr_mul(t, v, v, MPFR_RNDN);
        mpfr_neg(t, t, MPFR_RNDN);
        mpfr_mul(t, t, hv, MPFR_RNDN);
        mpfr_exp(t, t, MPFR_RNDN);
        mpfr_div(t, t, rv, MPFR_RNDN);                                        /* phi */
        mpfr_mul(t, v, t, MPFR_RNDN);
        mpfr_add(t, big_phi, t, MPFR_RNDN);
        mpfr_mul(out[i], c, t, MPFR_RNDN);
    }
    mpfr_clear(big_phi);
    mpfr_clear(t);
    return 0;
}
"""
)

_ERFC = np.frompyfunc(gmpy2.erfc, 1, 1)
_DEFAULT = gmpy2.context()  # MPFR's exponent range, which the C's operations use


def _plain(context) -> bool:
    """A context where MPFR's values are gmpy2's: round to nearest, MPFR's exponent range,
    no subnormalization."""
    return (
        context.round == gmpy2.RoundToNearest
        and not context.subnormalize
        and context.emax == _DEFAULT.emax
        and context.emin == _DEFAULT.emin
    )


def _declare(lib: ctypes.PyDLL) -> None:
    lib.presk_erfc_layout.restype = None
    lib.presk_erfc_layout.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    lib.presk_erfc_layout(id(fold_c.MPFR_TYPE), fold_c.AT_TYPE, fold_c.OFFSET)
    lib.presk_erfc.restype = None
    lib.presk_erfc.argtypes = [ctypes.c_size_t] + [ctypes.c_void_p] * 2
    lib.presk_erfc.argtypes += [ctypes.c_long, ctypes.c_void_p]
    lib.presk_gelu_grad.restype = ctypes.c_int
    lib.presk_gelu_grad.argtypes = [ctypes.c_size_t] + [ctypes.c_void_p] * 6 + [ctypes.c_long]


# a PyDLL holds the GIL: the tables are shared
_C = fold_c.Helper(
    "presk_erfc",
    SOURCE,
    ("presk_erfc_layout", "presk_erfc", "presk_gelu_grad"),
    _declare,
    fold_c.PYDLL,
)
available = _C.available


def erfc(x: np.ndarray) -> np.ndarray:
    """∘(erfc(x)) of each element of the object array x, at the context's precision, round
    to nearest: `gmpy2.erfc`'s values, by the series where it decides them, else by it."""
    context = gmpy2.get_context()
    if x.size == 0 or not available() or not _plain(context):
        return _ERFC(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    count = flat.size
    out = fold_c.fresh(count)
    done = np.zeros(count, dtype=np.uint8)
    where, into = fold_c.addresses(flat), fold_c.slots(out)  # alive through the call
    _C.lib.presk_erfc(
        count, where.ctypes.data, into.ctypes.data, context.precision, done.ctypes.data
    )
    left = done == 0
    if left.any():
        out[left] = _ERFC(flat[left])
    return out.reshape(x.shape)


def gelu_grad(ct: np.ndarray, x: np.ndarray, twice: np.ndarray, half, root) -> np.ndarray | None:
    """ct·(Φ(x) + x·φ(x)) element by element in C, with the roundings and the order of
    presk_core.adjoints.gelu_grad (`twice` = 2Φ(x) as gelu computed it, `half` = 1/2,
    `root` = √(2π) as gelu_density rounds it); None where it does not apply (operands of
    other shapes or types, no compiler): then numpy's loops."""
    context = gmpy2.get_context()
    if not available() or np.shape(ct) != np.shape(x) or not _plain(context):
        return None
    args = [fold_c.addresses(np.ascontiguousarray(a)) for a in (ct, x, twice)]
    out = fold_c.fresh(args[0].size)
    into = fold_c.slots(out)
    failed = _C.lib.presk_gelu_grad(
        out.size,
        *(a.ctypes.data for a in args),
        id(half),
        id(root),
        into.ctypes.data,
        context.precision,
    )
    return None if failed else out.reshape(np.shape(x))
