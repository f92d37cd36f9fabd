"""Shape rules: the result type of every operation of PSK-Core, from its operands' types and
its attributes alone (presk_types.operands says how a rule is called).

`CORE_RULES` has one rule per operation that can appear in a PSK-Core program: every
primitive of the registry (`rules.PRIMITIVES`), every structural operation (`call`, `fold`,
`field`, …, presk_types.structure_rules) and every operation differentiation emits. The
checker types primitives with these rules, adding its diagnostics around them (rules.py,
check.py); the verifier (presk_core.verify) checks each instruction's type against them.

Lengths are compared by the context: for all values of the dimensions in the checker, as
normalized affine terms in PSK-Core (the checker has already proved what the program
relies on). Broadcasting follows `shapes.broadcast`; an instruction that carries its
alignment (`_align`: where each operand's axes go among the result's, counted from the
last) is checked against it.
"""

from __future__ import annotations

from collections.abc import Callable

from presk_syntax.diagnostics import Label

from presk_types import structure_rules as S
from presk_types.operands import (
    Context,
    Operands,
    arity,
    idx,
    real,
    remove_axis,
)
from presk_types.presburger import Ge, Le, Lin
from presk_types.shapes import broadcast, contract, ein, err
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
    with_shape,
)

Rule = Callable[[Operands, Context], Type]

COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


def signature(name: str) -> str:
    """A primitive's signature as the registry writes it (for E2004)."""
    from presk_types.rules import PRIMITIVES  # rules imports this module

    return PRIMITIVES[name].signature if name in PRIMITIVES else f"`{name}` as documented"


# ---- alignment -----------------------------------------------------------------------------


def check_align(o: Operands, ctx: Context, result: Shape) -> None:
    """An instruction's `_align`, if it has one: a placement of each operand's axes among
    the result's (distinct, counted from the last), names and lengths agreeing (an axis of
    length 1 broadcasts)."""
    aligns = o.attrs.get("_align")
    if aligns is None:
        return
    operands = [*o.positional, *(t for _, t in o.keywords)]
    if not isinstance(aligns, tuple) or len(aligns) != len(operands):
        raise err("E2004", f"`_align` has no placement for each operand: {aligns!r}", Label(None))
    for i, (t, pos) in enumerate(zip(operands, aligns, strict=True)):
        s = getattr(t, "shape", SCALAR)
        if pos is None:
            continue
        if not isinstance(pos, tuple) or len(pos) != s.rank or len(set(pos)) != len(pos):
            raise err("E2004", f"`_align` of operand {i} is `{pos}`, and it is `{t}`", Label(None))
        for axis, p in zip(s.axes, pos, strict=True):
            if not isinstance(p, int) or not -result.rank <= p < 0:
                raise err("E2004", f"`_align` places operand {i} at {p} of `{result}`", Label(None))
            target = result.axes[p]
            if axis.name and target.name and axis.name != target.name:
                raise err(
                    "E2003",
                    f"`_align` places axis `{axis.name}` of operand {i} on `{target.name}`",
                    Label(None),
                )
            if not (axis.length.is_const and axis.length.constant == 1):
                ctx.require_equal(axis.length, target.length, ctx.span(("operand", i)))


# ---- arithmetic ----------------------------------------------------------------------------


def no_broadcast(ctx: Context, a: Type, b: Type) -> Exception:
    return err(
        "E2003",
        f"cannot broadcast `{a}` with `{b}`",
        Label(ctx.span(), "no alignment by position or by name"),
        note="axes align from the last one, or by name when every axis of the smaller"
        " operand is named",
    )


def _two(o: Operands, ctx: Context) -> Shape:
    """The shape of an elementwise operation of two real operands (operators' rule)."""
    a, b = real(o, ctx, 0), real(o, ctx, 1)
    if len(o.positional) != 2:
        raise err("E2004", f"wrong arguments for `{o.op}`", Label(ctx.span(), ""))
    shape = broadcast(a.shape, b.shape, ctx, ctx.span())
    if shape is None:
        raise no_broadcast(ctx, a, b)
    check_align(o, ctx, shape)
    return shape


def _binary(o: Operands, ctx: Context) -> Type:
    return Real(_two(o, ctx))


def _pow(o: Operands, ctx: Context) -> Type:
    b = o.positional[1] if len(o.positional) > 1 else None
    if isinstance(b, Real) and not b.shape.is_scalar:
        raise err(
            "E2008",
            "a power takes a scalar exponent",
            Label(ctx.span(("operand", 1)), f"this is `{b}`"),
        )
    return _binary(o, ctx)


def _compare(o: Operands, ctx: Context) -> Type:
    """Two real tensors, or two index tensors (of any bounds: their values are integers)."""
    if o.attrs.get("op") not in COMPARISONS:
        raise err("E2004", f"`compare` with the operator `{o.attrs.get('op')}`", Label(None))
    if len(o.positional) == 2 and all(isinstance(t, Idx) for t in o.positional):
        a, b = o.positional
        shape = broadcast(a.shape, b.shape, ctx, ctx.span())
        if shape is None:
            raise no_broadcast(ctx, a, b)
        check_align(o, ctx, shape)
        return Bool(shape)
    return Bool(_two(o, ctx))


def _maximum(o: Operands, ctx: Context) -> Type:
    """`max(a, b)`, `min(a, b)`: elementwise, operands broadcast."""
    a, b = real(o, ctx, 0), real(o, ctx, 1)
    shape = broadcast(a.shape, b.shape, ctx, ctx.span())
    if shape is None:
        raise err("E2003", f"cannot broadcast `{a}` with `{b}`", Label(ctx.span(), ""))
    check_align(o, ctx, shape)
    return Real(shape)


def _dot(o: Operands, ctx: Context) -> Type:
    a, b = real(o, ctx, 0), real(o, ctx, 1)
    return Real(contract(a.shape, b.shape, ctx, ctx.span()))


def _ein(o: Operands, ctx: Context) -> Type:
    """`ein[out](a * b)` (or of one operand): the axes of `out` kept, the others summed.
    With `_names` (each operand's axes as the instruction names them: the right one's
    relabelled), the output is read from those names."""
    out = o.attrs.get("axes")
    if not isinstance(out, tuple) or not 1 <= len(o.positional) <= 2:
        raise err("E2004", "`ein` takes its output axes and one or two operands", Label(None))
    shapes = [real(o, ctx, i).shape for i in range(len(o.positional))]
    names = o.attrs.get("_names")
    if names is None:
        return Real(ein(out, shapes[0], shapes[1] if len(shapes) > 1 else None, ctx, ctx.span()))
    if not isinstance(names, tuple) or len(names) != len(shapes):
        raise err("E2004", f"`ein`'s `_names` is `{names!r}`", Label(None))
    found: dict[str, Lin] = {}
    for s, ns in zip(shapes, names, strict=True):
        if len(ns) != s.rank:
            raise err("E2004", f"`ein` names `{', '.join(ns)}` the axes of `ℝ{s}`", Label(None))
        for axis, n in zip(s.axes, ns, strict=True):
            if n in found:
                ctx.require_equal(found[n], axis.length, ctx.span())
            else:
                found[n] = axis.length
    missing = [n for n in out if n not in found]
    if missing:
        raise err("E2007", f"`ein` output axis `{missing[0]}` is in neither operand", Label(None))
    prefix = any(s.prefix for s in shapes)
    return Real(Shape(prefix, tuple(AxisT(n, found[n]) for n in out)))


def _elementwise(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 1, signature(o.op))
    return real(o, ctx, 0)


# ---- reductions ----------------------------------------------------------------------------


def _reduce(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 1, signature(o.op), axes=(0, 1))
    x = real(o, ctx, 0)
    if not o.axes:
        return Real(SCALAR)
    return Real(remove_axis(x.shape, o.axes[0], ctx, ("axis", 0))[0])


def _max_min(o: Operands, ctx: Context) -> Type:
    """`max`/`min` as called by name: of two operands elementwise, else a reduction."""
    if len(o.positional) == 2 and not o.axes:
        return _maximum(o, ctx)
    return _reduce(o, ctx)


def _softmax(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 1, signature(o.op), axes=(1,), keywords=("where",))
    x = real(o, ctx, 0)
    remove_axis(x.shape, o.axes[0], ctx, ("axis", 0))
    mask = o.keyword("where")
    if mask is not None:
        span = ctx.span(("keyword", "where"))
        if not isinstance(mask, Bool) or broadcast(mask.shape, x.shape, ctx, span) is None:
            raise err(
                "E2008",
                f"`where` must be a mask of truth values that broadcasts to `{x}`",
                Label(span, f"this is `{mask}`"),
            )
    return x


# ---- masks, selection, indices ---------------------------------------------------------------


def _causal_mask(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 0, signature(o.op), shapes=True)
    if len(o.shapes) != 1:
        raise err(
            "E2004", "`causal_mask` takes one axis: `causal_mask(seq: T)`", Label(ctx.span(), "")
        )
    name, length = o.shapes[0]
    return Bool(Shape(False, (AxisT(name, length), AxisT(f"{name}2", length))))


def _select(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 3, signature(o.op))
    c = o.positional[0]
    if not isinstance(c, Bool):
        raise err(
            "E2008",
            f"`select` takes a mask first, and this is `{c}`",
            Label(ctx.span(("operand", 0)), ""),
        )
    a, b = real(o, ctx, 1), real(o, ctx, 2)
    shape = broadcast(a.shape, b.shape, ctx, ctx.span())
    shape = None if shape is None else broadcast(c.shape, shape, ctx, ctx.span())
    if shape is None:
        raise err("E2003", f"cannot broadcast `{c}`, `{a}` and `{b}`", Label(ctx.span(), ""))
    check_align(o, ctx, shape)
    return Real(shape)


def _real(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 1, signature(o.op))
    t = o.positional[0]
    match t:
        case Idx(_, shape) | Bool(shape) | Real(shape):
            return Real(shape)
        case Machine():
            return Real(SCALAR)
    raise err("E2008", f"`real` cannot inject `{t}` into ℝ", Label(ctx.span(("operand", 0)), ""))


def _last_or_named(shape: Shape, o: Operands, ctx: Context) -> tuple[Shape, AxisT]:
    if o.axes:
        return remove_axis(shape, o.axes[0], ctx, ("axis", 0))
    if not shape.axes:
        raise err(
            "E2005", f"`{o.op}` needs an axis, and `ℝ{shape}` has none", Label(ctx.span(), "")
        )
    return Shape(shape.prefix, shape.axes[:-1]), shape.axes[-1]


def _argmax(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 1, signature(o.op), axes=(0, 1))
    rest, axis = _last_or_named(real(o, ctx, 0).shape, o, ctx)
    return Idx(axis.length, rest)


def _sample(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 2, signature(o.op))
    k = o.positional[0]
    if not isinstance(k, KeyT):
        raise err(
            "E2008",
            f"`sample` takes a key first, and this is `{k}`",
            Label(ctx.span(("operand", 0)), "not a key"),
        )
    rest, axis = _last_or_named(real(o, ctx, 1).shape, o, ctx)
    return Idx(axis.length, rest)


def _one_hot(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 1, signature(o.op))
    ids = idx(o, ctx, 0)
    return Real(Shape(ids.shape.prefix, ids.shape.axes + (AxisT(None, ids.bound),)))


def _embed(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 2, signature(o.op))
    table, ids = real(o, ctx, 0), idx(o, ctx, 1)
    if not table.shape.axes or table.shape.prefix:
        raise err("E2008", f"`embed` takes a table, and this is `{table}`", Label(ctx.span(), ""))
    ctx.require_equal(table.shape.axes[0].length, ids.bound, ctx.span())
    return Real(Shape(ids.shape.prefix, ids.shape.axes + table.shape.axes[1:]))


def _take(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 2, signature(o.op), axes=(1,))
    x, ids = real(o, ctx, 0), idx(o, ctx, 1)
    rest, axis = _last_or_named(x.shape, o, ctx)
    ctx.require_equal(axis.length, ids.bound, ctx.span())
    shape = broadcast(rest, ids.shape, ctx, ctx.span())
    if shape is None:
        raise err(
            "E2003", f"cannot align `ℝ{rest}` with the indices `{ids}`", Label(ctx.span(), "")
        )
    return Real(shape)


def _top_k(o: Operands, ctx: Context) -> Type:
    """`top_k(axis a, x, k: K)`'s indices (issue 29): the positions of the K largest elements
    of each row of x along a, largest first, ties to the first (the order `argmax` picks
    in: NaN above everything, +0 above -0); the axis a keeps its name, of length K, proved
    0 <= K <= its length for every value of the dimensions (E2031, with the counterexample).
    The checker's form gives the values as `take(axis a, x, indices)` beside them."""
    arity(o, ctx, 1, signature(o.op), axes=(1,), shapes=True)
    x = real(o, ctx, 0)
    name = o.axes[0]
    if x.shape.prefix or any(not ax.name for ax in x.shape.axes):
        raise err(
            "E2032", f"`top_k` needs a tensor of named axes, and this is `{x}`",
            Label(ctx.span(("operand", 0)), "name its axes"),
        )  # fmt: skip
    i = x.shape.axis(name)
    if i is None:
        raise err(
            "E2030", f"`{x}` has no axis `{name}` to take the largest elements of",
            Label(ctx.span(("axis", 0)), "not an axis of the operand"),
            help=f"its axes are {', '.join(f'`{n}`' for n in x.shape.names()) or 'unnamed'}",
        )  # fmt: skip
    if len(o.shapes) != 1 or o.shapes[0][0] != "k":
        where = ("shape", 0) if o.shapes else None
        raise err(
            "E2030", "`top_k` takes how many elements once, as `k: K`",
            Label(ctx.span(where) if where else ctx.span(), "expected `k: K`, a length"),
        )  # fmt: skip
    k, n = o.shapes[0][1], x.shape.axes[i].length
    ctx.require_holds(
        Ge(k, 0), "E2031", f"`top_k`'s `k: {k}` is a negative number of elements",
        f"`{k}` < 0", ("shape", 0),
    )  # fmt: skip
    ctx.require_holds(
        Le(k, n), "E2031", f"`top_k` takes more elements than the axis `{name}: {n}` has",
        f"`{k}` > `{n}`", ("shape", 0),
    )  # fmt: skip
    axes = x.shape.axes[:i] + (AxisT(name, k),) + x.shape.axes[i + 1 :]
    return Idx(n, Shape(False, axes))


# ---- reshaping, randomness -----------------------------------------------------------------


def _product(la: Lin, lb: Lin, ctx: Context) -> Lin:
    if not (la.is_const or lb.is_const):
        raise err("E2002", f"`{la}*{lb}` is not an affine length", Label(ctx.span(), ""))
    return la * lb.constant if lb.is_const else lb * la.constant


def _merge(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 1, signature(o.op), axes=(2,))
    x = real(o, ctx, 0)
    a, b = o.axes
    i, j = x.shape.axis(a), x.shape.axis(b)
    if i is None or j is None or j != i + 1:
        raise err(
            "E2005",
            f"`merge` joins two adjacent axes, and `{a}`, `{b}` are not adjacent in `{x}`",
            Label(ctx.span(), ""),
        )
    merged = _product(x.shape.axes[i].length, x.shape.axes[j].length, ctx)
    axes = x.shape.axes[:i] + (AxisT(None, merged),) + x.shape.axes[j + 1 :]
    return Real(Shape(x.shape.prefix, axes))


def _split(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 1, signature(o.op), axes=(1,), shapes=True)
    x = real(o, ctx, 0)
    name = o.axes[0]
    i = x.shape.axis(name)
    if i is None or len(o.shapes) != 2:
        raise err(
            "E2005",
            f"`split(axis {name}, x, a: m, b: n)` needs the axis and two parts",
            Label(ctx.span(), ""),
        )
    (na, la), (nb, lb) = o.shapes
    product = _product(la, lb, ctx)
    ctx.require_equal(x.shape.axes[i].length, product, ctx.span())
    axes = x.shape.axes[:i] + (AxisT(na, la), AxisT(nb, lb)) + x.shape.axes[i + 1 :]
    return Real(Shape(x.shape.prefix, axes))


def _window_of(o: Operands, ctx: Context) -> tuple[Real | Idx | Bool, int, Lin]:
    """The tensor whose axis `o.axes[0]` a slice or a padding acts on: its place, its length."""
    x = o.positional[0] if o.positional else None
    if not isinstance(x, Real | Idx | Bool):
        raise err(
            "E2022",
            f"`{o.op}` takes a tensor, and this is `{x}`",
            Label(ctx.span(("operand", 0)), f"`{x}`"),
        )
    name = o.axes[0] if o.axes else None
    i = x.shape.axis(name) if name is not None else None
    if i is None:
        raise err(
            "E2022",
            f"`{x}` has no axis `{name}` to {'slice' if o.op == 'crop' else 'pad'}",
            Label(ctx.span(("axis", 0)), "not an axis of the operand"),
            help=f"its axes are {', '.join(f'`{n}`' for n in x.shape.names()) or 'unnamed'}",
        )
    return x, i, x.shape.axes[i].length


def _resized(x: Real | Idx | Bool, i: int, length: Lin) -> Type:
    axes = x.shape.axes[:i] + (AxisT(x.shape.axes[i].name, length),) + x.shape.axes[i + 1 :]
    return with_shape(x, Shape(x.shape.prefix, axes))


def _crop(o: Operands, ctx: Context) -> Type:
    """`x[a: i .. j]`: the elements i to j - 1 of the axis a, for every value of the
    dimensions 0 <= i <= j <= its length (E2020, E2021, with the counterexample)."""
    arity(o, ctx, 1, signature(o.op), axes=(1,))
    x, i, n = _window_of(o, ctx)
    start, stop = o.attr("start"), o.attr("stop")
    name = o.axes[0]
    ctx.require_holds(
        Le(start, stop), "E2020", f"the slice of `{name}` ends before it starts",
        f"`{stop}` < `{start}`", ("stop", 0),
    )  # fmt: skip
    ctx.require_holds(
        Le(stop, n), "E2021", f"the slice runs past the end of the axis `{name}: {n}`",
        f"`{stop}` > `{n}`", ("stop", 0),
    )  # fmt: skip
    ctx.require_holds(
        Ge(start, 0), "E2021", f"the slice starts before the axis `{name}`",
        f"`{start}` < 0", ("start", 0),
    )  # fmt: skip
    return _resized(x, i, stop - start)


PAD_SIDES = ("before", "after")


def _pad(o: Operands, ctx: Context) -> Type:
    """`pad(x[, c], axis a, before: i, after: j)`: i copies of c (0 without it) before the
    axis a, j after, i and j naturals for every value of the dimensions (E2023)."""
    n_args = 2 if len(o.positional) == 2 else 1
    arity(o, ctx, n_args, signature(o.op), axes=(1,), shapes=True)
    x, i, n = _window_of(o, ctx)
    if not isinstance(x, Real):
        raise err(
            "E2022", f"`pad` takes a real tensor, and this is `{x}`",
            Label(ctx.span(("operand", 0)), f"`{x}`"),
        )  # fmt: skip
    if n_args == 2 and not (isinstance(c := o.positional[1], Real) and c.shape.is_scalar):
        raise err(
            "E2023", f"`pad` fills with a real scalar, and this is `{o.positional[1]}`",
            Label(ctx.span(("operand", 1)), "ℝ[]"),
        )  # fmt: skip
    sides, names = dict(o.shapes), [side for side, _ in o.shapes]
    for k, side in enumerate(names):
        if side not in PAD_SIDES or side in names[:k]:
            raise err(
                "E2023", f"`pad` takes `before:` and `after:`, each once at most: not this `{side}:`",
                Label(ctx.span(("shape", k)), "a length before or after the axis"),
            )  # fmt: skip
    for k, (side, length) in enumerate(o.shapes):
        ctx.require_holds(
            Ge(length, 0), "E2023", f"`pad`'s `{side}:` is a negative length",
            f"`{length}` < 0", ("shape", k),
        )  # fmt: skip
    total = sides.get("before", Lin.const(0)) + n + sides.get("after", Lin.const(0))
    return _resized(x, i, total)


def _split_key(o: Operands, ctx: Context) -> Type:
    arity(o, ctx, 1, signature(o.op))
    k = o.positional[0]
    if not isinstance(k, KeyT):  # it was accepted, then `presk run` failed (issue 29)
        raise err(
            "E2008",
            f"`split_key` takes a key, and this is `{k}`",
            Label(ctx.span(("operand", 0)), "not a key"),
        )
    return TupleT((KeyT(), KeyT()))


def _draw(o: Operands, ctx: Context) -> Type:
    """`uniform(key, n: T, …)`, `normal(key, n: T, …)` and `bernoulli(key, p, n: T, …)`:
    reals of the named shape (issue 16: dropout; issue 29: normal), `p` a real scalar."""
    arity(o, ctx, 2 if o.op == "bernoulli" else 1, signature(o.op), shapes=True)
    k = o.positional[0]
    if not isinstance(k, KeyT):
        raise err(
            "E2008",
            f"`{o.op}` takes a key first, and this is `{k}`",
            Label(ctx.span(("operand", 0)), "not a key"),
        )
    if o.op == "bernoulli":
        p = real(o, ctx, 1)
        if not p.shape.is_scalar:
            raise err(
                "E2008",
                f"`bernoulli`'s probability is a real scalar, and this is `{p}`",
                Label(ctx.span(("operand", 1)), "ℝ[]"),
            )
    return Real(_named_shape(o, ctx))


def _filled(o: Operands, ctx: Context) -> Type:
    """`zeros(n: T, …)` and `ones(n: T, …)`: a real tensor of the named shape."""
    arity(o, ctx, 0, signature(o.op), shapes=True)
    return Real(_named_shape(o, ctx))


def _pi(o: Operands, ctx: Context) -> Type:
    """The constant π: a real scalar (MPFR's const_pi at the working precision)."""
    arity(o, ctx, 0, signature(o.op))
    return Real(SCALAR)


def _iota(o: Operands, ctx: Context) -> Type:
    """`iota(n: T)`: the indices 0, 1, …, T - 1 along the axis n, an `idx[T][n: T]`."""
    arity(o, ctx, 0, signature(o.op), shapes=True)
    if len(o.shapes) != 1:
        raise err("E2004", "`iota` takes one axis: `iota(seq: T)`", Label(ctx.span(), ""))
    name, length = o.shapes[0]
    return Idx(length, Shape(False, (AxisT(name, length),)))


def _named_shape(o: Operands, ctx: Context) -> Shape:
    seen: set[str] = set()
    for name, _ in o.shapes:
        if name in seen or seen.add(name):
            raise err(
                "E2013", f"the axis `{name}` appears twice in one shape", Label(ctx.span(), "")
            )
    return Shape(False, tuple(AxisT(n, length) for n, length in o.shapes))


# ---- the table -----------------------------------------------------------------------------

PRIMITIVE_SHAPE_RULES: dict[str, Rule] = {
    "add": _binary,
    "sub": _binary,
    "mul": _binary,
    "div": _binary,
    "pow": _pow,
    "neg": _elementwise,
    "dot": _dot,
    "ein": _ein,
    **{
        name: _elementwise
        for name in (
            *("sqrt", "exp", "log", "tanh", "sigmoid", "gelu", "silu", "sin", "cos"),
            *("relu", "abs"),
        )
    },
    "maximum": _maximum,
    "minimum": _maximum,
    "sum": _reduce,
    "mean": _reduce,
    "max": _max_min,
    "min": _max_min,
    "softmax": _softmax,
    "log_softmax": _softmax,
    "causal_mask": _causal_mask,
    "compare": _compare,
    "select": _select,
    "iota": _iota,
    "real": _real,
    "argmax": _argmax,
    "one_hot": _one_hot,
    "embed": _embed,
    "take": _take,
    "top_k": _top_k,
    "crop": _crop,
    "pad": _pad,
    "merge": _merge,
    "split": _split,
    "sample": _sample,
    "split_key": _split_key,
    "uniform": _draw,
    "normal": _draw,
    "bernoulli": _draw,
    "stop_grad": _elementwise,
    "zeros": _filled,
    "ones": _filled,
    "pi": _pi,
    "grad": S.grad,
}
"""The rule of each primitive of the registry (`rules.PRIMITIVES`)."""

CORE_RULES: dict[str, Rule] = {
    **PRIMITIVE_SHAPE_RULES,
    **S.STRUCTURE_RULES,
    **S.ADJOINT_SHAPE_RULES,
}
"""The rule of every operation of PSK-Core: primitives, structure, differentiation's."""
