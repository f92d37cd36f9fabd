"""MPFR's add, sub, mul, div as numpy ufuncs in C (presk_core.ufuncs_c) give numpy's own
ufuncs' values over gmpy2 objects, bit for bit: precision, sign of zero, NaN, infinities,
broadcasting, reductions, operands that are not mpfr, and contexts other than the
interpreter's (where the C loop leaves each element to Python's operator)."""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from presk_core import mpfr as M
from presk_core import ufuncs_c

U = ufuncs_c.load()
pytestmark = pytest.mark.skipif(U is None, reason="no compiler or headers: numpy's ufuncs")
PAIRS = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.true_divide)]


def _bits(x) -> list:
    return [
        ("nan",)
        if gmpy2.is_nan(v)
        else (
            str(type(v)),
            v.digits(2) if isinstance(v, gmpy2.mpfr) else v,
            getattr(v, "precision", None),
            gmpy2.is_signed(v) if isinstance(v, gmpy2.mpfr) else None,
        )
        for v in np.asarray(x, dtype=object).reshape(-1)
    ]


def _operands(bits: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(bits)
    with M.precision(bits + 9):  # more bits than the context: each result rounds
        a = M.div(M.real(rng.standard_normal((6, 4))), M.real(3))
        b = M.div(M.real(rng.standard_normal(4)), M.real(7))
    a[0] = [gmpy2.mpfr(v) for v in ("0", "-0", "inf", "nan")]
    a[1] = [gmpy2.mpfr(v) for v in ("-0", "1e300000000", "-inf", "1e-300000000")]
    b[:2] = [gmpy2.mpfr("-0"), gmpy2.mpfr("1e300000000")]
    return a, b


@pytest.mark.parametrize("bits", [24, 53, 256])
@pytest.mark.parametrize(("name", "numpy_op"), PAIRS)
def test_the_c_ufunc_is_numpys_over_gmpy2_objects(bits, name, numpy_op):
    a, b = _operands(bits)
    op = getattr(U, name)
    with M.precision(bits):
        for x, y in [(a, b), (b, a), (a, a), (a, 3), (a[:, :1], b)]:
            assert _bits(op(x, y)) == _bits(numpy_op(x, y))
        mixed = a.copy()
        mixed[2, 1] = 5  # an int among the reals: Python's operator takes it
        assert _bits(op(mixed, b)) == _bits(numpy_op(mixed, b))
        assert _bits(op.reduce(a, axis=0)) == _bits(numpy_op.reduce(a, axis=0))
        assert _bits(op.reduce(a, axis=1)) == _bits(numpy_op.reduce(a, axis=1))


@pytest.mark.parametrize("round_mode", [gmpy2.RoundDown, gmpy2.RoundUp, gmpy2.RoundToZero])
def test_another_rounding_or_subnormals_leave_each_element_to_gmpy2(round_mode):
    a, b = _operands(53)
    with gmpy2.context(precision=53, round=round_mode):
        assert _bits(U.div(a, b)) == _bits(np.true_divide(a, b))
    with gmpy2.context(precision=53, subnormalize=True, emin=-1074, emax=1024):
        assert _bits(U.mul(a, b)) == _bits(np.multiply(a, b))


def test_the_kernels_use_them():
    assert M._ADD is U.add and M._MUL is U.mul and M._SUB is U.sub and M._DIV is U.div
