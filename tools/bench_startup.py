"""Time the start of `presk`: `presk --help` and `presk check tutorial/01_linear.psk`.

    .venv/bin/python tools/bench_startup.py [--repeat R]

Each figure is the median of R runs of the console script in a fresh process (wall clock,
from the repository's root), with Python's bytecode cache as the environment has it, and
then with a cache kept in a temporary folder (what an installed presk has after its first
run). The target is 0.3 s for both commands (issue 12, item 8).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRESK = ROOT / ".venv" / "bin" / "presk"
COMMANDS = (["--help"], ["check", "tutorial/01_linear.psk"])


def median_time(args: list[str], repeat: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([str(PRESK), *args], cwd=ROOT, env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as cache:
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = cache
        as_is = "no bytecode cache" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "as is"
        for label, env in ((as_is, dict(os.environ)), ("bytecode cached", cached)):
            for args in COMMANDS:
                subprocess.run([str(PRESK), *args], cwd=ROOT, env=env, capture_output=True)
                t = median_time(args, repeat, env)
                shown = " ".join(["presk", *args])
                print(f"start-up  {shown:<40} {t:6.3f} s  (median of {repeat}, {label})")


if __name__ == "__main__":
    main()
