"""The MPFR kernels against mpmath and against explicit folds.

The correctly rounded functions (exp, log, sqrt, tanh, sin, cos, erf) must equal, bit for
bit, mpmath's value at 512 bits rounded once to 256 bits. The composite ones (sigmoid,
silu, gelu, softmax, log_softmax) are compared within a stated number of ulps of that
value, from the roundings their docstrings list. Orders of summation are compared with
explicit left folds, bit for bit.
"""

from __future__ import annotations

import random
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest
from gmpy2 import mpfr
from presk_core import mpfr as M

BITS = 256


def rand_reals(n: int, lo: float, hi: float, seed: int) -> np.ndarray:
    """n reals with full 256-bit significands, uniform in [lo, hi)."""
    rng = random.Random(seed)
    width = Fraction(hi) - Fraction(lo)
    return M.real(
        [Fraction(lo) + width * Fraction(rng.getrandbits(BITS), 2**BITS) for _ in range(n)]
    )


def to_mp(x: mpfr) -> mpmath.mpf:
    p, q = x.as_integer_ratio()
    return mpmath.mpf(int(p)) / int(q)  # exact: q is a power of 2


def from_mp(v: mpmath.mpf) -> mpfr:
    """mpmath's value rounded once to the current precision."""
    sign, man, exp, _ = v._mpf_
    if man == 0:
        return mpfr(0)
    q = gmpy2.mpq(int(man) << exp) if exp >= 0 else gmpy2.mpq(int(man), 1 << -exp)
    return mpfr(-q if sign else q)


def oracle(fn, xs: np.ndarray) -> list[mpfr]:
    with mpmath.workprec(512):
        return [from_mp(fn(to_mp(x))) for x in xs.flat]


def ulps(r: mpfr, e: mpmath.mpf) -> float:
    """|r − e| in units of the last place of a 256-bit number near e."""
    with mpmath.workprec(1024):
        exact = e
        err = abs(to_mp(r) - exact)
        ulp = mpmath.ldexp(1, int(mpmath.floor(mpmath.log(abs(exact), 2))) + 1 - BITS)
        return float(err / ulp)


def same(a: mpfr, b: mpfr) -> bool:
    """Equal bit for bit, sign of zero and NaN included."""
    if gmpy2.is_nan(a) or gmpy2.is_nan(b):
        return gmpy2.is_nan(a) and gmpy2.is_nan(b)
    return a == b and gmpy2.is_signed(a) == gmpy2.is_signed(b)


def all_same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and all(same(x, y) for x, y in zip(a.flat, b.flat, strict=True))


@pytest.fixture(autouse=True)
def at_256_bits():
    with M.precision(BITS):
        yield


# ---- precision and conversion


def test_results_have_the_context_precision():
    x = rand_reals(4, -1, 1, 0)
    assert all(v.precision == BITS for v in M.exp(x).flat)
    with M.precision(64):
        assert M.current_bits() == 64
        assert all(v.precision == 64 for v in M.add(x, x).flat)
    assert M.current_bits() == BITS


def test_real_rounds_each_kind_once():
    with mpmath.workprec(512):
        tenth = from_mp(mpmath.mpf(1) / 10)
    got = M.real(["0.1", Fraction(1, 10), 0.1, True, 3, np.int64(-2), gmpy2.mpq(1, 10)])
    assert same(got[0], tenth) and same(got[1], tenth) and same(got[6], tenth)
    assert got[2] == Fraction(0.1)  # a float is its double's exact value (DESIGN §10)
    assert [got[3], got[4], got[5]] == [1, 3, -2]
    assert M.real(2.5).shape == () and same(M.real("-0")[()], mpfr("-0"))
    with M.precision(8):
        assert M.real(1 / 3)[()].precision == 8


# ---- correctly rounded functions: bit for bit


CORRECTLY_ROUNDED = [
    (M.exp, mpmath.exp, -20, 20),
    (M.log, mpmath.log, 1e-6, 1e6),
    (M.sqrt, mpmath.sqrt, 0, 100),
    (M.tanh, mpmath.tanh, -10, 10),
    (M.sin, mpmath.sin, -10, 10),
    (M.cos, mpmath.cos, -10, 10),
    (M.erf, mpmath.erf, -5, 5),
]


@pytest.mark.parametrize("seed", range(len(CORRECTLY_ROUNDED)))
def test_correctly_rounded_to_the_last_bit(seed):
    kernel, reference, lo, hi = CORRECTLY_ROUNDED[seed]
    xs = rand_reals(150, lo, hi, seed)
    assert list(kernel(xs).flat) == oracle(reference, xs)


def test_arithmetic_is_one_rounding():
    a, b = rand_reals(100, -1e3, 1e3, 1), rand_reals(100, -1, 1, 2)
    ops = {M.add: lambda x, y: x + y, M.sub: lambda x, y: x - y}
    ops |= {M.mul: lambda x, y: x * y, M.div: lambda x, y: x / y}
    for kernel, op in ops.items():
        with mpmath.workprec(1024):  # exact for + − ·, and for / one rounding far below
            want = [from_mp(op(to_mp(x), to_mp(y))) for x, y in zip(a, b, strict=True)]
        assert list(kernel(a, b).flat) == want, kernel.__name__


def test_pow_by_an_integer_is_mpfr_pow():
    x = rand_reals(100, -3, 3, 3)
    assert all_same(M.pow(x, 2), M.mul(x, x))
    assert all_same(M.pow(x, gmpy2.mpq(2)), M.pow(x, mpfr(2)))
    assert all_same(M.pow(x, M.real(2)), M.pow(x, 2))  # a 0-d exponent
    assert list(M.pow(x, 3).flat) == oracle(lambda v: v**3, x)
    assert M.pow(M.real(-2), 2)[()] == 4 and M.pow(M.real(-2), -1)[()] == -0.5
    y = rand_reals(50, 0, 10, 4)
    assert all_same(M.pow(y, mpfr("0.5")), M.sqrt(y))
    assert gmpy2.is_nan(M.pow(M.real(-8), Fraction(1, 3))[()])


# ---- composite functions: within a few ulps


COMPOSITE = [
    # (kernel, reference, max ulps from the roundings listed in mpfr.py)
    (M.sigmoid, lambda v: 1 / (1 + mpmath.exp(-v)), 3),
    (M.silu, lambda v: v / (1 + mpmath.exp(-v)), 3),
    (M.gelu, lambda v: v * mpmath.ncdf(v), 2),
]


@pytest.mark.parametrize("kernel,reference,bound", COMPOSITE)
def test_composite_within_ulps(kernel, reference, bound):
    xs = rand_reals(150, -12, 12, 5)
    got = kernel(xs)
    with mpmath.workprec(512):
        worst = max(ulps(r, reference(to_mp(x))) for r, x in zip(got.flat, xs.flat, strict=True))
    assert worst <= bound


def test_gelu_keeps_its_accuracy_far_below_zero():
    xs = M.real([-30, -20.5, -9.25])
    with mpmath.workprec(512):
        assert all(
            ulps(r, to_mp(x) * mpmath.ncdf(to_mp(x))) <= 2
            for r, x in zip(M.gelu(xs), xs, strict=True)
        )
    assert same(M.gelu(M.real("-0"))[()], mpfr("-0"))


def test_gelus_derivative_rounds_phi_as_gelu_does():
    """`gelu_grad` (presk_core.adjoints) reads Φ from `M.gelu_phi`, which is gelu's own: gelu(x)
    is ∘(x · 2Φ) / 2 bit for bit; and Φ + x·φ is within a few ulps away from its zero."""
    from presk_core.adjoints import gelu_grad

    xs = M.real([-30, -20.5, -9.25, -3, 0.5, 2, 7.75])
    twice = M.mul(M.gelu_phi(xs), 2)
    assert all(same(a, b) for a, b in zip(M.gelu(xs), M.div(M.mul(xs, twice), 2), strict=True))
    got = gelu_grad(M.real(np.ones(len(xs))), xs)
    with mpmath.workprec(512):
        for r, x in zip(got, xs, strict=True):
            v = to_mp(x)
            assert ulps(r, mpmath.ncdf(v) + v * mpmath.npdf(v)) <= 4, x


def test_piecewise_functions_and_signed_zeros():
    z, nz, nan = mpfr(0), mpfr("-0"), mpfr("nan")
    r = M.relu(M.real(["-0", "-1", "2", "nan"]))
    assert same(r[0], z) and same(r[1], z) and r[2] == 2 and gmpy2.is_nan(r[3])
    assert same(M.abs(M.real("-0"))[()], z)
    assert same(M.maximum(M.real("-0"), M.real(0))[()], z)
    assert same(M.maximum(M.real(0), M.real("-0"))[()], z)
    assert same(M.minimum(M.real(0), M.real("-0"))[()], nz)
    assert gmpy2.is_nan(M.maximum(M.real(1), nan)[()]) and gmpy2.is_nan(M.minimum(nan, 1)[()])
    sel = M.select(np.array([True, False]), M.real([1, 2]), M.real(7))
    assert list(sel) == [1, 7]
    assert list(M.compare("<", M.real([1, 2, "nan"]), M.real(2))) == [True, False, False]
    assert M.compare("==", M.real("-0"), M.real(0)).dtype == bool


# ---- sums: the fixed order


def fold(values) -> mpfr:
    values = list(values)
    acc = values[0]
    for v in values[1:]:
        acc = acc + v
    return acc


def wild(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Values whose sum depends on its order: magnitudes from 1e-30 to 1e30, both signs."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 10.0 ** rng.integers(-30, 30, shape)
    return M.real(values)


def test_sum_is_left_to_right_from_the_first_term():
    with M.precision(53):
        assert M.sum(M.real([1e30, 1, -1e30]))[()] == 0  # (1e30 + 1) − 1e30
        assert M.sum(M.real([1e30, -1e30, 1]))[()] == 1
        assert M.mean(M.real([1e30, 1, -1e30]))[()] == 0


@pytest.mark.parametrize("seed", range(6))
def test_sum_over_one_axis_is_an_explicit_fold(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 5, 3))
    x = wild(shape, seed)
    for view in (x, x.transpose(2, 0, 1), np.asfortranarray(x)):
        for axis in range(3):
            moved = np.moveaxis(view, axis, -1)
            want = np.array([fold(moved[i]) for i in np.ndindex(moved.shape[:-1])], dtype=object)
            assert all_same(M.sum(view, axis), want.reshape(moved.shape[:-1]))
        assert same(M.sum(view)[()], fold(list(view.reshape(-1))))  # row-major order


def test_negative_zero_survives_sums():
    nz = M.real(["-0", "-0", "-0"])
    assert same(M.sum(nz)[()], mpfr("-0"))
    assert same(M.sum(M.real(["-0"]))[()], mpfr("-0"))
    assert same(M.mean(nz)[()], mpfr("-0"))
    assert same(M.sum(M.real(["-0", "0"]))[()], mpfr(0))


def test_length_zero_reductions():
    x = M.real(np.zeros((2, 0)))
    s = M.sum(x, 1)
    assert s.shape == (2,) and all(isinstance(v, mpfr) and same(v, mpfr(0)) for v in s)
    assert same(M.sum(M.real([]))[()], mpfr(0))
    assert all(gmpy2.is_nan(v) for v in M.mean(x, 1))
    assert all(v == mpfr("-inf") for v in M.max(x, 1))
    assert all(v == mpfr("inf") for v in M.min(x, 1))
    assert M.sum(x, 0).shape == (0,)
    with pytest.raises(ValueError):
        M.argmax(x, 1)


def test_mean_divides_by_the_exact_count():
    with M.precision(4):  # 17 needs 5 bits; a rounded count would give 1/16 or 1/18
        assert M.mean(M.real([1] + [0] * 16))[()] == mpfr(1) / 17 == 0.05859375


def test_max_min_argmax():
    x = M.real([[3, 1, 3, -2], ["-0", "0", "-0", "-1"], [1, "nan", 5, "nan"]])
    assert list(M.max(x, 1)[:2]) == [3, 0] and same(M.max(x, 1)[1], mpfr(0))
    assert gmpy2.is_nan(M.max(x, 1)[2])
    assert list(M.argmax(x, 1)) == [0, 1, 1]
    assert M.argmax(x, 1).dtype == np.int64
    assert list(M.min(x, 1)[:2]) == [-2, -1]
    assert M.argmax(M.real([[1, 2], [9, 3]]))[()] == 2  # row-major over all axes
    assert list(M.argmax(M.real([[1, 2], [9, 3]]), 0)) == [1, 1]


# ---- softmax


def test_softmax_against_mpmath_and_sums_to_one():
    x = rand_reals(24, -3, 3, 7).reshape(4, 6)
    y, ly = M.softmax(x, 1), M.log_softmax(x, 1)
    with mpmath.workprec(512):
        for row, yr, lr in zip(x, y, ly, strict=True):
            xs = [to_mp(v) for v in row]
            total = mpmath.fsum(mpmath.exp(v) for v in xs)
            for v, r, lv in zip(xs, yr, lr, strict=True):
                assert ulps(r, mpmath.exp(v) / total) <= 8  # |x − max| ≤ 6 amplifies d's rounding
                assert ulps(lv, v - mpmath.log(total)) <= 8
    for row in y:
        assert abs(to_mp(fold(row)) - 1) <= len(row) * mpmath.ldexp(1, -BITS)


def test_masked_softmax_gives_exact_zeros():
    x = rand_reals(12, -3, 3, 8).reshape(3, 4)
    causal = np.tril(np.ones((3, 4), dtype=bool))
    y, ly = M.softmax(x, 1, mask=causal), M.log_softmax(x, 1, mask=causal)
    for i in range(3):
        allowed = M.softmax(x[i, : i + 1], 0)
        assert all_same(y[i, : i + 1], allowed)
        assert all(same(v, mpfr(0)) for v in y[i, i + 1 :])
        assert all_same(ly[i, : i + 1], M.log_softmax(x[i, : i + 1], 0))
        assert all(v == mpfr("-inf") for v in ly[i, i + 1 :])
    assert y[0, 0] == 1
    nothing = np.zeros(4, dtype=bool)  # a row with no allowed position
    assert all(same(v, mpfr(0)) for v in M.softmax(x, 1, mask=nothing).flat)
    assert all(v == mpfr("-inf") for v in M.log_softmax(x, 1, mask=nothing).flat)


def test_softmax_on_zeros_is_uniform_and_the_loss_is_ln_64():
    logits = M.zeros((2, 8, 64))  # MiniGPT's initial logits (tutorial step 9)
    assert all(v == mpfr(1) / 64 for v in M.softmax(logits, 2).flat)
    picked = M.take(M.log_softmax(logits, 2), np.arange(16).reshape(2, 8) % 64, 2)
    loss = M.mean(M.neg(picked))[()]
    assert abs(to_mp(loss) - mpmath.log(64)) <= 16 * mpmath.ldexp(1, -BITS)


# ---- contractions


def explicit_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty((a.shape[0], b.shape[1]), dtype=object)
    for i, j in np.ndindex(out.shape):
        out[i, j] = fold(a[i, k] * b[k, j] for k in range(a.shape[1]))
    return out


def test_dot_is_the_explicit_fold_bit_for_bit():
    a, b = wild((5, 7), 10), wild((7, 3), 11)
    assert all_same(M.dot(a, b), explicit_matmul(a, b))
    a3 = wild((2, 3, 7), 12)
    assert all_same(M.dot(a3, b).reshape(6, 3), explicit_matmul(a3.reshape(6, 7), b))
    v = wild((7,), 13)
    assert all_same(M.dot(v, b), explicit_matmul(v.reshape(1, 7), b).reshape(3))


def test_contract_with_batch_and_several_summed_axes():
    a, b = wild((2, 3, 4, 5), 14), wild((5, 2, 6, 4), 15)  # batch a0~b1, sum a2~b3 and a3~b0
    got = M.contract(a, b, [2, 3], [3, 0], [0], [1])
    assert got.shape == (2, 3, 6)
    for n, i, j in np.ndindex(got.shape):
        terms = [a[n, i, k, m] * b[m, n, j, k] for k in range(4) for m in range(5)]
        assert same(got[n, i, j], fold(terms))  # row-major in the order sum_a lists


def test_contractions_keep_negative_zero_and_length_zero():
    a, b = M.real([["-0", "-0"]]), M.real([[1], [2]])
    assert same(M.dot(a, b)[0, 0], mpfr("-0"))
    empty = M.dot(M.real(np.zeros((2, 0))), M.real(np.zeros((0, 3))))
    assert empty.shape == (2, 3) and all(
        isinstance(v, mpfr) and same(v, mpfr(0)) for v in empty.flat
    )
    assert M.contract(M.real(np.zeros((0, 2))), M.real(np.zeros((2, 3))), [1], [0]).shape == (0, 3)
    with pytest.raises(ValueError):
        M.contract(M.real(np.zeros((2, 2))), M.real(np.zeros((3, 3))), [1], [0])


# ---- gathers


def test_take_embed_one_hot():
    x = M.real([[1, 2, 3], [4, 5, 6]])
    assert list(M.take(x, np.array([2, 0]), 1)) == [3, 4]
    assert list(M.take(x, np.array([1, 0, 1]), 0)) == [4, 2, 6]
    assert M.take(M.real([7, 8, 9]), np.array([[2, 0], [1, 1]]), 0).tolist() == [[9, 7], [8, 8]]
    e = M.embed(x, np.array([[1, 0, 1]]))
    assert e.shape == (1, 3, 3) and list(e[0, 0]) == [4, 5, 6]
    oh = M.one_hot(np.array([2, 0]), 3)
    assert oh.tolist() == [[0, 0, 1], [1, 0, 0]] and all(isinstance(v, mpfr) for v in oh.flat)
    for bad in (lambda: M.take(x, np.array([3, 0]), 1), lambda: M.embed(x, np.array([-1]))):
        with pytest.raises(IndexError):
            bad()
