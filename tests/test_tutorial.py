"""docs/tutorial.md as a test: every command block runs and prints what is recorded."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_tutorial_runs_as_written():
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "run_tutorial.py"),
            str(ROOT / "docs" / "tutorial.md"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
