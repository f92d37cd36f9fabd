"""The primitives of Presk: the registry every stage keys its tables by, and their typing.

A primitive is declared once here (DESIGN §3) with its regularity class in each operand
and its effect; its shape rule is in `core_rules`, which `type_rules` applies to a call. Later stages keep their own tables (MPFR
evaluation, adjoints, loop nests, C, PyTorch) keyed by the same names, each with a test
that it covers `PRIMITIVES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from presk_syntax.diagnostics import Label
from presk_syntax.span import Span

from presk_types.core_rules import PRIMITIVE_SHAPE_RULES
from presk_types.operands import Context, Operands, Signature, Where
from presk_types.ops import OPS, Kind, Op  # noqa: F401  (the operation set, re-exported)
from presk_types.presburger import Formula, Lin
from presk_types.shapes import Lengths, err
from presk_types.types import Type


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
        Primitive(
            "compare",
            "ℝ[s] < ℝ[t], idx[n][s] == idx[m][t] (and == != <= > >=) -> bool[broadcast(s, t)]",
            (D,),
        ),
        Primitive("select", "select(bool[c], ℝ[s], ℝ[t]) -> ℝ[broadcast(c, s, t)]", (D, S, S)),
        # indices
        Primitive("iota", "iota(n: T) -> idx[T][n: T]  (0, 1, …, T - 1)", (S,)),
        # windows of an axis (issue 29): a slice `x[a: i .. j]` and its adjoint, padding
        Primitive("crop", "x[a: i .. j] of ℝ[s, a: n] -> ℝ[s, a: j - i]  (0 <= i <= j <= n)", (S,)),
        Primitive(
            "pad", "pad(ℝ[s, a: n][, ℝ[]], axis a, before: i, after: j) -> ℝ[s, a: i + n + j]", (S,)
        ),
        Primitive("real", "real(idx[n][s], bool[s], f64 or nat) -> ℝ[s]", (S,)),
        Primitive("argmax", "argmax([axis a,] ℝ[s, a: n]) -> idx[n][s]", (D,)),
        Primitive("one_hot", "one_hot(idx[n][s]) -> ℝ[s, n]", (D,)),
        Primitive("embed", "embed(ℝ[n, t], idx[n][s]) -> ℝ[s, t]", (S, D)),
        Primitive("take", "take(axis a, ℝ[s, a: n], idx[n][s]) -> ℝ[s]", (S, D)),
        Primitive(
            "top_k",
            "top_k(axis a, ℝ[s, a: n], k: K) -> (ℝ[s, a: K], idx[n][s, a: K])  (largest first)",
            (D,),
        ),
        # reshaping by name
        Primitive("merge", "merge(axis a, axis b, ℝ[s, a: m, b: n]) -> ℝ[s, m*n]", (S,)),
        Primitive("split", "split(axis a, ℝ[s, a: m*n], x: m, y: n) -> ℝ[s, x: m, y: n]", (S,)),
        # randomness
        Primitive("sample", "sample(key, ℝ[s, n]) -> idx[n][s]  uses Rand", (S, D), "Rand"),
        Primitive("split_key", "split_key(key) -> (key, key)", (S,)),
        Primitive("uniform", "uniform(key, n: T, …) -> ℝ[n: T, …]  in [0, 1)", (S,), "Rand"),
        Primitive("normal", "normal(key, n: T, …) -> ℝ[n: T, …]  standard normal", (S,), "Rand"),
        Primitive(
            "bernoulli", "bernoulli(key, ℝ[], n: T, …) -> ℝ[n: T, …]  0 or 1", (S, D), "Rand"
        ),
        Primitive("zeros", "zeros(n: T, …) -> ℝ[n: T, …]", (S,)),
        Primitive("ones", "ones(n: T, …) -> ℝ[n: T, …]", (S,)),
        Primitive("pi", "π -> ℝ[]  (also pi: a constant, not called)", (S,)),
        # differentiation: the identity, a constant for `grad` (its adjoint is zero)
        Primitive("stop_grad", "stop_grad(ℝ[s]) -> ℝ[s]", (S,)),
        # differentiation
        Primitive("grad", "grad(f)(θ) -> the type of θ", (S,)),
    ]
}
"""Every primitive, by name. Operators map to their primitive: `+` is `add`, `·` is `dot`."""

OPERATORS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "^": "pow", "·": "dot"}
COMPARISONS = {"==", "!=", "<", "<=", ">", ">="}

# The names that are the constant π (a value, not a call: check.py resolves them).
CONSTANT_NAMES = {"π": "pi", "pi": "pi"}

# The calls the checker writes as the primitives they are made of (issue 29): presk_types.conv,
# presk_types.scan, presk_types.topk (its values beside its indices). Like CALL_NAMES, a name of the program hides them.
CHECKER_FORMS = frozenset({"conv", "scan", "top_k"})

# The names a program calls that are not the primitive's registry name.
CALL_NAMES = {
    name: name
    for name in PRIMITIVES
    if name
    not in {"add", "sub", "mul", "div", "pow", "neg", "dot", "ein", "compare", "maximum", "minimum"}
    | {"grad", "pi", "crop"}
}


@dataclass
class Args:
    """The arguments of a primitive's call, typed, with their spans."""

    name: str
    span: Span
    lengths: Lengths
    positional: list[tuple[Type, Span]] = field(default_factory=list)
    axes: list[tuple[str, Span]] = field(default_factory=list)
    keywords: dict[str, tuple[Type, Span]] = field(default_factory=dict)
    shapes: list[tuple[str, Lin, Span]] = field(default_factory=list)

    def operands(self) -> Operands:
        return Operands(
            self.name,
            tuple(t for t, _ in self.positional),
            axes=tuple(n for n, _ in self.axes),
            keywords=tuple((k, t) for k, (t, _) in self.keywords.items()),
            shapes=tuple((n, length) for n, length, _ in self.shapes),
        )

    def context(self) -> CheckContext:
        spans: dict[tuple[str, object], Span] = {}
        spans.update((("operand", i), s) for i, (_, s) in enumerate(self.positional))
        spans.update((("axis", i), s) for i, (_, s) in enumerate(self.axes))
        spans.update((("keyword", k), s) for k, (_, s) in self.keywords.items())
        spans.update((("shape", i), s) for i, (_, _, s) in enumerate(self.shapes))
        return CheckContext(self.lengths, self.span, spans)


class CheckContext(Context):
    """The checker's context of a rule: lengths equal for all values of the dimensions
    (with the counterexample otherwise), errors pointed at the source."""

    def __init__(
        self,
        lengths: Lengths,
        span: Span,
        spans: dict[tuple[str, object], Span] | None = None,
        functions: dict[str, Signature] | None = None,
    ) -> None:
        self.lengths = lengths
        self.whole = span
        self.spans = spans or {}
        self.functions = functions or {}

    def require_equal(self, a: Lin, b: Lin, span: Span | None) -> None:
        self.lengths.require_equal(a, b, span if span is not None else self.whole)

    def span(self, where: Where = None) -> Span:
        return self.spans.get(where, self.whole) if where is not None else self.whole

    def require_holds(self, f: Formula, code: str, message: str, label: str, where: Where) -> None:
        """f for every value of the dimensions, else `code` with the smallest counterexample."""
        at = self.lengths.fails(f)
        if at is not None:
            raise err(code, message, Label(self.span(where), f"{label} for {at}" if at else label))

    def signature(self, name: str) -> Signature:
        return self.functions[name]


def _by_name(name: str) -> Callable[[Args], Type]:
    rule = PRIMITIVE_SHAPE_RULES[name]

    def typed(args: Args) -> Type:
        return rule(args.operands(), args.context())

    typed.__name__ = typed.__qualname__ = f"type_{name}"
    return typed


type_rules: dict[str, Callable[[Args], Type]] = {name: _by_name(name) for name in CALL_NAMES}
"""Typing of the primitives called by name: each the rule of
`core_rules.PRIMITIVE_SHAPE_RULES`, its errors pointed at the call's arguments. Operators, `ein` and `grad` are typed by the
checker (check.py, calls.py) with the same rules, since their operands are expressions."""
