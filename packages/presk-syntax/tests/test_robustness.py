"""Random and mutated programs never crash the parser: `parse_source` returns a tree or raises
DiagnosticError with E0 diagnostics only, and every diagnostic renders.

Mutations work on the tokens of the tutorial's programs (the leaves of their trees): one token
deleted, duplicated, or swapped with the next. A per-example deadline guards against a hang
(the repair probes of parse.py reparse the file once per candidate token).
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from presk_syntax import ast as A
from presk_syntax.diagnostics import DiagnosticError, render
from presk_syntax.parse import parse_source, parse_tree
from presk_syntax.span import Source, SourceMap

REPO = Path(__file__).resolve().parents[3]
TUTORIAL = sorted((REPO / "tutorial").glob("*.psk"))
TEXTS = [p.read_text(encoding="utf-8") for p in TUTORIAL]


def budget(examples: int) -> settings:
    return settings(
        max_examples=examples, deadline=2000, suppress_health_check=[HealthCheck.too_slow]
    )


def check(text: str) -> None:
    """The property: a tree, or E0 diagnostics that all render."""
    source = Source("fuzz.psk", text)
    try:
        tree = parse_source(source)
    except DiagnosticError as e:
        assert e.diagnostics
        sources = SourceMap([source])
        for diag in e.diagnostics:
            assert diag.code.startswith("E0"), diag
            assert render(diag, sources, color=False).startswith(f"[{diag.code}] Error: ")
            render(diag, sources, color=True)
        return
    assert isinstance(tree, A.SourceFile)


def leaves(text: str) -> list[tuple[int, int]]:
    """The byte ranges of the tokens of `text`, comments included."""
    data = text.encode()
    out, stack = [], [parse_tree(data).root_node]
    while stack:
        node = stack.pop()
        if node.child_count == 0 or node.type in ("string", "comment"):
            if node.end_byte > node.start_byte:
                out.append((node.start_byte, node.end_byte))
        else:
            stack.extend(reversed(node.children))
    return out


TOKENS = [leaves(t) for t in TEXTS]


@st.composite
def mutated(draw) -> str:
    index = draw(st.integers(0, len(TEXTS) - 1))
    data, toks = TEXTS[index].encode(), TOKENS[index]
    i = draw(st.integers(0, len(toks) - 2))
    (s, e), (s2, e2) = toks[i], toks[i + 1]
    match draw(st.sampled_from(["delete", "duplicate", "swap"])):
        case "delete":
            out = data[:s] + data[e:]
        case "duplicate":
            out = data[:e] + b" " + data[s:e] + data[e:]
        case _:
            out = data[:s] + data[s2:e2] + data[e:s2] + data[s:e] + data[e2:]
    return out.decode("utf-8")


# Pieces of Presk, for random programs that get further than random text does.
PIECES = (
    "module fn param use let init = : ( ) [ ] { } , . ... -> → ℝ Real λ \\ · @ + - * / % ^ "
    "|> == != ≠ < <= ≤ > >= ≥ dim const type import as static assert uses stack params idx bool "
    "ein axis stream optimizer training run inference serve checkpoint every steps to x y D 8 "
    '0.5 1e-6 "s" "unterminated -- \n \n \t'
).split(" ") + ["\n", "  "]


@budget(60)
@given(st.binary(max_size=300))
def test_random_bytes(data: bytes):
    check(data.decode("utf-8", errors="replace"))


@budget(60)
@given(st.text(max_size=200))
def test_random_text(text: str):
    check(text)


@budget(60)
@given(st.lists(st.sampled_from(PIECES), max_size=60))
def test_random_token_soup(pieces: list[str]):
    check(" ".join(pieces))


@budget(120)
@given(mutated())
def test_mutated_tutorial_programs(text: str):
    check(text)


def test_every_tutorial_program_passes_the_property():
    for text in TEXTS:
        check(text)
