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
ERFCF_TERMS = 18  # F over t ∈ [2/13, 1] only (erfc(z) rounds to 0 in f32 from z ≈ 10.05 on)
ERFCF_T0 = mp.mpf(2) / 13  # t at z = 11
ERFF_TERMS = 10  # E(u), u = x² ∈ [0, 1]
EXPF_DEGREE = 9  # exp(r), |r| <= ln2/2 (near-minimax: mpmath's chebyfit)
EXPM1F_DEGREE = 7  # (expm1(r) − r)/r², |r| <= ln2/2


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


def main() -> None:
    mp.mp.dps = 50
    print(c_array("presk_erfc_cheb", chebyshev(erfc_f, ERFC_TERMS)))
    print(c_array("presk_erf_cheb", chebyshev(erf_e, ERF_TERMS)))
    cs, err = poly(erfcf_f, ERFCF_TERMS - 1, mp.mpf(1))
    print(f"/* error 2^{err:.1f} */\n{c_array('presk_erfcf_poly', cs)}")
    a, b = 2 / (1 - ERFCF_T0), -(1 + ERFCF_T0) / (1 - ERFCF_T0)  # y = a·t + b
    print(f"#define PRESK_ERFCF_A {float(a).hex()}\n#define PRESK_ERFCF_B {float(b).hex()}")
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
