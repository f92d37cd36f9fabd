"""The PyTorch of the operations differentiation writes (presk_export.adjoint_rules) against
the interpreter: every such instruction of the differentiated tutorial and reference
programs (at tiny constants), on random data at small lengths, its PyTorch expression
evaluated in float64 and its MPFR evaluation at 128 bits, within 1e-12."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from presk_ad import ADError, differentiate
from presk_core import mpfr as M
from presk_core.interp import Frame, Interpreter, eval_rules
from presk_core.ir import Function, Program, Value
from presk_core.lower import lower_program
from presk_export.body import Body
from presk_export.pyexpr import Expr
from presk_export.torch_rules import RULES
from presk_syntax.diagnostics import DiagnosticError
from presk_syntax.span import SourceMap
from presk_types.elab import load_program
from presk_types.ops import ADJOINT_OPS
from presk_types.types import Bool, Idx, Real, shape_of

ROOT = Path(__file__).resolve().parents[3]
AD_PROGRAMS = ROOT / "packages" / "presk-ad" / "tests" / "programs"
PROGRAMS = [
    ROOT / "tutorial" / "04_grad.psk",
    ROOT / "tutorial" / "06_tower.psk",
    *sorted(AD_PROGRAMS.glob("*.psk")),  # an operation a program, and the reference models
]
TREES = {"put", "put_slice", "put_item"}  # of trees and tuples: tests/test_tree_adjoints.py


def instructions() -> list:
    """Each adjoint instruction of the programs, once per operation, attributes and types."""
    seen, out = set(), []
    for path in PROGRAMS:
        try:
            core = differentiate(lower_program(load_program(str(path), {}, SourceMap())))
        except (DiagnosticError, ADError):
            continue  # a program of presk-ad's tests that differentiation refuses
        for fn in core.functions:
            for ins in fn.body:
                if ins.op not in ADJOINT_OPS or ins.op in TREES:
                    continue
                if not all(isinstance(a.type, Real | Idx | Bool) for a in ins.args):
                    continue  # of a tree or a tuple (zeros_like, accum of trees)
                if max(_size(a.type) for a in ins.args) > 512:
                    continue  # a reference model's full-size layer: too slow in MPFR
                key = (ins.op, ins.attrs, tuple(a.type for a in ins.args))
                if key not in seen:
                    seen.add(key)
                    out.append(pytest.param(ins, id=f"{ins.op}@{ins.site}"))
    return out


def _size(t) -> int:
    s = shape_of(t)
    return math.prod(a.length.value(dict.fromkeys(a.length.names, 3)) for a in s.axes) * 2


CASES = instructions()


def test_the_programs_meet_every_adjoint_operation_but_the_trees():
    assert {c.values[0].op for c in CASES} == ADJOINT_OPS - TREES


def _data(t, dims: dict[str, int], rng: np.random.Generator) -> np.ndarray:
    s = shape_of(t)
    shape = ((2,) if s.prefix else ()) + tuple(a.length.value(dims) for a in s.axes)
    match t:
        case Idx(bound, _):
            return rng.integers(0, bound.value(dims), size=shape)
        case Bool():
            return rng.random(shape) < 0.7
    return rng.standard_normal(shape)


@pytest.mark.parametrize("ins", CASES)
def test_the_pytorch_of_an_adjoint_is_the_interpreters(ins):
    names = {n for a in (*ins.args, ins.out) for x in shape_of(a.type).axes for n in x.length.names}
    dims = {n: 3 for n in names}
    rng = np.random.default_rng(len(ins.site))
    datas = [_data(a.type, dims, rng) for a in ins.args]
    if ins.op == "reduce_pick":  # a tie at the extremum, which goes to the first
        datas[1].reshape(-1)[1] = datas[1].reshape(-1)[0]
    with M.precision(128):
        frame = Frame(None, dims)
        for a, d in zip(ins.args, datas, strict=True):
            frame.env[a.id] = M.real(d) if d.dtype == np.float64 else d
        want = eval_rules[ins.op](Interpreter(Program(()), 128), frame, ins)
    want = np.vectorize(float, otypes=[float])(np.asarray(want, dtype=object))
    fn = Function("f", tuple(dims), (), ins.out.type, (ins,), ins.out)
    bound = {a.id: Expr(f"v{a.id}") for a in ins.args if isinstance(a, Value)}
    body = Body(SimpleNamespace(imports=set()), fn, bound, {d: str(v) for d, v in dims.items()})
    expr = RULES[ins.op](body, ins)
    scope = {"torch": torch, "F": F, "math": math}
    scope.update({f"v{a.id}": torch.as_tensor(d) for a, d in zip(ins.args, datas, strict=True)})
    got = eval(str(expr), scope)  # noqa: S307 (the rule's own expression)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
