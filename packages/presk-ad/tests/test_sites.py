"""Sites and origins (docs/ir.md, "Sites and origins") through every pass, on every program of
tutorial/ and tests/examples/: lowering, stack unrolling, differentiation in both forms and
the training step.

- every instruction's site is `F/%id`, F the function that holds it, unique in the program;
- a pass keeps the site of an instruction it keeps in place;
- every instruction a pass makes has an origin whose site is a site (or a function) of the
  program the pass read, and the span of what it was made from;
- the core document round-trips them (encode, decode, equal).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from presk_ad import differentiate
from presk_ad.step import training_step
from presk_ad.vjp import NO_ADJOINT, vjp_rules
from presk_core.codec import decode_core, encode_core
from presk_core.ir import Program, format_program
from presk_core.lower import lower_program
from presk_core.unroll import unroll_stack
from presk_syntax.span import SourceMap
from presk_types.elab import load_program
from presk_types.ops import OPS

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted(
    str(p.relative_to(ROOT))
    for p in [*ROOT.glob("tutorial/*.psk"), *ROOT.glob("tests/examples/*/*.psk")]
)


@functools.cache
def lowered(path: str) -> tuple[Program, list]:
    program = load_program(str(ROOT / path), {}, SourceMap())
    return lower_program(program), [env.source for env in program.files]


def sites(program: Program) -> dict[str, object]:
    out: dict[str, object] = {}
    for fn in program.functions:
        out[fn.name] = fn
        for ins in fn.body:
            assert ins.site == f"{fn.name}/%{ins.out.id}", (fn.name, ins)
            assert ins.site not in out, f"{ins.site} twice"
            out[ins.site] = ins
    return out


def check_pass(before: Program, after: Program, rules: tuple[str, ...]) -> None:
    """Sites of `after` well formed; each instruction either the same as `before` at the same
    site, or made by a pass from a site of `before` (or of `after`, for a chain), by one of
    `rules` (prefixes), with that site's span."""
    old, new = sites(before), sites(after)
    for site, ins in new.items():
        if not hasattr(ins, "op") or old.get(site) == ins:
            continue
        origin = ins.origin
        assert origin is not None, f"{site} has no origin"
        assert origin.rule.startswith(rules), (site, origin)
        made_from = old.get(origin.site, new.get(origin.site))
        assert made_from is not None, (site, origin)
        assert ins.span == made_from.span or ins.span is None, (site, origin)
        if made_from.span is not None:
            assert ins.span is not None, f"{site} lost the span of {origin.site}"


@pytest.mark.parametrize("path", FILES)
def test_lowering_gives_every_instruction_a_site(path):
    core, _ = lowered(path)
    for site, ins in sites(core).items():
        if hasattr(ins, "op"):
            assert ins.origin is None, site


@pytest.mark.parametrize("path", FILES)
def test_unrolling_keeps_the_sites_and_says_what_it_unrolled(path):
    core, _ = lowered(path)
    check_pass(core, unroll_stack(core), ("unroll of fold",))


RULES = (
    "forward of",
    "vjp of",
    "adjoints of",
    "residual",
    "view read again",
    "vjp of",
    "grad",
    "value_grad",
    "vjp of",
    "value_vjp of",
    "sweep of",
)


@pytest.mark.parametrize("remat", ["residuals", "recompute"])
@pytest.mark.parametrize("path", FILES)
def test_differentiation_keeps_the_sites_and_gives_origins(path, remat):
    core, _ = lowered(path)
    check_pass(unroll_stack(core), differentiate(core, remat), RULES)


@pytest.mark.parametrize(
    "path", ["tutorial/07_train.psk", "tests/examples/minigpt/train_minigpt.psk"]
)
def test_the_training_step_has_sites_and_origins(path):
    core, _ = lowered(path)
    step = training_step(core, "loss")
    STEP = "loss.train_value_grad"
    check_pass(unroll_stack(core), step, (*RULES, "training step of"))
    made = [i for f in step.functions if f.name in ("loss.train", STEP) for i in f.body]
    assert len(made) == 2
    call, value_grad = made  # the second made a call of loss.train.value_grad by differentiation
    assert call.origin.site == "loss" and call.span is not None
    assert value_grad.origin.rule.startswith("value_grad as a call") and value_grad.span


def test_a_sweep_says_which_instruction_each_of_its_instructions_is_the_adjoint_of():
    core, _ = lowered("tutorial/04_grad.psk")
    bwd = differentiate(core).function("loss.bwd")
    text = format_program(Program((bwd,)), sites=True)
    assert "  %9 : ℝ[batch: B, 1] = pow 1 %4  -- loss.bwd/%9 (vjp of pow, from loss/%5)" in text
    assert "-- loss.bwd/%4 (residual, from loss/%4)" in text
    plain = format_program(Program((bwd,)))
    assert "--" not in plain and plain.count("\n") == text.count("\n")


@pytest.mark.parametrize("path", FILES)
def test_the_core_document_round_trips_sites_and_origins(path):
    core, sources = lowered(path)
    for program in (core, differentiate(core)):
        back, _ = decode_core(encode_core(program, sources))
        assert back == program


@pytest.mark.parametrize("remat", ["residuals", "recompute"])
@pytest.mark.parametrize("path", FILES)
def test_differentiation_writes_only_declared_operations(path, remat):
    core, _ = lowered(path)
    for fn in differentiate(core, remat).functions:
        for ins in fn.body:
            assert ins.op in OPS, f"{ins.site}: `{ins.op}` is not declared"
            problem = OPS[ins.op].check(len(ins.args), ins.attrs)
            assert problem is None, f"{ins.site}: {problem}"


def test_every_operation_has_an_adjoint_rule_or_is_declared_without_one():
    assert set(vjp_rules) | NO_ADJOINT == set(OPS)
    assert not set(vjp_rules) & NO_ADJOINT


@pytest.mark.parametrize("path", ["tutorial/04_grad.psk", "tutorial/06_tower.psk"])
def test_every_instruction_after_differentiation_points_into_the_source(path):
    core, _ = lowered(path)
    program = differentiate(core)
    assert not [i.site for f in program.functions for i in f.body if i.span is None]
