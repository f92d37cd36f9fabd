"""The tree-sitter corpus (grammar/test/corpus/*.txt), run through the Python binding.

Each case is read as `tree-sitter test` reads it (a header of `=`, the source, a line of `-`,
the expected s-expression), parsed with `presk_syntax.parse.parse_tree`, and its tree printed
as the CLI prints it (`str(node)`: named nodes with their field names) and compared with the
expected text, whitespace normalised. So CI needs no tree-sitter CLI; when one is at hand
(`../shared/tools/tree-sitter` beside the repository, and node), it runs the corpus too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from presk_syntax.parse import language, parse_tree

GRAMMAR = Path(__file__).resolve().parents[1] / "grammar"
CORPUS = GRAMMAR / "test" / "corpus"
REPO = Path(__file__).resolve().parents[3]
CLI = REPO.parent / "shared" / "tools" / "tree-sitter"

AREAS = ["declarations", "modules", "types", "expressions", "layout", "blocks"]

# A case that pins a tree the grammar should give but does not yet is marked `:skip` (the CLI
# skips it) and named here with its reason: it runs as a strict xfail, so the fix is noticed.
KNOWN_BUGS: dict[str, str] = {}  # case name -> what the parser does instead

HEADER = re.compile(
    r"^(?P<bar>={3,})[^\n]*\n(?P<name>[^\n]+)\n(?P<attrs>(?::[^\n]*\n)*)(?P=bar)\n", re.M
)
DIVIDER = re.compile(r"^-{3,}[^\n]*\n", re.M)
COMMENT = re.compile(r"^\s*;.*$", re.M)


@dataclass(frozen=True)
class Case:
    file: str
    name: str
    attrs: tuple[str, ...]
    source: bytes
    expected: str


def normalise(sexp: str) -> str:
    """The s-expression as `tree-sitter test` compares it: comments dropped, blanks folded."""
    text = re.sub(r"\s+", " ", COMMENT.sub("", sexp).strip())
    return text.replace(" )", ")").replace("( ", "(")


def read_corpus(path: Path) -> list[Case]:
    """The cases of one corpus file, cut as tree-sitter's CLI cuts them."""
    text = path.read_text(encoding="utf-8")
    headers = list(HEADER.finditer(text))
    cases = []
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        body = text[header.end() : end]
        divider = max(DIVIDER.finditer(body), key=lambda m: len(m.group()), default=None)
        assert divider is not None, f"{path.name}: case {header['name']!r} has no `---` line"
        source = body[: divider.start()]
        source = source[:-1] if source.endswith("\n") else source  # the CLI drops one newline
        attrs = tuple(a.strip() for a in header["attrs"].splitlines())
        cases.append(
            Case(path.stem, header["name"].strip(), attrs, source.encode(), body[divider.end() :])
        )
    return cases


CASES = [case for area in AREAS for case in read_corpus(CORPUS / f"{area}.txt")]


def _param(case: Case):
    marks = []
    if ":skip" in case.attrs:
        reason = KNOWN_BUGS.get(case.name, "skipped without a reason in KNOWN_BUGS")
        marks.append(pytest.mark.xfail(strict=True, reason=reason))
    return pytest.param(case, id=f"{case.file}: {case.name}", marks=marks)


def test_corpus_files_are_the_areas():
    assert sorted(p.stem for p in CORPUS.glob("*.txt")) == sorted(AREAS)
    assert len({(c.file, c.name) for c in CASES}) == len(CASES), "duplicate case names"


def test_skipped_cases_are_known_bugs():
    skipped = {c.name for c in CASES if ":skip" in c.attrs}
    assert skipped == set(KNOWN_BUGS)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_corpus_case(case: Case):
    root = parse_tree(case.source).root_node
    assert normalise(str(root)) == normalise(case.expected)
    assert not root.has_error


# ---- coverage: the corpus pins every construct of the grammar -----------------------------


def _grammar_symbols() -> tuple[set[str], set[str]]:
    """The named node kinds and the anonymous tokens a tree can show."""
    lang = language()
    named, tokens = set(), set()
    for sym in range(lang.node_kind_count):
        kind = lang.node_kind_for_id(sym)
        if not kind or not lang.node_kind_is_visible(sym) or kind in ("ERROR", "end"):
            continue
        (named if lang.node_kind_is_named(sym) else tokens).add(kind)
    return named, tokens


def _walk(node):
    yield node
    for child in node.children:
        yield from _walk(child)


def test_corpus_shows_every_named_node_and_field():
    expected = " ".join(c.expected for c in CASES)
    named, _ = _grammar_symbols()
    missing = sorted(k for k in named if f"({k}" not in expected)
    assert not missing, f"node kinds no corpus case shows: {missing}"
    lang = language()
    fields = {lang.field_name_for_id(i) for i in range(1, lang.field_count + 1)}
    # `op` and `element: ℝ` name anonymous or hidden children, which s-expressions omit.
    unseen = sorted(f for f in fields - {"op"} if f"{f}: (" not in expected)
    assert not unseen, f"fields no corpus case shows: {unseen}"


def test_corpus_sources_use_every_token():
    seen = set()
    for case in CASES:
        seen |= {n.type for n in _walk(parse_tree(case.source).root_node) if not n.is_named}
    _, tokens = _grammar_symbols()
    missing = sorted(tokens - seen)
    assert not missing, f"tokens no corpus source uses: {missing}"


# ---- the corpus through tree-sitter's own CLI, when it is installed ---------------------------


@pytest.mark.skipif(not CLI.exists(), reason=f"no tree-sitter CLI at {CLI}")
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH")
def test_tree_sitter_cli_runs_the_corpus():
    env = {**os.environ, "NO_COLOR": "1"}
    run = subprocess.run(
        [str(CLI), "test"], cwd=GRAMMAR, capture_output=True, text=True, timeout=600, env=env
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "failure" not in output, output
    assert len(re.findall("✓", output)) == len(CASES) - len(KNOWN_BUGS), output
