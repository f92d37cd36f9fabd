"""The checker on small programs: calls, modules, stacks, elaboration errors, classes, effects.

Each program is written to a temporary file and checked with `check_file`; errors that
stop elaboration (imports, `--const` of an unknown name) raise `DiagnosticError`.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from presk_syntax.diagnostics import DiagnosticError, render
from presk_syntax.span import SourceMap
from presk_types.driver import Checked, check_file

LINEAR = """
module Lin{In Out : dim} {
  param w : ℝ[In, Out]  init = xavier_uniform
  param b : ℝ[Out]      init = zeros
  fn apply(x : ℝ[..., In]) -> ℝ[..., Out] =
    x · w + b
  fn twice(x : ℝ[..., In]) = apply(x) * 2
}
"""


def write(tmp_path: Path, source: str, name: str = "t.psk") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return str(path)


def check(
    tmp_path: Path, source: str, name: str = "t.psk", overrides: dict[str, str] | None = None
) -> Checked:
    return check_file(write(tmp_path, source, name), overrides)


def info(c: Checked, key: str):
    (found,) = [i for i in c.checker.order + c.checker.lambdas if i.key == key]
    return found


def result(c: Checked, key: str) -> str:
    return str(info(c, key).result)


def classes(c: Checked, key: str) -> dict[str, str]:
    return {n: str(k) for n, k, _ in info(c, key).classes}


def codes(c: Checked) -> list[str]:
    return [d.code for d in c.diagnostics]


def raised(tmp_path: Path, path: str, overrides: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(DiagnosticError) as e:
        check_file(path, overrides)
    return [d.code for d in e.value.diagnostics]


# ---- calls of functions ----------------------------------------------------------------------


def test_generic_function_infers_its_dimensions(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        """
        dim T
        fn first{N D : dim}(x : ℝ[n: N, d: D]) -> ℝ[d: D] = sum(axis n, x)
        fn constant(x : ℝ[n: 7, d: 3]) = first(x)
        fn symbolic(x : ℝ[n: T, d: 2*T]) = first(x)
        """,
    )
    assert c.diagnostics == []
    assert result(c, "constant") == "ℝ[d: 3]"
    assert result(c, "symbolic") == "ℝ[d: 2*T]"


def test_call_binds_the_prefix(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        """
        dim B
        fn pre(x : ℝ[..., model: 3]) = mean(axis model, x)
        fn use(x : ℝ[batch: B, seq: 7, model: 3]) = pre(x)
        """,
    )
    assert result(c, "pre") == "ℝ[...]"
    assert result(c, "use") == "ℝ[batch: B, seq: 7]"


def test_call_with_inconsistent_dimensions_is_e2006(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        """
        fn both{D : dim}(a : ℝ[x: D], b : ℝ[y: D]) = a
        fn call(a : ℝ[x: 3], b : ℝ[y: 4]) = both(a, b)
        """,
    )
    assert codes(c) == ["E2006"]
    assert result(c, "both") == "ℝ[x: D]"


def test_call_with_a_wrong_number_of_arguments_is_e2004(tmp_path: Path) -> None:
    c = check(tmp_path, "fn id(a : ℝ[3]) = a\nfn call(a : ℝ[3]) = id(a, a)\n")
    assert codes(c) == ["E2004"]


def test_recursion_is_e2012(tmp_path: Path) -> None:
    c = check(tmp_path, "fn loop(x : ℝ[3]) -> ℝ[3] = loop(x)\n")
    assert codes(c) == ["E2012"]


# ---- modules ---------------------------------------------------------------------------------


def test_module_function_with_explicit_params(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        LINEAR
        + """
        dim B
        fn outside{D : dim}(net : Lin{D, 2}, θ : params net, x : ℝ[batch: B, D]) =
          net.apply(θ, x)
        fn caller(net : Lin{3, 2}, θ : params net, x : ℝ[batch: B, 3]) = outside(net, θ, x)
        """,
    )
    assert c.diagnostics == []
    assert result(c, "outside") == "ℝ[batch: B, 2]"
    assert result(c, "caller") == "ℝ[batch: B, 2]"
    assert classes(c, "outside") == {"θ": "C∞", "x": "C∞"}  # no class for the module `net`


def test_module_function_by_the_modules_name(tmp_path: Path) -> None:
    """`Lin.apply(θ, x)` (as 07's `t.Tower.apply`): the dimensions come from θ."""
    write(tmp_path, LINEAR, "lin.psk")
    c = check(
        tmp_path,
        LINEAR
        + """
        import "lin.psk" as l
        dim B
        fn local(θ : params Lin{3, 5}, x : ℝ[batch: B, 3]) = Lin.apply(θ, x)
        fn imported(θ : params l.Lin{3, 5}, x : ℝ[batch: B, 3]) = l.Lin.apply(θ, x)
        """,
    )
    assert c.diagnostics == []
    assert result(c, "local") == "ℝ[batch: B, 5]"
    assert result(c, "imported") == "ℝ[batch: B, 5]"


def test_implicit_params_inside_a_module(tmp_path: Path) -> None:
    c = check(tmp_path, LINEAR)
    assert c.diagnostics == []
    assert result(c, "Lin.apply") == "ℝ[..., Out]"
    assert result(c, "Lin.twice") == "ℝ[..., Out]"
    assert classes(c, "Lin.twice") == {"θ": "C∞", "x": "C∞"}
    assert info(c, "Lin.apply").dims == ("In", "Out")


def test_submodules_and_a_stack(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        LINEAR
        + """
        const L : nat = 3
        module Deep{D : dim} {
          use first : Lin{D, D}
          use blocks : stack{L}(Lin{D, D})
          fn apply(x : ℝ[..., model: D]) -> ℝ[..., model: D] = blocks.apply(first.apply(x))
        }
        fn use(θ : params Deep{4}, x : ℝ[batch: 2, model: 4]) = Deep.apply(θ, x)
        """,
    )
    assert c.diagnostics == []
    assert result(c, "Deep.apply") == "ℝ[..., D]"
    assert result(c, "use") == "ℝ[batch: 2, model: 4]"
    assert classes(c, "Deep.apply") == {"θ": "C∞", "x": "C∞"}


def test_stack_of_a_block_that_changes_its_type_is_an_error(tmp_path: Path) -> None:
    """A stack applies its blocks in sequence: a block must return what it takes."""
    c = check(
        tmp_path,
        LINEAR
        + """
        module Grow{D : dim} {
          use blocks : stack{2}(Lin{D, 2*D})
          fn apply(x : ℝ[..., D]) = blocks.apply(x)
        }
        """,
    )
    assert codes(c) == ["E2008"]


def test_tuple_pattern(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        """
        dim B
        fn f(batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) =
          let (x, y) = batch
          x - y
        fn g(k : key) =
          let (k1, k2) = split_key(k)
          k2
        fn h(batch : (ℝ[batch: B], ℝ[batch: B])) =
          let (x, y, z) = batch
          x
        """,
    )
    assert [(n, str(t)) for n, t in info(c, "f").lets] == [
        ("x", "ℝ[batch: B, model: 4]"),
        ("y", "ℝ[batch: B, model: 4]"),
    ]
    assert result(c, "f") == "ℝ[batch: B, model: 4]"
    assert classes(c, "f") == {"batch": "C∞"}
    assert result(c, "g") == "key"
    assert codes(c) == ["E2008"]  # h: three names for a pair


# ---- dimensions: W0001 -----------------------------------------------------------------------


def test_implicit_dimension_warns_once_per_function(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        """
        fn f(x : ℝ[batch: N, model: 4], y : ℝ[batch: N, model: 4]) -> ℝ[batch: N] =
          mean(axis model, x + y)
        fn g(x : ℝ[batch: N]) = x
        fn h{N : dim}(x : ℝ[batch: N]) = x
        """,
    )
    assert c.ok
    assert codes(c) == ["W0001", "W0001"]
    lines = [d.labels[0].span.start for d in c.diagnostics]
    source = (tmp_path / "t.psk").read_bytes()
    assert [source[:s].count(b"\n") + 1 for s in lines] == [1, 3]
    assert info(c, "f").dims == ("N",) and info(c, "g").dims == ("N",)


def test_implicit_dimension_diagnostic_text(tmp_path: Path) -> None:
    path = write(tmp_path, "fn g(x : ℝ[batch: N]) = x\n")
    sources = SourceMap()
    (d,) = check_file(path, None, sources).diagnostics
    text = render(d, sources, color=False)
    assert text.startswith("[W0001] Warning: implicit dimension `N`\n")
    assert "`-- not declared; taken as a dimension of this function\n" in text
    assert "Help: declare it with `dim N` at file level or as a type parameter `{N : dim}`" in text


# ---- constants and assertions: E1004, E1005, E1006 -------------------------------------------

CONSTANTS = """
const A : nat = 6
const K : nat = 4
const Q : nat = A / K
const R : nat = A - 10
static assert A % K == 0
dim T <= 16
static assert T <= 16
static assert T <= 8
"""


def test_constants_and_assertions(tmp_path: Path) -> None:
    c = check(tmp_path, CONSTANTS)
    assert codes(c) == ["E1005", "E1005", "E1004", "E1004"]
    messages = [d.message for d in c.diagnostics]
    assert messages[0] == "`Q` is not a natural number"
    assert c.diagnostics[0].labels[0].text == "evaluates to 3/2"
    assert c.diagnostics[1].labels[0].text == "evaluates to -4"
    assert messages[2] == "static assertion fails: A % K == 0"
    assert (
        c.diagnostics[2].labels[0].text == "`A % K == 0` is false with the constants of this file"
    )
    assert c.diagnostics[3].labels[0].text == "`T <= 8` is false for T = 9"


def test_const_override(tmp_path: Path) -> None:
    c = check(tmp_path, CONSTANTS, overrides={"A": "8"})
    assert codes(c) == ["E1005", "E1004"]  # R = -2; A % K and Q are fine with A = 8


def test_const_override_of_an_unknown_constant_is_e1006(tmp_path: Path) -> None:
    path = write(tmp_path, CONSTANTS)
    assert raised(tmp_path, path, {"Z": "1"}) == ["E1006"]
    assert raised(tmp_path, path, {"A": "six"}) == ["E1006"]


def test_const_override_reaches_imported_files(tmp_path: Path) -> None:
    write(tmp_path, "const H : nat = 2\n", "consts.psk")
    c = check(
        tmp_path,
        """
        import "consts.psk" as k
        fn f(x : ℝ[heads: k.H]) = x
        """,
        overrides={"H": "5"},
    )
    assert c.diagnostics == []
    assert result(c, "f") == "ℝ[heads: 5]"


# ---- imports: E1001, E1002 -------------------------------------------------------------------


def test_import_of_a_missing_file_is_e1001(tmp_path: Path) -> None:
    path = write(tmp_path, 'import "nowhere.psk" as n\nfn f(x : ℝ[3]) = x\n')
    assert raised(tmp_path, path) == ["E1001"]


def test_import_cycle_is_e1002(tmp_path: Path) -> None:
    write(tmp_path, 'import "b.psk" as b\nfn f(x : ℝ[3]) = x\n', "a.psk")
    write(tmp_path, 'import "a.psk" as a\nfn g(x : ℝ[3]) = x\n', "b.psk")
    with pytest.raises(DiagnosticError) as e:
        check_file(str(tmp_path / "a.psk"))
    (d,) = e.value.diagnostics
    assert d.code == "E1002"
    assert "a.psk -> " in d.message and "b.psk -> " in d.message


def test_import_of_itself_is_e1002(tmp_path: Path) -> None:
    path = write(tmp_path, 'import "t.psk" as me\nfn f(x : ℝ[3]) = x\n')
    assert raised(tmp_path, path) == ["E1002"]


def test_diamond_imports_load_each_file_once(tmp_path: Path) -> None:
    write(tmp_path, "const D : nat = 4\n", "base.psk")
    write(tmp_path, 'import "base.psk" as base\n', "left.psk")
    write(tmp_path, 'import "base.psk" as base\n', "right.psk")
    c = check(tmp_path, 'import "left.psk" as l\nimport "right.psk" as r\n')
    assert [f.name for f in c.program.files] == ["base.psk", "left.psk", "right.psk", "t.psk"]


# ---- regularity classes ----------------------------------------------------------------------


def test_classes(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        """
        dim B
        fn smooth(x : ℝ[batch: B]) = exp(x) * x
        fn kinked(x : ℝ[batch: B], y : ℝ[batch: B]) = relu(x) + y
        fn disc(x : ℝ[batch: B, vocab: 8]) = argmax(x)
        fn index(i : idx[8][batch: B], x : ℝ[batch: B]) = real(i) * x
        fn mask(m : bool[batch: B], x : ℝ[batch: B]) = select(m, x, 0)
        fn compare(x : ℝ[batch: B]) = real(x > 0)
        fn through(x : ℝ[batch: B], y : ℝ[batch: B]) = kinked(y, x)
        fn worst(x : ℝ[batch: B]) = relu(x) + real(x > 0)
        """,
    )
    assert c.diagnostics == []
    assert classes(c, "smooth") == {"x": "C∞"}
    assert classes(c, "kinked") == {"x": "C⁰⁺", "y": "C∞"}
    assert classes(c, "disc") == {"x": "Disc"}
    assert classes(c, "index") == {"i": "Disc", "x": "C∞"}
    assert classes(c, "mask") == {"m": "Disc", "x": "C∞"}
    assert classes(c, "compare") == {"x": "Disc"}
    assert classes(c, "through") == {"x": "C∞", "y": "C⁰⁺"}  # the callee's class per parameter
    assert classes(c, "worst") == {"x": "Disc"}


def test_grad_of_a_kinked_function_is_accepted_and_discontinuous(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        """
        fn loss(w : ℝ[model: 4]) -> ℝ[] = mean(relu(w))
        fn g(w : ℝ[model: 4]) = grad(λ v. loss(v))(w)
        """,
    )
    assert c.diagnostics == []
    assert result(c, "g") == "ℝ[model: 4]"
    assert classes(c, "g.lambda0") == {"v": "C⁰⁺"}
    assert classes(c, "g") == {"w": "Disc"}  # the gradient of a C⁰⁺ function is Disc


def test_grad_through_argmax_in_a_call_is_e3001(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        """
        fn hits(w : ℝ[vocab: 4]) -> ℝ[] = real(argmax(w))
        fn g(w : ℝ[vocab: 4]) = grad(λ v. hits(v))(w)
        """,
    )
    assert codes(c) == ["E3001"]
    d = c.diagnostics[0]
    assert d.message.startswith("cannot differentiate through `argmax`")
    assert [label.text for label in d.labels][1] == "`argmax` makes the result discontinuous in `v`"


def test_grad_of_a_non_scalar_is_an_error(tmp_path: Path) -> None:
    c = check(tmp_path, "fn g(w : ℝ[model: 4]) = grad(λ v. v * 2)(w)\n")
    assert codes(c) == ["E2008"]


# ---- effects ---------------------------------------------------------------------------------

PICK = """
dim B
fn pick(k : key, l : ℝ[batch: B, vocab: 8]) -> idx[8][batch: B] uses Rand = sample(k, l)
"""


def test_effects_are_transitive(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        PICK
        + """
        fn caller(k : key, l : ℝ[batch: B, vocab: 8]) uses Rand = pick(k, l)
        fn silent(k : key, l : ℝ[batch: B, vocab: 8]) = pick(k, l)
        """,
    )
    assert codes(c) == ["E4001"]
    assert c.diagnostics[0].message == "`silent` uses the effect `Rand` without declaring it"
    assert list(info(c, "caller").effects) == ["Rand"]
    assert list(info(c, "pick").effects) == ["Rand"]


def test_effects_in_a_let(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        PICK
        + """
        fn let_(k : key, l : ℝ[batch: B, vocab: 8]) =
          let t = pick(k, l)
          l
        """,
    )
    assert codes(c) == ["E4001"]


# ---- no traceback on any input (DESIGN §6) ---------------------------------------------------


def test_registry_name_maximum_in_a_program(tmp_path: Path) -> None:
    """Programs write `max(a, b)`; `maximum(a, b)` must be a diagnostic or typed, no crash."""
    c = check(tmp_path, "dim B\nfn f(a : ℝ[batch: B], b : ℝ[batch: B]) = maximum(a, b)\n")
    assert (c.ok and result(c, "f") == "ℝ[batch: B]") or codes(c)[0].startswith("E2")


def test_grad_without_its_argument(tmp_path: Path) -> None:
    c = check(tmp_path, "fn f(w : ℝ[model: 4]) = grad(w)\n")
    assert not c.ok and codes(c)[0].startswith("E2")


# ---- lengths and axes of written types -------------------------------------------------------


def test_negative_length_is_an_error(tmp_path: Path) -> None:
    """Dimensions are naturals (DESIGN §4): `ℝ[3 - 5]` is not a shape."""
    c = check(tmp_path, "fn f(x : ℝ[3 - 5]) = x\n")
    assert not c.ok


def test_two_axes_of_one_name_is_an_error(tmp_path: Path) -> None:
    """Names identify axes (`mean(axis a, x)`, broadcasting by name, `ein`)."""
    c = check(tmp_path, "fn f(x : ℝ[a: 3, a: 3]) = mean(axis a, x)\n")
    assert not c.ok


def test_length_one_broadcasts_by_name_in_a_program(tmp_path: Path) -> None:
    c = check(tmp_path, "fn f(a : ℝ[x: 1], b : ℝ[x: 5, y: 3]) = a + b\n")
    assert c.diagnostics == [] and result(c, "f") == "ℝ[x: 5, y: 3]"


def test_length_one_of_the_larger_operand_broadcasts_by_name_in_a_program(tmp_path: Path) -> None:
    c = check(tmp_path, "fn f(a : ℝ[x: 5], b : ℝ[x: 1, y: 3]) = a + b\n")
    assert c.diagnostics == [] and result(c, "f") == "ℝ[x: 5, y: 3]"
