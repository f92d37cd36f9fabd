"""erfc in C (presk_core.erfc_c) is MPFR's correctly rounded erfc, bit for bit."""

from __future__ import annotations

import gmpy2
import mpmath
import numpy as np
import pytest
from presk_core import erfc_c
from presk_core import mpfr as M

pytestmark = pytest.mark.skipif(
    not erfc_c.available(), reason="no C compiler here: gelu keeps gmpy2's erfc"
)


def _bits(x: np.ndarray) -> list:
    return [
        ("nan",) if gmpy2.is_nan(v) else (v.digits(2), v.precision, gmpy2.is_signed(v))
        for v in np.asarray(x, dtype=object).reshape(-1)
    ]


def _points(bits: int, seed: int) -> np.ndarray:
    """Full-precision values around where gelu's −t falls, the centres m/256, points just
    beside them and half-way between them, the edges of the table and the special values."""
    rng = np.random.default_rng(seed)
    with M.precision(bits + 64):  # −t has 64 bits more than the context (presk_core.mpfr)
        spread = M.div(M.real(rng.standard_normal(600) * 6), M.real(7))
        grid = np.arange(-2048, 2049, 37) / 256
        centres = M.real(grid)
        beside = M.add(centres, M.real(2.0**-60))
        halfway = M.real(grid + 1 / 512)
        tiny = M.mul(M.real(rng.standard_normal(20)), M.real(2.0**-40))
        edges = M.real([0.0, -0.0, 8.0, -8.0, 8 + 2**-20, -8 - 2**-20, 30.0, -30.0])
        special = M.real([gmpy2.mpfr(v) for v in ("1e300", "-1e300", "inf", "-inf", "nan")])
    return np.concatenate([spread, centres, beside, halfway, tiny, edges, special])


@pytest.mark.parametrize("bits", [24, 53, 113, 256, 300])
def test_the_series_gives_mpfrs_erfc_bit_for_bit(bits):
    x = _points(bits, bits)
    with M.precision(bits):
        want = np.frompyfunc(gmpy2.erfc, 1, 1)(x)
        first, again = erfc_c.erfc(x), erfc_c.erfc(x)  # building the centres, then reading
    assert _bits(first) == _bits(want) and _bits(again) == _bits(want)
    assert len({id(v) for v in first}) == first.size  # each its own object


def test_the_series_decides_nearly_every_value_alone():
    """The Ziv test passes but for a chance of ~2^-30: gmpy2 is the exception, not the rule."""
    rng = np.random.default_rng(7)
    with M.precision(320):
        x = M.div(M.real(rng.standard_normal(3000)), M.real(3))
    with M.precision(256):
        out, done = erfc_c.fold_c.fresh(x.size), np.zeros(x.size, dtype=np.uint8)
        where, into = erfc_c.fold_c.addresses(x), erfc_c.fold_c.slots(out)
        erfc_c._C.lib.presk_erfc(x.size, where.ctypes.data, into.ctypes.data, 256, done.ctypes.data)
    assert done.all()


def test_what_is_not_an_mpfr_goes_to_gmpy2():
    with M.precision(64):
        x = M.real([0.25, -1.5, 3.0])
        x[1] = 2  # an int: gmpy2's erfc takes it
        got = erfc_c.erfc(x.reshape(3, 1))
        assert got.shape == (3, 1)
        assert _bits(got) == _bits(np.frompyfunc(gmpy2.erfc, 1, 1)(x.reshape(3, 1)))


@pytest.mark.parametrize("n", [0, 1, 5, 20, 60])
def test_cramers_inequality_bounds_the_hermite_numbers(n):
    """|H_n(x)| ≤ 1.086435·2^(n/2)·√(n!)·e^(x²/2) (Abramowitz & Stegun 22.14.17): the tail
    bound of the series rests on it, with 1.2261 ≥ (2/√π)·1.086435."""
    mpmath.mp.prec = 200
    assert mpmath.mpf("1.2261") >= 2 / mpmath.sqrt(mpmath.pi) * mpmath.mpf("1.086435")
    for x in np.linspace(-8, 8, 41):
        h = abs(mpmath.hermite(n, x))
        bound = mpmath.mpf("1.086435") * mpmath.sqrt(2**n * mpmath.factorial(n))
        assert h <= bound * mpmath.exp(mpmath.mpf(x) ** 2 / 2)


@pytest.mark.parametrize("bits", [24, 53, 256])
def test_gelus_derivative_in_c_is_numpys_loops_bit_for_bit(bits):
    """`M.gelu_grad` (in C) against the same roundings written with numpy's loops."""
    rng = np.random.default_rng(bits)
    with M.precision(bits):
        x = M.real(rng.standard_normal((5, 7)) * 3)
        ct = M.real(rng.standard_normal((5, 7)))
        x[0, :5] = [gmpy2.mpfr(v) for v in ("0", "-0", "inf", "-inf", "nan")]
        x[1, :2] = [gmpy2.mpfr("1e300"), gmpy2.mpfr("-40")]
        ct[2, :3] = [gmpy2.mpfr(v) for v in ("-0", "inf", "nan")]
        got = M.gelu_grad(ct, x)
        phi = M.gelu_phi(x)
        want = M.mul(ct, M.add(phi, M.mul(x, M.gelu_density(x))))
        assert _bits(got) == _bits(want)
        assert _bits(M.gelu_grad(ct[0], x)) == _bits(
            M.mul(ct[0], M.add(phi, M.mul(x, M.gelu_density(x))))
        )  # broadcast: numpy's
