"""tools/bench_threads.py's ceiling (`--no-cpu --ceiling R`): the machine's own two-thread
scaling on work in registers and on a stream, the figures a step's scaling is read against.
Its lines are checked for their form and for rates a machine can have, never for a speed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "bench_threads.py"


def test_the_ceiling_prints_both_scalings_and_one_threads_rates():
    from presk_core.cc.toolchain import find_toolchain

    if not find_toolchain().openmp:
        pytest.skip("the compiler has no OpenMP: no second thread to measure")
    out = subprocess.run(
        [sys.executable, str(TOOL), "--no-cpu", "--ceiling", "2"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "the machine's ceiling" in out.stdout and "2 rounds" in out.stdout
    rows = re.findall(
        r"^    (.+?)\s+two threads over one: median ([\d.]+)× \(([\d.]+)–([\d.]+)\);"
        r" one thread ([\d.]+) (GFLOP/s|GB/s)$",
        out.stdout,
        re.M,
    )
    assert [(r[0], r[5]) for r in rows] == [
        ("multiplies and adds in registers", "GFLOP/s"),
        ("a sum of 128 MB a thread (memory)", "GB/s"),
    ], out.stdout
    for _, median, low, high, rate, _ in rows:
        assert 0 < float(low) <= float(median) <= float(high) and float(rate) > 0
        # two threads cannot do four times one's work: a larger figure is a loop the
        # compiler left out of the parallel region
        assert float(high) < 4, out.stdout


def test_no_cpu_alone_asks_for_what_to_time():
    out = subprocess.run(
        [sys.executable, str(TOOL), "--no-cpu"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 2 and "give either" in out.stderr
