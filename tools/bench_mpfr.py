"""The cost of the reference interpreter's arithmetic, beside numpy's float64.

    .venv/bin/python tools/bench_mpfr.py [--repeat R]

For each kernel of `presk_core.mpfr` (add, mul, exp, and a 64×64×64 matmul through `dot`)
at 64 and 256 bits: the time per element (per multiply-add for the matmul), the best of R
runs, and numpy float64 on the same shapes in the same process, with the ratio. Operands
have full significands (random doubles divided by 3), as a model's values do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from presk_core import mpfr as M

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import best_of  # noqa: E402


def operands(shape: tuple[int, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(mpfr array, float64 array) of the same values up to rounding, in the current context."""
    floats = np.random.default_rng(seed).standard_normal(shape)
    return M.div(M.real(floats), 3), floats / 3


def cases(n: int) -> list[tuple[str, str, int, Callable, Callable]]:
    """(name, shape, elements, mpfr call, float64 call) for the current precision: add and
    mul at n and at n/100 elements (the cost per element grows with the array, as the
    allocator leaves gmpy2's cache of free mpfr objects), exp at n/10."""
    out = []
    for size in (n // 100, n):
        a, af = operands((size,), 0)
        b, bf = operands((size,), 1)
        out += [
            ("add", f"{size}", size, lambda a=a, b=b: M.add(a, b), lambda a=af, b=bf: a + b),
            ("mul", f"{size}", size, lambda a=a, b=b: M.mul(a, b), lambda a=af, b=bf: a * b),
        ]
    e, ef = operands((n // 10,), 2)
    p, pf = operands((64, 64), 3)
    q, qf = operands((64, 64), 4)
    return out + [
        ("exp", f"{n // 10}", n // 10, lambda: M.exp(e), lambda: np.exp(ef)),
        ("matmul", "64x64x64", 64**3, lambda: M.dot(p, q), lambda: pf @ qf),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case (default 5)")
    parser.add_argument(
        "--n", type=int, default=100_000, help="elements for add and mul (default 100000)"
    )
    args = parser.parse_args()
    print(
        f"{'kernel':8} {'shape':>10} {'bits':>5} {'mpfr ns/el':>11} {'f64 ns/el':>10} {'ratio':>8}"
    )
    for bits in (64, 256):
        with M.precision(bits):
            for name, shape, count, mp_call, f64_call in cases(args.n):
                mp = best_of(args.repeat, mp_call) / count * 1e9
                f64 = best_of(args.repeat, f64_call) / count * 1e9
                print(f"{name:8} {shape:>10} {bits:5} {mp:11.1f} {f64:10.3f} {mp / f64:8.0f}")


if __name__ == "__main__":
    main()
