"""`presk train` on the tutorial's tower, and AdamW against an independent float64 version."""

import os
import re
import subprocess
from pathlib import Path

import gmpy2
import numpy as np
import pytest
from presk_core import mpfr as M
from presk_core.interp import Interpreter

ROOT = Path(__file__).resolve().parents[2]
PRESK = ROOT / ".venv" / "bin" / "presk"
LINE = re.compile(
    r"^step (\d+)  epoch (\d+)  loss (\d+\.\d{6})  lr (\d\.\d{3}e-?\d+)  \|g\| (\d\.\d{4}e-?\d+)$"
)


def test_the_tower_learns(tmp_path):
    r = subprocess.run(
        [str(PRESK), "train", "tutorial/07_train.psk", "--steps", "40", "--log-every", "10",
         "--ckpt", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    logs = [LINE.match(line) for line in lines[:4]]
    assert all(logs), lines
    assert [int(m.group(1)) for m in logs] == [10, 20, 30, 40]
    assert [int(m.group(2)) for m in logs] == [1, 2, 2, 3]  # 16 batches of 8 an epoch
    losses = [float(m.group(3)) for m in logs]
    assert losses[-1] < losses[0] / 2
    assert logs[1].group(4) == "1.000e-2"  # the end of the warm-up: the peak rate
    assert re.fullmatch(
        r"presk train: \d+\.\d ms a step, median of 39 \(the first excluded\)", lines[4]
    )
    assert lines[5] == (
        f"presk train: 40 steps of Tower, final loss {logs[-1].group(3)}, weights in"
        f" {tmp_path / 'final.psk.d'}"
    )
    info = subprocess.run([str(PRESK), "data", "info", str(tmp_path / "final.psk.d")],
                          capture_output=True, text=True)  # fmt: skip
    assert "type    params Tower" in info.stdout and "76 reals" in info.stdout


def _optimizer(lr="0.01", wd="0.0", warmup=20):
    from presk_core.ir import Program
    from presk_core.optim import AdamW, lr_function, step_function
    from presk_types.presburger import Lin
    from presk_types.types import AxisT, Instance, ParamsT, Real, Shape

    opt = AdamW(lr=lr, weight_decay=wd, warmup=warmup)
    tree = ParamsT(Instance("t:M", "M", ()))
    leaves = [
        ("w", Real(Shape(False, (AxisT(None, Lin.const(3)), AxisT(None, Lin.const(2)))))),
        ("b", Real(Shape(False, (AxisT(None, Lin.const(2)),)))),
    ]
    return Interpreter(Program((lr_function(opt), step_function(opt, tree, leaves, ()))), 256)


def test_the_cosine_schedule_is_the_specifications():
    interp = _optimizer()
    with M.precision(256):
        args = [[M.real(t), M.real(100)] for t in (20, 40, 60, 80, 100)]
    shown = [f"{float(interp.run('adamw.lr', a, {}).item()):.3e}" for a in args]
    assert shown == ["1.000e-02", "8.536e-03", "5.000e-03", "1.464e-03", "0.000e+00"]


def test_adamw_equals_a_float64_adamw_over_twenty_steps():
    rng = np.random.default_rng(0)
    theta0 = {"w": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}
    grads = [{k: rng.normal(size=v.shape) for k, v in theta0.items()} for _ in range(20)]
    interp = _optimizer(wd="0.1", warmup=5)
    # presk's: adamw.lr and adamw.step, PSK-Core, at 256 bits
    with M.precision(256):
        theta = {k: M.real(v) for k, v in theta0.items()}
        m = {k: M.zeros(v.shape) for k, v in theta0.items()}
        v = {k: M.zeros(v.shape) for k, v in theta0.items()}
        steps = [(M.real(t), M.real(20)) for t in range(1, 21)]
        gms = [{k: M.real(x) for k, x in g.items()} for g in grads]
    rates = []
    for (t, total), g in zip(steps, gms, strict=True):
        lr = interp.run("adamw.lr", [t, total], {})
        rates.append(float(lr.item()))
        theta, m, v = interp.run("adamw.step", [theta, m, v, g, t, lr], {})
    # PyTorch's algorithm (torch.optim.AdamW), written here in float64
    ref = {k: x.copy() for k, x in theta0.items()}
    mf = {k: np.zeros_like(x) for k, x in theta0.items()}
    vf = {k: np.zeros_like(x) for k, x in theta0.items()}
    for t, (g, lr) in enumerate(zip(grads, rates, strict=True), start=1):
        for k in ref:
            ref[k] *= 1 - lr * 0.1
            mf[k] = 0.9 * mf[k] + 0.1 * g[k]
            vf[k] = 0.999 * vf[k] + 0.001 * g[k] ** 2
            m_hat, v_hat = mf[k] / (1 - 0.9**t), vf[k] / (1 - 0.999**t)
            ref[k] -= lr * m_hat / (np.sqrt(v_hat) + 1e-8)
    for k in ref:
        got = np.asarray(theta[k], dtype=object).astype(float)
        np.testing.assert_allclose(got, ref[k], rtol=1e-12)
    assert isinstance(theta["w"].flat[0], type(gmpy2.mpfr(0)))


def test_a_file_without_a_training_run():
    r = subprocess.run([str(PRESK), "train", "tutorial/01_linear.psk"], cwd=ROOT,
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 2 and "has no `training run`" in r.stderr


def test_the_optimizer_is_psk_core():
    r = subprocess.run(
        [str(PRESK), "dump", "tutorial/07_train.psk", "--stage", "core"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    heads = [line for line in r.stdout.splitlines() if line.startswith("fn adamw")]
    assert heads == [
        "fn adamw.lr(t : ℝ[], T : ℝ[]) -> ℝ[] {",
        "fn adamw.step(θ : params Tower, m : params Tower, v : params Tower, g : params Tower,"
        " t : ℝ[], lr : ℝ[]) -> (params Tower, params Tower, params Tower) {",
    ]


def test_a_step_is_one_call_of_the_value_vjp(tmp_path, monkeypatch):
    """Each step runs the objective's loss and gradient in one call of the interpreter
    (`loss.train_value_grad`, which calls the generated `value_vjp` once: one forward pass,
    `loss.train.fwd`), then the optimizer; the loss it logs is that call's."""
    from collections import Counter

    from presk_cli.train import train
    from presk_core.data import read_header
    from presk_core.lower import lower_program
    from presk_types.driver import check_file

    checked = check_file(
        str(ROOT / "tutorial" / "07_train.psk"),
        data_header=lambda path: read_header(path).type_text,
    )
    runs, calls = Counter(), Counter()
    run, call = Interpreter.run, Interpreter.call

    def counting_run(self, name, args, dims):
        runs[name] += 1
        return run(self, name, args, dims)

    def counting_call(self, name, args, dims):
        calls[name] += 1
        return call(self, name, args, dims)

    monkeypatch.setattr(Interpreter, "run", counting_run)
    monkeypatch.setattr(Interpreter, "call", counting_call)
    lines = []
    core = lower_program(checked.program)
    folder = str(ROOT / "tutorial")  # the core program's run, its data file opened by the trainer
    train(core, core.trainings[0], folder, 3, 1, str(tmp_path), 0, 256, lines.append)
    steps = {"loss.train_value_grad": 3, "adamw.lr": 3, "adamw.step": 3}
    assert {k: n for k, n in runs.items() if k in steps or k.startswith("loss")} == steps
    assert calls["loss.train.value_vjp"] == 3 and calls["loss.train.fwd"] == 3
    assert calls["loss.train"] == calls["loss"] == calls["loss.train.vjp"] == 0
    assert all(LINE.match(line) for line in lines[:3]), lines


@pytest.mark.parametrize("backend", ["interp", "native"])
def test_a_nan_in_the_data_stops_the_run_at_its_step(tmp_path, backend):
    from presk_core import data as D
    from presk_core import random as R

    for path in (ROOT / "tutorial").glob("*.psk"):
        text = path.read_text()
        (tmp_path / path.name).write_text(text.replace("every 50 steps", "every 2 steps"))
    (tmp_path / "data").mkdir()
    source = ROOT / "tutorial" / "data" / "pairs.psk.d"
    type_text = D.read_header(str(source)).type_text
    t = D.type_of(type_text)
    samples = D.read(str(source), t)
    bad = int(R.permutation(3, 0, len(samples))[4 * 8 + 3])  # in the batch of step 5
    samples[bad][0] = np.array(samples[bad][0], dtype=np.float64)
    samples[bad][0][1] = np.nan
    D.write(str(tmp_path / "data" / "pairs.psk.d"), type_text, t, samples)
    r = subprocess.run(
        [str(PRESK), "train", "07_train.psk", "--steps", "8", "--ckpt", "ck", "--backend", backend],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert "[E7008]" in r.stderr and "step 5 (samples " in r.stderr, r.stderr
    assert f"{bad}" in r.stderr and "not finite" in r.stderr and "Traceback" not in r.stderr
    ck = tmp_path / "ck"
    assert sorted(os.listdir(ck)) == ["step_2.psk.d", "step_4.psk.d"]
    assert np.isfinite(D.read_reals(str(ck / "step_4.psk.d"))).all()


def test_a_gradient_not_finite_stops_the_step():
    from presk_ad.step import TrainError, finite

    with M.precision(64):
        loss = M.real(np.float64(0.5))
    w = np.array([gmpy2.mpfr(1), gmpy2.mpfr("inf"), gmpy2.mpfr("nan")], dtype=object)
    finite(3, [0, 1], loss, {"w": M.real(np.array([1.0]))})  # finite: no error
    with pytest.raises(
        TrainError, match=r"step 3 \(samples 0, 1\): the gradient of `w` holds 2 of 3"
    ):
        finite(3, [0, 1], loss, {"w": w})
