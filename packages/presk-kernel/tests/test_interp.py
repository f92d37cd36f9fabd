"""The kernel interpreter's arithmetic: exact where numpy is not IEEE's, the fold's order."""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from presk_kernel.interp import (
    FEW,
    KernelError,
    f32_to_bf16,
    fma,
    ieee_max,
    ieee_min,
    presk_libm,
    run_kernel,
)
from presk_kernel.ir import Affine, Axis, Buffer, Const, Kernel, Load, Loop, Op, Reduce, Store, Var

F64 = {"precision": 53, "emin": -1073, "emax": 1024, "subnormalize": True}
F32 = {"precision": 24, "emin": -148, "emax": 128, "subnormalize": True}
BF16 = {"precision": 8, "emin": -132, "emax": 128, "subnormalize": True}


def exact_fma(a, b, c, context) -> float:
    with gmpy2.context(**context):
        return float(gmpy2.fma(gmpy2.mpfr(float(a)), gmpy2.mpfr(float(b)), gmpy2.mpfr(float(c))))


def same(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    return bool(np.all((x == y) & (np.signbit(x) == np.signbit(y)) | (np.isnan(x) & np.isnan(y))))


def hard_cases(rng, n, dtype):
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    cancel = -(a.astype(np.float64) * b) * (1 + rng.integers(-3, 4, n) * 2.0**-40)
    c = np.where(rng.random(n) < 0.5, rng.standard_normal(n), cancel).astype(dtype)
    return a, b, c


@pytest.mark.parametrize(("dtype", "context"), [(np.float64, F64), (np.float32, F32)])
def test_fma_rounds_once(dtype, context):
    rng = np.random.default_rng(7)
    a, b, c = hard_cases(rng, 20000, dtype)
    got = fma(a, b, c, dtype)
    assert got.dtype == dtype
    want = np.array([exact_fma(*t, context) for t in zip(a, b, c, strict=True)], dtype=dtype)
    assert same(got, want)


def test_f32_fma_breaks_the_ties_double_rounding_would_get_wrong():
    # a·b + c exactly a binary32 midpoint plus a tail binary64 rounding drops
    a = np.float32(1 + 2.0**-12)
    b = np.float32(1 + 2.0**-12)  # a·b = 1 + 2^-11 + 2^-24: a binary32 midpoint and a bit
    c = np.float32(2.0**-60)
    got = fma(np.array([a]), np.array([b]), np.array([c]), np.float32)
    assert got[0] == np.float32(exact_fma(a, b, c, F32))


@given(st.floats(width=64), st.floats(width=64), st.floats(width=64))
def test_fma64_on_any_doubles(a, b, c):
    got = fma(np.array([a]), np.array([b]), np.array([c]), np.float64)
    assert same(got, [exact_fma(a, b, c, F64)])


SPECIALS = {  # signed zeros, subnormals, the edges of the fast paths, huge, infinite, NaN
    np.float64: (
        [0.0, -0.0, 5e-324, -(2.0**-1000), 2.0**-300, 2.0**-600, 1.0, -1.0 - 2.0**-52, 3.0]
        + [2.0**300, -1.5 * 2.0**600, 1.7976931348623157e308, np.inf, -np.inf],
        np.array([0x7FF8000000000001, 0xFFF0000000000005], np.uint64),
        F64,
    ),
    np.float32: (  # 1 + 2^-12 squared is a binary32 midpoint and a bit
        [0.0, -0.0, 2.0**-149, -(2.0**-126), 2.0**-70, 1.0, 1 + 2.0**-12, -1 - 2.0**-23]
        + [2.0**-60, 3.0, 2.0**64, -3.4028234663852886e38, np.inf, -np.inf],
        np.array([0x7FC00001, 0xFF800005], np.uint32),
        F32,
    ),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fma_gives_one_array_and_few_elements_the_same_bits(dtype):
    """fma computes up to FEW elements on Python floats and more in numpy arrays: every
    triple of special values rounds once in both, as gmpy2 does."""
    specials, nan, context = SPECIALS[dtype]
    values = np.array([*specials, *nan.view(dtype)], dtype)
    a, b, c = (x.ravel() for x in np.meshgrid(values, values, values))
    assert a.size > FEW
    whole = fma(a, b, c, dtype)
    few = np.concatenate([fma(a[i : i + FEW], b[i : i + FEW], c[i : i + FEW], dtype)
                          for i in range(0, a.size, FEW)])  # fmt: skip
    assert whole.tobytes() == few.tobytes()
    finite = ~np.isnan(whole)
    want = [exact_fma(*t, context) for t in zip(a[finite], b[finite], c[finite], strict=True)]
    assert same(whole[finite], np.array(want, dtype))


def test_bf16_rounds_to_nearest_even_and_writes_nan_as_7fc0():
    rng = np.random.default_rng(3)
    bits = np.concatenate(
        [
            rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32),
            np.arange(0, 2**17, 7, dtype=np.uint32),  # subnormals and ties near zero
            (rng.integers(0, 2**16, 2000, dtype=np.uint64).astype(np.uint32) << 16) | 0x8000,
        ]
    )
    f = bits.view(np.float32)
    got = f32_to_bf16(f)
    finite = np.isfinite(f)
    with gmpy2.context(**BF16):
        want = np.array([np.float32(float(gmpy2.mpfr(float(x)))) for x in f[finite]])
    widened = (got[finite].astype(np.uint32) << 16).view(np.float32)
    overflow = ~np.isfinite(want)
    assert same(widened[~overflow], want[~overflow])
    assert np.all(got[np.isnan(f)] == 0x7FC0)


def test_ieee_maximum_and_minimum():
    a = np.array([-0.0, 0.0, np.nan, 1.0, 2.0])
    b = np.array([0.0, -0.0, 1.0, np.nan, 1.0])
    assert same(ieee_max(a, b), [0.0, 0.0, np.nan, np.nan, 2.0])
    assert same(ieee_min(a, b), [-0.0, -0.0, np.nan, np.nan, 1.0])


def _sum_kernel(n: int, op: str = "add") -> Kernel:
    x = Buffer(0, "f64", (Axis("i", n),))
    out = Buffer(1, "f64", ())
    red = Reduce("s", op, (("i0", "i", n),), (), (Load(0, (Affine.var("i0"),)),))
    return Kernel("sum", "f/%1", (x,), (out,), (red, Store(1, (), Var("s"))))


def test_a_fold_adds_left_to_right_from_the_first_term():
    out = np.zeros(())
    run_kernel(_sum_kernel(4), [np.array([1e16, 1.0, -1e16, 1.0]), out])
    assert out[()] == 1.0  # ((1e16 + 1) - 1e16) + 1, the 1 lost in the first addition
    run_kernel(_sum_kernel(2), [np.array([-0.0, -0.0]), out])
    assert same(out, -0.0)  # from the first term, not from +0
    run_kernel(_sum_kernel(0), [np.zeros(0), out])
    assert same(out, 0.0)
    run_kernel(_sum_kernel(0, "max"), [np.zeros(0), out])
    assert out[()] == -np.inf


def test_a_gather_out_of_range_is_an_error_of_the_data():
    table = Buffer(0, "f64", (Axis(None, 3),))
    ids = Buffer(1, "i64", (Axis(None, 2),))
    out = Buffer(2, "f64", (Axis(None, 2),))
    row = Load(1, (Affine.var("i0"),))
    body = (Loop("i0", None, 2, (Store(2, (Affine.var("i0"),), Load(0, (row,))),)),)
    k = Kernel("embed", "f/%2", (table, ids), (out,), body)
    with pytest.raises(KernelError, match="index 3 out of range for length 3"):
        run_kernel(k, [np.arange(3.0), np.array([0, 3]), np.zeros(2)])


def test_transcendentals_are_presk_libms():
    libm = presk_libm()
    if libm is None:
        pytest.xfail("presk libm cannot be loaded here (no C compiler): numpy's stand in")
    x = np.linspace(-4, 4, 33)
    body = (
        Loop(
            "i0",
            None,
            33,
            (Store(1, (Affine.var("i0"),), Op("exp", (Load(0, (Affine.var("i0"),)),))),),
        ),
    )
    for dtype, compute in [(np.float64, "f64"), (np.float32, "f32")]:
        k = Kernel(
            "exp",
            "f/%1",
            (Buffer(0, compute, (Axis(None, 33),)),),
            (Buffer(1, compute, (Axis(None, 33),)),),
            body,
            compute,
        )
        out = np.zeros(33, dtype=dtype)
        run_kernel(k, [x.astype(dtype), out])
        assert same(out, libm.apply("exp", x.astype(dtype)))


def test_integer_powers_round_each_product():
    x = np.array([1.1, -2.0, 3.0])
    body = (
        Loop(
            "i0",
            None,
            3,
            (Store(1, (Affine.var("i0"),), Op("pow", (Load(0, (Affine.var("i0"),)),), 3)),),
        ),
    )
    k = Kernel(
        "pow 3",
        "f/%1",
        (Buffer(0, "f64", (Axis(None, 3),)),),
        (Buffer(1, "f64", (Axis(None, 3),)),),
        body,
    )
    out = np.zeros(3)
    run_kernel(k, [x, out])
    assert same(out, (x * x) * x)
    assert Const(1.0, "f64")  # constants are plain data


@given(st.floats(width=32), st.floats(width=32), st.floats(width=32))
def test_fma32_on_any_floats(a, b, c):
    got = fma(
        np.array([a], np.float32), np.array([b], np.float32), np.array([c], np.float32), np.float32
    )
    assert same(got, [np.float32(exact_fma(a, b, c, F32))])


def test_fma_signs_of_zero():
    for dtype, context in [(np.float64, F64), (np.float32, F32)]:
        a = np.array([-0.0, 0.0, 1.0, -1.0, 0.0], dtype)
        b = np.array([1.0, -1.0, -0.0, 0.0, 0.0], dtype)
        c = np.array([0.0, -0.0, -0.0, -0.0, -0.0], dtype)
        want = [exact_fma(*t, context) for t in zip(a, b, c, strict=True)]
        assert same(fma(a, b, c, dtype), np.array(want, dtype))


def test_fma_gives_a_nan_operands_own_bits():
    """A NaN operand's own NaN, quieted, a's before b's before c's; the default NaN (x86's,
    negative) of an invalid product inf·0 with no NaN operand (issue 26, H7: MPFR's NaN has
    no sign, and binary64's fma gave −NaN for any NaN). The f32 fma, from binary64
    arithmetic, agrees."""
    for dtype, u in ((np.float64, np.uint64), (np.float32, np.uint32)):
        bits = 64 if dtype == np.float64 else 32
        top = 13 if bits == 64 else 10  # the sign, the exponent and the quiet bit
        quiet = u(((1 << top) - 1) << (bits - top))  # −NaN, quiet, payload 0
        pos = quiet & ~u(1 << (bits - 1))
        signaling = (pos & ~u(1 << (bits - top))) | u(5)  # +sNaN, payload 5
        nan = lambda b, u=u, dtype=dtype: np.array([b], u).view(dtype)  # noqa: E731
        one, zero, inf = (np.array([v], dtype) for v in (1.0, 0.0, np.inf))
        cases = [
            ((nan(pos), one, zero), pos),
            ((nan(quiet), one, zero), quiet),
            ((one, nan(quiet), zero), quiet),
            ((one, one, nan(pos)), pos),
            ((inf, zero, one), quiet),  # invalid: the default NaN
            ((inf, zero, nan(pos)), pos),  # a NaN operand before the default
            ((nan(pos), nan(quiet), zero), pos),
            ((one, nan(signaling), zero), signaling | u(1 << (bits - top))),  # quieted
        ]
        for (a, b, c), want in cases:
            got = fma(a, b, c, dtype).view(u)[0]
            assert got == want, (dtype, a, b, c, hex(int(got)))
