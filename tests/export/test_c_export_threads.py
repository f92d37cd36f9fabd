"""`presk export --target c --threads 2` of a batched product whose threads share its batch
(issue 26: `GemmStmt.batched`, one `parallel for … collapse(2)` over the batch loops, each
GEMM call on one thread): the exported program builds with OpenMP and its outputs are the
native backend's, bit for bit (`make check`)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers import presk_ok

ATTEND = ("tutorial/03_attention.psk", "attend")
DIMS = ("--dim", "B=2", "--dim", "T=100")  # 4 batch points of 100×100×4 and 100×4×100


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc")
def test_a_batched_product_s_threads_build_and_agree(tmp_path):
    out = tmp_path / "c"
    done = presk_ok("export", ATTEND[0], "--target", "c", "--entry", ATTEND[1], *DIMS,
                    "--realize", "f32", "--threads", "2", "-o", out)  # fmt: skip
    assert " divided among up to 2 threads)" in done.stdout, done.stdout
    kernels = (out / "kernels.c").read_text()
    assert "num_threads(presk_threads(2)) schedule(static) collapse(2))" in kernels
    check = subprocess.run(["make", "-s", "-C", str(out), "check", "CC=gcc"],
                           capture_output=True, text=True)  # fmt: skip
    assert check.stdout == "C1 holds: the outputs are the native backend's, bit for bit\n", (
        check.stdout + check.stderr
    )
