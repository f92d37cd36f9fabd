"""Decide properties of dimensions for all their values: Presburger arithmetic with islpy.

Lengths are affine expressions over the dimensions in scope (`Lin`: `4*D`, `D + 1`, `In`).
A `DimContext` lists those dimensions in declaration order, each a natural number (>= 0)
with optional bounds (`dim T <= 1024`, `dim T >= 2`), and may assume facts (formulas). Formulas
compare lengths (`Eq`, `Ne`, `Le`, `Lt`, `Ge`, `Gt`, each building a `Cmp`), state
divisibility (`Divides(k, a)`: `a % k == 0`; `ModZero(a, m)`: `a % m == 0`) and combine with
`And`, `Or`, `Not`. `holds_for_all` proves a formula for every value of the context or returns
a counterexample; `is_satisfiable` and `witness` ask the dual question; `check_assignment`
tests concrete values (`--dim T=2000`) against the context's bounds and facts.

Semantics of `%`: `a % m == 0` holds when m != 0 and m divides a; a modulus of zero is
undefined, so the property is false there. `a % m == 0` with both sides symbolic is not
Presburger: with a constant modulus it is `Divides`; with a constant left side `c` it says
that m is one of the divisors of c (enumerated); otherwise the decision raises `Undecidable`.

The counterexample rule (also the rule for witnesses). Among the points of the context that
violate the formula, looked at on the dimensions the formula mentions (listed in the
context's order), we return the one with the smallest sum of values; ties go to the point
whose last-declared dimension is smallest, then the one before it, and so on back to the
first. For `In == Out` over `{In Out : dim}` the violating points of sum 1 are (1, 0) and
(0, 1); the last dimension, Out, is smaller in the first, hence `In = 1, Out = 0`, as the
tutorial prints. The other dimensions are existentially quantified: some values of them,
within the bounds and facts, complete the point.

The isl space and domain of a context are built once and cached; isl runs in islpy's
process-wide default context, so these functions are not meant for concurrent threads.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache, reduce
from math import isqrt


class _Islpy:
    """islpy, imported when a formula is first decided (not by the IR's types, which only
    print and substitute lengths): the name `isl` is the module from then on."""

    def __getattr__(self, name: str) -> object:
        import islpy

        globals()["isl"] = islpy
        return getattr(islpy, name)


isl = _Islpy()


class Undecidable(ValueError):
    """A formula outside Presburger arithmetic, e.g. `D % H == 0` with both sides symbolic."""


# --- lengths ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lin:
    """An affine expression: the sum of coefficient*name, plus a constant.

    Normalized on creation: one term per name, sorted by name, no zero coefficient.
    """

    coeffs: tuple[tuple[str, int], ...] = ()
    constant: int = 0

    def __post_init__(self) -> None:
        merged: dict[str, int] = {}
        for name, c in self.coeffs:
            merged[name] = merged.get(name, 0) + c
        object.__setattr__(self, "coeffs", _normal(merged))

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
        merged = dict(self.coeffs)
        for n, c in o.coeffs:
            merged[n] = merged.get(n, 0) + c
        return _lin(_normal(merged), self.constant + o.constant)

    __radd__ = __add__

    def __neg__(self) -> Lin:
        return self * -1

    def __sub__(self, other: Lin | int) -> Lin:
        return self + -as_lin(other)

    def __rsub__(self, other: Lin | int) -> Lin:
        return as_lin(other) - self

    def __mul__(self, other: Lin | int) -> Lin:
        if isinstance(other, Lin):
            if not other.is_const and not self.is_const:
                raise ValueError(f"`({self}) * ({other})` is not linear")
            return other * self.constant if self.is_const else self * other.constant
        coeffs = tuple((n, c * other) for n, c in self.coeffs) if other else ()
        return _lin(coeffs, self.constant * other)

    __rmul__ = __mul__

    def __str__(self) -> str:
        terms = [(c, n) for n, c in self.coeffs]
        if self.constant or not terms:
            terms.append((self.constant, ""))
        out = []
        for i, (c, n) in enumerate(terms):
            body = str(abs(c)) if not n else n if abs(c) == 1 else f"{abs(c)}*{n}"
            sign = ("-" if c < 0 else "") if i == 0 else (" - " if c < 0 else " + ")
            out.append(sign + body)
        return "".join(out)


def _normal(merged: dict[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(kv for kv in merged.items() if kv[1]))


def _lin(coeffs: tuple[tuple[str, int], ...], constant: int) -> Lin:
    """A Lin from normalized terms, skipping __post_init__ (arithmetic is the hot path)."""
    e = object.__new__(Lin)
    object.__setattr__(e, "coeffs", coeffs)
    object.__setattr__(e, "constant", constant)
    return e


def as_lin(x: Lin | int) -> Lin:
    return x if isinstance(x, Lin) else _lin((), x)


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


def _relation(name: str, op: str) -> Callable[[Lin | int, Lin | int], Cmp]:
    def build(a: Lin | int, b: Lin | int) -> Cmp:
        return Cmp(op, as_lin(a), as_lin(b))

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"`a {op} b`"
    return build


Eq, Ne, Le = _relation("Eq", "=="), _relation("Ne", "!="), _relation("Le", "<=")
Lt, Ge, Gt = _relation("Lt", "<"), _relation("Ge", ">="), _relation("Gt", ">")


@dataclass(frozen=True, slots=True)
class Divides:
    """`a % k == 0` for a constant k (false for k == 0: a modulus of zero is undefined)."""

    k: int
    a: Lin

    def __str__(self) -> str:
        return f"{_operand(self.a)} % {_operand(Lin.const(self.k))} == 0"


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


def _trivially_true(f: Formula) -> bool:
    """A cheap sufficient test, before isl: `4*D == D + D + D + D`, `D + 1 > D`."""
    match f:
        case Cmp(op, a, b):
            d = a - b
            return d.is_const and _RELATIONS[op][1](d.constant, 0)
        case And(parts):
            return all(map(_trivially_true, parts))
        case Or(parts):
            return any(map(_trivially_true, parts))
    return not dims_of(f) and evaluate(f, {})


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
    """A natural-number dimension, `dim T`, `dim T <= upper`, `dim T >= lower` or both."""

    name: str
    upper: int | None = None
    lower: int = 0


@dataclass(frozen=True, slots=True)
class DimContext:
    """The dimensions in scope, in declaration order, and the facts assumed about them."""

    dims: tuple[Dim, ...] = ()
    facts: tuple[Formula, ...] = ()

    def __post_init__(self) -> None:
        names = self.names
        if len(set(names)) != len(names):
            raise ValueError(f"a dimension is declared twice in {', '.join(names)}")
        for fact in self.facts:
            _check_known(self, fact)

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
        """Each dimension's bounds (`T >= 0` or `T >= 2`, `T <= 1024`), then the facts."""
        for d in self.dims:
            yield Ge(Lin.var(d.name), max(d.lower, 0))
            if d.upper is not None:
                yield Le(Lin.var(d.name), d.upper)
        yield from self.facts


def _check_known(ctx: DimContext, f: Formula) -> None:
    if unknown := sorted(dims_of(f) - set(ctx.names)):
        raise ValueError(f"`{f}` mentions `{unknown[0]}`, which is not a dimension in scope")


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
        return isl.Val.int_from_si(isl.DEFAULT_CONTEXT, k)
    return isl.Val.read_from_str(isl.DEFAULT_CONTEXT, str(k))


class _Space:
    """A context in isl: one unnamed set dimension per name (any identifier), and the domain."""

    __slots__ = ("index", "ls", "universe", "empty", "domain")

    def __init__(self, ctx: DimContext) -> None:
        space = isl.Space.set_alloc(isl.DEFAULT_CONTEXT, 0, len(ctx.names))
        self.index = {n: i for i, n in enumerate(ctx.names)}
        self.ls = isl.LocalSpace.from_space(space)
        self.universe = isl.Set.universe(space)
        self.empty = isl.Set.empty(space)
        constraints = (_compile(self, c) for c in ctx.constraints())
        self.domain = reduce(isl.Set.intersect, constraints, self.universe).coalesce()


@lru_cache(maxsize=1024)
def _space(ctx: DimContext) -> _Space:
    return _Space(ctx)


def _aff(sp: _Space, e: Lin) -> isl.Aff:
    aff = isl.Aff.zero_on_domain(sp.ls)
    for name, c in e.coeffs:
        aff = aff.set_coefficient_val(isl.dim_type.in_, sp.index[name], _val(c))
    return aff.set_constant_val(_val(e.constant))


def _nonneg(aff: isl.Aff) -> isl.Set:
    return isl.BasicSet.from_constraint(isl.Constraint.inequality_from_aff(aff)).to_set()


def _compile(sp: _Space, f: Formula, positive: bool = True) -> isl.Set:
    """The set of points where f holds (with positive=False: where it fails)."""
    match f:
        case Cmp(op, a, b):
            op = op if positive else _RELATIONS[op][0]
            e = a - b
            if op == "==":
                return _aff(sp, e).zero_basic_set().to_set()
            halves = [_nonneg(_aff(sp, s * e + k)) for s, k in _HALF_SPACES[op]]
            return reduce(isl.Set.union, halves)
        case Divides(k, a):
            if k == 0:
                return sp.empty if positive else sp.universe
            rem = _aff(sp, a).mod_val(_val(abs(k)))
            return rem.zero_basic_set().to_set() if positive else _nonneg(rem.add_constant_val(-1))
        case ModZero():
            return _compile(sp, _lower_mod(f), positive)
        case Not(g):
            return _compile(sp, g, not positive)
        case And(parts) | Or(parts) if positive:
            meet = isinstance(f, And)
            sets = (_compile(sp, g) for g in parts)
            unit = sp.universe if meet else sp.empty
            return reduce(isl.Set.intersect if meet else isl.Set.union, sets, unit)
        case And() | Or():  # a complement: De Morgan would multiply the disjuncts of an Or
            return sp.universe.subtract(_compile(sp, f))
    raise TypeError(f"not a formula: {f!r}")


def _points(ctx: DimContext, f: Formula, holds: bool) -> isl.Set | None:
    """The points of ctx where f holds (or fails, with holds=False), or None if there are none."""
    sp = _space(ctx)
    if holds or isinstance(f, Cmp | Divides):  # an atom's negation is as cheap as the atom
        points = sp.domain.intersect(_compile(sp, f, holds))
    else:  # "for all x in D, f" is D minus f empty: cheaper than a complement
        points = sp.domain.subtract(_compile(sp, f))
    return None if points.is_empty() else points


def _smallest(ctx: DimContext, points: isl.Set, f: Formula) -> Assignment:
    """The point the counterexample rule chooses (module doc), on the dimensions f mentions."""
    mentioned, all_names = dims_of(f), ctx.names
    names = [n for n in all_names if n in mentioned]
    for i in reversed(range(len(all_names))):
        if all_names[i] not in mentioned:
            points = points.project_out(isl.dim_type.set, i, 1)
    total = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(points.get_space()))
    for i in range(len(names)):
        total = total.set_coefficient_val(isl.dim_type.in_, i, _val(1))
    least = points.min_val(total)
    points = points.intersect(total.add_constant_val(least.neg()).zero_basic_set().to_set())
    values = [0] * len(names)
    for i in reversed(range(len(names))):
        v = points.dim_min_val(i)
        values[i] = v.to_python()
        points = points.fix_val(isl.dim_type.set, i, v)
    return Assignment(tuple(zip(names, values, strict=True)))


# --- the decisions ---------------------------------------------------------------------------


def is_satisfiable(ctx: DimContext, f: Formula) -> bool:
    """Whether some values of ctx's dimensions, within its bounds and facts, make f true."""
    _check_known(ctx, f)
    return _points(ctx, f, True) is not None


def witness(ctx: DimContext, f: Formula) -> Assignment | None:
    """The smallest values (module doc) of the dimensions f mentions that make f true."""
    _check_known(ctx, f)
    points = _points(ctx, f, True)
    return None if points is None else _smallest(ctx, points, f)


def holds_for_all(ctx: DimContext, f: Formula) -> Counterexample | None:
    """None when f holds for all values of ctx's dimensions, else the smallest counterexample.

    Raises Undecidable for a formula outside Presburger arithmetic (`D % H == 0`).
    """
    _check_known(ctx, f)
    if _trivially_true(f):
        return None
    points = _points(ctx, f, False)
    return None if points is None else _smallest(ctx, points, f)


def check_assignment(ctx: DimContext, values: Mapping[str, int]) -> Violation | None:
    """The first bound or fact of ctx that concrete values break (`T <= 1024` at T = 2000).

    `values` must give every dimension of ctx; other names are ignored.
    """
    if missing := [n for n in ctx.names if n not in values]:
        raise ValueError(f"no value for dimension{'s' * (len(missing) > 1)} {', '.join(missing)}")
    for c in ctx.constraints():
        if not evaluate(c, values):
            mentioned = dims_of(c)
            at = tuple((n, values[n]) for n in ctx.names if n in mentioned)
            return Violation(c, Assignment(at))
    return None
