"""docs/language.md lists every primitive of the registry, with its signature."""

from pathlib import Path

from presk_types.rules import PRIMITIVES

DOC = Path(__file__).resolve().parents[1] / "docs" / "language.md"


def test_every_primitive_is_documented_with_its_signature():
    text = DOC.read_text()
    for p in PRIMITIVES.values():
        assert f"| `{p.name}` | `{p.signature}` |" in text, p.name


# ---- behaviours the chapters state, each run (issue 16, "Docs out of step") --------------

import textwrap  # noqa: E402

import pytest  # noqa: E402
from presk_cli.main import main  # noqa: E402
from presk_types.driver import check_file  # noqa: E402

INTERPRETER = DOC.with_name("interpreter.md")


def _codes(tmp_path, source: str) -> list[str]:
    path = tmp_path / "t.psk"
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return [d.code for d in check_file(str(path)).diagnostics if d.is_error]


def _run(tmp_path, capfd, source: str, *args: str) -> tuple[int, str]:
    path = tmp_path / "t.psk"
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    try:
        code = main(["run", str(path), *args])
    except SystemExit as e:
        code = e.code
    out, err = capfd.readouterr()
    return code, out + err


@pytest.mark.parametrize(
    ("length", "codes"),
    [("N / 2", ["E2002"]), ("D / 2", []), ("D % 3", []), ("T - W + 1", ["E2002"])],
)
def test_lengths_are_as_the_chapter_says(tmp_path, length: str, codes: list[str]) -> None:
    text = DOC.read_text()
    assert "`/ %` of constants (`N / 2` is E2002)" in text
    assert "`T - W + 1` with `dim T` is refused" in text
    source = f"""
    dim T
    const D : nat = 8
    const W : nat = 3
    fn f{{N : dim}}(x : ℝ[n: {length}]) -> ℝ[] = sum(x)
    """
    assert _codes(tmp_path, source) == codes


def test_the_kinks_differentiate_as_the_chapter_says(tmp_path, capfd) -> None:
    # maximum at a tie: half to each operand, so sum(max(x, x)) has gradient 1 (not 2);
    # max over an axis, x^(-1), x^y and a summing ein differentiate (they were E7002)
    text = " ".join(DOC.read_text().split())
    assert "half to each at a tie; `max` and `min` over an axis give it to the first" in text
    assert "`x^y` with y a real (`x^(-1)` too) also gives y" in text
    source = """
    fn f(x : ℝ[a: 2]) -> ℝ[] = sum(max(x, x)) + max(axis a, x * 0)
    fn df(x : ℝ[a: 2]) -> ℝ[a: 2] = grad(λ x. f(x))(x)
    fn g(x : ℝ[a: 2], y : ℝ[]) -> ℝ[] = sum(x^(-1)) + sum(x^y) + ein[](x)
    fn dg(x : ℝ[a: 2], y : ℝ[]) -> ℝ[] = grad(λ y. g(x, y))(y)
    """
    code, out = _run(tmp_path, capfd, source, "--entry", "df")
    assert (code, out) == (0, "ℝ[a: 2] = [a: 2] [1, 1]\n")
    code, out = _run(tmp_path, capfd, source, "--entry", "dg")
    assert code == 0 and out.startswith("ℝ[] = ")


def test_a_function_that_takes_a_gradient_runs_and_order_two_is_e3002(tmp_path) -> None:
    text = " ".join(INTERPRETER.read_text().split())
    assert "`presk run` evaluates a function that takes a gradient like any other" in text
    assert "(order two) is refused at check (E3002)" in text
    source = """
    fn f(x : ℝ[]) -> ℝ[] = x^3
    fn d(x : ℝ[]) -> ℝ[] = grad(λ y. f(y))(x)
    fn dd(x : ℝ[]) -> ℝ[] = grad(λ y. d(y))(x)
    """
    assert _codes(tmp_path, source) == ["E3002"]


@pytest.mark.parametrize(
    ("item", "code"),
    [
        ("param w : ℝ[n: 3]  init = uniform", "E2001"),
        ("use m : Nope", "E2001"),
        ("use m : M", "E2012"),
        ("use s : stack{0}(B)", "E2002"),
    ],
)
def test_module_items_are_checked_as_the_chapter_says(tmp_path, item: str, code: str) -> None:
    text = " ".join(DOC.read_text().split())
    assert "from 1 to 65536 (E2002). A `use` names a module in scope (E2001)" in text
    assert "Another initializer is refused at check" in text
    source = f"module B {{\n  param v : ℝ[n: 3]\n}}\nmodule M {{\n  {item}\n}}\n"
    assert _codes(tmp_path, source) == [code]


def test_a_declared_effect_is_kept_as_the_chapter_says(tmp_path) -> None:
    assert "An effect declared is the function's even when its" in DOC.read_text()
    source = """
    fn f(k : key, x : ℝ[n: 3]) -> ℝ[n: 3] uses Rand = x
    fn g(k : key, x : ℝ[n: 3]) -> ℝ[n: 3] = f(k, x)
    """
    assert _codes(tmp_path, source) == ["E4001"]
