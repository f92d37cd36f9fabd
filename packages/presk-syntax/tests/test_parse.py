"""Parsing to the AST: every program of the repository, golden trees, tokens, ASCII
synonyms, precedence as the AST shows it (operators included), and the E0 diagnostics.

The golden trees (tests/golden/ast/*.txt) are the text of `presk_syntax.dump.format_tree`;
after an intended change of the AST, rewrite them with PRESK_UPDATE_GOLDEN=1 and read the diff.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from presk_syntax import ast as A
from presk_syntax.diagnostics import DiagnosticError, render
from presk_syntax.dump import format_tree, tokens
from presk_syntax.parse import parse_file, parse_source, parse_tree
from presk_syntax.span import Source, SourceMap, Span

REPO = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).parent / "golden" / "ast"

# Every program of the repository that is meant to parse (bad_syntax.psk is the E0010 example).
PROGRAMS = sorted(
    str(p.relative_to(REPO))
    for pattern in ("tutorial/*.psk", "tests/diag/*.psk", "tests/examples/mlp/mlp.psk")
    for p in REPO.glob(pattern)
    if p.name != "bad_syntax.psk"
)
GOLDEN_PROGRAMS = [
    "tutorial/01_linear.psk",
    "tutorial/02_norm.psk",
    "tutorial/06_tower.psk",
    "tutorial/07_train.psk",
    "tests/examples/mlp/mlp.psk",
]


def parse_text(text: str, path: str = "t.psk") -> A.SourceFile:
    return parse_source(Source(path, text))


def strip(node: object) -> object:
    """A tree without its spans (nor the file's path): what two spellings must share."""
    if isinstance(node, tuple):
        return tuple(strip(v) for v in node)
    if not dataclasses.is_dataclass(node):
        return node
    fields = tuple(
        (f.name, strip(getattr(node, f.name)))
        for f in dataclasses.fields(node)
        if not isinstance(getattr(node, f.name), Span) and f.name != "path"
    )
    return (type(node).__name__, fields)


def test_the_program_list_is_complete():
    assert len(PROGRAMS) >= 14
    assert "tutorial/07_train.psk" in PROGRAMS and "tests/diag/bad_axis.psk" in PROGRAMS


@pytest.mark.parametrize("path", PROGRAMS)
def test_program_parses(path: str):
    source, tree = parse_file(str(REPO / path))
    assert isinstance(tree, A.SourceFile)
    assert tree.decls
    assert tree.span == Span(str(REPO / path), 0, source.byte_len)
    assert not parse_tree(source.text.encode()).root_node.has_error


@pytest.mark.parametrize("path", GOLDEN_PROGRAMS)
def test_golden_ast(path: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(REPO)  # the tree holds the path as given: keep it relative
    _, tree = parse_file(path)
    text = format_tree(tree)
    golden = GOLDEN / (Path(path).stem + ".txt")
    if os.environ.get("PRESK_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


def test_tokens_of_the_linear_layer():
    data = (REPO / "tutorial" / "01_linear.psk").read_bytes()
    lines = list(tokens(parse_tree(data), data))
    assert lines[:3] == ["Comment @ 0..76", "Kw(Module) @ 77..83", 'Ident("Linear") @ 84..90']
    assert 'Sym("...") @ 214..217' in lines and "Kw(Real) @ 119..122" in lines  # ℝ: 3 bytes
    assert lines[-1] == 'Sym("}") @ 258..259'


# ---- ASCII synonyms ------------------------------------------------------------------------


def test_ascii_linear_layer_is_the_same_program():
    _, unicode = parse_file(str(REPO / "tutorial" / "01_linear.psk"))
    _, ascii = parse_file(str(REPO / "tutorial" / "01_linear_ascii.psk"))
    assert strip(unicode) == strip(ascii)


SYNONYMS = [
    ("type A = ℝ[D]", "type A = Real[D]"),
    ("fn f() = λ x y. x", "fn f() = \\x y. x"),
    ("fn f() = a · b", "fn f() = a @ b"),
    ("dim T ≤ 1024", "dim T <= 1024"),
    ("fn f() = (a ≤ b, a ≥ b, a ≠ b)", "fn f() = (a <= b, a >= b, a != b)"),
    ("fn f(x : ℝ) → ℝ = x", "fn f(x : Real) -> Real = x"),
    (
        "fn f(x : ℝ[..., D]) → ℝ[...] =\n  let g = λ θ. x · θ ≤ 1\n  g(x)\n",
        "fn f(x : Real[..., D]) -> Real[...] =\n  let g = \\θ. x @ θ <= 1\n  g(x)\n",
    ),
]


@pytest.mark.parametrize(("unicode", "ascii"), SYNONYMS)
def test_ascii_synonyms_give_the_same_ast(unicode: str, ascii: str):
    assert strip(parse_text(unicode)) == strip(parse_text(ascii))


def test_synonyms_are_folded_to_one_spelling():
    tree = parse_text("fn f(x : Real) = (a @ b, a <= b, a ≥ b, a ≠ b)")
    fn = tree.decls[0]
    assert fn.params[0].type.element == "ℝ"
    assert [e.op for e in fn.body.result.elements] == ["·", "<=", ">=", "!="]


# ---- precedence, with the operators the s-expressions of the corpus cannot show ------------


def lisp(e: object) -> str:
    match e:
        case A.Var(name) | A.FloatLit(name):
            return name
        case A.IntLit(value):
            return str(value)
        case A.Binary(op, left, right):
            return f"({op} {lisp(left)} {lisp(right)})"
        case A.Unary(op, operand):
            return f"(neg {lisp(operand)})"
        case A.Call(function, args):
            return f"(call {' '.join(lisp(a) for a in (function, *args))})"
        case A.FieldAccess(obj, name):
            return f"(. {lisp(obj)} {name})"
        case A.Lambda(params, body):
            return f"(λ {' '.join(params)} {lisp(body)})"
        case A.Stream(path):
            return f"(stream {path!r})"
        case A.KeywordArg(name, value):
            return f"{name}={lisp(value)}"
    raise AssertionError(f"no lisp form for {e!r}")


PRECEDENCE = [
    ("x · w + b", "(+ (· x w) b)"),
    ("x @ w + b", "(+ (· x w) b)"),
    ("a + b * c ^ d", "(+ a (* b (^ c d)))"),
    ("-x^2", "(neg (^ x 2))"),
    ("-a * b", "(* (neg a) b)"),
    ("a - -b", "(- a (neg b))"),
    ("a ^ b ^ c", "(^ a (^ b c))"),
    ("a - b - c", "(- (- a b) c)"),
    ("a / b * c % d", "(% (* (/ a b) c) d)"),
    ("D % H == 0", "(== (% D H) 0)"),
    ("a < b == c", "(== (< a b) c)"),
    ("a + 1 < b", "(< (+ a 1) b)"),
    ("a |> f |> g", "(|> (|> a f) g)"),
    ("a == b |> f", "(|> (== a b) f)"),
    ("λ x. x + 1 |> g", "(λ x (|> (+ x 1) g))"),
    ("\\a b. a · b", "(λ a b (· a b))"),
    ("f(x)^2", "(^ (call f x) 2)"),
    ("-f(x).y", "(neg (. (call f x) y))"),
    ("grad(f)(θ)", "(call (call grad f) θ)"),
    ("t.Tower.apply(θ, x)", "(call (. (. t Tower) apply) θ x)"),
    ("x / sqrt(ms + real(eps)) * γ", "(* (/ x (call sqrt (+ ms (call real eps)))) γ)"),
    (
        'stream "d" |> shuffle(seed = 3) |> batch(B = 8)',
        "(|> (|> (stream 'd') (call shuffle seed=3)) (call batch B=8))",
    ),
]


@pytest.mark.parametrize(("expr", "expected"), PRECEDENCE)
def test_precedence(expr: str, expected: str):
    assert lisp(parse_text(f"fn f() = {expr}").decls[0].body.result) == expected


def test_literals_and_strings():
    result = parse_text('fn f() = (8, 0.02, 1e-6, "a \\"b\\"\\n", "")').decls[0].body.result
    assert result.elements[:3] == (
        A.IntLit(8, Span("t.psk", 10, 11)),
        A.FloatLit("0.02", Span("t.psk", 13, 17)),
        A.FloatLit("1e-6", Span("t.psk", 19, 23)),
    )
    assert [e.value for e in result.elements[3:]] == ['a "b"\n', ""]


def test_layout_with_crlf_line_ends():
    text = (REPO / "tutorial" / "02_norm.psk").read_text(encoding="utf-8")
    assert strip(parse_text(text.replace("\n", "\r\n"))) == strip(parse_text(text))


def test_ascription_as_the_argument_of_a_call():
    _, tree = parse_file(str(REPO / "tutorial" / "03_attention.psk"))
    scores = next(d for d in tree.decls if isinstance(d, A.Fn) and d.name == "scores")
    (arg,) = scores.body.result.right.args
    assert isinstance(arg, A.Ascription)
    assert arg.expr.name == "HD" and arg.type.element == "ℝ" and arg.type.shape is None


def test_argument_forms():
    call = parse_text("fn f() = g(axis a, x, k = 1, seq: T, i : idx[8][], y : ℝ[])")
    args = call.decls[0].body.result.args
    assert [type(a).__name__ for a in args] == [
        "AxisArg", "Var", "KeywordArg", "ShapeArg", "Ascription", "Ascription"
    ]  # fmt: skip
    assert isinstance(args[4].type, A.IdxType) and args[5].type.shape == ()


@pytest.mark.parametrize("text", ["fn f() = ℝ + 1", "dim ℝ", "fn f(λ : ℝ) = 1", "dim λx"])
def test_reserved_symbols_are_not_identifiers(text: str):
    with pytest.raises(DiagnosticError) as info:
        parse_text(text)
    assert info.value.diagnostics[0].code == "E0012"


# ---- E0 diagnostics ------------------------------------------------------------------------

# The specification's E0010 example (step 2, "A forgotten = before a function body").
SPEC_E0010 = """\
[E0010] Error: expected `=`, found identifier `x`
   ,-[ bad_syntax.psk:4:5 ]
   |
 4 |     x · w
   |     |
   |     `-- expected `=` here
---'
"""


def diagnose(text: str, path: str = "t.psk"):
    """The single diagnostic of a broken program, its source, and its (line, col)."""
    source = Source(path, text)
    with pytest.raises(DiagnosticError) as info:
        parse_source(source)
    (diag,) = info.value.diagnostics
    span = diag.primary.span
    return diag, source, source.line_col(span.start)


def test_spec_e0010_byte_for_byte():
    text = (REPO / "tests" / "diag" / "bad_syntax.psk").read_text(encoding="utf-8")
    diag, source, _ = diagnose(text, "bad_syntax.psk")
    assert render(diag, SourceMap([source]), color=False) == SPEC_E0010


BROKEN = [
    # (what, program, code, line:col, message)
    ("missing `=`", "fn apply(x : ℝ) -> ℝ\n  x\n", "E0010", "2:3",
     "expected `=`, found identifier `x`"),
    ("missing `=` in a const", "const D : nat 8\n", "E0010", "1:15",
     "expected `=`, found number `8`"),
    ("missing `=` in a let", "fn f() =\n  let a 1\n  a\n", "E0010", "2:9",
     "expected `=`, found number `1`"),
    ("unclosed parenthesis", "fn f(x : ℝ) = g(x\n", "E0010", "1:19",
     "expected `)`, found end of file"),
    ("unclosed tuple", "fn f() = (a, b\n", "E0010", "1:16", "expected `)`, found end of file"),
    ("unclosed shape", "fn f(x : ℝ[In) = x\n", "E0010", "1:14", "expected `]`, found `)`"),
    ("unexpected character", "fn f(x : ℝ) =\n  x # 2\n", "E0002", "2:5",
     "unexpected character `#`"),
    ("unexpected Unicode character", "fn f(x : ℝ) = x\n  ‖x‖\n", "E0002", "2:3",
     "unexpected character `‖`"),
    ("unterminated string", 'import "01_linear.psk as lin\n', "E0003", "1:8",
     "unterminated string"),
    ("end of file inside a fn", "fn f(x : ℝ) =\n", "E0010", "1:15",
     "expected an identifier, found end of file"),
    ("end of file inside a module", "module Linear {\n  param w : ℝ\n", "E0010", "2:15",
     "expected `}`, found end of file"),
    ("missing module name", "module {\n  param w : ℝ\n}\n", "E0010", "1:8",
     "expected an identifier, found `{`"),
    ("missing `as`", 'import "a.psk" lin\n', "E0010", "1:16",
     "expected `as`, found identifier `lin`"),
    ("checkpoint without a count", 'training run {\n  checkpoint every steps to "d"\n}\n',
     "E0010", "2:20", "expected a number, found identifier `steps`"),
    ("doubled operator", "fn f(x : ℝ) = x ·· w\n", "E0010", "1:18",
     "expected an expression, found `·`"),
    ("stray brace", "fn f() = x\n}\n", "E0011", "2:1", "unexpected `}`"),
    ("let at file level", "let x = 1\n", "E0011", "1:1", "unexpected identifier `let`"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("program", "code", "where", "message"),
    [pytest.param(*case[1:], id=case[0]) for case in BROKEN],
)
def test_syntax_error(program: str, code: str, where: str, message: str):
    diag, source, (line, col) = diagnose(program)
    assert (diag.code, f"{line}:{col}", diag.message) == (code, where, message)
    render(diag, SourceMap([source]), color=False)  # renders without raising


def _ends_at_eof(diag, source, where) -> bool:
    return diag.message.endswith("found end of file") and diag.primary.span.start == len(
        source.text.encode()
    )


# Known bugs of the E0 diagnostics: each names the property the diagnostic should have.
BROKEN_BUGS = [
    pytest.param(
        "fn f(x : ℝ) =\n  let y = x\n",
        lambda d, s, w: (
            d.code == "E0010" and d.message == "expected an expression, found end of file"
        ),
        id="end of file after a let",
        marks=pytest.mark.xfail(
            strict=True,
            reason="says `expected `(` or `-`, found end of file`: the repair probes start "
            "from the state after the let's value, not from the block's result",
        ),
    ),
    pytest.param(
        "module M {\n  fn f(x : ℝ) =",
        _ends_at_eof,
        id="end of file inside a fn of a module",
    ),
    pytest.param(
        "dim B <=\n",
        _ends_at_eof,
        id="end of file after a dim bound's `<=`",
        marks=pytest.mark.xfail(
            strict=True, reason="says `unexpected `<=`` at 1:7: blames a token that is right"
        ),
    ),
    pytest.param(
        "type T = idx[\n",
        _ends_at_eof,
        id="end of file inside an idx bound",
        marks=pytest.mark.xfail(
            strict=True, reason="says `unexpected `type`` at 1:1: blames a token that is right"
        ),
    ),
    pytest.param(
        "fn f() = x\n}\nfn g() = y\n",
        lambda d, s, w: (d.code, w, d.message) == ("E0011", (2, 1), "unexpected `}`"),
        id="stray brace before a declaration",
    ),
]


@pytest.mark.parametrize(("program", "good"), BROKEN_BUGS)
def test_syntax_error_known_bug(program: str, good):
    diag, source, where = diagnose(program)
    assert good(diag, source, where), diag.message


def test_missing_file_is_e0001(tmp_path: Path):
    path = str(tmp_path / "nonexist.psk")
    with pytest.raises(DiagnosticError) as info:
        parse_file(path)
    (diag,) = info.value.diagnostics
    assert (diag.code, diag.message) == (
        "E0001",
        f"cannot read `{path}`: no such file or directory",
    )
    assert render(diag, SourceMap(), color=False).startswith("[E0001] Error: cannot read")


def test_non_utf8_file_is_e0001(tmp_path: Path):
    path = tmp_path / "latin1.psk"
    path.write_bytes("dim B\n-- café\n".encode("latin-1"))
    with pytest.raises(DiagnosticError) as info:
        parse_file(str(path))
    (diag,) = info.value.diagnostics
    assert (diag.code, diag.message) == (
        "E0001",
        f"`{path}` is not UTF-8 text (byte 12 is not valid)",
    )
