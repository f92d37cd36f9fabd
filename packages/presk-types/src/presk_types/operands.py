"""What a shape rule reads (`Operands`) and asks (`Context`), for the checker and for PSK-Core.

A rule of `core_rules.CORE_RULES` types one operation from its operands' types and its
attributes alone. It is called in two settings:

- by the checker (presk_types.check, calls, rules), on the operands of a source expression:
  its `Context` decides equal lengths with Presburger arithmetic in the function's dimension
  context (`shapes.Lengths`, with counterexamples) and points errors at source spans;
- by the verifier of PSK-Core (presk_core.verify), on an instruction: its `CoreContext`
  compares lengths as normalized affine terms (`Lin` equality, no isl) and knows the
  program's functions (`Signature`) and parameter trees (`layout`).

A rule reports a failure by raising `shapes.TypeErr` (a diagnostic with its code); where a
label points is `ctx.span(where)`: `None` for the whole operation, `("operand", i)`,
`("axis", i)` or `("keyword", name)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from presk_syntax.diagnostics import Label
from presk_syntax.span import Span

from presk_types.presburger import Formula, Lin, dims_of, evaluate
from presk_types.shapes import TypeErr, err
from presk_types.types import (
    AxisT,
    Bool,
    Idx,
    Instance,
    KeyT,
    Machine,
    ParamsT,
    Real,
    Shape,
    TupleT,
    Type,
    subst,
)

Where = tuple[str, object] | None


@dataclass(frozen=True, slots=True)
class Operands:
    """The operands of one operation, typed, and its attributes.

    `positional` are the operands; `axes` the axes named by `axis a` (attribute `axes`);
    `keywords` the keyword operands (`where = mask`, the last operand of an instruction
    with the attribute `where`); `shapes` the `name: length` arguments (attribute
    `shapes`); `declared` the instruction's own type, for the operations whose type is
    their annotation (`cast`, `init`, `record`)."""

    op: str
    positional: tuple[Type, ...]
    axes: tuple[str, ...] = ()
    keywords: tuple[tuple[str, Type], ...] = ()
    shapes: tuple[tuple[str, Lin], ...] = ()
    attrs: Mapping[str, object] = field(default_factory=dict)
    declared: Type | None = None

    def attr(self, name: str, default: object = None) -> object:
        return self.attrs.get(name, default)

    def keyword(self, name: str) -> Type | None:
        return dict(self.keywords).get(name)


@dataclass(frozen=True, slots=True)
class Signature:
    """A function of the program as its callers see it: dimensions, parameters, result."""

    dims: tuple[str, ...]
    params: tuple[Type, ...]
    result: Type


class Context:
    """Equal lengths, spans and the program's functions, for the rules (the checker's form
    is `CheckContext` in presk_types.rules; PSK-Core's is `CoreContext`)."""

    def require_equal(self, a: Lin, b: Lin, span: Span | None) -> None:
        if a != b:
            raise err("E2006", f"dimension mismatch: `{a}` vs `{b}`", Label(span, "differ"))

    def span(self, where: Where = None) -> Span | None:
        return None

    def require_holds(self, f: Formula, code: str, message: str, label: str, where: Where) -> None:
        """f for every value of the dimensions, else `code`. PSK-Core's lengths are the
        checker's, which proved them: here only a formula of constants is decided."""
        if not dims_of(f) and not evaluate(f, {}):
            raise err(code, message, Label(self.span(where), label))

    def signature(self, name: str) -> Signature:
        raise err("E2001", f"no function `{name}`", Label(None, ""))

    def layout(self, inst: Instance) -> dict[str, Type]:
        """The parameter tree of a module instance: its parameters and sub-modules, by name."""
        raise err("E2001", f"no parameter tree for `{inst}`", Label(None, ""))


class CoreContext(Context):
    """The context of PSK-Core: lengths equal as terms; the functions and trees of a program.

    `functions` maps a name to its signature; `layouts` a module key to its tree, in
    terms of its dimensions: (dimensions, ((name, type), …)), as the module's `.init`
    builds it."""

    def __init__(
        self,
        functions: Mapping[str, Signature],
        layouts: Mapping[str, tuple[tuple[str, ...], tuple[tuple[str, Type], ...]]],
    ) -> None:
        self.functions = functions
        self.layouts = layouts
        self.trees: dict[Instance, dict[str, Type]] = {}

    def signature(self, name: str) -> Signature:
        if name not in self.functions:
            raise err("E2001", f"no function `{name}` in the program", Label(None, ""))
        return self.functions[name]

    def layout(self, inst: Instance) -> dict[str, Type]:
        tree = self.trees.get(inst)
        if tree is None:
            tree = self.trees[inst] = self._layout(inst)
        return tree

    def _layout(self, inst: Instance) -> dict[str, Type]:
        if inst.stack is not None and inst.inner is not None:
            return {k: stacked(t, inst.stack) for k, t in self.layout(inst.inner).items()}
        if inst.module not in self.layouts:
            raise err("E2001", f"no parameter tree for `{inst}`", Label(None, ""))
        dims, entries = self.layouts[inst.module]
        values = dict(zip(dims, inst.args, strict=False))
        return {k: subst(t, values) for k, t in entries}


def stacked(t: Type, count: Lin) -> Type:
    """A leaf of a stack's tree: one leading axis of `count` blocks; a subtree, stacked."""
    match t:
        case Real(s) | Bool(s):
            return type(t)(Shape(s.prefix, (AxisT(None, count), *s.axes)))
        case Idx(bound, s):
            return Idx(bound, Shape(s.prefix, (AxisT(None, count), *s.axes)))
        case ParamsT(inst):
            return ParamsT(Instance(inst.module, inst.name, (), count, inst))
    return t


def path_type(ctx: Context, tree: Type, path: str, where: Where = None) -> Type:
    """The type of `tree.path` (a dotted path descends into sub-modules)."""
    t = tree
    for part in path.split("."):
        if not isinstance(t, ParamsT):
            raise err("E2008", f"`{t}` has no field `{part}`", Label(ctx.span(where), ""))
        fields = ctx.layout(t.instance)
        if part not in fields:
            raise err("E2001", f"no field `{part}` in `{t}`", Label(ctx.span(where), f"`{path}`"))
        t = fields[part]
    return t


def leaves(ctx: Context, tree: ParamsT, prefix: str = "") -> dict[str, Type]:
    """Every leaf of a tree, by dotted path."""
    out: dict[str, Type] = {}
    for name, t in ctx.layout(tree.instance).items():
        if isinstance(t, ParamsT):
            out.update(leaves(ctx, t, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = t
    return out


# ---- checks the rules share ---------------------------------------------------------------


def arity(
    o: Operands,
    ctx: Context,
    n: int,
    signature: str,
    *,
    axes: tuple[int, ...] = (0,),
    keywords: tuple[str, ...] = (),
    shapes: bool = False,
) -> None:
    bad = (
        len(o.positional) != n
        or len(o.axes) not in axes
        or any(k not in keywords for k, _ in o.keywords)
        or (o.shapes and not shapes)
    )
    if bad:
        raise err(
            "E2004", f"wrong arguments for `{o.op}`", Label(ctx.span(), f"expected {signature}")
        )


def operand(o: Operands, ctx: Context, i: int) -> Type:
    if i >= len(o.positional):
        raise err("E2004", f"`{o.op}` takes more operands", Label(ctx.span(), ""))
    return o.positional[i]


def real(o: Operands, ctx: Context, i: int, name: str | None = None) -> Real:
    t = operand(o, ctx, i)
    if not isinstance(t, Real):
        raise err(
            "E2009",
            f"`{name or o.op}` takes a real tensor, and this is `{t}`",
            Label(ctx.span(("operand", i)), f"`{t}`"),
            help="`real(…)` injects indices and hyperparameters into ℝ",
        )
    return t


def idx(o: Operands, ctx: Context, i: int, name: str | None = None) -> Idx:
    t = operand(o, ctx, i)
    if not isinstance(t, Idx):
        raise err(
            "E2009",
            f"`{name or o.op}` takes indices here, and this is `{t}`",
            Label(ctx.span(("operand", i)), f"`{t}`"),
        )
    return t


def attr_of(o: Operands, ctx: Context, name: str, kind: type | tuple[type, ...]) -> object:
    """An attribute the rule needs, of the given Python type."""
    v = o.attrs.get(name)
    if not isinstance(v, kind):
        raise err(
            "E2004",
            f"`{o.op}` needs the attribute `{name}`, and it is `{v!r}`",
            Label(ctx.span(), ""),
        )
    return v


def remove_axis(shape: Shape, name: str, ctx: Context, where: Where) -> tuple[Shape, AxisT]:
    i = shape.axis(name)
    if i is None:
        raise err(
            "E2005",
            f"no axis `{name}` in `ℝ{shape}`",
            Label(
                ctx.span(where), f"the operand's axes are {', '.join(shape.names()) or 'not named'}"
            ),
        )
    return Shape(shape.prefix, shape.axes[:i] + shape.axes[i + 1 :]), shape.axes[i]


def same(
    ctx: Context, expected: Type, actual: Type, where: Where = None, names: bool | None = True
) -> None:
    """`actual` is `expected`: lengths equal in `ctx`; names equal where both are named
    (everywhere when `names`; nowhere when None: a renaming `cast`)."""

    def fail() -> TypeErr:
        return err(
            "E2008",
            f"expected `{expected}`, found `{actual}`",
            Label(ctx.span(where), f"this is `{actual}`"),
        )

    match expected, actual:
        case (Real(s1), Real(s2)) | (Bool(s1), Bool(s2)):
            same_shape(ctx, s1, s2, fail, where, names)
            return
        case Idx(b1, s1), Idx(b2, s2):
            ctx.require_equal(b1, b2, ctx.span(where))
            same_shape(ctx, s1, s2, fail, where, names)
            return
        case TupleT(e1), TupleT(e2) if len(e1) == len(e2):
            for x, y in zip(e1, e2, strict=True):
                same(ctx, x, y, where, names)
            return
        case ParamsT(i1), ParamsT(i2):
            same_instance(ctx, i1, i2, fail, where)
            return
        case (Machine(), Machine()) | (KeyT(), KeyT()) if expected == actual:
            return
    raise fail()


def same_shape(ctx: Context, s1: Shape, s2: Shape, fail, where: Where, names: bool | None) -> None:
    if s1.prefix != s2.prefix or s1.rank != s2.rank:
        raise fail()
    for x, y in zip(s1.axes, s2.axes, strict=True):
        if names is not None and (
            (x.name != y.name) if names else (x.name and y.name and x.name != y.name)
        ):
            raise fail()
        ctx.require_equal(x.length, y.length, ctx.span(where))


def same_instance(ctx: Context, a: Instance, b: Instance, fail, where: Where) -> None:
    if a.module != b.module or len(a.args) != len(b.args) or (a.stack is None) != (b.stack is None):
        raise fail()
    for x, y in zip(a.args, b.args, strict=True):
        ctx.require_equal(x, y, ctx.span(where))
    if a.stack is not None and b.stack is not None:
        ctx.require_equal(a.stack, b.stack, ctx.span(where))
        same_instance(ctx, a.inner, b.inner, fail, where)


def instantiate(
    ctx: Context, sig: Signature, bindings: Mapping[str, Lin], args: tuple[Type, ...], what: str
) -> tuple[tuple[Type, ...], Shape | None]:
    """The parameters of a call of `sig` with its dimensions bound, checked against the
    arguments' types; and the prefix the arguments give the callee's `...`."""
    if len(args) != len(sig.params):
        raise err(
            "E2004",
            f"`{what}` takes {len(sig.params)} argument(s), given {len(args)}",
            Label(None, ""),
        )
    prefix: Shape | None = None

    def open_prefix(p: Type, a: Type, i: int) -> Type:
        """p with its `...` the leading axes of a (the first argument to give it fixes it)."""
        nonlocal prefix
        if isinstance(p, TupleT) and isinstance(a, TupleT) and len(p.elements) == len(a.elements):
            return TupleT(
                tuple(open_prefix(x, y, i) for x, y in zip(p.elements, a.elements, strict=True))
            )
        ps, as_ = getattr(p, "shape", None), getattr(a, "shape", None)
        if ps is None or as_ is None or not ps.prefix or type(p) is not type(a):
            return p
        if as_.rank < ps.rank and not as_.prefix:
            return p  # `same` says why it does not match
        lead = Shape(as_.prefix, as_.axes[: as_.rank - ps.rank])
        if prefix is not None and prefix != lead:
            raise err(
                "E2008",
                f"the arguments of `{what}` give its `...` two prefixes: `{prefix}`, `{lead}`",
                Label(ctx.span(("operand", i)), ""),
            )
        prefix = lead
        return subst(p, {}, lead)

    params = []
    for i, (p, a) in enumerate(zip(sig.params, args, strict=True)):
        p = open_prefix(subst(p, bindings), a, i)
        if isinstance(p, Machine) and a == Real(Shape(False, ())):
            params.append(p)
            continue
        same(ctx, p, a, ("operand", i), names=False)
        params.append(p)
    return tuple(params), prefix


def bindings_of(o: Operands, ctx: Context, sig: Signature) -> dict[str, Lin]:
    """The `dims` attribute of a call: a length for each of the callee's dimensions."""
    dims = o.attrs.get("dims", ())
    if not isinstance(dims, tuple) or not all(
        isinstance(d, tuple) and len(d) == 2 and isinstance(d[0], str) and isinstance(d[1], Lin)
        for d in dims
    ):
        raise err("E2004", f"`{o.op}`: `dims` is not a list of lengths: {dims!r}", Label(None, ""))
    bound = dict(dims)
    missing = [d for d in sig.dims if d not in bound]
    extra = [d for d in bound if d not in sig.dims]
    if missing or extra:
        raise err(
            "E2004",
            f"`{o.op} {o.attrs.get('fn')}` binds {', '.join(bound) or 'no dimension'},"
            f" and the callee's are {', '.join(sig.dims) or 'none'}",
            Label(None, ""),
        )
    return bound
