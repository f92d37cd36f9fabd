"""What the cross-stage tests share: the checkout's root and `presk` run as a user runs it.

Importable from any test under tests/ as `from helpers import ...` (tests/conftest.py puts this
folder on sys.path, since pytest runs with --import-mode=importlib).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_SCRIPT = ROOT / ".venv" / "bin" / "presk"
# The installed console script where there is one (what a user runs), else the same main.
PRESK = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "presk_cli.main"]


def presk(
    *args: object,
    cwd: Path | str = ROOT,
    env: dict[str, str] | None = None,
    input: str | None = None,
    timeout: float | None = 600,
) -> subprocess.CompletedProcess[str]:
    """`presk ARGS` in `cwd` (relative to the root), colours off, `env` added to the
    environment; its exit code, stdout and stderr as text."""
    return subprocess.run(
        [*PRESK, *map(str, args)],
        cwd=ROOT / cwd,
        capture_output=True,
        text=True,
        input=input,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        timeout=timeout,
    )


def presk_ok(*args: object, quiet: bool = False, **kw) -> subprocess.CompletedProcess[str]:
    """`presk(*args)` that must exit 0 (and, with `quiet`, write nothing on stderr)."""
    done = presk(*args, **kw)
    assert done.returncode == 0, done.stderr
    if quiet:
        assert done.stderr == "", done.stderr
    return done
