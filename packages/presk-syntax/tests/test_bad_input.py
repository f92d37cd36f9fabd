"""Bad input of issue 16 at the syntax stage: deep nesting is a diagnostic (E0013) found
without recursion, a syntax error on a line of megabytes is found in seconds and drawn as a
window of the line, and a document whose fields have the wrong types is refused in one line."""

from __future__ import annotations

import time
from pathlib import Path

import msgpack
import pytest
from presk_syntax.codec import DocumentError, decode_ast, encode_ast
from presk_syntax.diagnostics import DiagnosticError, render
from presk_syntax.parse import MAX_DEPTH, parse_file, parse_source
from presk_syntax.span import Source, SourceMap

REPO = Path(__file__).resolve().parents[3]
HEAD = "fn f(x : ℝ[]) -> ℝ[] =\n  "


def diagnostic(text: str):
    source = Source("deep.psk", text)
    with pytest.raises(DiagnosticError) as e:
        parse_source(source)
    return e.value.diagnostics[0], render(e.value.diagnostics[0], SourceMap([source]), False)


@pytest.mark.parametrize(
    "body",
    [
        " + ".join(["x"] * 1000),  # a 1,000-term sum
        "(" * 500 + "x" + ")" * 500,  # 500 parentheses
        "- " * 10000 + "x",  # 10,000 unary minuses
    ],
    ids=["sum", "parentheses", "minuses"],
)
def test_deep_nesting_is_e0013_not_a_recursion_error(body):
    diag, text = diagnostic(HEAD + body + "\n")
    assert diag.code == "E0013" and f"deeper than {MAX_DEPTH} levels" in diag.message
    assert max(len(line) for line in text.splitlines()) < 300  # the line drawn as a window


def test_nesting_below_the_limit_parses():
    parse_source(Source("ok.psk", HEAD + " + ".join(["x"] * (MAX_DEPTH - 10)) + "\n"))


def test_a_syntax_error_on_a_long_line_is_quick_and_shows_a_window():
    n = 100_000  # 300 kB on one line, the error at its end
    text = HEAD + "g(" + "x, " * n + ")) \n"
    started = time.monotonic()
    diag, shown = diagnostic(text)
    assert time.monotonic() - started < 20
    assert diag.code == "E0011" and diag.message == "unexpected `)`"
    lines = shown.splitlines()
    assert lines[1] == f"   ,-[ deep.psk:2:{3 + 2 + 3 * n + 1} ]"
    assert lines[3].startswith(" 2 | …x, x, ") and lines[3].endswith("))")
    assert lines[4].index("|", 5) == lines[3].index("))") + 1  # the arrow under the second `)`
    assert max(len(line) for line in lines) < 300


def test_a_syntax_error_in_a_file_above_the_probed_size_parses_it_once(monkeypatch):
    """The fuzzer's check of a 600 kB line (`-> idx[8grad ][batch: B] uses Rand =, x, x, …`)
    took 12 s of CPU: the file parsed three times, twice to try deleting a token. Above
    PROBED_BYTES, no probe: one parse (each a few seconds at that size)."""
    from presk_syntax import parse

    calls = []
    real_parse_tree = parse.parse_tree
    monkeypatch.setattr(parse, "parse_tree", lambda data: calls.append(1) or real_parse_tree(data))
    text = "fn pick(key : key) -> idx[8grad ][batch: 2] uses Rand =" + ", x" * 25_000 + "\n"
    assert len(text) > parse.PROBED_BYTES
    diag, _ = diagnostic(text)
    assert diag.code == "E0011" and diag.message == "unexpected identifier `grad`"
    assert len(calls) == 1


def test_a_short_line_is_drawn_whole():
    _, shown = diagnostic(HEAD + "x +\n")
    assert "…" not in shown


def _retyped(data: bytes, field: str, value) -> bytes:
    doc = msgpack.unpackb(data, raw=False, strict_map_key=False)

    def walk(x) -> bool:
        if isinstance(x, dict):
            if field in x and x.get("@") != "Span":
                x[field] = value
                return True
            return any(walk(v) for v in x.values())
        return isinstance(x, list) and any(walk(v) for v in x)

    assert walk(doc["tree"])
    return msgpack.packb(doc, use_bin_type=True)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("name", 5, "field `name` holds an integer, not `str`"),
        ("decls", "x", "field `decls` holds a string"),
        ("body", [1, 2], "field `body` holds an array"),
        ("span", None, "field `span` holds nothing, not `Span`"),
    ],
)
def test_a_document_with_fields_of_wrong_types_is_refused(field, value, words):
    source, tree = parse_file(str(REPO / "tutorial" / "01_linear.psk"))
    with pytest.raises(DocumentError, match=words):
        decode_ast(_retyped(encode_ast(tree, source), field, value))


# ---- issue 27: number literals of any length --------------------------------------------


@pytest.mark.parametrize(
    "number",
    [
        "1" * 4301,  # int() refused it: an internal error
        "1e999999999999",  # GMP aborted (a signal) making 10^999999999999
        "1e000000000000999999999999",  # leading zeros do not hide the exponent
        "1.5e-100000",
        "0." + "0" * 4300 + "1",
    ],
    ids=["digits", "exponent", "zeros", "negative", "mantissa"],
)
def test_a_number_too_long_to_read_is_e0014(number: str) -> None:
    diag, text = diagnostic(HEAD + f"x * {number}\n")
    assert diag.code == "E0014" and "too long to be read" in diag.message
    assert diag.labels[0].span.start == len((HEAD + "x * ").encode())


@pytest.mark.parametrize("number", ["1" * 4300, "1e99999", "1e-99999", "2.5E+00099999"])
def test_a_number_within_the_limits_parses(number: str) -> None:
    tree = parse_source(Source("n.psk", HEAD + f"x * {number}\n"))
    assert tree.decls
