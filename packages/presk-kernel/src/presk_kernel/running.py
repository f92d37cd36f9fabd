"""A running error bound (docs/precision.md, "The running bound"): the kernel interpreter's
execution of a realization, element by element, with beside every computed value ĉ a
bound E ≥ |ĉ − c| on its distance to the exact value c (Higham, *Accuracy and Stability
of Numerical Algorithms*, §3.3: a running error analysis).

The rules are the moduli of continuity of each scalar operation at the **computed**
operands (which are known exactly: they are the run's), plus the operation's own rounding
at the computed result (|∘x − x| ≤ u·|∘x| + η: Higham, Theorem 2.3, and η below the normal
range). For ĉ = ∘(â·b̂), |â − a| ≤ Ea, |b̂ − b| ≤ Eb:

    |ĉ − ab| ≤ |â|Eb + |b̂|Ea + EaEb + u|ĉ| + η     (ab = (â − δa)(b̂ − δb): exact)

so the bound is first order in the errors, Σ |∂ĉ/∂(each rounding)|·(the rounding), with
its second-order terms (EaEb, e^E − 1 − E, …) kept exactly: nothing is linearized. A sum
is a fold of additions, each rounding bounded at its own computed partial sum — the sum's
condition number at that element enters as it is, not measured elsewhere. A comparison
whose operands' intervals overlap may decide otherwise than the exact run: the truth value
carries a `flip`, a select on it the width between its operands; an index or a store at an
index that may flip is refused.

Nothing here needs the exact intermediate values: only the inputs' exact values (their
storage error is measured exactly) and the run itself. The bound's own arithmetic is in
doubles, every rule's result inflated by 2⁻⁴⁹ relative (more than its few roundings).
"""

from __future__ import annotations

import itertools
import math

import gmpy2
import numpy as np

from presk_kernel.error_rules import ETA, LIBM_ULPS, UNIT, BoundError
from presk_kernel.interp import (
    NUMPY,
    OP_RULES,
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
    Run,
    Schedule,
    Store,
    Tile,
    Var,
    bf16_to_f32,
    elements,
    f32_to_bf16,
    fma,
    fold_identity,
    ieee_max,
    ieee_min,
    plain,
    to_storage,
)
from presk_kernel.ir import REAL_DTYPES

SAFE = 1 + 2.0**-49
"""Every rule's result times this: the bound's own roundings (a few per rule) err up."""

_ERF_SLOPE = 2 / math.sqrt(math.pi)


def _up(x):
    return np.asarray(x, dtype=np.float64) * SAFE


def _abs(x) -> np.ndarray:
    return np.abs(np.asarray(x, dtype=np.float64))


def _times(a, e) -> np.ndarray:
    """|a|·e with 0·∞ = 0 (an infinite operand known exactly: a softmax's mask)."""
    a, e = np.broadcast_arrays(_abs(a), np.asarray(e, dtype=np.float64))
    out = np.zeros(a.shape)
    nz = e != 0
    out[nz] = a[nz] * e[nz]
    return out


class ERun(Run):
    """One kernel's execution, its values as `Run`'s and beside each real its error bound.

    `errs[i]`: the error bound of kernel buffer i's elements (reals), `flips[i]` whether
    each element may differ from the exact run's (integers and truth values)."""

    def __init__(self, k: Kernel, views: list, errs: list, flips: list, lows=None) -> None:
        super().__init__(k, views)
        self.errs, self.flips = errs, flips
        self.err: dict[str, tuple] = {}
        # a lower bound of each real's exact value (−∞ where none is known): kernel buffer
        # i's elements in lows[i], a let's or a fold's in `low_env`; a divisor's is read
        self.lows = lows if lows is not None else [None] * len(errs)
        self.low_env: dict[str, object] = {}
        self.divisor_low: object = -np.inf
        u = k.compute
        self.u, self.eta = UNIT[u], ETA[u]
        self.ulps = LIBM_ULPS["f64" if u == "f64" else "f32"]

    def fail(self, why: str) -> BoundError:
        return BoundError(f"`{self.k.name}` at {self.k.site}: {why}")

    def rounding(self, c, *operands) -> np.ndarray:
        """u·|ĉ| + η at a computed result; an overflow (a finite operand to ∞) is ∞; an
        infinite result of an infinite operand is exact."""
        c = np.asarray(c, dtype=np.float64)
        r = self.u * np.abs(c) + self.eta
        finite = np.isfinite(c)
        if finite.all():
            return r
        given = np.ones(c.shape, dtype=bool)
        for x in operands:
            given = given & np.isfinite(np.asarray(x, dtype=np.float64))
        return np.where(finite, r, np.where(given, np.inf, 0.0))

    # ---- statements ----------------------------------------------------------------------

    def stmt(self, s) -> None:
        match s:
            case Let(name, e):
                v, err, flip = self.expr(e)
                self.env[name] = v
                self.err[name] = (err, flip)
                self.low_env[name] = self.low(e)
            case Store(buf, index, e):
                self.store(buf, index, self.expr(e))
                if self.lows[buf] is not None:
                    idx = self.index(buf, index)
                    lo = np.asarray(self.low(e), dtype=np.float64)
                    if not idx:
                        self.lows[buf][()] = lo.reshape(())
                    else:
                        parts = np.broadcast_arrays(*[np.asarray(i) for i in idx], lo)
                        self.lows[buf][tuple(parts[:-1])] = parts[-1]
            case Loop(var, _, extent, body, serial):
                if serial:
                    raise self.fail("a serial loop (a scatter that adds) has no running bound")
                self.parallel(var, extent)
                self.err[var] = (None, False)
                if extent:
                    self.block(body)
            case Reduce():
                self.reduce(s)
            case Tile() | For() | GemmStmt():
                self.block(plain((s,)))

    def reduce(self, r: Reduce) -> None:
        dtype = NUMPY[r.dtype]
        real = r.dtype in REAL_DTYPES
        acc, err, flip = None, 0.0, False
        lo = None  # the fold's exact lower bound, as the terms'
        for point in itertools.product(*(range(n) for _, _, n in r.vars)):
            for (v, _, _), i in zip(r.vars, point, strict=True):
                self.env[v] = i
                self.err[v] = (None, False)
            self.block(r.body)
            terms = [self.expr(t) for t in r.terms]
            if real:
                lo = _fold_low(r.op, lo, [self.low(t) for t in r.terms])
            for t in terms:
                flip = flip | np.asarray(t[2])
            if r.op == "fma":
                (a, ea, _), (b, eb, _) = terms
                prop = _times(a, eb) + _times(b, ea) + np.asarray(ea) * np.asarray(eb)
                if acc is None:
                    acc = np.asarray(a * b, dtype=dtype)
                    err = _up(prop + self.rounding(acc, a, b))
                else:
                    acc = fma(*np.broadcast_arrays(a, b, acc), dtype)
                    err = _up(prop + err + self.rounding(acc, a, b))
                continue
            ((t, et, _),) = terms
            if acc is None:
                acc, err = np.asarray(t, dtype=dtype), et
            elif r.op == "add":
                before = acc
                acc = acc + t
                if real:
                    err = _up(err + et + self.u * _abs(acc) * np.isfinite(acc))
                    err = np.where(np.isfinite(acc) | ~np.isfinite(before), err, np.inf)
            elif r.op == "max":
                acc = ieee_max(acc, t)
                err = None if not real else np.maximum(err, et)
            else:
                acc = ieee_min(acc, t)
                err = None if not real else np.maximum(err, et)
        if acc is None:
            acc, err = fold_identity(r), (0.0 if real else None)
        self.env[r.acc] = np.asarray(acc, dtype=dtype)
        self.err[r.acc] = (err if real else None, flip)
        self.low_env[r.acc] = -np.inf if lo is None else lo

    # ---- memory ----------------------------------------------------------------------------

    def index(self, buf: int, index: tuple) -> tuple:
        shape = self.views[buf].shape
        out = []
        for ax, i in enumerate(index):
            if isinstance(i, Affine):
                out.append(self.affine(i))
                continue
            value, _, flip = self.expr(i)
            if np.any(flip):
                raise self.fail("an index the computation may choose otherwise")
            v = np.asarray(value, dtype=np.int64)
            if np.any((v < 0) | (v >= shape[ax])):
                raise self.fail(f"an index out of range for length {shape[ax]}")
            out.append(v)
        return tuple(out)

    def load(self, buf: int, index: tuple):
        idx = self.index(buf, index)
        data = self.views[buf][idx]
        b = self.k.buffers[buf]
        value = bf16_to_f32(data) if b.dtype == "bf16" else data
        if b.dtype in REAL_DTYPES:
            return value, self.errs[buf][idx], False
        return value, None, self.flips[buf][idx]

    def store(self, buf: int, index: tuple, triple) -> None:
        value, err, flip = triple
        b = self.k.buffers[buf]
        idx = self.index(buf, index)
        super().store(buf, index, value)
        view = self.views[buf]
        if b.dtype in REAL_DTYPES:
            if np.any(flip):  # a truth value stored as a real (a mask): it may differ by 1
                err = np.asarray(err, dtype=np.float64) + np.asarray(flip, dtype=np.float64)
            # the store's own rounding, measured exactly: two doubles of one binade or so
            stored = bf16_to_f32(f32_to_bf16(value)) if b.dtype == "bf16" else value
            stored = np.asarray(stored).astype(view.dtype if b.dtype != "bf16" else np.float32)
            gap = np.abs(stored.astype(np.float64) - np.asarray(value, dtype=np.float64))
            gap = np.where(np.isfinite(gap), gap, 0.0)
            total = _up(np.asarray(err, dtype=np.float64) + gap)
            target = self.errs[buf]
        else:
            total = np.asarray(flip, dtype=bool)
            target = self.flips[buf]
        if not idx:
            target[()] = np.asarray(total).reshape(())
            return
        parts = np.broadcast_arrays(*[np.asarray(i) for i in idx], np.asarray(total))
        target[tuple(parts[:-1])] = parts[-1]

    # ---- expressions -----------------------------------------------------------------------

    def expr(self, e):
        match e:
            case Const(value, dtype):
                v = NUMPY[dtype](value)
                if dtype not in REAL_DTYPES:
                    return v, None, False
                x = float(value)
                if not math.isfinite(x) or (x == int(x) and abs(x) < 2**24):
                    return v, 0.0, False  # exact (an infinity only as a mask)
                # the source's number to a double (u₆₄), then to the compute type (measured)
                err = abs(float(v) - x) + 2.0**-53 * abs(x) + ETA["f64"]
                return v, float(_up(err)), False
            case Load(buf, index):
                return self.load(buf, index)
            case Var(name):
                return (self.env[name], *self.err[name])
            case Index(var):
                return self.env[var], None, False
            case Op(name, args, attr):
                operands = [self.expr(a) for a in args]
                if name == "div":
                    self.divisor_low = self.low(args[1])
                return self.op(name, operands, attr)
        raise TypeError(f"not a kernel expression: {e!r}")

    def low(self, e):
        """A lower bound of the exact value of `e` (−∞ where none is known), from the
        structure of what computed it: a square, an exponential, a sum of them, a constant
        ε added, a square root of that (so a deviation √(mean(x²) + ε) is at least √ε
        exactly, whatever the error on the mean: what lets a LayerNorm's quotient be bounded
        where its divisor's computed value is within its error of 0)."""
        match e:
            case Const(value, dtype):
                x = float(value) if dtype in REAL_DTYPES else math.nan
                return _down(x) if math.isfinite(x) else -np.inf
            case Load(buf, index):
                if self.lows[buf] is None:
                    return -np.inf
                return self.lows[buf][self.index(buf, index)]
            case Var(name):
                return self.low_env.get(name, -np.inf)
            case Op("div", (a, Const(value, dtype)), _) if dtype in REAL_DTYPES and value > 0:
                la = np.asarray(self.low(a), dtype=np.float64)  # a mean: the sum over n
                return np.where(la >= 0, _down(la / (float(value) * (1 + 2.0**-52))), -np.inf)
            case Op(name, args, attr):
                rule = LOW_RULES.get(name)
                return -np.inf if rule is None else rule([self.low(x) for x in args], attr)
        return -np.inf

    def op(self, name: str, a: list, attr):
        rule = OP_RULES.get(name)
        if rule is None:
            raise self.fail(f"no kernel interpreter rule for `{name}`")
        values = [x[0] for x in a]
        c = rule(values, attr, self.dtype)
        err = ERROR_RULES.get(name)
        if err is None:
            raise self.fail(f"no running-bound rule for the scalar operation `{name}`")
        return err(self, c, a, attr)


# ---- the rules: (run, computed result, operands as (value, err, flip), attr) ----------------


def _real_ops(a):
    return [(np.asarray(v, dtype=np.float64), e, f) for v, e, f in a]


def _add(run, c, a, attr):
    (x, ex, fx), (y, ey, fy) = a
    if ex is None:  # integers
        return c, None, np.asarray(fx) | np.asarray(fy)
    prop = np.asarray(ex) + np.asarray(ey)
    r = run.rounding(c, x, y) - run.eta  # an addition is exact below the normal range
    return c, _up(prop + np.maximum(r, 0.0)), False


def _sub(run, c, a, attr):
    """x − y; 0 − y is −y exactly, as `neg` (gelu's 0 − x·√½, presk_kernel.nests)."""
    (x, ex, _), (_, ey, fy) = a
    if ex is not None and not np.any(np.asarray(x)) and not np.any(np.asarray(ex)):
        return c, ey, fy
    return _add(run, c, a, attr)


def _mul(run, c, a, attr):
    (x, ex, fx), (y, ey, fy) = a
    if ex is None:
        return c, None, np.asarray(fx) | np.asarray(fy)
    prop = _times(x, ey) + _times(y, ex) + np.asarray(ex) * np.asarray(ey)
    return c, _up(prop + run.rounding(c, x, y)), False


def _div(run, c, a, attr):
    (x, ex, _), (y, ey, _) = _real_ops(a)
    ex, ey = np.asarray(ex, dtype=np.float64), np.asarray(ey, dtype=np.float64)
    ay = np.abs(y)
    floor = np.asarray(run.divisor_low, dtype=np.float64)  # the exact divisor's, if > 0
    low = np.maximum(ay - ey, np.where(floor > 0, floor, -np.inf))  # the smallest |exact|
    if np.any(low <= 0) or np.any(ay == 0):
        raise run.fail("a divisor within its error of 0 (no bound on a quotient)")
    # â/b̂ − a/b = (δa·b̂ − â·δb) / (b̂·b)
    prop = (_times(y, ex) + _times(x, ey)) / (ay * low)
    return c, _up(prop + run.rounding(c, x, y)), False


def _fma(run, c, a, attr):
    (x, ex, _), (y, ey, _), (z, ez, _) = a
    prop = _times(x, ey) + _times(y, ex) + np.asarray(ex) * np.asarray(ey) + np.asarray(ez)
    return c, _up(prop + run.rounding(c, x, y, z)), False


def _same_err(run, c, a, attr):
    (x, ex, fx) = a[0]
    return c, ex, fx


def _extremum(run, c, a, attr):
    (x, ex, fx), (y, ey, fy) = a
    if ex is None:
        return c, None, np.asarray(fx) | np.asarray(fy)
    return c, np.maximum(ex, ey), False


def _select(run, c, a, attr):
    """The chosen operand's error, element by element (the computed condition is the exact
    one where it cannot flip); where it may, the larger error plus the operands' distance."""
    (k, _, fk), (x, ex, fx), (y, ey, fy) = a
    k = np.asarray(k, dtype=bool)
    if ex is None:
        return c, None, np.asarray(fk) | np.where(k, np.asarray(fx), np.asarray(fy))
    ex, ey = np.asarray(ex, dtype=np.float64), np.asarray(ey, dtype=np.float64)
    err = np.where(k, ex, ey)
    if np.any(fk):  # the computed choice may be the other operand
        width = np.abs(np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64))
        width = np.where(np.isfinite(width), width, np.inf)
        err = np.where(fk, _up(np.maximum(ex, ey) + width), err)
    return c, err, False


def _compare(run, c, a, attr):
    (x, ex, fx), (y, ey, fy) = a
    flip = np.asarray(fx) | np.asarray(fy)
    if ex is None:
        return c, None, flip
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    reach = np.asarray(ex, dtype=np.float64) + np.asarray(ey, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        gap = np.abs(x - y)
    close = (reach > 0) & ~(gap > reach)  # the exact operands may order otherwise
    return c, None, flip | close


def _logic(run, c, a, attr):
    flip = False
    for _, _, f in a:
        flip = flip | np.asarray(f)
    return c, None, flip


def _isnan(run, c, a, attr):
    return c, None, np.asarray(a[0][2])


def _same(run, c, a, attr):
    (x, ex, fx), (y, ey, fy) = a
    flip = np.asarray(fx) | np.asarray(fy)
    if ex is not None:
        flip = flip | (np.asarray(ex) + np.asarray(ey) > 0)
    return c, None, flip


def _real(run, c, a, attr):
    (x, ex, fx) = a[0]
    if ex is None:  # an integer or a truth value: exact, or off by its flip's width
        if np.any(fx):
            raise run.fail("an integer the computation may choose otherwise, as a real")
        return c, 0.0, False
    gap = np.abs(np.asarray(c, dtype=np.float64) - np.asarray(x, dtype=np.float64))
    gap = np.where(np.isfinite(gap), gap, 0.0)  # a conversion rounds: measured exactly
    return c, _up(np.asarray(ex) + gap), False


def _bf16(run, c, a, attr):
    (x, ex, _) = a[0]
    gap = np.abs(np.asarray(c, dtype=np.float64) - np.asarray(x, dtype=np.float64))
    gap = np.where(np.isfinite(gap), gap, 0.0)
    return c, _up(np.asarray(ex) + gap), False


def _libm_rounding(run, name, c, x):
    """k ulps of the exact f(x̂), an ulp at most 2u|·| (2η below the normal range)."""
    k = run.ulps[name]
    rel = 2 * k * run.u
    r = rel / (1 - rel) * np.abs(np.asarray(c, dtype=np.float64)) + 2 * k * run.eta
    return np.where(np.isfinite(np.asarray(c, dtype=np.float64)), r, 0.0)


def _sqrt(run, c, a, attr):
    (x, ex, _) = _real_ops(a)[0]
    ex = np.asarray(ex, dtype=np.float64)
    if np.any(x < 0):
        raise run.fail("a square root of a computed value below 0")
    low = np.maximum(x - ex, 0.0)
    denom = np.sqrt(x) + np.sqrt(low)
    with np.errstate(divide="ignore", invalid="ignore"):
        prop = np.where(denom > 0, ex / denom, np.sqrt(ex))
    prop = np.minimum(prop, np.sqrt(ex))  # |√x̂ − √x| ≤ √|x̂ − x|
    return c, _up(prop + run.rounding(c, x) - run.eta), False


def _exp(run, c, a, attr):
    (x, ex, _) = _real_ops(a)[0]
    ex = np.asarray(ex, dtype=np.float64)
    if np.any(x + ex > 709):
        raise run.fail("an exponential that may overflow")
    prop = _times(np.exp(x), np.expm1(ex))  # |e^x̂ − e^x| ≤ e^x̂ (e^E − 1)
    return c, _up(prop + _libm_rounding(run, "exp", c, x)), False


def _log(run, c, a, attr):
    (x, ex, _) = _real_ops(a)[0]
    ex = np.asarray(ex, dtype=np.float64)
    if np.any(x - ex <= 0):
        raise run.fail("a log of a value within its error of 0")
    prop = -np.log1p(-ex / x)  # |log x̂ − log x| ≤ −log(1 − E/x̂)
    return c, _up(prop + _libm_rounding(run, "log", c, x)), False


def _lipschitz(name: str, slope):
    def rule(run, c, a, attr):
        (x, ex, _) = _real_ops(a)[0]
        ex = np.asarray(ex, dtype=np.float64)
        prop = np.minimum(slope(x, ex) * ex, 2.0)  # each of these ranges over at most 2
        return c, _up(prop + _libm_rounding(run, name, c, x)), False

    return rule


def _erf_slope(x, e):
    near = np.maximum(np.abs(x) - e, 0.0)
    return _ERF_SLOPE * np.exp(-near * near)


def _tanh_slope(x, e):
    near = np.maximum(np.abs(x) - e, 0.0)
    return 1 - np.tanh(near) ** 2


def _pow(run, c, a, attr):
    (x, ex, _) = _real_ops(a)[0]
    k = attr
    if not isinstance(k, int) or k < 0:
        raise run.fail(f"no running rule for `pow {k}`")
    if k == 0:
        return c, 0.0, False
    ex = np.asarray(ex, dtype=np.float64)
    ax = np.abs(x)
    prop = (ax + ex) ** k - ax**k  # |x̂ᵏ − xᵏ| ≤ (|x̂| + E)ᵏ − |x̂|ᵏ
    m = k.bit_length() - 1 + bin(k).count("1") - 1  # binary powering's products
    g = m * run.u / (1 - m * run.u)
    r = g / (1 - g) * np.abs(np.asarray(c, dtype=np.float64))
    r = r + 2 * m * run.eta * np.maximum(1.0, ax) ** k
    return c, _up(prop + r), False


def _refuse(name: str):
    def rule(run, c, a, attr):
        raise run.fail(f"`{name}` has no measured error bound")

    return rule


ERROR_RULES = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "fma": _fma,
    "neg": _same_err,
    "abs": _same_err,
    "max": _extremum,
    "min": _extremum,
    "select": _select,
    "compare": _compare,
    "same": _same,
    "and": _logic,
    "or": _logic,
    "not": _logic,
    "isnan": _isnan,
    "real": _real,
    "sqrt": _sqrt,
    "exp": _exp,
    "log": _log,
    "tanh": _lipschitz("tanh", _tanh_slope),
    "erf": _lipschitz("erf", _erf_slope),
    "erfc": _lipschitz("erfc", _erf_slope),
    "sin": _lipschitz("sin", lambda x, e: 1.0),
    "cos": _lipschitz("cos", lambda x, e: 1.0),
    "pow": _pow,
    "powf": _refuse("powf"),
    "bf16": _bf16,
    # integer weights: their exact values are the unquantised ones, not bounded here
    "dequant": _refuse("dequant"),
    # draws (issue 29): no running rule yet; an entry that draws keeps the interval bound
    "key_word": _refuse("key_word"),
    "uniform": _refuse("uniform"),
    "bernoulli": _refuse("bernoulli"),
    "normal": _refuse("normal"),
    "xavier": _refuse("xavier"),
    "normal_std": _refuse("normal_std"),
}
"""The running rule of every scalar operation of PSK-Kernel (a test asserts it covers
presk_kernel.interp.OP_RULES)."""


# ---- lower bounds of exact values (a divisor's): operands' lows to the result's ----------------


def _down(x):
    """x rounded toward −∞ by more than the few roundings that computed it."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # 0 stays 0: a sum or product that gives 0 is exact
        return np.where(x == 0, x, np.nextafter(x - np.abs(x) * 2.0**-50, -np.inf))


def _nonneg(f):
    """A rule of operands that must all be known ≥ 0 (−∞ otherwise)."""

    def rule(lows, attr):
        ls = np.broadcast_arrays(*[np.asarray(x, dtype=np.float64) for x in lows])
        ok = np.logical_and.reduce([x >= 0 for x in ls])
        with np.errstate(all="ignore"):
            return np.where(ok, _down(f(*[np.maximum(x, 0.0) for x in ls])), -np.inf)

    return rule


def _pow_low(lows, k):
    (la,) = lows
    la = np.asarray(la, dtype=np.float64)
    with np.errstate(all="ignore"):
        if k % 2 == 0:  # an even power is ≥ 0, and ≥ la^k where la ≥ 0
            return np.where(la > 0, _down(np.maximum(la, 0.0) ** k), 0.0)
        return np.where(np.isfinite(la), _down(la**k), -np.inf) if k > 0 else -np.inf


LOW_RULES = {
    "add": lambda lows, attr: _down(np.asarray(lows[0], float) + np.asarray(lows[1], float)),
    "mul": _nonneg(lambda a, b: a * b),
    "fma": lambda lows, attr: _down(_nonneg(lambda a, b: a * b)(lows[:2], attr) + lows[2]),
    "sqrt": lambda lows, attr: _down(np.sqrt(np.maximum(np.asarray(lows[0], float), 0.0))),
    "exp": lambda lows, attr: _down(np.exp(np.asarray(lows[0], float))),  # e^(−∞) = 0
    "pow": _pow_low,
    "real": lambda lows, attr: lows[0],  # a conversion keeps the exact value
    "bf16": lambda lows, attr: lows[0],
    "max": lambda lows, attr: np.maximum(lows[0], lows[1]),
    "min": lambda lows, attr: np.minimum(lows[0], lows[1]),
    "abs": lambda lows, attr: np.maximum(lows[0], 0.0),
    "select": lambda lows, attr: np.minimum(lows[1], lows[2]),
}
"""A lower bound of an operation's exact result from lower bounds of its operands' exact
values; an operation not here gives −∞ (nothing known)."""


def _fold_low(op: str, lo, terms: list):
    """A fold's lower bound after one more term (its terms' lows)."""
    if op == "fma":
        t = _nonneg(lambda a, b: a * b)(terms, None)
    else:
        t = np.asarray(terms[0], dtype=np.float64)
    if lo is None:
        return t
    if op in ("add", "fma"):
        return _down(lo + t)
    return np.maximum(lo, t) if op == "max" else np.minimum(lo, t)


# ---- a softmax, whole ------------------------------------------------------------------------


def _softmax(k: Kernel, views: list, ev: list, fv: list, tighter: bool = False) -> bool:
    """A softmax kernel (before fusion: `softmax axis A`) bounded by its row's rule, as the
    interval bound's (presk_kernel.bound._softmax, docs/precision.md): each output within
    ½·max over its row of the input's errors (the mean value theorem along the segment from
    the exact row to the computed one: ‖∇pᵢ‖₁ = 2pᵢ(1 − pᵢ) ≤ ½ at every point of it, so
    nothing is linearized) plus the three passes' rounding at the computed row, and within
    max(p̂, 1 − p̂) (exact and computed are in [0, 1]). Where the scalar rules refused (an
    exponential of an error that may overflow) the outputs' errors are this; otherwise
    (`tighter`) the smaller of the two. False where `k` is not such a softmax."""
    from presk_kernel.bound import core_op
    from presk_kernel.error_rules import gamma
    from presk_kernel.interp import run_kernel

    if core_op(k) != "softmax" or len(k.outputs) != 1 or ev[0] is None:
        return False
    if len(k.inputs) > 1 and any(f is not None and np.any(f) for f in fv[1 : len(k.inputs)]):
        return False  # a mask the computation may choose otherwise
    folds = [st for st in _walk(k.body) if isinstance(st, Reduce)]
    if len(folds) != 2 or len(folds[0].vars) != 1:
        return False
    axis = _row_axis(k, folds[0].vars[0][0])
    if axis is None:
        return False
    if not tighter:
        run_kernel(k, views)  # the computed values the scalar rules could not finish
    n = folds[0].vars[0][2]
    u, eta = UNIT[k.compute], ETA[k.compute]
    k_exp = LIBM_ULPS["f64" if k.compute == "f64" else "f32"]["exp"]
    c = u / (math.e * (1 - u)) * (1 + 2 * k_exp * u) + 2 * k_exp * eta
    g = gamma(n - 1, u)
    rel_s = n * c + 2 * k_exp * u + g * (1 + n * c + 2 * k_exp * u)
    if rel_s >= 0.5:
        return False
    rounding = (c + 2 * k_exp * u + rel_s) / (1 - rel_s)
    rounding = rounding + u * (1 + rounding) + eta
    out = len(k.inputs)
    e_in = np.asarray(ev[0], dtype=np.float64)
    if k.inputs[0].dtype == "f64" and k.compute == "f32":  # converted at its load: rounded
        e_in = e_in + u * np.abs(np.asarray(views[0], dtype=np.float64)) + eta
    e_in = np.max(e_in, axis=axis, keepdims=True)
    p = views[out]
    p = np.asarray(bf16_to_f32(p) if k.outputs[0].dtype == "bf16" else p, dtype=np.float64)
    store = 0.0
    if k.outputs[0].dtype == "bf16":  # the store's rounding, of the stored p̃ (≤ 1 + …)
        store = UNIT["bf16"] * np.abs(p) / (1 - UNIT["bf16"]) + ETA["bf16"]
    # p̃ is what was stored and the exact p is in [0, 1]: |p̃ − p| ≤ max(p̃, 1 − p̃) as it is
    whole = np.minimum(_up(0.5 * e_in + rounding + store), _up(np.maximum(p, 1 - p)))
    whole = np.broadcast_to(whole, p.shape)
    ev[out][...] = np.minimum(ev[out], whole) if tighter else whole
    return True


def _walk(body: tuple):
    for st in body:
        yield st
        if isinstance(st, Loop | Reduce):
            yield from _walk(st.body)


def _row_axis(k: Kernel, var: str) -> int | None:
    """The axis of the softmax's input its row's fold runs over (the fold's variable's)."""

    def loads(e):
        if isinstance(e, Load):
            yield e
        elif isinstance(e, Op):
            for a in e.args:
                yield from loads(a)

    for st in _walk(k.body):
        for t in st.terms if isinstance(st, Reduce) else ():
            for load in loads(t):  # the input's load, masked (a select) or not
                if load.buf != 0:
                    continue
                for ax, i in enumerate(load.index):
                    if isinstance(i, Affine) and dict(i.terms) == {var: 1}:
                        return ax
    return None


# ---- a schedule ------------------------------------------------------------------------------


def input_error(exact, stored: np.ndarray) -> np.ndarray:
    """|stored − exact| element by element, rounded up: the storage's own rounding."""
    flat = np.asarray(exact, dtype=object).reshape(-1)
    got = np.asarray(stored, dtype=np.float64).reshape(-1)
    out = np.empty(flat.shape, dtype=np.float64)
    with gmpy2.context(precision=300):
        for i, (x, y) in enumerate(zip(flat, got, strict=True)):
            d = abs(gmpy2.mpfr(y) - gmpy2.mpfr(x))
            out[i] = float(gmpy2.next_above(gmpy2.mpfr(d, 53))) if d else 0.0
    return out.reshape(np.shape(stored))


def running(schedule: Schedule, leaves: list) -> tuple[float, tuple[tuple[str, float], ...]]:
    """(the largest error bound of any element of any output, each output's) of
    `schedule` (before fusion or after: the same bits) run on `leaves`, the entry's exact
    inputs in the order of `schedule.inputs` (mpfr, floats, integers), stored as
    presk_cli.native.storage then presk_kernel.interp.run_schedule store them (to a double,
    then to the buffer's type). Raises BoundError where no finite bound follows."""
    memory, errs, flips, lows = {}, {}, {}, {}
    for b in schedule.buffers:
        memory[b.id] = np.zeros(elements(b.axes), dtype=NUMPY[b.dtype])
        if b.dtype in REAL_DTYPES:
            errs[b.id] = np.zeros(elements(b.axes))
            lows[b.id] = np.full(elements(b.axes), -np.inf)
        else:
            flips[b.id] = np.zeros(elements(b.axes), dtype=bool)
    for buf, value in zip(schedule.inputs, leaves, strict=True):
        b = schedule.buffers[buf]
        if b.dtype in REAL_DTYPES:
            stored = to_storage(to_storage(value, "f64"), b.dtype)
            memory[buf][...] = stored.reshape(-1)
            shown = bf16_to_f32(stored) if b.dtype == "bf16" else stored
            errs[buf][...] = input_error(value, shown).reshape(-1)
            exact = np.asarray(value, dtype=object).reshape(-1)  # its exact values, rounded down
            lows[buf][...] = _down(np.array([float(x) for x in exact], dtype=np.float64))
        else:
            memory[buf][...] = to_storage(value, b.dtype).reshape(-1)
    for launch in schedule.launches:
        k = launch.kernel
        views, ev, fv, lv = [], [], [], []
        for buffer, arg in zip(k.buffers, launch.args, strict=True):
            span = slice(arg.offset, arg.offset + buffer.size)
            views.append(memory[arg.buf][span].reshape(buffer.shape))
            real = arg.buf in errs
            ev.append(errs[arg.buf][span].reshape(buffer.shape) if real else None)
            fv.append(None if real else flips[arg.buf][span].reshape(buffer.shape))
            lv.append(lows[arg.buf][span].reshape(buffer.shape) if real else None)
        r = ERun(k, views, ev, fv, lv)
        with np.errstate(all="ignore"):
            try:
                r.block(k.body)
            except BoundError:
                if not _softmax(k, views, ev, fv):  # its row's rule (below), or refused
                    raise
            else:
                _softmax(k, views, ev, fv, tighter=True)
        for kb, arg in zip(k.buffers, launch.args, strict=True):
            if kb in k.outputs and arg.buf in errs:
                e = errs[arg.buf][arg.offset : arg.offset + kb.size]
                if not np.all(np.isfinite(e)):
                    raise r.fail("no finite error bound (an overflow or an infinity)")
    outs = []
    for buf in schedule.outputs:
        b = schedule.buffers[buf]
        if b.dtype in REAL_DTYPES:
            e = errs[buf]
            outs.append((b.name, float(np.max(e, initial=0.0))))
        elif np.any(flips[buf]):
            raise BoundError(f"the output `{b.name}` may differ from the exact run's")
    return max((e for _, e in outs), default=0.0), tuple(outs)


__all__ = ["ERROR_RULES", "ERun", "input_error", "running"]
