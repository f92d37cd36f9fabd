"""Time the reference interpreter on tiny MiniGPT's loss (V=64, D=16, H=2, L=2, B=2, T=8),
at 256 and at 64 bits (tools/bench_mpfr.py has the kernels' ratios to NumPy float64).

    .venv/bin/python tools/bench_run.py [--repeat R]

Each time is the best of R runs of the evaluation alone (the program is lowered and the
inputs synthesized once, outside the timing); the last line is the same run at 256 bits
with an observer that keeps what `presk calibrate --precision` needs.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import numpy as np
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
    watched = Interpreter(core, 256, Magnitudes())
    inputs = [v for _, _, v in synthesize(entry, Interpreter(core, 256), 0)]
    seconds = best_of(args.repeat, partial(watched.run, "loss", inputs, entry.dims))
    print(f"  observed (magnitudes and Σ|terms| of every site) at 256 bits: {seconds:.3f} s")


class Magnitudes:
    """What `presk calibrate --precision` keeps: the largest |value| of each site, the
    worst Σ|terms| / |value| of each sum and contraction."""

    wants_abs_sums = True

    def __init__(self) -> None:
        self.largest: dict[str, float] = {}
        self.worst: dict[str, float] = {}

    def __call__(self, site: str, value: object, abs_sum: object = None) -> None:
        if not isinstance(value, np.ndarray) or value.dtype != object or value.size == 0:
            return
        magnitudes = [abs(float(v)) for v in value.reshape(-1)]
        self.largest[site] = max(self.largest.get(site, 0.0), *magnitudes)
        if abs_sum is not None:
            ratios = [
                float(a) / m for a, m in zip(abs_sum.reshape(-1), magnitudes, strict=True) if m
            ]
            self.worst[site] = max(self.worst.get(site, 1.0), *ratios, 1.0)


if __name__ == "__main__":
    main()
