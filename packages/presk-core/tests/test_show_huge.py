"""Printing reals of huge exponents (issue 16: `x^1e8` took 51 s): MPFR's own correctly
rounded conversion, the same digits as the exact one where both apply."""

import time
from decimal import Decimal, localcontext

import gmpy2
from presk_core.show import _decimal, _layout, format_real


def _by_decimal(x: Decimal, digits: int) -> str:
    """The same number from Python's decimal module at 40 digits, in presk's layout."""
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def test_a_huge_power_prints_at_once():
    with gmpy2.context(precision=256), localcontext() as ctx:
        ctx.prec, ctx.Emax, ctx.Emin = 40, 10**9, -(10**9)
        x = gmpy2.mpfr("1.5") ** 100_000_000
        started = time.monotonic()
        assert format_real(x) == _by_decimal(Decimal("1.5") ** 100_000_000, 12)
        assert format_real(1 / x, 4) == _by_decimal(1 / Decimal("1.5") ** 100_000_000, 4)
        assert time.monotonic() - started < 1


def test_both_conversions_agree_near_the_threshold():
    with gmpy2.context(precision=256):
        for v in ("1.5", "-2.25", "0.1", "9.9999999999995", "123456789.125"):
            x = gmpy2.mpfr(v) * gmpy2.mpfr(2) ** 4000  # below the threshold: exact ratio
            p, q = (int(t) for t in x.as_integer_ratio())
            ds, k = _decimal(abs(p), q, 12)
            assert format_real(x) == _layout("-" if p < 0 else "", ds, k, 12)
            y = x * gmpy2.mpfr(2) ** 200  # above it: MPFR's conversion, same rounding
            p, q = (int(t) for t in y.as_integer_ratio())
            ds, k = _decimal(abs(p), q, 12)
            assert format_real(y) == _layout("-" if p < 0 else "", ds, k, 12)
