"""How the constants of presk_libm.h were made (run: `.venv/bin/python -m presk_cback.libm.fit`).

Prints the C arrays of the Chebyshev expansions (evaluated by Clenshaw's recurrence, which
stays stable where monomial coefficients of the same fit would cancel), the polynomials of
the f32 functions and the three-part π/2 of the sine and cosine. mpmath at 50 digits; each
coefficient rounded once to the nearest double. The last coefficients printed show the
truncation error; for the f32 fits the largest error over 400 points is printed as a
comment (log2 of it: below −42, so that one rounding to f32 is within 0.5 + 2⁻¹⁸ ulp).
"""

from __future__ import annotations

import mpmath as mp

ERFC_TERMS = 32  # erfc(z) = t·exp(-z²)·exp(F(t)), t = 2/(2+z), F in Chebyshev over t ∈ [0, 1]
ERF_TERMS = 14  # erf(x) = x·E(x²), x² ∈ [0, 1]
# The f32 functions: shorter fits, evaluated in f64 and rounded once to f32.
ERFCF_TERMS = 18  # F over t ∈ [2/13, 1] only: erfc(z) rounds to 0 in f32 from z ≈ 10.05 on
ERFCF_T0 = mp.mpf(2) / 13  # t at z = 11
ERFF_TERMS = 10
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


def cheb_error(f, cs: list, relative: bool = False) -> float:
    """log2 of the largest error of Σ c_j T_j against f over 400 points of [-1, 1]."""
    worst = mp.mpf(0)
    for i in range(400):
        y = -1 + 2 * mp.mpf(i) / 399
        e = abs(mp.fsum(c * mp.chebyt(j, y) for j, c in enumerate(cs)) - f(y))
        worst = max(worst, e / abs(f(y)) if relative else e)
    return float(mp.log(worst, 2))


def poly(f, degree: int, half: mp.mpf) -> tuple[list, float]:
    """Monomial coefficients c_0..c_degree of f on [-half, half] (near-minimax), log2 of
    the fit's error."""
    cs = mp.chebyfit(f, [-half, half], degree + 1)
    err = max(abs(mp.polyval(cs, r) - f(r)) for r in mp.linspace(-half, half, 401))
    return list(reversed(cs)), float(mp.log(err, 2))


def c_array(name: str, cs: list) -> str:
    body = ",\n".join(f"    {float(c).hex()}" for c in cs)
    return f"static const double {name}[{len(cs)}] = {{\n{body},\n}};"


def main() -> None:
    mp.mp.dps = 50
    print(c_array("presk_erfc_cheb", chebyshev(erfc_f, ERFC_TERMS)))
    print(c_array("presk_erf_cheb", chebyshev(erf_e, ERF_TERMS)))
    erfc_cs = chebyshev(erfcf_f, ERFCF_TERMS)
    print(f"/* error 2^{cheb_error(erfcf_f, erfc_cs):.1f} */")
    print(c_array("presk_erfcf_cheb", erfc_cs))
    a, b = 2 / (1 - ERFCF_T0), -(1 + ERFCF_T0) / (1 - ERFCF_T0)  # y = a·t + b
    print(f"#define PRESK_ERFCF_A {float(a).hex()}\n#define PRESK_ERFCF_B {float(b).hex()}")
    erf_cs = chebyshev(erf_e, ERFF_TERMS)
    print(f"/* relative error 2^{cheb_error(erf_e, erf_cs, relative=True):.1f} */")
    print(c_array("presk_erff_cheb", erf_cs))
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
