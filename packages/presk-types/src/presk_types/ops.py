"""The operation set of PSK-Core: every operation that can appear in a program, declared once
with its kind, its arity and its attributes' schema (re-exported by `rules.py`).

Three groups, one table (`OPS`):
- the primitives of the language (`rules.PRIMITIVES`, which a source program calls);
- the structural operations (`call`, `fold`, `field`, `record`, …), which lowering writes;
- the operations differentiation writes (`accum`, `sum_to`, `gelu_grad`, …), primitives of
  PSK-Core that no source program calls (docs/ir.md, "The operation set").

Every stage keys its table by these names, with a test that the table covers `OPS` (the
interpreter, the adjoints, the shape rules, later the loop nests and the C emitter). The
`Kind` is what loop-nest lowering, the C emitter and the error model dispatch on.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from presk_types.presburger import Lin


class Kind(Enum):
    """What an operation does to the elements of its operands."""

    ELEMENTWISE = "elementwise"  # each result element from the operands' elements at its place
    REDUCTION = "reduction"  # over an axis (or all): sums, means, extrema, softmax
    CONTRACTION = "contraction"  # a sum of products over shared axes: `dot`, `ein`
    GATHER_SCATTER = "gather/scatter"  # elements read or written at indices
    LAYOUT = "layout"  # the same elements on other axes: reshape, broadcast, a cast
    RANDOM = "random"  # keys and draws
    STRUCTURAL = "structural"  # calls of the program's functions
    TREE = "tree"  # parameter trees and tuples, their parts

    def __str__(self) -> str:
        return self.value


class Attr(Enum):
    """The type of an attribute's value."""

    NAME = "name"  # a str
    NAMES = "names"  # a tuple of str (axes, keys)
    INT = "int"
    BOOL = "bool"
    LIN = "length"  # an affine length (`Lin`)
    BINDINGS = "bindings"  # ((DIM, Lin), …): how a callee's dimensions bind
    SHAPES = "shapes"  # ((AXIS, Lin), …): named lengths
    ALIGN = "align"  # ((POS, …), …): where each operand's axes go among the result's
    POSITIONS = "positions"  # (POS, …): where one operand's axes go among the result's
    NAME_LISTS = "name lists"  # ((AXIS, …), …): each operand's axis names
    TEXT = "text"  # a number as written (an initializer's argument)

    def accepts(self, v: object) -> bool:
        match self:
            case Attr.NAME | Attr.TEXT:
                return isinstance(v, str)
            case Attr.NAMES:
                return isinstance(v, tuple) and all(isinstance(x, str) for x in v)
            case Attr.INT:
                return isinstance(v, int) and not isinstance(v, bool)
            case Attr.BOOL:
                return isinstance(v, bool)
            case Attr.LIN:
                return isinstance(v, Lin)
            case Attr.BINDINGS | Attr.SHAPES:
                return isinstance(v, tuple) and all(
                    isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)
                    and isinstance(p[1], Lin)
                    for p in v
                )  # fmt: skip
            case Attr.ALIGN:
                return isinstance(v, tuple) and all(
                    isinstance(p, tuple) and all(isinstance(i, int) for i in p) for p in v
                )
            case Attr.POSITIONS:
                return isinstance(v, tuple) and all(isinstance(i, int) for i in v)
            case Attr.NAME_LISTS:
                return isinstance(v, tuple) and all(
                    isinstance(p, tuple) and all(isinstance(n, str) for n in p) for p in v
                )
        return False


@dataclass(frozen=True, slots=True)
class Op:
    """An operation: its name, kind, arity (min, max operands; max None: any number), its
    attributes (name → type; `optional` those it may lack) and whether a source program
    calls it (a primitive of the language, in `rules.PRIMITIVES`)."""

    name: str
    kind: Kind
    arity: tuple[int, int | None]
    attrs: tuple[tuple[str, Attr], ...] = ()
    optional: frozenset[str] = frozenset()
    source: bool = False
    extra: Attr | None = None  # the type of attributes beyond `attrs` (an init's arguments)

    def check(self, n_args: int, attrs: tuple[tuple[str, object], ...]) -> str | None:
        """None if `n_args` operands and `attrs` fit the declaration, else what is wrong."""
        lo, hi = self.arity
        if n_args < lo or (hi is not None and n_args > hi):
            want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi is not None else f"{lo}+"
            return f"`{self.name}` takes {want} operands, not {n_args}"
        schema = dict(self.attrs)
        given = dict(attrs)
        for name, t in attrs:
            want = schema.get(name, self.extra)
            if want is None:
                return f"`{self.name}` has no attribute `{name}`"
            if not want.accepts(t):
                return f"`{self.name}`'s `{name}` must be of type {want.value}, not {t!r}"
        missing = [k for k in schema if k not in given and k not in self.optional]
        if missing:
            return f"`{self.name}` needs the attribute `{missing[0]}`"
        return None


E, R, C, G = Kind.ELEMENTWISE, Kind.REDUCTION, Kind.CONTRACTION, Kind.GATHER_SCATTER
L, X, S, T = Kind.LAYOUT, Kind.RANDOM, Kind.STRUCTURAL, Kind.TREE
_ALIGN = (("_align", Attr.ALIGN),)
_AXES = (("axes", Attr.NAMES),)
_CALL = (("fn", Attr.NAME), ("dims", Attr.BINDINGS))
_OPT_ALIGN = frozenset({"_align"})
_OPT_AXES = frozenset({"axes"})
_SHAPES = (("shapes", Attr.SHAPES),)
_OPT_SHAPES = frozenset({"shapes"})


def _ops() -> list[Op]:
    def src(name, kind, arity, attrs=(), optional=frozenset()) -> Op:
        return Op(name, kind, arity, attrs, frozenset(optional), source=True)

    def core(name, kind, arity, attrs=(), optional=frozenset(), extra=None) -> Op:
        return Op(name, kind, arity, attrs, frozenset(optional), extra=extra)

    two, one = (2, 2), (1, 1)
    return [
        # ---- the primitives of the language (rules.PRIMITIVES)
        *(src(n, E, two, _ALIGN, _OPT_ALIGN) for n in ("add", "sub", "mul", "div")),
        src("pow", E, two, _ALIGN, _OPT_ALIGN),
        src("neg", E, one),
        src("dot", C, two),
        src("ein", C, (1, 2), (*_AXES, ("_names", Attr.NAME_LISTS))),
        *(
            src(n, E, one)
            for n in ("sqrt", "exp", "log", "tanh", "sigmoid", "gelu", "silu", "sin", "cos")
        ),
        src("relu", E, one),
        src("abs", E, one),
        src("maximum", E, two, _ALIGN, _OPT_ALIGN),
        src("minimum", E, two, _ALIGN, _OPT_ALIGN),
        *(src(n, R, one, _AXES, _OPT_AXES) for n in ("sum", "mean", "max", "min")),
        *(
            src(
                n,
                R,
                (1, 2),
                (*_AXES, ("where", Attr.BOOL), ("_align", Attr.POSITIONS)),
                {"where", "_align"},
            )
            for n in ("softmax", "log_softmax")
        ),
        src("causal_mask", E, (0, 0), (("shapes", Attr.SHAPES),)),
        src("compare", E, two, (("op", Attr.NAME), *_ALIGN), _OPT_ALIGN),
        src("select", E, (3, 3), _ALIGN, _OPT_ALIGN),
        src("iota", E, (0, 0), _SHAPES),  # issue 29: the indices of an axis
        src("real", E, one),
        src("argmax", R, one, _AXES, _OPT_AXES),
        src("one_hot", G, one),
        src("embed", G, two),
        src("take", G, two, _AXES),
        src("top_k", R, one, (*_AXES, *_SHAPES)),  # issue 29: the indices of the k largest
        src("crop", L, one, (*_AXES, ("start", Attr.LIN), ("stop", Attr.LIN))),  # x[a: i .. j]
        src("pad", L, (1, 2), (*_AXES, *_SHAPES), _OPT_SHAPES),  # issue 29: before:, after:
        src("merge", L, one, _AXES),
        src("split", L, one, (*_AXES, ("shapes", Attr.SHAPES))),
        src("sample", X, two),
        src("split_key", X, one),
        # issue 16: dropout's draws, tensors of a shape (none: a scalar), a stop-gradient
        src("uniform", X, one, _SHAPES, _OPT_SHAPES),
        src("normal", X, one, _SHAPES, _OPT_SHAPES),
        src("bernoulli", X, two, _SHAPES, _OPT_SHAPES),
        *(src(n, E, (0, 0), _SHAPES, _OPT_SHAPES) for n in ("zeros", "ones")),
        src("stop_grad", E, one),
        src("pi", E, (0, 0)),  # issue 29: the constant π
        src("grad", S, (1, None), _CALL),
        # ---- structural: lowering's
        core("call", S, (0, None), _CALL),
        core("fold", S, (2, None), (*_CALL, ("count", Attr.LIN))),
        core("fold_init", S, one, (*_CALL, ("count", Attr.LIN))),
        # issue 29: a scan over a symbolic number of steps (`count`), the last `scanned`
        # operands stepped along the axis `axes[0]`; `reverse`: from the last step back
        core(
            "scan",
            S,
            (2, None),
            (*_CALL, ("count", Attr.LIN), *_AXES, ("scanned", Attr.INT), ("reverse", Attr.BOOL)),
            {"reverse"},
        ),
        core("value_grad", S, (1, None), _CALL),
        core("slice", T, one, (("index", Attr.INT),)),
        core("field", T, one, (("path", Attr.NAME),)),
        core("record", T, (0, None), (("keys", Attr.NAMES),)),
        core("tuple", T, (0, None)),
        core("get", T, one, (("index", Attr.INT),)),
        core("cast", L, one),
        core("stack_axis", L, (1, None), _AXES),  # issue 29: a scan's outputs, on a new axis
        core("fold_key", X, one, (("name", Attr.NAME),)),
        core("init", X, one, (("init", Attr.NAME),), extra=Attr.TEXT),
        # ---- what differentiation writes (presk-ad), evaluated by presk_core.adjoints
        core("zeros_like", T, one),
        core("accum", T, two),
        core("put", T, two, (("path", Attr.NAME),)),
        core("put_slice", T, two, (("index", Attr.INT),)),
        core("put_item", T, two, (("index", Attr.INT),)),
        core("sum_to", R, two, (("_align", Attr.POSITIONS),), _OPT_ALIGN),
        core("expand", L, two, (*_AXES, ("mean", Attr.BOOL)), _OPT_AXES),
        core("spread", L, two, (("_names", Attr.NAME_LISTS),)),
        core("reshape_like", L, two),
        core("dot_left", C, two),
        core("dot_right", C, two),
        *(core(f"{n}_grad", E, two) for n in ("gelu", "silu", "relu", "abs")),
        core("softmax_grad", R, two, _AXES),
        core("log_softmax_grad", R, two, _AXES),
        core("reduce_pick", G, two, (*_AXES, ("kind", Attr.NAME)), _OPT_AXES),
        core("pick2", E, (3, 3), (("which", Attr.INT), ("kind", Attr.NAME), *_ALIGN), _OPT_ALIGN),
        core("embed_grad", G, (3, 3)),
        core("take_grad", G, (3, 3), _AXES),
    ]


OPS: dict[str, Op] = {op.name: op for op in _ops()}
"""Every operation of PSK-Core, by name."""

ADJOINT_OPS = frozenset(
    {
        "zeros_like", "accum", "put", "put_slice", "put_item", "sum_to", "expand", "spread",
        "reshape_like", "dot_left", "dot_right", "gelu_grad", "silu_grad", "relu_grad",
        "abs_grad", "softmax_grad", "log_softmax_grad", "reduce_pick", "pick2", "embed_grad",
        "take_grad",
    }
)  # fmt: skip
"""The operations only differentiation writes (no source program calls them)."""


def kind(op: str) -> Kind:
    """The kind of operation `op` (KeyError if PSK-Core has no such operation)."""
    return OPS[op].kind


__all__ = ["ADJOINT_OPS", "OPS", "Attr", "Kind", "Op", "kind"]
