"""Decide properties of dimensions for all their values: Presburger arithmetic with islpy.

Lengths are affine expressions over the dimensions in scope (`Lin`: `4*D`, `D + 1`, `In`).
A `DimContext` lists those dimensions in declaration order, each a natural number (>= 0)
with an optional upper bound (`dim T <= 1024`), and may assume facts (formulas). Formulas
compare lengths (`Eq`, `Ne`, `Le`, `Lt`, `Ge`, `Gt`, all building a `Cmp`), state
divisibility (`Divides(k, a)`: `a % k == 0`; `ModZero(a, m)`: `a % m == 0`) and combine with
`And`, `Or`, `Not`. `holds_for_all` proves a formula for every value of the context or returns
a counterexample; `is_satisfiable` and `witness` ask the dual question; `check_assignment`
tests concrete values (`--dim T=2000`) against the context's bounds and facts.

Semantics of `%`: `a % m == 0` holds when m != 0 and m divides a; a modulus of zero is
undefined, so the property is false there. `a % m == 0` with both sides symbolic is not
Presburger: with a constant modulus it is `Divides`; with a constant left side `c`, it is
"m is one of the divisors of c" (enumerated); otherwise the decision raises `Undecidable`.

The counterexample rule (also the rule for witnesses). Among the points of the context that
violate the formula, looked at on the dimensions the formula mentions (listed in the
context's order), we return the one with the smallest sum of values; ties go to the point
whose last-declared dimension is smallest, then the one before it, and so on back to the
first. For `In == Out` over `{In Out : dim}` the violating points of sum 1 are (1, 0) and
(0, 1); the last dimension, Out, is smaller in the first, hence `In = 1, Out = 0`, as the
tutorial prints. Other dimensions are existentially quantified: some value of them, within
the bounds and facts, completes the point.

islpy state (space, domain) is built once per context and cached; isl runs in islpy's
process-wide default context, so these functions are not meant for concurrent threads.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache, reduce
from math import isqrt

import islpy as isl

_ISL = isl.DEFAULT_CONTEXT
_SET = isl.dim_type.set
_IN = isl.dim_type.in_


class Undecidable(ValueError):
    """A formula outside Presburger arithmetic, e.g. `D % H == 0` with both sides symbolic."""


# --- lengths ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lin:
    """An affine expression: sum of coefficient*name plus a constant (normalized on creation)."""

    coeffs: tuple[tuple[str, int], ...] = ()
    constant: int = 0

    def __post_init__(self) -> None:
        merged: dict[str, int] = {}
        for name, c in self.coeffs:
            merged[name] = merged.get(name, 0) + c
        object.__setattr__(self, "coeffs", tuple(sorted((n, c) for n, c in merged.items() if c)))

    @staticmethod
    def var(name: str) -> Lin:
        return Lin(((name, 1),))

    @staticmethod
    def const(k: int) -> Lin:
        return Lin((), k)

    @property
    def is_const(self) -> bool:
        return not self.coeffs

    @property
    def names(self) -> frozenset[str]:
        return frozenset(n for n, _ in self.coeffs)

    def value(self, values: Mapping[str, int]) -> int:
        return self.constant + sum(c * values[n] for n, c in self.coeffs)

    def __add__(self, other: Lin | int) -> Lin:
        o = as_lin(other)
        return Lin(self.coeffs + o.coeffs, self.constant + o.constant)

    __radd__ = __add__

    def __neg__(self) -> Lin:
        return Lin(tuple((n, -c) for n, c in self.coeffs), -self.constant)

    def __sub__(self, other: Lin | int) -> Lin:
        return self + -as_lin(other)

    def __rsub__(self, other: Lin | int) -> Lin:
        return as_lin(other) - self

    def __mul__(self, other: Lin | int) -> Lin:
        if isinstance(other, Lin):
            if not other.is_const and not self.is_const:
                raise ValueError(f"`({self}) * ({other})` is not linear")
            return other * self.constant if self.is_const else self * other.constant
        return Lin(tuple((n, c * other) for n, c in self.coeffs), self.constant * other)

    __rmul__ = __mul__

    def __str__(self) -> str:
        parts = [(c, n) for n, c in self.coeffs]
        if self.constant or not parts:
            parts.append((self.constant, ""))
        out = []
        for i, (c, n) in enumerate(parts):
            body = str(abs(c)) if not n else n if abs(c) == 1 else f"{abs(c)}*{n}"
            sign = ("-" if c < 0 else "") if i == 0 else (" - " if c < 0 else " + ")
            out.append(sign + body)
        return "".join(out)


def as_lin(x: Lin | int) -> Lin:
    return x if isinstance(x, Lin) else Lin.const(x)


# --- formulas --------------------------------------------------------------------------------

# op -> (its negation, its test on integers)
_RELATIONS: dict[str, tuple[str, Callable[[int, int], bool]]] = {
    "==": ("!=", operator.eq),
    "!=": ("==", operator.ne),
    "<=": (">", operator.le),
    "<": (">=", operator.lt),
    ">=": ("<", operator.ge),
    ">": ("<=", operator.gt),
}
# op -> half-spaces s*(a - b) + k >= 0 whose union it is ("==" is one equality instead)
_HALF_SPACES: dict[str, tuple[tuple[int, int], ...]] = {
    "!=": ((1, -1), (-1, -1)),  # a - b >= 1  or  b - a >= 1
    "<=": ((-1, 0),),  # b - a >= 0
    "<": ((-1, -1),),  # b - a - 1 >= 0
    ">=": ((1, 0),),  # a - b >= 0
    ">": ((1, -1),),  # a - b - 1 >= 0
}


@dataclass(frozen=True, slots=True)
class Cmp:
    """`a op b` for op in ==, !=, <=, <, >=, >; build it with Eq, Ne, Le, Lt, Ge, Gt."""

    op: str
    a: Lin
    b: Lin

    def __str__(self) -> str:
        return f"{self.a} {self.op} {self.b}"


def _relation(op: str) -> Callable[[Lin | int, Lin | int], Cmp]:
    def build(a: Lin | int, b: Lin | int) -> Cmp:
        return Cmp(op, as_lin(a), as_lin(b))

    build.__name__ = build.__qualname__ = {v[0]: k for k, v in _NAMES.items()}[op]
    return build


_NAMES = {"Eq": ("==",), "Ne": ("!=",), "Le": ("<=",), "Lt": ("<",), "Ge": (">=",), "Gt": (">",)}
Eq, Ne, Le, Lt, Ge, Gt = (_relation(op) for (op,) in _NAMES.values())


@dataclass(frozen=True, slots=True)
class Divides:
    """`a % k == 0` for a constant k (false for k == 0: a modulus of zero is undefined)."""

    k: int
    a: Lin

    def __str__(self) -> str:
        return f"{_operand(self.a)} % {self.k} == 0"


@dataclass(frozen=True, slots=True)
class ModZero:
    """`a % m == 0` as written; decidable when a or m is constant (see the module doc)."""

    a: Lin
    m: Lin

    def __str__(self) -> str:
        return f"{_operand(self.a)} % {_operand(self.m)} == 0"


@dataclass(frozen=True, slots=True, init=False)
class And:
    parts: tuple[Formula, ...]

    def __init__(self, *parts: Formula) -> None:
        object.__setattr__(self, "parts", parts)

    def __str__(self) -> str:
        return " and ".join(map(_inner, self.parts)) or "true"


@dataclass(frozen=True, slots=True, init=False)
class Or:
    parts: tuple[Formula, ...]

    def __init__(self, *parts: Formula) -> None:
        object.__setattr__(self, "parts", parts)

    def __str__(self) -> str:
        return " or ".join(map(_inner, self.parts)) or "false"


@dataclass(frozen=True, slots=True)
class Not:
    f: Formula

    def __str__(self) -> str:
        return f"not {self.f}" if isinstance(self.f, Not) else f"not ({self.f})"


Formula = Cmp | Divides | ModZero | And | Or | Not
TRUE: Formula = And()
FALSE: Formula = Or()


def _operand(e: Lin) -> str:
    s = str(e)
    return s if len(e.coeffs) + (e.constant != 0) <= 1 and not s.startswith("-") else f"({s})"


def _inner(f: Formula) -> str:
    return f"({f})" if isinstance(f, And | Or) and len(f.parts) > 1 else str(f)


def dims_of(f: Formula) -> frozenset[str]:
    """The dimensions a formula mentions."""
    match f:
        case Cmp(_, a, b) | ModZero(a, b):
            return a.names | b.names
        case Divides(_, a):
            return a.names
        case Not(g):
            return dims_of(g)
        case And(parts) | Or(parts):
            return frozenset().union(*map(dims_of, parts))
    raise TypeError(f"not a formula: {f!r}")


def _mod_zero(a: int, m: int) -> bool:
    return m != 0 and a % m == 0


def evaluate(f: Formula, values: Mapping[str, int]) -> bool:
    """The truth of a formula at concrete values of its dimensions."""
    match f:
        case Cmp(op, a, b):
            return _RELATIONS[op][1](a.value(values), b.value(values))
        case Divides(k, a):
            return _mod_zero(a.value(values), k)
        case ModZero(a, m):
            return _mod_zero(a.value(values), m.value(values))
        case Not(g):
            return not evaluate(g, values)
        case And(parts):
            return all(evaluate(g, values) for g in parts)
        case Or(parts):
            return any(evaluate(g, values) for g in parts)
    raise TypeError(f"not a formula: {f!r}")


def _closed_truth(f: Formula) -> bool | None:
    """The truth of f when it does not depend on the dimensions' values, else None."""
    match f:
        case Cmp(op, a, b):
            d = a - b
            return _RELATIONS[op][1](d.constant, 0) if d.is_const else None
        case Divides() | ModZero():
            return evaluate(f, {}) if not dims_of(f) else None
        case Not(g):
            t = _closed_truth(g)
            return None if t is None else not t
        case And(parts) | Or(parts):
            unit = isinstance(f, And)  # the value that does not decide
            truths = [_closed_truth(g) for g in parts]
            if (not unit) in truths:
                return not unit
            return unit if all(t is unit for t in truths) else None
    raise TypeError(f"not a formula: {f!r}")


def _divisors(c: int) -> list[int]:
    small = [d for d in range(1, isqrt(c) + 1) if c % d == 0]
    return sorted({*small, *(c // d for d in small)})


def _lower_mod(f: ModZero) -> Formula:
    """`a % m == 0` in Presburger terms, or Undecidable."""
    a, m = f.a, f.m
    if m.is_const:
        return Divides(abs(m.constant), a)
    if a.is_const:
        if a.constant == 0:
            return Ne(m, 0)
        return Or(*(Eq(m, s * d) for d in _divisors(abs(a.constant)) for s in (1, -1)))
    raise Undecidable(
        f"`{f}` is outside Presburger arithmetic: both `{a}` and `{m}` are symbolic "
        "(a symbolic modulus needs a constant on one side)"
    )


# --- contexts and answers --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Dim:
    """A natural-number dimension, `dim T` or `dim T <= upper`."""

    name: str
    upper: int | None = None


@dataclass(frozen=True, slots=True)
class DimContext:
    """The dimensions in scope, in declaration order, and the facts assumed about them."""

    dims: tuple[Dim, ...] = ()
    facts: tuple[Formula, ...] = ()

    def __post_init__(self) -> None:
        names = self.names
        if len(set(names)) != len(names):
            raise ValueError(f"dimension declared twice in {names}")
        for fact in self.facts:
            if unknown := sorted(dims_of(fact) - set(names)):
                raise ValueError(f"fact `{fact}` mentions unknown dimension `{unknown[0]}`")

    @staticmethod
    def of(*names: str) -> DimContext:
        return DimContext(tuple(Dim(n) for n in names))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    def with_dim(self, name: str, upper: int | None = None) -> DimContext:
        return DimContext((*self.dims, Dim(name, upper)), self.facts)

    def assume(self, *facts: Formula) -> DimContext:
        return DimContext(self.dims, (*self.facts, *facts))

    def constraints(self) -> Iterator[Formula]:
        """Every dimension's bounds (`T >= 0`, `T <= 1024`), then the facts, in order."""
        for d in self.dims:
            yield Ge(Lin.var(d.name), 0)
            if d.upper is not None:
                yield Le(Lin.var(d.name), d.upper)
        yield from self.facts


@dataclass(frozen=True, slots=True, eq=False)
class Assignment(Mapping[str, int]):
    """Values of dimensions, in the context's order; prints as `In = 1, Out = 0`."""

    pairs: tuple[tuple[str, int], ...]

    def __getitem__(self, name: str) -> int:
        for n, v in self.pairs:
            if n == name:
                return v
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (n for n, _ in self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def __hash__(self) -> int:
        return hash(frozenset(self.pairs))

    def __str__(self) -> str:
        return ", ".join(f"{n} = {v}" for n, v in self.pairs)


Counterexample = Assignment


@dataclass(frozen=True, slots=True)
class Violation:
    """A bound or fact of a context that concrete values break."""

    constraint: Formula
    at: Assignment

    def __str__(self) -> str:
        return f"`{self.constraint}` is false for {self.at}"


# --- islpy -----------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _val(k: int) -> isl.Val:
    if -(2**62) <= k < 2**62:
        return isl.Val.int_from_si(_ISL, k)
    return isl.Val.read_from_str(_ISL, str(k))


class _Space:
    """A context in isl: its set space (one set dimension per name) and its domain."""

    __slots__ = ("index", "ls", "universe", "empty", "domain", "consistent")

    def __init__(self, ctx: DimContext) -> None:
        space = isl.Space.create_from_names(_ISL, set=list(ctx.names))
        self.index = {n: i for i, n in enumerate(ctx.names)}
        self.ls = isl.LocalSpace.from_space(space)
        self.universe = isl.Set.universe(space)
        self.empty = isl.Set.empty(space)
        self.domain = reduce(
            isl.Set.intersect, (_compile(self, c) for c in ctx.constraints()), self.universe
        )
        self.consistent = not self.domain.is_empty()


@lru_cache(maxsize=1024)
def _space(ctx: DimContext) -> _Space:
    return _Space(ctx)


def _aff(sp: _Space, e: Lin) -> isl.Aff:
    aff = isl.Aff.zero_on_domain(sp.ls)
    for name, c in e.coeffs:
        aff = aff.set_coefficient_val(_IN, sp.index[name], _val(c))
    return aff.set_constant_val(_val(e.constant))


def _nonneg(aff: isl.Aff) -> isl.Set:
    return isl.BasicSet.from_constraint(isl.Constraint.inequality_from_aff(aff)).to_set()


def _compile(sp: _Space, f: Formula, positive: bool = True) -> isl.Set:
    """The set of points where f holds (or, with positive=False, where it fails)."""
    match f:
        case Cmp(op, a, b):
            op = op if positive else _RELATIONS[op][0]
            e = a - b
            if op == "==":
                return _aff(sp, e).zero_basic_set().to_set()
            return reduce(
                isl.Set.union, [_nonneg(_aff(sp, s * e + k)) for s, k in _HALF_SPACES[op]]
            )
        case Divides(k, a):
            if k == 0:
                return sp.empty if positive else sp.universe
            rem = _aff(sp, a).mod_val(_val(abs(k)))
            return rem.zero_basic_set().to_set() if positive else _nonneg(rem.add_constant_val(-1))
        case ModZero():
            return _compile(sp, _lower_mod(f), positive)
        case Not(g):
            return _compile(sp, g, not positive)
        case And(parts) | Or(parts):
            meet = isinstance(f, And) == positive  # De Morgan when negated
            sets = (_compile(sp, g, positive) for g in parts)
            return reduce(
                isl.Set.intersect if meet else isl.Set.union,
                sets,
                sp.universe if meet else sp.empty,
            )
    raise TypeError(f"not a formula: {f!r}")


def _points(ctx: DimContext, f: Formula) -> tuple[_Space, isl.Set] | None:
    """The points of ctx where f holds, or None when there are none."""
    if unknown := sorted(dims_of(f) - set(ctx.names)):
        raise ValueError(f"`{f}` mentions unknown dimension `{unknown[0]}`")
    if _closed_truth(f) is False:  # the fast path of every trivially valid proof
        return None
    sp = _space(ctx)
    if not sp.consistent:
        return None
    points = sp.domain.intersect(_compile(sp, f))
    return None if points.is_empty() else (sp, points)


def _smallest(sp: _Space, points: isl.Set, names: list[str]) -> Assignment:
    """The point of the counterexample rule (module doc), on `names` (in context order)."""
    keep = {sp.index[n] for n in names}
    for i in reversed(range(len(sp.index))):
        if i not in keep:
            points = points.project_out(_SET, i, 1)
    total = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(points.get_space()))
    for i in range(len(names)):
        total = total.set_coefficient_val(_IN, i, _val(1))
    least = points.min_val(total)
    points = points.intersect(total.add_constant_val(least.neg()).zero_basic_set().to_set())
    values = [0] * len(names)
    for i in reversed(range(len(names))):
        v = points.dim_min_val(i)
        values[i] = v.to_python()
        points = points.fix_val(_SET, i, v)
    return Assignment(tuple(zip(names, values, strict=True)))


# --- the decisions ---------------------------------------------------------------------------


def is_satisfiable(ctx: DimContext, f: Formula) -> bool:
    """Whether some values of ctx's dimensions (within bounds and facts) make f true."""
    return _points(ctx, f) is not None


def witness(ctx: DimContext, f: Formula) -> Assignment | None:
    """The smallest values (module doc) of the dimensions f mentions that make it true."""
    found = _points(ctx, f)
    if found is None:
        return None
    mentioned = dims_of(f)
    return _smallest(*found, [n for n in ctx.names if n in mentioned])


def holds_for_all(ctx: DimContext, f: Formula) -> Counterexample | None:
    """None when f holds for every value of ctx's dimensions, else the smallest counterexample.

    Raises Undecidable for a formula outside Presburger arithmetic (`D % H == 0`).
    """
    return witness(ctx, Not(f))


def check_assignment(ctx: DimContext, values: Mapping[str, int]) -> Violation | None:
    """The first bound or fact of ctx that concrete values break (`T <= 1024` at T = 2000).

    `values` must give every dimension of ctx; extra names are ignored.
    """
    if missing := [n for n in ctx.names if n not in values]:
        raise ValueError(f"no value for dimension{'s' * (len(missing) > 1)} {', '.join(missing)}")
    for c in ctx.constraints():
        if not evaluate(c, values):
            mentioned = dims_of(c)
            return Violation(
                c, Assignment(tuple((n, values[n]) for n in ctx.names if n in mentioned))
            )
    return None
