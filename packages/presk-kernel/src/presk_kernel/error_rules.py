"""The rules of the bound (presk_kernel.bound; docs/precision.md, "The rounding model"): the
abstract value of a scalar — where its exact value lies, how far the computed one is from
it — and one rule per scalar operation of PSK-Kernel (`SCALAR_RULES`, keyed like
presk_kernel.ir.SCALAR_TABLE): the exact interval by interval arithmetic, the error as what
the operands' errors can do plus the operation's own rounding in the kernel's compute type.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from presk_kernel.ir import Kernel

UNIT = {"f64": 2.0**-53, "f32": 2.0**-24, "bf16": 2.0**-8}
"""The unit roundoff of each type: |∘(x) − x| ≤ u·|x| for a normal result."""

ETA = {"f64": 2.0**-1075, "f32": 2.0**-150, "bf16": 2.0**-134}
"""Half the smallest subnormal: the absolute error of a rounding into the subnormal range."""

LARGEST = {"f64": 1.7976931348623157e308, "f32": 3.4028234663852886e38, "bf16": 3.3895e38}

LIBM_ULPS = {
    "f64": {"exp": 1.0, "log": 1.0, "tanh": 2.5, "erf": 2.5, "erfc": 4.0, "sin": 1.0, "cos": 1.0},
    "f32": {
        **dict.fromkeys(("log", "tanh", "erf", "sin", "cos"), 0.5 + 2.0**-16),
        "exp": 0.76,
        "erfc": 2.5,
    },
}
"""presk libm's error bounds in ulps of the result, as tests/test_libm.py asserts them
(docs/native.md, "Accuracy against MPFR"): an ulp of y is at most 2u·|y|, or 2η below the
normal range."""


class BoundError(Exception):
    """No finite bound: the site and why (E7102)."""

    code = "E7102"


@dataclass(frozen=True, slots=True)
class A:
    """An abstract scalar: the exact value y in [lo, hi]; the computed one within `err` of
    it, and within ρ|y| + σ√|y| + β (`tri`, when not None: a mixed error that keeps what a
    relative error knows, elementwise, through products, quotients, square roots and sums
    of one sign). `kind` real, int or bool; `flip`: an int or bool that may differ between
    the exact and the computed run."""

    lo: float
    hi: float
    err: float = 0.0
    kind: str = "real"
    flip: bool = False
    tri: tuple[float, float, float] | None = None
    floor: float = -math.inf  # a lower bound of the computed value (a square's is 0)

    @property
    def mag(self) -> float:
        """The largest |exact value|."""
        return max(abs(self.lo), abs(self.hi))

    @property
    def top(self) -> float:
        """The largest |computed value|."""
        return self.mag + self.err

    @property
    def computed(self) -> tuple[float, float]:
        return max(self.lo - self.err, self.floor), self.hi + self.err

    @property
    def mixed(self) -> tuple[float, float, float]:
        """(ρ, σ, β) of the mixed error; an absolute error alone is (0, 0, err)."""
        return self.tri if self.tri is not None else (0.0, 0.0, self.err)

    @property
    def min_abs(self) -> float:
        """The smallest |exact value|."""
        return 0.0 if self.lo <= 0 <= self.hi else min(abs(self.lo), abs(self.hi))

    @property
    def nonneg(self) -> bool:
        return self.lo >= 0

    @property
    def nonpos(self) -> bool:
        return self.hi <= 0


def tight(a: A) -> A:
    """`a` with its absolute error no larger than its mixed error allows at its magnitude."""
    if a.tri is None or a.kind != "real":
        return a
    r, s, b = a.tri
    m = a.mag
    return replace(a, err=min(a.err, up(r * m + s * math.sqrt(m) + b)))


def join(a: A | None, b: A) -> A:
    if a is None:
        return b
    tri = None
    if a.tri is not None and b.tri is not None:
        tri = tuple(max(x, y) for x, y in zip(a.tri, b.tri, strict=True))
    lo, hi = min(a.lo, b.lo), max(a.hi, b.hi)
    floor = min(a.computed[0], b.computed[0])
    return tight(A(lo, hi, max(a.err, b.err), b.kind, a.flip or b.flip, tri, floor))


def down(x: float, u: float) -> float:
    """A lower bound of ∘(x) when rounding at unit u (no underflow: callers subtract η)."""
    return x * (1 - u) if x >= 0 else x * (1 + u)


def gamma(n: int, u: float) -> float:
    """γₙ = nu / (1 − nu): the relative error of n roundings in a row (Higham, §3.1)."""
    if n <= 0:
        return 0.0
    if n * u >= 0.5:
        return math.inf
    return n * u / (1 - n * u)


def up(x: float) -> float:
    """x rounded up to the next double: the bound's own arithmetic errs on the safe side."""
    return math.nextafter(x, math.inf) if math.isfinite(x) else x


# ---- the context of one kernel -------------------------------------------------------------


@dataclass
class Ctx:
    kernel: Kernel
    loads: dict[int, A]  # kernel buffer id -> what it holds
    stores: dict[int, A]  # kernel buffer id -> what was stored
    host: Mapping[int, str]  # kernel buffer id -> the name of its host buffer
    dtypes: dict[int, str]
    ranges: Mapping[str, tuple[float, float]]  # a site's exact range (the envelope's)
    sums: tuple[float, float] | None  # (Σ|terms|, cond) of this kernel's one fold, measured
    env: dict[str, A]

    @property
    def compute(self) -> str:
        return self.kernel.compute

    @property
    def u(self) -> float:
        return UNIT[self.compute]

    @property
    def eta(self) -> float:
        return ETA[self.compute]

    def fail(self, why: str) -> BoundError:
        return BoundError(f"`{self.kernel.name}` at {self.kernel.site}: {why}")

    def checked(self, a: A) -> A:
        if a.kind == "real":
            if not (math.isfinite(a.lo) and math.isfinite(a.hi) and math.isfinite(a.err)):
                raise self.fail("the envelope bounds no value or error here (an infinity)")
            if a.top > LARGEST[self.compute]:
                raise self.fail(f"a value may overflow {self.compute} ({a.top:.3e})")
        return a


def rounded(
    ctx: Ctx,
    lo: float,
    hi: float,
    prop: float,
    relative: float,
    absolute: float,
    tri: tuple[float, float, float] | None = None,
    floor: float = -math.inf,
) -> A:
    """A real result: exact in [lo, hi]; `prop` (and `tri`, mixed) what the operands'
    errors do; its rounding at most `relative`·|computed| + `absolute`; `floor` a lower
    bound of the computed value before its rounding."""
    mag = max(abs(lo), abs(hi))
    err = up(prop + relative * (mag + prop) + absolute)
    if tri is not None:
        r, s, b = tri
        if not all(math.isfinite(x) for x in tri):
            tri = None
        else:
            tri = (
                up(r * (1 + relative) + relative),
                up(s * (1 + relative)),
                up(b * (1 + relative) + absolute),
            )
    if floor > -math.inf:  # rounding keeps a sign: ∘(x) ≥ 0 for x ≥ 0
        floor = (
            down(floor, relative) - absolute
            if floor < 0
            else max(down(floor, relative) - absolute, 0.0)
        )
    return ctx.checked(tight(A(lo, hi, err, tri=tri, floor=floor)))


def hull(*xs: float) -> tuple[float, float]:
    return min(xs), max(xs)


def mul_interval(a: A, b: A) -> tuple[float, float]:
    return hull(a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)


def libm(ctx: Ctx, name: str) -> float:
    return LIBM_ULPS["f64" if ctx.compute == "f64" else "f32"][name]


# ---- the rules of the scalar operations ----------------------------------------------------


def _add(ctx: Ctx, a: A, b: A, sign: int = 1) -> A:
    if a.kind != "real" or b.kind != "real":
        return _int_op(a, b, lambda x, y: x + sign * y)
    if sign < 0 and a.lo == a.hi == 0.0 and a.err == 0.0:  # 0 − b is −b exactly, as `neg`
        return _neg(ctx, b)  # (gelu's 0 − x·√½, presk_kernel.nests)
    lo, hi = (a.lo + b.lo, a.hi + b.hi) if sign > 0 else (a.lo - b.hi, a.hi - b.lo)
    tri = None
    same = (a.nonneg and b.nonneg) or (a.nonpos and b.nonpos)
    if same if sign > 0 else (a.nonneg and b.nonpos) or (a.nonpos and b.nonneg):
        (ra, sa, ba), (rb, sb, bb) = a.mixed, b.mixed  # one sign: |a| + |b| = |a ± b|
        tri = (max(ra, rb), sa + sb, ba + bb)
    (alo, _), (blo, bhi) = a.computed, b.computed
    floor = alo + blo if sign > 0 else alo - bhi
    return rounded(ctx, lo, hi, a.err + b.err, ctx.u, 0.0, tri, floor)  # exact if subnormal


def product(a: A, b: A) -> tuple[float, tuple[float, float, float]]:
    """|âb̂ − ab| ≤ |a||δb| + |b||δa| + |δa||δb|: absolute, and mixed (|a|√|b| ≤ √|ab|√max|a|)."""
    prop = a.mag * b.err + b.mag * a.err + a.err * b.err
    (ra, sa, ba), (rb, sb, bb) = a.mixed, b.mixed
    tri = (
        ra + rb,
        sb * math.sqrt(a.mag) + sa * math.sqrt(b.mag),
        bb * a.mag + ba * b.mag + a.err * b.err,
    )
    return prop, tri


def _mul(ctx: Ctx, a: A, b: A) -> A:
    if a.kind != "real" or b.kind != "real":
        return _int_op(a, b, lambda x, y: x * y)
    lo, hi = mul_interval(a, b)
    prop, tri = product(a, b)
    (alo, _), (blo, _) = a.computed, b.computed
    floor = alo * blo if alo >= 0 and blo >= 0 else -math.inf
    return rounded(ctx, lo, hi, prop, ctx.u, ctx.eta, tri, floor)


def _div(ctx: Ctx, a: A, b: A) -> A:
    a, b = as_real(a), as_real(b)
    clo, chi = b.computed
    if clo <= 0 <= chi:
        raise ctx.fail(
            f"a divisor ranges over [{clo:.3e}, {chi:.3e}], which holds 0 (no bound on a quotient)"
        )
    m = b.min_abs
    mc = min(abs(clo), abs(chi))  # the smallest |computed divisor|
    lo, hi = mul_interval(a, A(1 / b.hi, 1 / b.lo))
    prop = a.err / mc + a.mag * b.err / (m * mc)
    (ra, sa, ba), (rb, sb, bb) = a.mixed, b.mixed
    rel_b = min(rb + sb / math.sqrt(m) + bb / m, b.err / m)  # the divisor's relative error
    kappa = 1 / (1 - rel_b) if rel_b < 1 else math.inf  # |b| / |b̂|
    tri = (kappa * (ra + rel_b), sa * kappa / math.sqrt(m), ba / mc)
    alo = a.computed[0]
    floor = alo / chi if alo >= 0 and clo > 0 else -math.inf
    return rounded(ctx, lo, hi, prop, ctx.u, ctx.eta, tri, floor)


def _fma(ctx: Ctx, a: A, b: A, c: A) -> A:
    lo, hi = mul_interval(a, b)
    prop, _ = product(a, b)
    return rounded(ctx, lo + c.lo, hi + c.hi, prop + c.err, ctx.u, ctx.eta)


def _neg(ctx: Ctx, a: A) -> A:
    return replace(a, lo=-a.hi, hi=-a.lo)


def _abs(ctx: Ctx, a: A) -> A:
    return replace(a, lo=a.min_abs, hi=a.mag, floor=0.0)


def _extremum(ctx: Ctx, a: A, b: A, pick) -> A:
    if a.kind != "real" or b.kind != "real":
        return _int_op(a, b, pick)
    tri = None
    if pick is max and a.nonneg and b.nonneg:  # |max| bounds each operand's magnitude (not
        tri = tuple(max(x, y) for x, y in zip(a.mixed, b.mixed, strict=True))  # |min|)
    floor = pick(a.computed[0], b.computed[0])
    return tight(A(pick(a.lo, b.lo), pick(a.hi, b.hi), max(a.err, b.err), tri=tri, floor=floor))


def _sqrt(ctx: Ctx, a: A) -> A:
    lo = a.computed[0]
    if lo < 0 or a.lo < 0:
        raise ctx.fail(f"a square root of a range reaching {min(lo, a.lo):.3e} < 0")
    prop = math.sqrt(a.err)
    tri = None
    if a.lo > 0:  # |√x̂ − √x| = |δ| / (√x̂ + √x) ≤ ρ√x + σ + β/√x
        prop = min(prop, a.err / (math.sqrt(a.lo) + math.sqrt(lo)))
        r, s, b = a.mixed
        tri = (r, 0.0, s + min(math.sqrt(b), b / math.sqrt(a.lo)))
    lo_y, hi_y = math.sqrt(a.lo), math.sqrt(a.hi)
    return rounded(ctx, lo_y, hi_y, prop, ctx.u, 0.0, tri, math.sqrt(lo))


def _exp(ctx: Ctx, a: A) -> A:
    k = libm(ctx, "exp")
    if a.hi + a.err > 709:
        raise ctx.fail(f"exp of a range reaching {a.hi + a.err:.3e}")
    prop = math.exp(a.hi) * math.expm1(a.err)
    tri = (math.expm1(a.err), 0.0, 0.0)  # e^x̂ = e^x·e^δ: a relative error
    lo, hi = math.exp(a.lo), math.exp(a.hi)
    return rounded(ctx, lo, hi, prop, 2 * k * ctx.u, 2 * k * ctx.eta, tri, 0.0)


def _log(ctx: Ctx, a: A) -> A:
    k = libm(ctx, "log")
    lo = a.computed[0]
    if lo <= 0 or a.lo <= 0:
        raise ctx.fail(f"log of a range reaching {min(lo, a.lo):.3e} ≤ 0")
    prop = math.log1p(a.err / lo)
    return rounded(ctx, math.log(a.lo), math.log(a.hi), prop, 2 * k * ctx.u, 2 * k * ctx.eta)


def _lipschitz(name: str, f, slope) -> callable:
    """A transcendental f with |f′| ≤ slope(computed range), ranging over at most 2."""

    def rule(ctx: Ctx, a: A) -> A:
        k = libm(ctx, name)
        lo, hi = f(a.lo, a.hi)
        prop = min(slope(*a.computed) * a.err, 2.0)
        return rounded(ctx, lo, hi, prop, 2 * k * ctx.u, 2 * k * ctx.eta)

    return rule


def _erf_slope(lo: float, hi: float) -> float:
    near = 0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))
    return 2 / math.sqrt(math.pi) * math.exp(-near * near)


def _sin_range(lo: float, hi: float) -> tuple[float, float]:
    m = min(1.0, max(abs(lo), abs(hi)))
    return -m, m


_tanh = _lipschitz("tanh", lambda lo, hi: (math.tanh(lo), math.tanh(hi)), lambda lo, hi: 1.0)
_erf = _lipschitz("erf", lambda lo, hi: (math.erf(lo), math.erf(hi)), _erf_slope)
_erfc = _lipschitz("erfc", lambda lo, hi: (math.erfc(hi), math.erfc(lo)), _erf_slope)
_sin = _lipschitz("sin", _sin_range, lambda lo, hi: 1.0)
_cos = _lipschitz("cos", lambda lo, hi: (-1.0, 1.0), lambda lo, hi: 1.0)


def _pow(ctx: Ctx, a: A, k: int) -> A:
    if not isinstance(k, int) or k < 0:
        raise ctx.fail(f"no rule for `pow {k}`")
    if k == 0:
        return A(1.0, 1.0, tri=(0.0, 0.0, 0.0))
    if k == 1:
        return a
    m = k.bit_length() - 1 + bin(k).count("1") - 1  # the multiplications of binary powering
    top = a.top
    low = a.min_abs**k
    lo, hi = (low, a.mag**k) if k % 2 == 0 else (a.lo**k, a.hi**k)
    prop = k * top ** (k - 1) * a.err
    tri = None
    if k == 2:  # (x + δ)² − x² = 2xδ + δ²: 2ρ|y| + 2(σ√max|x| + β)√|y| + err²
        r, s, b = a.mixed
        tri = (2 * r, 2 * (s * math.sqrt(a.mag) + b), a.err * a.err)
    absolute = m * ctx.eta * max(1.0, top) ** k
    floor = 0.0 if k % 2 == 0 else -math.inf  # an even power is never negative
    return rounded(ctx, lo, hi, prop, gamma(m, ctx.u), absolute, tri, floor)


def _real(ctx: Ctx, a: A) -> A:
    """An integer or a truth value as a real (exact), or a real converted to the compute
    type (f64 to f32 rounds; a widening is exact)."""
    if a.kind == "real":
        if ctx.compute == "f32":
            return rounded(ctx, a.lo, a.hi, a.err, ctx.u, ctx.eta, a.mixed, a.computed[0])
        return a
    return as_real(a)


def _bf16(ctx: Ctx, a: A) -> A:
    return rounded(ctx, a.lo, a.hi, a.err, UNIT["bf16"], ETA["bf16"], a.mixed, a.computed[0])


def _select(ctx: Ctx, c: A, a: A, b: A) -> A:
    lo, hi = min(a.lo, b.lo), max(a.hi, b.hi)
    if a.kind != "real":
        return A(lo, hi, kind=a.kind, flip=c.flip or a.flip or b.flip)
    err = max(a.err, b.err)
    tri = tuple(max(x, y) for x, y in zip(a.mixed, b.mixed, strict=True))
    if c.flip:  # the computed choice may be the other operand
        err, tri = up(err + (hi - lo)), None
    floor = min(a.computed[0], b.computed[0])
    return ctx.checked(tight(A(lo, hi, err, tri=tri, floor=floor)))


def _compare(ctx: Ctx, a: A, b: A, op: str) -> A:
    (alo, ahi), (blo, bhi) = a.computed, b.computed
    apart = ahi < blo or alo > bhi  # every computed and exact pair orders the same way
    may = (a.err + b.err > 0 or a.flip or b.flip) and not apart
    return A(0, 1, kind="bool", flip=may)


def _logic(ctx: Ctx, *xs: A) -> A:
    return A(0, 1, kind="bool", flip=any(x.flip for x in xs))


def _isnan(ctx: Ctx, a: A) -> A:
    return A(0, 1, kind="bool")  # no NaN: every value is finite (ctx.checked)


def _same(ctx: Ctx, a: A, b: A) -> A:
    return A(0, 1, kind="bool", flip=a.err > 0 or b.err > 0 or a.flip or b.flip)


def _int_op(a: A, b: A, f) -> A:
    vals = [f(x, y) for x, y in ((a.lo, b.lo), (a.lo, b.hi), (a.hi, b.lo), (a.hi, b.hi))]
    return A(min(vals), max(vals), kind="int", flip=a.flip or b.flip)


def as_real(a: A) -> A:
    if a.kind == "real":
        return a
    err = float(a.hi - a.lo) if a.flip else 0.0
    return A(float(a.lo), float(a.hi), err, tri=None if a.flip else (0.0, 0.0, 0.0))


SCALAR_RULES = {
    "add": lambda ctx, a, b, attr: _add(ctx, a, b),
    "sub": lambda ctx, a, b, attr: _add(ctx, a, b, -1),
    "mul": lambda ctx, a, b, attr: _mul(ctx, a, b),
    "div": lambda ctx, a, b, attr: _div(ctx, a, b),
    "fma": lambda ctx, a, b, c, attr: _fma(ctx, a, b, c),
    "neg": lambda ctx, a, attr: _neg(ctx, a),
    "abs": lambda ctx, a, attr: _abs(ctx, a),
    "max": lambda ctx, a, b, attr: _extremum(ctx, a, b, max),
    "min": lambda ctx, a, b, attr: _extremum(ctx, a, b, min),
    "select": lambda ctx, c, a, b, attr: _select(ctx, c, a, b),
    "compare": lambda ctx, a, b, attr: _compare(ctx, a, b, attr),
    "same": lambda ctx, a, b, attr: _same(ctx, a, b),
    "and": lambda ctx, a, b, attr: _logic(ctx, a, b),
    "or": lambda ctx, a, b, attr: _logic(ctx, a, b),
    "not": lambda ctx, a, attr: _logic(ctx, a),
    "isnan": lambda ctx, a, attr: _isnan(ctx, a),
    "real": lambda ctx, a, attr: _real(ctx, a),
    "sqrt": lambda ctx, a, attr: _sqrt(ctx, a),
    "exp": lambda ctx, a, attr: _exp(ctx, a),
    "log": lambda ctx, a, attr: _log(ctx, a),
    "tanh": lambda ctx, a, attr: _tanh(ctx, a),
    "erf": lambda ctx, a, attr: _erf(ctx, a),
    "erfc": lambda ctx, a, attr: _erfc(ctx, a),
    "sin": lambda ctx, a, attr: _sin(ctx, a),
    "cos": lambda ctx, a, attr: _cos(ctx, a),
    "pow": lambda ctx, a, attr: _pow(ctx, a, attr),
    "powf": None,  # presk libm's pow has no measured error bound yet: refused
    "bf16": lambda ctx, a, attr: _bf16(ctx, a),
    "dequant": None,  # integer weights: their exact values are the unquantised ones: refused
    # draws: functions of the key's words and the counter alone, the same in every run
    "key_word": lambda ctx, k0, k1, c, w, attr: A(0, 2**32 - 1, kind="int"),
    "uniform": lambda ctx, k0, k1, c, attr: _real(ctx, A(0.0, 1.0 - 2.0**-53)),
    "bernoulli": lambda ctx, k0, k1, c, p, attr: A(0, 1, kind="bool", flip=p.err > 0 or p.flip),
    "normal": lambda ctx, k0, k1, c, attr: _real(ctx, A(-8.58, 8.58)),  # |z| ≤ √(106 ln 2)
    "xavier": lambda ctx, k0, k1, c, attr: _real(ctx, A(-_xavier_bound(attr), _xavier_bound(attr))),
    "normal_std": lambda ctx, k0, k1, c, attr: _real(ctx, _normal_std_range(attr)),
}
"""The rule of every scalar operation of PSK-Kernel (presk_kernel.ir.SCALAR_TABLE): its
operands' abstract values (and its attr) to its result's."""


def _xavier_bound(fans: int) -> float:
    """xavier_uniform's a = √(6 / (fan_in + fan_out)), rounded up (|a·t| ≤ a, t in [−1, 1))."""
    return math.nextafter(math.sqrt(6 / fans), math.inf)


def _normal_std_range(std: str) -> A:
    """std·z, |z| ≤ 8.58: the range of `normal(std = …)`'s values, widened by an ulp."""
    s = abs(float(std)) * 8.58
    s = math.nextafter(s, math.inf)
    return A(-s, s)


__all__ = [
    "A",
    "BoundError",
    "Ctx",
    "ETA",
    "LARGEST",
    "LIBM_ULPS",
    "SCALAR_RULES",
    "UNIT",
    "as_real",
    "gamma",
    "join",
    "libm",
    "mul_interval",
    "product",
    "rounded",
    "tight",
    "up",
]
