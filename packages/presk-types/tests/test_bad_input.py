"""Issue 16: programs the checker accepted and the run then crashed on, and constants the
checker itself crashed on. Each is now a diagnostic with its code, at check."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from presk_syntax.diagnostics import render
from presk_syntax.span import SourceMap
from presk_types.driver import Checked, check_file

ROOT = Path(__file__).resolve().parents[3]
F = "fn f(x : ℝ[n: 2]) -> ℝ[n: 2] = x\n"


def check(tmp_path: Path, source: str, overrides: dict[str, str] | None = None) -> Checked:
    path = tmp_path / "t.psk"
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return check_file(str(path), overrides)


def errors(c: Checked) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in c.diagnostics if d.is_error]


def module(init: str, use: str = "") -> str:
    return f"""
    module M {{
      {use}
      param w : ℝ[n: 3] init = {init}
      fn apply(x : ℝ[n: 3]) -> ℝ[n: 3] = x * w
    }}
    """


# ---- constants ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    ["const A : nat = 1 + 0\nconst B : nat = A * 0\n", "const A : nat = 2 - 0\n"],
)
def test_constants_with_a_zero_operand_evaluate(tmp_path: Path, source: str) -> None:
    # the four operators were evaluated at once: `a / b` raised for every b = 0
    assert errors(check(tmp_path, source + F)) == []


def test_a_huge_power_is_refused_not_computed(tmp_path: Path) -> None:
    c = check(tmp_path, "const A : nat = 2^2^31\nconst B : nat = 1^2^31\n" + F)
    assert errors(c) == [("E1003", "a constant too large to compute")]


def test_a_zero_to_a_negative_power_is_a_division_by_zero(tmp_path: Path) -> None:
    c = check(tmp_path, "const A : f64 = 0^(0 - 1)\n" + F)
    assert errors(c) == [("E1003", "division by zero in a constant")]


def test_a_static_assertion_that_is_no_comparison_is_e1004(tmp_path: Path) -> None:
    c = check(tmp_path, "const D : nat = 4\nconst H : nat = 2\nstatic assert D % H\n" + F)
    assert errors(c) == [("E1004", "a static assertion is a comparison of lengths")]


def test_a_divisor_overridden_to_zero_is_a_division_by_zero(tmp_path: Path) -> None:
    source = "const G : nat = 2\nconst H : nat = 4\nstatic assert H % G == 0\n" + F
    c = check(tmp_path, source, {"G": "0"})
    assert errors(c) == [("E1003", "division by zero in the length `H % G`")]


def test_bert_with_d_zero_or_h_zero() -> None:
    # `4 * D` with D = 0 raised ZeroDivisionError (the `/` beside it was evaluated too)
    bert = str(ROOT / "tests/examples/bert/bert.psk")
    assert check_file(bert, {"D": "0"}).diagnostics == []
    found = [(d.code, d.message) for d in check_file(bert, {"H": "0"}).diagnostics]
    assert found[0] == ("E1003", "division by zero in a constant")
    assert all(code != "E1000" for code, _ in found)


def test_a_bad_override_prints_no_reported_placeholder(tmp_path: Path) -> None:
    source = "const H : nat = 4\nstatic assert H % 2 == 0\nfn f(x : ℝ[n: H]) -> ℝ[n: H] = x\n"
    c = check(tmp_path, source, {"H": "1/2"})
    assert [d.code for d in c.diagnostics] == ["E1005"]


# ---- stacks ------------------------------------------------------------------------------

TOWER = """
const L : nat = 3
module B {
  param w : ℝ[n: 3]
  fn apply(x : ℝ[n: 3]) -> ℝ[n: 3] = x * w
}
module T {
  use bs : stack{L}(B)
  fn apply(x : ℝ[n: 3]) -> ℝ[n: 3] = bs.apply(x)
}
"""


@pytest.mark.parametrize(("count", "text"), [("0", "a stack of 0 blocks"), ("2147483648", None)])
def test_a_stack_count_out_of_range_is_e2002(tmp_path: Path, count: str, text) -> None:
    c = check(tmp_path, TOWER, {"L": count})
    ((code, message),) = set(errors(c))
    assert code == "E2002" and message == (text or f"a stack of {count} blocks")


def test_the_tutorial_tower_with_l_zero_is_refused() -> None:
    c = check_file(str(ROOT / "tutorial/06_tower.psk"), {"L": "0"})
    assert {d.code for d in c.diagnostics if d.is_error} == {"E2002"}


# ---- modules: initializers and uses ------------------------------------------------------


@pytest.mark.parametrize(
    ("init", "code"),
    [
        ("foo", "E2001"),
        ("3", "E2008"),
        ("normal(foo = 1)", "E2004"),
        ("normal(std = x)", "E2004"),
        ("zeros(std = 1)", "E2004"),
        ("bar(std = 1)", "E2001"),
    ],
)
def test_a_bad_initializer_is_refused(tmp_path: Path, init: str, code: str) -> None:
    c = check(tmp_path, module(init))
    assert [d.code for d in c.diagnostics] == [code]


@pytest.mark.parametrize("init", ["xavier_uniform", "zeros", "ones", "normal(std = 0.02)"])
def test_the_initializers_are_accepted(tmp_path: Path, init: str) -> None:
    assert errors(check(tmp_path, module(init))) == []


def test_a_module_that_uses_itself_is_e2012(tmp_path: Path) -> None:
    c = check(tmp_path, module("zeros", "use m : M"))
    assert errors(c) == [("E2012", "the module `M` contains itself: M -> M")]


def test_modules_that_use_each_other_are_e2012(tmp_path: Path) -> None:
    source = """
    module A {
      use b : B
      param w : ℝ[n: 3]
    }
    module B {
      use a : stack{2}(A)
      param w : ℝ[n: 3]
    }
    """
    messages = [m for code, m in errors(check(tmp_path, source)) if code == "E2012"]
    assert messages == [
        "the module `A` contains itself: A -> B -> A",
        "the module `B` contains itself: B -> A -> B",
    ]


@pytest.mark.parametrize("use", ["use m : Nope", "use m : M2{Q}"])
def test_an_unused_use_of_an_undefined_name_is_e2001(tmp_path: Path, use: str) -> None:
    source = module("zeros", use) + "module M2{N : dim} {\n  param v : ℝ[n: N]\n}\n"
    assert [code for code, _ in errors(check(tmp_path, source))] == ["E2001"]


def test_the_diagnostic_is_rendered_on_the_source(tmp_path: Path) -> None:
    path = tmp_path / "t.psk"
    path.write_text(textwrap.dedent(module("foo")).lstrip(), encoding="utf-8")
    sources = SourceMap()
    c = check_file(str(path), None, sources)
    text = render(c.diagnostics[0], sources, color=False)
    assert "unknown initializer `foo`" in text and "init = foo" in text


@pytest.mark.parametrize("body", ["ein[a, a](x)", "ein[a, a](x * x)", "ein[a, b, a](x * x)"])
def test_an_ein_naming_an_output_axis_twice_is_e2013(tmp_path: Path, body: str) -> None:
    c = check(tmp_path, f"fn f{{N : dim}}(x : ℝ[a: N, b: N]) = {body}\n")
    assert errors(c) == [("E2013", "the axis `a` appears twice in the output of `ein`")]


# ---- lengths, grad, effects, contraction -------------------------------------------------


def test_a_length_that_can_be_negative_is_e2002_with_the_smallest_counterexample(
    tmp_path: Path,
) -> None:
    source = "dim T\nconst W : nat = 3\nfn f(x : ℝ[seq: T - W + 1]) -> ℝ[] = sum(x)\n"
    (d,) = check(tmp_path, source).diagnostics
    assert (d.code, d.message) == ("E2002", "the length `T - W + 1` can be negative")
    assert d.labels[0].text == "is -2 for T = 0"


def test_a_length_written_from_the_smaller_one_is_accepted(tmp_path: Path) -> None:
    source = "const W : nat = 3\nfn f{N : dim}(x : ℝ[seq: N + W - 1]) -> ℝ[] = sum(x)\n"
    assert errors(check(tmp_path, source)) == []


def test_grad_with_respect_to_indices_is_e3001(tmp_path: Path) -> None:
    source = """
    fn f(i : idx[4][n: 3], x : ℝ[n: 3]) -> ℝ[] = sum(x)
    fn g(i : idx[4][n: 3], x : ℝ[n: 3]) -> idx[4][n: 3] = grad(λ i. f(i, x))(i)
    """
    (d,) = check(tmp_path, source).diagnostics
    assert d.code == "E3001" and "`idx[4][n: 3]` is not real" in d.message


def test_a_second_order_grad_is_e3002_at_check(tmp_path: Path) -> None:
    source = """
    fn f(x : ℝ[]) -> ℝ[] = x^3
    fn d(x : ℝ[]) -> ℝ[] = grad(λ y. f(y))(x)
    fn dd(x : ℝ[]) -> ℝ[] = grad(λ y. d(y))(x)
    fn other(x : ℝ[]) -> ℝ[] = x * 2
    """
    c = check(tmp_path, source)
    assert [d.code for d in c.diagnostics] == ["E3002"]
    assert [i.key for i in c.checker.order if not i.ok] == ["dd"]


def test_grad_of_a_function_that_is_not_scalar_labels_the_body(tmp_path: Path) -> None:
    source = """
    fn f(x : ℝ[n: 3]) -> ℝ[n: 3] = x * 2
    fn g(x : ℝ[n: 3]) -> ℝ[n: 3] = grad(λ y. f(y))(x)
    """
    (d,) = check(tmp_path, source).diagnostics
    assert d.code == "E2008" and d.labels[0].text == "returns `ℝ[n: 3]`, not `ℝ[]`"


def test_a_declared_effect_is_kept_and_its_callers_must_declare_it(tmp_path: Path) -> None:
    source = """
    fn f(k : key, x : ℝ[n: 3]) -> ℝ[n: 3] uses Rand = x
    fn g(k : key, x : ℝ[n: 3]) -> ℝ[n: 3] = f(k, x)
    """
    c = check(tmp_path, source)
    assert [d.code for d in c.diagnostics] == ["E4001"]
    (f,) = [i for i in c.checker.order if i.key == "f"]
    assert list(f.effects) == ["Rand"]


def test_a_contraction_of_axes_of_different_names_is_e2003(tmp_path: Path) -> None:
    source = "fn f(x : ℝ[a: 3], y : ℝ[b: 3]) -> ℝ[] = x · y\n"
    (d,) = check(tmp_path, source).diagnostics
    assert d.code == "E2003" and "the axis `a` of `ℝ[a: 3]` with the axis `b`" in d.message


@pytest.mark.parametrize("types", ["ℝ[a: 3], y : ℝ[a: 3]", "ℝ[3], y : ℝ[b: 3]"])
def test_a_contraction_of_one_name_or_positional_is_accepted(tmp_path: Path, types: str) -> None:
    assert errors(check(tmp_path, f"fn f(x : {types}) -> ℝ[] = x · y\n")) == []


# ---- diagnostics that misled -------------------------------------------------------------

THETA = """
module M {
  param w : ℝ[n: 3]
  fn apply(x : ℝ[n: 3]) -> ℝ[n: 3] = x * w
}
fn f(net : M, θ : params net, x : ℝ[n: 3]) -> ℝ[n: 3] = x * θ.NAME
"""


def test_a_member_of_a_parameter_tree_is_reached_from_outside_its_module(tmp_path: Path) -> None:
    assert check(tmp_path, THETA.replace("NAME", "w")).diagnostics == []  # issue 29
    (d,) = check(tmp_path, THETA.replace("NAME", "v")).diagnostics
    assert (d.code, d.message) == ("E2001", "`params M` has no member `v`")


def test_percent_between_reals_is_e2008(tmp_path: Path) -> None:
    source = "fn f(x : ℝ[n: 3], y : ℝ[n: 3]) -> ℝ[n: 3] = x % y\n"
    (d,) = check(tmp_path, source).diagnostics
    assert d.code == "E2008" and d.message.startswith("`%` is an operator of lengths")


def test_a_file_dimension_in_caller_and_callee_is_inferred(tmp_path: Path) -> None:
    source = """
    dim T
    fn h(x : ℝ[seq: T + 1]) -> ℝ[] = sum(x)
    fn g(x : ℝ[seq: T + 1]) -> ℝ[] = h(x)
    fn h2{N : dim}(x : ℝ[seq: 2 * N]) -> ℝ[] = sum(x) * (N : ℝ)
    fn g2(x : ℝ[seq: 8]) -> ℝ[] = h2(x)
    """
    assert errors(check(tmp_path, source)) == []


def test_a_counterexample_gives_lengths_that_are_natural() -> None:
    from presk_types.presburger import DimContext, Lin
    from presk_types.shapes import Lengths

    lengths = Lengths(DimContext.of("N"))
    # `N - 1` against 0: N = 0 would make the length -1; N = 2 is a real mismatch
    assert lengths.differ(Lin.var("N") - 1, Lin.const(0)) == "N = 2"
    # `N` against 2 in a broadcast: N = 1 would broadcast, N = 0 is an empty axis
    assert lengths.differ(Lin.var("N"), Lin.const(2), broadcast=True) == "N = 3"
    assert lengths.differ(Lin.var("N"), Lin.const(2)) == "N = 0"


def test_a_long_ein_naming_an_axis_twice_is_refused_in_linear_time(tmp_path: Path) -> None:
    # the fuzzer's `ein[batch, x, x, …]` of 100,000 names: a quadratic test of names hung
    names = ", ".join(["a"] + ["x"] * 30_000)
    c = check(tmp_path, f"fn f{{N : dim}}(x : ℝ[a: N, x: N]) = ein[{names}](x)\n")
    assert errors(c) == [("E2013", "the axis `x` appears twice in the output of `ein`")]
