"""The house style holds: ruff check and ruff format leave the repository as it is."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_check():
    result = _ruff("check", ".")
    assert result.returncode == 0, result.stdout


def test_ruff_format():
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout
