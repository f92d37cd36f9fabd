"""Issue 27, the front end's and the checker's items: each a class of programs that passed
`presk check` and then ran to a wrong number or an internal error, or printed what it must
not. What the user gets is a diagnostic with a code, or the right value on every executor.

- a hyperparameter's default is any constant expression, its exact value rounded once to its
  type (it was 0 on every backend unless a plain positive literal);
- a number outside its type's range is E1013 where the checker meets it: an f64 literal,
  default or constant outside binary64, an ℝ literal without a double of its own
  (`x^1e-400` was NaN on the interpreter and 1 natively), a nat, length or seed over 64 bits;
- `--const D=1/0` is E1003 (was exit 101);
- the checker's internal errors: a dimension no argument fixes reached through `grad`, an
  `ℝ[...]` for `ℝ[..., model: 4]`, a run's or a serve's field written with `:`;
- an error on a `use` line is printed once;
- an import is a regular `.psk` file, refused before it is read (E1014).
"""

from __future__ import annotations

import decimal
import os
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from helpers import presk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from presk_core.lower import lower_checked
from presk_syntax.diagnostics import DiagnosticError
from presk_types.driver import check_file
from presk_types.elab import load_program

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("presk")
PRESK = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "presk_cli.main"]
PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def write(tmp_path: Path, source: str, name: str = "t.psk") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def codes(path: Path, overrides: dict[str, str] | None = None) -> list[str]:
    """The codes of the errors `presk check` reports on `path` (a raised one included)."""
    try:
        c = check_file(str(path), overrides)
    except DiagnosticError as e:
        return [d.code for d in e.diagnostics if d.is_error]
    return [d.code for d in c.diagnostics if d.is_error]


def defaults_of(path: Path, fn: str) -> dict[str, str]:
    core, _ = lower_checked(load_program(str(path)))
    return dict(next(f for f in core.functions if f.name == fn).defaults)


# ---- a hyperparameter's default: any constant expression --------------------------------

DEFAULTS = """
const S : nat = 3
fn f(x : ℝ[2], s : f64 = S, h : f64 = 1/2, n : f64 = -2, k : nat = S * 2 - 1) -> ℝ[2] =
  x * 0 + real(s) + 10 * real(h) + 100 * real(n) + 1000 * real(k)
fn g(x : ℝ[2]) -> ℝ[2] =
  f(x)
"""
# 3 + 10 * 0.5 + 100 * -2 + 1000 * 5: each default counted, none of them 0
VALUE = "ℝ[2] = [2] [4808, 4808]"


def test_the_defaults_are_their_values_rounded_to_their_types(tmp_path: Path) -> None:
    path = write(tmp_path, DEFAULTS)
    assert defaults_of(path, "f") == {"s": "3.0", "h": "0.5", "n": "-2.0", "k": "5"}


@pytest.mark.parametrize("backend", ["interp", "kernel", "native"])
@pytest.mark.parametrize("entry", ["f", "g"])  # at the entry, and through a call
def test_constant_defaults_on_every_executor(tmp_path: Path, backend: str, entry: str) -> None:
    path = write(tmp_path, DEFAULTS)
    r = presk("run", str(path), "--entry", entry, "--backend", backend)
    assert (r.returncode, r.stdout.strip()) == (0, VALUE), r.stderr


def test_a_default_is_one_double_at_the_entry_and_through_a_call(tmp_path: Path) -> None:
    # the interpreter read a call's f64 literal at --bits, and the entry's as a double
    path = write(
        tmp_path,
        """
        fn f(x : ℝ[1], h : f64 = 1/3) -> ℝ[1] = x * 0 + real(h)
        fn g(x : ℝ[1]) -> ℝ[1] = f(x)
        """,
    )
    third = decimal.Context(prec=30).plus(decimal.Decimal(1 / 3))  # the double nearest 1/3
    for entry in ("f", "g"):
        r = presk("run", str(path), "--entry", entry, "--digits", "30")
        assert r.stdout.strip() == f"ℝ[1] = [1] [{third}]", r.stderr


def test_the_export_writes_the_defaults_values(tmp_path: Path) -> None:
    path = write(tmp_path, DEFAULTS)
    out = tmp_path / "out"
    r = presk("export", str(path), "--target", "pytorch", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "def f(x, s=3.0, h=0.5, n=-2.0, k=5):" in (out / "t.py").read_text()


@pytest.mark.parametrize(
    ("default", "code"),
    [
        ("x", "E2001"),  # a parameter: not a constant in scope
        ("sqrt(2)", "E1003"),  # not a constant expression
        ("1/0", "E1003"),
        ("1e400", "E1013"),  # no double
        ("-1e999", "E1013"),
        ("10^-400", "E1013"),  # rounds to 0
        ("2^-1075", "E1013"),  # half the least subnormal: to 0, by ties to even
    ],
)
def test_an_f64_default_that_is_not_one_is_coded(tmp_path: Path, default: str, code: str) -> None:
    path = write(tmp_path, f"fn f(x : ℝ[2], h : f64 = {default}) -> ℝ[2] = x * real(h)\n")
    assert codes(path) == [code]


def test_an_f64_default_at_the_ends_of_binary64_is_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "fn f(x : ℝ[2], a : f64 = 2^-1074, b : f64 = 1.7976931348623157e308) -> ℝ[2] =\n"
        "  x * real(a) * real(b)\n",
    )
    assert defaults_of(path, "f") == {"a": "5e-324", "b": "1.7976931348623157e308"}


@pytest.mark.parametrize(
    ("default", "code"),
    [("1/2", "E1005"), ("0 - 1", "E1005"), ("-1", "E1005"), ("2^63", "E1013"), ("x", "E2001")],
)
def test_a_nat_default_that_is_not_one_is_coded(tmp_path: Path, default: str, code: str) -> None:
    path = write(tmp_path, f"fn f(x : ℝ[2], k : nat = {default}) -> ℝ[2] = x * real(k)\n")
    assert codes(path) == [code]


def test_a_default_of_a_real_argument_is_e2008(tmp_path: Path) -> None:
    path = write(tmp_path, "fn f(x : ℝ[2], y : ℝ[] = 1) -> ℝ[2] = x * y\n")
    assert codes(path) == ["E2008"]


# a constant expression and its exact value, built side by side
_LEAVES = st.one_of(
    st.integers(0, 10**6).map(lambda n: (str(n), Fraction(n))),
    st.sampled_from(["0.5", "1e-3", "2.5e10", "7e-300"]).map(lambda t: (t, Fraction(t))),
    st.just(("S", Fraction(7))),
)


def _combine(children):
    def join(pair):
        op, ((a, x), (b, y)) = pair
        if op == "/" and y == 0:
            return (f"({a} + {b})", x + y)
        value = {"+": x + y, "-": x - y, "*": x * y, "/": x / y if y else 0}[op]
        return (f"({a} {op} {b})", value)

    neg = children.map(lambda c: (f"(-{c[0]})", -c[1]))  # `--` would begin a comment
    pairs = st.tuples(st.sampled_from("+-*/"), st.tuples(children, children)).map(join)
    return st.one_of(neg, pairs)


EXPRESSIONS = st.recursive(_LEAVES, _combine, max_leaves=6)


def _double(q: Fraction) -> float | None:
    try:
        d = q.numerator / q.denominator
    except OverflowError:
        return None
    return None if d == 0 and q != 0 else d


@PROPERTY
@given(EXPRESSIONS)
def test_any_constant_expression_is_a_default_rounded_once(tmp_path: Path, expr) -> None:
    text, exact = expr
    path = write(
        tmp_path, f"const S : nat = 7\nfn f(x : ℝ[2], h : f64 = {text}) -> ℝ[2] = x * real(h)\n"
    )
    want = _double(exact)
    if want is None:
        assert codes(path) == ["E1013"]
        return
    got = defaults_of(path, "f")["h"]
    assert float(Fraction(got)) == want  # how every executor reads it (the export: float)


@PROPERTY
@given(st.integers(0, 2**65))
def test_a_nat_default_is_a_natural_below_2_63(tmp_path: Path, n: int) -> None:
    path = write(tmp_path, f"fn f(x : ℝ[2], k : nat = {n}) -> ℝ[2] = x * real(k)\n")
    if n < 2**63:
        assert defaults_of(path, "f") == {"k": str(n)}
    else:
        assert codes(path) == ["E1013"]


# ---- literals outside their type's range ------------------------------------------------


def test_an_exponent_with_no_double_is_refused_with_its_span(tmp_path: Path) -> None:
    # x^1e-400 printed NaN on the interpreter (x < 0) and 1 natively (1e-400 rounded to 0)
    path = write(tmp_path, "fn f(x : ℝ[4]) -> ℝ[4] =\n  x^1e-400\n")
    r = presk("check", str(path))
    assert r.returncode == 1
    assert "[E1013] Error: `1e-400` is outside the range of `ℝ`" in r.stderr
    assert "t.psk:2:5 ]" in r.stderr and "rounds to 0 in binary64" in r.stderr


@pytest.mark.parametrize("backend", ["interp", "kernel", "native"])
def test_an_exponent_with_a_double_is_the_same_on_every_executor(
    tmp_path: Path, backend: str
) -> None:
    # 1e-300 is its own double: x^1e-300 is 1 for x > 0 and NaN for x < 0 everywhere
    path = write(tmp_path, "fn f(x : ℝ[4]) -> ℝ[4] =\n  x^1e-300\n")
    r = presk("run", str(path), "--entry", "f", "--backend", backend)
    assert r.stdout.strip() == "ℝ[4] = [4] [1, NaN, NaN, NaN]", r.stderr


@PROPERTY
@given(st.integers(1, 9), st.integers(-420, 420), st.sampled_from(["literal", "default"]))
def test_a_literal_is_refused_exactly_when_binary64_has_no_double_of_it(
    tmp_path: Path, mantissa: int, exponent: int, where: str
) -> None:
    lit = f"{mantissa}e{exponent}"
    if where == "literal":
        source = f"fn f(x : ℝ[2]) -> ℝ[2] = x * {lit}\n"
    else:
        source = f"fn f(x : ℝ[2], h : f64 = {lit}) -> ℝ[2] = x * real(h)\n"
    path = write(tmp_path, source)
    assert codes(path) == ([] if _double(Fraction(lit)) is not None else ["E1013"])


@pytest.mark.parametrize(
    "source",
    [
        "const C : f64 = 1e400\n",
        "const C : f64 = 10^-400\n",
        "const C : nat = 2^64\n",
        "const C : ℝ = 10^400\nfn g(x : ℝ[2]) -> ℝ[2] = x * real(C)\n",
        "module M {\n  param w : ℝ[2] init = normal(std = 1e999)\n"
        "  fn apply(x : ℝ[2]) -> ℝ[2] = x * w\n}\n",
    ],
)
def test_a_constant_its_type_cannot_hold_is_e1013(tmp_path: Path, source: str) -> None:
    path = write(tmp_path, source + "fn f(x : ℝ[2]) -> ℝ[2] = x\n")
    assert codes(path) == ["E1013"]


@pytest.mark.parametrize(
    "source",
    [
        "fn f(x : ℝ[18446744073709551616]) -> ℝ[] = sum(x)\n",
        "const K : nat = 2^40\nfn f(x : ℝ[K * K]) -> ℝ[] = sum(x)\n",
        "fn f(x : idx[9223372036854775808][2]) -> idx[9223372036854775808][2] = x\n",
        "dim T <= 18446744073709551616\nfn f(x : ℝ[T]) -> ℝ[T] = x\n",
    ],
)
def test_a_length_over_64_bits_is_e1013(tmp_path: Path, source: str) -> None:
    assert codes(write(tmp_path, source)) == ["E1013"]


def test_an_integer_exponent_over_64_bits_is_e1013(tmp_path: Path) -> None:
    # natively a power by an int64: x^(2^64 + 1) was x^1 there, 0 on the interpreter
    path = write(tmp_path, "fn f(x : ℝ[2]) -> ℝ[2] = x^18446744073709551617\n")
    assert codes(path) == ["E1013"]
    path = write(tmp_path, "fn f(x : ℝ[2]) -> ℝ[2] = x^9223372036854775807\n")
    assert codes(path) == []


def test_the_largest_length_is_kept(tmp_path: Path) -> None:
    source = "fn f(x : idx[9223372036854775807][2]) -> idx[9223372036854775807][2] = x\n"
    assert codes(write(tmp_path, source)) == []


def test_an_integer_literal_over_2_64_is_a_double_where_the_type_is_real(tmp_path: Path) -> None:
    path = write(tmp_path, "fn f(x : ℝ[2]) -> ℝ[2] = x * 18446744073709551616\n")
    assert codes(path) == []


TRAIN = """
import "{root}/tutorial/06_tower.psk" as t
dim B
fn loss(θ : params t.Tower, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
  let (x, y) = batch
  mean((t.Tower.apply(θ, x) - y)^2)
optimizer adamw {{
  lr : f64 = {lr}
}}
training run {{
  model     = t.Tower
  objective = loss
  optimizer = adamw
  data      {eq} stream "{root}/tutorial/data/pairs.psk.d" |> shuffle(seed = {seed}) |> batch(B = 8)
  epochs    : nat = {epochs}
}}
"""


def train(tmp_path: Path, lr="0.01", eq="=", seed="3", epochs="10") -> Path:
    fields = {"lr": lr, "eq": eq, "seed": seed, "epochs": epochs}
    return write(tmp_path, TRAIN.format(root=ROOT, **fields))


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({}, None),
        ({"seed": "2^64 - 1"}, None),  # a seed is a 64-bit integer
        ({"seed": "2^64"}, "E1013"),  # was accepted, and fatal later
        ({"seed": "18446744073709551616"}, "E1013"),
        ({"seed": "0 - 1"}, "E1005"),
        ({"epochs": "2^63"}, "E1013"),
        ({"lr": "1e309"}, "E1013"),
        ({"eq": ":"}, "E1010"),  # `data : stream …`: an AttributeError
    ],
)
def test_a_training_runs_numbers_and_fields(tmp_path: Path, fields: dict, code: str | None):
    assert codes(train(tmp_path, **fields)) == ([code] if code else [])


def test_a_serve_field_written_with_a_colon_is_e1012(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
        import "{ROOT}/tutorial/01_linear.psk" as lin
        inference serve {{
          model      = lin.Linear
          weights    : "w.psk.d"
          vocabulary = "v.txt"
          generate   = g
        }}
        """,
    )
    assert codes(path) == ["E1012"]


MINIGPT = ROOT / "tests/examples/minigpt/minigpt.psk"


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("temperature : f64 = 1e400", "E1013"),  # overflowed in presk serve
        ("temperature : f64 = 1e-400", "E1013"),
        ("max_tokens  : nat = 9223372036854775808", "E1013"),
        ("temperature : f64 = 0.7", None),
    ],
)
def test_a_serves_numbers_are_in_their_types_range(tmp_path: Path, line: str, code) -> None:
    source = MINIGPT.read_text(encoding="utf-8")
    key = line.split(":")[0].strip()
    old = next(x for x in source.splitlines() if x.strip().startswith(key))
    path = tmp_path / "minigpt.psk"  # it imports nothing; check opens none of its files
    path.write_text(source.replace(old, "  " + line), encoding="utf-8")
    assert codes(path) == ([code] if code else [])


@pytest.mark.parametrize("given", ["1/0", "2/0", "0/0"])
def test_a_const_flag_that_divides_by_zero_is_e1003(tmp_path: Path, given: str) -> None:
    path = write(tmp_path, "const S : nat = 3\nfn f(x : ℝ[2], h : f64 = S) -> ℝ[2] = x\n")
    r = presk("check", str(path), "--const", f"S={given}")
    assert r.returncode == 1, r.stderr
    assert "[E1003] Error: --const S=" in r.stderr and "internal error" not in r.stderr


@pytest.mark.parametrize("given", ["1e999999999999", "1e-100000", "1" * 9000])
def test_a_const_flag_too_long_to_read_is_refused_not_a_gmp_abort(
    tmp_path: Path, given: str
) -> None:
    path = write(tmp_path, "const S : nat = 3\nfn f(x : ℝ[2]) -> ℝ[2] = x\n")
    r = presk("check", str(path), "--const", f"S={given}")
    assert r.returncode == 2 and "--const" in r.stderr, r.stderr  # a usage error, as `S=x`
    with pytest.raises(DiagnosticError) as e:  # the stage programs' own reading: E1006
        check_file(str(path), {"S": given})
    assert [d.code for d in e.value.diagnostics] == ["E1006"]


def test_a_constant_in_error_is_reported_once_where_it_is_used(tmp_path: Path) -> None:
    # `S` over 2^63: E1013, and its uses as a default or a seed said nothing more (they said
    # `unresolved name`, a second error for the same mistake)
    path = write(
        tmp_path,
        """
        const S : nat = 2^64
        const T : nat = S + 1
        dim N <= S
        fn f(x : ℝ[2], k : nat = S) -> ℝ[2] = x * real(k)
        """,
    )
    assert codes(path) == ["E1013"]


# every place a number is written, with numbers of every size: a coded diagnostic or none
PLACES = [
    "fn f(x : ℝ[2], h : f64 = {n}) -> ℝ[2] = x * real(h)\n",
    "fn f(x : ℝ[2], k : nat = {n}) -> ℝ[2] = x * real(k)\n",
    "fn f(x : ℝ[2]) -> ℝ[2] = x * {n}\n",
    "fn f(x : ℝ[2]) -> ℝ[2] = x^{n}\n",
    "const C : f64 = {n}\nfn f(x : ℝ[2]) -> ℝ[2] = x * real(C)\n",
    "const C : nat = {n}\nfn f(x : ℝ[C]) -> ℝ[] = sum(x)\n",
    "fn f(x : ℝ[{n}]) -> ℝ[] = sum(x)\n",
    "dim T <= {n}\nfn f(x : ℝ[T]) -> ℝ[T] = x\n",
    "module M {{\n  param w : ℝ[2] init = normal(std = {n})\n"
    "  fn apply(x : ℝ[2]) -> ℝ[2] = x * w\n}}\n",
]
NUMBERS = st.one_of(
    st.integers(0, 10**400).map(str),
    st.builds("{}e{}".format, st.integers(0, 99), st.integers(-100050, 100050)),
    st.builds("{}.{}e{}".format, st.integers(0, 9), st.integers(0, 99), st.integers(-400, 400)),
    st.sampled_from(["-1", "0", "1/0", "0/0", "2^64", "2^-1075", "-1e-400", "S", "(-2)^63"]),
)


@PROPERTY
@given(st.sampled_from(PLACES), NUMBERS)
def test_a_number_anywhere_is_a_coded_diagnostic_or_none(tmp_path: Path, place, n) -> None:
    path = write(tmp_path, place.format(n=n))
    try:
        found = check_file(str(path)).diagnostics
    except DiagnosticError as e:
        found = e.diagnostics
    assert all(d.code[:2] in ("E0", "E1", "E2", "W0") and d.code != "E1000" for d in found)


@PROPERTY
@given(
    st.sampled_from(["seed", "batch", "epochs", "lr"]),
    st.one_of(st.integers(0, 2**70).map(str), st.sampled_from(["2^64", "1e309", "0 - 1"])),
)
def test_a_training_runs_number_anywhere_is_coded(tmp_path: Path, where: str, n: str) -> None:
    fields = {"seed": {"seed": n}, "epochs": {"epochs": n}, "lr": {"lr": n}}.get(where, {})
    source = train(tmp_path, **fields).read_text()
    if where == "batch":
        source = source.replace("batch(B = 8)", f"batch(B = {n})")
    path = write(tmp_path, source)
    try:
        found = check_file(str(path)).diagnostics
    except DiagnosticError as e:
        found = e.diagnostics
    assert all(d.code[:2] in ("E0", "E1", "E2", "W0") and d.code != "E1000" for d in found)


# ---- the checker's internal errors ------------------------------------------------------

GRAD = """
fn h{N : dim}(x : ℝ[4]) -> ℝ[] =
  sum(x) * (N : ℝ)
fn f(x : ℝ[4]) -> ℝ[4] =
  grad(λ y. h(y))(x)
"""


def test_a_dimension_no_argument_fixes_reached_through_grad(tmp_path: Path) -> None:
    # `f` did not get `h`'s N, which the grad's call names: a KeyError at run
    path = write(tmp_path, GRAD)
    r = presk("run", str(path), "--entry", "f", "--dim", "N=3")
    assert (r.returncode, r.stdout.strip()) == (0, "ℝ[4] = [4] [3, 3, 3, 3]"), r.stderr
    r = presk("run", str(path), "--entry", "f")
    assert r.returncode == 1 and "[E7001]" in r.stderr and "`N`" in r.stderr


@pytest.mark.parametrize("arg", ["ℝ[...]", "ℝ[..., 2]"])
def test_a_prefix_without_the_axes_a_parameter_needs_is_e2008(tmp_path: Path, arg: str) -> None:
    path = write(
        tmp_path,
        f"""
        fn h(x : ℝ[..., model: 4, 2]) -> ℝ[..., model: 4, 2] = x
        fn f(x : {arg}) -> ℝ[..., model: 4, 2] =
          h(x)
        """,
    )
    assert codes(path) == ["E2008"]


def test_an_error_on_a_use_line_is_printed_once(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        module A {
          param w : ℝ[4] init = zeros
          fn apply(x : ℝ[4]) -> ℝ[4] = x * w
        }
        module B {
          use a : A{3}
          fn apply(x : ℝ[4]) -> ℝ[4] = a.apply(x)
          fn twice(x : ℝ[4]) -> ℝ[4] = a.apply(a.apply(x))
        }
        """,
    )
    r = presk("check", str(path))
    assert r.returncode == 1
    assert r.stderr.count("[E2004]") == 1 and r.stderr.count("Error") == 1, r.stderr


# ---- imports ----------------------------------------------------------------------------

SECRET = "PRESK-TEST-SECRET-27"


def _targets(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "notes.txt").write_text(f"{SECRET}\n")
    (tmp_path / "dir.psk").mkdir()
    (tmp_path / "link.psk").symlink_to(tmp_path / "notes.txt")
    os.mkfifo(tmp_path / "fifo.psk")  # opening it would wait for a writer
    return {
        "environ": "/proc/self/environ",
        "text": str(tmp_path / "notes.txt"),
        "relative": "notes.txt",
        "directory": "dir.psk",
        "link": "link.psk",
        "fifo": "fifo.psk",
    }


@pytest.mark.parametrize("which", ["environ", "text", "relative", "directory", "link", "fifo"])
def test_an_import_that_is_not_a_psk_file_is_refused_unread(tmp_path: Path, which: str) -> None:
    target = _targets(tmp_path)[which]
    path = write(tmp_path, f'import "{target}" as e\nfn f(x : ℝ[2]) -> ℝ[2] = x\n')
    env = {**os.environ, "NO_COLOR": "1", "PRESK_TEST_SECRET": SECRET}
    r = subprocess.run(
        [*PRESK, "check", str(path)], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1
    assert "[E1014] Error: cannot import" in r.stderr, r.stderr
    assert SECRET not in r.stderr + r.stdout


def test_an_import_of_a_psk_file_through_a_link_is_read(tmp_path: Path) -> None:
    write(tmp_path, "fn g(x : ℝ[2]) -> ℝ[2] = x\n", "lib.psk")
    (tmp_path / "alias.psk").symlink_to(tmp_path / "lib.psk")
    path = write(tmp_path, 'import "alias.psk" as l\nfn f(x : ℝ[2]) -> ℝ[2] = l.g(x)\n')
    assert codes(path) == []
    assert codes(write(tmp_path, 'import "nothing.psk" as l\n', "m.psk")) == ["E1001"]
