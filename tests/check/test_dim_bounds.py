"""Lower bounds on dimensions (`dim T >= 2`, `dim 2 <= T <= 1024`) and the dimensions
`presk run` asks for (issue 16): the checker decides lengths with the bounds, `--dim`,
`--const` and the data of a training run cannot go below them, and an entry is asked
only for the dimensions it needs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from presk_core.data import read_header
from presk_core.lower import lower_program
from presk_core.run import EntryError, check_dim_names, parse_entry, run_entry
from presk_syntax.span import SourceMap
from presk_types.driver import check_file
from presk_types.presburger import Dim, DimContext, Ge, Lin, check_assignment, holds_for_all

ROOT = Path(__file__).resolve().parents[2]

WINDOWS = """\
const W : nat = 3
dim T {bound}
fn windows_of(x : ℝ[win: T - W + 1]) -> ℝ[] =
  sum(x)
"""


def check(tmp_path: Path, text: str, overrides: dict[str, str] | None = None, name="f.psk"):
    path = tmp_path / name
    path.write_text(text)
    header = lambda p: read_header(p).type_text  # noqa: E731
    return check_file(str(path), overrides, SourceMap(), data_header=header)


def codes(checked) -> list[str]:
    return [d.code for d in checked.diagnostics if d.is_error]


def test_the_context_has_the_lower_bound():
    ctx = DimContext((Dim("T", 1024, 3), Dim("W")))
    assert holds_for_all(ctx, Ge(Lin.var("T") - Lin.const(3), Lin.const(0))) is None
    counter = holds_for_all(ctx, Ge(Lin.var("T") - Lin.const(4), Lin.const(0)))
    assert dict(counter) == {"T": 3}
    assert str(check_assignment(ctx, {"T": 2, "W": 0})) == "`T >= 3` is false for T = 2"
    assert check_assignment(ctx, {"T": 3, "W": 0}) is None


@pytest.mark.parametrize(
    "bound", [">= W - 1", ">= 2", "≥ W", ">= 2 <= 1024", "2 <= T <= 1024", "W ≤ T ≤ 4 * W"]
)
def test_a_lower_bound_proves_a_length_natural(tmp_path, bound):
    text = WINDOWS.format(bound=bound)
    if bound.startswith(("2 ", "W ")):
        text = text.replace("dim T ", "dim ").replace(f"dim {bound}", f"dim {bound}")
    if bound == ">= 2 <= 1024":  # not a spelling: both bounds are `dim 2 <= T <= 1024`
        with pytest.raises(Exception, match="E00"):
            check(tmp_path, text)
        return
    assert codes(check(tmp_path, text)) == []


def test_without_enough_lower_bound_the_counterexample_respects_it(tmp_path):
    checked = check(tmp_path, WINDOWS.format(bound=">= 1"))
    (d,) = checked.diagnostics
    assert d.code == "E2002"
    assert d.labels[0].text == "is -1 for T = 1"  # the smallest T allowed, not T = 0
    assert "dim T >= W - 1" in d.help
    assert codes(check(tmp_path, WINDOWS.format(bound=""))) == ["E2002"]


def test_a_const_moves_the_bound_and_is_checked_again(tmp_path):
    text = WINDOWS.format(bound=">= W - 1")
    assert codes(check(tmp_path, text, {"W": "5"})) == []
    text = "const L : nat = 2\ndim T >= L\nstatic assert T >= 2\n"
    assert codes(check(tmp_path, text)) == []
    assert codes(check(tmp_path, text, {"L": "1"})) == ["E1004"]


def test_bounds_that_are_not_natural_or_leave_no_value(tmp_path):
    checked = check(tmp_path, "dim 5 <= T <= 3\ndim U >= 1/2\n")
    assert [(d.code, d.message) for d in checked.diagnostics] == [
        ("E1005", "no value of `T` is within its bounds"),
        ("E1005", "a dimension's bound is not a natural number"),
    ]


PROGRAM = """\
dim B
dim 2 <= T <= 64
fn f(x : ℝ[3]) -> ℝ[] = sum(x)
fn g(x : ℝ[B]) -> ℝ[] = sum(x)
fn h(x : ℝ[3]) -> ℝ[] = g(x)
fn k(x : ℝ[T]) -> ℝ[] = g(x)
fn m(x : ℝ[3]) -> ℝ[] = sum(x) + sum(real(causal_mask(seq: T)))
fn avg(x : ℝ[3]) -> ℝ[] = sum(x) / (B : ℝ)
"""


def entry(tmp_path: Path, name: str, dims: dict[str, int]):
    checked = check(tmp_path, PROGRAM)
    assert codes(checked) == []
    return parse_entry(name, lower_program(checked.program), checked.program, dims)


def test_an_entry_is_asked_only_for_the_dimensions_it_needs(tmp_path):
    assert entry(tmp_path, "f", {}).dims == {"B": 0, "T": 2}  # neither: the least values
    assert entry(tmp_path, "h", {}).function.name == "h"  # g's B is bound to 3 by the call
    with pytest.raises(EntryError, match="no value for the dimension `B` of `g`"):
        entry(tmp_path, "g", {})
    with pytest.raises(EntryError, match="no value for the dimension `T` of `k`"):
        entry(tmp_path, "k", {})
    assert entry(tmp_path, "k", {"T": 4}).dims == {"B": 0, "T": 4}  # g's B = T by the call
    with pytest.raises(EntryError, match="no value for the dimension `T` of `m`"):
        entry(tmp_path, "m", {})  # T reached in the body only
    with pytest.raises(EntryError, match="no value for the dimension `B` of `avg`"):
        entry(tmp_path, "avg", {})  # B as a number, a literal operand


def test_a_dim_below_its_lower_bound_is_refused(tmp_path):
    with pytest.raises(EntryError, match=r"`T >= 2` is false for T = 1"):
        entry(tmp_path, "k", {"T": 1})
    with pytest.raises(EntryError, match=r"`T <= 64` is false for T = 65"):
        entry(tmp_path, "k", {"T": 65})


def test_run_prints_an_entry_without_the_unused_dimension(tmp_path):
    checked = check(tmp_path, PROGRAM)
    out = run_entry(lower_program(checked.program), checked.program, "f", {})
    assert out.startswith("ℝ[] = ")


def test_training_data_below_a_bound_is_refused(tmp_path):
    for name in ("06_tower.psk", "01_linear.psk", "02_norm.psk"):
        if (ROOT / "tutorial" / name).exists():
            shutil.copy(ROOT / "tutorial" / name, tmp_path / name)
    shutil.copytree(ROOT / "tutorial" / "data", tmp_path / "data")
    text = (ROOT / "tutorial" / "07_train.psk").read_text()
    assert codes(check(tmp_path, text, name="train.psk")) == []
    checked = check(tmp_path, text.replace("dim B\n", "dim B >= 16\n"), name="train.psk")
    (d,) = [d for d in checked.diagnostics if d.is_error]
    assert d.code == "E1011"
    assert "B = 8" in d.message and "`B >= 16`" in d.message


LIB = """\
dim B
dim 2 <= T <= 16
module Pos {
  param pos : ℝ[seq: T, model: 2]
  fn apply(x : ℝ[batch: B, seq: T, model: 2]) -> ℝ[batch: B, seq: T, model: 2] = x + pos
}
"""


def test_a_tree_asks_only_for_what_its_initializer_needs(tmp_path):
    (tmp_path / "lib.psk").write_text(LIB)
    text = 'import "lib.psk" as l\nfn one(θ : params l.Pos) -> ℝ[] = 1\n'
    checked = check(tmp_path, text, name="main.psk")
    core = lower_program(checked.program)
    # the tree needs lib's T (its `pos`), given by --dim though `one` has no T; never B
    with pytest.raises(EntryError, match=r"its tree needs `--dim T=N`"):
        run_entry(core, None, "one", {})
    assert run_entry(core, None, "one", {"T": 3}).startswith("ℝ[] = 1")
    with pytest.raises(EntryError, match=r"`T <= 16` is false for T = 17"):
        run_entry(core, None, "one", {"T": 17})
    with pytest.raises(EntryError, match=r"`T >= 2` is false for T = 1"):
        run_entry(core, None, "one", {"T": 1})
    check_dim_names(parse_entry("one", core, None, {"T": 3}))  # not a mistyped name


def test_a_call_into_another_files_function_takes_on_its_dimensions(tmp_path):
    # LayerNorm.apply{B T} of minigpt called from a file without B or T bound them to
    # nothing: an internal error at run time. The caller takes them on, asked if needed.
    (tmp_path / "lib.psk").write_text(
        "dim B\ndim T >= 2\n"
        "fn unused(x : ℝ[n: 3]) -> ℝ[n: 3] = x * 2\n"
        "fn total(x : ℝ[n: 3]) -> ℝ[] = sum(x) + sum(real(causal_mask(seq: T)))\n"
    )
    text = 'import "lib.psk" as l\nfn f(x : ℝ[n: 3]) -> ℝ[] = sum(l.unused(x))\n'
    text += "fn g(x : ℝ[n: 3]) -> ℝ[] = l.total(x)\n"
    checked = check(tmp_path, text, name="main.psk")
    assert codes(checked) == []
    core = lower_program(checked.program)
    assert core.function("f").dims == ("B", "T")
    assert run_entry(core, None, "f", {}).startswith("ℝ[] = ")
    with pytest.raises(EntryError, match="no value for the dimension `T` of `g`"):
        run_entry(core, None, "g", {})
    assert run_entry(core, None, "g", {"T": 3}).startswith("ℝ[] = ")
