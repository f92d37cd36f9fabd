/* presk libm: the transcendentals of the native backend, the C export and (through a
 * compiled helper) the kernel interpreter (DESIGN §11).
 *
 * Plain C11, every function `static inline`, branch-free (selects, no table lookups that
 * depend on the argument), so that a vectorizing compiler runs it lane for lane and the
 * bits never depend on the lanes. Compile with -ffp-contract=off (every fused multiply-add
 * below is written as fma()) and -fno-trapping-math (selects of computed values vectorize;
 * no value changes). sqrt and division are IEEE's. The f32 functions compute in
 * f64 with series fitted for f32 (shorter), and round once, but erfcf, which computes in f32
 * (within 2.5 ulp). Accuracy against MPFR:
 * docs/native.md ("presk libm").
 *
 * Algorithms: exp/expm1 reduce x = k·ln2 + r (ln2 in two parts, fdlibm's), expm1(r) by its
 * Taylor series (|r| <= 0.35, 14 terms) with a correction for the rounding of r; log and
 * log1p are musl's (fdlibm's, branches turned into selects); tanh = expm1(2|x|)/(expm1+2);
 * sigmoid = e/(1+e) or 1/(1+e), e = exp(-|x|); erfc(z) = t·exp(-z²)·exp(F(t)),
 * t = 2/(2+z), F a 32-term Chebyshev series (Clenshaw), z² split exactly by fma; erf(x) =
 * x·E(x²) for |x| <= 1 (14 Chebyshev terms), 1 − erfc(|x|) beyond; sin and cos reduce by a
 * three-part π/2 (exact first step by fma, then a two-sum) and use fdlibm's kernels.
 * Constants of the series: presk_cback/libm/fit.py.
 */
#ifndef PRESK_LIBM_H
#define PRESK_LIBM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define PRESK_INLINE static inline __attribute__((always_inline))

PRESK_INLINE uint64_t presk_bits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
PRESK_INLINE double presk_from_bits(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }
/* 2^k for -1022 <= k <= 1023 (other k give garbage, never undefined behaviour) */
PRESK_INLINE double presk_pow2(int64_t k) { return presk_from_bits(((uint64_t)k + 1023u) << 52); }

#define PRESK_SHIFT 0x1.8p52
#define PRESK_INV_LN2 0x1.71547652b82fep+0
#define PRESK_LN2_HI 0x1.62e42fee00000p-1 /* 32 bits: k·LN2_HI is exact for |k| < 2^21 */
#define PRESK_LN2_LO 0x1.a39ef35793c76p-33
#define PRESK_2_PI 0x1.45f306dc9c883p-1
#define PRESK_PIO2_1 0x1.921fb54442d18p+0
#define PRESK_PIO2_2 0x1.1a62633145c07p-54
#define PRESK_PIO2_3 -0x1.f1976b7ed8fbcp-110

static const double presk_erfc_cheb[32] = {
    -0x1.4d7ab6d479a61p-1,
    0x1.48b043be61cf8p-1,
    0x1.3f1a3fdd047b2p-6,
    -0x1.394fcca79fc6cp-7,
    -0x1.f049e06073f95p-11,
    0x1.80a8ba56aa79fp-12,
    0x1.64b62509d78e2p-15,
    -0x1.5437d46df3674p-16,
    -0x1.b4045bf3ab82ep-20,
    0x1.5df28bff56fe4p-20,
    0x1.0c75d14776c3ep-26,
    -0x1.6e18471000f52p-24,
    0x1.c0ac572395fb0p-28,
    0x1.5bace97b36ccfp-28,
    -0x1.10810cfbab426p-30,
    -0x1.f3fb2f5c75c6cp-33,
    0x1.a8453647a8215p-34,
    0x1.50ee4fe907598p-39,
    -0x1.e48fa4ddcffdbp-38,
    0x1.f78d4bbe8312dp-41,
    0x1.6082aa4eb3e8bp-42,
    -0x1.fb97bc189c023p-44,
    0x1.b75e120daf190p-52,
    0x1.00062e988ab83p-47,
    -0x1.b6fba56e4b232p-50,
    -0x1.b4265b636f01ep-54,
    0x1.170fc578dd6f5p-53,
    -0x1.03cae5e365c28p-55,
    0x1.e0d1232aacb76p-65,
    0x1.575363c0ac453p-59,
    -0x1.f491be88051bfp-61,
    0x1.e039bfaa7ebfbp-64,
};
static const double presk_erf_cheb[14] = {
    0x1.f371b6a14d252p-1,
    -0x1.2359d7bb47ad4p-3,
    0x1.48d890a562437p-7,
    -0x1.2e730c943d0bcp-11,
    0x1.cc07b53e9ea30p-16,
    -0x1.28701fcdfc82dp-20,
    0x1.4a9dab1235699p-25,
    -0x1.44978328e455dp-30,
    0x1.1c6a2e6156874p-35,
    -0x1.c1daad3671359p-41,
    0x1.44179351f6dd1p-46,
    -0x1.acbabf57cea41p-52,
    0x1.06139757ceda2p-57,
    -0x1.29b9f1b3df556p-63,
};

/* Σ c_j T_j(y) by Clenshaw's recurrence (c_0 already halved). */
PRESK_INLINE double presk_clenshaw(const double *c, int n, double y) {
    double b1 = 0.0, b2 = 0.0, y2 = 2.0 * y;
#pragma GCC unroll 40 /* unrolled whole, so that an elementwise loop around it vectorizes */
    for (int j = n - 1; j >= 1; j--) {
        double b0 = fma(y2, b1, c[j] - b2);
        b2 = b1;
        b1 = b0;
    }
    return fma(y, b1, c[0] - b2);
}

/* expm1(x + tail) for |x| <~ 1100, |tail| <= ulp(x), as 2^k·(1 + e) − 1: returns
 * e = expm1(r + c), sets *k. */
PRESK_INLINE double presk_expm1_core(double x, double tail, int64_t *k) {
    double t = x * PRESK_INV_LN2 + PRESK_SHIFT;
    double kd = t - PRESK_SHIFT;
    *k = (int64_t)(presk_bits(t) - presk_bits(PRESK_SHIFT));
    double hi = x - kd * PRESK_LN2_HI; /* exact */
    double lo = kd * PRESK_LN2_LO;
    double r = hi - lo;
    double c = ((hi - r) - lo) + tail; /* what r lost */
    /* h = (expm1(r) − r)/r² = Σ_{n>=2} r^(n−2)/n! */
    double h = 0x1.93974a8c07c9dp-37; /* 1/14! */
    h = fma(h, r, 0x1.6124613a86d09p-33); /* 1/13! */
    h = fma(h, r, 0x1.1eed8eff8d898p-29); /* 1/12! */
    h = fma(h, r, 0x1.ae64567f544e4p-26); /* 1/11! */
    h = fma(h, r, 0x1.27e4fb7789f5cp-22); /* 1/10! */
    h = fma(h, r, 0x1.71de3a556c734p-19); /* 1/9! */
    h = fma(h, r, 0x1.a01a01a01a01ap-16); /* 1/8! */
    h = fma(h, r, 0x1.a01a01a01a01ap-13); /* 1/7! */
    h = fma(h, r, 0x1.6c16c16c16c17p-10); /* 1/6! */
    h = fma(h, r, 0x1.1111111111111p-7); /* 1/5! */
    h = fma(h, r, 0x1.5555555555555p-5); /* 1/4! */
    h = fma(h, r, 0x1.5555555555555p-3); /* 1/3! */
    h = fma(h, r, 0.5);
    double p = fma(r * r, h, r);
    return fma(c, 1.0 + p, p); /* expm1(r + c) ≈ p + c·(1 + p) */
}

/* exp(x + tail), |tail| <= ulp(x) */
PRESK_INLINE double presk_exp_tail(double x, double tail) {
    double xc = x > 1100.0 ? 1100.0 : (x < -1100.0 ? -1100.0 : x);
    int64_t k;
    double e = presk_expm1_core(xc, tail, &k);
    int64_t k1 = k >> 1, k2 = k - k1; /* two scalings: subnormal and huge results too */
    return (1.0 + e) * presk_pow2(k1) * presk_pow2(k2);
}

/* the limits selected on the result (a clamped argument made GCC compute each side apart):
 * the same bits as presk_exp_tail(x, 0) but for a NaN's, which passes */
PRESK_INLINE double presk_exp(double x) {
    int64_t k;
    double e = presk_expm1_core(x, 0.0, &k);
    int64_t k1 = k >> 1, k2 = k - k1;
    double y = (1.0 + e) * presk_pow2(k1) * presk_pow2(k2);
    y = x > 1100.0 ? INFINITY : y;
    y = x < -1100.0 ? 0.0 : y;
    return x != x ? x : y;
}

PRESK_INLINE double presk_expm1(double x) {
    double xc = x > 1100.0 ? 1100.0 : (x < -60.0 ? -60.0 : x);
    int64_t k;
    double e = presk_expm1_core(xc, 0.0, &k);
    int64_t ks = k > 1000 ? 1000 : k;
    double s = presk_pow2(ks);
    double small = fma(s, e, s - 1.0); /* 2^k·e exact, one rounding */
    int64_t k1 = k >> 1, k2 = k - k1;
    double big = (1.0 + e) * presk_pow2(k1) * presk_pow2(k2);
    double res = k > 60 ? big : small;
    return x == 0.0 ? x : res; /* keeps −0 */
}

/* log(1 + f) − f for the reduced f, with s = f/(2+f): fdlibm's series in s² */
PRESK_INLINE double presk_log_series(double s) {
    double z = s * s, w = z * z;
    double t1 = w * (0x1.999999997fa04p-2 + w * (0x1.c71c51d8e78afp-3 + w * 0x1.39a09d078c69fp-3));
    double t2 = z * (0x1.5555555555593p-1 + w * (0x1.2492494229359p-2 + w * (0x1.7466496cb03dep-3 + w * 0x1.2f112df3e5244p-3)));
    return t2 + t1;
}

PRESK_INLINE double presk_log(double x) {
    int sub = x < 0x1p-1022;
    double xs = sub ? x * 0x1p54 : x;
    uint64_t u = presk_bits(xs);
    uint32_t hx = (uint32_t)(u >> 32) + (0x3ff00000u - 0x3fe6a09eu);
    int32_t k = (int32_t)(hx >> 20) - 0x3ff - (sub ? 54 : 0); /* int32: AVX2 converts it */
    hx = (hx & 0x000fffffu) + 0x3fe6a09eu;
    double m = presk_from_bits(((uint64_t)hx << 32) | (u & 0xffffffffu));
    double f = m - 1.0;
    double hfsq = 0.5 * f * f;
    double s = f / (2.0 + f);
    double R = presk_log_series(s);
    double dk = (double)k;
    double res = s * (hfsq + R) + dk * PRESK_LN2_LO - hfsq + f + dk * PRESK_LN2_HI;
    res = x == INFINITY ? x : res;
    res = x == 0.0 ? -INFINITY : res;
    res = x < 0.0 ? NAN : res;
    return x != x ? x : res;
}

PRESK_INLINE double presk_log1p(double x) {
    double u1 = 1.0 + x;
    uint64_t u = presk_bits(u1);
    uint32_t hu = (uint32_t)(u >> 32) + (0x3ff00000u - 0x3fe6a09eu);
    int32_t k = (int32_t)(hu >> 20) - 0x3ff; /* int32: AVX2 converts it to double */
    /* the rounding of 1 + x, put back as c/u */
    double c = k >= 2 ? 1.0 - (u1 - x) : x - (u1 - 1.0);
    c = k < 54 ? c / u1 : 0.0;
    hu = (hu & 0x000fffffu) + 0x3fe6a09eu;
    double f = presk_from_bits(((uint64_t)hu << 32) | (u & 0xffffffffu)) - 1.0;
    /* 1 + x in [sqrt(2)/2, sqrt(2)): x itself, nothing lost */
    int near = x < 0x1.6a09e667f3bcdp-2 && x > -0x1.2bec333018867p-2;
    f = near ? x : f;
    c = near ? 0.0 : c;
    k = near ? 0 : k;
    double hfsq = 0.5 * f * f;
    double s = f / (2.0 + f);
    double R = presk_log_series(s);
    double dk = (double)k;
    double res = s * (hfsq + R) + (dk * PRESK_LN2_LO + c) - hfsq + f + dk * PRESK_LN2_HI;
    res = x == INFINITY ? x : res;
    res = x == -1.0 ? -INFINITY : res;
    res = x < -1.0 ? NAN : res;
    res = x == 0.0 ? x : res; /* keeps −0 */
    return x != x ? x : res;
}

PRESK_INLINE double presk_tanh(double x) {
    double a = fabs(x);
    a = a > 20.0 ? 20.0 : a; /* tanh(20) rounds to 1 */
    double em = presk_expm1(2.0 * a);
    return copysign(em / (em + 2.0), x);
}

PRESK_INLINE double presk_sigmoid(double x) {
    double e = presk_exp(-fabs(x));
    return (x < 0.0 ? e : 1.0) / (1.0 + e);
}

/* erfc(z) for z >= 0 (NaN passes) */
PRESK_INLINE double presk_erfc_pos(double z) {
    double zc = z > 28.0 ? 28.0 : z; /* erfc(28) underflows */
    double t = 2.0 / (2.0 + zc);
    double F = presk_clenshaw(presk_erfc_cheb, 32, 2.0 * t - 1.0);
    double h = zc * zc, hl = fma(zc, zc, -h); /* z² = h + hl exactly */
    double b = F - hl, a = b - h; /* a + at = F − z², by a two-sum */
    double bp = a - b;
    double at = (b - (a - bp)) + (-h - bp);
    return t * presk_exp_tail(a, at);
}

PRESK_INLINE double presk_erfc(double x) {
    double e = presk_erfc_pos(fabs(x));
    e = x < 0.0 ? 2.0 - e : e;
    return x != x ? x : e; /* NaN in, the same NaN out (issue 26: not fabs(x)'s) */
}

PRESK_INLINE double presk_erf(double x) {
    double a = fabs(x);
    double small = a * presk_clenshaw(presk_erf_cheb, 14, 2.0 * (a * a) - 1.0);
    double big = 1.0 - presk_erfc_pos(a);
    return copysign(a <= 1.0 ? small : big, x);
}

/* x = n·π/2 + yh + yl, |yh| <= ~π/4 (accurate for |x| < 2^50) */
PRESK_INLINE int64_t presk_reduce_pio2(double x, double *yh, double *yl) {
    double t = x * PRESK_2_PI + PRESK_SHIFT;
    double nd = t - PRESK_SHIFT;
    double r = fma(-nd, PRESK_PIO2_1, x); /* exact */
    double w = nd * PRESK_PIO2_2, we = fma(nd, PRESK_PIO2_2, -w);
    double s = r - w; /* two-sum of r and −w */
    double bp = s - r;
    double e = (r - (s - bp)) + (-w - bp);
    double lo = (e - we) - nd * PRESK_PIO2_3;
    double h = s + lo;
    *yh = h;
    *yl = lo - (h - s);
    return (int64_t)(presk_bits(t) - presk_bits(PRESK_SHIFT));
}

/* fdlibm's kernels on [−π/4, π/4], x + y the argument */
PRESK_INLINE double presk_kernel_sin(double x, double y) {
    double z = x * x, w = z * z, v = z * x;
    double r = 0x1.111111110f8a6p-7 + z * (-0x1.a01a019c161d5p-13 + z * 0x1.71de357b1fe7dp-19)
               + z * w * (-0x1.ae5e68a2b9cebp-26 + z * 0x1.5d93a5acfd57cp-33);
    return x - ((z * (0.5 * y - v * r) - y) - v * -0x1.5555555555549p-3);
}

PRESK_INLINE double presk_kernel_cos(double x, double y) {
    double z = x * x, w = z * z;
    double r = z * (0x1.555555555554cp-5 + z * (-0x1.6c16c16c15177p-10 + z * 0x1.a01a019cb159p-16))
               + w * w * (-0x1.27e4f809c52adp-22 + z * (0x1.1ee9ebdb4b1c4p-29 + z * -0x1.8fae9be8838d4p-37));
    double hz = 0.5 * z, u = 1.0 - hz;
    return u + (((1.0 - u) - hz) + (z * r - x * y));
}

/* Beyond 2^50 the reduction would need Payne–Hanek's many bits of 2/π: NaN there, not a
 * wrong number (docs/native.md). */
#define PRESK_TRIG_MAX 0x1p50

PRESK_INLINE double presk_sin(double x) {
    double yh, yl;
    int64_t n = presk_reduce_pio2(x, &yh, &yl);
    double s = presk_kernel_sin(yh, yl), c = presk_kernel_cos(yh, yl);
    double v = (n & 1) ? c : s;
    v = (n & 2) ? -v : v;
    v = fabs(x) < PRESK_TRIG_MAX ? v : NAN;
    return x == 0.0 ? x : v; /* keeps −0 */
}

PRESK_INLINE double presk_cos(double x) {
    double yh, yl;
    int64_t n = presk_reduce_pio2(x, &yh, &yl);
    double s = presk_kernel_sin(yh, yl), c = presk_kernel_cos(yh, yl);
    double v = (n & 1) ? s : c;
    v = ((n + 1) & 2) ? -v : v;
    return fabs(x) < PRESK_TRIG_MAX ? v : NAN;
}

/* ---- f32 ----------------------------------------------------------------------------
 * Evaluated in f64 by series fitted for f32 (fit.py), rounded once to f32: the value before
 * that rounding is within a relative 2^-41 of the function, so the result is within
 * 0.5 + 2^-17 ulp (correctly rounded but where the exact value lies that close to a
 * midpoint between two floats). Subnormal results come from that one rounding. An f32
 * argument is exact in f64, and so is its square. log, log1p, sin and cos are the f64
 * functions rounded once. exp and erfc are the exceptions: f32 arithmetic, 8 lanes a
 * 256-bit vector, within 0.76 and 2.5 ulp (presk_expf, presk_erfcf below). */
/* error 2^-42.7 */
static const double presk_erfcf_poly[18] = {
    -0x1.227dba32d7c25p-1,
    0x1.283a0f72e6586p-1,
    0x1.20e97aa986bd6p-6,
    -0x1.f83c67a55d220p-6,
    -0x1.728fe5996627ap-10,
    0x1.084b13033a9e8p-8,
    -0x1.03db3d17527aep-12,
    -0x1.48d5ff1cfb391p-11,
    0x1.4cf9a55aa8f65p-13,
    0x1.56cc8b9f29a6bp-14,
    -0x1.9b41671605522p-15,
    -0x1.cc3f196effd13p-19,
    0x1.6090b2f370773p-17,
    -0x1.2111cf353f362p-19,
    -0x1.90e7635b9c65ep-20,
    0x1.8563cd15628d2p-21,
    0x1.c8ee7bb0a8416p-24,
    -0x1.925e1f74524cap-24,
};
#define PRESK_ERFCF_A 0x1.2e8ba2e8ba2e9p+1
#define PRESK_ERFCF_B -0x1.5d1745d1745d2p+0
/* error 2^-45.6 */
static const double presk_erff_poly[10] = {
    0x1.20dd750429b19p+0,
    -0x1.812746b0271ecp-2,
    0x1.ce2f2197bc2efp-4,
    -0x1.b82ce15c3b7f8p-6,
    0x1.565ba0406c001p-8,
    -0x1.c0286cad68e02p-11,
    0x1.f941bed7e7847p-14,
    -0x1.f0705a1dde9aap-17,
    0x1.9ae0986f9de4fp-20,
    -0x1.c1a515de8637ap-24,
};
/* error 2^-46.0 */
static const double presk_expf_poly[10] = {
    0x1.000000000003dp+0,
    0x1.0000000000006p+0,
    0x1.ffffffffe74f1p-2,
    0x1.5555555550d88p-3,
    0x1.55555588b8403p-5,
    0x1.11111123bf154p-7,
    0x1.6c162bb7d965cp-10,
    0x1.a01994c849582p-13,
    0x1.a17df0d914d6cp-16,
    0x1.72e107c874de9p-19,
};
/* error 2^-41.0 */
static const double presk_expm1f_poly[8] = {
    0x1.fffffffffe069p-2,
    0x1.5555555554f97p-3,
    0x1.55555565c559fp-5,
    0x1.111111170ad56p-7,
    0x1.6c166be75a859p-10,
    0x1.a019c3721fb3ep-13,
    0x1.a136b06babd51p-16,
    0x1.72ad3ae3ed777p-19,
};

/* erfcf, in f32 arithmetic (below) */
#define PRESK_ERFCF_SMALL 0x1.8000000000000p-1f /* (1 − x) − x·D(x²) up to here */
#define PRESK_ERFCF_ZMAX 0x1.4333340000000p+3f /* z clamped to it */
/* absolute error 2^-29.2 */
static const float presk_erfcf_d[6] = {
    0x1.06eba80000000p-3f,
    -0x1.81273c0000000p-2f,
    0x1.ce2b520000000p-4f,
    -0x1.b7b2640000000p-6f,
    0x1.4f774a0000000p-8f,
    -0x1.6374760000000p-11f,
};
#define PRESK_ERFCF_TC 0x1.c8fde20000000p-2f
#define PRESK_ERFCF_C0H 0x1.e6e0c00000000p-2f
#define PRESK_ERFCF_C0L 0x1.a1465c0000000p-27f
/* error 2^-27.0 */
static const float presk_erfcf_p[8] = {
    0x1.41c7360000000p-1f,
    0x1.10b6dc0000000p-1f,
    0x1.6f85480000000p-3f,
    -0x1.1f432a0000000p-3f,
    -0x1.0c5e840000000p-3f,
    0x1.22cd9e0000000p-4f,
    0x1.420e460000000p-4f,
    -0x1.bf7dd00000000p-5f,
};
/* error 2^-10.0 */
static const float presk_erfcf_s[4] = {
    0x1.2c60b60000000p-2f,
    0x1.c7482c0000000p-2f,
    0x1.1c4c880000000p+0f,
    0x1.f633fc0000000p-2f,
};
/* error 2^-27.7 */
static const float presk_expf32_g[6] = {
    0x1.0000000000000p-1f,
    0x1.5555540000000p-3f,
    0x1.5555000000000p-5f,
    0x1.1113440000000p-7f,
    0x1.6d314e0000000p-10f,
    0x1.9d7fa40000000p-13f,
};

/* Σ c_j x^j as Σ_{k<4} x^k·P_k(x⁴), each P_k by Horner's rule: four chains of n/4 fmas
 * at once instead of one of n (the loops around are bound by the fmas' latency) */
PRESK_INLINE double presk_horner(const double *c, int n, double x) {
    double x2 = x * x, x4 = x2 * x2, p[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        int top = k + 4 * ((n - 1 - k) / 4);
        p[k] = c[top];
#pragma GCC unroll 8
        for (int j = top - 4; j >= 0; j -= 4) p[k] = fma(p[k], x4, c[j]);
    }
    return fma(fma(p[3], x, p[2]), x2, fma(p[1], x, p[0]));
}

/* exp(x) for |x| <= 700, relative error < 2^-45 (k·ln2 off by at most 2^-45 too) */
PRESK_INLINE double presk_exp_short(double x) {
    double t = x * PRESK_INV_LN2 + PRESK_SHIFT;
    double kd = t - PRESK_SHIFT;
    int64_t k = (int64_t)(presk_bits(t) - presk_bits(PRESK_SHIFT));
    double r = fma(-kd, 0x1.62e42fefa39efp-1, x); /* |r| <= ln2/2 */
    return presk_horner(presk_expf_poly, 10, r) * presk_pow2(k);
}

/* expm1(x) for -60 <= x <= 700, relative error < 2^-41: 2^k·(1 + e) − 1, e = expm1(r) */
PRESK_INLINE double presk_expm1_short(double x) {
    double t = x * PRESK_INV_LN2 + PRESK_SHIFT;
    double kd = t - PRESK_SHIFT;
    int64_t k = (int64_t)(presk_bits(t) - presk_bits(PRESK_SHIFT));
    double r = fma(-kd, 0x1.62e42fefa39efp-1, x);
    double e = fma(r * r, presk_horner(presk_expm1f_poly, 8, r), r);
    double s = presk_pow2(k);
    return fma(s, e, s - 1.0); /* e itself for k = 0 */
}

/* erfc(z) for z >= 0 (NaN passes), relative error < 2^-42 */
PRESK_INLINE double presk_erfc_short(double z) {
    double d = 2.0 + z;
    /* t = 2/d: an f32 quotient (twice the lanes of an f64 one), then a Newton step */
    double t0 = (double)(2.0f / (float)d);
    double t = fma(t0, fma(-d, 0.5 * t0, 1.0), t0);
    double F = presk_horner(presk_erfcf_poly, 18, fma(t, PRESK_ERFCF_A, PRESK_ERFCF_B));
    double e = t * presk_exp_short(F - z * z); /* z² exact: z is an f32 */
    return z > 11.0 ? 0.0 : e; /* erfc(10.06) rounds to 0 in f32 */
}

/* ---- f32 arithmetic: expf's and erfcf's parts ---- */
/* Σ c_j x^j in f32 by Horner's rule */
PRESK_INLINE float presk_hornerf(const float *c, int n, float x) {
    float p = c[n - 1];
#pragma GCC unroll 16
    for (int j = n - 2; j >= 0; j--) p = fmaf(p, x, c[j]);
    return p;
}

PRESK_INLINE uint32_t presk_bitsf(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }

/* 2^k as an f32, -126 <= k <= 127 (other k give garbage, never undefined behaviour) */
PRESK_INLINE float presk_pow2f(int32_t k) {
    uint32_t u = (uint32_t)(k + 127) << 23;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* y·2^k for -190 <= k <= 191 (expf's -159 .. 144, erfcf's k <= 0), in two steps so that
 * a subnormal or infinite result comes from one rounding */
PRESK_INLINE float presk_scalef(float y, int32_t k) {
    int32_t a = k < 0 ? 64 : -64;
    return (y * presk_pow2f(k + a)) * presk_pow2f(-a);
}

#define PRESK_INV_LN2F 0x1.715476p+0f
#define PRESK_SHIFTF 0x1.8p23f
#define PRESK_LN2F_HI 0x1.62e4p-1f /* 15 bits: k·LN2F_HI is exact for |k| < 2^9 */
#define PRESK_LN2F_LO 0x1.7f7d1cp-20f

/* exp(r + rr) − 1 − r in f32 for |r| <= ln2/2 + 1/500, |rr| <= ulp(r): r²·G(r) + rr·(1 + r) */
PRESK_INLINE float presk_expf_tail(float r, float rr) {
    return fmaf(r * r, presk_hornerf(presk_expf32_g, 6, r), fmaf(rr, r, rr));
}

/* expf's and erfcf's argument reduction, in f32: hi + lo = k·ln2 + r + rr, |k| <= 159
 * (|hi| <= 110, lo within an ulp of hi; returns k, and r, rr through the pointers).
 * k = round(hi/ln2) by the shift: t = hi/ln2 + 1.5·2^23 lies in [2^23, 2^24), where its
 * ulp is 1, so k is t's bits less the shift's. hi − k·LN2F_HI is exact (k·LN2F_HI exact,
 * then Sterbenz's lemma), lo − k·LN2F_LO one fma, r + rr their sum by a two-sum. No lo:
 * pass −0, for which the fma is the product k·(−LN2F_LO) alone, the sign of a zero
 * included (k = 0 gives −0; +0 would give +0). */
PRESK_INLINE int32_t presk_expf_reduce(float hi, float lo, float *r, float *rr) {
    float t = hi * PRESK_INV_LN2F + PRESK_SHIFTF, kf = t - PRESK_SHIFTF;
    float rh = fmaf(kf, -PRESK_LN2F_HI, hi), rl = fmaf(kf, -PRESK_LN2F_LO, lo);
    float s = rh + rl;
    *r = s;
    *rr = (rh - s) + rl; /* s + rr = rh + rl */
    return (int32_t)(presk_bitsf(t) - presk_bitsf(PRESK_SHIFTF)); /* kf, by its bits */
}

/* exp in f32 arithmetic, 8 lanes a 256-bit vector: within 0.76 ulp (every f32 argument
 * checked: docs/native.md, "presk libm"). x = k·ln2 + r + rr by presk_expf_reduce (x alone,
 * its lo −0), exp(r + rr) = 1 + r + tail with 1 + r = s + e exactly, (s + (e + tail))·2^k,
 * 2^k applied in two steps so that a subnormal or an infinite result is rounded once. The
 * argument is clamped to [−110, 100] first (k stays where the scaling is defined: exp(100)
 * overflows, exp(−110) rounds to +0). */
PRESK_INLINE float presk_expf(float x) {
    float xc = x > -110.0f ? x : -110.0f; /* NaN: −110 (the NaN is selected at the end) */
    xc = xc < 100.0f ? xc : 100.0f;
    float r, rr;
    int32_t k = presk_expf_reduce(xc, -0.0f, &r, &rr);
    float s = 1.0f + r, e = (1.0f - s) + r; /* s + e = 1 + r */
    float y = presk_scalef(s + (e + presk_expf_tail(r, rr)), k);
    return x != x ? x : y;
}

/* presk_expf for -110 <= x <= 0 (-0 included), the same bits (every such f32 checked,
 * docs/native.md "presk libm"), in two thirds of its steps: no clamp, no NaN select, and
 * the scaling by 2^k for k <= 0 as presk_erfcf's (at k = 0 both factors exact). A caller
 * checks the range first (a softmax's s − max: presk_cback.strip). */
PRESK_INLINE float presk_expf_neg(float x) {
    float r, rr;
    int32_t k = presk_expf_reduce(x, -0.0f, &r, &rr);
    float s = 1.0f + r, e = (1.0f - s) + r;
    return ((s + (e + presk_expf_tail(r, rr))) * presk_pow2f(k + 64)) * 0x1p-64f;
}

/* The f32 functions below select their limits on the result, not on the argument (a clamped
 * argument made GCC compute each side apart); NaN in, the same NaN out. */

PRESK_INLINE float presk_expm1f(float x) {
    float y = (float)presk_expm1_short((double)x);
    y = x > 100.0f ? INFINITY : y;
    y = x < -30.0f ? -1.0f : y; /* expm1(−30) rounds to −1 */
    return x == 0.0f || x != x ? x : y; /* keeps −0 */
}

PRESK_INLINE float presk_logf(float x) { return (float)presk_log((double)x); }
PRESK_INLINE float presk_log1pf(float x) { return (float)presk_log1p((double)x); }

PRESK_INLINE float presk_tanhf(float x) {
    double a = fabs((double)x);
    double em = presk_expm1_short(2.0 * a);
    float y = (float)(em / (em + 2.0));
    y = a > 10.0 ? 1.0f : y; /* tanh(10) rounds to 1 in f32 */
    return x != x ? x : copysignf(y, x);
}

PRESK_INLINE float presk_sigmoidf(float x) {
    double a = fabs((double)x);
    double e = presk_exp_short(-a);
    float y = (float)((x < 0.0f ? e : 1.0) / (1.0 + e));
    y = a > 120.0 ? (x < 0.0f ? 0.0f : 1.0f) : y; /* sigmoid(−120) rounds to 0 in f32 */
    return x != x ? x : y;
}

/* erfc in f32 arithmetic, 8 lanes a 256-bit vector (the f64 series above run 4): within
 * 2.5 ulp (every f32 argument checked: docs/native.md, "presk libm"). |x| <= 3/4: (1 − x)
 * − x·D(x²), 1 − x carried exactly by a two-sum. Beyond, z = |x| <= 10.1: exp(−z²)·t·P(t),
 * t = 2/(2+z) with its rounding error t_lo (a two-sum of 2 + z, the quotient's remainder
 * by fma) carried into t·P through S = d(tP)/dt; z² = hi + lo exactly, −z² = −hi − lo =
 * k·ln2 + r + rr by presk_expf_reduce, exp(r + rr) = 1 + q, q = r + (r²·G(r) + rr·(1 + r)),
 * and t·P·(1 + q) by one fma; 2^k applied in two steps so that a subnormal result is
 * rounded once; 2 − that for x < 0. */
PRESK_INLINE float presk_erfcf_small(float x) { /* |x| <= 3/4 */
    float s = 1.0f - x;
    return s + fmaf(-x, presk_hornerf(presk_erfcf_d, 6, x * x), -x - (s - 1.0f));
}

PRESK_INLINE float presk_erfcf(float x) {
    float a = fabsf(x);
    float small = presk_erfcf_small(x);
    float z = a < PRESK_ERFCF_ZMAX ? a : PRESK_ERFCF_ZMAX;
    float dn = 2.0f + z, bv = dn - z;
    float dd = (2.0f - bv) + (z - (dn - bv)); /* 2 + z = dn + dd */
    float t = 2.0f / dn;
    float tlo = fmaf(-t, dd, fmaf(-t, dn, 2.0f)) * (0.5f * t);
    float w = t - PRESK_ERFCF_TC; /* exact */
    float tw = (t * w) * presk_hornerf(presk_erfcf_p, 8, w);
    float inner = fmaf(tlo, presk_hornerf(presk_erfcf_s, 4, t), fmaf(t, PRESK_ERFCF_C0L, tw));
    float tp = fmaf(t, PRESK_ERFCF_C0H, inner);
    float hi = z * z, lo = fmaf(z, z, -hi);
    float r, rr;
    int32_t k = presk_expf_reduce(-hi, -lo, &r, &rr); /* −z² = k·ln2 + r + rr */
    float q = r + presk_expf_tail(r, rr); /* exp(−z²)/2^k − 1 */
    /* ·2^k in two steps as presk_scalef's for k < 0, without its select: k <= 0 in every
     * lane (−z² <= 0), and where it is 0 (|x| below 0.59) the lane takes `small` (the
     * same bits as presk_scalef on all 2^32 arguments) */
    float big = (fmaf(tp, q, tp) * presk_pow2f(k + 64)) * 0x1p-64f;
    big = x < 0.0f ? 2.0f - big : big;
    float y = a <= PRESK_ERFCF_SMALL ? small : big;
    return x != x ? x : y;
}

/* `#pragma omp simd` where OpenMP's simd constructs are on: with OpenMP, or with
 * -fopenmp-simd and PRESK_OPENMP_SIMD defined (presk's toolchain, an exported program's
 * Makefile); nothing otherwise (a plain build stays warning-free) */
#if defined(_OPENMP) || defined(PRESK_OPENMP_SIMD)
#define PRESK_LIBM_SIMD _Pragma("omp simd")
#else
#define PRESK_LIBM_SIMD
#endif

/* y[i] = presk_erfcf(x[i]) for i < n, lane for lane (below: the same bits, fewer steps) */
#define PRESK_ERFCF_BLOCK 256 /* the arrays presk_erfcf_n packs, and its callers' blocks */
static __attribute__((noinline, unused)) void presk_erfcf_lanes(const float *restrict x,
                                                               float *restrict y, int64_t n) {
PRESK_LIBM_SIMD
    for (int64_t i = 0; i < n; i++) y[i] = presk_erfcf(x[i]);
}

#if defined(__AVX512F__)
#include <immintrin.h>
/* y[i] = presk_erfcf(x[i]) for i < n, each result the function's own bits, with each branch
 * computed only for the lanes that take it. A vector of presk_erfcf computes both: the
 * small branch (|x| <= 3/4, about a tenth of the steps) and the large one for all 16 lanes.
 * Here, in blocks of 256: every vector's small results stored; the arguments of its other
 * lanes (the large branch, or NaN) packed together (compress); presk_erfcf over the packed
 * arguments only; its results put back in their lanes (expand). A block whose first 64
 * arguments are mostly large (more than 7 in 16) runs presk_erfcf_lanes instead, where
 * packing would cost more than it saves. Which lanes compute which branch is the only
 * choice made here: each result is computed by presk_erfcf's own expression for its
 * argument (presk_erfcf_small is its small branch), so the bits are the same whatever the
 * mix (docs/native.md, "presk libm"). */
static __attribute__((noinline, unused)) void presk_erfcf_n(const float *restrict x,
                                                           float *restrict y, int64_t n) {
    const __m512 lim = _mm512_set1_ps(PRESK_ERFCF_SMALL);
    for (int64_t c0 = 0; c0 < n; c0 += PRESK_ERFCF_BLOCK) {
        const int64_t len = n - c0 < PRESK_ERFCF_BLOCK ? n - c0 : PRESK_ERFCF_BLOCK;
        const int nv = (int)(len / 16), ns = nv < 4 ? nv : 4;
        const float *xb = x + c0;
        float *yb = y + c0;
        int nq = 0;
        for (int v = 0; v < ns; v++) {
            __m512 a = _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * v));
            nq += __builtin_popcount(_mm512_cmp_ps_mask(a, lim, _CMP_NLE_UQ));
        }
        if (ns == 0 || 16 * nq > 7 * 16 * ns) { /* few or mostly large: every lane both */
            presk_erfcf_lanes(xb, yb, len);
            continue;
        }
        _Alignas(64) float q[PRESK_ERFCF_BLOCK + 16], qy[PRESK_ERFCF_BLOCK + 16];
        __mmask16 m[PRESK_ERFCF_BLOCK / 16];
        nq = 0;
        for (int v = 0; v < nv; v++) {
            const float *xv = xb + 16 * v;
            float *yv = yb + 16 * v;
PRESK_LIBM_SIMD
            for (int l = 0; l < 16; l++) yv[l] = presk_erfcf_small(xv[l]);
            __m512 a = _mm512_loadu_ps(xv);
            m[v] = _mm512_cmp_ps_mask(_mm512_abs_ps(a), lim, _CMP_NLE_UQ); /* large or NaN */
            _mm512_storeu_ps(q + nq, _mm512_maskz_compress_ps(m[v], a));
            nq += __builtin_popcount(m[v]);
        }
        const int nw = (nq + 15) & ~15;
        for (int j = nq; j < nw; j++) q[j] = 0.0f; /* whole vectors: no scalar tail */
        for (int j = 0; j < nw; j += 16) {
PRESK_LIBM_SIMD
            for (int l = 0; l < 16; l++) qy[j + l] = presk_erfcf(q[j + l]);
        }
        int at = 0;
        for (int v = 0; v < nv; v++) {
            float *yv = yb + 16 * v;
            _mm512_storeu_ps(yv, _mm512_mask_expandloadu_ps(_mm512_loadu_ps(yv), m[v], qy + at));
            at += __builtin_popcount(m[v]);
        }
        for (int64_t i = 16 * (int64_t)nv; i < len; i++) yb[i] = presk_erfcf(xb[i]);
    }
}
#elif defined(__AVX2__)
#include <immintrin.h>
/* For each 8-bit mask m, the lanes of its set bits in ascending order, a byte each (the rest
 * 0): the indices of a permutation that packs those lanes first (AVX2 has no compress). */
static const uint64_t presk_pack8[256] = {
    0x0000000000000000, 0x0000000000000000, 0x0000000000000001, 0x0000000000000100,
    0x0000000000000002, 0x0000000000000200, 0x0000000000000201, 0x0000000000020100,
    0x0000000000000003, 0x0000000000000300, 0x0000000000000301, 0x0000000000030100,
    0x0000000000000302, 0x0000000000030200, 0x0000000000030201, 0x0000000003020100,
    0x0000000000000004, 0x0000000000000400, 0x0000000000000401, 0x0000000000040100,
    0x0000000000000402, 0x0000000000040200, 0x0000000000040201, 0x0000000004020100,
    0x0000000000000403, 0x0000000000040300, 0x0000000000040301, 0x0000000004030100,
    0x0000000000040302, 0x0000000004030200, 0x0000000004030201, 0x0000000403020100,
    0x0000000000000005, 0x0000000000000500, 0x0000000000000501, 0x0000000000050100,
    0x0000000000000502, 0x0000000000050200, 0x0000000000050201, 0x0000000005020100,
    0x0000000000000503, 0x0000000000050300, 0x0000000000050301, 0x0000000005030100,
    0x0000000000050302, 0x0000000005030200, 0x0000000005030201, 0x0000000503020100,
    0x0000000000000504, 0x0000000000050400, 0x0000000000050401, 0x0000000005040100,
    0x0000000000050402, 0x0000000005040200, 0x0000000005040201, 0x0000000504020100,
    0x0000000000050403, 0x0000000005040300, 0x0000000005040301, 0x0000000504030100,
    0x0000000005040302, 0x0000000504030200, 0x0000000504030201, 0x0000050403020100,
    0x0000000000000006, 0x0000000000000600, 0x0000000000000601, 0x0000000000060100,
    0x0000000000000602, 0x0000000000060200, 0x0000000000060201, 0x0000000006020100,
    0x0000000000000603, 0x0000000000060300, 0x0000000000060301, 0x0000000006030100,
    0x0000000000060302, 0x0000000006030200, 0x0000000006030201, 0x0000000603020100,
    0x0000000000000604, 0x0000000000060400, 0x0000000000060401, 0x0000000006040100,
    0x0000000000060402, 0x0000000006040200, 0x0000000006040201, 0x0000000604020100,
    0x0000000000060403, 0x0000000006040300, 0x0000000006040301, 0x0000000604030100,
    0x0000000006040302, 0x0000000604030200, 0x0000000604030201, 0x0000060403020100,
    0x0000000000000605, 0x0000000000060500, 0x0000000000060501, 0x0000000006050100,
    0x0000000000060502, 0x0000000006050200, 0x0000000006050201, 0x0000000605020100,
    0x0000000000060503, 0x0000000006050300, 0x0000000006050301, 0x0000000605030100,
    0x0000000006050302, 0x0000000605030200, 0x0000000605030201, 0x0000060503020100,
    0x0000000000060504, 0x0000000006050400, 0x0000000006050401, 0x0000000605040100,
    0x0000000006050402, 0x0000000605040200, 0x0000000605040201, 0x0000060504020100,
    0x0000000006050403, 0x0000000605040300, 0x0000000605040301, 0x0000060504030100,
    0x0000000605040302, 0x0000060504030200, 0x0000060504030201, 0x0006050403020100,
    0x0000000000000007, 0x0000000000000700, 0x0000000000000701, 0x0000000000070100,
    0x0000000000000702, 0x0000000000070200, 0x0000000000070201, 0x0000000007020100,
    0x0000000000000703, 0x0000000000070300, 0x0000000000070301, 0x0000000007030100,
    0x0000000000070302, 0x0000000007030200, 0x0000000007030201, 0x0000000703020100,
    0x0000000000000704, 0x0000000000070400, 0x0000000000070401, 0x0000000007040100,
    0x0000000000070402, 0x0000000007040200, 0x0000000007040201, 0x0000000704020100,
    0x0000000000070403, 0x0000000007040300, 0x0000000007040301, 0x0000000704030100,
    0x0000000007040302, 0x0000000704030200, 0x0000000704030201, 0x0000070403020100,
    0x0000000000000705, 0x0000000000070500, 0x0000000000070501, 0x0000000007050100,
    0x0000000000070502, 0x0000000007050200, 0x0000000007050201, 0x0000000705020100,
    0x0000000000070503, 0x0000000007050300, 0x0000000007050301, 0x0000000705030100,
    0x0000000007050302, 0x0000000705030200, 0x0000000705030201, 0x0000070503020100,
    0x0000000000070504, 0x0000000007050400, 0x0000000007050401, 0x0000000705040100,
    0x0000000007050402, 0x0000000705040200, 0x0000000705040201, 0x0000070504020100,
    0x0000000007050403, 0x0000000705040300, 0x0000000705040301, 0x0000070504030100,
    0x0000000705040302, 0x0000070504030200, 0x0000070504030201, 0x0007050403020100,
    0x0000000000000706, 0x0000000000070600, 0x0000000000070601, 0x0000000007060100,
    0x0000000000070602, 0x0000000007060200, 0x0000000007060201, 0x0000000706020100,
    0x0000000000070603, 0x0000000007060300, 0x0000000007060301, 0x0000000706030100,
    0x0000000007060302, 0x0000000706030200, 0x0000000706030201, 0x0000070603020100,
    0x0000000000070604, 0x0000000007060400, 0x0000000007060401, 0x0000000706040100,
    0x0000000007060402, 0x0000000706040200, 0x0000000706040201, 0x0000070604020100,
    0x0000000007060403, 0x0000000706040300, 0x0000000706040301, 0x0000070604030100,
    0x0000000706040302, 0x0000070604030200, 0x0000070604030201, 0x0007060403020100,
    0x0000000000070605, 0x0000000007060500, 0x0000000007060501, 0x0000000706050100,
    0x0000000007060502, 0x0000000706050200, 0x0000000706050201, 0x0000070605020100,
    0x0000000007060503, 0x0000000706050300, 0x0000000706050301, 0x0000070605030100,
    0x0000000706050302, 0x0000070605030200, 0x0000070605030201, 0x0007060503020100,
    0x0000000007060504, 0x0000000706050400, 0x0000000706050401, 0x0000070605040100,
    0x0000000706050402, 0x0000070605040200, 0x0000070605040201, 0x0007060504020100,
    0x0000000706050403, 0x0000070605040300, 0x0000070605040301, 0x0007060504030100,
    0x0000070605040302, 0x0007060504030200, 0x0007060504030201, 0x0706050403020100,
};

/* presk_erfcf_n as on AVX-512 above, in vectors of 8: the large lanes' arguments packed by
 * a permutation (presk_pack8) with their places beside them, and each result stored back at
 * its place; a block whose first 64 arguments are mostly large runs presk_erfcf_lanes. The
 * same bits as presk_erfcf_lanes, whatever the mix. */
static __attribute__((noinline, unused)) void presk_erfcf_n(const float *restrict x,
                                                           float *restrict y, int64_t n) {
    const __m256 lim = _mm256_set1_ps(PRESK_ERFCF_SMALL);
    const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t c0 = 0; c0 < n; c0 += PRESK_ERFCF_BLOCK) {
        const int64_t len = n - c0 < PRESK_ERFCF_BLOCK ? n - c0 : PRESK_ERFCF_BLOCK;
        const int nv = (int)(len / 8), ns = nv < 8 ? nv : 8;
        const float *xb = x + c0;
        float *yb = y + c0;
        int nq = 0;
        for (int v = 0; v < ns; v++) {
            __m256 a = _mm256_and_ps(_mm256_loadu_ps(xb + 8 * v), abs);
            nq += __builtin_popcount(_mm256_movemask_ps(_mm256_cmp_ps(a, lim, _CMP_NLE_UQ)));
        }
        if (ns == 0 || 16 * nq > 7 * 8 * ns) { /* few or mostly large: every lane both */
            presk_erfcf_lanes(xb, yb, len);
            continue;
        }
        _Alignas(32) float q[PRESK_ERFCF_BLOCK + 8], qy[PRESK_ERFCF_BLOCK + 8];
        _Alignas(32) int32_t at[PRESK_ERFCF_BLOCK + 8]; /* q[j]'s place in the block */
        nq = 0;
        for (int v = 0; v < nv; v++) {
            const float *xv = xb + 8 * v;
            float *yv = yb + 8 * v;
PRESK_LIBM_SIMD
            for (int l = 0; l < 8; l++) yv[l] = presk_erfcf_small(xv[l]);
            __m256 a = _mm256_loadu_ps(xv);
            int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(a, abs), lim, _CMP_NLE_UQ));
            __m256i p = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)&presk_pack8[m]));
            _mm256_storeu_ps(q + nq, _mm256_permutevar8x32_ps(a, p));
            _mm256_storeu_si256((__m256i *)(at + nq), _mm256_add_epi32(p, _mm256_set1_epi32(8 * v)));
            nq += __builtin_popcount(m);
        }
        const int nw = (nq + 7) & ~7;
        for (int j = nq; j < nw; j++) q[j] = 0.0f; /* whole vectors: no scalar tail */
        for (int j = 0; j < nw; j += 8) {
PRESK_LIBM_SIMD
            for (int l = 0; l < 8; l++) qy[j + l] = presk_erfcf(q[j + l]);
        }
        for (int j = 0; j < nq; j++) yb[at[j]] = qy[j];
        for (int64_t i = 8 * (int64_t)nv; i < len; i++) yb[i] = presk_erfcf(xb[i]);
    }
}
#else
static __attribute__((unused)) void presk_erfcf_n(const float *restrict x, float *restrict y, int64_t n) {
    presk_erfcf_lanes(x, y, n);
}
#endif

PRESK_INLINE float presk_erff(float x) {
    double a = fabs((double)x);
    double small = a * presk_horner(presk_erff_poly, 10, a * a);
    double big = 1.0 - presk_erfc_short(a);
    float y = (float)copysign(a <= 1.0 ? small : big, (double)x);
    return x != x ? x : y;
}

PRESK_INLINE float presk_sinf(float x) { return (float)presk_sin((double)x); }
PRESK_INLINE float presk_cosf(float x) { return (float)presk_cos((double)x); }

#endif /* PRESK_LIBM_H */
