"""Time the reference interpreter on tiny MiniGPT's loss (V=64, D=16, H=2, L=2, B=2, T=8),
at 256 and at 64 bits (tools/bench_mpfr.py has the kernels' ratios to NumPy float64).

    .venv/bin/python tools/bench_run.py [--repeat R]

Each time is the best of R runs of the evaluation alone (the program is lowered and the
inputs synthesized once, outside the timing).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from presk_core.interp import Interpreter
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize
from presk_types.elab import load_program

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import best_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = {"V": "64", "D": "16", "H": "2", "L": "2"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    path = str(ROOT / "tests" / "examples" / "minigpt" / "train_minigpt.psk")
    program = load_program(path, TINY)
    core = lower_program(program)
    for bits in (256, 64):
        entry = parse_entry("loss", core, program, {"B": 2, "T": 8})
        interp = Interpreter(core, bits)
        inputs = [v for _, _, v in synthesize(entry, interp, 0)]
        seconds = best_of(args.repeat, partial(interp.run, "loss", inputs, entry.dims))
        print(f"tiny MiniGPT loss (V=64, D=16, H=2, L=2, B=2, T=8) at {bits} bits: {seconds:.3f} s")


if __name__ == "__main__":
    main()
