"""docs/diagnostics.md as a test: each example program, checked, prints the text under it."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "diagnostics.md"
PRESK = ROOT / ".venv" / "bin" / "presk"
EXAMPLE = re.compile(
    r"((?:```psk file=\S+(?: args=\"[^\"]*\")?\n.*?```\n\n)+)```text\n(.*?)```", re.S
)
FILE = re.compile(r"```psk file=(\S+?)(?: args=\"([^\"]*)\")?\n(.*?)```", re.S)


def _examples():
    text = DOC.read_text()
    for m in EXAMPLE.finditer(text):
        heading = text.rfind("\n### ", 0, m.start())
        code = text[heading + 5 : heading + 10]
        yield pytest.param(FILE.findall(m.group(1)), m.group(2), id=code)


@pytest.mark.parametrize(("files", "expected"), list(_examples()))
def test_example_prints_what_the_chapter_shows(tmp_path, files, expected):
    args = ""
    for name, more, body in files:
        (tmp_path / name).write_text(body)
        args = more or args
    result = subprocess.run(
        [str(PRESK), "check", files[-1][0], *shlex.split(args)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.stderr == expected
    assert result.returncode == (0 if expected.startswith("[W") else 1)


def test_every_code_in_use_has_an_example():
    sources = (ROOT / "packages").rglob("*.py")
    used = set()
    for path in sources:
        if "/tests/" in str(path):
            continue
        used |= set(re.findall(r'"([EW]\d{4})"', path.read_text()))
    used.discard("E1000")  # internal: an error already reported
    documented = {p.id for p in _examples()}
    # E0001 (a file that cannot be read), the run-time, export and native codes are run by
    # tests/cli, tests/run, presk-export's and presk-cback's tests; the chapter lists them without a program.
    text = DOC.read_text()
    elsewhere = {c for c in used if c in ("E0001", "E1011") or c[:2] in ("E7", "E8", "W8", "E9")}
    headings = "\n".join(line for line in text.splitlines() if line.startswith("### "))
    assert all(c in headings for c in elsewhere)
    assert used - documented - elsewhere == set(), "codes without a tested example"
