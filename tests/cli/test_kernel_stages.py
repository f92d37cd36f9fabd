"""`presk dump --stage sched|kernel` and `presk-dump` of a `kernel` document, as a user runs
them (presk-kernel's passes through presk-cli)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"

pytestmark = pytest.mark.skipif(
    not (BIN / "presk").exists(), reason="the console scripts are not installed in .venv"
)


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=120,
    )


def test_the_kernel_stage_prints_the_kernels_an_entry_launches():
    r = run("presk", "dump", "tutorial/03_attention.psk", "--stage", "kernel", "--entry",
            "attend", "--dim", "B=1", "--dim", "T=3")  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "entry attend at B = 1, T = 3: 4 launches"
    assert lines[1].startswith("kernel ein[batch, heads, seq, seq2] (%0 : f64[batch: 1, heads: 2")


def test_the_sched_stage_counts_launches_and_an_entry_is_required():
    r = run("presk", "dump", "tutorial/07_train.psk", "--stage", "sched", "--entry", "loss",
            "--dim", "B=8", "--realize", "f32")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().startswith("-- entry loss at B = 8: 14 kernel launches, 39 without")
    r = run("presk", "dump", "tutorial/07_train.psk", "--stage", "kernel")
    assert r.returncode == 1 and b"[E7001]" in r.stderr and b"Traceback" not in r.stderr


def test_presk_dump_prints_a_kernel_document():
    from presk_kernel.codec import encode_kernel
    from presk_kernel.ir import (
        Affine,
        Arg,
        Axis,
        Buffer,
        Const,
        HostBuffer,
        Kernel,
        Launch,
        Layout,
        Loop,
        Schedule,
        Store,
    )

    out = Buffer(0, "f32", (Axis("n", 2),))
    body = (Loop("i0", "n", 2, (Store(0, (Affine.var("i0"),), Const(1.5, "f32")),)),)
    k = Kernel("fill", "f/%1", (), (out,), body, "f32", Layout(order=("i0",)))  # decoding verifies
    s = Schedule("f", (), (HostBuffer(0, "f32", out.axes, "f/%1", "output"),),
                 (Launch(k, (Arg(0),)),), (), (0,))  # fmt: skip
    r = run("presk-dump", stdin=encode_kernel(s))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines()[:2] == [
        "entry f: 1 launches",
        "kernel fill () -> %0 : f32[n: 2] {",
    ]
