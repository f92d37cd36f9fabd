"""Write tutorial/data/pairs.txt: 128 samples of y = 2·x + 1 with x in ℝ⁴, a sample a line
(x then y, eight numbers), x uniform in [-1, 1] to four decimals, y exact in decimal.

    python3 tools/make_pairs.py     # then: presk data pack --type '(ℝ[model: 4], ℝ[model: 4])' …
"""

import random
from decimal import Decimal
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tutorial" / "data" / "pairs.txt"


def main() -> None:
    rng = random.Random(2026)
    lines = []
    for _ in range(128):
        x = [Decimal(rng.randint(-10000, 10000)) / 10000 for _ in range(4)]
        y = [2 * v + 1 for v in x]
        lines.append(" ".join(f"{v:f}" for v in x + y))
    from presk_core.data import write_text

    write_text(str(OUT), "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
