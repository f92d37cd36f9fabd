"""How the constants of presk_libm.h were made (run: `.venv/bin/python -m presk_kernel.libm.fit`).

Prints the C arrays of the Chebyshev expansions (evaluated by Clenshaw's recurrence, which
stays stable where monomial coefficients of the same fit would cancel), the polynomials of
the f32 functions and the three-part π/2 of the sine and cosine. mpmath at 50 digits; each
coefficient rounded once to the nearest double. The last coefficients printed show the
truncation error; for the f32 polynomials the largest error over 401 points is printed as
a comment (log2 of it: about −42 or below, so that one rounding to f32 is within
0.5 + 2⁻¹⁷ ulp).
"""

from __future__ import annotations

import mpmath as mp

ERFC_TERMS = 32  # erfc(z) = t·exp(-z²)·exp(F(t)), t = 2/(2+z), F in Chebyshev over t ∈ [0, 1]
ERF_TERMS = 14  # erf(x) = x·E(x²), x² ∈ [0, 1]
# The f32 functions: shorter fits, polynomials evaluated in f64 by Horner's rule, rounded
# once to f32.
ERFCF_TERMS = 18  # F over t ∈ [2/13, 1] only (erfc(z) rounds to 0 in f32 from z ≈ 10.05 on):
ERFCF_T0 = mp.mpf(2) / 13  # t at z = 11; erff's 1 − erfc(|x|) beyond |x| = 1, in f64
# erfcf in f32 arithmetic (8 lanes a 256-bit vector): erfc(x) = (1 − x) − x·D(x²) for
# |x| <= 3/4, else exp(−z²)·t·P(t − TC), t = 2/(2+z), z = |x| <= 10.1 (2 − that below 0).
# Coefficients f32, each rounded in turn and the rest refit (weighted least squares on
# Chebyshev nodes), so that their rounding costs little; P's first one exact, in two parts.
ERFCF_SMALL = mp.mpf(3) / 4
ERFCF_ZMAX = mp.mpf("10.1")  # erfc(z) rounds to 0 in f32 from z ≈ 10.06 on
ERFCF_D_DEGREE = 5  # D(u) = erf(√u)/√u − 1, u ∈ [0, 9/16]
ERFCF_P_DEGREE = 8  # P(t) = erfc(z)·exp(z²)/t
ERFCF_S_DEGREE = 3  # S(t) = d(t·P)/dt, which carries t's rounding error into t·P
EXPF32_DEGREE = 5  # G(r) = (exp(r) − 1 − r)/r², |r| <= ln2/2 + 1/500
ERFF_TERMS = 10  # E(u), u = x² ∈ [0, 1]
EXPF_DEGREE = 9  # exp(r), |r| <= ln2/2 (near-minimax: mpmath's chebyfit)
EXPM1F_DEGREE = 7  # (expm1(r) − r)/r², |r| <= ln2/2


def f32(c) -> mp.mpf:
    import numpy as np

    return mp.mpf(float(np.float32(float(c))))


def f32_poly(f, degree: int, lo, hi, relative: bool = True, first=None) -> tuple[list, float]:
    """f32 coefficients c_0..c_degree of f on [lo, hi] (`first`: c_0 given, exact): each
    rounded to f32 in turn, the later ones refit to what the rounded ones leave (least squares,
    weighted by 1/|f| when `relative`, on Chebyshev nodes); and log2 of the largest error
    (relative or absolute) over 501 points, evaluated exactly."""
    n = 4 * degree + 40
    xs = [(lo + hi) / 2 + (hi - lo) / 2 * mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    ws = [1 / abs(f(x)) if relative else 1 for x in xs]
    cs = [] if first is None else [first]
    while len(cs) <= degree:
        m = degree + 1 - len(cs)
        a, b = mp.matrix(n, m), mp.matrix(n, 1)
        for i, x in enumerate(xs):
            b[i] = (f(x) - sum(c * x**j for j, c in enumerate(cs))) * ws[i]
            for j in range(m):
                a[i, j] = x ** (len(cs) + j) * ws[i]
        cs.append(f32(mp.qr_solve(a, b)[0][0]))

    def err(x):
        e = abs(sum(c * x**j for j, c in enumerate(cs)) - f(x))
        return e / abs(f(x)) if relative else e

    return cs, float(mp.log(max(err(x) for x in mp.linspace(lo, hi, 501)), 2))


def erfcf_d(u):
    if abs(u) < mp.mpf(10) ** -30:
        return 2 / mp.sqrt(mp.pi) - 1
    return mp.erf(mp.sqrt(u)) / mp.sqrt(u) - 1


def erfcf_p(t):
    z = 2 / t - 2
    return mp.erfc(z) * mp.exp(z * z) / t


def expf32_g(r):
    if abs(r) < mp.mpf(10) ** -30:
        return mp.mpf(1) / 2
    return (mp.exp(r) - 1 - r) / (r * r)


def chebyshev(f, n: int) -> list:
    """The coefficients c_0..c_{n-1} of f on [-1, 1], f ≈ Σ c_j T_j (c_0 already halved)."""
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    vals = [f(x) for x in nodes]
    cs = [
        2 * mp.fsum(vals[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n) for k in range(n)) / n
        for j in range(n)
    ]
    cs[0] /= 2
    return cs


def erfc_f(y):
    t = (y + 1) / 2
    if t == 0:
        return -mp.log(2 * mp.sqrt(mp.pi))
    z = 2 / t - 2
    return mp.log(mp.erfc(z)) + z * z - mp.log(t)


def erf_e(y):
    u = (y + 1) / 2
    if u == 0:
        return 2 / mp.sqrt(mp.pi)
    return mp.erf(mp.sqrt(u)) / mp.sqrt(u)


def erfcf_f(y):
    """F over t ∈ [ERFCF_T0, 1], y its image in [-1, 1]."""
    t = ERFCF_T0 + (y + 1) / 2 * (1 - ERFCF_T0)
    z = 2 / t - 2
    return mp.log(mp.erfc(z)) + z * z - mp.log(t)


def expm1_h(r):
    if r == 0:
        return mp.mpf(1) / 2
    return (mp.expm1(r) - r) / (r * r)


def poly(f, degree: int, hi: mp.mpf, lo: mp.mpf | None = None) -> tuple[list, float]:
    """Monomial coefficients c_0..c_degree of f on [lo, hi] (−hi unless given; near-minimax:
    mpmath's chebyfit), and log2 of the largest error of those coefficients rounded to
    doubles over 401 points. Evaluated by Horner's rule: the coefficients these fits give
    sum to at most 2 in magnitude, so nothing cancels."""
    lo = -hi if lo is None else lo
    cs = mp.chebyfit(f, [lo, hi], degree + 1)
    assert sum(abs(c) for c in cs) * max(1, abs(lo), abs(hi)) ** degree < 4, f
    rounded = [mp.mpf(float(c)) for c in cs]
    err = max(abs(mp.polyval(rounded, r) - f(r)) for r in mp.linspace(lo, hi, 401))
    return list(reversed(cs)), float(mp.log(err, 2))


def c_array(name: str, cs: list) -> str:
    body = ",\n".join(f"    {float(c).hex()}" for c in cs)
    return f"static const double {name}[{len(cs)}] = {{\n{body},\n}};"


def c_array_f32(name: str, cs: list) -> str:
    body = ",\n".join(f"    {float(c).hex()}f" for c in cs)
    return f"static const float {name}[{len(cs)}] = {{\n{body},\n}};"


def erfcf_constants() -> str:
    """The f32 erfc's constants (presk_libm.h), with the log2 of each fit's error; the last,
    `presk_expf32_g`, is the f32 exp's too."""
    out = [
        f"#define PRESK_ERFCF_SMALL {float(f32(ERFCF_SMALL)).hex()}f /* (1 − x) − x·D(x²) up to here */",
        f"#define PRESK_ERFCF_ZMAX {float(f32(ERFCF_ZMAX)).hex()}f /* z clamped to it */",
    ]
    cs, err = f32_poly(erfcf_d, ERFCF_D_DEGREE, 0, ERFCF_SMALL**2, relative=False)
    out.append(f"/* absolute error 2^{err:.1f} */\n{c_array_f32('presk_erfcf_d', cs)}")
    lo, hi = 2 / (2 + ERFCF_ZMAX), 2 / (2 + ERFCF_SMALL)
    tc = f32((lo + hi) / 2)
    c0 = erfcf_p(tc)
    cs, err = f32_poly(lambda w: erfcf_p(w + tc), ERFCF_P_DEGREE, lo - tc, hi - tc, first=c0)
    c0h = f32(c0)
    out.append(f"#define PRESK_ERFCF_TC {float(tc).hex()}f")
    out.append(f"#define PRESK_ERFCF_C0H {float(c0h).hex()}f")
    out.append(f"#define PRESK_ERFCF_C0L {float(f32(c0 - c0h)).hex()}f")
    out.append(f"/* error 2^{err:.1f} */\n{c_array_f32('presk_erfcf_p', cs[1:])}")
    cs, err = f32_poly(lambda t: mp.diff(lambda s: s * erfcf_p(s), t), ERFCF_S_DEGREE, lo, hi)
    out.append(f"/* error 2^{err:.1f} */\n{c_array_f32('presk_erfcf_s', cs)}")
    r = mp.ln2 / 2 + mp.mpf(1) / 500
    cs, err = f32_poly(expf32_g, EXPF32_DEGREE, -r, r, first=mp.mpf(1) / 2)
    out.append(f"/* error 2^{err:.1f} */\n{c_array_f32('presk_expf32_g', cs)}")
    return "\n".join(out)


def main() -> None:
    mp.mp.dps = 50
    print(c_array("presk_erfc_cheb", chebyshev(erfc_f, ERFC_TERMS)))
    print(c_array("presk_erf_cheb", chebyshev(erf_e, ERF_TERMS)))
    cs, err = poly(erfcf_f, ERFCF_TERMS - 1, mp.mpf(1))
    print(f"/* error 2^{err:.1f} */\n{c_array('presk_erfcf_poly', cs)}")
    a, b = 2 / (1 - ERFCF_T0), -(1 + ERFCF_T0) / (1 - ERFCF_T0)  # y = a·t + b
    print(f"#define PRESK_ERFCF_A {float(a).hex()}\n#define PRESK_ERFCF_B {float(b).hex()}")
    print(erfcf_constants())
    cs, err = poly(lambda u: erf_e(2 * u - 1), ERFF_TERMS - 1, mp.mpf(1), mp.mpf(0))
    print(f"/* error 2^{err:.1f} */\n{c_array('presk_erff_poly', cs)}")
    cs, err = poly(mp.exp, EXPF_DEGREE, mp.ln2 / 2)
    print(f"/* error 2^{err:.1f} */\n{c_array('presk_expf_poly', cs)}")
    cs, err = poly(expm1_h, EXPM1F_DEGREE, mp.ln2 / 2)
    print(f"/* error 2^{err:.1f} */\n{c_array('presk_expm1f_poly', cs)}")
    half_pi = mp.pi / 2
    p1 = float(half_pi)
    p2 = float(half_pi - p1)
    p3 = float(half_pi - p1 - p2)
    print(f"#define PRESK_PIO2_1 {p1.hex()}\n#define PRESK_PIO2_2 {p2.hex()}")
    print(f"#define PRESK_PIO2_3 {p3.hex()}")


if __name__ == "__main__":
    main()
