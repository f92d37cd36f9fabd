"""`NESTS`: the loop nests of the computing operations (elementwise, reductions,
contractions); presk_kernel.moves has those that move data."""

from __future__ import annotations

from collections.abc import Callable

from presk_core.ir import Lit
from presk_types.shapes import alignment
from presk_types.types import Shape

from presk_kernel import nests as N
from presk_kernel.ir import Affine, Axis, Const, Index, Let, Load, Loop, Reduce, Store, Var
from presk_kernel.lower import InstrLowering, Known, Tensor, explicit
from presk_kernel.nests import at, nest, op


def _elementwise(step: InstrLowering, formula: Callable | None = None) -> Tensor:
    formula = formula or N.ELEMENTWISE[step.ins.op]
    k = step.nest()
    step.inputs(k)
    axes = step.out_axes()
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(axes))
    maps = step.ins.attr("_align")
    args = [step.operand(k, i, v, axes, maps[i] if maps else None) for i in range(len(step.values))]
    return k.finish(nest(v, axes, [Store(out, at(v), formula(k.const, *args))]))


def _leafwise(step: InstrLowering, fn: Callable) -> object:
    """An operation on trees and tuples, leaf by leaf (accum, zeros_like)."""

    def go(*vs):
        match vs[0]:
            case dict():
                return {key: go(*(v[key] for v in vs)) for key in vs[0]}
            case tuple():
                return tuple(go(*parts) for parts in zip(*vs, strict=True))
        return fn(*vs)

    return go(*step.values)


def _fill(step: InstrLowering, axes, dtype: str, value: str | int = 0, into: Tensor | None = None):
    k = step.nest("fill")
    out = k.output(axes, dtype) if into is None else k.output_into(into)
    v = k.vars(len(axes))
    c = Const(value == 1, "bool") if dtype == "bool" else k.const(value)
    c = Const(int(value), "i64") if dtype == "i64" else c
    return k.finish(nest(v, axes, [Store(out, at(v), c)]))


def _copy(step: InstrLowering, src: Tensor, into: Tensor, name: str) -> Tensor:
    k = step.nest(name)
    xi = k.input(src.named(into.axes))
    out = k.output_into(into)
    v = k.vars(len(into.axes))
    return k.finish(nest(v, into.axes, [Store(out, at(v), Load(xi, at(v)))]))


def _accum(step: InstrLowering) -> object:
    if isinstance(step.values[0], Tensor | Known):
        return _elementwise(step)

    def add(a: Tensor, b: Tensor) -> Tensor:
        k = step.nest("accum")
        ai, bi = k.input(a), k.input(b)
        out = k.output(a.axes, step.like(a.dtype))
        v = k.vars(len(a.axes))
        expr = op("add", Load(ai, at(v)), Load(bi, at(v)))
        return k.finish(nest(v, a.axes, [Store(out, at(v), expr)]))

    return _leafwise(step, add)


def _zeros_like(step: InstrLowering) -> object:
    def zero(x):
        if isinstance(x, Known):
            return Known("0")
        return _fill(step, x.axes, step.like(x.dtype))

    return _leafwise(step, zero)


def _pow(step: InstrLowering) -> Tensor:
    y = step.ins.args[1]
    if isinstance(y, Lit):
        q = Known(y.text).text
        try:
            n = int(q)
        except ValueError:
            n = None
        if n is not None:
            return _elementwise(step, lambda c, x, _y: op("pow", x, attr=n))
    return _elementwise(step, lambda c, x, e: op("powf", x, e))


def _compare(step: InstrLowering) -> Tensor:
    return _elementwise(step, lambda c, a, b: op("compare", a, b, attr=step.ins.attr("op")))


def _causal_mask(step: InstrLowering) -> Tensor:
    k = step.nest()
    axes = step.out_axes()
    out = k.output(axes, "bool")
    i, j = k.vars(2)
    expr = op("compare", Index(j), Index(i), attr="<=")
    return k.finish(nest([i, j], axes, [Store(out, at([i, j]), expr)]))


def _iota(step: InstrLowering) -> Tensor:
    k = step.nest()
    axes = step.out_axes()
    out = k.output(axes, step.out_dtype())
    (i,) = k.vars(1)
    return k.finish(nest([i], axes, [Store(out, at([i]), Index(i))]))


def _expand(step: InstrLowering) -> Tensor:
    ct, x = step.values
    axes = step.out_axes()
    names = step.ins.attr("axes", ())
    red = [step.axis(1, names[0])] if names else list(range(len(axes)))
    k = step.nest()
    ci = k.input(ct) if isinstance(ct, Tensor) else None
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(axes))
    value = (
        k.const(ct.text)
        if ci is None
        else Load(ci, at([w for i, w in enumerate(v) if i not in red]))
    )
    if step.ins.attr("mean"):
        value = op("div", value, k.const(N.count(x, red)))
    return k.finish(nest(v, axes, [Store(out, at(v), value)]))


def _spread(step: InstrLowering) -> Tensor:
    ct_names, x_names = step.ins.attr("_names")
    axes = step.out_axes()
    k = step.nest()
    ci = k.input(step.tensor(0))
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(axes))
    load = Load(ci, at([v[list(x_names).index(n)] for n in ct_names]))
    return k.finish(nest(v, axes, [Store(out, at(v), load)]))


def _pick2(step: InstrLowering) -> Tensor:
    which, kind = step.ins.attr("which"), step.ins.attr("kind")

    def formula(c, ct, a, b):
        mine = op("compare", a, b, attr=">" if kind == "max" else "<")
        if which == 1:
            mine = op("compare", b, a, attr=">" if kind == "max" else "<")
        tie = op("compare", a, b, attr="==")
        return op("select", mine, ct, op("select", tie, op("div", ct, c(2)), c(0)))

    return _elementwise(step, formula)


# ---- reductions --------------------------------------------------------------------------


def _reduced(step: InstrLowering, i: int = 0) -> tuple[Tensor, list[int]]:
    x = step.tensor(i)
    names = step.ins.attr("axes", ())
    return x, [step.axis(i, names[0])] if names else list(range(len(x.axes)))


def _reduce(kind: str, mean: bool = False) -> Callable[[InstrLowering], Tensor]:
    def rule(step: InstrLowering) -> Tensor:
        x, red = _reduced(step)  # every axis: one fold in their row-major order
        n = N.count(x, red)
        finish = (lambda acc: op("div", acc, Const(float(n), step.compute))) if mean else None
        return N.reduce_rows(step, x, red, kind, finish)

    return rule


def _rows(step: InstrLowering, x: Tensor, axis: int, body: Callable) -> Tensor:
    """A nest over every row of x along `axis`: `body(k, xi, vars)` gives the statements
    before the row's loop and the value stored at each of its elements."""
    k = step.nest()
    xi = k.input(x)
    extra = body.inputs(k) if hasattr(body, "inputs") else None
    out = k.output(step.out_axes(), step.out_dtype())
    v = k.vars(len(x.axes))
    before, value, j = body(k, xi, v, extra)
    row = [j if i == axis else w for i, w in enumerate(v)]
    a = x.axes[axis]
    final = Loop(j, a.name, a.length, (Store(out, at(row), value),))
    outer = [w for i, w in enumerate(v) if i != axis]
    outer_axes = [ax for i, ax in enumerate(x.axes) if i != axis]
    return k.finish(nest(outer, outer_axes, [*before, final]))


def _softmax(log: bool) -> Callable[[InstrLowering], Tensor]:
    def rule(step: InstrLowering) -> Tensor:
        x = step.tensor(0)
        axis = step.axis(0, step.ins.attr("axes")[0])
        where = bool(step.ins.attr("where"))

        def body(k, xi, v, mi):
            mask = None
            if mi is not None:
                src = explicit(step.ins.args[-1].type)
                place = alignment(src, Shape(False, explicit(step.ins.args[0].type).axes))
                m = step.values[-1]

                def mask(row):
                    idx = [
                        Affine.constant(0)
                        if ax.length == 1 != x.axes[len(x.axes) + p].length
                        else row[len(x.axes) + p]
                        for ax, p in zip(m.axes, place, strict=True)
                    ]
                    return Load(mi, at(idx))

            return N.softmax_body(k, xi, x, mask, v, axis, log)

        body.inputs = lambda k: k.input(step.tensor(len(step.values) - 1)) if where else None
        return _rows(step, x, axis, body)

    return rule


def _softmax_grad(log: bool) -> Callable[[InstrLowering], Tensor]:
    def rule(step: InstrLowering) -> Tensor:
        ct, y = step.tensor(0), step.tensor(1)
        axis = step.axis(1, step.ins.attr("axes")[0])

        def body(k, yi, v, ci):
            j, acc = k.var(), k.temp()
            row = at([j if i == axis else w for i, w in enumerate(v)])
            c, yv = Load(ci, row), Load(yi, row)
            a = y.axes[axis]
            term = c if log else op("mul", c, yv)
            red = Reduce(acc, "add", ((j, a.name, a.length),), (), (term,), k.compute)
            if log:
                value = op("sub", c, op("mul", op("exp", yv), Var(acc)))
            else:
                value = op("mul", yv, op("sub", c, Var(acc)))
            return [red], value, j

        body.inputs = lambda k: k.input(ct)
        return _rows(step, y, axis, body)

    return rule


def _argmax(step: InstrLowering) -> Tensor:
    x = step.tensor(0)
    names = step.ins.attr("axes", ())
    axis = step.axis(0, names[0]) if names else len(x.axes) - 1
    k = step.nest()
    xi = k.input(x)
    out = k.output(step.out_axes(), "i64")
    v = k.vars(len(x.axes))
    stmts, r = N.first_extremum(k, xi, x, v, axis, "max")
    outer = [w for i, w in enumerate(v) if i != axis]
    outer_axes = [a for i, a in enumerate(x.axes) if i != axis]
    return k.finish(nest(outer, outer_axes, [*stmts, Store(out, at(outer), r)]))


def _top_k(step: InstrLowering) -> Tensor:
    """`top_k(axis a, x, k: K)`'s indices (issue 29), by selection: out[…, 0, …] is `argmax`'s
    index, and out[…, t + 1, …] the first in `argmax`'s order of the elements after
    out[…, t, …] in that order (m is after p where `max(x[p], x[m])` is x[p] bit for bit and
    they differ, or their bits are equal and p < m): a `max` fold over them, then the least
    index that holds it. The K − 1 steps in a serial loop (each reads the index the step
    before stored), two folds of n a step: O(K·n) comparisons a row."""
    x = step.tensor(0)
    axis = step.axis(0, step.ins.attr("axes")[0])
    a = x.axes[axis]
    n = a.length
    k = step.nest()
    xi = k.input(x)
    axes = step.out_axes()
    out = k.output(axes, "i64")
    count = axes[axis].length
    v = k.vars(len(axes))
    outer = [w for d, w in enumerate(v) if d != axis]
    outer_axes = [ax for d, ax in enumerate(axes) if d != axis]

    def row(i) -> tuple:
        at_ = Affine.var(i) if isinstance(i, str) else i
        return tuple(at_ if d == axis else Affine.var(u) for d, u in enumerate(v))

    if count == 0:
        return k.finish(nest(v, axes, []))
    firsts, r = N.first_extremum(k, xi, x, list(v), axis, "max")
    body = [*firsts, Store(out, row(Affine.constant(0)), r)]
    if count > 1:
        t, m, best, pick, pv, xv = k.var(), k.var(), k.temp(), k.temp(), k.temp(), k.temp()
        lets = [Let(pv, Load(out, row(t))), Let(xv, k.load(xi, row(Var(pv))))]
        p, xp, xm = Var(pv), Var(xv), k.load(xi, row(m))
        same = op("same", xp, xm)
        above = op("and", op("same", op("max", xp, xm), xp), op("not", same))
        after = op("or", above, op("and", same, op("compare", p, Index(m), attr="<")))
        fold = ((m, a.name, n),)
        top = Reduce(best, "max", fold, (), (op("select", after, xm, k.const("-inf")),), k.compute)
        hit = op("and", after, op("same", xm, Var(best)))
        least = op("select", hit, Index(m), Const(n, "i64"))
        first = Reduce(pick, "min", fold, (), (least,), "i64")
        store = Store(out, row(Affine(((t, 1),), 1)), Var(pick))
        body.append(Loop(t, a.name, count - 1, (*lets, top, first, store), serial=True))
    return k.finish(nest(outer, outer_axes, body))


def _reduce_pick(step: InstrLowering) -> Tensor:
    ct, x = step.values
    names = step.ins.attr("axes", ())
    kind = step.ins.attr("kind")
    axes = step.out_axes()
    if names:
        axis, xv, view = step.axis(1, names[0]), x, None
    else:
        axis, xv = 0, x.named((Axis(None, x.size),))
        view = xv
    k = step.nest()
    xi = k.input(xv)
    ci = k.input(ct) if isinstance(ct, Tensor) else None
    full = step.lowering.alloc(axes, step.out_dtype(), step.site)
    out = k.output_into(full if view is None else full.named(view.axes))
    v = k.vars(len(xv.axes))
    stmts, r = N.first_extremum(k, xi, xv, v, axis, kind)
    outer = [w for i, w in enumerate(v) if i != axis]
    value = k.const(ct.text) if ci is None else Load(ci, at(outer))
    j = v[axis]
    put = op("select", op("compare", Index(j), r, attr="=="), value, k.const(0))
    a = xv.axes[axis]
    final = Loop(j, a.name, a.length, (Store(out, at(v), put),))
    outer_axes = [ax for i, ax in enumerate(xv.axes) if i != axis]
    k.finish(nest(outer, outer_axes, [*stmts, final]))
    return full


def _sum_to(step: InstrLowering) -> object:
    ct, x = step.values
    if not isinstance(ct, Tensor):
        return ct
    if isinstance(x, Known) or not x.axes:
        return N.reduce_rows(step, ct, list(range(len(ct.axes))), "add")
    where = step.ins.attr("_align") or alignment(
        explicit(step.ins.args[1].type), explicit(step.ins.args[0].type)
    )
    targets = {len(ct.axes) + p: i for i, p in enumerate(where)}
    red = [
        d
        for d in range(len(ct.axes))
        if d not in targets or (x.axes[targets[d]].length == 1 != ct.axes[d].length)
    ]
    k = step.nest()
    ci = k.input(ct)
    axes = step.out_axes()
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(axes))
    rv = k.vars(len(red))
    idx, rit = [], iter(rv)
    for d in range(len(ct.axes)):
        idx.append(next(rit) if d in red else v[targets[d]])
    for d in red:  # a kept length-1 axis summed into element 0
        if d in targets:
            v[targets[d]] = Affine.constant(0)
    acc = k.temp()
    reduce = Reduce(
        acc,
        "add",
        tuple((w, ct.axes[d].name, ct.axes[d].length) for w, d in zip(rv, red, strict=True)),
        (),
        (Load(ci, at(idx)),),
        step.compute,
    )
    loops = [w if isinstance(w, str) else k.var() for w in v]
    return k.finish(nest(loops, axes, [reduce, Store(out, at(v), Var(acc))]))


def _with(step: InstrLowering, values: list) -> InstrLowering:
    return InstrLowering(step.lowering, step.ins, step.site, values)


# ---- contractions ------------------------------------------------------------------------


def _contract(step: InstrLowering, a: Tensor, b: Tensor, ia: list, ib: list, summed) -> Tensor:
    """out[v] = fold fma over `summed` of a[ia]·b[ib]; ia, ib name out vars by position
    (int) and summed vars by ('s', n)."""
    k = step.nest()
    ai, bi = k.input(a), k.input(b)
    axes = step.out_axes()
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(axes))
    sv = k.vars(len(summed))

    def pick(spec):
        return [sv[s[1]] if isinstance(s, tuple) else v[s] for s in spec]

    la, lb = Load(ai, at(pick(ia))), Load(bi, at(pick(ib)))
    if summed:
        acc = k.temp()
        red = Reduce(
            acc,
            "fma",
            tuple((w, *s) for w, s in zip(sv, summed, strict=True)),
            (),
            (la, lb),
            step.compute,
        )
        body = [red, Store(out, at(v), Var(acc))]
    else:
        body = [Store(out, at(v), op("mul", la, lb))]
    return k.finish(nest(v, axes, body))


def _dot(step: InstrLowering) -> Tensor:
    a, b = step.tensor(0), step.tensor(1)
    na = len(a.axes) - 1
    n = a.axes[-1]
    ia = [*range(na), ("s", 0)]
    ib = [("s", 0), *range(na, na + len(b.axes) - 1)]
    return _contract(step, a, b, ia, ib, [(n.name, n.length)])


def _dot_left(step: InstrLowering) -> Tensor:
    ct, b = step.tensor(0), step.tensor(1)
    t = len(b.axes) - 1
    lead = len(ct.axes) - t
    ia = [*range(lead), *(("s", i) for i in range(t))]
    ib = [lead, *(("s", i) for i in range(t))]
    return _contract(step, ct, b, ia, ib, [(x.name, x.length) for x in b.axes[1:]])


def _dot_right(step: InstrLowering) -> Tensor:
    a, ct = step.tensor(0), step.tensor(1)
    lead = len(a.axes) - 1
    ia = [*(("s", i) for i in range(lead)), 0]
    ib = [*(("s", i) for i in range(lead)), *range(1, 1 + len(ct.axes) - lead)]
    return _contract(step, a, ct, ia, ib, [(x.name, x.length) for x in a.axes[:lead]])


def _ein(step: InstrLowering) -> Tensor:
    out = list(step.ins.attr("axes"))
    names = [list(n) for n in step.ins.attr("_names")]
    if len(step.values) == 1:
        x, nx = step.tensor(0), names[0]
        summed = [n for n in nx if n not in out]
        spec = [out.index(n) if n in out else ("s", summed.index(n)) for n in nx]
        k = step.nest()
        xi = k.input(x)
        axes = step.out_axes()
        o = k.output(axes, step.out_dtype())
        v = k.vars(len(axes))
        sv = k.vars(len(summed))
        load = Load(xi, at([sv[s[1]] if isinstance(s, tuple) else v[s] for s in spec]))
        if not summed:
            return k.finish(nest(v, axes, [Store(o, at(v), load)]))
        acc = k.temp()
        sums = tuple((w, n, x.axes[nx.index(n)].length) for w, n in zip(sv, summed, strict=True))
        red = Reduce(acc, "add", sums, (), (load,), step.compute)
        return k.finish(nest(v, axes, [red, Store(o, at(v), Var(acc))]))
    a, b = step.tensor(0), step.tensor(1)
    na, nb = names
    a, na = _sum_alone(step, a, na, nb, out)
    b, nb = _sum_alone(step, b, nb, na, out)
    summed = [n for n in na if n in nb and n not in out]

    def spec(ns):
        return [out.index(n) if n in out else ("s", summed.index(n)) for n in ns]

    lengths = [(n, a.axes[na.index(n)].length) for n in summed]
    return _contract(step, a, b, spec(na), spec(nb), lengths)


def _sum_alone(step: InstrLowering, x: Tensor, names: list, other: list, out: list):
    """Sum first the axes of one operand in neither the other nor the output (reference)."""
    for n in [n for n in names if n not in other and n not in out][::-1]:
        d = names.index(n)
        kept = tuple(a for i, a in enumerate(x.axes) if i != d)
        k = step.nest(f"sum axis {n}")
        xi = k.input(x)
        o = k.output(kept, step.like(x.dtype))
        v, r, acc = k.vars(len(kept)), k.var(), k.temp()
        idx = v[:d] + [r] + v[d:]
        red = Reduce(
            acc, "add", ((r, n, x.axes[d].length),), (), (Load(xi, at(idx)),), step.compute
        )
        x = k.finish(nest(v, kept, [red, Store(o, at(v), Var(acc))]))
        names = names[:d] + names[d + 1 :]
    return x, names


NESTS: dict[str, Callable[[InstrLowering], object]] = {
    **{name: _elementwise for name in N.ELEMENTWISE},
    "accum": _accum,
    "zeros_like": _zeros_like,
    "pow": _pow,
    "compare": _compare,
    "causal_mask": _causal_mask,
    "zeros": lambda step: _fill(step, step.out_axes(), step.out_dtype(), 0),
    "ones": lambda step: _fill(step, step.out_axes(), step.out_dtype(), 1),
    "pi": lambda step: _fill(step, step.out_axes(), step.out_dtype(), "π"),  # the nearest double
    "iota": _iota,
    "expand": _expand,
    "spread": _spread,
    "pick2": _pick2,
    "sum": _reduce("add"),
    "mean": _reduce("add", mean=True),
    "max": _reduce("max"),
    "min": _reduce("min"),
    "argmax": _argmax,
    "top_k": _top_k,
    "softmax": _softmax(False),
    "log_softmax": _softmax(True),
    "softmax_grad": _softmax_grad(False),
    "log_softmax_grad": _softmax_grad(True),
    "sum_to": _sum_to,
    "reduce_pick": _reduce_pick,
    "dot": _dot,
    "ein": _ein,
    "dot_left": _dot_left,
    "dot_right": _dot_right,
}
"""The loop nest of every tensor operation (the structural ones are the host's: lower.HOST)."""
