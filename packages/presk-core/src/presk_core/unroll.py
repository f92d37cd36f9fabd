"""Stack unrolling: each `fold{L}` of a constant L as L calls (`--unroll-stack`)."""

from __future__ import annotations

from dataclasses import replace

from presk_types.types import ParamsT

from presk_core.build import FunctionBuilder, made_from
from presk_core.ir import Function, Program


def unroll_stack(program: Program) -> Program:
    """`fold{3} Block.apply(tree, x)` as `slice tree, 0`, `call Block.apply(…)`, three times;
    the last call binds the fold's value at the fold's site, the others are made from it."""
    return replace(program, functions=tuple(_unroll(f) for f in program.functions))


def _unroll(fn: Function) -> Function:
    if not any(i.op == "fold" and i.attr("count").is_const for i in fn.body):
        return fn
    b = FunctionBuilder(fn.name, FunctionBuilder.after(fn.params, fn.body))
    for ins in fn.body:
        if ins.op != "fold" or not ins.attr("count").is_const:
            b.place(ins, "unroll")
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
