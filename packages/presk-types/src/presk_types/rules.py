"""The primitives of Presk: the registry every stage keys its tables by, and their typing.

A primitive is declared once here (DESIGN §3) with its regularity class in each operand
and its effect; `type_rules` gives its typing. Later stages keep their own tables (MPFR
evaluation, adjoints, loop nests, C, PyTorch) keyed by the same names, each with a test
that it covers `PRIMITIVES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from presk_syntax.diagnostics import Label
from presk_syntax.span import Span

from presk_types.presburger import Lin
from presk_types.shapes import Lengths, broadcast, err
from presk_types.types import (
    SCALAR,
    AxisT,
    Bool,
    Idx,
    KeyT,
    Machine,
    Real,
    Shape,
    TupleT,
    Type,
)


class Cls(IntEnum):
    """Regularity classes, from the smoothest: C∞, C⁰⁺ (continuous, a.e. differentiable), Disc."""

    SMOOTH = 0
    KINK = 1
    DISC = 2

    def __str__(self) -> str:
        return ("C∞", "C⁰⁺", "Disc")[self]


@dataclass(frozen=True, slots=True)
class Primitive:
    name: str
    signature: str  # for docs/language.md
    classes: tuple[Cls, ...]  # per positional operand; the last repeats
    effect: str | None = None

    def cls(self, i: int) -> Cls:
        return self.classes[min(i, len(self.classes) - 1)] if self.classes else Cls.SMOOTH


S, K, D = Cls.SMOOTH, Cls.KINK, Cls.DISC

PRIMITIVES: dict[str, Primitive] = {
    p.name: p
    for p in [
        # arithmetic (the operators + - * / ^, unary -, and · are these)
        Primitive("add", "ℝ[s] + ℝ[t] -> ℝ[broadcast(s, t)]", (S,)),
        Primitive("sub", "ℝ[s] - ℝ[t] -> ℝ[broadcast(s, t)]", (S,)),
        Primitive("mul", "ℝ[s] * ℝ[t] -> ℝ[broadcast(s, t)]", (S,)),
        Primitive("div", "ℝ[s] / ℝ[t] -> ℝ[broadcast(s, t)]", (S,)),
        Primitive("pow", "ℝ[s] ^ ℝ[] -> ℝ[s]", (S,)),
        Primitive("neg", "-ℝ[s] -> ℝ[s]", (S,)),
        Primitive("dot", "ℝ[..., n] · ℝ[n, t] -> ℝ[..., t]", (S,)),
        Primitive("ein", "ein[out](ℝ[s] * ℝ[t]) -> ℝ[out]", (S,)),
        # elementwise functions
        Primitive("sqrt", "sqrt(ℝ[s]) -> ℝ[s]", (S,)),
        Primitive("exp", "exp(ℝ[s]) -> ℝ[s]", (S,)),
        Primitive("log", "log(ℝ[s]) -> ℝ[s]", (S,)),
        Primitive("tanh", "tanh(ℝ[s]) -> ℝ[s]", (S,)),
        Primitive("sigmoid", "sigmoid(ℝ[s]) -> ℝ[s]", (S,)),
        Primitive("gelu", "gelu(ℝ[s]) -> ℝ[s]  (x·Φ(x))", (S,)),
        Primitive("silu", "silu(ℝ[s]) -> ℝ[s]  (x·σ(x))", (S,)),
        Primitive("sin", "sin(ℝ[s]) -> ℝ[s]", (S,)),
        Primitive("cos", "cos(ℝ[s]) -> ℝ[s]", (S,)),
        Primitive("relu", "relu(ℝ[s]) -> ℝ[s]", (K,)),
        Primitive("abs", "abs(ℝ[s]) -> ℝ[s]", (K,)),
        Primitive("maximum", "max(ℝ[s], ℝ[t]) -> ℝ[broadcast(s, t)]", (K,)),
        Primitive("minimum", "min(ℝ[s], ℝ[t]) -> ℝ[broadcast(s, t)]", (K,)),
        # reductions over a named axis (over everything without `axis`)
        Primitive("sum", "sum([axis a,] ℝ[s]) -> ℝ[s without a]", (S,)),
        Primitive("mean", "mean([axis a,] ℝ[s]) -> ℝ[s without a]", (S,)),
        Primitive("max", "max([axis a,] ℝ[s]) -> ℝ[s without a]", (K,)),
        Primitive("min", "min([axis a,] ℝ[s]) -> ℝ[s without a]", (K,)),
        Primitive("softmax", "softmax(axis a, ℝ[s][, where = bool[t]]) -> ℝ[s]", (S, D)),
        Primitive("log_softmax", "log_softmax(axis a, ℝ[s][, where = bool[t]]) -> ℝ[s]", (S, D)),
        # masks, comparisons, selection
        Primitive("causal_mask", "causal_mask(n: T) -> bool[n: T, n2: T]", (S,)),
        Primitive("compare", "ℝ[s] < ℝ[t] (and == != <= > >=) -> bool[broadcast(s, t)]", (D,)),
        Primitive("select", "select(bool[c], ℝ[s], ℝ[t]) -> ℝ[broadcast(c, s, t)]", (D, S, S)),
        # indices
        Primitive("real", "real(idx[n][s], bool[s], f64 or nat) -> ℝ[s]", (S,)),
        Primitive("argmax", "argmax([axis a,] ℝ[s, a: n]) -> idx[n][s]", (D,)),
        Primitive("one_hot", "one_hot(idx[n][s]) -> ℝ[s, n]", (D,)),
        Primitive("embed", "embed(ℝ[n, t], idx[n][s]) -> ℝ[s, t]", (S, D)),
        Primitive("take", "take(axis a, ℝ[s, a: n], idx[n][s]) -> ℝ[s]", (S, D)),
        # reshaping by name
        Primitive("merge", "merge(axis a, axis b, ℝ[s, a: m, b: n]) -> ℝ[s, m*n]", (S,)),
        Primitive("split", "split(axis a, ℝ[s, a: m*n], x: m, y: n) -> ℝ[s, x: m, y: n]", (S,)),
        # randomness
        Primitive("sample", "sample(key, ℝ[s, n]) -> idx[n][s]  uses Rand", (S, D), "Rand"),
        Primitive("split_key", "split_key(key) -> (key, key)", (S,)),
        # differentiation
        Primitive("grad", "grad(f)(θ) -> the type of θ", (S,)),
    ]
}
"""Every primitive, by name. Operators map to their primitive: `+` is `add`, `·` is `dot`."""

OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "^": "pow", "·": "dot"}
COMPARISONS = {"==", "!=", "<", "<=", ">", ">="}

# The names a program calls that are not the primitive's registry name.
CALL_NAMES = {
    name: name
    for name in PRIMITIVES
    if name
    not in {"add", "sub", "mul", "div", "pow", "neg", "dot", "ein", "compare", "maximum", "minimum"}
    | {"grad"}
}


@dataclass
class Args:
    """The arguments of a primitive's call, typed."""

    name: str
    span: Span
    lengths: Lengths
    positional: list[tuple[Type, Span]] = field(default_factory=list)
    axes: list[tuple[str, Span]] = field(default_factory=list)
    keywords: dict[str, tuple[Type, Span]] = field(default_factory=dict)
    shapes: list[tuple[str, Lin, Span]] = field(default_factory=list)

    def arity(
        self,
        n: int,
        *,
        axes: tuple[int, ...] = (0,),
        keywords: tuple[str, ...] = (),
        shapes: bool = False,
    ) -> None:
        bad = (
            len(self.positional) != n
            or len(self.axes) not in axes
            or any(k not in keywords for k in self.keywords)
            or (self.shapes and not shapes)
        )
        if bad:
            raise err(
                "E2004",
                f"wrong arguments for `{self.name}`",
                Label(self.span, f"expected {PRIMITIVES[self.name].signature}"),
            )

    def real(self, i: int) -> Real:
        t, span = self.positional[i]
        if not isinstance(t, Real):
            raise err(
                "E2009",
                f"`{self.name}` takes a real tensor, and this is `{t}`",
                Label(span, f"`{t}`"),
                help="`real(…)` injects indices and hyperparameters into ℝ",
            )
        return t


def _remove_axis(shape: Shape, name: str, args: Args, span: Span) -> tuple[Shape, AxisT]:
    i = shape.axis(name)
    if i is None:
        raise err(
            "E2005",
            f"no axis `{name}` in `ℝ{shape}`",
            Label(span, f"the operand's axes are {', '.join(shape.names()) or 'not named'}"),
        )
    return Shape(shape.prefix, shape.axes[:i] + shape.axes[i + 1 :]), shape.axes[i]


def _elementwise(args: Args) -> Type:
    args.arity(1)
    return args.real(0)


def _reduce(args: Args) -> Type:
    args.arity(1, axes=(0, 1))
    x = args.real(0)
    if not args.axes:
        return Real(SCALAR)
    name, span = args.axes[0]
    return Real(_remove_axis(x.shape, name, args, span)[0])


def _max_min(args: Args) -> Type:
    if len(args.positional) == 2 and not args.axes:
        a, b = args.real(0), args.real(1)
        shape = broadcast(a.shape, b.shape, args.lengths, args.span)
        if shape is None:
            raise err("E2003", f"cannot broadcast `{a}` with `{b}`", Label(args.span, ""))
        return Real(shape)
    return _reduce(args)


def _softmax(args: Args) -> Type:
    args.arity(1, axes=(1,), keywords=("where",))
    x = args.real(0)
    name, span = args.axes[0]
    _remove_axis(x.shape, name, args, span)
    if "where" in args.keywords:
        mask, mspan = args.keywords["where"]
        if (
            not isinstance(mask, Bool)
            or broadcast(mask.shape, x.shape, args.lengths, mspan) is None
        ):
            raise err(
                "E2008",
                f"`where` must be a mask of truth values that broadcasts to `{x}`",
                Label(mspan, f"this is `{mask}`"),
            )
    return x


def _causal_mask(args: Args) -> Type:
    args.arity(0, shapes=True)
    if len(args.shapes) != 1:
        raise err(
            "E2004", "`causal_mask` takes one axis: `causal_mask(seq: T)`", Label(args.span, "")
        )
    name, length, _ = args.shapes[0]
    return Bool(Shape(False, (AxisT(name, length), AxisT(f"{name}2", length))))


def _select(args: Args) -> Type:
    args.arity(3)
    c, cspan = args.positional[0]
    if not isinstance(c, Bool):
        raise err("E2008", f"`select` takes a mask first, and this is `{c}`", Label(cspan, ""))
    a, b = args.real(1), args.real(2)
    shape = broadcast(a.shape, b.shape, args.lengths, args.span)
    shape = None if shape is None else broadcast(c.shape, shape, args.lengths, args.span)
    if shape is None:
        raise err("E2003", f"cannot broadcast `{c}`, `{a}` and `{b}`", Label(args.span, ""))
    return Real(shape)


def _real(args: Args) -> Type:
    args.arity(1)
    t, span = args.positional[0]
    match t:
        case Idx(_, shape) | Bool(shape) | Real(shape):
            return Real(shape)
        case Machine():
            return Real(SCALAR)
    raise err("E2008", f"`real` cannot inject `{t}` into ℝ", Label(span, ""))


def _last_or_named(shape: Shape, args: Args) -> tuple[Shape, AxisT]:
    if args.axes:
        name, span = args.axes[0]
        return _remove_axis(shape, name, args, span)
    if not shape.axes:
        raise err(
            "E2005", f"`{args.name}` needs an axis, and `ℝ{shape}` has none", Label(args.span, "")
        )
    return Shape(shape.prefix, shape.axes[:-1]), shape.axes[-1]


def _argmax(args: Args) -> Type:
    args.arity(1, axes=(0, 1))
    rest, axis = _last_or_named(args.real(0).shape, args)
    return Idx(axis.length, rest)


def _sample(args: Args) -> Type:
    args.arity(2)
    k, kspan = args.positional[0]
    if not isinstance(k, KeyT):
        raise err("E2008", f"`sample` takes a key first, and this is `{k}`", Label(kspan, ""))
    rest, axis = _last_or_named(args.real(1).shape, args)
    return Idx(axis.length, rest)


def _idx(args: Args, i: int) -> Idx:
    t, span = args.positional[i]
    if not isinstance(t, Idx):
        raise err(
            "E2009", f"`{args.name}` takes indices here, and this is `{t}`", Label(span, f"`{t}`")
        )
    return t


def _one_hot(args: Args) -> Type:
    args.arity(1)
    ids = _idx(args, 0)
    return Real(Shape(ids.shape.prefix, ids.shape.axes + (AxisT(None, ids.bound),)))


def _embed(args: Args) -> Type:
    args.arity(2)
    table, ids = args.real(0), _idx(args, 1)
    if not table.shape.axes or table.shape.prefix:
        raise err("E2008", f"`embed` takes a table, and this is `{table}`", Label(args.span, ""))
    args.lengths.require_equal(table.shape.axes[0].length, ids.bound, args.span)
    return Real(Shape(ids.shape.prefix, ids.shape.axes + table.shape.axes[1:]))


def _take(args: Args) -> Type:
    args.arity(2, axes=(1,))
    x, ids = args.real(0), _idx(args, 1)
    rest, axis = _last_or_named(x.shape, args)
    args.lengths.require_equal(axis.length, ids.bound, args.span)
    shape = broadcast(rest, ids.shape, args.lengths, args.span)
    if shape is None:
        raise err("E2003", f"cannot align `ℝ{rest}` with the indices `{ids}`", Label(args.span, ""))
    return Real(shape)


def _merge(args: Args) -> Type:
    args.arity(1, axes=(2,))
    x = args.real(0)
    (a, aspan), (b, bspan) = args.axes
    i, j = x.shape.axis(a), x.shape.axis(b)
    if i is None or j is None or j != i + 1:
        raise err(
            "E2005",
            f"`merge` joins two adjacent axes, and `{a}`, `{b}` are not adjacent in `{x}`",
            Label(args.span, ""),
        )
    la, lb = x.shape.axes[i].length, x.shape.axes[j].length
    if not (la.is_const or lb.is_const):
        raise err("E2002", f"`{la}*{lb}` is not an affine length", Label(args.span, ""))
    merged = la * lb.constant if lb.is_const else lb * la.constant
    axes = x.shape.axes[:i] + (AxisT(None, merged),) + x.shape.axes[j + 1 :]
    return Real(Shape(x.shape.prefix, axes))


def _split(args: Args) -> Type:
    args.arity(1, axes=(1,), shapes=True)
    x = args.real(0)
    name, span = args.axes[0]
    i = x.shape.axis(name)
    if i is None or len(args.shapes) != 2:
        raise err(
            "E2005",
            f"`split(axis {name}, x, a: m, b: n)` needs the axis and two parts",
            Label(args.span, ""),
        )
    (na, la, _), (nb, lb, _) = args.shapes
    if not (la.is_const or lb.is_const):
        raise err("E2002", f"`{la}*{lb}` is not an affine length", Label(args.span, ""))
    product = la * lb.constant if lb.is_const else lb * la.constant
    args.lengths.require_equal(x.shape.axes[i].length, product, args.span)
    axes = x.shape.axes[:i] + (AxisT(na, la), AxisT(nb, lb)) + x.shape.axes[i + 1 :]
    return Real(Shape(x.shape.prefix, axes))


def _split_key(args: Args) -> Type:
    args.arity(1)
    return TupleT((KeyT(), KeyT()))


type_rules: dict[str, Callable[[Args], Type]] = {
    "sqrt": _elementwise,
    "exp": _elementwise,
    "log": _elementwise,
    "tanh": _elementwise,
    "sigmoid": _elementwise,
    "gelu": _elementwise,
    "silu": _elementwise,
    "sin": _elementwise,
    "cos": _elementwise,
    "relu": _elementwise,
    "abs": _elementwise,
    "sum": _reduce,
    "mean": _reduce,
    "max": _max_min,
    "min": _max_min,
    "softmax": _softmax,
    "log_softmax": _softmax,
    "causal_mask": _causal_mask,
    "select": _select,
    "real": _real,
    "argmax": _argmax,
    "one_hot": _one_hot,
    "embed": _embed,
    "take": _take,
    "merge": _merge,
    "split": _split,
    "sample": _sample,
    "split_key": _split_key,
}
"""Typing of the primitives called by name; operators, `ein` and `grad` are typed by the
checker itself (check.py), since their operands are expressions, not values."""
