"""Write tests/examples/minigpt/data/tiny_T8.psk.d: 32 windows of 8 tokens below 64 and their
targets, from a synthetic stream with some structure to learn (each token most often
follows its predecessor by one), for tiny MiniGPT (V = 64, T = 8).

    .venv/bin/python tools/make_tiny_windows.py
"""

from pathlib import Path

import numpy as np
from presk_core.data import write
from presk_core.text import lm_windows
from presk_types.elab import type_from_text

OUT = Path(__file__).resolve().parents[1] / "tests" / "examples" / "minigpt" / "data"


def main() -> None:
    rng = np.random.default_rng(2026)
    steps = np.where(rng.random(32 * 8) < 0.8, 1, rng.integers(0, 64, size=32 * 8))
    stream = np.cumsum(np.concatenate([[0], steps])) % 64
    type_text, samples = lm_windows(stream, 64, 8)  # what `presk data lm-windows` cuts
    OUT.mkdir(parents=True, exist_ok=True)
    write(str(OUT / "tiny_T8.psk.d"), type_text, type_from_text(type_text), samples)


if __name__ == "__main__":
    main()
