"""Stack unrolling: each `fold{L}` of a constant L as L calls (`--unroll-stack`); each
`scan{L}` of a constant L (a symbolic scan after specialization, issue 29) as L calls, as
the checker writes a scan of a static length."""

from __future__ import annotations

from dataclasses import replace

from presk_types.presburger import Lin
from presk_types.types import AxisT, ParamsT, Real, Shape, TupleT, Type, with_shape

from presk_core.build import FunctionBuilder, made_from
from presk_core.ir import Function, Program


def unroll_stack(program: Program) -> Program:
    """`fold{3} Block.apply(tree, x)` as `slice tree, 0`, `call Block.apply(…)`, three times;
    the last call binds the fold's value at the fold's site, the others are made from it."""
    return replace(program, functions=tuple(_unroll(f) for f in program.functions))


def unroll_scans(program: Program) -> Program:
    """Each `scan{L}` of a constant L as L calls, and nothing else: the kernels' form of a
    specialized program (presk_kernel.lower), whose folds stay as they are."""
    ops = ("scan",)
    return replace(program, functions=tuple(_unroll(f, ops) for f in program.functions))


def _unroll(fn: Function, ops: tuple[str, ...] = ("fold", "scan")) -> Function:
    def unrolled(ins) -> bool:
        return ins.op in ops and ins.attr("count").is_const

    if not any(unrolled(i) for i in fn.body):
        return fn
    b = FunctionBuilder(fn.name, FunctionBuilder.after(fn.params, fn.body))
    for ins in fn.body:
        if not unrolled(ins):
            b.place(ins, "unroll")
            continue
        if ins.op == "scan":
            _scan(b, ins)
            continue
        tree, x, *rest = ins.args
        b.origin, b.span = made_from(ins, "unroll of fold"), ins.span
        count = ins.attr("count").constant
        for i in range(count):
            part = b.emit("slice", [tree], _block_tree(tree.type), {"index": i})
            attrs = {"fn": ins.attr("fn"), "dims": ins.attr("dims", ())}
            if i + 1 < count:
                x = b.emit("call", [part, x, *rest], ins.out.type, attrs)
            else:  # the last call binds the fold's value, at the fold's site
                x = b.bind(ins.out, "call", [part, x, *rest], attrs)
    return replace(fn, body=tuple(b.body))


def _block_tree(t: ParamsT) -> ParamsT:
    inst = t.instance
    return ParamsT(inst.inner) if inst.stack is not None else t


def _without(t: Type, axis: str) -> Type:
    i = t.shape.axis(axis)
    return with_shape(t, Shape(t.shape.prefix, t.shape.axes[:i] + t.shape.axes[i + 1 :]))


def _scan(b: FunctionBuilder, ins) -> None:
    """`scan{L}[t] F(pre…, c, xs…)` as the checker writes a scan of a static length: step k's
    element of each xs `sum(axis t, crop(xs, t, k .. k + 1))`, a call of F, the carry and
    the output `get`s of its result; the outputs joined by `stack_axis` in index order (leaf
    by leaf for a tuple), the pair bound at the scan's site."""
    b.origin, b.span = made_from(ins, "unroll of scan"), ins.span
    count, m, t = ins.attr("count").constant, ins.attr("scanned"), ins.attr("axes")[0]
    n = len(ins.args)
    pre, c, xss = list(ins.args[: n - m - 1]), ins.args[n - m - 1], ins.args[n - m :]
    carry_t, ys_t = ins.out.type.elements
    y_t = _element(ys_t, t)
    attrs = {"fn": ins.attr("fn"), "dims": ins.attr("dims", ())}
    ys: list = [None] * count
    order = range(count - 1, -1, -1) if ins.attr("reverse", False) else range(count)
    for k in order:
        one = {"axes": (t,), "start": Lin.const(k), "stop": Lin.const(k + 1)}
        xs = [_step(b, x, t, one) for x in xss]
        r = b.emit("call", [*pre, c, *xs], TupleT((carry_t, y_t)), attrs)
        c = b.emit("get", [r], carry_t, {"index": 0})
        ys[k] = b.emit("get", [r], y_t, {"index": 1})
    b.bind(ins.out, "tuple", [c, _stack(b, ys, ys_t, t)], {})


def _step(b: FunctionBuilder, x, axis: str, one: dict):
    """Step k's element of x: its one element along the axis (of a tuple, leaf by leaf)."""
    if isinstance(x.type, TupleT):
        parts = []
        for i, e in enumerate(x.type.elements):
            leaf = b.emit("get", [x], e, {"index": i})
            parts.append(_step(b, leaf, axis, one))
        return b.emit("tuple", parts, TupleT(tuple(p.type for p in parts)))
    part = b.emit("crop", [x], _one(x.type, axis), one)
    return b.emit("sum", [part], _without(x.type, axis), {"axes": (axis,)})


def _one(t: Type, axis: str) -> Type:
    i = t.shape.axis(axis)
    axes = list(t.shape.axes)
    axes[i] = AxisT(axis, Lin.const(1))
    return with_shape(t, Shape(t.shape.prefix, tuple(axes)))


def _element(ys_t: Type, axis: str) -> Type:
    if isinstance(ys_t, TupleT):
        return TupleT(tuple(_element(e, axis) for e in ys_t.elements))
    return _without(ys_t, axis)


def _stack(b: FunctionBuilder, ys: list, ys_t: Type, axis: str):
    if isinstance(ys_t, TupleT):
        parts = []
        for i, e in enumerate(ys_t.elements):
            leaf = [b.emit("get", [y], _element(e, axis), {"index": i}) for y in ys]
            parts.append(_stack(b, leaf, e, axis))
        return b.emit("tuple", parts, ys_t)
    if not ys:  # no step: zeros of the stacked type
        shapes = tuple((a.name, a.length) for a in ys_t.shape.axes)
        assert isinstance(ys_t, Real), ys_t
        return b.emit("zeros", [], ys_t, {"shapes": shapes})
    return b.emit("stack_axis", ys, ys_t, {"axes": (axis,)})
