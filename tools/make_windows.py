"""Write tests/examples/minigpt/data/windows_T256.psk.d: 16 windows of 256 tokens and their
targets (the same window shifted by one), of a synthetic token stream below V = 50257,
so that train_minigpt.psk's training run has the data its `presk check` opens.

    .venv/bin/python tools/make_windows.py
"""

from pathlib import Path

import numpy as np
from presk_core.data import write
from presk_core.text import lm_windows
from presk_types.elab import type_from_text

OUT = Path(__file__).resolve().parents[1] / "tests" / "examples" / "minigpt" / "data"


def main() -> None:
    stream = np.random.default_rng(2026).integers(0, 50257, size=16 * 256 + 1)
    type_text, samples = lm_windows(stream, 50257, 256)  # what `presk data lm-windows` cuts
    OUT.mkdir(parents=True, exist_ok=True)
    write(str(OUT / "windows_T256.psk.d"), type_text, type_from_text(type_text), samples)


if __name__ == "__main__":
    main()
