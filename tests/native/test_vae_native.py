"""The VAE with dropout of tests/examples/vae (issue 29): trained on the reference
interpreter, the kernel interpreter and native C, the three logs equal at the six digits
printed and the final weights within double rounding; its loss goes down; step t draws
with the key the interpreter's Trainer gives it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from helpers import presk_ok
from presk_core.data import read_reals

ROOT = Path(__file__).resolve().parents[2]
VAE = ROOT / "tests" / "examples" / "vae" / "vae.psk"


def train(folder: Path, *more: str) -> list[str]:
    done = presk_ok(
        "train", VAE, "--steps", "24", "--log-every", "4", "--ckpt", folder, *more, quiet=True
    )
    return [line for line in done.stdout.splitlines() if line.startswith("step ")]


def test_the_vae_trains_natively_with_the_interpreters_log(compiler, tmp_path):
    want = train(tmp_path / "interp")
    assert len(want) == 6
    losses = [float(re.search(r"loss (\S+)", line).group(1)) for line in want]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    for backend in ("native", "kernel"):
        assert train(tmp_path / backend, "--backend", backend) == want, backend
        a = read_reals(str(tmp_path / backend / "final.psk.d"))
        b = read_reals(str(tmp_path / "interp" / "final.psk.d"))
        assert np.allclose(a, b, rtol=1e-10, atol=1e-12)
