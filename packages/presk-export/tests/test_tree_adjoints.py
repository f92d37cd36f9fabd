"""The PyTorch of the adjoints of trees and tuples (`put`, `put_slice`, `put_item`, and
`zeros_like`/`accum` of trees and tuples; presk_export.adjoint_rules) against the
interpreter, on the operands the interpreter itself gave them: each differentiated program
below is run (at 64 bits), every such instruction it executes is recorded with its
operands and result, and its PyTorch expression, evaluated on the same operands in
float64, must give the same structure (keys in the same order) and the same values bit
for bit (zeros and copies). The programs: a stacked tower's gradient in θ (`put` of a leaf
and of a subtree, `put_slice` of each block), a gradient in a tuple and a tuple returned by
a call (`put_item`), the tutorial's `loss_grad` (`put` of w and b); `slice` and `record`
(a block of the unrolled stack, the initializers' trees) with them."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from presk_ad import differentiate
from presk_core import adjoints as A
from presk_core import interp as I
from presk_core.ir import Function, Instr, Value
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize
from presk_export.body import Body, Tree
from presk_export.pyexpr import Expr
from presk_export.torch_rules import RULES
from presk_syntax.span import SourceMap
from presk_types.elab import load_program
from presk_types.types import ParamsT, TupleT

ROOT = Path(__file__).resolve().parents[3]
AD = "packages/presk-ad/tests/programs"
RUNS = [
    (f"{AD}/tower.psk", "tower_loss_grad", {}),
    (f"{AD}/tuple.psk", "f_dp", {}),
    (f"{AD}/calls.psk", "f_dx", {}),
    ("tutorial/04_grad.psk", "loss_grad", {"D": 3, "B": 2}),
]
TREE_OPS = ("put", "put_slice", "put_item", "zeros_like", "accum", "slice", "record")


def _recorded() -> list:
    """(instruction, operands, result) of each tree or tuple adjoint the runs execute."""
    seen: list = []
    saved = dict(I.rules)

    def watch(rule):
        def prepare(p):
            step = rule(p)

            def run(env):
                args = [g(env) for g in p.args]
                out = step(env)
                trees = any(isinstance(a.type, ParamsT | TupleT) for a in p.ins.args)
                if trees or p.ins.op == "record":
                    seen.append((p.ins, args, out))
                return out

            return run

        return prepare

    try:
        I.rules.update({op: watch(saved[op]) for op in TREE_OPS})
        for path, entry_text, dims in RUNS:
            core = differentiate(lower_program(load_program(str(ROOT / path), {}, SourceMap())))
            interp = I.Interpreter(core, 64)
            entry = parse_entry(entry_text, core, None, dims)
            inputs = [v for _, _, v in synthesize(entry, interp, 3)]
            interp.run(entry.function.name, inputs, entry.dims)
    finally:
        I.rules.clear()
        I.rules.update(saved)
    return seen


def _zeros_cases(cases: list) -> list:
    """`zeros_like` of each tree and tuple those instructions read (differentiation writes
    it for a parameter no cotangent reaches, which these runs do not have)."""
    out = []
    for ins, args, _ in cases:
        for a, v in zip(ins.args, args, strict=True):
            if isinstance(a.type, ParamsT | TupleT):
                made = Instr(Value(10_000 + a.id, a.type), "zeros_like", (a,), site=ins.site)
                out.append((made, [v], A.zeros_like(v)))
    return out


RECORDED = _recorded()
CASES = RECORDED + _zeros_cases(RECORDED)


def test_the_runs_execute_every_tree_adjoint():
    ops = {ins.op for ins, _, _ in RECORDED}
    assert ops == {"put", "put_slice", "put_item", "accum", "slice", "record"}
    subtree = [i for i, _, _ in CASES if i.op == "put" and isinstance(i.args[1].type, ParamsT)]
    assert subtree  # `put` of a whole sub-module's cotangent at its path


def _torch(v: object) -> object:
    if isinstance(v, dict):
        return {k: _torch(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return tuple(_torch(x) for x in v)
    return torch.as_tensor(np.vectorize(float, otypes=[float])(np.asarray(v, dtype=object)))


def _same(got: object, want: object) -> bool:
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and list(got) == list(want)
            and all(_same(got[k], want[k]) for k in want)
        )
    if isinstance(want, tuple):
        return (
            isinstance(got, tuple)
            and len(got) == len(want)
            and all(_same(g, w) for g, w in zip(got, want, strict=True))
        )
    return isinstance(got, torch.Tensor) and torch.equal(got, want)


def _leaves(v: object) -> list:
    if isinstance(v, dict):
        return [x for k in v for x in _leaves(v[k])]
    if isinstance(v, tuple):
        return [x for e in v for x in _leaves(e)]
    return [v]


def _evaluate(ins, args: list, how: str) -> object:
    """The rule's expression on the operands, bound as names (`v3`), or with the tuples as
    Python tuples of names and the trees as a module's dict of parameters (`how`)."""
    scope: dict[str, object] = {"torch": torch, "math": math}
    bound = {}
    for a, v in zip(ins.args, args, strict=True):
        value = _torch(v)
        if isinstance(value, torch.Tensor) or isinstance(value, dict):
            for leaf in _leaves(value):
                leaf.requires_grad_(True)
        name = f"v{a.id}"
        if how == "parts" and isinstance(value, tuple):
            bound[a.id] = tuple(Expr(f"{name}_{j}") for j in range(len(value)))
            scope.update({f"{name}_{j}": e for j, e in enumerate(value)})
        elif how == "parts" and isinstance(value, dict):
            bound[a.id] = Tree("net", name)  # a tree passed as its dict of parameters
            scope[name] = value
        else:
            bound[a.id] = Expr(name)
            scope[name] = value
    assert all(isinstance(a, Value) for a in ins.args)
    fn = Function("f", (), (), ins.out.type, (ins,), ins.out)
    body = Body(SimpleNamespace(imports=set()), fn, bound, {})
    expr = RULES[ins.op](body, ins)
    return eval(str(expr), scope), scope  # noqa: S307 (the rule's own expression)


@pytest.mark.parametrize("how", ["names", "parts"])
def test_the_pytorch_of_a_tree_adjoint_is_the_interpreters(how):
    assert CASES
    for ins, args, out in CASES:
        got, scope = _evaluate(ins, args, how)
        assert _same(got, _torch(out)), f"{ins.site} `{ins.op}`"
        leaves = [x for x in _leaves(got) if x.requires_grad]
        if leaves:  # functional: torch.autograd differentiates through it
            torch.stack([x.sum() for x in leaves]).sum().backward()


def test_a_block_of_a_modules_stack_is_the_module_lists_item():
    ins, _, _ = next(c for c in CASES if c[0].op == "slice")
    fn = Function("f", (), (), ins.out.type, (ins,), ins.out)
    body = Body(SimpleNamespace(imports=set()), fn, {ins.args[0].id: Tree("self.blocks")}, {})
    assert RULES["slice"](body, ins) == Tree(f"self.blocks[{ins.attr('index')}]")


def test_a_modules_attributes_are_not_a_tree_of_cotangents():
    from presk_export.pyexpr import ExportError

    ins, _, _ = next(c for c in CASES if c[0].op == "put")
    fn = Function("f", (), (), ins.out.type, (ins,), ins.out)
    bound = {a.id: Tree("self.net") for a in ins.args if isinstance(a.type, ParamsT)}
    bound |= {a.id: Expr(f"v{a.id}") for a in ins.args if a.id not in bound}
    body = Body(SimpleNamespace(imports=set()), fn, bound, {})
    with pytest.raises(ExportError, match="a dict of its leaves"):
        RULES["put"](body, ins)
