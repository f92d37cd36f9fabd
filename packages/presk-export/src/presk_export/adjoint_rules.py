"""The PyTorch of the operations differentiation writes (`presk_types.ops.ADJOINT_OPS`), one
rule per name as in `torch_rules` (which merges them into `RULES`), following the
interpreter's semantics (`presk_core.adjoints`): the gradient of `max` over an axis goes to
its first maximum, `maximum(a, b)` gives half to each operand at a tie, relu'(0) = 0.

An export of a source program never meets them (train.py differentiates with
torch.autograd); they make a differentiated PSK-Core program exportable like any other,
and tests/test_adjoint_rules.py checks each against the interpreter.

The cotangent of a parameter tree is, as in the interpreter, a dict of its leaves by dotted
path (`blocks.proj.w`; a stack's leaves with their leading axis), and that of a tuple a
tuple: `zeros_like`, `accum`, `put` (a leaf or a subtree at a path), `put_slice` (one
block of a stack, written functionally by `index_put` on zeros: nothing is modified in
place) and `put_item` build new dicts and tuples (tests/test_tree_adjoints.py runs them on
what the interpreter gave them in the differentiated tutorial and reference programs). A
module whose parameters are its attributes (`self.proj`) has no such dict: a tree adjoint
of one is refused (E8001).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from presk_core.ir import Instr, Operand
from presk_types.shapes import alignment
from presk_types.types import ParamsT, Shape, TupleT, Type

from presk_export.pyexpr import (
    ADD,
    ATOM,
    MUL,
    UNARY,
    ExportError,
    Expr,
    binary,
    call,
    method,
    placed,
)

if TYPE_CHECKING:
    from presk_export.body import Body

Rule = Callable[["Body", Instr], Expr]


def _text(fmt: str, **parts: Expr) -> Expr:
    """An expression from a template whose parts are atoms (`ct * torch.sign(x)`)."""
    return Expr(fmt.format(**{k: v.at(ATOM) for k, v in parts.items()}), ADD)


# ---- trees and tuples of cotangents ------------------------------------------------------


def _structure(b: Body, ins: Instr, a: Operand) -> Expr:
    """Operand `a` as a Python expression: a tensor, a tree's dict of leaves, a tuple."""
    v = b.value(a)
    if isinstance(v, tuple):
        items = [str(_as_expr(b, ins, e)) for e in v]
        return Expr(_tuple_text(items))
    return _as_expr(b, ins, v)


def _as_expr(b: Body, ins: Instr, v: object) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, tuple):
        return Expr(_tuple_text([str(_as_expr(b, ins, e)) for e in v]))
    params = getattr(v, "params", None)  # a presk_export.body.Tree
    if params is None:
        raise ExportError(
            f"`{ins.op}` of a module's parameters: the adjoint of a parameter tree is a dict"
            " of its leaves, and this module holds them as attributes",
            span=ins.span,
        )
    return Expr(params)


def _tuple_text(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _zeros_text(x: str, t: Type) -> str:
    """Zeros of the structure of `x` (a name), of type t."""
    if isinstance(t, ParamsT):
        return f"{{k: torch.zeros_like(v) for k, v in {x}.items()}}"
    if isinstance(t, TupleT):
        return _tuple_text([_zeros_text(f"{x}[{i}]", e) for i, e in enumerate(t.elements)])
    return f"torch.zeros_like({x})"


def _accum_text(x: str, y: str, t: Type) -> str:
    """x + y leaf by leaf (names of the same structure, of type t)."""
    if isinstance(t, ParamsT):
        return f"{{k: v + {y}[k] for k, v in {x}.items()}}"
    if isinstance(t, TupleT):
        items = [_accum_text(f"{x}[{i}]", f"{y}[{i}]", e) for i, e in enumerate(t.elements)]
        return _tuple_text(items)
    return f"{x} + {y}"


def _with(names: str, body: str, *args: Expr) -> Expr:
    """`(lambda names: body)(args)`: each argument evaluated once, however often it is read."""
    return Expr(f"(lambda {names}: {body})({', '.join(str(a) for a in args)})", ATOM)


def _zeros_like(b: Body, ins: Instr) -> Expr:
    t = ins.args[0].type
    if not isinstance(t, ParamsT | TupleT):
        (x,) = b.operands(ins)
        return call("torch.zeros_like", x)
    return _with("_t", _zeros_text("_t", t), _structure(b, ins, ins.args[0]))


def _accum(b: Body, ins: Instr) -> Expr:
    t = ins.args[0].type
    if not isinstance(t, ParamsT | TupleT):
        x, y = b.operands(ins)
        return binary(x, "+", y, ADD)
    x, y = (_structure(b, ins, a) for a in ins.args)
    return _with("_a, _b", _accum_text("_a", "_b", t), x, y)


def _put(b: Body, ins: Instr) -> Expr:
    """Zeros of the tree with `a` at `path`: a leaf, or a subtree's leaves under it."""
    tree, a = (_structure(b, ins, x) for x in ins.args)
    path, zeros = ins.attr("path"), _zeros_text("_t", ins.args[0].type)
    if isinstance(ins.args[1].type, ParamsT):
        placed = f"{{{path!r} + '.' + k: v for k, v in _a.items()}}"
        return _with("_t, _a", f"{{**{zeros}, **{placed}}}", tree, a)
    return _with("_t, _a", f"{{**{zeros}, {path!r}: _a}}", tree, a)


def _put_slice(b: Body, ins: Instr) -> Expr:
    """Zeros of the stacked tree with block `a` at `index` of each leaf's leading axis."""
    tree, a = (_structure(b, ins, x) for x in ins.args)
    i = ins.attr("index")
    leaf = f"torch.zeros_like(v).index_put((torch.tensor({i}),), _a[k])"
    body = f"{{k: {leaf} if k in _a else torch.zeros_like(v) for k, v in _t.items()}}"
    return _with("_t, _a", body, tree, a)


def _put_item(b: Body, ins: Instr) -> Expr:
    """Zeros of the tuple with `a` as its element `index`."""
    t, i = ins.args[0].type, ins.attr("index")
    whole, a = b.value(ins.args[0]), _structure(b, ins, ins.args[1])
    if isinstance(whole, tuple):  # the elements' own expressions: no lambda needed
        items = [
            str(a) if j == i else _zeros_expr(b, ins, e, et)
            for j, (e, et) in enumerate(zip(whole, t.elements, strict=True))
        ]
        return Expr(_tuple_text(items))
    items = ["_a" if j == i else _zeros_text(f"_t[{j}]", e) for j, e in enumerate(t.elements)]
    return _with("_t, _a", _tuple_text(items), _structure(b, ins, ins.args[0]), a)


def _zeros_expr(b: Body, ins: Instr, v: object, t: Type) -> str:
    x = _as_expr(b, ins, v)
    if not isinstance(t, ParamsT | TupleT):
        return str(call("torch.zeros_like", x))
    return str(_with("_t", _zeros_text("_t", t), x))


def _sum_to(b: Body, ins: Instr) -> Expr:
    """ct summed back to x's shape: over ct's axes x does not have, x's axes put in x's order,
    then `sum_to_size` (the prefix's extra axes, the axes where x has length 1)."""
    ct, x = b.operands(ins)
    if b.shape(ins.args[1]).is_scalar and not b.shape(ins.args[1]).prefix:
        return method(ct, "sum")
    where = list(ins.attr("_align"))
    others = [p for p in range(-b.rank(ins.args[0]), 0) if p not in where]
    if others:
        ct = method(ct, "sum", f"dim={tuple(others)}")
    k, kept = len(where), sorted(where)
    order = [kept.index(p) for p in where]
    if order != sorted(order):
        ct = method(ct, "movedim", [i - k for i in order], list(range(-k, 0)))
    return method(ct, "sum_to_size", f"{x.at(ATOM)}.shape")


def _expand(b: Body, ins: Instr) -> Expr:
    ct, x = b.operands(ins)
    if ins.attr("axes"):
        d = b.axis(ins, k=1)
        out = method(method(ct, "unsqueeze", d), "expand_as", x)
        count = f"{x.at(ATOM)}.shape[{d}]"
    else:
        out = method(call("torch.as_tensor", ct), "expand_as", x)
        count = f"{x.at(ATOM)}.numel()"
    return binary(out, "/", Expr(count, ATOM), MUL) if ins.attr("mean") else out


def _dot_left(b: Body, ins: Instr) -> Expr:
    """∂(a·b)/∂a: ct[..., t…] against b[n, t…] over b's axes after the first."""
    ct, w = b.operands(ins)
    k = b.rank(ins.args[1]) - 1
    dims = f"dims=({list(range(-k, 0))}, {list(range(1, k + 1))})"
    return call("torch.tensordot", ct, w, dims)


def _dot_right(b: Body, ins: Instr) -> Expr:
    """∂(a·b)/∂b: a[..., n] against ct[..., t…] over a's axes before the last."""
    a, ct = b.operands(ins)
    lead = f"list(range({a.at(ATOM)}.dim() - 1))"
    return call("torch.tensordot", a, ct, f"dims=({lead}, {lead})")


def _gelu_grad(b: Body, ins: Instr) -> Expr:
    ct, x = b.operands(ins)
    b.imports.add("math")
    return _text(
        "{ct} * (0.5 * (1 + torch.erf({x} / math.sqrt(2)))"
        " + {x} * torch.exp(-{x} * {x} / 2) / math.sqrt(2 * math.pi))",
        ct=ct,
        x=x,
    )


def _silu_grad(b: Body, ins: Instr) -> Expr:
    ct, x = b.operands(ins)
    return _text("{ct} * (torch.sigmoid({x}) * (1 + {x} * (1 - torch.sigmoid({x}))))", ct=ct, x=x)


def _relu_grad(b: Body, ins: Instr) -> Expr:
    ct, x = b.operands(ins)
    return _text("torch.where({x} > 0, {ct}, torch.zeros_like({ct}))", ct=ct, x=x)


def _abs_grad(b: Body, ins: Instr) -> Expr:
    ct, x = b.operands(ins)
    return _text("{ct} * torch.sign({x})", ct=ct, x=x)


def _softmax_grad(b: Body, ins: Instr) -> Expr:
    ct, y = b.operands(ins)
    d = b.axis(ins, k=1)
    return _text(f"{{y}} * ({{ct}} - ({{ct}} * {{y}}).sum({d}, keepdim=True))", ct=ct, y=y)


def _log_softmax_grad(b: Body, ins: Instr) -> Expr:
    ct, y = b.operands(ins)
    d = b.axis(ins, k=1)
    return _text(f"{{ct}} - torch.exp({{y}}) * {{ct}}.sum({d}, keepdim=True)", ct=ct, y=y)


def _embed_grad(b: Body, ins: Instr) -> Expr:
    """Each row of ct added to the row of the table its index read."""
    ct, table, ids = b.operands(ins)
    return _text(
        "torch.zeros_like({t}).index_add(0, {i}.reshape(-1), {ct}.reshape(-1, *{t}.shape[1:]))",
        ct=ct,
        t=table,
        i=ids,
    )


def gathers_along(b: Body, x: Operand, ids: Operand, name: str) -> bool:
    """ids has x's axes, in x's order, the axis `name` of any length (`top_k`'s indices):
    `torch.gather` along it, without a broadcast."""
    sx, si = b.shape(x), b.shape(ids)
    return (
        sx.rank == si.rank
        and sx.names() == si.names()
        and all(
            p.length == q.length for p, q in zip(sx.axes, si.axes, strict=True) if p.name != name
        )
    )


def take_places(b: Body, ins: Instr, x: int) -> tuple[Shape, Shape, Shape, tuple, tuple]:
    """A `take`'s shapes (x's explicit, its other axes', the indices', the result's) and its
    alignments (x's other axes and the indices among the result's axes, from the last), as
    the checker aligned them; operand x is x (0 for take, 1 for take_grad)."""
    src, ids = b.shape(ins.args[x]), b.shape(ins.args[x + 1])
    dst = b.shape(ins.out if x == 0 else ins.args[0])
    if src.prefix or ids.prefix or dst.prefix:
        raise ExportError("`take` of operands with an open prefix", span=ins.span)
    i = src.axis(ins.attr("axes")[0])
    rest = Shape(False, src.axes[:i] + src.axes[i + 1 :])
    return rest, ids, dst, alignment(rest, dst), alignment(ids, dst)


def same_places(b: Body, ins: Instr, x: int) -> bool:
    """x's other axes and the indices are the result's axes, in order (no broadcast); with an
    open prefix, the indices one axis fewer than x (as before: no other alignment exports)."""
    if any(b.shape(a).prefix for a in ins.args[x : x + 2]):
        return b.rank(ins.args[x + 1]) == b.rank(ins.args[x]) - 1
    rest, ids, dst, xa, ia = take_places(b, ins, x)
    whole = tuple(range(-dst.rank, 0))
    return xa == ia == whole and [a.length for a in rest.axes] == [a.length for a in ids.axes]


def general_take(b: Body, ins: Instr, x: Expr, ids: Expr) -> Expr:
    """`take` of any alignment: x's axis moved last and its other axes placed on the
    result's, the indices placed, both expanded to the result's shape, `torch.gather`."""
    rest, ids_s, dst, xa, ia = take_places(b, ins, 0)
    n_axis = b.shape(ins.args[0]).axes[b.shape(ins.args[0]).axis(ins.attr("axes")[0])]
    xr = method(x, "movedim", b.axis(ins), -1)
    xb = placed(xr, Shape(False, (*rest.axes, n_axis)), (*(p - 1 for p in xa), -1), dst.rank + 1)
    ib = placed(ids, ids_s, ia, dst.rank)
    shape = "torch.broadcast_shapes(xb.shape[:-1], ib.shape)"
    return Expr(
        f"(lambda xb, ib: torch.gather(xb.expand(*{shape}, xb.shape[-1]), -1,"
        f" ib.expand({shape}).unsqueeze(-1)).squeeze(-1))({xb}, {ib})"
    )


def general_take_grad(b: Body, ins: Instr, ct: Expr, x: Expr, ids: Expr) -> Expr:
    """`take_grad` of any alignment: the cotangent scattered on the result's axes and a last
    axis of x's length, summed over the axes x lacks (and where x's axis of length 1 was
    broadcast), its axes put back in x's order."""
    rest, ids_s, dst, xa, ia = take_places(b, ins, 1)
    d = b.axis(ins, k=1)
    r = dst.rank
    ib = placed(ids, ids_s, ia, r)
    targets = sorted(xa)
    others = [r + p for p in range(-r, 0) if p not in xa]
    wide = [
        r + p
        for ax, p in zip(rest.axes, xa, strict=True)
        if ax.length.is_const and ax.length.constant == 1
        and not (dst.axes[p].length.is_const and dst.axes[p].length.constant == 1)
    ]  # fmt: skip
    g = (
        f"torch.zeros(*c.shape, x.shape[{d}], dtype=c.dtype, device=c.device)"
        ".scatter_add(-1, ib.expand(c.shape).unsqueeze(-1), c.unsqueeze(-1))"
    )
    if wide:
        g += f".sum(dim={tuple(wide)}, keepdim=True)"
    if others:
        g += f".sum(dim={tuple(others)})"
    order = [targets.index(p) for p in xa]
    if order != sorted(order):
        g += f".permute({', '.join(map(str, order))}, {len(order)})"
    g += f".movedim(-1, {d})"
    return Expr(f"(lambda c, x, ib: {g})({ct}, {x}, {ib})")


def _take_grad(b: Body, ins: Instr) -> Expr:
    ct, x, ids = b.operands(ins)
    d = b.axis(ins, k=1)
    if gathers_along(b, ins.args[1], ins.args[2], ins.attr("axes")[0]):
        return _text(f"torch.zeros_like({{x}}).scatter_add({d}, {{i}}, {{ct}})", ct=ct, x=x, i=ids)
    if not same_places(b, ins, 1):
        return general_take_grad(b, ins, ct, x, ids)
    return _text(
        f"torch.zeros_like({{x}}).scatter_add({d}, {{i}}.unsqueeze({d}), {{ct}}.unsqueeze({d}))",
        ct=ct,
        x=x,
        i=ids,
    )


def _reduce_pick(b: Body, ins: Instr) -> Expr:
    """ct at the first extremum, as `argmax` finds it (torch's argmax: the first)."""
    ct, x = b.operands(ins)
    key = x if ins.attr("kind") == "max" else Expr(f"-{x.at(UNARY)}", UNARY)
    if not ins.attr("axes"):
        return _text(
            "torch.zeros_like({x}).flatten().scatter(0, {k}.flatten().argmax().unsqueeze(0),"
            " torch.as_tensor({ct}).reshape(1)).reshape({x}.shape)",
            ct=ct,
            x=x,
            k=key,
        )
    d = b.axis(ins, k=1)
    return _text(
        f"torch.zeros_like({{x}}).scatter({d}, {{k}}.argmax({d}, keepdim=True),"
        f" {{ct}}.unsqueeze({d}))",
        ct=ct,
        x=x,
        k=key,
    )


def _pick2(b: Body, ins: Instr) -> Expr:
    """ct where operand `which` wins, half of it at a tie, else 0."""
    ct, x, y = b.aligned(ins)
    mine, other = (x, y) if ins.attr("which") == 0 else (y, x)
    wins = ">" if ins.attr("kind") == "max" else "<"
    return _text(
        f"torch.where({{m}} {wins} {{o}}, {{ct}},"
        " torch.where({m} == {o}, {ct} / 2, torch.zeros_like({ct})))",
        ct=ct,
        m=mine,
        o=other,
    )


def _spread(b: Body, ins: Instr) -> Expr:
    """ct laid out on x's axes, repeated along those it lacks."""
    ct, x = b.operands(ins)
    ct_names, x_names = ins.attr("_names")
    order = [ct_names.index(n) for n in x_names if n in ct_names]
    if order != sorted(order):
        if b.shape(ins.args[1]).prefix:
            raise ExportError("`spread` reordering axes after an open prefix", span=ins.span)
        ct = method(ct, "permute", *order)
    index = ", ".join(":" if n in ct_names else "None" for n in x_names)
    return method(Expr(f"{ct.at(ATOM)}[..., {index}]"), "expand_as", x)


def _reshape_like(b: Body, ins: Instr) -> Expr:
    ct, x = b.operands(ins)
    return method(ct, "reshape", f"{x.at(ATOM)}.shape")


def tree_slice(b: Body, ins: Instr) -> object:
    """Block `index` of a stack: the module's (`self.blocks[2]`), or each leaf's row of a
    dict of leaves (what unrolling a stack writes in differentiated code)."""
    i, tree = ins.attr("index"), b.value(ins.args[0])
    if getattr(tree, "params", "") is None:  # a ModuleList
        return replace(tree, module=f"{tree.module}[{i}]")
    return _with("_t", f"{{k: v[{i}] for k, v in _t.items()}}", _structure(b, ins, ins.args[0]))


def tree_record(b: Body, ins: Instr) -> Expr:
    """A tree from its leaves and subtrees, as a dict of leaves by dotted path."""
    parts = []
    for key, a in zip(ins.attr("keys"), ins.args, strict=True):
        x = _structure(b, ins, a)
        if isinstance(a.type, ParamsT):
            parts.append(f"**{{{key!r} + '.' + k: v for k, v in {x.at(ATOM)}.items()}}")
        else:
            parts.append(f"{key!r}: {x}")
    return Expr("{" + ", ".join(parts) + "}")


ADJOINT_TORCH_RULES: dict[str, Rule] = {
    "zeros_like": _zeros_like,
    "accum": _accum,
    "sum_to": _sum_to,
    "expand": _expand,
    "put": _put,
    "put_slice": _put_slice,
    "put_item": _put_item,
    "dot_left": _dot_left,
    "dot_right": _dot_right,
    "gelu_grad": _gelu_grad,
    "silu_grad": _silu_grad,
    "relu_grad": _relu_grad,
    "abs_grad": _abs_grad,
    "softmax_grad": _softmax_grad,
    "log_softmax_grad": _log_softmax_grad,
    "embed_grad": _embed_grad,
    "take_grad": _take_grad,
    "spread": _spread,
    "reduce_pick": _reduce_pick,
    "pick2": _pick2,
    "reshape_like": _reshape_like,
}

__all__ = ["ADJOINT_TORCH_RULES", "tree_record", "tree_slice"]
