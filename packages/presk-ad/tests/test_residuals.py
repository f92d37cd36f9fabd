"""The residual form of reverse mode (`--remat residuals`, the default) against the
recomputing one (`--remat recompute`).

- The listing of `presk dump tutorial/04_grad.psk --stage core-after-ad | grep '^fn'` is the
  specification's (tutorial step 7), with the λ's parameters written out where it elides
  them (`…`): `loss_grad.lambda0.vjp(x, y, θ, ct)`, `loss_grad.lambda0.bwd(x, θ, residuals,
  ct)`.
- The gradients are the same bits in the two forms (the same operations in the same order
  on the same values): tutorial/04_grad.psk through `presk run --json`, a loss over
  tutorial/06_tower.psk's Tower (stacks unrolled), MiniGPT's training loss at tiny
  constants, and callers.psk (a callee whose value one caller reads and another does not).
- A function whose sweep reads only its parameters has no `.fwd`; every generated function
  is well formed (each operand defined before it is read, no analysis pseudo-operation
  left); the `.bwd`s and `.fwd`s come callee before caller, `.bwd` before `.fwd`.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
from presk_ad import differentiate
from presk_ad.residuals import RESIDUALS_OP
from presk_core import mpfr as M
from presk_core.interp import Interpreter
from presk_core.ir import Function, Program, Value, format_function
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize
from presk_types.elab import load_program
from presk_types.types import TupleT

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROGRAMS = HERE / "programs" / "residuals"
GRAD = ROOT / "tutorial" / "04_grad.psk"
TINY_GPT = (("V", "16"), ("D", "8"), ("H", "2"), ("L", "1"))
BITS = 256


@functools.cache
def compiled(path: Path, consts: tuple[tuple[str, str], ...] = ()) -> dict[str, Program]:
    core = lower_program(load_program(str(path), dict(consts)))
    return {remat: differentiate(core, remat) for remat in ("residuals", "recompute")}


def generated(program: Program, suffix: str) -> dict[str, Function]:
    return {f.name: f for f in program.functions if f.name.endswith(suffix)}


# ---- the listing ---------------------------------------------------------------------------


def test_the_split_of_04_grad() -> None:
    program = compiled(GRAD)["residuals"]
    fwd, bwd = program.function("loss.fwd"), program.function("loss.bwd")
    # loss.fwd: ŷ = Linear.apply(θ, x) (no .fwd: no residuals), then ŷ − y and (ŷ − y)²,
    # and not the mean, the value no one reads
    assert [i.op for i in fwd.body] == ["call", "sub", "pow", "tuple", "tuple"]
    assert fwd.body[0].attr("fn") == "Linear.apply"
    assert [p.name for p in bwd.params] == ["θ", "x", "residuals", "ct"]
    calls = [i.attr("fn") for i in bwd.body if i.op == "call"]
    assert calls == ["Linear.apply.bwd"]
    assert [i.op for i in bwd.body[:2]] == ["get", "get"]  # the residuals, then the sweep
    assert "mean" not in {i.op for i in bwd.body}  # the forward pass is not in the .bwd
    vjp = program.function("loss.vjp")
    assert [i.attr("fn") for i in vjp.body if i.op == "call"] == ["loss.fwd", "loss.bwd"]
    apply_vjp = program.function("Linear.apply.vjp")
    assert [i.attr("fn") for i in apply_vjp.body] == ["Linear.apply.bwd"]


# ---- the same bits ---------------------------------------------------------------------------


def bits(value: object, path: str = "") -> list[tuple[str, str, int, int]]:
    """Every number of a value, exactly: where it is, its binary digits (with the sign, so
    -0 is not 0), its exponent and its precision."""
    match value:
        case dict():
            return [b for k in sorted(value) for b in bits(value[k], f"{path}.{k}")]
        case tuple():
            return [b for i, v in enumerate(value) for b in bits(v, f"{path}[{i}]")]
    return [(path, *x.digits(2)) for x in np.asarray(value, dtype=object).reshape(-1)]


CASES = [
    pytest.param(GRAD, "loss_grad", {"D": 3, "B": 4}, (), id="04_grad"),
    pytest.param(PROGRAMS / "tower_grad.psk", "tower_grad", {"B": 2}, (), id="tower"),
    pytest.param(
        PROGRAMS / "minigpt_grad.psk", "minigpt_grad", {"B": 1, "T": 4}, TINY_GPT, id="minigpt"
    ),
    pytest.param(PROGRAMS / "callers.psk", "g_dx", {}, (), id="callers-g"),
    pytest.param(PROGRAMS / "callers.psk", "h_dx", {}, (), id="callers-h"),
]


@pytest.mark.parametrize(("path", "entry", "dims", "consts"), CASES)
def test_the_gradients_are_the_same_bits_in_both_forms(path, entry, dims, consts) -> None:
    programs = compiled(path, consts)
    elab = load_program(str(path), dict(consts))
    results = {}
    for remat, program in programs.items():
        interp = Interpreter(program, BITS)
        spec = parse_entry(entry, program, elab, dict(dims))
        args = [v for _, _, v in synthesize(spec, interp, 0)]
        with M.precision(BITS):  # off the initialization: no zero leaf (MiniGPT's head)
            rng = np.random.default_rng(1)
            args = [
                {
                    k: M.add(leaf, M.real(rng.standard_normal(np.shape(leaf))))
                    for k, leaf in a.items()
                }
                if isinstance(a, dict)
                else a
                for a in args
            ]
        results[remat] = bits(interp.run(entry, args, spec.dims))
    assert results["residuals"] == results["recompute"]
    assert all(precision == BITS for *_, precision in results["residuals"])
    assert any(digits.strip("-") != "0" for _, digits, _, _ in results["residuals"])


# ---- no .fwd without residuals; the shape of what is generated --------------------------------


ALL = [
    pytest.param(GRAD, (), id="04_grad"),
    pytest.param(PROGRAMS / "tower_grad.psk", (), id="tower"),
    pytest.param(PROGRAMS / "minigpt_grad.psk", TINY_GPT, id="minigpt"),
    pytest.param(PROGRAMS / "callers.psk", (), id="callers"),
]


def residuals_of(bwd: Function) -> TupleT | None:
    named = [p for p in bwd.params if p.name == "residuals"]
    return named[0].type if named else None


@pytest.mark.parametrize(("path", "consts"), ALL)
def test_a_fwd_exactly_for_the_functions_with_residuals(path, consts) -> None:
    program = compiled(path, consts)["residuals"]
    bwds, fwds = generated(program, ".bwd"), generated(program, ".fwd")
    vjps = generated(program, ".vjp")
    assert {n[: -len(".bwd")] for n in bwds} == {n[: -len(".vjp")] for n in vjps}
    for name, bwd in bwds.items():
        base = name[: -len(".bwd")]
        res = residuals_of(bwd)
        if res is None:
            assert f"{base}.fwd" not in fwds, f"{base} has no residuals but a .fwd"
            vjp = vjps[f"{base}.vjp"]
            assert [i.attr("fn") for i in vjp.body] == [name]  # the .bwd alone
        else:
            assert res.elements, f"{name} takes an empty tuple of residuals"
            fwd = fwds[f"{base}.fwd"]
            assert fwd.result.elements[-1] == res  # (value?, residuals)


def test_no_fwd_for_a_sweep_that_reads_only_its_parameters() -> None:
    """Linear.apply (its sweep reads θ, θ.b and x), split_heads and Embedding.apply (MiniGPT),
    `same` (returns its argument): no residuals, no `.fwd`; their callers call them."""
    cases = [
        (GRAD, (), ["Linear.apply"]),
        (PROGRAMS / "tower_grad.psk", (), ["Linear.apply"]),
        (
            PROGRAMS / "minigpt_grad.psk",
            TINY_GPT,
            ["Linear.apply", "split_heads", "Embedding.apply"],
        ),
        (PROGRAMS / "callers.psk", (), ["same"]),
    ]
    for path, consts, names in cases:
        program = compiled(path, consts)["residuals"]
        functions = {f.name for f in program.functions}
        for name in names:
            assert f"{name}.bwd" in functions and f"{name}.fwd" not in functions, name
            assert residuals_of(program.function(f"{name}.bwd")) is None
            callers = [
                i.attr("fn")
                for f in program.functions
                if f.name.endswith(".fwd")
                for i in f.body
                if i.op == "call"
            ]
            assert name in callers, f"no .fwd calls {name}"


def test_a_fwd_returns_its_value_when_a_caller_reads_it() -> None:
    program = compiled(PROGRAMS / "callers.psk")["residuals"]

    def valued(name: str) -> bool:
        return len(program.function(f"{name}.fwd").result.elements) == 2

    assert valued("e") and valued("s")  # s reads e's value; g reads s's
    assert not valued("g") and not valued("h")  # their values: only the λs return them
    assert not valued("g_dx.lambda0") and not valued("h_dx.lambda0")
    h = program.function("h.fwd")  # reads s.fwd's residuals, not its value
    (call,) = [i for i in h.body if i.op == "call"]
    gets = [i.attr("index") for i in h.body if i.op == "get" and i.args[0] == call.out]
    assert call.attr("fn") == "s.fwd" and gets == [1]
    tower = compiled(PROGRAMS / "tower_grad.psk")["residuals"]
    assert len(tower.function("Block.apply.fwd").result.elements) == 2
    assert len(tower.function("tower_loss.fwd").result.elements) == 1


@pytest.mark.parametrize(("path", "consts"), ALL)
def test_every_generated_function_is_well_formed(path, consts) -> None:
    """Each operand is a parameter or defined before; no `_residuals` pseudo-operation; the
    calls' callees exist and take as many arguments as they are given."""
    program = compiled(path, consts)["residuals"]
    names = {f.name: f for f in program.functions}
    for f in program.functions:
        defined = {p.id for p in f.params}
        for ins in f.body:
            assert ins.op != RESIDUALS_OP, f"{f.name}: {RESIDUALS_OP} left"
            for a in ins.args:
                assert not isinstance(a, Value) or a.id in defined, (
                    f"{f.name}: {a} read before it is defined\n{format_function(f)}"
                )
            assert ins.out.id not in defined, f"{f.name}: {ins.out} defined twice"
            defined.add(ins.out.id)
            if ins.op == "call":
                callee = names[ins.attr("fn")]
                assert len(callee.params) == len(ins.args), f"{f.name} → {callee.name}"
        assert not isinstance(f.ret, Value) or f.ret.id in defined


@pytest.mark.parametrize(("path", "consts"), ALL)
def test_the_order_of_the_generated_functions(path, consts) -> None:
    """The program's functions, the `.vjp`s and `.grad`s as `--remat recompute` orders them,
    then the `.bwd`s and `.fwd`s: callee before caller, a `.bwd` before its `.fwd`."""
    programs = compiled(path, consts)
    names = [f.name for f in programs["residuals"].functions]
    split = [n for n in names if n.endswith((".bwd", ".fwd"))]
    assert names[: len(names) - len(split)] == [f.name for f in programs["recompute"].functions]
    position = {n: i for i, n in enumerate(names)}
    for name in split:
        f = programs["residuals"].function(name)
        for ins in f.body:
            if ins.op == "call" and ins.attr("fn").endswith((".bwd", ".fwd")):
                assert position[ins.attr("fn")] < position[name], f"{ins.attr('fn')} after {name}"
        if name.endswith(".fwd"):
            assert position[name[: -len(".fwd")] + ".bwd"] == position[name] - 1
