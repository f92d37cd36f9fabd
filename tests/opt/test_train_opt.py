"""`presk train --opt`: the training step through core-opt logs the same lines and writes
the same weights, byte for byte, on the reference interpreter; natively, the same lines and
weights within an ulp (constant folding), byte for byte without folding."""

import re
import subprocess
from pathlib import Path

import numpy as np
from helpers import presk
from presk_core.data import read_reals

ROOT = Path(__file__).resolve().parents[2]


def _train(tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    args = ("--steps", "10", "--log-every", "5", "--ckpt", tmp, *extra)
    return presk("train", "tutorial/07_train.psk", *args, env={"PRESK_VERIFY": "1"})


def test_train_opt_logs_and_writes_the_same(tmp_path: Path) -> None:
    plain, opt = _train(tmp_path / "plain"), _train(tmp_path / "opt", "--opt")
    assert plain.returncode == 0 and opt.returncode == 0, opt.stderr
    assert plain.stdout.splitlines()[:2] == opt.stdout.splitlines()[:2]
    a = (tmp_path / "plain" / "final.psk.d").read_bytes()
    assert a == (tmp_path / "opt" / "final.psk.d").read_bytes()
    first = opt.stderr.splitlines()[0]
    assert re.fullmatch(r"presk-opt: [1-9]\d* of \d+ functions rewritten, .*", first)
    assert "  Linear.apply.bwd: 9 → 9 lets, cost 6 → 5 " in opt.stderr  # puts summed: a record


def _steps(r: subprocess.CompletedProcess) -> list[str]:
    return [line for line in r.stdout.splitlines() if line.startswith("step ")]


def test_train_opt_natively_logs_the_same_and_writes_weights_a_few_ulps_apart(tmp_path) -> None:
    """--opt --backend native: the rewritten step lowered to kernels. Constant folding
    rounds `1 - 0.9` once (1/10) where the kernels round 0.9, then the difference: AdamW's
    1 − β differs in its last bit, and so do the updates: the weights (of order 1) differ
    by at most 2⁻⁵³ after ten steps, checked at four ulps of max(1, |w|) (a tolerance
    measured, not a bound: docs/optimizer.md, "Natively"); the logged digits are the same."""
    plain = _train(tmp_path / "plain", "--backend", "native")
    opt = _train(tmp_path / "opt", "--opt", "--backend", "native")
    assert plain.returncode == 0 and opt.returncode == 0, opt.stderr
    assert _steps(plain) == _steps(opt) and len(_steps(opt)) == 2
    assert re.match(r"presk-opt: [1-9]\d* of \d+ functions rewritten, ", opt.stderr)
    a = read_reals(str(tmp_path / "plain" / "final.psk.d"))
    b = read_reals(str(tmp_path / "opt" / "final.psk.d"))
    assert a.shape == b.shape and (a != b).any()
    scale = np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
    assert (np.abs(a - b) <= 4 * np.spacing(scale)).all()


def test_the_bitwise_rules_write_the_same_weights_natively(tmp_path: Path) -> None:
    """The rules --opt uses on the step but constant folding (records of u + 0, `x ^ 1`,
    `x ^ 2 = x · x`: the kernels' pow 2 is one rounded product) give the same weights
    natively, byte for byte."""
    from presk_cli.native_train import train_native
    from presk_cli.pipeline import run_pipeline
    from presk_opt.optimize import optimize
    from presk_opt.rules import RULES, rewrites
    from presk_syntax.pipeline import Context

    bitwise = rewrites([r for r in RULES if r.name != "constant folding"], "bitwise")
    used: set[str] = set()

    def rewrite(program):
        out, _ = optimize(program, rules=bitwise)
        body = [i for f in out.functions for i in f.body]
        used.update(i.origin.rule for i in body if i.origin)
        pow1 = [
            i for f in program.functions for i in f.body if i.op == "pow" and str(i.args[1]) == "1"
        ]
        if pow1 and not [i for i in body if i.op == "pow" and str(i.args[1]) == "1"]:
            used.add("x ^ 1 = x")  # what it removed has no origin
        return out

    core = run_pipeline("core", str(ROOT / "tutorial" / "07_train.psk"), Context(consts={}))
    folder = str(ROOT / "tutorial")
    for name, rw in (("plain", None), ("opt", rewrite)):
        options = ("native", "f64", 1)
        train_native(core, core.trainings[0], folder, 10, 5, str(tmp_path / name), 0, 256,
                     lambda _: None, options, rw)  # fmt: skip
    assert {"puts of zeros summed = record", "x ^ 1 = x", "x ^ 2 = x · x"} <= used
    a = (tmp_path / "plain" / "final.psk.d").read_bytes()
    assert a == (tmp_path / "opt" / "final.psk.d").read_bytes()
