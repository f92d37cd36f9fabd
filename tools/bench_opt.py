"""Time `--opt` on the tiny MiniGPT's training program (issue 14: under 5 s).

    .venv/bin/python tools/bench_opt.py [--repeat R]

`presk train tests/examples/minigpt/train_minigpt.psk` (V 64, D 16, H 2, L 2, one step on
the interpreter) is run R times without `--opt` and R times with it, alternating, each in a
fresh process; the optimizer's time is the difference of the two medians (wall clock: the
front end, lowering, differentiation and the one step are the same on both sides). The
report line `presk-opt: …` of the last run is printed with it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRESK = ROOT / ".venv" / "bin" / "presk"
TINY = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]
DATA = "tests/examples/minigpt/data/tiny_T8.psk.d"


def train(opt: bool, ckpt: str) -> tuple[float, str]:
    args = [str(PRESK), "train", "tests/examples/minigpt/train_minigpt.psk", *TINY]
    args += ["--data", DATA, "--steps", "1", "--log-every", "1", "--ckpt", ckpt]
    start = time.perf_counter()
    done = subprocess.run(
        args + (["--opt"] if opt else []), cwd=ROOT, capture_output=True, text=True, check=True
    )
    seconds = time.perf_counter() - start
    report = next((line for line in done.stderr.splitlines() if line.startswith("presk-opt:")), "")
    return seconds, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    repeat = parser.parse_args().repeat
    plain, opt, report = [], [], ""
    with tempfile.TemporaryDirectory() as ckpt:
        for _ in range(repeat):
            plain.append(train(False, ckpt)[0])
            seconds, report = train(True, ckpt)
            opt.append(seconds)
    a, b = statistics.median(plain), statistics.median(opt)
    print(
        f"--opt on the tiny MiniGPT's training program, median of {repeat} (a fresh process each):"
    )
    print(f"  presk train --steps 1          {a:7.2f} s")
    print(f"  presk train --steps 1 --opt    {b:7.2f} s")
    print(f"  the optimizer                  {b - a:7.2f} s   (target: under 5 s)")
    print(f"  {report}")


if __name__ == "__main__":
    main()
