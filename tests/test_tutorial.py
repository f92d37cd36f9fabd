"""docs/tutorial.md as a test: every command block runs and prints what is recorded.

The steps run in two tests, each its own file so that the suite's two workers take one each:
this one the steps that build on each other (0–12, 14–16: step 11's checkpoint feeds 12, 15
and 16), tests/test_tutorial_apart.py the steps that stand alone (13, 17, 18), which write
folders of their own under out/. `make tutorial` runs them all in order.

Step 13 reads the civil code's text from ../shared/data/civil.md; where it is absent (a
checkout elsewhere) the step is left out, and said so."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

from helpers import presk_on_path

ROOT = Path(__file__).resolve().parents[1]
CIVIL = ROOT.parent / "shared" / "data" / "civil.md"
APART = ("13.", "17.", "18.")  # the steps that need no other step's files


def run_tutorial(*flags: str) -> subprocess.CompletedProcess[str]:
    """tools/run_tutorial.py on docs/tutorial.md, each `presk` its commands run a fork of a
    Python that imported presk once (helpers.presk_on_path; its opt-out, PRESK_TEST_NO_ZYGOTE=1)."""
    venv_bin = str(ROOT / ".venv" / "bin")
    # the environment run_tutorial.py gives its commands, the client's folder before its tools
    env = {**os.environ, "NO_COLOR": "1", "LC_ALL": "C.UTF-8"}
    env["PATH"] = os.pathsep.join(p for p in (venv_bin, env.get("PATH")) if p)
    with presk_on_path(env) as env:
        return subprocess.run(
            [sys.executable, str(ROOT / "tools" / "run_tutorial.py"),
             str(ROOT / "docs" / "tutorial.md"), *flags],
            cwd=ROOT, capture_output=True, text=True, timeout=900, env=env,
        )  # fmt: skip


def test_tutorial_runs_as_written():
    result = run_tutorial(*(a for step in APART for a in ("--skip-step", step)))
    assert result.returncode == 0, result.stdout + result.stderr


def apart_flags() -> list[str]:
    """The steps of test_tutorial_apart.py, step 13 left out where the civil code is absent."""
    steps = list(APART)
    if not CIVIL.is_file():
        warnings.warn(f"{CIVIL} is absent: step 13 of the tutorial is left out", stacklevel=2)
        steps.remove("13.")
    return [a for step in steps for a in ("--step", step)]
