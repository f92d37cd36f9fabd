"""A training run whose objective takes a key (issue 16): dropout trains on the reference
interpreter, step t drawing with fold_in(fold_in_name(root_key(seed), "key"), t); the
native backend and the kernel interpreter train it with the interpreter's log (issue 29),
and the PyTorch export of its run draws the steps' keys as presk train does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
from helpers import conformance_passes
from presk_ad.step import STEP, Trainer
from presk_core import random as R
from presk_core.data import read_header
from presk_core.lower import lower_program
from presk_types.driver import check_file

ROOT = Path(__file__).resolve().parents[2]
PRESK = ROOT / ".venv" / "bin" / "presk"

DROPOUT = """\
dim B

module Net {
  param w1 : ℝ[model: 4, hidden: 16] init = xavier_uniform
  param w2 : ℝ[hidden: 16, model: 4] init = xavier_uniform
  param b : ℝ[model: 4]
  fn apply(key : key, x : ℝ[batch: B, model: 4]) -> ℝ[batch: B, model: 4] uses Rand =
    let h = relu(ein[batch, hidden](x * w1))
    let kept = h * bernoulli(key, 0.9, batch: B, hidden: 16) / 0.9
    ein[batch, model](kept * w2) + b
}

fn loss(θ : params Net, key : key, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4]))
    -> ℝ[] uses Rand =
  let (x, y) = batch
  mean((Net.apply(θ, key, x) - y)^2)

optimizer adamw {
  lr           : f64 = 0.01
  weight_decay : f64 = 0.0
  schedule     : cosine(warmup = 20)
}

training run {
  model     = Net
  objective = loss
  optimizer = adamw
  data      = stream "data/pairs.psk.d" |> shuffle(seed = 3) |> batch(B = 8)
  epochs    : nat = 10
}
"""


def folder(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "tutorial" / "data", tmp_path / "data")
    (tmp_path / "drop.psk").write_text(DROPOUT)
    return tmp_path


def trainer(tmp_path: Path, horizon: int) -> Trainer:
    path = folder(tmp_path) / "drop.psk"
    checked = check_file(str(path), data_header=lambda p: read_header(p).type_text)
    assert [d.code for d in checked.diagnostics if d.is_error] == []
    core = lower_program(checked.program)
    return Trainer(core, core.trainings[0], str(tmp_path), 0, 64, horizon)


def test_a_model_with_dropout_trains(tmp_path):
    t = trainer(tmp_path, 60)
    losses = [float(s.loss) for s in t.steps()]
    assert len(losses) == 60 and all(np.isfinite(losses))
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10])


def test_step_t_draws_with_the_key_folded_with_t(tmp_path):
    t = trainer(tmp_path, 3)
    assert t.key == R.fold_in_name(R.root_key(0), "key")
    theta = t.theta
    first = next(t.steps(1))
    name = STEP.format("loss")
    again, _ = t.interp.run(name, [R.fold_in(t.key, 1), first.batch, theta], t.entry.dims)
    other, _ = t.interp.run(name, [R.fold_in(t.key, 2), first.batch, theta], t.entry.dims)
    assert again == first.loss  # the same key, the same mask, the same bits
    assert other != first.loss  # another step's key, another mask


def test_native_and_kernel_give_the_interpreters_log(tmp_path):
    """Issue 29: the step's draws are kernels, its key fed by the host each step."""
    where = folder(tmp_path)
    env = {**os.environ, "NO_COLOR": "1"}

    def log(*more: str) -> list[str]:
        done = subprocess.run(
            [str(PRESK), "train", "drop.psk", "--steps", "30", "--log-every", "5", *more],
            cwd=where, capture_output=True, text=True, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return [line for line in done.stdout.splitlines() if line.startswith("step ")]

    want = log()
    assert len(want) == 6
    assert log("--backend", "native") == want
    assert log("--backend", "kernel") == want


def test_the_exported_train_py_draws_the_steps_keys(tmp_path):
    """Issue 29: train.py folds step t into the objective's key as presk train does, and its
    K-step conformance test (the interpreter's masks, bit for bit) passes."""
    where = folder(tmp_path)
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [str(PRESK), "export", "drop.psk", "--target", "pytorch", "--conformance-entry",
         "train:2", "-o", "out"],
        cwd=where, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "def step_key(seed, t):" in (where / "out" / "train.py").read_text()
    conformance_passes(where / "out", env=env)
