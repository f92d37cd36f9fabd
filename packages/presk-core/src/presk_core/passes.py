"""Passes over PSK-Core. `unroll_stack`: each `fold{L}` of a constant L as L calls."""

from __future__ import annotations

from dataclasses import replace

from presk_types.types import ParamsT

from presk_core.ir import Function, Instr, Program, Value


def unroll_stack(program: Program) -> Program:
    """`fold{3} Block.apply(tree, x)` as `slice tree, 0`, `call Block.apply(…)`, three times."""
    return Program(tuple(_unroll(f) for f in program.functions))


def _unroll(fn: Function) -> Function:
    if not any(i.op == "fold" and i.attr("count").is_const for i in fn.body):
        return fn
    count = max([p.id for p in fn.params] + [i.out.id for i in fn.body]) + 1
    body: list[Instr] = []
    renamed: dict[int, Value] = {}

    def fresh(t) -> Value:
        nonlocal count
        count += 1
        return Value(count - 1, t)

    for ins in fn.body:
        args = tuple(renamed.get(a.id, a) if isinstance(a, Value) else a for a in ins.args)
        ins = replace(ins, args=args)
        if ins.op != "fold" or not ins.attr("count").is_const:
            body.append(ins)
            continue
        tree, x, *rest = ins.args
        for i in range(ins.attr("count").constant):
            part = fresh(_block_tree(tree.type))
            body.append(Instr(part, "slice", (tree,), (("index", i),), ins.span))
            out = fresh(ins.out.type) if i + 1 < ins.attr("count").constant else ins.out
            attrs = (("fn", ins.attr("fn")), ("dims", ins.attr("dims", ())))
            body.append(Instr(out, "call", (part, x, *rest), attrs, ins.span))
            x = out
    return replace(fn, body=tuple(body))


def _block_tree(t: ParamsT) -> ParamsT:
    inst = t.instance
    return ParamsT(inst.inner) if inst.stack is not None else t
