"""MPFR kernels of the reference interpreter: the arithmetic of ℝ (DESIGN §4).

A real tensor is a numpy array of dtype object holding `gmpy2.mpfr` values; indices are
int64 arrays, masks bool arrays. Every kernel computes at the precision of the current
gmpy2 context, which `precision(bits)` sets, round to nearest even; ∘(…) below is one
such rounding. Call kernels inside `with precision(bits):` only: outside it gmpy2 rounds
to 53 bits (DESIGN §10). Results are always arrays (a scalar is a 0-d array).

Orders and signs, the same in every backend:

- A sum adds its terms in increasing index, left to right, starting from the first term:
  ∘(…∘(∘(x0 + x1) + x2)… + xn-1). So −0 survives a sum of −0s, and a sum of length 0 is
  +0. A reduction over all axes folds the row-major order of the indices. `mean` is
  ∘(sum / n), with the count n exact.
- A contraction (`dot`, `contract`) is the same fold over the products, each product
  rounded: ∘(…∘(∘(a0·b0) + ∘(a1·b1))…). Over several summed axes the terms come in the
  row-major order of the summed indices, in the order the caller lists the axes.
- `maximum`/`max` follow IEEE 754-2019 maximum: NaN if an operand is NaN, and +0 > −0;
  `minimum`/`min` mirror it. `max` of length 0 is −inf, `min` +inf. `argmax` is the first
  index whose value is the `max` bit for bit (so a NaN, or +0 over −0).
- `relu(x)` is x where x > 0 or x is NaN, and +0 elsewhere (so relu(−0) = +0).

The composite functions round as follows (−x and ·/2 are exact):

- sigmoid(x) = ∘(1 / ∘(1 + ∘(exp(−x)))).
- silu(x) = ∘(x / ∘(1 + ∘(exp(−x)))), PyTorch's formula for x·σ(x).
- gelu(x) = x·Φ(x) with Φ(x) = (1 + erf(x/√2))/2 = erfc(−x/√2)/2, computed as
  ∘(x · ∘(erfc(−t))) / 2 where t = ∘'(x · ∘'(√(1/2))) and ∘' rounds to 64 bits more than
  the context. erfc keeps Φ's relative accuracy where 1 + erf(…) cancels (x ≪ 0), and
  the guard bits keep the rounding of x/√2 from being amplified there (Φ's condition
  number grows as x²): gelu is within 2 ulps. It is the erf form of DESIGN §4, not tanh's.
- gelu's derivative (`gelu_grad`, differentiation's): ∘(ct · ∘(Φ(x) + ∘(x · φ(x)))) with
  Φ(x) = ∘(erfc(−t)) / 2 rounded as in gelu and φ(x) = ∘(∘(exp(−∘(x·x)/2)) / ∘(√(2π))).
- softmax: m = max over the allowed positions (exact), dᵢ = ∘(xᵢ − m),
  eᵢ = ∘(exp(dᵢ)), s = the ordered sum of the eᵢ, yᵢ = ∘(eᵢ / s).
- log_softmax: m, dᵢ, eᵢ and s as softmax, then yᵢ = ∘(dᵢ − ∘(log s)).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction

import gmpy2
import numpy as np
from gmpy2 import mpfr

from presk_core import erfc_c, fold_c, normal_c, room, ufuncs_c

Array = np.ndarray
_MPQ, _MPZ = type(gmpy2.mpq(0)), type(gmpy2.mpz(0))


@contextlib.contextmanager
def precision(bits: int) -> Iterator[None]:
    """Evaluate at `bits` bits, round to nearest even: a fresh gmpy2 context per `with`."""
    with gmpy2.context(precision=bits, round=gmpy2.RoundToNearest):
        yield


def current_bits() -> int:
    """The precision of the current context, in bits."""
    return gmpy2.get_context().precision


def _arr(value: object) -> Array:
    """An object array: ufuncs give a bare element for 0-d operands."""
    if isinstance(value, np.ndarray):
        return value
    out = np.empty((), dtype=object)
    out[()] = value
    return out


def _full(shape: tuple[int, ...], value: object) -> Array:
    out = np.empty(shape, dtype=object)
    out[...] = _arr(value)
    return out


# ---- conversion


def _to_mpfr(v: object) -> mpfr:
    if type(v) is mpfr:
        return mpfr(v)  # itself at the context's precision, else rounded to it
    if isinstance(v, bool | np.bool_ | int | np.integer):
        return mpfr(int(v))
    if isinstance(v, float | np.floating):
        return mpfr(float(v))  # the double's exact value, rounded once
    if isinstance(v, Fraction):
        return mpfr(gmpy2.mpq(v.numerator, v.denominator))
    if isinstance(v, str | mpfr | _MPQ | _MPZ):
        return mpfr(v)  # decimal strings and rationals are rounded once, correctly
    raise TypeError(f"cannot convert {type(v).__name__} to a real")


_REAL = np.frompyfunc(_to_mpfr, 1, 1)
_MPFR = np.frompyfunc(mpfr, 1, 1)


def real(x: object) -> Array:
    """`x` (bools, ints, floats, Fractions, gmpy2 numbers, decimal strings, or arrays of
    them) as an mpfr array, each element correctly rounded to the current precision (a
    tensor larger than the room there is refused first: room.RoomError)."""
    if isinstance(x, np.ndarray) and x.size >= room.CHECKED:
        room.make_room(x.shape)
    if isinstance(x, np.ndarray) and x.dtype == np.float64 and x.size >= 64:
        done = normal_c.reals(x)  # θ's doubles in C, the same objects' values
        if done is not None:
            return done
    if isinstance(x, np.ndarray) and x.dtype.kind in "biuf":  # Python bools, ints, floats
        return _arr(_MPFR(x.astype(object)))
    return _arr(_REAL(np.asarray(x, dtype=object)))


def zeros(shape: Sequence[int]) -> Array:
    """+0 at every position of `shape`."""
    return _full(tuple(shape), mpfr(0))


# ---- elementwise


_C = ufuncs_c.load()  # MPFR's add, sub, mul, div as numpy ufuncs in C (the same bits)
_ADD, _SUB = (_C.add, _C.sub) if _C is not None else (np.add, np.subtract)
_MUL, _DIV = (_C.mul, _C.div) if _C is not None else (np.multiply, np.true_divide)


def add(a: Array, b: Array) -> Array:
    """∘(a + b), broadcasting."""
    return _arr(_ADD(a, b))


def sub(a: Array, b: Array) -> Array:
    """∘(a − b), broadcasting."""
    return _arr(_SUB(a, b))


def mul(a: Array, b: Array) -> Array:
    """∘(a · b), broadcasting."""
    return _arr(_MUL(a, b))


def div(a: Array, b: Array) -> Array:
    """∘(a / b), broadcasting; x/0 is ±inf, 0/0 NaN (MPFR)."""
    return _arr(_DIV(a, b))


def neg(x: Array) -> Array:
    """−x (exact)."""
    return _arr(np.negative(x))


def _exponent(y: object) -> object:
    """An integer-valued exponent as a Python int (MPFR's pow by an integer), else an mpfr."""
    if isinstance(y, np.ndarray) and y.ndim == 0:
        y = y[()]
    if isinstance(y, bool | np.bool_ | int | np.integer | _MPZ):
        return int(y)
    if isinstance(y, Fraction | _MPQ) and y.denominator == 1:
        return int(y.numerator)
    if isinstance(y, mpfr) and gmpy2.is_integer(y):
        return int(y)
    return _to_mpfr(y)


def pow(x: Array, y: object) -> Array:
    """∘(x^y), MPFR's pow, correctly rounded: x^2 is ∘(x·x). A scalar exponent with an
    integer value is used as that integer ((−2)^2 = 4); another rational one is first
    rounded to the current precision. An array exponent is taken elementwise."""
    if isinstance(y, np.ndarray) and y.ndim > 0:
        return _arr(np.power(x, y))
    e = _exponent(y)
    if type(e) is int and e == 2:  # ∘(x²) either way; MPFR's mul is the faster
        return _arr(_MUL(x, x))
    return _arr(np.power(x, e))


def _unary(fn: Callable[[mpfr], mpfr], doc: str) -> Callable[[Array], Array]:
    ufunc = np.frompyfunc(fn, 1, 1)

    def kernel(x: Array) -> Array:
        return _arr(ufunc(x))

    kernel.__doc__ = doc
    return kernel


sqrt = _unary(gmpy2.sqrt, "∘(√x), MPFR; √(−0) = −0, negative x gives NaN.")
exp = _unary(gmpy2.exp, "∘(exp x), MPFR.")
log = _unary(gmpy2.log, "∘(log x), MPFR; log 0 = −inf, negative x gives NaN.")
tanh = _unary(gmpy2.tanh, "∘(tanh x), MPFR.")
sin = _unary(gmpy2.sin, "∘(sin x), MPFR.")
cos = _unary(gmpy2.cos, "∘(cos x), MPFR.")
erf = _unary(gmpy2.erf, "∘(erf x), MPFR.")
abs = _unary(builtins.abs, "|x| (exact; |−0| = +0).")


def sigmoid(x: Array) -> Array:
    """σ(x) = ∘(1 / ∘(1 + ∘(exp(−x))))."""
    return div(1, add(1, exp(neg(x))))


def silu(x: Array) -> Array:
    """x·σ(x) = ∘(x / ∘(1 + ∘(exp(−x))))."""
    return div(x, add(1, exp(neg(x))))


def gelu(x: Array) -> Array:
    """x·Φ(x) = ∘(x · ∘(erfc(−t))) / 2 with t = x/√2 to 64 more bits (the module's
    docstring)."""
    return div(mul(x, _twice_phi(x)), 2)


def gelu_phi(x: Array) -> Array:
    """Φ(x) as `gelu` rounds it: ∘(erfc(−t)) / 2 (for `gelu_grad`, presk_core.adjoints)."""
    return div(_twice_phi(x), 2)


def gelu_grad(ct: Array, x: Array) -> Array:
    """ct · ∘(Φ(x) + ∘(x · φ(x))) (`gelu_grad`, presk_core.adjoints), Φ and φ as
    `gelu_phi` and `gelu_density` round them: in C where it can run, the same operations
    in the same order."""
    x = _arr(x)
    twice = _twice_phi(x)
    fused = erfc_c.gelu_grad(_arr(ct), x, twice, mpfr(1) / 2, _root_2pi())
    if fused is not None:
        return fused
    return mul(ct, add(div(twice, 2), mul(x, gelu_density(x))))


def _root_2pi() -> mpfr:
    return gmpy2.sqrt(2 * gmpy2.const_pi())


def gelu_density(x: Array) -> Array:
    """φ(x) as `gelu_grad` rounds it: ∘(∘(exp(−∘(x·x)/2)) / ∘(√(2·∘(π))))."""
    root = _root_2pi()
    return div(_EXP(np.multiply(np.negative(np.multiply(x, x)), mpfr(1) / 2)), root)


def _twice_phi(x: Array) -> Array:
    context = gmpy2.get_context()
    bits = context.precision
    known = _PHI.setdefault((bits, context.round), {})
    if len(known) > _PHI_SIZE:
        known.clear()
    x = _arr(x)
    flat = x.reshape(-1)
    values = list(map(known.get, flat))  # None where not known yet
    missing = [i for i, v in enumerate(values) if v is None]
    if missing:
        fresh = flat[missing]
        with precision(bits + 64):  # −t here: a negation rounds to its context
            minus_t = np.negative(np.multiply(fresh, gmpy2.sqrt(mpfr(1) / 2)))
        computed = erfc_c.erfc(minus_t)  # rounded once, to the context's precision (MPFR's)
        known.update(zip(fresh, computed, strict=True))
        for i, v in zip(missing, computed, strict=True):
            values[i] = v
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(x.shape)


_PHI: dict[tuple[int, int], dict[mpfr, mpfr]] = {}
"""2Φ(x) = erfc(−t) by the value of x, for each precision and rounding: a function of x alone, so that
`gelu_grad` finds what `gelu` computed on the same x (erfc is most of their cost)."""
_PHI_SIZE = 1 << 17


def _max2(a: mpfr, b: mpfr) -> mpfr:
    if a > b:
        return a
    if b > a:
        return b
    if gmpy2.is_nan(a):
        return a
    if gmpy2.is_nan(b):
        return b
    return b if gmpy2.is_signed(a) else a  # equal: +0 beats −0


def _min2(a: mpfr, b: mpfr) -> mpfr:
    if a < b:
        return a
    if b < a:
        return b
    if gmpy2.is_nan(a):
        return a
    if gmpy2.is_nan(b):
        return b
    return a if gmpy2.is_signed(a) else b  # equal: −0 beats +0


_MAX2, _MIN2 = np.frompyfunc(_max2, 2, 1), np.frompyfunc(_min2, 2, 1)


def maximum(a: Array, b: Array) -> Array:
    """The larger of a and b, broadcasting: NaN if either is, +0 over −0."""
    return _arr(_MAX2(a, b))


def minimum(a: Array, b: Array) -> Array:
    """The smaller of a and b, broadcasting: NaN if either is, −0 under +0."""
    return _arr(_MIN2(a, b))


def relu(x: Array) -> Array:
    """x where x > 0 or x is NaN, +0 elsewhere (exact)."""
    zero = mpfr(0)
    return _arr(np.frompyfunc(lambda v: zero if v <= 0 else v, 1, 1)(x))


def select(mask: Array, a: Array, b: Array) -> Array:
    """a where mask is true, b elsewhere, broadcasting (exact)."""
    return _arr(np.where(mask, _arr(a), _arr(b)))


COMPARE: dict[str, Callable[[object, object], object]] = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}


def compare(op: str, a: Array, b: Array) -> Array:
    """A mask, a `op` b elementwise (op one of < <= > >= == !=): false with a NaN except for
    !=, and −0 == +0."""
    return np.asarray(COMPARE[op](a, b), dtype=bool)


# ---- reductions


def _one_axis(x: Array, axis: int | None) -> tuple[Array, int]:
    """`x` with the reduced axis: all axes become one axis in row-major order."""
    x = _arr(x)
    if axis is None:
        return x.reshape(-1), 0  # a copy in C order when x is not C-contiguous
    if not 0 <= axis < x.ndim:
        raise ValueError(f"axis {axis} out of range for {x.ndim} axes")
    return x, axis


def _rest(x: Array, axis: int) -> tuple[int, ...]:
    return x.shape[:axis] + x.shape[axis + 1 :]


def sum(x: Array, axis: int | None = None) -> Array:
    """The sum over `axis` (every axis if None) in the fixed order; +0 over length 0."""
    x, axis = _one_axis(x, axis)
    if x.shape[axis] == 0:
        return zeros(_rest(x, axis))
    return _arr(_ADD.reduce(x, axis=axis))  # a left fold from the first term (DESIGN §10)


def mean(x: Array, axis: int | None = None) -> Array:
    """∘(sum / n) with the count n exact; NaN over length 0."""
    x, axis = _one_axis(x, axis)
    return _arr(np.true_divide(sum(x, axis), x.shape[axis]))


def max(x: Array, axis: int | None = None) -> Array:
    """The maximum over `axis` (every axis if None), as `maximum`; −inf over length 0."""
    x, axis = _one_axis(x, axis)
    if x.shape[axis] == 0:
        return _full(_rest(x, axis), mpfr("-inf"))
    return _arr(_MAX2.reduce(x, axis=axis))


def min(x: Array, axis: int | None = None) -> Array:
    """The minimum over `axis` (every axis if None), as `minimum`; +inf over length 0."""
    x, axis = _one_axis(x, axis)
    if x.shape[axis] == 0:
        return _full(_rest(x, axis), mpfr("inf"))
    return _arr(_MIN2.reduce(x, axis=axis))


def _same(a: mpfr, b: mpfr) -> bool:
    if gmpy2.is_nan(a) or gmpy2.is_nan(b):
        return gmpy2.is_nan(a) and gmpy2.is_nan(b)
    return a == b and gmpy2.is_signed(a) == gmpy2.is_signed(b)


_SAME = np.frompyfunc(_same, 2, 1)


def argmax(x: Array, axis: int | None = None) -> Array:
    """The first index along `axis` (of the row-major order if None) whose value is the
    `max`, bit for bit; int64. Length 0 is an error: there is no index to give."""
    x, axis = _one_axis(x, axis)
    if x.shape[axis] == 0:
        raise ValueError("argmax over an axis of length 0")
    hits = np.asarray(_SAME(x, np.expand_dims(max(x, axis), axis)), dtype=bool)
    return np.asarray(np.argmax(hits, axis=axis), dtype=np.int64)


def _above(a: mpfr, b: mpfr) -> bool:
    """a comes before b in `argmax`'s order: NaN above every number, +0 above −0."""
    return _same(_max2(a, b), a) and not _same(a, b)


def top_k(x: Array, axis: int, k: int) -> Array:
    """The indices of the k largest elements along `axis`, largest first, ties to the first
    index (`argmax`'s order: `top_k(x, axis, 1)` is its index); int64, the axis of length k."""
    x = _arr(x)
    moved = np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    if not 0 <= k <= n:
        raise ValueError(f"top_k of {k} elements of an axis of length {n}")
    rows = moved.reshape(-1, n)
    out = np.zeros((rows.shape[0], k), dtype=np.int64)
    for r, row in enumerate(rows):

        def order(i: int, j: int, row=row) -> int:
            if _above(row[i], row[j]):
                return -1
            return 1 if _above(row[j], row[i]) else i - j

        out[r] = sorted(range(n), key=functools.cmp_to_key(order))[:k]
    return np.moveaxis(out.reshape(moved.shape[:-1] + (k,)), -1, axis)


def _softmax_parts(
    x: Array, axis: int, mask: Array | None
) -> tuple[Array, Array, Array, Array | bool]:
    """(d, e, s, where) of the module's docstring; d and e are +0 at masked positions."""
    x = _arr(x)
    if not 0 <= axis < x.ndim:
        raise ValueError(f"axis {axis} out of range for {x.ndim} axes")
    where: Array | bool = True
    allowed = x
    if mask is not None:
        where = np.broadcast_to(np.asarray(mask, dtype=bool), x.shape)
        allowed = np.where(where, x, mpfr("-inf"))
    m = np.expand_dims(max(allowed, axis), axis)
    d, e = zeros(x.shape), zeros(x.shape)
    np.subtract(x, m, out=d, where=where)
    _EXP(d, out=e, where=where)
    s = np.expand_dims(sum(e, axis), axis)  # masked +0s add nothing: s ≥ 1 or NaN
    return d, e, s, where


_EXP = np.frompyfunc(gmpy2.exp, 1, 1)
_LOG = np.frompyfunc(gmpy2.log, 1, 1)


def softmax(x: Array, axis: int, mask: Array | None = None) -> Array:
    """exp(x − max) / sum over `axis`, over the positions `mask` allows (broadcast to x);
    masked positions, and rows with no allowed position, are exactly +0."""
    d, e, s, where = _softmax_parts(x, axis, mask)
    y = zeros(d.shape)
    np.true_divide(e, s, out=y, where=where)
    return y


def log_softmax(x: Array, axis: int, mask: Array | None = None) -> Array:
    """x − max − log(sum exp(x − max)) over `axis`, over the positions `mask` allows;
    masked positions, and rows with no allowed position, are exactly −inf."""
    d, _, s, where = _softmax_parts(x, axis, mask)
    y = _full(d.shape, mpfr("-inf"))
    np.subtract(d, _LOG(s), out=y, where=where)
    return y


# ---- contractions


def contract(
    a: Array,
    b: Array,
    sum_a: Sequence[int],
    sum_b: Sequence[int],
    batch_a: Sequence[int] = (),
    batch_b: Sequence[int] = (),
) -> Array:
    """Σ a·b over the axes `sum_a` of a paired with `sum_b` of b, for each position of the
    batch axes (`batch_a` of a paired with `batch_b` of b, equal lengths). The result's axes
    are the batch axes, then a's other axes, then b's, each group in its operand's order.
    Each output is the fold of the module's docstring, +0 when nothing is summed over."""
    a, b = _arr(a), _arr(b)
    sum_a, sum_b, batch_a, batch_b = map(list, (sum_a, sum_b, batch_a, batch_b))
    free_a = [i for i in range(a.ndim) if i not in sum_a and i not in batch_a]
    free_b = [i for i in range(b.ndim) if i not in sum_b and i not in batch_b]
    batch = tuple(a.shape[i] for i in batch_a)
    summed = tuple(a.shape[i] for i in sum_a)
    if batch != tuple(b.shape[i] for i in batch_b) or summed != tuple(b.shape[i] for i in sum_b):
        raise ValueError(f"cannot contract {a.shape} with {b.shape}")
    shape_a = tuple(a.shape[i] for i in free_a)
    shape_b = tuple(b.shape[i] for i in free_b)
    out = batch + shape_a + shape_b
    k, m, n = math.prod(summed), math.prod(shape_a), math.prod(shape_b)
    if k == 0:
        return zeros(out)  # np.matmul would give the int 0
    a2 = a.transpose(batch_a + free_a + sum_a).reshape(batch + (m, k))
    b2 = b.transpose(batch_b + sum_b + free_b).reshape(batch + (k, n))
    folded = fold_c.fold(a2, b2)  # the same fold in C, where it can run
    if folded is None:
        folded = np.matmul(a2, b2)  # each output a left fold (DESIGN §10)
    return _arr(folded).reshape(out)


def dot(a: Array, b: Array) -> Array:
    """a · b: the last axis of a contracted with the first of b; a's other axes, then b's."""
    a, b = _arr(a), _arr(b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("dot needs an axis in each operand")
    return contract(a, b, [a.ndim - 1], [0])


# ---- gathers


def _check_ids(ids: Array, n: int) -> Array:
    ids = np.asarray(ids, dtype=np.int64)
    bad = (ids < 0) | (ids >= n)
    if bad.any():
        raise IndexError(f"index {int(ids[bad].flat[0])} out of range for length {n}")
    return ids


def take(x: Array, ids: Array, axis: int) -> Array:
    """x at ids[s] along `axis`, for each position s of x's other axes broadcast (by trailing
    position) with ids' axes: `take(axis a, ℝ[s, a: n], idx[n][s]) -> ℝ[s]`."""
    x = _arr(x)
    ids = _check_ids(ids, x.shape[axis])
    moved = np.moveaxis(x, axis, -1)
    shape = np.broadcast_shapes(moved.shape[:-1], ids.shape)
    moved = np.broadcast_to(moved, shape + moved.shape[-1:])
    picked = np.take_along_axis(moved, np.broadcast_to(ids, shape)[..., None], axis=-1)
    return _arr(picked[..., 0].copy())


def embed(table: Array, ids: Array) -> Array:
    """The rows table[ids]: `embed(ℝ[n, t], idx[n][s]) -> ℝ[s, t]`."""
    table = _arr(table)
    return _arr(table[_check_ids(ids, table.shape[0])])


def one_hot(ids: Array, n: int) -> Array:
    """1 at ids along a new last axis of length n, +0 elsewhere."""
    ids = _check_ids(ids, n)
    out = zeros(ids.shape + (n,))
    np.put_along_axis(out, ids[..., None], mpfr(1), axis=-1)
    return out
