"""The tutorial's programs through `presk_types.driver.check_file`, in process.

The same goldens as test_cli.py, rendered here from `Checked.diagnostics` (or from the
`DiagnosticError` a syntax error raises), plus what the checker knows about each program:
its functions, their types, lets, classes and effects, and the dimensions it inferred.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from presk_core.data import read_header
from presk_syntax.diagnostics import DiagnosticError, render
from presk_syntax.span import SourceMap
from presk_types.driver import Checked, check_file
from presk_types.summary import summary

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
TUTORIAL = ["01_linear", "01_linear_ascii", "02_norm", "03_attention", "04_grad", "05_sample"]
TUTORIAL += ["06_tower", "07_train"]


def checked(path: str, overrides: dict[str, str] | None = None) -> tuple[Checked, SourceMap]:
    sources = SourceMap()
    header = lambda p: read_header(p).type_text  # noqa: E731  (the CLI's reader of data files)
    return check_file(path, overrides, sources, data_header=header), sources


def rendered(path: str, overrides: dict[str, str] | None = None) -> str:
    sources = SourceMap()
    try:
        diags = check_file(path, overrides, sources).diagnostics
    except DiagnosticError as e:
        diags = e.diagnostics
    return "".join(render(d, sources, color=False) for d in diags)


def golden(name: str) -> str:
    return (GOLDEN / name).read_text(encoding="utf-8")


def fn(c: Checked, key: str):
    (info,) = [i for i in c.checker.order + c.checker.lambdas if i.key == key]
    return info


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.fixture
def in_diag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT / "tests" / "diag")


@pytest.mark.parametrize("name", TUTORIAL)
def test_tutorial_programs_have_no_diagnostic(at_root: None, name: str) -> None:
    c, _ = checked(f"tutorial/{name}.psk")
    assert c.ok
    assert c.diagnostics == []
    assert all(info.ok for info in c.checker.order)


@pytest.mark.parametrize(
    "name", ["bad_axis", "bad_ret", "bad_unbound", "bad_syntax", "bad_argmax", "bad_rand"]
)
def test_diag_programs_render_as_the_tutorial(in_diag: None, name: str) -> None:
    assert rendered(f"{name}.psk") == golden(f"{name}.txt")


def test_mlp_warns_once_per_function(at_root: None) -> None:
    c, sources = checked("tests/examples/mlp/mlp.psk")
    assert c.ok
    assert [d.code for d in c.diagnostics] == ["W0001", "W0001"]
    assert "".join(render(d, sources, False) for d in c.diagnostics) == golden("mlp.stderr.txt")
    assert "B" in fn(c, "mse").dims and "B" in fn(c, "mse_grad").dims


def test_const_heads_three(at_root: None) -> None:
    c, _ = checked("tutorial/03_attention.psk", {"H": "3"})
    assert not c.ok
    codes = [d.code for d in c.diagnostics]
    assert codes[0] == "E1005" and codes[-1] == "E1004"
    text = rendered("tutorial/03_attention.psk", {"H": "3"})
    assert text.startswith(golden("03_attention_H3.first.txt"))
    assert text.endswith(golden("03_attention_H3.last.txt"))


@pytest.mark.parametrize("name", ["02_norm", "03_attention", "04_grad", "06_tower", "07_train"])
def test_summary_text(at_root: None, name: str) -> None:
    c, _ = checked(f"tutorial/{name}.psk")
    assert summary(c.checker, c.runs) == golden(f"{name}.summary.txt")


def test_attention_types(at_root: None) -> None:
    c, _ = checked("tutorial/03_attention.psk")
    assert str(fn(c, "scores").result) == "ℝ[batch: B, heads: 2, seq: T, seq2: T]"
    attend = fn(c, "attend")
    assert str(attend.result) == "ℝ[batch: B, heads: 2, seq: T, hd: 4]"
    assert [(n, str(t)) for n, t in attend.lets] == [
        ("s", "ℝ[batch: B, heads: 2, seq: T, seq2: T]"),
        ("a", "ℝ[batch: B, heads: 2, seq: T, seq2: T]"),
    ]
    assert c.program.main.dim_bounds == {"B": None, "T": 1024}


def test_grad_types_and_lambda(at_root: None) -> None:
    c, _ = checked("tutorial/04_grad.psk")
    assert str(fn(c, "loss").result) == "ℝ[]"
    assert [(n, str(t)) for n, t in fn(c, "loss").lets] == [("ŷ", "ℝ[batch: B, 1]")]
    assert str(fn(c, "loss_grad").result) == "params Linear{D, 1}"
    lam = fn(c, "loss_grad.lambda0")
    assert [(n, str(k)) for n, k, _ in lam.classes] == [("x", "C∞"), ("y", "C∞"), ("θ", "C∞")]


def test_sample_uses_rand(at_root: None) -> None:
    c, _ = checked("tutorial/05_sample.psk")
    pick = fn(c, "pick")
    assert str(pick.result) == "idx[8][batch: B]"
    assert list(pick.effects) == ["Rand"]
    assert dict((n, str(k)) for n, k, _ in pick.classes) == {"key": "C∞", "logits": "Disc"}


def test_training_objective_unpacks_its_batch(at_root: None) -> None:
    c, _ = checked("tutorial/07_train.psk")
    loss = fn(c, "loss")
    assert [(n, str(t)) for n, t in loss.lets] == [
        ("x", "ℝ[batch: B, model: 4]"),
        ("y", "ℝ[batch: B, model: 4]"),
    ]
    assert str(loss.result) == "ℝ[]"


def test_tower_dimensions_follow_a_const_override(at_root: None) -> None:
    c, _ = checked("tutorial/06_tower.psk", {"D": "6", "L": "1"})
    assert c.ok
    assert str(fn(c, "Tower.apply").result) == "ℝ[..., model: 6]"


def test_unknown_const_raises_e1006(at_root: None) -> None:
    with pytest.raises(DiagnosticError) as e:
        check_file("tutorial/03_attention.psk", {"Z": "1"})
    assert [d.code for d in e.value.diagnostics] == ["E1006"]
