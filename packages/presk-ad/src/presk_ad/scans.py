"""The adjoint of `scan{n} F(pre…, c, xs…)` (issue 29): itself a pair of scans, written in the
symbolic count n (differentiation runs before specialization).

- **Forward, with the carries.** `F.scan_carries(pre…, c, x…) -> (c', (y, c))` is F that
  also outputs its incoming carry; its scan from the same c₀ gives the carries each step
  started from, stacked along t (the residuals of the steps, leaf by leaf).
- **Reverse.** `F.scan_vjp(pre…, (ct_c, acc…), x…, c, ct_y) -> ((ct_c', acc' …), (ct_x…))`
  calls `F.vjp` at step k's carry and elements with the cotangent (ct_c, ct_y_k): its
  carry is the carry's cotangent and the captured values' cotangents summed (`accum`, from
  zeros), its outputs the elements' cotangents, stacked along t. The scan runs from the
  last step back (`reverse`), from the cotangent of the last carry.

The sweep that reads them calls `F.vjp`, which computes each step's forward pass again
from its carry (in either `--remat` form): what is stored is the n carries, not each
step's intermediate values. The forward scan is run again in the sweep (its inputs are
the residuals of the caller), so the scan's gradient costs about two forward passes and
one sweep of the steps.
"""

from __future__ import annotations

from presk_core.build import FunctionBuilder
from presk_core.ir import Function, Instr, Operand, Origin, Value
from presk_types.presburger import Lin
from presk_types.structure_rules import stacked
from presk_types.types import Real, Shape, TupleT, Type, with_shape


def _without(t: Type, axis: str) -> Type:
    i = t.shape.axis(axis)
    return with_shape(t, Shape(t.shape.prefix, t.shape.axes[:i] + t.shape.axes[i + 1 :]))


class _Ctx:
    """A stand-in for a checker's context: `stacked` reads only its span."""

    def span(self, where=None):
        return None


def _tensors(t: Type) -> bool:
    if isinstance(t, TupleT):
        return all(_tensors(e) for e in t.elements)
    return isinstance(t, Real)


def _var_dims(fn: Function) -> tuple[tuple[str, Lin], ...]:
    return tuple((d, Lin.var(d)) for d in fn.dims)


def wanted(fn: Function, ins: Instr, active: set[int]) -> set[int]:
    """The parameters of F a scan's adjoint differentiates in: the carry always (it carries
    what the steps depend on; a discrete carry carries none), and the captured values and xs
    that are active."""
    m = ins.attr("scanned")
    n = len(ins.args)
    out = {n - m - 1} if _diff(fn.params[n - m - 1].type) else set()
    for j, (p, a) in enumerate(zip(fn.params, ins.args, strict=True)):
        if j != n - m - 1 and isinstance(a, Value) and a.id in active and _diff(p.type):
            out.add(j)
    return out


def _diff(t: Type) -> bool:
    from presk_ad.vjp import differentiable

    return differentiable(t)


def carries_fn(fn: Function, m: int) -> Function:
    """`F.scan_carries(pre…, c, x…) -> (c', (y, c))`."""
    name = f"{fn.name}.scan_carries"
    b = FunctionBuilder(name, FunctionBuilder.after(fn.params))
    b.origin, b.span = Origin(fn.name, f"scan_carries of {fn.name}"), fn.span
    carry_t, y_t = fn.result.elements
    c = fn.params[len(fn.params) - m - 1]
    r = b.emit("call", list(fn.params), fn.result, {"fn": fn.name, "dims": _var_dims(fn)})
    c2 = b.emit("get", [r], carry_t, {"index": 0})
    y = b.emit("get", [r], y_t, {"index": 1})
    pair_t = TupleT((y_t, c.type))
    pair = b.emit("tuple", [y, c], pair_t)
    out_t = TupleT((carry_t, pair_t))
    out = b.emit("tuple", [c2, pair], out_t)
    return Function(name, fn.dims, fn.params, out_t, tuple(b.body), out, (), fn.span)


def vjp_step_fn(fn: Function, vjp: Function, needed: list[int], pre: list[int], m: int) -> Function:
    """`F.scan_vjp(pre…, (ct_c, acc…), x…, c, ct_y) -> ((ct_c', acc'…), (ct_x…))`: `pre`
    the captured parameters whose cotangents are summed in the carry (in order), `needed`
    the parameters whose adjoints `F.vjp` returns."""
    name = f"{fn.name}.scan_vjp"
    n = len(fn.params)
    ci = n - m - 1
    carry_t, y_t = fn.result.elements
    b = FunctionBuilder(name, FunctionBuilder.after(fn.params))
    b.origin, b.span = Origin(fn.name, f"scan_vjp of {fn.name}"), fn.span
    own = _diff(carry_t)  # a discrete carry (indices, a key) has no cotangent to carry
    acc_t = TupleT(((carry_t,) if own else ()) + tuple(fn.params[j].type for j in pre))
    acc = b.fresh(acc_t, "acc")
    xs = list(fn.params[ci + 1 :])
    c = b.fresh(carry_t, "c")
    ct_y = b.fresh(y_t, "ct_y")
    params = (*fn.params[:ci], acc, *xs, c, ct_y)
    # a discrete carry's place in the cotangent: any value of its type (the sweep reads none)
    ct_c = b.emit("get", [acc], carry_t, {"index": 0}) if own else c
    ct = b.emit("tuple", [ct_c, ct_y], fn.result)
    args = [*fn.params[:ci], c, *xs, ct]
    r = b.emit("call", args, vjp.result, {"fn": vjp.name, "dims": _var_dims(fn)})

    def adjoint(j: int) -> Value:
        t = vjp.result.elements[needed.index(j)]
        a = b.emit("get", [r], t, {"index": needed.index(j)})
        return a if t == fn.params[j].type else b.emit("cast", [a], fn.params[j].type)

    parts = [adjoint(ci)] if own else []
    for k, j in enumerate(pre):
        old = b.emit("get", [acc], fn.params[j].type, {"index": k + own})
        parts.append(b.emit("accum", [old, adjoint(j)], fn.params[j].type))
    new_acc = b.emit("tuple", parts, acc_t)
    outs = [adjoint(j) for j in range(ci + 1, n) if j in needed]
    outs_t = TupleT(tuple(o.type for o in outs))
    ys = b.emit("tuple", outs, outs_t)
    out_t = TupleT((acc_t, outs_t))
    out = b.emit("tuple", [new_acc, ys], out_t)
    return Function(name, fn.dims, params, out_t, tuple(b.body), out, (), fn.span)


def scan_adjoint(s, ins: Instr, ct: Operand) -> None:
    """The adjoint of a `scan` instruction in the sweep `s` (presk_ad.vjp.Sweep)."""
    from presk_ad.vjp import ADError

    ad = s.ad
    name = ins.attr("fn")
    fn = ad.program.function(name)
    needed = sorted(ad.needed.get(name, ()))
    if not needed:
        return
    if ins.attr("reverse", False):
        raise ADError(f"a reverse `scan` of `{name}` (second order)")
    m, t, count = ins.attr("scanned"), ins.attr("axes")[0], ins.attr("count")
    n = len(ins.args)
    ci = n - m - 1
    carry_t, ys_t = ins.out.type.elements
    own = _diff(carry_t)
    if (own and not _tensors(carry_t)) or not _tensors(fn.result.elements[1]):
        raise ADError(f"a `scan` of `{name}` whose carry or outputs are not real tensors")
    dims = ins.attr("dims", ())
    c0, xss = ins.args[ci], list(ins.args[ci + 1 :])
    pre = [j for j in needed if j < ci]
    ctx = _Ctx()
    # the forward scan again, its steps' incoming carries stacked
    carries = ad.scan_helper(f"{name}.scan_carries", lambda: carries_fn(fn, m))
    cs_t = stacked(carry_t, t, count, ctx)
    fwd_t = TupleT((carry_t, TupleT((ys_t, cs_t))))
    attrs = {"fn": carries.name, "dims": dims, "count": count, "axes": (t,), "scanned": m}
    fwd = s.emit("scan", list(ins.args), fwd_t, attrs)
    both = s.emit("get", [fwd], fwd_t.elements[1], {"index": 1})
    cs = s.emit("get", [both], cs_t, {"index": 1})
    # the reverse scan of the steps' `.vjp`
    vjp = ad.vjp(name)
    step = ad.scan_helper(f"{name}.scan_vjp", lambda: vjp_step_fn(fn, vjp, needed, pre, m))
    ct_c = s.emit("get", [ct], carry_t, {"index": 0})
    ct_ys = s.emit("get", [ct], ys_t, {"index": 1})
    zeros = [s.emit("zeros_like", [ins.args[j]], ins.args[j].type) for j in pre]
    acc_t = TupleT(((carry_t,) if own else ()) + tuple(ins.args[j].type for j in pre))
    acc0 = s.emit("tuple", [ct_c, *zeros] if own else zeros, acc_t)
    active_xs = [j for j in range(ci + 1, n) if j in needed]
    outs_t = TupleT(tuple(stacked(_without(ins.args[j].type, t), t, count, ctx) for j in active_xs))
    back_t = TupleT((acc_t, outs_t))
    attrs = {**attrs, "fn": step.name, "scanned": m + 2, "reverse": True}
    args = [*ins.args[:ci], acc0, *xss, cs, ct_ys]
    back = s.emit("scan", args, back_t, attrs)
    acc = s.emit("get", [back], acc_t, {"index": 0})
    if own:
        s.add(c0, _as(s, s.emit("get", [acc], carry_t, {"index": 0}), c0))
    for k, j in enumerate(pre):
        s.add(ins.args[j], s.emit("get", [acc], ins.args[j].type, {"index": k + own}))
    if active_xs:
        outs = s.emit("get", [back], outs_t, {"index": 1})
        for k, j in enumerate(active_xs):
            x = ins.args[j]
            a = s.emit("get", [outs], outs_t.elements[k], {"index": k})
            s.add(x, _placed(s, a, x, t))


def _as(s, a: Operand, x: Operand) -> Operand:
    return a if a.type == x.type else s.emit("cast", [a], x.type)


def _placed(s, a: Operand, x: Operand, t: str) -> Operand:
    """The elements' cotangents (t first) on xs's own axes (t where xs has it)."""
    if x.type.shape.axis(t) == 0:
        return _as(s, a, x)
    names = (tuple(a.type.shape.names()), tuple(x.type.shape.names()))
    return s.emit("spread", [a, x], x.type, {"_names": names})
