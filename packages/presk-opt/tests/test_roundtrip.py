"""PSK-Core → terms → PSK-Core with no rule is the same program, on every program of
tutorial/ and tests/examples/ after differentiation; with the rules, it verifies."""

from pathlib import Path

import pytest
from presk_ad.passes import UP_TO_AD
from presk_core.verify import problems
from presk_opt.optimize import optimize
from presk_syntax.pipeline import Context, Pipeline

run_pipeline = Pipeline(UP_TO_AD).run  # the passes up to differentiation

ROOT = Path(__file__).resolve().parents[3]
PROGRAMS = sorted(
    str(p.relative_to(ROOT))
    for p in [*ROOT.glob("tutorial/*.psk"), *ROOT.glob("tests/examples/*/*.psk")]
)
TINY = {"V": "64", "D": "16", "H": "2", "L": "2", "F": "12"}


def _core(path: str):
    return run_pipeline("core-after-ad", str(ROOT / path), Context(consts={}))


@pytest.mark.parametrize("path", PROGRAMS)
def test_no_rule_gives_the_same_program(path: str) -> None:
    core = _core(path)
    out, report = optimize(core, rules=None)
    assert out == core
    assert not any(f.changed for f in report.functions)


@pytest.mark.parametrize("path", PROGRAMS)
def test_the_rules_give_a_program_that_verifies(path: str) -> None:
    core = _core(path)
    out, report = optimize(core)
    found = problems(out)
    assert not found, "\n".join(found[:5])
    assert report.functions and all(f.stop == "saturated" for f in report.functions)
