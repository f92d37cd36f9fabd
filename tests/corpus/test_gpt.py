"""The course GPT, corpus/nlp/05_gpt.psk: its training run as `presk check --summary`
prints it (the specification's block of step 13, with our vocabulary of 86), and the
model at tiny constants on the reference.

The civil code may be absent (CI): the summary is checked on a copy of the file beside a
stand-in data file of the same type (a few windows of random characters), and again on
the real corpus/nlp/data/civil_T256.psk.d when `make corpus-data` has written it. The
course-size model itself is never run here (tools/experiment_gpt.py trains it)."""

import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import presk

ROOT = Path(__file__).resolve().parents[2]
GPT = ROOT / "corpus" / "nlp" / "05_gpt.psk"
CIVIL = ROOT / "corpus" / "nlp" / "data" / "civil_T256.psk.d"

# The specification's block (step 13), idx[92] becoming our vocabulary's idx[86].
SUMMARY = """\
training run: model GPT, objective loss, optimizer adamw
    batch   : (idx[86][batch: B, seq: T], idx[86][batch: B, seq: T])
    sample  : (idx[86][seq: T], idx[86][seq: T])
    data    : data/civil_T256.psk.d (shuffle 7, batch 16) — file holds (idx[86][seq: 256], idx[86][seq: 256])
    epochs  : 1
    ckpt    : every 500 steps to ckpt/
    dims    : B = 16, T = 256
"""

TINY = ["--const", "D=8", "--const", "H=2", "--const", "L=1"]


def stand_in(folder: Path, count: int = 20, v: int = 86, seq: int = 256) -> Path:
    """05_gpt.psk copied into `folder`, beside data/civil_T256.psk.d: `count` windows of
    `seq` random characters of a vocabulary of `v`, of the type lm-windows writes."""
    from presk_core.data import write
    from presk_core.text import lm_windows
    from presk_types.elab import type_from_text

    shutil.copy(GPT, folder / "05_gpt.psk")
    (folder / "data").mkdir()
    tokens = np.random.default_rng(0).integers(0, v, size=count * seq + 1)
    type_text, samples = lm_windows(tokens, v, seq)
    write(str(folder / "data" / "civil_T256.psk.d"), type_text, type_from_text(type_text), samples)
    return folder / "05_gpt.psk"


def training_block(stdout: str) -> str:
    """The summary from `training run:` on (the spec shows that excerpt)."""
    at = stdout.index("training run:")
    return stdout[at:]


def test_summary_block_on_a_stand_in(tmp_path):
    r = presk("check", str(stand_in(tmp_path)), "--summary")
    assert r.returncode == 0, r.stderr
    assert training_block(r.stdout) == SUMMARY
    assert "-- training --\ntraining run:" in r.stdout


@pytest.mark.skipif(not CIVIL.exists(), reason="no corpus/nlp/data (make corpus-data)")
def test_summary_block_on_the_civil_code():
    r = presk("check", "corpus/nlp/05_gpt.psk", "--summary")
    assert r.returncode == 0, r.stderr
    assert training_block(r.stdout) == SUMMARY


def test_another_vocabulary_is_refused(tmp_path):
    """The file's windows must be of the model's vocabulary: 92 characters (the spec's
    text) do not fit V = 86."""
    r = presk("check", str(stand_in(tmp_path, count=2, v=92)), "--summary")
    assert r.returncode == 1
    assert "E1011" in r.stderr and "idx[92]" in r.stderr


def test_the_first_loss_is_ln_v():
    """The head starts at zero: every logit is 0, the loss ln 86 whatever the weights
    below it (at tiny width, on the reference at 256 bits)."""
    r = presk(
        "run", str(GPT), "--entry", "loss", *TINY, "--dim", "B=2", "--dim", "T=5", "--digits", "12"
    )
    assert r.returncode == 0, r.stderr
    value = re.fullmatch(r"ℝ\[\] = (\d\.\d+)\n", r.stdout)
    assert value, r.stdout
    assert float(value.group(1)) == pytest.approx(math.log(86), rel=1e-11)


def test_experiment_starts_both_sides_alike(tmp_path):
    """tools/experiment_gpt.py at tiny width, in f64, on the kernel interpreter: the native
    side and the exported train.py start from the same θ₀ and take the same batches, so
    their losses and weights agree to float64's rounding (a wrong mapping of the leaves,
    batches or rates would put them apart by far more)."""
    pytest.importorskip("torch")
    data = stand_in(tmp_path, count=40, seq=8).parent / "data" / "civil_T256.psk.d"
    out = tmp_path / "out"
    cmd = [
        str(ROOT / ".venv" / "bin" / "python"),
        str(ROOT / "tools" / "experiment_gpt.py"),
        "--steps",
        "2",
        "--realize",
        "f64",
        "--backend",
        "kernel",
        "--init",
        "presk",
        *TINY,
        "--data",
        str(data),
        "--out",
        str(out),
        "--log-every",
        "0",
    ]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    from presk_cli.metrics import read_metrics  # the writer of `presk train --metrics`

    (mine, native), (theirs, torch_rows) = (
        read_metrics(str(out / f"{side}.jsonl")) for side in ("native", "pytorch")
    )
    assert mine["backend"] == theirs["backend"] == "kernel" and mine["horizon"] == 2
    assert theirs["side"] == "exported train.py (PyTorch eager)"
    assert [row["step"] for row in native] == [row["step"] for row in torch_rows] == [1, 2]
    assert native[0]["loss"] == pytest.approx(math.log(86), rel=1e-14)
    for a, b in zip(native, torch_rows, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-12)
        assert a["lr"] == pytest.approx(b["lr"], rel=1e-12)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-10)  # the same gradient
    gap = re.search(r"‖θ_native − θ_torch‖ / ‖θ_torch‖ = (\S+)", r.stdout)
    assert gap and float(gap.group(1)) < 1e-12, r.stdout
    assert (out / "loss_curves.png").read_bytes()[:4] == b"\x89PNG"
