"""Golden tests of the diagnostics renderer: every diagnostic of the tutorial, byte for byte.

Each case rebuilds a diagnostic of the tutorial by hand: a source holding the lines the example
shows at their line numbers (earlier lines are filler), spans found by searching those lines,
and the rendering compared with the text copied from the tutorial (tests/golden/diag/*.txt).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from presk_syntax.diagnostics import (
    Diagnostic,
    DiagnosticError,
    Label,
    Severity,
    emit,
    error,
    render,
    should_color,
    warning,
)
from presk_syntax.span import Source, SourceMap, Span

GOLDEN = Path(__file__).parent / "golden" / "diag"
REPO = Path(__file__).resolve().parents[3]
ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def source(path: str, lines: dict[int, str]) -> Source:
    """A source with `lines` at their 1-based numbers, filler elsewhere, ending with a newline."""
    last = max(lines)
    return Source(path, "".join(lines.get(n, f"-- filler {n}") + "\n" for n in range(1, last + 1)))


def find(src: Source, line: int, needle: str, within: str | None = None) -> Span:
    """The span of `needle` on `line` (inside the first occurrence of `within`, if given)."""
    text = src.line_text(line)
    base = text.index(within) if within else 0
    col = text.index(needle, base)
    start = src.line_start(line) + len(text[:col].encode())
    return Span(src.path, start, start + len(needle.encode()))


def between(src: Source, first: tuple[int, str], last: tuple[int, str]) -> Span:
    """The span from the start of one needle to the end of another, on other lines."""
    return find(src, *first).to(find(src, *last))


@dataclass(frozen=True)
class Case:
    golden: str  # file stem in tests/golden/diag
    path: str  # the path shown in the header
    repo_file: str | None  # the program of the example in the repository, if any
    lines: dict[int, str]
    build: Callable[[Source], Diagnostic]


LINEAR_4 = "  fn apply(x : ℝ[..., In]) -> ℝ[..., In] ="
PICK = "fn pick(key : key, logits : ℝ[batch: B, vocab: 8]) -> idx[8][batch: B] ="
MSE = "fn mse{D : dim}(net : MLP{D, 4*D}, θ : params net, x : ℝ[batch: B, model: D],"
MSE_GRAD = "                     x : ℝ[batch: B, model: D], y : ℝ[batch: B, model: D])"
HITS = "  mean(real(argmax(net.apply(θ, x))))"
HITS_GRAD = "  grad(λ θ. hits(net, θ, x))(θ)"
W0001_HELP = "declare it with `dim B` at file level or as a type parameter `{B : dim}`"
W0001_TEXT = "not declared; taken as a dimension of this function"
BROADCAST = "cannot broadcast `ℝ[batch: B, model: 4]` with `ℝ[time: B, model: 4]`"

CASES = [
    Case(
        "w0001_mse",
        "tests/examples/mlp/mlp.psk",
        "tests/examples/mlp/mlp.psk",
        {26: MSE},
        lambda s: warning(
            "W0001",
            "implicit dimension `B`",
            Label(find(s, 26, "B", within="batch: B"), W0001_TEXT),
            help=W0001_HELP,
        ),
    ),
    Case(
        "w0001_mse_grad",
        "tests/examples/mlp/mlp.psk",
        "tests/examples/mlp/mlp.psk",
        {34: MSE_GRAD},
        lambda s: warning(
            "W0001",
            "implicit dimension `B`",
            Label(find(s, 34, "B", within="batch: B"), W0001_TEXT),
            help=W0001_HELP,
        ),
    ),
    Case(
        "e2003",
        "bad_axis.psk",
        "tests/diag/bad_axis.psk",
        {3: "  a + b"},
        lambda s: error(
            "E2003",
            BROADCAST,
            Label(find(s, 3, "a + b"), "no alignment by position or by name"),
            note="axes align from the last one, or by name when every axis of the smaller "
            "operand is named",
        ),
    ),
    Case(
        "e2006",
        "bad_ret.psk",
        "tests/diag/bad_ret.psk",
        {5: "    x · w + b"},
        lambda s: error(
            "E2006",
            "dimension mismatch: `In` vs `Out`",
            Label(find(s, 5, "x · w + b"), "differ for In = 1, Out = 0"),
        ),
    ),
    Case(
        "e2011",
        "bad_ret.psk",
        "tests/diag/bad_ret.psk",
        {4: LINEAR_4, 5: "    x · w + b"},
        lambda s: error(
            "E2011",
            "`apply` returns `ℝ[..., Out]` but is declared `-> ℝ[..., In]`",
            Label(find(s, 5, "x · w + b"), "this body has type `ℝ[..., Out]`"),
            Label(between(s, (4, "fn apply"), (5, "x · w + b")), "declared `ℝ[..., In]`"),
        ),
    ),
    Case(
        "e2001",
        "bad_unbound.psk",
        "tests/diag/bad_unbound.psk",
        {5: "    x · w + c"},
        lambda s: error(
            "E2001",
            "unresolved name `c`",
            Label(
                find(s, 5, "c"),
                "not a variable, parameter, module member or constant in scope",
            ),
        ),
    ),
    Case(
        "e0010",
        "bad_syntax.psk",
        "tests/diag/bad_syntax.psk",
        {4: "    x · w"},
        lambda s: error(
            "E0010",
            "expected `=`, found identifier `x`",
            Label(find(s, 4, "x"), "expected `=` here"),
        ),
    ),
    Case(
        "e1005",
        "tutorial/03_attention.psk",
        "tutorial/03_attention.psk",
        {4: "const HD : nat = D / H      -- must be exact: checked at elaboration"},
        lambda s: error(
            "E1005",
            "`HD` is not a natural number",
            Label(find(s, 4, "D / H"), "evaluates to 8/3"),
            note="constants are evaluated exactly: a division must be exact and the result "
            "non-negative",
        ),
    ),
    Case(
        "e1004",
        "tutorial/03_attention.psk",
        "tutorial/03_attention.psk",
        {5: "static assert D % H == 0"},
        lambda s: error(
            "E1004",
            "static assertion fails: D % H == 0",
            Label(
                find(s, 5, "static assert D % H == 0"),
                "`D % H == 0` is false with the constants of this file",
            ),
        ),
    ),
    Case(
        "e3001",
        "bad_argmax.psk",
        "tests/diag/bad_argmax.psk",
        {4: HITS, 6: HITS_GRAD},
        lambda s: error(
            "E3001",
            "cannot differentiate through `argmax`: the function is discontinuous (Disc) in `θ`",
            Label(find(s, 6, "grad(λ θ. hits(net, θ, x))"), "`grad` here, with respect to `θ`"),
            Label(
                find(s, 4, "argmax(net.apply(θ, x))"),
                "`argmax` makes the result discontinuous in `θ`",
            ),
            help="use `softmax` for a smooth surrogate, or an explicit straight-through relaxation",
            note="in `hits_grad`; `grad` requires the class C⁰⁺ or better",
        ),
    ),
    Case(
        "e4001",
        "bad_rand.psk",
        "tests/diag/bad_rand.psk",
        {2: PICK, 3: "  sample(key, logits)"},
        lambda s: error(
            "E4001",
            "`pick` uses the effect `Rand` without declaring it",
            Label(find(s, 3, "sample(key, logits)"), "this uses `Rand`"),
            Label(
                between(s, (2, "fn pick"), (3, "sample(key, logits)")), "declared without `uses`"
            ),
            help="add `uses Rand` to the signature of `pick`",
        ),
    ),
]

NO_LABEL_CASES = [
    (
        "e7001_synthesize",
        error(
            "E7001",
            "cannot synthesize `x`: cannot materialize a shape with an open prefix `...` "
            "(give its axes to `presk run` with extra `--dim` names)",
        ),
    ),
    ("e7001_dim_bound", error("E7001", "`dim` bound violated: `T <= 1024` is false for T = 2000")),
]


def golden(name: str) -> str:
    return (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")


def rendered(case: Case, src: Source) -> str:
    sources = SourceMap([src])
    return render(case.build(src), sources, color=False)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.golden)
def test_golden(case: Case) -> None:
    assert rendered(case, source(case.path, case.lines)) == golden(case.golden)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.golden)
def test_golden_from_repository_file(case: Case) -> None:
    """The same diagnostic on the example's real program renders the same text."""
    assert case.repo_file is not None
    path = REPO / case.repo_file
    if not path.exists():
        pytest.skip(f"{case.repo_file} not in this checkout")
    text = path.read_text(encoding="utf-8")
    assert rendered(case, Source(case.path, text)) == golden(case.golden)


@pytest.mark.parametrize(("name", "diag"), NO_LABEL_CASES, ids=[n for n, _ in NO_LABEL_CASES])
def test_golden_without_labels(name: str, diag: Diagnostic) -> None:
    assert render(diag, SourceMap(), color=False) == golden(name)


def test_every_golden_file_is_tested() -> None:
    names = {c.golden for c in CASES} | {n for n, _ in NO_LABEL_CASES}
    assert {p.stem for p in GOLDEN.glob("*.txt")} == names


# --- Colour ------------------------------------------------------------------------------


def test_colour_off_has_no_escapes() -> None:
    for case in CASES:
        assert "\x1b" not in rendered(case, source(case.path, case.lines))


def test_colour_on_has_escapes_over_the_same_text() -> None:
    for case in CASES:
        src = source(case.path, case.lines)
        text = render(case.build(src), SourceMap([src]), color=True)
        assert "\x1b[" in text
        assert ESCAPE.sub("", text) == golden(case.golden)
    diag = CASES[2].build(source(CASES[2].path, CASES[2].lines))
    header = render(diag, SourceMap(), color=True).splitlines()[0]
    assert header == "\x1b[31m[E2003] Error:\x1b[0m " + BROADCAST
    assert render(warning("W0001", "w"), SourceMap(), color=True).startswith("\x1b[33m")


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_should_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert should_color(FakeTTY())
    assert not should_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not should_color(FakeTTY())
    monkeypatch.setenv("NO_COLOR", "anything")
    assert not should_color(FakeTTY())


def test_should_color_closed_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    stream = io.StringIO()
    stream.close()
    assert not should_color(stream)
    assert not should_color(object())  # type: ignore[arg-type]


def test_emit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    case = CASES[2]
    src = source(case.path, case.lines)
    out = FakeTTY()
    emit([case.build(src), case.build(src)], SourceMap([src]), out)
    assert out.getvalue() == golden(case.golden) * 2


# --- Positions -----------------------------------------------------------------------------


def test_line_col_counts_characters() -> None:
    src = Source("u.psk", "θ : ℝ — x\nλ θ. y\n")
    assert src.line_col(0) == (1, 1)
    assert src.line_col(len("θ".encode())) == (1, 2)
    assert src.line_col(len("θ : ℝ — ".encode())) == (1, 9)
    second = len("θ : ℝ — x\n".encode())
    assert src.line_col(second) == (2, 1)
    assert src.line_col(second + len("λ θ. ".encode())) == (2, 6)
    assert src.line_text(1) == "θ : ℝ — x"
    assert src.line_count == 2
    assert src.line_col(src.byte_len) == (2, 8)  # past the final newline, as in ariadne
    assert src.line_col(src.byte_len + 10) == (2, 8)  # clamped
    assert src.char_offset(second) == len("θ : ℝ — x\n")


def test_empty_file() -> None:
    # A zero-width span draws no underline and a one-dash arrow (ariadne's rule: the arrow runs
    # two columns past the end of the span).
    src = Source("empty.psk", "")
    assert src.line_count == 1
    assert src.line_col(0) == (1, 1)
    assert src.line_text(1) == ""
    diag = error("E0001", "unexpected end of file", Label(Span("empty.psk", 0, 0), "here"))
    assert render(diag, SourceMap([src]), color=False) == (
        "[E0001] Error: unexpected end of file\n"
        "   ,-[ empty.psk:1:1 ]\n"
        "   |\n"
        " 1 |\n"
        "   | |\n"
        "   | `- here\n"
        "---'\n"
    )


def test_span_at_end_of_file() -> None:
    # As in ariadne, a final newline starts no line: the end of the file is on the last line.
    src = Source("eof.psk", "dim B\nfn f(x : ℝ) =\n")
    end = Span("eof.psk", src.byte_len, src.byte_len)
    diag = error("E0002", "expected an expression", Label(end, "the file ends here"))
    assert render(diag, SourceMap([src]), color=False) == (
        "[E0002] Error: expected an expression\n"
        "   ,-[ eof.psk:2:15 ]\n"
        "   |\n"
        " 2 | fn f(x : ℝ) =\n"
        "   |               |\n"
        "   |               `- the file ends here\n"
        "---'\n"
    )


def test_label_on_last_line_without_newline() -> None:
    src = Source("last.psk", "dim B\nfn f(x : ℝ) -> ℝ =\n  θ + z")
    diag = error("E2001", "unresolved name `z`", Label(find(src, 3, "z"), "not in scope"))
    assert render(diag, SourceMap([src]), color=False) == (
        "[E2001] Error: unresolved name `z`\n"
        "   ,-[ last.psk:3:7 ]\n"
        "   |\n"
        " 3 |   θ + z\n"
        "   |       |\n"
        "   |       `-- not in scope\n"
        "---'\n"
    )


def test_multibyte_underline_counts_characters() -> None:
    src = Source("m.psk", "fn f(θ : ℝ) = θ · θ\n")
    diag = error("E0003", "m", Label(find(src, 1, "θ · θ"), "here"))
    assert render(diag, SourceMap([src]), color=False).splitlines()[4:6] == [
        "   |               ^^|^^",
        "   |                 `---- here",
    ]


def test_unregistered_file_renders_without_snippet() -> None:
    diag = error(
        "E2001", "unresolved name `c`", Label(Span("nowhere.psk", 3, 4), "x"), help="declare it"
    )
    assert render(diag, SourceMap(), color=False) == (
        "[E2001] Error: unresolved name `c`\nHelp: declare it\n"
    )
    assert render(diag, {}, color=True).startswith("\x1b[31m[E2001] Error:")


def test_span_past_the_end_is_clamped() -> None:
    src = Source("short.psk", "a\n")
    diag = error("E0004", "m", Label(Span("short.psk", 1, 99), "rest"))
    assert "short.psk:1:2" in render(diag, SourceMap([src]), color=False)


# --- Data ----------------------------------------------------------------------------------


def test_builders() -> None:
    span = Span("f.psk", 0, 1)
    diag = error("E0001", "m").with_label(span, "a").with_help("h").with_note("n")
    assert diag == Diagnostic("E0001", Severity.ERROR, "m", (Label(span, "a"),), "h", "n")
    assert diag.is_error and diag.primary == Label(span, "a")
    assert not warning("W0001", "w").is_error
    assert warning("W0001", "w").primary is None


def test_diagnostic_error_carries_diagnostics() -> None:
    first, second = error("E0001", "one"), warning("W0001", "two")
    with pytest.raises(DiagnosticError) as caught:
        raise DiagnosticError([first, second])
    assert caught.value.diagnostics == [first, second]
    assert DiagnosticError(first).diagnostics == [first]
    assert "[E0001] one" in str(caught.value)


def test_span() -> None:
    assert len(Span("f", 2, 5)) == 3
    assert Span("f", 2, 5).to(Span("f", 0, 3)) == Span("f", 0, 5)
    with pytest.raises(ValueError):
        Span("f", 0, 1).to(Span("g", 0, 1))


# --- ariadne's own snapshots ---------------------------------------------------------------
# Cases the tutorial does not show, from the snapshot tests of ariadne's writer (ASCII, colour
# off), with our header (`[ file:line:col ]`) and trailing spaces dropped.

APPLE = "apple == orange;"


def snapshot(text: str, labels: list[tuple[int, int, str]], **extra: str) -> str:
    src = Source("<unknown>", text)
    spans = [Label(Span("<unknown>", a, b), msg) for a, b, msg in labels]
    diag = Diagnostic("", Severity.ERROR, "m", tuple(spans), extra.get("help"), extra.get("note"))
    return render(diag, SourceMap([src]), color=False)


def test_ariadne_two_labels_with_messages() -> None:
    assert snapshot(APPLE, [(0, 5, "This is an apple"), (9, 15, "This is an orange")]) == (
        "Error: m\n"
        "   ,-[ <unknown>:1:1 ]\n"
        "   |\n"
        " 1 | apple == orange;\n"
        "   | ^^|^^    ^^^|^^\n"
        "   |   `-------------- This is an apple\n"
        "   |             |\n"
        "   |             `---- This is an orange\n"
        "---'\n"
    )


def test_ariadne_multibyte_labels() -> None:
    text = "äpplë == örängë;"
    labels = [(0, 7, "This is an äpplë"), (11, 20, "This is an örängë")]
    assert snapshot(text, labels, help="h", note="n") == (
        "Error: m\n"
        "   ,-[ <unknown>:1:1 ]\n"
        "   |\n"
        " 1 | äpplë == örängë;\n"
        "   | ^^|^^    ^^^|^^\n"
        "   |   `-------------- This is an äpplë\n"
        "   |             |\n"
        "   |             `---- This is an örängë\n"
        "   |\n"
        "   | Help: h\n"
        "   |\n"
        "   | Note: n\n"
        "---'\n"
    )


def test_ariadne_multiple_labels_same_span() -> None:
    labels = [(0, 5, "apple"), (0, 5, "apple again"), (9, 15, "orange"), (9, 15, "orange again")]
    assert snapshot(APPLE, labels) == (
        "Error: m\n"
        "   ,-[ <unknown>:1:1 ]\n"
        "   |\n"
        " 1 | apple == orange;\n"
        "   | ^^|^^    ^^^|^^\n"
        "   |   `-------------- apple\n"
        "   |   |         |\n"
        "   |   `-------------- apple again\n"
        "   |             |\n"
        "   |             `---- orange\n"
        "   |             |\n"
        "   |             `---- orange again\n"
        "---'\n"
    )


def test_ariadne_partially_overlapping_labels() -> None:
    url = "https://example.com/"
    assert snapshot(url, [(0, len(url), "URL"), (0, 5, "scheme")]) == (
        "Error: m\n"
        "   ,-[ <unknown>:1:1 ]\n"
        "   |\n"
        " 1 | https://example.com/\n"
        "   | ^^|^^^^^^^|^^^^^^^^^\n"
        "   |   `------------------- scheme\n"
        "   |           |\n"
        "   |           `----------- URL\n"
        "---'\n"
    )


def test_ariadne_multiline_label_over_three_lines() -> None:
    text = "apple\n==\norange"
    assert snapshot(text, [(0, len(text), "illegal comparison")]) == (
        "Error: m\n"
        "   ,-[ <unknown>:1:1 ]\n"
        "   |\n"
        " 1 | ,-> apple\n"
        "   : :\n"
        " 3 | |-> orange\n"
        "   | |\n"
        "   | `----------- illegal comparison\n"
        "---'\n"
    )


def test_ariadne_label_of_width_zero_at_end_of_line() -> None:
    assert snapshot("apple ==\n", [(9, 9, "Unexpected end of file")]) == (
        "Error: m\n"
        "   ,-[ <unknown>:1:10 ]\n"
        "   |\n"
        " 1 | apple ==\n"
        "   |          |\n"
        "   |          `- Unexpected end of file\n"
        "---'\n"
    )


def test_byte_spans_never_crash() -> None:
    text = "apple\np\n\nθmpty\n\t  x\n"
    size = len(text.encode())
    for i in range(size + 1):
        for j in range(i, size + 1):
            for k in range(0, size + 1, 3):
                out = snapshot(text, [(i, j, "Label"), (k, min(k + 4, size), "other")])
                assert out.endswith("---'\n")
