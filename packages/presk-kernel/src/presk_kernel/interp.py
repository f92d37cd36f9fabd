"""The kernel interpreter: executes kernels from their data, with the native backend's bits.

Vectorized with numpy over the parallel loops (each loop variable an axis of its own),
sequential over reductions (the fold in increasing index, from the first term) and over
serial loops. numpy's float64 and float32 arithmetic is IEEE's; what numpy lacks is
emulated exactly: `fma` (binary64 through gmpy2 in a context of the format; binary32 from
the exact product in binary64, the one double rounding case detected and corrected), IEEE
maximum and minimum (NaN wins, +0 over −0), and bf16 (the 16 high bits of a binary32,
rounded to nearest even at each store, NaN written as 0x7FC0).

The transcendentals (exp, log, tanh, erf, erfc, sin, cos) are presk libm's, loaded as a
value through presk's one toolchain and cache (presk_kernel.libm, presk_core.cc), so that the
interpreter gives the native backend's bits; where it cannot be loaded, the run fails with
its diagnostic (E9001 without a C compiler) rather than lose those bits to numpy's
functions. `powf` (a real exponent) is the C library's `pow` through the same helper.
"""

from __future__ import annotations

import itertools
import math
import struct
from dataclasses import replace

import gmpy2
import numpy as np
from presk_core.mpfr import COMPARE

from presk_kernel import libm as libm_module
from presk_kernel.ir import (
    Affine,
    Const,
    For,
    GemmStmt,
    Index,
    Kernel,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    Tile,
    TwoPass,
    Var,
    elements,
    plain,
)
from presk_kernel.lower import F64_CONTEXT

NUMPY = {
    "f64": np.float64,
    "f32": np.float32,
    "bf16": np.uint16,
    "i64": np.int64,
    "bool": np.bool_,
    "i8": np.int8,
}


class KernelError(Exception):
    """A kernel that cannot run on its data: an index out of range (E7003)."""

    code = "E7003"


# ---- bf16 --------------------------------------------------------------------------------


def bf16_to_f32(h: np.ndarray) -> np.ndarray:
    return (np.asarray(h, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(f: np.ndarray) -> np.ndarray:
    f = np.asarray(f, dtype=np.float32)
    u = f.view(np.uint32) if f.ndim else np.array([f]).view(np.uint32)
    u = u.astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r = np.where(np.isnan(f.reshape(u.shape)), np.uint16(0x7FC0), r)
    return r.reshape(f.shape)


def round_bf16(f: np.ndarray) -> np.ndarray:
    return bf16_to_f32(f32_to_bf16(f))


# ---- exact operations --------------------------------------------------------------------


def ieee_max(a, b):
    a, b = np.asarray(a), np.asarray(b)
    eq = np.where(np.signbit(a), b, a)
    out = np.where(np.isnan(b), b, eq)
    out = np.where(np.isnan(a), a, out)
    out = np.where(b > a, b, out)
    return np.where(a > b, a, out)


def ieee_min(a, b):
    a, b = np.asarray(a), np.asarray(b)
    eq = np.where(np.signbit(a), a, b)
    out = np.where(np.isnan(b), b, eq)
    out = np.where(np.isnan(a), a, out)
    out = np.where(b < a, b, out)
    return np.where(a < b, a, out)


def _fma64_one(a: float, b: float, c: float) -> float:
    with gmpy2.context(**F64_CONTEXT):
        return float(gmpy2.fma(gmpy2.mpfr(a), gmpy2.mpfr(b), gmpy2.mpfr(c)))


_FMA64 = np.frompyfunc(_fma64_one, 3, 1)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(x):
    t = x * 134217729.0  # 2^27 + 1 (Veltkamp)
    hi = t - (t - x)
    return hi, x - hi


FEW = 24
"""Up to this many elements `fma64` and the f32 `fma` compute on Python floats, element by
element: ~1 µs an element against ~20–60 µs of numpy calls for any array (a laid-out
kernel's tiles and lanes are blocks of 4 to 32 elements)."""


def fma64(a, b, c) -> np.ndarray:
    """∘(a·b + c) in binary64: the exact product as a pair (Dekker), then the sum of three
    rounded once by Boldo and Melquiond's rounding to odd ("Emulation of FMA and correctly
    rounded sums", 2008); gmpy2 where an intermediate could overflow or underflow."""
    with np.errstate(all="ignore"):
        points = np.broadcast(a, b, c)
        if points.size <= FEW:
            return _few(_fma64_float, points, np.float64)
        return _fma64(*(np.asarray(x, dtype=np.float64) for x in np.broadcast_arrays(a, b, c)))


def _fma64(a, b, c) -> np.ndarray:
    uh = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    ul = ((ah * bh - uh) + ah * bl + al * bh) + al * bl  # uh + ul = a·b exactly
    th, tl = _two_sum(c, uh)
    v, err = _two_sum(tl, ul)
    bits = v.view(np.int64)
    odd = (bits & 1) == 1
    toward = np.where(err > 0, np.inf, -np.inf)
    v = np.where((err != 0) & ~odd, np.nextafter(v, toward), v)  # v rounded to odd
    out = th + v
    out = np.where(uh == 0, uh + c, out)  # an exact zero product keeps IEEE's signed zeros
    mag = np.abs(np.stack([a, b, c]))
    safe = (
        np.isfinite(out)
        & np.all((mag == 0) | ((mag > 2.0**-300) & (mag < 2.0**300)), axis=0)
        & ((np.abs(uh) > 2.0**-600) | (uh == 0))
    )
    if not np.all(safe):
        slow = np.asarray(_FMA64(a[~safe], b[~safe], c[~safe]), dtype=np.float64)
        out = np.array(out, dtype=np.float64)
        out[~safe] = slow
        nan = np.isnan(out)
        if np.any(nan):
            out = np.where(nan, fma_nan(a, b, c), out)
    return out


def _few(one, points: np.broadcast, dtype) -> np.ndarray:
    """`one` (`_fma64_float`, `_fma32_float`: the array path's operations in the same order
    on Python floats, so the same bits; test_interp.py compares the paths on special
    values) at each of the few `points`, an array of `dtype` of their shape."""
    out = [one(float(x), float(y), float(z)) for x, y, z in points]
    return np.array(out, dtype=dtype).reshape(points.shape)


_DOUBLE = struct.Struct("<d")


def _fma64_float(a: float, b: float, c: float) -> float:
    uh = a * b
    ah, al = _split(a)  # _split and _two_sum are plain arithmetic: floats or arrays
    bh, bl = _split(b)
    ul = ((ah * bh - uh) + ah * bl + al * bh) + al * bl  # uh + ul = a·b exactly
    th, tl = _two_sum(c, uh)
    v, err = _two_sum(tl, ul)
    if err != 0 and not _DOUBLE.pack(v)[0] & 1:  # v rounded to odd (its lowest byte first)
        v = math.nextafter(v, math.inf if err > 0 else -math.inf)
    out = uh + c if uh == 0 else th + v  # an exact zero product keeps IEEE's signed zeros
    if (  # as _fma64's `safe`
        math.isfinite(out)
        and (a == 0 or 2.0**-300 < abs(a) < 2.0**300)
        and (b == 0 or 2.0**-300 < abs(b) < 2.0**300)
        and (c == 0 or 2.0**-300 < abs(c) < 2.0**300)
        and (abs(uh) > 2.0**-600 or uh == 0)
    ):
        return out
    slow = float(_fma64_one(a, b, c))
    if math.isnan(slow):
        return float(fma_nan(np.float64(a), np.float64(b), np.float64(c)))
    return slow


# x86's default NaN (an invalid operation's: inf·0, inf − inf), negative, quiet
DEFAULT_NAN = {np.float64: np.uint64(0xFFF8000000000000), np.float32: np.uint32(0xFFC00000)}
QUIET = {np.float64: np.uint64(1 << 51), np.float32: np.uint32(1 << 22)}


def fma_nan(a, b, c) -> np.ndarray:
    """The NaN of a·b + c where it is NaN, as the hardware's fma gives it: a NaN operand's
    own, quieted (a's, else b's, else c's), else the default NaN. MPFR's NaN has no sign
    (gmpy2 gives every one as −NaN), so a NaN operand's sign would be lost (issue 26)."""
    t = np.asarray(a).dtype.type
    u = np.uint64 if t == np.float64 else np.uint32
    bits = np.full(np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c)), DEFAULT_NAN[t])
    for x in (c, b, a):  # a's wins over b's over c's
        x = np.asarray(x, dtype=t)
        bits = np.where(np.isnan(x), x.view(u) | QUIET[t], bits)
    return bits.astype(u).view(t)


def fma(a, b, c, dtype) -> np.ndarray:
    """a·b + c rounded once to `dtype` (float64 or float32)."""
    if dtype == np.float64:
        return fma64(a, b, c)
    with np.errstate(all="ignore"):
        points = np.broadcast(a, b, c)
        if points.size <= FEW:
            r = _few(_fma32_float, points, np.float32)
            if not np.isnan(r.max(initial=0)):
                return r
        else:
            r = _fma32(a, b, c)
    nan = np.isnan(r)
    if np.any(nan):  # inf·0 + NaN: c's NaN, not the product's default one
        a, b, c = (np.asarray(x, dtype=np.float32) for x in (a, b, c))
        r = np.where(nan, fma_nan(a, b, c), r).astype(np.float32)
    return r


def _fma32(a, b, c) -> np.ndarray:
    a64, b64, c64 = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    p = a64 * b64  # exact: two 24-bit significands
    s = p + c64
    r = s.astype(np.float32)
    # Rounding s (binary64) to binary32 rounds a·b + c once, unless s is a binary32
    # midpoint that the addition reached by rounding: the 29 bits below a normal binary32's
    # last are then 1 followed by zeros. Those (and the subnormal range) are checked; a zero
    # s is the exact sum, with IEEE's sign.
    low = np.asarray(s).view(np.uint64) & np.uint64(0x1FFFFFFF)
    maybe = (low == np.uint64(0x10000000)) | ((np.abs(s) < 2.0**-125) & (s != 0))
    if not np.any(maybe):
        return r
    r = np.array(r, dtype=np.float32)
    shape = np.shape(s)
    r[maybe] = _fma32_ties(
        np.broadcast_to(p, shape)[maybe], np.broadcast_to(c64, shape)[maybe], s[maybe], r[maybe]
    )
    return r


_FLOAT = struct.Struct("<f")
_WORD = struct.Struct("<Q")


def _fma32_float(x: float, y: float, z: float) -> float:
    """`_fma32` on Python floats: the same binary64 operations, the rounding to binary32 by
    `struct` (to nearest even, as numpy's cast; where the result is out of range it raises
    and numpy gives the infinity), the ties `_fma32` checks checked alike."""
    p = x * y  # exact: two 24-bit significands
    s = p + z
    try:
        r = _FLOAT.unpack(_FLOAT.pack(s))[0]
    except OverflowError:
        r = math.copysign(math.inf, s)
    low = _WORD.unpack(_DOUBLE.pack(s))[0] & 0x1FFFFFFF
    if low == 0x10000000 or (abs(s) < 2.0**-125 and s != 0):
        r = float(_fma32_ties(np.float64(p), np.float64(z), np.float64(s), np.float32(r)))
    return r


def _fma32_ties(p, c64, s, r):
    bb = s - p
    t = (p - (s - bb)) + (c64 - bb)  # s + t = p + c exactly (TwoSum)
    rd = r.astype(np.float64)
    up = np.where(s > rd, np.float32(np.inf), np.float32(-np.inf))
    other = np.nextafter(r, up)
    tie = (s != rd) & (s == (rd + other.astype(np.float64)) / 2) & (t != 0) & np.isfinite(s)
    side = np.where((other > r) == (t > 0), other, r)  # off the midpoint: toward t's side
    return np.where(tie, side, r)


def pow_int(x, k: int, one):
    """x^k by binary powering, each product rounded (x² is ∘(x·x)); k < 0 as 1/x^−k."""
    if k == 0:
        return np.ones_like(x) * one
    n = abs(k)
    r = x
    for bit in bin(n)[3:]:
        r = r * r
        if bit == "1":
            r = r * x
    return one / r if k < 0 else r


def presk_libm() -> libm_module.Libm:
    """presk libm, loaded once through presk_core.cc (presk_kernel.libm): the interpreter's
    transcendentals are the native code's. There is no stand-in that would change their
    bits: where it cannot be loaded, this raises its diagnostic (E9001 without a C compiler;
    the cache's E9003–E9009)."""
    return libm_module.load()


def _libm(name: str, x, dtype):
    x = np.asarray(x, dtype=dtype)
    return presk_libm().apply(name, x).reshape(x.shape)


# ---- a kernel ----------------------------------------------------------------------------


class Run:
    """One kernel's execution over views of its buffers."""

    def __init__(self, k: Kernel, views: list[np.ndarray]) -> None:
        self.k = k
        self.views = views
        self.dtype = NUMPY[k.compute]
        self.env: dict[str, object] = {}
        self.positions: dict[str, int] = {}
        self.mask = None  # the points of the parallel loops a triangular bound keeps
        self._assign(k.body)
        self.ndim = len(self.positions)

    def _assign(self, body) -> None:
        for s in plain(body):  # a laid-out body: the positions of the loops it lays out
            if isinstance(s, Loop):
                if not s.serial and s.var not in self.positions:
                    self.positions[s.var] = len(self.positions)
                self._assign(s.body)
            elif isinstance(s, Reduce):
                self._assign(s.body)

    def run(self) -> None:
        with np.errstate(all="ignore"):
            self.block(self.k.body)

    def block(self, body) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s) -> None:
        match s:
            case Let(name, expr):
                self.env[name] = self.expr(expr)
            case Store(buf, index, expr):
                self.store(buf, index, self.expr(expr))
            case Loop(var, _, extent, body, serial, start, stop):
                if serial:
                    for i in range(extent):
                        self.env[var] = i
                        self.block(body)
                else:
                    self.parallel(var, extent)
                    outer = self.mask
                    if start is not None or stop is not None:  # a triangular nest: masked
                        keep = np.ones((), dtype=bool) if outer is None else outer
                        if start is not None:
                            keep = keep & (self.env[var] >= self.affine(start))
                        if stop is not None:
                            keep = keep & (self.env[var] < self.affine(stop))
                        self.mask = keep
                    if extent:
                        self.block(body)
                    self.mask = outer
            case Reduce():
                self.reduce(s)
            case Tile() | For() | GemmStmt() | TwoPass():  # laid out: the nest it lays out
                self.block(plain((s,)))

    def parallel(self, var: str, extent: int) -> None:
        """A parallel loop's variable: its indices along the loop's own axis."""
        shape = [1] * self.ndim
        shape[self.positions[var]] = extent
        self.env[var] = np.arange(extent, dtype=np.int64).reshape(shape)

    def affine(self, i: Affine):
        """An affine index's value at the environment's variables."""
        v = i.const
        for name, c in i.terms:
            v = v + c * self.env[name]
        return v

    def reduce(self, r: Reduce) -> None:
        if r.zeros is not None and r.block is None:
            self.zero_terms(r)
            return
        dtype = NUMPY[r.dtype]
        acc = None
        points = itertools.product(*(range(n) for _, _, n in r.vars))
        if r.block is not None:  # one block of the fold: resumed from the previous blocks'
            ((_, _, n),) = r.vars
            lo = int(self.env[r.block])
            points = ((i,) for i in range(lo, min(lo + r.size, n)))
            if lo > 0:
                acc = np.asarray(self.expr(r.resume), dtype=dtype)
        identity = fold_identity(r)
        stop = None if r.stop is None else self.affine(r.stop)
        started = None  # a narrowed fold: the points whose fold has begun
        outer = self.mask
        for point in points:
            for (v, _, _), i in zip(r.vars, point, strict=True):
                self.env[v] = i
            if stop is None:
                self.block(r.body)
                first, step = self.fold_step(r, [self.expr(t) for t in r.terms], acc, dtype)
                acc = first if acc is None else step
                continue
            keep = np.asarray(point[0] < stop)  # each point folds its own prefix [0, stop)
            self.mask = keep if outer is None else outer & keep  # and stores only there
            self.block(r.body)
            self.mask = outer
            first, step = self.fold_step(r, [self.expr(t) for t in r.terms], acc, dtype)
            if acc is None:
                acc, started = np.where(keep, first, identity).astype(dtype), keep
                continue
            acc = np.where(keep, np.where(started, step, first), acc).astype(dtype)
            started = started | keep
        if acc is None:
            acc = identity
        self.env[r.acc] = np.asarray(acc, dtype=dtype)

    def zero_terms(self, r: Reduce) -> None:
        """A contraction whose terms from `zeros` on (before it: `zeros_first`) have an
        operand that is ±0 or not finite (Reduce.zeros), as an executor that skips them runs
        it: each point folds its prefix [0, zeros), then the rest only where the accumulator
        is −0 there (or the prefix is empty) or a term past it is not finite; or, the zeros
        first, folds [zeros, n) from its first term, and the whole where that is −0 (or
        empty) or a term before is not finite. The whole fold's bits, when the operand is
        ±0 there."""
        dtype = NUMPY[r.dtype]
        ((v, _, n),) = r.vars
        zeros = self.affine(r.zeros)
        terms = []
        for j in range(n):  # every term, to see which of those it skips are not finite
            self.env[v] = j
            self.block(r.body)
            terms.append([self.expr(t) for t in r.terms])
        skipped = (lambda j: j < zeros) if r.zeros_first else (lambda j: j >= zeros)
        bad = np.zeros((), bool)  # a term it skips that is not finite
        for j, (a, b) in enumerate(terms):
            bad = bad | (skipped(j) & ~(np.isfinite(a) & np.isfinite(b)))
        shape = np.broadcast_shapes(
            np.shape(zeros), np.shape(bad), *(np.shape(t) for t in terms[0])
        )

        def fold(keep_at) -> tuple:
            acc = np.zeros(shape, dtype)
            started, go = np.zeros(shape, bool), np.zeros(shape, bool)
            for j, ts in enumerate(terms):
                keep, go = keep_at(j, acc, started, go)
                first, step = self.fold_step(r, ts, acc, dtype)
                acc = np.where(keep, np.where(started, step, first), acc).astype(dtype)
                started = started | keep
            return acc, started

        if not r.zeros_first:

            def keep_at(j, acc, started, go):
                negzero = (acc == 0) & np.signbit(acc)  # decided where the prefix ends
                go = go | ((j == zeros) & (~started | negzero | bad))
                return (j < zeros) | go, go

            acc, _ = fold(keep_at)
        else:
            acc, started = fold(lambda j, acc, started, go: (j >= zeros, go))
            whole, _ = fold(lambda j, acc, started, go: (np.ones(shape, bool), go))
            redo = ~started | ((acc == 0) & np.signbit(acc)) | bad
            acc = np.where(redo, whole, acc).astype(dtype)
        self.env[r.acc] = np.asarray(acc, dtype=dtype)

    @staticmethod
    def fold_step(r: Reduce, terms: list, acc, dtype) -> tuple:
        """The accumulator a fold's first term starts, and the one the next term makes
        (None before the first)."""
        if r.op == "fma":
            a, b = terms
            first = np.asarray(a * b, dtype=dtype)
            step = None if acc is None else fma(a, b, acc, dtype)  # fma broadcasts them
            return first, step
        (t,) = terms
        first = np.asarray(t, dtype=dtype)
        if acc is None:
            return first, None
        if r.op == "add":
            return first, acc + t
        return first, (ieee_max if r.op == "max" else ieee_min)(acc, t)

    def index(self, buf: int, index: tuple) -> tuple:
        shape = self.views[buf].shape
        out = []
        for ax, i in enumerate(index):
            if isinstance(i, Affine):
                out.append(self.affine(i))
            else:
                v = np.asarray(self.expr(i), dtype=np.int64)
                if np.any((v < 0) | (v >= shape[ax])):
                    bad = int(v[(v < 0) | (v >= shape[ax])].flat[0])
                    raise KernelError(
                        f"index {bad} out of range for length {shape[ax]} in `{self.k.name}`"
                    )
                out.append(v)
        return tuple(out)

    def load(self, buf: int, index: tuple):
        data = self.views[buf][self.index(buf, index)]
        b = self.k.buffers[buf]
        if b.dtype == "bf16":
            return bf16_to_f32(data)
        return data

    def store(self, buf: int, index: tuple, value) -> None:
        b = self.k.buffers[buf]
        idx = self.index(buf, index)
        if b.dtype == "bf16":
            value = f32_to_bf16(value)
        mask = [] if self.mask is None else [self.mask]
        parts = np.broadcast_arrays(*[np.asarray(i) for i in idx], np.asarray(value), *mask)
        view = self.views[buf]
        if not idx:
            view[()] = np.asarray(value).astype(view.dtype)
            return
        if mask:  # a triangular nest writes only the points its bounds keep
            keep = parts[-1]
            parts = [p[keep] for p in parts[:-1]]
            view[tuple(parts[:-1])] = parts[-1].astype(view.dtype, copy=False)
            return
        view[tuple(parts[:-1])] = parts[-1].astype(view.dtype, copy=False)

    def expr(self, e):
        match e:
            case Const(value, dtype):
                return NUMPY[dtype](value)
            case Load(buf, index):
                return self.load(buf, index)
            case Var(name):
                return self.env[name]
            case Index(var):
                return self.env[var]
            case Op(name, args, attr):
                return self.op(name, [self.expr(a) for a in args], attr)
        raise TypeError(f"not a kernel expression: {e!r}")

    def op(self, name: str, a: list, attr):
        rule = OP_RULES.get(name)
        if rule is None:
            raise TypeError(f"no kernel interpreter rule for the scalar operation `{name}`")
        return rule(a, attr, self.dtype)


def dequant(q, s, dtype: str) -> np.ndarray:
    """An integer weight q times its binary32 scale s as a load of `dtype` reads the weight
    stored dequantised: f64 exactly (8 bits by 24), f32 rounded once, bf16 rounded to f32
    then to bf16 (as `to_storage` stores it), the last two as float32."""
    if dtype == "f64":
        return np.asarray(q).astype(np.float64) * np.asarray(s).astype(np.float64)
    p = np.asarray(q).astype(np.float32) * np.asarray(s, dtype=np.float32)
    return round_bf16(p) if dtype == "bf16" else p


def fold_identity(r: Reduce) -> np.ndarray:
    """The value of a fold over no term: its operation's identity in its type."""
    identity = {"add": 0, "fma": 0, "max": -np.inf, "min": np.inf}[r.op]
    if r.dtype == "i64":
        identity = np.iinfo(np.int64).max if r.op == "min" else 0
    return np.asarray(identity, dtype=NUMPY[r.dtype])


def _same(x, y):
    both_nan = np.isnan(x) & np.isnan(y)
    return both_nan | ((x == y) & (np.signbit(x) == np.signbit(y)))


def _powf(a: list, dt):
    """The C library's pow, as the emitter's, where presk libm loads."""
    x, y = np.asarray(a[0]), np.asarray(a[1])
    t = np.result_type(a[0], a[1])
    libm = presk_libm()
    if libm is not None and hasattr(libm, "power") and t in (np.float64, np.float32):
        return libm.power(x.astype(t), y.astype(t)).astype(dt)
    return np.power(a[0], a[1]).astype(dt)


def _uniform(a: list) -> np.ndarray:
    """Draw a[2] of the key (a[0], a[1]) as a double k·2^-53 (docs/randomness.md)."""
    from presk_core.random import draw_bits

    return (draw_bits(a[0], a[1], a[2]) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _normal(a: list) -> np.ndarray:
    """Value a[2] of normal(key (a[0], a[1]), ·): presk_core.random's, for each key drawn."""
    from presk_core.random import normal

    return _initializer(a, normal)


def _initializer(a: list, init) -> np.ndarray:
    """Value a[2] of the initializer `init(key, (n,))` of the key (a[0], a[1]), for each key
    drawn: a position's value is the same in any shape of as many or more elements."""
    from presk_core.random import Key

    k0, k1, c = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in a))
    out = np.empty(c.shape, dtype=np.float64)
    keys = np.stack([k0.reshape(-1), k1.reshape(-1)], axis=1)
    flat_c, flat_out = c.reshape(-1), out.reshape(-1)
    for w0, w1 in np.unique(keys, axis=0):
        at = (keys[:, 0] == w0) & (keys[:, 1] == w1)
        drawn = init(Key(int(w0), int(w1)), int(flat_c[at].max()) + 1)
        flat_out[at] = drawn[flat_c[at]]
    return out


def _xavier(a: list, fans: int) -> np.ndarray:
    from presk_core.random import xavier_uniform

    return _initializer(a, lambda key, n: xavier_uniform(key, (n,), fans, 0))


def _normal_std(a: list, std: str) -> np.ndarray:
    from presk_core.random import normal_init

    init = normal_init(std)
    return _initializer(a, lambda key, n: init(key, (n,), 0, 0))


def _key_word(a: list) -> np.ndarray:
    """Word a[3] (0: the high, 1: the low) of draw a[2] of the key (a[0], a[1])."""
    from presk_core.random import draw_bits

    bits = draw_bits(a[0], a[1], a[2])
    word = np.where(np.asarray(a[3]) == 0, bits >> np.uint64(32), bits & np.uint64(0xFFFFFFFF))
    return word.astype(np.int64)


def _transcendental(name: str):
    return lambda a, attr, dt: _libm(name, a[0], dt)


# The interpreter's rule of each scalar operation of presk_kernel.ir.SCALAR_TABLE (a test
# asserts it covers every one): operands as numpy values, the attr, the compute type.
OP_RULES = {
    "add": lambda a, attr, dt: a[0] + a[1],
    "sub": lambda a, attr, dt: a[0] - a[1],
    "mul": lambda a, attr, dt: a[0] * a[1],
    "div": lambda a, attr, dt: a[0] / a[1],
    "fma": lambda a, attr, dt: fma(*np.broadcast_arrays(*a), dt),  # rounded once, exactly
    "neg": lambda a, attr, dt: -a[0],
    "abs": lambda a, attr, dt: np.abs(a[0]),
    "max": lambda a, attr, dt: ieee_max(a[0], a[1]),
    "min": lambda a, attr, dt: ieee_min(a[0], a[1]),
    "select": lambda a, attr, dt: np.where(a[0], a[1], a[2]),
    "compare": lambda a, attr, dt: COMPARE[attr](a[0], a[1]),
    "same": lambda a, attr, dt: _same(a[0], a[1]),
    "and": lambda a, attr, dt: a[0] & a[1],
    "or": lambda a, attr, dt: a[0] | a[1],
    "not": lambda a, attr, dt: ~a[0],
    "isnan": lambda a, attr, dt: np.isnan(a[0]),
    "real": lambda a, attr, dt: np.asarray(a[0]).astype(dt),
    "sqrt": lambda a, attr, dt: np.sqrt(a[0]),
    "pow": lambda a, attr, dt: pow_int(a[0], attr, dt(1)),  # each product rounded
    "powf": lambda a, attr, dt: _powf(a, dt),
    "bf16": lambda a, attr, dt: round_bf16(a[0]),
    "dequant": lambda a, attr, dt: dequant(a[0], a[1], attr),
    "key_word": lambda a, attr, dt: _key_word(a),
    "uniform": lambda a, attr, dt: _uniform(a).astype(dt),  # exact in f64, rounded to f32
    "bernoulli": lambda a, attr, dt: _uniform(a) < np.asarray(a[3]).astype(np.float64),
    "normal": lambda a, attr, dt: _normal(a).astype(dt),  # a double, rounded to f32
    "xavier": lambda a, attr, dt: _xavier(a, attr).astype(dt),
    "normal_std": lambda a, attr, dt: _normal_std(a, attr).astype(dt),
} | {name: _transcendental(name) for name in ("exp", "log", "tanh", "erf", "erfc", "sin", "cos")}


def run_kernel(k: Kernel, views: list[np.ndarray]) -> None:
    """Run `k` over `views` (one array per buffer, of its shape and storage type)."""
    from presk_kernel.layout import plain_nest

    if k.layout.scratch:  # (a slice group's: each point at its own slice)
        k = replace(k, body=plain_nest(k))
    Run(k, views).run()


# ---- a schedule --------------------------------------------------------------------------


def to_storage(values, dtype: str) -> np.ndarray:
    """An input (floats, mpfr, ints, bools) in a buffer's storage type."""
    arr = np.asarray(values)
    if dtype in ("f64", "f32", "bf16"):
        f = arr.astype(np.float64)  # objects: each one's float(), as np.vectorize(float)
        if dtype == "f64":
            return f
        f32 = f.astype(np.float32)  # rounded to nearest even, subnormals kept
        return f32 if dtype == "f32" else f32_to_bf16(f32)
    return arr.astype(NUMPY[dtype])


def from_storage(data: np.ndarray, dtype: str) -> np.ndarray:
    return bf16_to_f32(data) if dtype == "bf16" else data


def run_schedule(schedule: Schedule, inputs: list, laid: bool = False) -> list[np.ndarray]:
    """The entry's outputs (bf16 widened to float32), from its inputs in the order of
    `schedule.inputs`; `laid`: each kernel run as its layout executes it (interp_laid)."""
    from presk_kernel.interp_laid import run_laid_kernel

    run = run_laid_kernel if laid else run_kernel
    memory = {b.id: np.zeros(elements(b.axes), dtype=NUMPY[b.dtype]) for b in schedule.buffers}
    for buf, value in zip(schedule.inputs, inputs, strict=True):
        b = schedule.buffers[buf]
        memory[buf][...] = to_storage(value, b.dtype).reshape(-1)
    for launch in schedule.launches:
        views = []
        for buffer, arg in zip(launch.kernel.buffers, launch.args, strict=True):
            flat = memory[arg.buf][arg.offset : arg.offset + buffer.size]
            views.append(flat.reshape(buffer.shape))
        run(launch.kernel, views)
    out = []
    for buf in schedule.outputs:
        b = schedule.buffers[buf]
        out.append(from_storage(memory[buf].reshape(tuple(a.length for a in b.axes)), b.dtype))
    return out
