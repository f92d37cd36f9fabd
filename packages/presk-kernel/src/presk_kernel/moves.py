"""The loop nests of the operations that move data: gathers (`embed`, `take`,
`one_hot`), scatters (their adjoints, adding in index order), layouts (`merge`, `split`,
`reshape_like`) and the trees of cotangents (`put`, `put_item`, `put_slice`)."""

from __future__ import annotations

from collections.abc import Callable

from presk_types.shapes import alignment
from presk_types.types import Shape

from presk_kernel.ir import REAL_DTYPES, Affine, Axis, Index, Load, Loop, Store
from presk_kernel.lower import InstrLowering, Tensor, explicit
from presk_kernel.nests import at, nest, op
from presk_kernel.rules import _copy, _fill, _with, _zeros_like

# ---- gathers, scatters, layouts ----------------------------------------------------------


def _gather(step: InstrLowering, x: Tensor, axis: int, ids: Tensor, x_place, ids_place) -> Tensor:
    k = step.nest()
    xi, ii = k.input(x), k.input(ids)
    axes = step.out_axes()
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(axes))

    def index(t: Tensor, place):
        return [
            Affine.constant(0) if ax.length == 1 != axes[p].length else Affine.var(v[p])
            for ax, p in zip(t.axes, place, strict=True)
        ]

    row = Load(ii, tuple(index(ids, ids_place)))
    rest = index(x.named(tuple(a for i, a in enumerate(x.axes) if i != axis)), x_place)
    idx = [*rest[:axis], row, *rest[axis:]]
    return k.finish(nest(v, axes, [Store(out, at(v), Load(xi, tuple(idx)))]))


def _embed(step: InstrLowering) -> Tensor:
    table, ids = step.tensor(0), step.tensor(1)
    s = len(ids.axes)
    return _gather(step, table, 0, ids, list(range(s, s + len(table.axes) - 1)), list(range(s)))


def _take(step: InstrLowering) -> Tensor:
    x, ids = step.tensor(0), step.tensor(1)
    axis = step.axis(0, step.ins.attr("axes")[0])
    dst = Shape(False, explicit(step.ins.out.type).axes)
    src = explicit(step.ins.args[0].type)
    rest = Shape(False, src.axes[:axis] + src.axes[axis + 1 :])
    n = len(dst.axes)
    xp = [n + p for p in alignment(rest, dst)]
    ip = [n + p for p in alignment(explicit(step.ins.args[1].type), dst)]
    return _gather(step, x, axis, ids, xp, ip)


def _one_hot(step: InstrLowering) -> Tensor:
    def formula(c, ids):
        return op("select", op("compare", ids, Index(v_last[0]), attr="=="), c(1), c(0))

    ids = step.tensor(0)
    k = step.nest()
    ii = k.input(ids)
    axes = step.out_axes()
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(axes))
    v_last = [v[-1]]
    value = formula(k.const, Load(ii, at(v[:-1])))
    return k.finish(nest(v, axes, [Store(out, at(v), value)]))


def _scatter(
    step: InstrLowering,
    ct: Tensor,
    ids: Tensor,
    x_axes,
    axis: int,
    name: str,
    after: int | None = None,
) -> Tensor:
    """Zeros of x's shape, then each element of ct added at its index, in index order: ct's
    element at v goes to x[v[:axis], ids[v[:len(ids.axes)]], v[after:]] (after = axis when
    ids has ct's shape, as for take_grad; 1 for embed_grad's rows of a table)."""
    full = step.lowering.alloc(x_axes, step.out_dtype(), step.site)
    k = step.nest(name)
    ci, ii = k.input(ct), k.input(ids)
    out = k.output_into(full)
    z = k.vars(len(x_axes))
    fill = nest(z, x_axes, [Store(out, at(z), k.const(0))])
    v = k.vars(len(ct.axes))
    row = Load(ii, at(v[: len(ids.axes)]))
    idx = at(v[:axis]) + (row,) + at(v[axis if after is None else after :])
    value = op("add", Load(out, idx), Load(ci, at(v)))
    scatter = [Store(out, idx, value)]
    for w, a in reversed(list(zip(v, ct.axes, strict=True))):
        scatter = [Loop(w, a.name, a.length, tuple(scatter), serial=True)]
    k.finish([*fill, *scatter])
    return full


def _embed_grad(step: InstrLowering) -> Tensor:
    ct, table, ids = step.tensor(0), step.tensor(1), step.tensor(2)
    rows = ids.size
    flat_ids = ids.named((Axis(None, rows),))
    flat_ct = ct.named((Axis(None, rows), *table.axes[1:]))
    return _scatter(step, flat_ct, flat_ids, step.out_axes(), 0, "embed_grad", after=1)


def _take_grad(step: InstrLowering) -> Tensor:
    """Zeros of x's shape, then each element of ct (the take's result's axes) added at the
    element of x it was taken from, in ct's row-major order, as presk_core.adjoints: x's
    other axes placed as the take placed them (an index tensor may have axes x lacks)."""
    ct, x, ids = step.tensor(0), step.tensor(1), step.tensor(2)
    axis = step.axis(1, step.ins.attr("axes")[0])
    src = explicit(step.ins.args[1].type)
    rest = Shape(False, src.axes[:axis] + src.axes[axis + 1 :])
    dst = Shape(False, explicit(step.ins.args[0].type).axes)
    n = len(ct.axes)
    xp = [n + p for p in alignment(rest, dst)]
    ip = [n + p for p in alignment(explicit(step.ins.args[2].type), dst)]
    x_axes = step.out_axes()
    full = step.lowering.alloc(x_axes, step.out_dtype(), step.site)
    k = step.nest("take_grad")
    ci, ii = k.input(ct), k.input(ids)
    out = k.output_into(full)
    z = k.vars(len(x_axes))
    fill = nest(z, x_axes, [Store(out, at(z), k.const(0))])
    v = k.vars(n)

    def index(axes, place):
        return [
            Affine.constant(0) if ax.length == 1 != ct.axes[p].length else Affine.var(v[p])
            for ax, p in zip(axes, place, strict=True)
        ]

    row = Load(ii, tuple(index(ids.axes, ip)))
    others = index([a for i, a in enumerate(x.axes) if i != axis], xp)
    idx = (*others[:axis], row, *others[axis:])
    scatter = [Store(out, idx, op("add", Load(out, idx), Load(ci, at(v))))]
    for w, a in reversed(list(zip(v, ct.axes, strict=True))):
        scatter = [Loop(w, a.name, a.length, tuple(scatter), serial=True)]
    k.finish([*fill, *scatter])
    return full


def _merge(step: InstrLowering) -> Tensor:
    x = step.tensor(0)
    i = step.axis(0, step.ins.attr("axes")[0])
    n = x.axes[i + 1].length
    k = step.nest()
    xi = k.input(x)
    axes = step.out_axes()
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(x.axes))
    merged = Affine(((v[i], n), (v[i + 1], 1)))
    idx = [*at(v[:i]), merged, *at(v[i + 2 :])]
    return k.finish(nest(v, x.axes, [Store(out, tuple(idx), Load(xi, at(v)))]))


def _split(step: InstrLowering) -> Tensor:
    x = step.tensor(0)
    i = step.axis(0, step.ins.attr("axes")[0])
    k = step.nest()
    xi = k.input(x)
    axes = step.out_axes()
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(axes))
    joined = Affine(((v[i], axes[i + 1].length), (v[i + 1], 1)))
    idx = [*at(v[:i]), joined, *at(v[i + 2 :])]
    return k.finish(nest(v, axes, [Store(out, at(v), Load(xi, tuple(idx)))]))


def _reshape_like(step: InstrLowering) -> Tensor:
    """ct's data under x's shape: a view of ct's buffer (row-major, the same elements in
    the same order: no kernel), or a copy where the storage type changes (a real stays a
    view in its own type: a realization changes no launch)."""
    ct = step.tensor(0)
    out = step.out_dtype()
    if ct.dtype == out or (ct.dtype in REAL_DTYPES and out in REAL_DTYPES):
        return ct.named(step.out_axes())
    into = step.lowering.alloc(step.out_axes(), step.out_dtype(), step.site)
    return _copy(step, ct, into, "reshape_like")


def _shifted(v: list[str], axis: int, by: int) -> tuple[Affine, ...]:
    """The element `v` with its index along `axis` moved by `by`."""
    return tuple(Affine(((w, 1),), by if d == axis else 0) for d, w in enumerate(v))


def _crop(step: InstrLowering) -> Tensor:
    """`x[a: i .. j]`: out[…, t, …] = x[…, t + i, …]."""
    x = step.tensor(0)
    axis = step.axis(0, step.ins.attr("axes")[0])
    start = step.ins.attr("start").constant
    k = step.nest()
    xi = k.input(x)
    axes = step.out_axes()
    out = k.output(axes, step.like(x.dtype))
    v = k.vars(len(axes))
    return k.finish(nest(v, axes, [Store(out, at(v), Load(xi, _shifted(v, axis, start)))]))


def _pad(step: InstrLowering) -> Tensor:
    """`pad(x[, c], axis a, before: i, after: j)`: the result filled with c (or 0), then x
    stored at …, t + i, … (two nests writing distinct elements: no sum, no rounding)."""
    x = step.tensor(0)
    axis = step.axis(0, step.ins.attr("axes")[0])
    before = dict(step.ins.attr("shapes", ())).get("before")
    before = before.constant if before is not None else 0
    axes, dtype = step.out_axes(), step.out_dtype()
    if len(step.values) == 2 and isinstance(step.values[1], Tensor):
        k = step.nest("fill")
        ci = k.input(step.values[1])
        full = k.output(axes, dtype)
        v = k.vars(len(axes))
        full = k.finish(nest(v, axes, [Store(full, at(v), Load(ci, ()))]))
    else:
        c = step.values[1].text if len(step.values) == 2 else 0
        full = _fill(step, axes, dtype, c)
    k = step.nest()
    xi = k.input(x)
    out = k.output_into(full)
    v = k.vars(len(x.axes))
    k.finish(nest(v, x.axes, [Store(out, _shifted(v, axis, before), Load(xi, at(v)))]))
    return full


def _stack_axis(step: InstrLowering) -> Tensor:
    """`stack_axis(axis t, y0, …)`: one nest per operand, storing it at t = i."""
    axis = explicit(step.ins.out.type).axis(step.ins.attr("axes")[0])
    out_axes = step.out_axes()
    full = step.lowering.alloc(out_axes, step.out_dtype(), step.site)
    for i in range(len(step.values)):
        y = step.tensor(i)
        k = step.nest()
        yi = k.input(y)
        out = k.output_into(full)
        v = k.vars(len(y.axes))
        place = [*at(v[:axis]), Affine.constant(i), *at(v[axis:])]
        k.finish(nest(v, y.axes, [Store(out, tuple(place), Load(yi, at(v)))]))
    return full


# ---- trees of cotangents -----------------------------------------------------------------


def _put(step: InstrLowering) -> object:
    tree, a = step.values
    path = step.ins.attr("path")
    out = {}
    for key, leaf in tree.items():
        if key == path:
            out[key] = a
        elif key.startswith(path + "."):
            out[key] = a[key[len(path) + 1 :]]
        else:
            out[key] = _fill(step, leaf.axes, step.like(leaf.dtype))
    return out


def _put_item(step: InstrLowering) -> object:
    t, a = step.values
    i = step.ins.attr("index")
    zero = _zeros_like(_with(step, [t]))
    return tuple(a if j == i else z for j, z in enumerate(zero))


def _put_slice(step: InstrLowering) -> object:
    tree, a = step.values
    i = step.ins.attr("index")
    out = {}
    for key, leaf in tree.items():
        full = _fill(step, leaf.axes, step.like(leaf.dtype))
        inner = leaf.axes[1:]
        size = 1
        for ax in inner:
            size *= ax.length
        _copy(
            step, a[key], Tensor(full.buf, full.offset + i * size, inner, full.dtype), "put_slice"
        )
        out[key] = full
    return out


MOVES: dict[str, Callable[[InstrLowering], object]] = {
    "embed": _embed,
    "take": _take,
    "one_hot": _one_hot,
    "embed_grad": _embed_grad,
    "take_grad": _take_grad,
    "crop": _crop,
    "stack_axis": _stack_axis,
    "pad": _pad,
    "merge": _merge,
    "split": _split,
    "reshape_like": _reshape_like,
    "put": _put,
    "put_item": _put_item,
    "put_slice": _put_slice,
}
