"""The verifier of PSK-Core (presk_core.verify) after every pass, on every program of
`tutorial/` and `tests/examples/`; its failures on broken programs; the rule table's coverage.

Passes: lowering, `--unroll-stack`, differentiation in both remat forms, a training run's
step (`presk train`), and `specialize` then `flatten` at an entry of each program.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import pytest
from presk_ad import differentiate
from presk_ad.step import training_step
from presk_ad.vjp import REMATS
from presk_core.flatten import flatten
from presk_core.interp import eval_rules
from presk_core.ir import Instr, Program, Value, format_instr
from presk_core.lower import lower_program
from presk_core.passes import unroll_stack
from presk_core.specialize import specialize
from presk_core.verify import VerifyError, problems, verify
from presk_types.core_rules import CORE_RULES, PRIMITIVE_SHAPE_RULES
from presk_types.driver import check_file
from presk_types.elab import load_program
from presk_types.ops import OPS
from presk_types.rules import PRIMITIVES
from presk_types.types import SCALAR, Real

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(
    str(p.relative_to(ROOT))
    for p in [*ROOT.glob("tutorial/*.psk"), *ROOT.glob("tests/examples/*/*.psk")]
)
PASSES = ["lowering", "--unroll-stack", *(f"--remat {r}" for r in REMATS), "training step"]


@functools.cache
def _passes(path: str) -> dict[str, Program]:
    checked = check_file(str(ROOT / path))
    core = lower_program(checked.program)
    out = {"lowering": core, "--unroll-stack": unroll_stack(core)}
    out.update((f"--remat {r}", differentiate(core, r)) for r in REMATS)
    if checked.runs:
        out["training step"] = training_step(core, checked.runs[0].objective.key)
    return out


@pytest.mark.parametrize(("path", "name"), [(p, n) for p in PROGRAMS for n in PASSES])
def test_every_pass_verifies(path: str, name: str) -> None:
    program = _passes(path).get(name)
    if program is None:
        pytest.skip("no training run")
    found = problems(program)
    assert not found, "\n".join(found)


AD_PROGRAMS = ROOT / "packages/presk-ad/tests/programs"
AD_UNSUPPORTED = {"second_order.psk", "second_order_lambda.psk", "stack_dim.psk"}


@pytest.mark.parametrize(
    "name",
    [
        p.name
        for p in sorted(AD_PROGRAMS.glob("*.psk"))
        if p.name not in AD_UNSUPPORTED and not p.name.endswith("_lib.psk")
    ],
)
def test_differentiation_of_each_operation_verifies(name: str) -> None:
    """The programs of presk-ad's tests, one an operation: every adjoint's instructions."""
    core = lower_program(load_program(str(AD_PROGRAMS / name)))
    found = [p for r in REMATS for p in problems(differentiate(core, r))]
    assert not found, "\n".join(found)


TINY = {"V": "64", "D": "16", "H": "2", "L": "2"}
# (file, constants, entry, dims): an entry of every program, specialized as `presk run` runs it
ENTRIES = [
    ("tutorial/01_linear.psk", {}, "Linear.apply", {"In": 3, "Out": 2, "batch": 4}),
    ("tutorial/01_linear_ascii.psk", {}, "Linear.apply", {"In": 3, "Out": 2, "batch": 4}),
    ("tutorial/02_norm.psk", {}, "RMSNorm.apply", {"D": 4, "batch": 2}),
    ("tutorial/03_attention.psk", {}, "attend", {"B": 2, "T": 5}),
    ("tutorial/04_grad.psk", {}, "loss_grad", {"D": 3, "B": 2}),
    ("tutorial/05_sample.psk", {}, "pick", {"B": 5}),
    ("tutorial/06_tower.psk", {}, "Tower.apply", {"batch": 3}),
    ("tutorial/07_train.psk", {}, "loss", {"B": 4}),
    ("tests/examples/mlp/mlp.psk", {}, "mse_grad", {"D": 3, "B": 2}),
    ("tests/examples/conv1d/conv1d.psk", {}, "loss", {"B": 2, "T": 5}),
    ("tests/examples/minigpt/minigpt.psk", TINY, "MiniGPT.apply", {"B": 2, "T": 8}),
    ("tests/examples/minigpt/train_minigpt.psk", TINY, "loss", {"B": 2, "T": 8}),
    ("tests/examples/llama/llama.psk", {"D": "8", "H": "2", "F": "12"}, "block", {"B": 1, "T": 3}),
    (
        "tests/examples/bert/bert.psk",
        {"V": "32", "D": "8", "H": "2", "L": "2"},
        "MaskedLM.apply",
        {"B": 1, "T": 4},
    ),
    ("tests/examples/vae/vae.psk", {}, "loss", {"B": 3}),
    ("tests/examples/gru/gru.psk", {}, "loss", {"B": 2, "T": 3}),  # scan{T}, unrolled at T = 3
]


def test_every_program_has_an_entry() -> None:
    assert {e[0] for e in ENTRIES} == set(PROGRAMS)


@pytest.mark.parametrize(("path", "consts", "entry", "dims"), ENTRIES)
def test_specialized_and_flattened_programs_verify(
    path: str, consts: dict, entry: str, dims: dict
) -> None:
    """After differentiation, `specialize` at the entry, then `flatten`: a module's leaf
    of a file's dimension (minigpt's `pos : ℝ[seq: T, D]`) at the entry's number."""
    core = differentiate(lower_program(load_program(str(ROOT / path), consts)))
    special = specialize(core, entry, dims)
    assert problems(special, made_from=core) == []
    assert problems(flatten(special), made_from=core) == []


def test_the_rules_cover_the_operation_set() -> None:
    """One rule per operation of the operation set (presk_types.ops): the primitives of
    the registry, the structure, differentiation's; the interpreter's table is the same."""
    assert set(PRIMITIVE_SHAPE_RULES) == set(PRIMITIVES)
    assert set(CORE_RULES) == set(OPS) == set(eval_rules)


# ---- what the verifier catches -------------------------------------------------------------


def _program() -> Program:
    return lower_program(load_program(str(ROOT / "tutorial/04_grad.psk")))


def _edit(program: Program, name: str, body: list[Instr]) -> Program:
    functions = tuple(
        replace(f, body=tuple(body)) if f.name == name else f for f in program.functions
    )
    return Program(functions)


def _first(program: Program, op: str) -> tuple[str, list[Instr], int]:
    for f in program.functions:
        for i, ins in enumerate(f.body):
            if ins.op == op:
                return f.name, list(f.body), i
    raise AssertionError(op)


def _fails(program: Program, *words: str) -> str:
    with pytest.raises(VerifyError) as e:
        verify(program)
    text = str(e.value)
    for w in words:
        assert w in text, text
    return text


def test_a_correct_program_verifies() -> None:
    program = _program()
    assert verify(program) is program


def test_a_mistyped_instruction() -> None:
    program = _program()
    name, body, i = _first(program, "sub")
    ins = body[i]
    body[i] = replace(ins, out=Value(ins.out.id, Real(SCALAR), ins.out.name))
    bad = _edit(program, name, body)
    text = _fails(bad, f"in `{name}`", "= sub", "the rule of `sub` gives")
    assert "ℝ[]" in text


def test_a_use_before_its_definition() -> None:
    program = _program()
    name, body, i = _first(program, "sub")
    j = next(k for k in range(i) if body[k].out in body[i].args)
    body.insert(j, body.pop(i))
    _fails(_edit(program, name, body), f"in `{name}`", "is read before it is defined")


def test_a_value_defined_twice() -> None:
    program = _program()
    name, body, i = _first(program, "sub")
    body.insert(i + 1, body[i])
    _fails(_edit(program, name, body), "is defined twice")


def test_an_operation_without_a_rule() -> None:
    program = _program()
    name, body, i = _first(program, "sub")
    body[i] = replace(body[i], op="subtract")
    _fails(_edit(program, name, body), "`subtract`")


def test_an_attribute_the_rule_needs() -> None:
    program = _program()
    name, body, i = _first(program, "field")
    body[i] = replace(body[i], attrs=(("path", "nowhere"),))
    _fails(_edit(program, name, body), "no field `nowhere`")


def test_a_call_that_binds_other_dimensions() -> None:
    program = _program()
    name, body, i = _first(program, "call")
    body[i] = replace(body[i], attrs=(("fn", body[i].attr("fn")), ("dims", ())))
    _fails(_edit(program, name, body), "binds no dimension")


def test_a_wrong_return_type() -> None:
    program = _program()
    f = next(f for f in program.functions if f.result != Real(SCALAR))
    functions = tuple(replace(g, result=Real(SCALAR)) if g is f else g for g in program.functions)
    _fails(Program(functions), f"in `{f.name}`", "is declared `-> ℝ[]`")


def test_the_pipeline_verifies_with_presk_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    """`PRESK_VERIFY=1`: each pass that gives PSK-Core is followed by the verifier."""
    from presk_cli.pipeline import run_pipeline
    from presk_core.passes import verified
    from presk_syntax.pipeline import Context

    name, body, i = _first(_program(), "sub")
    body.insert(i + 1, body[i])
    bad = _edit(_program(), name, body)
    monkeypatch.delenv("PRESK_VERIFY", raising=False)
    assert verified(bad, "core") is bad
    monkeypatch.setenv("PRESK_VERIFY", "1")
    with pytest.raises(VerifyError, match="after the pass `core-after-ad`: in `"):
        verified(bad, "core-after-ad")
    program = run_pipeline("core-after-ad", str(ROOT / "tutorial/04_grad.psk"), Context())
    assert any(f.name.endswith(".grad") for f in program.functions)


def test_the_printer_prints_an_instruction_its_alignment_does_not_fit() -> None:
    """An `add` retyped as a scalar: its `_align` places axes the result does not have;
    the printer prints it all the same, and the verifier says what is wrong."""
    program = _program()
    name, body, i = _first(program, "add")
    ins = body[i]
    body[i] = replace(ins, out=Value(ins.out.id, Real(SCALAR), ins.out.name))
    line = format_instr(body[i])
    assert line.startswith(f"  {ins.out} : ℝ[] = add ") and "@-1?" in line, line
    _fails(_edit(program, name, body), f"in `{name}`", line)


def test_the_printer_prints_a_malformed_instruction() -> None:
    """A `record` whose keys are not a tuple: printed as its operation, operands and
    attributes as they are."""
    _, body, i = _first(_program(), "record")
    ins = replace(body[i], attrs=(("keys", 3),))
    args = ", ".join(str(a) for a in ins.args)
    assert format_instr(ins) == f"  {ins.out} : {ins.out.type} = record {args} keys=3"
