"""`presk check` and `presk dump --stage elab` as the tutorial runs them, byte for byte.

Each golden in golden/ is the tutorial's text copied verbatim (spec steps 0 to 6), except
06_tower.summary.txt and 07_train.summary.txt, which the tutorial does not show: they pin
the reviewed output of the checker. Diagnostics go to standard error, summaries and dumps
to standard output; each case also checks that the other stream is empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import presk

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"


def golden(name: str) -> str:
    return (GOLDEN / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Case:
    golden: str  # file in golden/
    args: tuple[str, ...]
    stream: str  # where the golden text goes: "stdout" or "stderr"
    code: int = 0
    cwd: str = "."  # relative to the repository, so that paths print as in the tutorial


CASES = [
    # step 0: the two W0001 of the perceptron, and exit 0
    Case("mlp.stderr.txt", ("check", "tests/examples/mlp/mlp.psk"), "stderr"),
    # steps 2, 3, 4: --summary
    Case("02_norm.summary.txt", ("check", "tutorial/02_norm.psk", "--summary"), "stdout"),
    Case("03_attention.summary.txt", ("check", "tutorial/03_attention.psk", "--summary"), "stdout"),
    Case("04_grad.summary.txt", ("check", "tutorial/04_grad.psk", "--summary"), "stdout"),
    # not in the tutorial: pinned as reviewed
    Case("06_tower.summary.txt", ("check", "tutorial/06_tower.psk", "--summary"), "stdout"),
    Case("07_train.summary.txt", ("check", "tutorial/07_train.psk", "--summary"), "stdout"),
    # step 2's variants, run from tests/diag as the tutorial names them
    Case("bad_axis.txt", ("check", "bad_axis.psk"), "stderr", 1, "tests/diag"),
    Case("bad_ret.txt", ("check", "bad_ret.psk"), "stderr", 1, "tests/diag"),
    Case("bad_unbound.txt", ("check", "bad_unbound.psk"), "stderr", 1, "tests/diag"),
    Case("bad_syntax.txt", ("check", "bad_syntax.psk"), "stderr", 1, "tests/diag"),
    # steps 4 and 5
    Case("bad_argmax.txt", ("check", "bad_argmax.psk"), "stderr", 1, "tests/diag"),
    Case("bad_rand.txt", ("check", "bad_rand.psk"), "stderr", 1, "tests/diag"),
    # step 6
    Case("06_tower.elab.txt", ("dump", "tutorial/06_tower.psk", "--stage", "elab"), "stdout"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.golden for c in CASES])
def test_golden(case: Case) -> None:
    result = presk(*case.args, cwd=case.cwd)
    other = "stderr" if case.stream == "stdout" else "stdout"
    assert getattr(result, case.stream) == golden(case.golden)
    assert getattr(result, other) == ""
    assert result.returncode == case.code


def test_linear_is_silent() -> None:
    result = presk("check", "tutorial/01_linear.psk")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_ascii_spelling_is_the_same_program() -> None:
    unicode = presk("check", "tutorial/01_linear.psk", "--summary")
    ascii_ = presk("check", "tutorial/01_linear_ascii.psk", "--summary")
    assert ascii_.returncode == 0 and ascii_.stderr == ""
    assert ascii_.stdout.split(" ", 1)[1] == unicode.stdout.split(" ", 1)[1]


def test_const_heads_three_first_and_last_errors() -> None:
    """Step 3: with H=3, the first error is E1005 on HD and the last the failed assertion."""
    result = presk("check", "tutorial/03_attention.psk", "--const", "H=3")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(golden("03_attention_H3.first.txt"))
    assert result.stderr.endswith(golden("03_attention_H3.last.txt"))


def test_const_override_keeps_a_correct_program_correct() -> None:
    result = presk("check", "tutorial/03_attention.psk", "--const", "H=4", "--summary")
    assert result.returncode == 0, result.stderr
    assert "03_attention.psk attend : ℝ[batch: B, heads: 4, seq: T, hd: 2]\n" in result.stdout


def test_const_of_an_unknown_constant() -> None:
    result = presk("check", "tutorial/03_attention.psk", "--const", "Z=1")
    assert result.returncode == 1
    assert result.stderr.startswith("[E1006] Error: no constant `Z`")
    assert result.stdout == ""


def test_const_without_a_value_is_usage() -> None:
    result = presk("check", "tutorial/03_attention.psk", "--const", "H")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_missing_file() -> None:
    result = presk("check", "tests/check/no_such_file.psk")
    assert result.returncode == 1
    assert result.stderr.startswith("[E0001] Error: cannot read")


def test_summary_of_a_failing_program_still_exits_one() -> None:
    result = presk("check", "bad_ret.psk", "--summary", cwd="tests/diag")
    assert result.returncode == 1
    assert result.stderr == golden("bad_ret.txt")
    assert "Linear.apply" not in result.stdout  # a function in error has no summary line
