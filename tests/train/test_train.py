"""`presk train` on the tutorial's tower, and AdamW against an independent float64 version."""

import os
import re
import subprocess
from pathlib import Path

import gmpy2
import numpy as np
from presk_cli.train import AdamW, _adamw
from presk_core import mpfr as M

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


def test_the_cosine_schedule_is_the_specifications():
    opt = AdamW(lr=0.01, weight_decay=0.0, warmup=20)
    shown = [f"{float(opt.rate(t, 100)):.3e}" for t in (20, 40, 60, 80, 100)]
    assert shown == ["1.000e-02", "8.536e-03", "5.000e-03", "1.464e-03", "0.000e+00"]


def test_adamw_equals_a_float64_adamw_over_twenty_steps():
    rng = np.random.default_rng(0)
    theta0 = {"w": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}
    grads = [{k: rng.normal(size=v.shape) for k, v in theta0.items()} for _ in range(20)]
    opt = AdamW(lr=0.01, weight_decay=0.1, warmup=5)
    # presk's, in MPFR at 256 bits
    with M.precision(256):
        theta = {k: M.real(v) for k, v in theta0.items()}
        m = {k: M.zeros(v.shape) for k, v in theta0.items()}
        v = {k: M.zeros(v.shape) for k, v in theta0.items()}
        for t, g in enumerate(grads, start=1):
            gm = {k: M.real(x) for k, x in g.items()}
            theta, m, v = _adamw(opt, theta, m, v, gm, t, opt.rate(t, 20))
    # PyTorch's algorithm (torch.optim.AdamW), written here in float64
    ref = {k: x.copy() for k, x in theta0.items()}
    mf = {k: np.zeros_like(x) for k, x in theta0.items()}
    vf = {k: np.zeros_like(x) for k, x in theta0.items()}
    for t, g in enumerate(grads, start=1):
        lr = float(opt.rate(t, 20))
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
