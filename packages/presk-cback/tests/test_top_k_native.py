"""`top_k`'s selection kernel (issue 29) on the rows that make its order hard (NaN above
every number, +0 above −0, ties to the first index, −inf, all equal): the kernel interpreter
and the native code give the same bits, and both the order of a stable sort by `argmax`'s
comparison (the oracle written here, not the kernel's)."""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import numpy as np
from presk_cback.native import NativeEntry
from presk_kernel.interp import run_schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "presk-kernel" / "tests"))
from kernel_entries import lowered, same_bits  # noqa: E402

PROGRAM = "tests/check/programs/top_k.psk"
NAN, INF = math.nan, math.inf
COLUMNS = [  # x[c: 7, batch: 5], a column a row of the top-k
    [1.0, NAN, -0.0, NAN, 0.0, 1.0, -INF],
    [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0],
    [-INF, -INF, NAN, -INF, -0.0, -INF, -0.0],
    [0.5, -1.5, 3.0, 2.25, -7.0, 3.0, 0.0],
    [-0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0],
]


def before(a: float, b: float) -> bool:
    """a comes before b: NaN above every number, +0 above −0, else the larger."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and not math.isnan(b)
    if a == b:
        return math.copysign(1, a) > 0 > math.copysign(1, b)
    return a > b


def order(col: list[float]) -> list[int]:
    def cmp(i: int, j: int) -> int:
        return -1 if before(col[i], col[j]) else 1 if before(col[j], col[i]) else i - j

    return sorted(range(len(col)), key=functools.cmp_to_key(cmp))


def test_the_selection_kernel_is_the_order_natively_and_in_the_kernel_interpreter():
    schedule, args, _ = lowered(PROGRAM, "which", (("B", 5), ("N", 7)))
    (x,) = args
    assert x.shape == (7, 5)
    x = np.array(COLUMNS, dtype=np.float64).T.copy()
    want = np.array([order(c) for c in COLUMNS], dtype=np.int64).T
    assert want[:, 0].tolist() == [1, 3, 0, 5, 4, 2, 6]
    kernel = run_schedule(schedule, [x])
    assert same_bits(kernel, [want])
    assert same_bits(NativeEntry(schedule).run([x]), kernel)


def test_the_first_k_of_rows_along_the_last_axis():
    schedule, args, _ = lowered(PROGRAM, "best", (("B", 5), ("N", 7)))
    rows = np.array([c[:6] for c in COLUMNS], dtype=np.float64)
    assert args[0].shape == rows.shape
    want = np.array([order(c[:6])[:2] for c in COLUMNS], dtype=np.int64)
    kernel = run_schedule(schedule, [rows])
    assert same_bits(kernel[1], want)
    assert same_bits(kernel[0], np.take_along_axis(rows, want, 1))
    assert same_bits(NativeEntry(schedule).run([rows]), kernel)
