"""`presk train` on runs a new user or a fuzzer writes (issue 27): each trains or stops with
a coded diagnostic, never an internal error; native training computes each step's rate when
the step runs (a horizon of 10^6 starts at once)."""

import signal
from pathlib import Path

import pytest
from helpers import presk

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """dim B
module M {{
  param w : ℝ[model: 2]  init = zeros
  fn apply(x : ℝ[..., model: 2]) -> ℝ[..., model: 2] = x * w
}}
fn loss(θ : params M, batch : (ℝ[batch: B, model: 2], {second})) -> ℝ[] =
  let (x, y) = batch
  {body}
optimizer adamw {{
  lr       : f64 = 0.01
  schedule : {schedule}
}}
training run {{
  model     = M
  objective = loss
  optimizer = adamw
  data      = stream "pairs.psk.d" |> shuffle(seed = 3) |> batch(B = 2)
  epochs    : nat = 2
}}
"""
PAIRED = {"second": "ℝ[batch: B, model: 2]", "body": "mean((M.apply(θ, x) - y)^2)"}


@pytest.fixture
def folder(tmp_path) -> Path:
    (tmp_path / "pairs.txt").write_text("1 2 3 4\n5 6 7 8\n1 1 1 1\n2 2 2 2\n")
    r = presk("data", "pack", "pairs.txt", "--type", "(ℝ[model: 2], ℝ[model: 2])", "-o",
              "pairs.psk.d", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return tmp_path


@pytest.mark.parametrize("opt", [False, True], ids=["plain", "opt"])
def test_a_constant_schedule_logs_its_rate(folder, opt):
    (folder / "t.psk").write_text(PROGRAM.format(schedule="constant", **PAIRED))
    r = presk("train", "t.psk", "--log-every", 1, *(["--opt"] if opt else []), cwd=folder)
    assert r.returncode == 0, r.stderr
    steps = [line for line in r.stdout.splitlines() if line.startswith("step ")]
    assert len(steps) == 4 and all("  lr 1.000e-2  " in line for line in steps), r.stdout


def test_a_batch_element_without_the_batch_axis_is_E1011_at_check(folder):
    """`np.stack` had nothing to stack on (a TypeError, then E7008 at train time): the
    objective's batch is checked against the data pipeline by `presk check`, on the `data`
    field, and so by `train` on every backend before anything runs."""
    second = {"second": "ℝ[model: 2]", "body": "mean(M.apply(θ, x)^2) + mean(y)"}
    (folder / "t.psk").write_text(PROGRAM.format(schedule="constant", **second))
    expected = (
        "[E1011] Error: training run: element 2 of the batch, `ℝ[model: 2]`, has no `batch`"
        " axis to stack the samples on\n    ,-[ t.psk:17:3 ]"
    )
    for argv in (["check"], *(["train", "--backend", b] for b in ("interp", "kernel", "native"))):
        r = presk(argv[0], "t.psk", *argv[1:], cwd=folder)
        assert r.returncode == 1, (argv, r.stderr)
        assert r.stderr.startswith(expected), (argv, r.stderr)
        assert "the samples are stacked on each tensor's `batch` axis" in r.stderr
    (folder / "t.psk").write_text(PROGRAM.format(schedule="constant", **PAIRED))
    assert presk("check", "t.psk", cwd=folder).returncode == 0


def test_native_training_computes_each_rate_when_its_step_runs(monkeypatch, tmp_path):
    from presk_ad.step import Trainer
    from presk_cli import native_train
    from presk_cli.main import main

    rates, seen = [], []
    lr, step = Trainer.lr, native_train.NativeTrainer.step

    def counted_lr(self, t):
        rates.append(t)
        return lr(self, t)

    def watched_step(self, batch, t, rate):
        seen.append((t, len(rates)))
        return step(self, batch, t, rate)

    monkeypatch.setattr(Trainer, "lr", counted_lr)
    monkeypatch.setattr(native_train.NativeTrainer, "step", watched_step)
    argv = ["train", str(ROOT / "tutorial" / "07_train.psk"), "--steps", "1000",
            "--log-every", "0", "--ckpt", str(tmp_path), "--backend", "kernel"]  # fmt: skip

    class Enough(KeyboardInterrupt):
        pass

    def stop_at_3(self, batch, t, rate):
        if t > 3:
            raise Enough()
        return watched_step(self, batch, t, rate)

    monkeypatch.setattr(native_train.NativeTrainer, "step", stop_at_3)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    with pytest.raises(SystemExit) as stopped:  # in step 4, as a Ctrl-C would
        main(argv)
    assert stopped.value.code == 130
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask  # the caller's mask back
    assert seen == [(1, 1), (2, 2), (3, 3)]  # step t ran after t rates, not 1000
