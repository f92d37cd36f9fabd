"""The export writes code in ruff's format without running ruff (presk_export.pyformat):
every file the export tests export is left unchanged by `ruff format`, and each statement of
them, laid out at other depths and with trailing comments of other lengths, is broken as
ruff breaks it. ruff is a development tool here, not a dependency of presk-export."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from presk_export import Options, export_pytorch
from presk_export.pyformat import WIDTH, lay_out, width
from presk_syntax.span import SourceMap
from presk_types.elab import load_program

ROOT = Path(__file__).resolve().parents[2]
TINY = {"V": "64", "D": "16", "H": "2", "L": "2"}
CONSTS = {
    "tests/examples/minigpt/minigpt.psk": TINY,
    "tests/examples/minigpt/train_minigpt.psk": TINY,
    "tests/examples/bert/bert.psk": {"V": "32", "D": "8", "H": "2", "L": "2"},
    "tests/examples/llama/llama.psk": {"D": "8", "H": "2", "F": "12"},
    "corpus/nlp/05_gpt.psk": {"D": "8", "H": "2", "L": "1"},
}
PROGRAMS = [
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tutorial").glob("*.psk")),
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests/examples").glob("*/*.psk")),
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests/export/programs").glob("*.psk")),
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "corpus/nlp").glob("*.psk")),
]
OPTIONS = [Options(), Options(check_shapes=True), Options(unroll=True)]
# (program, options, export_pytorch's keywords): the entries the export tests export
ENTRIES = [
    (
        "tutorial/06_tower.psk",
        Options(check_shapes=True),
        {"entry": "Tower.apply", "dims": {"batch": 2}},
    ),
    ("tutorial/04_grad.psk", Options(), {"entry": "loss_grad", "dims": {"D": 3, "B": 2}}),
    (
        "tests/examples/minigpt/train_minigpt.psk",
        Options(),
        {"entry": "loss", "dims": {"B": 2, "T": 8}},
    ),
    ("tests/examples/llama/llama.psk", Options(), {"entry": "block", "dims": {"B": 1, "T": 3}}),
    ("tests/export/programs/consts.psk", Options(), {"entry": "c"}),
    ("tutorial/07_train.psk", Options(), {"entry": "train:10", "out": "out/tutorial_train"}),
    ("tests/examples/minigpt/minigpt.psk", Options(), {"serve": True, "out": "out/serve"}),
]


def _ruff(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--isolated", *args],
        input=input,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    """Every program in each of the options, and the entries above, exported under one
    folder (a folder an export)."""
    out = tmp_path_factory.mktemp("exports")
    jobs = [(p, o, {}) for p in PROGRAMS for o in OPTIONS] + ENTRIES
    for k, (path, options, kw) in enumerate(jobs):
        program = load_program(str(ROOT / path), CONSTS.get(path, {}), SourceMap())
        for name, text in export_pytorch(program, options, **kw).items():
            if name.endswith(".py"):
                (out / str(k) / name).parent.mkdir(parents=True, exist_ok=True)
                (out / str(k) / name).write_text(text, encoding="utf-8")
    return out


def test_ruff_format_leaves_every_exported_file_unchanged(exported):
    files = sorted(str(p) for p in exported.rglob("*.py"))
    assert len(files) > 100
    done = _ruff("--check", "--diff", *files)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr


def test_every_statement_is_broken_as_ruff_breaks_it_at_any_depth(exported):
    """Each one-line statement of the exported modules, at depths 0 to 4 and with trailing comments
    of 0 to 60 characters, wherever that makes it longer than a line: one ruff run over
    them all, compared case by case."""
    statements: dict[str, None] = {}
    for path in exported.rglob("*.py"):
        if path.name in TEMPLATED:
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        # the draws' helpers are written as the template writes them, not laid out
        helpers = [f for f in tree.body if getattr(f, "name", None) in RANDOM_HELPERS]
        skip = {id(n) for f in helpers for n in ast.walk(f)}
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            one_line = isinstance(node, SIMPLE) and node.lineno == node.end_lineno
            if one_line and len(code := ast.get_source_segment(text, node)) > 30:
                statements[code] = None
    cases = []
    for code in statements:
        for depth in range(5):
            for n in (0, 12, 30, 60):
                comment = ("# " + "ℝ[batch: B, seq: T, heads: H] " * 3)[:n] if n else ""
                line = "    " * depth + code + (f"  {comment}" if comment else "")
                if width(line) > WIDTH:
                    cases.append((depth, code, comment))
    assert len(cases) > 500
    source = []
    for k, (depth, code, comment) in enumerate(cases):
        source.append(f"# case {k}")
        source += ["    " * d + "if x:" for d in range(depth)]
        source.append("    " * depth + code + (f"  {comment}" if comment else ""))
    text = "\n".join(source) + "\n"
    done = _ruff("-", input=text)
    assert done.returncode == 0, done.stderr
    ours, theirs = _cases(lay_out(text)), _cases(done.stdout)
    assert len(ours) == len(theirs) == len(cases)
    wrong = [
        f"{a}\n--- ruff:\n{b}"
        for (depth, code, comment), a, b in zip(cases, ours, theirs, strict=True)
        if a != b and (code, depth, len(comment)) not in KNOWN
    ]
    assert not wrong, f"{len(wrong)} of {len(cases)} differ; the first:\n{wrong[0]}"


# Known divergences from ruff, each a synthetic case (a depth and a comment the export never
# writes; the exported files themselves are ruff's, the first test): ruff parenthesizes the
# whole right-hand side of a call chain divided by a constant when a long trailing comment
# makes it break at depth 4, pyformat splits the chain's brackets (issue 29's VAE, noticed
# at its merge; to be found in ruff's assignment layout).
KNOWN = {("kl = (torch.exp(lv) + mu**2 - 1 - lv).sum(dim=1).mean() / 2", 4, 60)}


# files whose statements are a template's, written in ruff's format, apart from the values
# filled in (which the first test checks)
TEMPLATED = ("serve.py", "train.py", "test_conformance.py")
# the draws' helpers a module that draws carries, as templates/_random.py.j2 writes them
RANDOM_HELPERS = {
    node.name
    for node in ast.parse(
        (ROOT / "packages/presk-export/src/presk_export/templates/_random.py.j2").read_text()
    ).body
    if isinstance(node, ast.FunctionDef)
}
# the statements that are not compound (no `def`, `for`, `if`, …)
SIMPLE = (ast.Assign, ast.AugAssign, ast.Return, ast.Expr, ast.Assert, ast.Raise, ast.Delete)


def _cases(text: str) -> list[str]:
    return [c.strip("\n") for c in re.split(r"^# case \d+\n", text, flags=re.M)[1:]]
