"""What the corpus tools share (precision_gpt, precision_curve, step_budget_gpt, quant_table):
the repository's paths, `presk` run with its command echoed and timed, and the one line a
tool prints, doing nothing, where the corpus or its windows are absent."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRESK = str(ROOT / ".venv" / "bin" / "presk")
GPT = "corpus/nlp/05_gpt.psk"
CIVIL = ROOT.parent / "shared" / "data" / "civil.md"


def run(*args: str, echo: bool = True, check: bool = True) -> str:
    """`presk ARGS` in the repository: the command, its stdout (unless not `echo`), its
    stderr and its time printed; a failure ends the tool with its code (unless not `check`)."""
    print("$ presk " + " ".join(args), flush=True)
    t = time.monotonic()
    r = subprocess.run([PRESK, *args], cwd=ROOT, capture_output=True, text=True)
    if echo:
        print(r.stdout, end="")
    if r.stderr:
        print(r.stderr, end="")
    print(f"  ({time.monotonic() - t:.1f} s)", flush=True)
    if check and r.returncode != 0:
        sys.exit(r.returncode)
    return r.stdout


def absent(name: str, data: str) -> bool:
    """True, with one line printed, where the corpus or the windows file `data` is absent."""
    if not CIVIL.exists():
        print(f"{name}: {CIVIL} is absent: no corpus, nothing done (docs/corpus.md)")
        return True
    if not (ROOT / data).exists():
        print(f"{name}: no {data} (make corpus-data)")
        return True
    return False
