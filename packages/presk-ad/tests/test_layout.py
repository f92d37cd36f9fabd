"""Explicit layout (docs/ir.md, "Layout"): every instruction that places operands on its
result's axes holds the placement (`_align`), written by the builder, for every program of
tutorial/ and tests/examples/ before and after differentiation; the interpreter reads it and
never computes it again; the listing prints it where an operand does not have the result's
axes, and prints every other attribute (`put path b θ, %7`)."""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from pathlib import Path

import pytest
from presk_ad import differentiate
from presk_core.interp import Interpreter, RunError
from presk_core.ir import Function, Lit, Program, Value, format_program
from presk_core.lower import lower_program
from presk_core.unroll import unroll_stack
from presk_syntax.span import SourceMap
from presk_types.elab import load_program
from presk_types.ops import OPS
from presk_types.types import SCALAR, Real

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(
    str(p.relative_to(ROOT))
    for p in [*ROOT.glob("tutorial/*.psk"), *ROOT.glob("tests/examples/*/*.psk")]
)


@functools.cache
def lowered(path: str) -> tuple[Program, None]:
    return lower_program(load_program(str(ROOT / path), {}, SourceMap())), None


PLACED = {n for n, op in OPS.items() if "_align" in dict(op.attrs)}


@pytest.mark.parametrize("path", FILES)
def test_every_placement_is_held_by_the_instruction(path):
    core, _ = lowered(path)
    for program in (unroll_stack(core), differentiate(core), differentiate(core, "recompute")):
        for fn in program.functions:
            for ins in fn.body:
                if ins.op not in PLACED:
                    continue
                if ins.op in ("softmax", "log_softmax") and not ins.attr("where"):
                    continue
                if ins.op == "sum_to" and not hasattr(ins.args[1].type, "shape"):
                    continue
                assert ins.attr("_align") is not None, f"{ins.site}: {ins.op} without _align"


def test_the_interpreter_does_not_place_operands_itself():
    r = Real(SCALAR)
    x = Value(0, r, "x")
    fn = Function("f", (), (x,), r, (), x)
    core, _ = lowered("tutorial/04_grad.psk")
    (ins,) = [i for i in core.function("loss").body if i.op == "sub"]
    bare = replace(ins, args=(x, Lit("1", r)), attrs=(), out=Value(1, r))
    fn = replace(fn, body=(bare,), ret=bare.out)
    with pytest.raises(RunError, match="does not say where its operands go"):
        Interpreter(Program((fn,)), 64).run("f", [1], {})


def listing(path: str, ad: bool = False) -> str:
    core, _ = lowered(path)
    return format_program(differentiate(core) if ad else core)


def test_a_broadcast_is_printed_and_an_aligned_operation_is_not():
    text = listing("tutorial/04_grad.psk")
    assert "  %5 : ℝ[..., Out] = add %3, %4 on [..., Out], [Out]\n" in text
    assert "  %4 : ℝ[batch: B, 1] = sub ŷ, y\n" in text
    attention = listing("tutorial/03_attention.psk")
    assert re.search(r"= softmax axis seq2 s, where %4 on \[seq, seq2\]\n", attention)
    assert (
        "ein[batch, heads, seq, seq2] q, k as [batch, heads, seq, hd], [batch, heads, seq2, hd]"
        in attention
    )


def test_differentiations_attributes_are_printed():
    text = listing("tutorial/04_grad.psk", ad=True)
    assert re.search(r"= put path b θ, %\d+\n", text)
    assert re.search(r"= put path w θ, %\d+\n", text)
    assert re.search(r"= expand mean true ct, %5\n", text)
    assert re.search(r"= sum_to ct, %4 on \[Out\]\n", text)
