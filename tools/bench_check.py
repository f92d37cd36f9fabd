"""Time `presk check` on the reference examples at their real constants.

    .venv/bin/python tools/bench_check.py [--repeat R]

Each time is that of `presk_types.driver.check_file` (parsing, elaboration, the checking of
every function, the Presburger decisions of every shape equality), the best of R runs after
one warm-up run, in this process. A program that does not check is an error: the benchmark
times only what passes.
"""

from __future__ import annotations

import argparse
import os
import time

from presk_types.driver import check_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (path from the root of the repository, what its constants are)
EXAMPLES = [
    ("tests/examples/minigpt/minigpt.psk", "GPT-2 small: V=50257, D=768, H=12, L=12"),
    ("tests/examples/bert/bert.psk", "BERT-base: V=30522, D=768, H=12, L=12"),
    ("tests/examples/llama/llama.psk", "a Llama-2-7B block: D=4096, H=32, F=11008"),
    ("tests/examples/minigpt/train_minigpt.psk", "GPT-2 small and its loss"),
]


def time_check(path: str, repeat: int) -> float:
    """The best of `repeat` checks of `path`, after one warm-up check."""
    checked = check_file(path)
    if not checked.ok:
        errors = [f"{d.code} {d.message}" for d in checked.diagnostics if d.is_error]
        raise SystemExit(f"bench_check: {path} does not check: {'; '.join(errors)}")
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        check_file(path)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per file (default 5)")
    args = parser.parse_args()
    os.chdir(ROOT)  # the paths printed are the paths a user types from the root
    for path, constants in EXAMPLES:
        seconds = time_check(path, args.repeat)
        print(f"check {path} ({constants}): {seconds:.3f} s")


if __name__ == "__main__":
    main()
