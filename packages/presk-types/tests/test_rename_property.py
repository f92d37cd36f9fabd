"""Renaming an axis (issue 29) against an oracle that enumerates: `(x : ℝ[b: L2])` of an
`x : ℝ[a: L1]` is accepted exactly when L1 and L2 are equal for every value of the
dimension within its bounds, here few enough to try them all."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from presk_types.driver import check_file

COEFF = st.integers(0, 3)
CONST = st.integers(0, 4)
BOUNDS = st.tuples(st.integers(0, 3), st.integers(0, 3)).map(lambda p: (min(p), max(p)))


def _length(a: int, b: int) -> str:
    return f"{a}*N + {b}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=COEFF, b=CONST, c=COEFF, d=CONST, bounds=BOUNDS)
def test_a_renaming_is_accepted_exactly_when_the_lengths_agree_within_the_bounds(
    a: int, b: int, c: int, d: int, bounds: tuple[int, int]
) -> None:
    lo, hi = bounds
    source = (
        f"dim {lo} <= N <= {hi}\n"
        f"fn f(x : ℝ[a: {_length(a, b)}]) -> ℝ[b: {_length(c, d)}] ="
        f" (x : ℝ[b: {_length(c, d)}])\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.psk"
        path.write_text(source, encoding="utf-8")
        codes = [d.code for d in check_file(str(path)).diagnostics if d.is_error]
    agree = all(a * n + b == c * n + d for n in range(lo, hi + 1))
    assert codes == ([] if agree else ["E2006"]), source
