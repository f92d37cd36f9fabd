"""How the constants of presk_libm.h were made (run: `.venv/bin/python -m presk_cback.libm.fit`).

Prints the C arrays of the two Chebyshev expansions (evaluated by Clenshaw's recurrence,
which stays stable where monomial coefficients of the same fit would cancel) and the
three-part π/2 of the sine and cosine. mpmath at 50 digits; each coefficient rounded once
to the nearest double. The last coefficients printed show the truncation error.
"""

from __future__ import annotations

import mpmath as mp

ERFC_TERMS = 32  # erfc(z) = t·exp(-z²)·exp(F(t)), t = 2/(2+z), F in Chebyshev over t ∈ [0, 1]
ERF_TERMS = 14  # erf(x) = x·E(x²), x² ∈ [0, 1]


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


def c_array(name: str, cs: list) -> str:
    body = ",\n".join(f"    {float(c).hex()}" for c in cs)
    return f"static const double {name}[{len(cs)}] = {{\n{body},\n}};"


def main() -> None:
    mp.mp.dps = 50
    print(c_array("presk_erfc_cheb", chebyshev(erfc_f, ERFC_TERMS)))
    print(c_array("presk_erf_cheb", chebyshev(erf_e, ERF_TERMS)))
    half_pi = mp.pi / 2
    p1 = float(half_pi)
    p2 = float(half_pi - p1)
    p3 = float(half_pi - p1 - p2)
    print(f"#define PRESK_PIO2_1 {p1.hex()}\n#define PRESK_PIO2_2 {p2.hex()}")
    print(f"#define PRESK_PIO2_3 {p3.hex()}")


if __name__ == "__main__":
    main()
