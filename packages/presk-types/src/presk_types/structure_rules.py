"""Shape rules of PSK-Core's structural operations and of the operations differentiation
emits (core_rules.CORE_RULES gathers them with the primitives').

Structure: `call`, `fold`, `fold_init` read the callee's signature from the context; `field`,
`slice`, `put`, `record` read parameter trees' layouts from it (a module's tree as its `.init`
builds it); `cast`, `init` and `record` have their type as annotation (`Operands.declared`):
their rules check the operands against it.
"""

from __future__ import annotations

from presk_syntax.diagnostics import Label

from presk_types.operands import (
    Context,
    Operands,
    Signature,
    attr_of,
    bindings_of,
    instantiate,
    leaves,
    operand,
    path_type,
    real,
    remove_axis,
    same,
)
from presk_types.presburger import Lin
from presk_types.shapes import broadcast, err
from presk_types.types import (
    SCALAR,
    AxisT,
    Bool,
    Idx,
    KeyT,
    ParamsT,
    Real,
    Shape,
    TupleT,
    Type,
    subst,
    with_shape,
)


def _fn(o: Operands, ctx: Context) -> tuple[str, Signature, dict[str, Lin]]:
    name = attr_of(o, ctx, "fn", str)
    sig = ctx.signature(name)
    return name, sig, bindings_of(o, ctx, sig)


def call(o: Operands, ctx: Context) -> Type:
    """`call F{dims}(args)`: F's result, its dimensions bound, its `...` the arguments'."""
    name, sig, bound = _fn(o, ctx)
    _, prefix = instantiate(ctx, sig, bound, o.positional, name)
    return subst(sig.result, bound, prefix)


def _count(o: Operands, ctx: Context) -> Lin:
    return attr_of(o, ctx, "count", Lin)


def fold(o: Operands, ctx: Context) -> Type:
    """`fold{L} F{dims}(tree, x, …)`: the blocks of a stacked tree in sequence; a block's
    result is the next block's argument."""
    name, sig, bound = _fn(o, ctx)
    tree = operand(o, ctx, 0)
    count = _count(o, ctx)
    inst = tree.instance if isinstance(tree, ParamsT) else None
    if inst is None or inst.stack is None or inst.inner is None:
        raise err("E2008", f"`fold` takes a stacked tree, and this is `{tree}`", Label(None))
    ctx.require_equal(inst.stack, count, ctx.span())
    block = (ParamsT(inst.inner), *o.positional[1:])
    _, prefix = instantiate(ctx, sig, bound, block, name)
    result = subst(sig.result, bound, prefix)
    if len(o.positional) > 1:
        same(ctx, o.positional[1], result, ("operand", 1), names=False)
    return result


def fold_init(o: Operands, ctx: Context) -> Type:
    """`fold_init{L} M.init{dims}(key)`: L blocks' trees, stacked."""
    name, sig, bound = _fn(o, ctx)
    instantiate(ctx, sig, bound, o.positional, name)
    result = subst(sig.result, bound)
    if not isinstance(result, ParamsT):
        raise err("E2008", f"`fold_init` of `{name}`, which returns `{result}`", Label(None))
    inner = result.instance
    count = _count(o, ctx)
    return ParamsT(type(inner)(inner.module, inner.name, (), count, inner))


def _params(o: Operands, ctx: Context, i: int = 0) -> ParamsT:
    t = operand(o, ctx, i)
    if not isinstance(t, ParamsT):
        raise err("E2008", f"`{o.op}` takes a parameter tree, and this is `{t}`", Label(None))
    return t


def _slice_type(o: Operands, ctx: Context) -> Type:
    inst = _params(o, ctx).instance
    index = attr_of(o, ctx, "index", int)
    if inst.stack is None or inst.inner is None:
        raise err("E2008", f"`{o.op}` of `{inst}`, which is not a stack", Label(None))
    if index < 0 or (inst.stack.is_const and index >= inst.stack.constant):
        raise err("E2008", f"block {index} of `{inst}`", Label(None))
    return ParamsT(inst.inner)


def slice_(o: Operands, ctx: Context) -> Type:
    """`slice tree, i`: the i-th block's tree of a stacked tree."""
    return _slice_type(o, ctx)


def field(o: Operands, ctx: Context) -> Type:
    """`field tree.path`: a leaf or a subtree (a dotted path: of a sub-module)."""
    tree = _params(o, ctx)
    return path_type(ctx, tree, attr_of(o, ctx, "path", str))


def record(o: Operands, ctx: Context) -> Type:
    """`record {k = a, …}`: a tree from its fields (or from all its leaves, by path)."""
    tree = o.declared
    keys = attr_of(o, ctx, "keys", tuple)
    if not isinstance(tree, ParamsT) or len(keys) != len(o.positional):
        raise err("E2008", f"`record` of {len(keys)} keys is `{tree}`", Label(None))
    given = dict(zip(keys, o.positional, strict=True))
    fields = ctx.layout(tree.instance)
    if set(given) != set(fields):
        fields = leaves(ctx, tree)
    if set(given) != set(fields):
        raise err(
            "E2008",
            f"`record` gives {', '.join(keys)}; `{tree}` has {', '.join(fields)}",
            Label(None),
        )
    for k, t in given.items():
        same(ctx, fields[k], t, None)
    return tree


def tuple_(o: Operands, ctx: Context) -> Type:
    return TupleT(tuple(o.positional))


def get(o: Operands, ctx: Context) -> Type:
    t = operand(o, ctx, 0)
    index = attr_of(o, ctx, "index", int)
    if not isinstance(t, TupleT) or not 0 <= index < len(t.elements):
        raise err("E2008", f"`get` {index} of `{t}`", Label(None))
    return t.elements[index]


def _key(o: Operands, ctx: Context) -> None:
    if operand(o, ctx, 0) != KeyT():
        raise err("E2008", f"`{o.op}` takes a key, and this is `{o.positional[0]}`", Label(None))


def fold_key(o: Operands, ctx: Context) -> Type:
    _key(o, ctx)
    attr_of(o, ctx, "name", str)
    return KeyT()


def init(o: Operands, ctx: Context) -> Type:
    """`init NAME(key)`: a parameter's initial value, of its declared type."""
    _key(o, ctx)
    attr_of(o, ctx, "init", str)
    if not isinstance(o.declared, Real | Idx | Bool):
        raise err("E2008", f"`init` of a `{o.declared}`", Label(None))
    return o.declared


def cast(o: Operands, ctx: Context) -> Type:
    """`cast x`: the same data under another type (axes named or renamed)."""
    x = operand(o, ctx, 0)
    if o.declared is None:
        raise err("E2008", "`cast` without a type", Label(None))
    same(ctx, o.declared, x, ("operand", 0), names=None)  # an ascription may rename (issue 29)
    return o.declared


def grad(o: Operands, ctx: Context) -> Type:
    """`grad F(args)`: F's gradient in its last parameter, a value of that parameter's
    type (the language chapter), its dimensions bound and its `...` the arguments' — the
    result of the `F.grad` differentiation calls in its place; F returns a real scalar."""
    name, sig, bound = _fn(o, ctx)
    params, _ = instantiate(ctx, sig, bound, o.positional, name)
    if sig.result != Real(SCALAR):
        raise err("E2008", f"`grad` of `{name}`, which returns `{sig.result}`", Label(None))
    if not params:
        raise err("E2004", f"`grad` of `{name}`, which takes no argument", Label(None))
    return params[-1]


def value_grad(o: Operands, ctx: Context) -> Type:
    """`value_grad F(args)`: F's value and its gradient in its last argument."""
    value = subst(ctx.signature(attr_of(o, ctx, "fn", str)).result, dict(o.attrs.get("dims", ())))
    return TupleT((value, grad(o, ctx)))


def stack_axis(o: Operands, ctx: Context) -> Type:
    """`stack_axis(axis t, y0, …, y(n-1))`: n tensors of one type on a new first axis t (after
    an open prefix): a scan's outputs, step by step."""
    first = o.positional[0] if o.positional else None
    if not isinstance(first, Real | Idx | Bool) or len(o.axes) != 1:
        raise err("E2004", f"`stack_axis` of `{first}`", Label(ctx.span(), "tensors, one axis"))
    for t in o.positional[1:]:
        if t != first:
            raise err("E2008", f"`stack_axis` of `{first}` and `{t}`", Label(ctx.span(), ""))
    if o.axes[0] in first.shape.names():
        raise err("E2013", f"`{first}` has an axis `{o.axes[0]}` already", Label(ctx.span(), ""))
    axes = (AxisT(o.axes[0], Lin.const(len(o.positional))), *first.shape.axes)
    return with_shape(first, Shape(first.shape.prefix, axes))


def stacked(y: Type, t: str, n: Lin, ctx: Context) -> Type:
    """The type of the values y of n steps on a new first axis t (after an open prefix),
    leaf by leaf for a tuple of them."""
    if isinstance(y, TupleT):
        return TupleT(tuple(stacked(e, t, n, ctx) for e in y.elements))
    if not isinstance(y, Real | Idx | Bool):
        raise err("E2027", f"`scan`'s outputs are tensors, not `{y}`", Label(ctx.span(), ""))
    if t in y.shape.names():
        raise err("E2013", f"`{y}` has an axis `{t}` already", Label(ctx.span(), ""))
    return with_shape(y, Shape(y.shape.prefix, (AxisT(t, n), *y.shape.axes)))


def scan(o: Operands, ctx: Context) -> Type:
    """`scan{n} F{dims}(pre…, c, xs…)` (issue 29): F(pre…, c, x…) -> (c, y) applied n times,
    each x the step's element of an xs along the axis t (its length n; of a tuple of
    tensors, the tuple of their elements), the carry threaded through; the result is (the
    last carry, the ys stacked on a new first axis t, leaf by leaf)."""
    name, sig, bound = _fn(o, ctx)
    count = _count(o, ctx)
    axes = attr_of(o, ctx, "axes", tuple)
    m = attr_of(o, ctx, "scanned", int)
    if len(axes) != 1 or not 0 <= m <= len(o.positional) - 1:
        raise err("E2004", "`scan` of one axis, and a carry before its xs", Label(ctx.span()))
    t = axes[0]
    args = list(o.positional)

    def element(xs: Type, i: int) -> Type:
        """xs's element: xs without the axis t (of length `count`), leaf by leaf."""
        if isinstance(xs, TupleT):
            return TupleT(tuple(element(e, i) for e in xs.elements))
        if not isinstance(xs, Real | Idx | Bool):
            raise err("E2026", f"`scan` steps along a tensor, not `{xs}`", Label(ctx.span()))
        shape, axis = remove_axis(xs.shape, t, ctx, ("operand", i))
        ctx.require_equal(axis.length, count, ctx.span(("operand", i)))
        return with_shape(xs, shape)

    for i in range(len(args) - m, len(args)):
        args[i] = element(args[i], i)
    _, prefix = instantiate(ctx, sig, bound, tuple(args), name)
    result = subst(sig.result, bound, prefix)
    if not (isinstance(result, TupleT) and len(result.elements) == 2):
        raise err("E2027", f"`scan`'s step returns `{result}`, not a pair", Label(ctx.span()))
    carry, y = result.elements
    same(ctx, args[len(args) - m - 1], carry, ("operand", len(args) - m - 1), names=False)
    return TupleT((carry, stacked(y, t, count, ctx)))


STRUCTURE_RULES = {
    "stack_axis": stack_axis,
    "scan": scan,
    "call": call,
    "fold": fold,
    "fold_init": fold_init,
    "slice": slice_,
    "field": field,
    "record": record,
    "tuple": tuple_,
    "get": get,
    "fold_key": fold_key,
    "init": init,
    "cast": cast,
    "value_grad": value_grad,
}
"""The structural operations (`grad` is a primitive of the registry)."""


# ---- the operations differentiation emits ------------------------------------------------
# Each takes a cotangent of some type and gives one of an operand's: most have the type of
# the operand they are the adjoint of, which they take as an operand.


def _like(i: int, check: int | None = None):
    """The type of operand i (checked equal to operand `check`'s, if given)."""

    def rule(o: Operands, ctx: Context) -> Type:
        t = operand(o, ctx, i)
        if check is not None:
            same(ctx, t, operand(o, ctx, check), ("operand", check))
        return t

    return rule


def _expand(o: Operands, ctx: Context) -> Type:
    """`expand ct, x` (attribute axes): the cotangent of a reduction back to x's shape."""
    ct, x = real(o, ctx, 0), real(o, ctx, 1)
    axes = attr_of(o, ctx, "axes", tuple)
    reduced = remove_axis(x.shape, axes[0], ctx, None)[0] if axes else SCALAR
    same(ctx, Real(reduced), ct, ("operand", 0))
    return x


def _sum_to(o: Operands, ctx: Context) -> Type:
    """`sum_to ct, x`: a broadcast result's cotangent summed back to operand x's shape."""
    ct, x = operand(o, ctx, 0), operand(o, ctx, 1)
    cs, xs = getattr(ct, "shape", SCALAR), getattr(x, "shape", SCALAR)
    if broadcast(xs, cs, ctx, ctx.span()) is None or xs.rank > cs.rank:
        raise err("E2003", f"`sum_to` of `{ct}` to `{x}`", Label(None))
    place = o.attrs.get("_align")  # where x's axes are among ct's, counted from the last
    if place is not None:
        from presk_types.core_rules import check_align

        check_align(Operands(o.op, (x,), attrs={"_align": (place,)}), ctx, cs)
    return x


def _put(o: Operands, ctx: Context) -> Type:
    """`put tree, ct` (attribute path): the tree's adjoint holding ct at path."""
    tree = _params(o, ctx)
    same(ctx, path_type(ctx, tree, attr_of(o, ctx, "path", str)), operand(o, ctx, 1), None)
    return tree


def _put_slice(o: Operands, ctx: Context) -> Type:
    same(ctx, _slice_type(o, ctx), operand(o, ctx, 1), None)
    return o.positional[0]


def _put_item(o: Operands, ctx: Context) -> Type:
    t = operand(o, ctx, 0)
    same(ctx, get(o, ctx), operand(o, ctx, 1), None)
    return t


def _dot_left(o: Operands, ctx: Context) -> Type:
    """`dot_left ct, b`: the cotangent of a in `a · b`: ct contracted with b's free axes."""
    ct, b = real(o, ctx, 0), real(o, ctx, 1)
    free = b.shape.rank - 1
    if not b.shape.axes or ct.shape.rank < free:
        raise err("E2003", f"`dot_left` of `{ct}` and `{b}`", Label(None))
    for x, y in zip(ct.shape.axes[ct.shape.rank - free :], b.shape.axes[1:], strict=True):
        ctx.require_equal(x.length, y.length, ctx.span())
    lead = ct.shape.axes[: ct.shape.rank - free]
    return Real(Shape(ct.shape.prefix, (*lead, b.shape.axes[0])))


def _dot_right(o: Operands, ctx: Context) -> Type:
    """`dot_right a, ct`: the cotangent of b in `a · b`, summed over a's other axes."""
    a, ct = real(o, ctx, 0), real(o, ctx, 1)
    kept = a.shape.rank - 1
    if not a.shape.axes or ct.shape.rank < kept or ct.shape.prefix != a.shape.prefix:
        raise err("E2003", f"`dot_right` of `{a}` and `{ct}`", Label(None))
    for x, y in zip(a.shape.axes[:-1], ct.shape.axes[:kept], strict=True):
        ctx.require_equal(x.length, y.length, ctx.span())
    return Real(Shape(False, (a.shape.axes[-1], *ct.shape.axes[kept:])))


def _softmax_grad(o: Operands, ctx: Context) -> Type:
    y = real(o, ctx, 1)
    axes = attr_of(o, ctx, "axes", tuple)
    remove_axis(y.shape, axes[0], ctx, None)
    same(ctx, y, operand(o, ctx, 0), ("operand", 0))
    return y


def _along(i: int):
    """The type of operand i, which has the reduced or indexed axis (attribute axes)."""

    def rule(o: Operands, ctx: Context) -> Type:
        x = real(o, ctx, i)
        for a in o.attrs.get("axes", ()):
            remove_axis(x.shape, a, ctx, None)
        return x

    return rule


def _spread(o: Operands, ctx: Context) -> Type:
    """`spread adj, x` (attribute `_names`: adj's axes, x's): adj repeated along the axes
    of x it lacks."""
    adj, x = real(o, ctx, 0), real(o, ctx, 1)
    names = attr_of(o, ctx, "_names", tuple)
    if len(names) != 2 or len(names[0]) != adj.shape.rank or len(names[1]) != x.shape.rank:
        raise err("E2004", f"`spread`'s `_names` is `{names!r}`", Label(None))
    lengths = dict(zip(names[1], (a.length for a in x.shape.axes), strict=True))
    for n, a in zip(names[0], adj.shape.axes, strict=True):
        if n not in lengths:
            raise err("E2005", f"`spread`: no axis `{n}` in `{x}`", Label(None))
        ctx.require_equal(a.length, lengths[n], ctx.span())
    return x


def _pick2(o: Operands, ctx: Context) -> Type:
    """`pick2 ct, a, b` (attribute which): ct where operand `which` wins, on the result's axes."""
    from presk_types.core_rules import check_align

    ct, a, b = (real(o, ctx, i) for i in range(3))
    shape = broadcast(a.shape, b.shape, ctx, ctx.span())
    shape = None if shape is None else broadcast(ct.shape, shape, ctx, ctx.span())
    if shape is None or attr_of(o, ctx, "which", int) not in (0, 1):
        raise err("E2003", f"`pick2` of `{ct}`, `{a}`, `{b}`", Label(None))
    check_align(o, ctx, shape)
    return Real(shape)


def _idx_operand(i: int, rule):
    def checked(o: Operands, ctx: Context) -> Type:
        if not isinstance(operand(o, ctx, i), Idx):
            raise err(
                "E2009", f"`{o.op}` takes indices, and this is `{o.positional[i]}`", Label(None)
            )
        return rule(o, ctx)

    return checked


ADJOINT_SHAPE_RULES = {
    "zeros_like": _like(0),
    "accum": _like(0, 1),
    "sum_to": _sum_to,
    "expand": _expand,
    "put": _put,
    "put_slice": _put_slice,
    "put_item": _put_item,
    "dot_left": _dot_left,
    "dot_right": _dot_right,
    "gelu_grad": _like(1, 0),
    "silu_grad": _like(1, 0),
    "relu_grad": _like(1, 0),
    "abs_grad": _like(1, 0),
    "softmax_grad": _softmax_grad,
    "log_softmax_grad": _softmax_grad,
    "embed_grad": _idx_operand(2, _like(1)),
    "take_grad": _idx_operand(2, _along(1)),
    "spread": _spread,
    "reduce_pick": _along(1),
    "pick2": _pick2,
    "reshape_like": _like(1),
}
"""Differentiation's operations (presk_ad.vjp), until each is a registry operation."""

__all__ = ["ADJOINT_SHAPE_RULES", "STRUCTURE_RULES", "AxisT"]
