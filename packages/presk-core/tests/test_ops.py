"""The operation set (`presk_types.ops.OPS`) and the interpreter's table: the table is keyed by
the set and covers it exactly; every instruction lowering writes, for every program of
tutorial/ and tests/examples/, is an operation of the set with its arity and attributes."""

from __future__ import annotations

from pathlib import Path

import pytest
from presk_core.interp import eval_rules
from presk_core.lower import lower_program
from presk_core.unroll import unroll_stack
from presk_types.elab import load_program
from presk_types.ops import ADJOINT_OPS, OPS, Attr, Kind
from presk_types.presburger import Lin
from presk_types.rules import PRIMITIVES

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(
    str(p.relative_to(ROOT))
    for p in [*ROOT.glob("tutorial/*.psk"), *ROOT.glob("tests/examples/*/*.psk")]
)


def test_the_interpreter_evaluates_exactly_the_operation_set():
    assert set(eval_rules) == set(OPS)


def test_the_primitives_of_the_language_are_the_operations_a_source_calls():
    assert {n for n, op in OPS.items() if op.source} == set(PRIMITIVES)
    assert ADJOINT_OPS <= set(OPS) and not ADJOINT_OPS & set(PRIMITIVES)


def test_every_operation_has_a_kind_and_some_of_each_kind():
    assert {op.kind for op in OPS.values()} == set(Kind)
    assert str(OPS["ein"].kind) == "contraction" and OPS["take"].kind is Kind.GATHER_SCATTER


def test_the_schema_refuses_a_wrong_arity_an_unknown_or_missing_or_mistyped_attribute():
    add, field = OPS["add"], OPS["field"]
    assert add.check(2, ()) is None
    assert "takes 2 operands, not 3" in add.check(3, ())
    assert "no attribute `path`" in add.check(2, (("path", "w"),))
    assert "needs the attribute `path`" in field.check(1, ())
    assert "must be of type int" in OPS["get"].check(1, (("index", "0"),))
    assert OPS["fold"].check(2, (("fn", "B"), ("dims", ()), ("count", Lin.const(3)))) is None
    assert OPS["init"].check(1, (("init", "normal"), ("std", "0.02"))) is None
    assert not Attr.BINDINGS.accepts((("D", 4),))


@pytest.mark.parametrize("path", FILES)
def test_every_lowered_instruction_fits_its_declaration(path):
    core = lower_program(load_program(str(ROOT / path)))
    for program in (core, unroll_stack(core)):
        for fn in program.functions:
            for ins in fn.body:
                assert ins.op in OPS, f"{ins.site}: `{ins.op}` is not declared"
                problem = OPS[ins.op].check(len(ins.args), ins.attrs)
                assert problem is None, f"{ins.site}: {problem}"
