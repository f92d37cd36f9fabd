"""Randomness of the reference interpreter: Threefry-2x32 keys, as JAX makes them (DESIGN §5).

Every draw is a pure function of a key. `--seed` makes the root key; the key of a
synthesized argument, and of each parameter, is the root key with a name folded in. A
tensor's draw at row-major position i is Threefry-2x32 of the counter i, whatever the
tensor's size. Reals are computed in MPFR and rounded to the nearest double once, so every
machine and every backend sees the same bits. docs/randomness.md is the specification.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import NamedTuple

import gmpy2
import numpy as np

from presk_core import normal_c

MASK32 = 0xFFFFFFFF
BITS = 256  # MPFR precision of Box–Muller, of xavier's bound, of sample's softmax on doubles
_PARITY = 0x1BD11BDA  # Threefish's key-schedule parity, truncated to 32 bits (Random123)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # Random123's R_32x2, four rounds each
_MAX_BOUND = 2**53  # randint: floor(u · bound) reaches every index up to here
MAX_ELEMENTS = 2**31  # the most elements one draw makes (16 GiB of doubles); SizeError beyond

Shape = tuple[int, ...]


class SizeError(ValueError):
    """A draw of more than MAX_ELEMENTS elements (a huge `--dim` or constant): E7011 to a user."""


class Key(NamedTuple):
    """A Threefry-2x32 key: two uint32 words, JAX's `key_data` order (k0 is a seed's high word)."""

    k0: int
    k1: int


# ---- the block function ----------------------------------------------------------------------


def _block(key: Key, x0, x1):
    """Threefry-2x32, 20 rounds, on words below 2^32: Python ints, or uint64 arrays elementwise.

    The same code serves both so that keys (scalars) and draws (arrays) share one definition;
    arithmetic is masked to 32 bits, which uint64 holds without overflow.
    """
    k0, k1 = key
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0 = (x0 + ks[0]) & MASK32
    x1 = (x1 + ks[1]) & MASK32
    for i in range(5):  # five groups of four rounds, a key injection after each
        for r in _ROTATIONS[i % 2]:
            x0 = (x0 + x1) & MASK32
            x1 = (((x1 << r) | (x1 >> (32 - r))) & MASK32) ^ x0
        x0 = (x0 + ks[(i + 1) % 3]) & MASK32
        x1 = (x1 + ks[(i + 2) % 3] + i + 1) & MASK32
    return x0, x1


def threefry2x32(key: Key, x0, x1) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32-20 of the counter words (x0, x1), elementwise over arrays: uint32 pairs."""
    a = np.asarray(x0, dtype=np.uint64)
    b = np.asarray(x1, dtype=np.uint64)
    if np.any(a > MASK32) or np.any(b > MASK32):
        raise ValueError("threefry2x32: counter words must be below 2^32")
    y0, y1 = _block(_check_key(key), a, b)
    return y0.astype(np.uint32), y1.astype(np.uint32)


def draw_bits(k0, k1, counter) -> np.ndarray:
    """Draw `counter` of the key (k0, k1), elementwise over arrays of keys and counters: the
    uint64 `(y0 << 32) | y1` of `hash(key, counter >> 32, counter mod 2^32)`, as
    `random_bits(Key(k0, k1), n)[counter]` (the kernels' `key_word`, `uniform`, `bernoulli`)."""
    k0, k1, c = (np.asarray(x).astype(np.uint64) for x in (k0, k1, counter))
    if np.any(k0 > MASK32) or np.any(k1 > MASK32):
        raise ValueError("draw_bits: a key is two uint32 words")
    y0, y1 = _block((k0, k1), c >> np.uint64(32), c & np.uint64(MASK32))
    return (y0 << np.uint64(32)) | y1


def threefry_2x32(key: Key, counts) -> np.ndarray:
    """JAX's `threefry_2x32(keypair, count)`: hash the first half of the flat counts with the
    second (a zero appended to an odd count), and concatenate the two output words' arrays."""
    c = np.asarray(counts, dtype=np.uint64)
    flat = c.ravel()
    odd = flat.size % 2
    if odd:
        flat = np.concatenate([flat, np.zeros(1, np.uint64)])
    half = flat.size // 2
    y0, y1 = threefry2x32(key, flat[:half], flat[half:])
    out = np.concatenate([y0, y1])
    return (out[:-1] if odd else out).reshape(c.shape)


# ---- keys --------------------------------------------------------------------------------------


def _check_key(key: Key) -> Key:
    k0, k1 = key
    if not (0 <= k0 <= MASK32 and 0 <= k1 <= MASK32):
        raise ValueError(f"a key is two uint32 words, not {key!r}")
    return Key(int(k0), int(k1))


def _hash(key: Key, c0: int, c1: int) -> Key:
    y0, y1 = _block(_check_key(key), c0, c1)
    return Key(y0, y1)


def root_key(seed: int) -> Key:
    """The key of `--seed`, as `jax.random.key(seed)`: the seed's 64-bit two's complement, high
    word first; so (0, seed) for 0 <= seed < 2^32."""
    if not -(2**63) <= seed < 2**64:
        raise ValueError(f"a seed is a 64-bit integer, not {seed}")
    s = seed % 2**64
    return Key(s >> 32, s & MASK32)


def split(key: Key, n: int = 2) -> list[Key]:
    """n new keys, as `jax.random.split` (JAX >= 0.5, `jax_threefry_partitionable`): the i-th is
    the hash of the counter (i >> 32, i mod 2^32)."""
    if n < 0:
        raise ValueError(f"split: a count of keys is a natural, not {n}")
    i = np.arange(n, dtype=np.uint64)
    y0, y1 = _block(_check_key(key), i >> np.uint64(32), i & np.uint64(MASK32))
    return [Key(int(a), int(b)) for a, b in zip(y0, y1, strict=True)]


def fold_in(key: Key, data: int) -> Key:
    """`jax.random.fold_in(key, data)` for a uint32 `data`: the hash of the counter (0, data)."""
    if not 0 <= data <= MASK32:
        raise ValueError(f"fold_in: data is a uint32, not {data}")
    return _hash(key, 0, data)


def name_words(name: str) -> list[int]:
    """The uint32 words `fold_in_name` folds: the UTF-8 bytes zero-padded to a multiple of four,
    as little-endian words, then the byte length (so that the words determine the name)."""
    raw = name.encode("utf-8")
    if len(raw) > MASK32:
        raise ValueError("fold_in_name: a name of 2^32 bytes or more")
    padded = raw + b"\0" * (-len(raw) % 4)
    words = [int.from_bytes(padded[i : i + 4], "little") for i in range(0, len(padded), 4)]
    return [*words, len(raw)]


def fold_in_name(key: Key, name: str) -> Key:
    """The key with a name folded in, one `fold_in` per word of `name_words(name)`."""
    for w in name_words(name):
        key = fold_in(key, w)
    return key


def fold_path(key: Key, path: str) -> Key:
    """The key with a dotted path folded in one component at a time: `fold_path(k, "a.b")` is
    `fold_in_name(fold_in_name(k, "a"), "b")`, so a module's init can fold its own names."""
    for part in path.split("."):
        if not part:
            raise ValueError(f"fold_path: empty component in {path!r}")
        key = fold_in_name(key, part)
    return key


# ---- bits and uniforms -------------------------------------------------------------------------


def _shape(shape: int | Sequence[int]) -> tuple[Shape, int]:
    dims = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    dims = tuple(int(d) for d in dims)
    if any(d < 0 for d in dims):
        raise ValueError(f"a shape has natural lengths, not {dims}")
    n = math.prod(dims)
    if n > MAX_ELEMENTS:
        shown = " × ".join(map(str, dims))
        raise SizeError(
            f"a tensor of {shown} = {n} elements, more than presk draws at once"
            f" (2^31 = {MAX_ELEMENTS})"
        )
    return dims, n


def random_bits(key: Key, n: int) -> np.ndarray:
    """n 64-bit draws, as `jax.random.bits(key, (n,), uint64)` (partitionable): draw i is the
    hash of the counter (i >> 32, i mod 2^32), its first word high. Draw i never depends on n."""
    if not 0 <= n < 2**64:
        raise ValueError(f"random_bits: a count is a natural below 2^64, not {n}")
    k0, k1 = _check_key(key)
    done = normal_c.bits(k0, k1, n) if n >= 64 else None  # the same words, in C
    if done is not None:
        return done
    i = np.arange(n, dtype=np.uint64)
    y0, y1 = _block(_check_key(key), i >> np.uint64(32), i & np.uint64(MASK32))
    return (y0 << np.uint64(32)) | y1


def _unit(key: Key, n: int) -> np.ndarray:
    # The 53 high bits of each draw, times 2^-53: exact doubles k·2^-53 in [0, 1).
    return (random_bits(key, n) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def uniform(key: Key, shape: int | Sequence[int]) -> np.ndarray:
    """Uniform doubles in [0, 1), row-major: the 53 high bits of each 64-bit draw times 2^-53."""
    dims, n = _shape(shape)
    return _unit(key, n).reshape(dims)


def randint(key: Key, bound: int, shape: int | Sequence[int]) -> np.ndarray:
    """Uniform indices in [0, bound) as int64: floor(u · bound) for the 53-bit uniform u, computed
    exactly in integers ((k · bound) >> 53 for u = k·2^-53); each index has probability within
    2^-53 of 1/bound, with no preference for small indices (no modulo bias)."""
    if not 1 <= bound <= _MAX_BOUND:
        raise ValueError(f"randint: a bound is in [1, 2^53], not {bound}")
    dims, n = _shape(shape)
    k = (random_bits(key, n) >> np.uint64(11)).astype(object)
    return np.asarray((k * bound) >> 53, dtype=np.int64).reshape(dims)


def bernoulli(key: Key, p, shape: int | Sequence[int]) -> np.ndarray:
    """Doubles 0 and 1, row-major: 1 where the 53-bit uniform u = k·2^-53 is below p, decided
    exactly (k < ⌈p·2^53⌉, clamped to [0, 2^53]): p ≤ 0 gives zeros, p ≥ 1 ones, NaN zeros.
    `p` is any real gmpy2 reads exactly (a double, an int, a Fraction, an mpfr or mpq)."""
    dims, n = _shape(shape)
    if p != p:  # NaN: never below
        threshold = 0
    elif p in (float("inf"), float("-inf")):
        threshold = 1 << 53 if p > 0 else 0
    else:
        q = gmpy2.mpq(p)  # exact, from a double, an int, a Fraction or a finite mpfr
        threshold = 0 if q <= 0 else 1 << 53 if q >= 1 else int(gmpy2.ceil(q * (1 << 53)))
    k = random_bits(key, n) >> np.uint64(11)
    return (k < np.uint64(threshold)).astype(np.float64).reshape(dims)


# ---- normals, in MPFR --------------------------------------------------------------------------


def _pairs(key: Key, n: int) -> tuple[np.ndarray, np.ndarray]:
    # Box–Muller's inputs for n values: v = 1 − u[2j], exact in (0, 1], never 0; w = u[2j+1].
    u = _unit(key, 2 * ((n + 1) // 2))
    return 1.0 - u[0::2], u[1::2]


def _box_muller(radial: Sequence[float], angular: Sequence[float], n: int) -> list:
    """n standard normals at BITS bits from the pairs (v, w): (r cos θ, r sin θ) each, with
    r = √(−2 ln v) and θ = 2π·w; an odd n drops the last sine."""
    out = []
    with gmpy2.context(precision=BITS):  # a fresh context: round to nearest even
        two_pi = 2 * gmpy2.const_pi()
        for v, w in zip(radial, angular, strict=True):
            radius = gmpy2.sqrt(-2 * gmpy2.log(v))  # doubles enter MPFR exactly
            sin, cos = gmpy2.sin_cos(two_pi * w)
            out += (radius * cos, radius * sin)
    return out[:n]


def _normal_mpfr(key: Key, n: int) -> list:
    """n standard normals at BITS bits: Box–Muller on uniform pairs (u[2j], u[2j+1]); an odd n
    drops the last sine, so value i never depends on n."""
    radial, angular = _pairs(key, n)
    return _box_muller(radial.tolist(), angular.tolist(), n)


def _to_doubles(values: list, dims: Shape) -> np.ndarray:
    with gmpy2.context(precision=BITS):  # float() rounds to nearest even
        return np.array([float(v) for v in values], dtype=np.float64).reshape(dims)


def _normal_doubles(key: Key, dims: Shape, n: int, std: gmpy2.mpfr | None) -> np.ndarray:
    """The doubles nearest the n 256-bit normals (times std, exactly, when given): in C over
    the whole array where it is built (presk_core.normal_c, the same bits), else in Python."""
    radial, angular = _pairs(key, n)
    done = normal_c.normals(radial, angular, n, std)
    if done is not None:
        return done[0].reshape(dims)
    zs = _box_muller(radial.tolist(), angular.tolist(), n)
    if std is not None:
        with gmpy2.context(precision=2 * BITS):  # two 256-bit factors: exact
            zs = [std * z for z in zs]
    return _to_doubles(zs, dims)


def normal(key: Key, shape: int | Sequence[int]) -> np.ndarray:
    """Standard normal doubles, row-major: Box–Muller at 256 bits in MPFR, rounded to nearest.

    Value 2j is r·cos θ and value 2j+1 is r·sin θ, with r = √(−2 ln(1 − u[2j])) and
    θ = 2π·u[2j+1] for the uniforms u of `uniform(key, ·)`; no numpy transcendental is used.
    """
    dims, n = _shape(shape)
    return _normal_doubles(key, dims, n, None)


# ---- initializers ------------------------------------------------------------------------------

Initializer = Callable[[Key, Shape, int, int], np.ndarray]


def fans(shape: Sequence[int]) -> tuple[int, int]:
    """(fan_in, fan_out) of a parameter of this shape (of one slice, for a stacked parameter).

    Rank 0: (1, 1). Rank 1, a bias: its length twice. Rank >= 2, laid out [..., In, Out] as
    `x · w` reads it: JAX's `variance_scaling` rule, the leading axes a receptive field r,
    fan_in = In·r and fan_out = Out·r (PyTorch's rule for its [Out, In, ...] layout).
    """
    dims = tuple(int(d) for d in shape)
    if len(dims) == 0:
        return 1, 1
    if len(dims) == 1:
        return dims[0], dims[0]
    field = math.prod(dims[:-2])
    return dims[-2] * field, dims[-1] * field


def zeros(key: Key, shape: Shape, fan_in: int, fan_out: int) -> np.ndarray:
    """All zeros (also the value of a parameter without `init =`)."""
    return np.zeros(_shape(shape)[0], dtype=np.float64)


def ones(key: Key, shape: Shape, fan_in: int, fan_out: int) -> np.ndarray:
    """All ones."""
    return np.ones(_shape(shape)[0], dtype=np.float64)


def xavier_uniform(key: Key, shape: Shape, fan_in: int, fan_out: int) -> np.ndarray:
    """Uniform in [−a, a], a = √(6 / (fan_in + fan_out)) at 256 bits; each value is a·(2u − 1)
    for the uniform u of its position, computed exactly and rounded once to the nearest double."""
    dims, n = _shape(shape)
    if n == 0:
        return np.zeros(dims, dtype=np.float64)
    if fan_in + fan_out <= 0:
        raise ValueError(f"xavier_uniform: fan_in + fan_out is {fan_in + fan_out}")
    with gmpy2.context(precision=BITS):
        a = gmpy2.sqrt(gmpy2.mpfr(6) / (fan_in + fan_out))
    t = 2.0 * _unit(key, n) - 1.0  # exact: multiples of 2^-52 in [−1, 1)
    done = normal_c.scaled(a, t)  # the same products in C
    if done is not None:
        return done.reshape(dims)
    with gmpy2.context(precision=BITS + 64):  # a (256 bits) times t (54 bits) is exact here
        values = [float(a * x) for x in t.tolist()]
    return np.array(values, dtype=np.float64).reshape(dims)


def _real(x: float | int | Fraction | str) -> gmpy2.mpfr:
    # A double or an integer exactly; a rational, or a literal's decimal text (its exact
    # value), correctly rounded to BITS bits.
    with gmpy2.context(precision=BITS):
        if isinstance(x, Fraction):
            return gmpy2.mpfr(gmpy2.mpq(x.numerator, x.denominator))
        return gmpy2.mpfr(x)


def normal_init(std: float | int | Fraction | str = 0.02) -> Initializer:
    """`normal(std = …)`: std·z for the standard normal z of `normal` before its rounding, the
    product exact and rounded once; `normal_init(1)` draws what `normal` draws. A literal's text
    (`"0.02"`) or a rational is its exact value rounded to 256 bits, a double is exact."""
    s = _real(std)

    def init(key: Key, shape: Shape, fan_in: int, fan_out: int) -> np.ndarray:
        dims, n = _shape(shape)
        return _normal_doubles(key, dims, n, s)

    return init


# The four names `init =` accepts, each a factory of the clause's attributes.
init_rules: dict[str, Callable[..., Initializer]] = {
    "xavier_uniform": lambda: xavier_uniform,  # U[−a, a], a = √(6 / (fan_in + fan_out))
    "zeros": lambda: zeros,
    "ones": lambda: ones,
    "normal": normal_init,  # normal(std = 0.02): std · N(0, 1)
}


def init_param(name: str, key: Key, shape: Sequence[int], *, stack: int = 0, **attrs) -> np.ndarray:
    """A parameter's initial value: initializer `name` (with its attributes) over the whole
    tensor, row-major from `key`, with the fans of one slice when `stack` leading axes are the
    axes of `stack{L}`."""
    if name not in init_rules:
        raise ValueError(f"unknown initializer `{name}`; expected one of {sorted(init_rules)}")
    dims, _ = _shape(shape)
    if not 0 <= stack <= len(dims):
        raise ValueError(f"init_param: {stack} stack axes in a shape of rank {len(dims)}")
    fan_in, fan_out = fans(dims[stack:])
    return init_rules[name](**attrs)(key, dims, fan_in, fan_out)


def permutation(seed: int, epoch: int, n: int) -> np.ndarray:
    """An epoch's order of n samples in a training run (docs/training.md, "A step"): the
    samples sorted by uniforms drawn from the run's shuffle seed folded with the epoch."""
    return np.argsort(uniform(fold_in(root_key(seed), epoch), n), kind="stable")


# ---- sampling ----------------------------------------------------------------------------------


def _precision(logits: np.ndarray) -> int:
    if logits.dtype != object:
        return BITS
    precs = [x.precision for x in logits.flat if isinstance(x, gmpy2.mpfr)]
    return max(precs, default=BITS)


def _inverse_cdf(row: list, u) -> int:
    # The first index whose cumulative probability exceeds u; softmax and sums left to right.
    if any(gmpy2.is_nan(x) or (gmpy2.is_infinite(x) and x > 0) for x in row):
        raise ValueError("sample: a logit is NaN or +inf")
    top = max(row)
    if gmpy2.is_infinite(top):
        raise ValueError("sample: every logit is -inf")
    exps = [gmpy2.exp(x - top) for x in row]
    total = exps[0]
    for e in exps[1:]:
        total = total + e
    cumulative, last = None, 0
    for i, e in enumerate(exps):
        p = e / total
        cumulative = p if cumulative is None else cumulative + p
        if p > 0:
            last = i
        if cumulative > u:
            return i
    return last  # rounding left the total below u: the last index of positive probability


def sample(key: Key, logits, *, bits: int | None = None) -> np.ndarray:
    """A token per position, from softmax over the last axis, as int64 of the leading shape.

    Position i (row-major over the leading axes) takes the i-th uniform u of the key and returns
    the first index whose cumulative probability exceeds u, softmax and cumulative sums in MPFR
    at `bits`, else at the inputs' precision (mpfr arrays) or 256 bits (doubles).
    """
    arr = np.asarray(logits)
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise ValueError(f"sample: logits need a non-empty last axis, not shape {arr.shape}")
    lead, vocab = arr.shape[:-1], arr.shape[-1]
    rows = arr.reshape(-1, vocab)
    u = _unit(key, rows.shape[0]).tolist()
    out = np.empty(rows.shape[0], dtype=np.int64)
    with gmpy2.context(precision=bits or _precision(arr)):
        one = gmpy2.mpfr(1)
        for i, row in enumerate(rows.tolist()):
            out[i] = _inverse_cdf([one * x for x in row], u[i])
    return out.reshape(lead)
