"""`presk train --opt`: the training step through core-opt logs the same lines and writes
the same weights, byte for byte; the report on standard error."""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PRESK = ROOT / ".venv" / "bin" / "presk"


def _train(tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PRESK), "train", "tutorial/07_train.psk", "--steps", "10", "--log-every", "5",
         "--ckpt", str(tmp), *extra],
        cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "NO_COLOR": "1", "PRESK_VERIFY": "1"},
    )  # fmt: skip


def test_train_opt_logs_and_writes_the_same(tmp_path: Path) -> None:
    plain, opt = _train(tmp_path / "plain"), _train(tmp_path / "opt", "--opt")
    assert plain.returncode == 0 and opt.returncode == 0, opt.stderr
    assert plain.stdout.splitlines()[:2] == opt.stdout.splitlines()[:2]
    a = (tmp_path / "plain" / "final.psk.d").read_bytes()
    assert a == (tmp_path / "opt" / "final.psk.d").read_bytes()
    first = opt.stderr.splitlines()[0]
    assert re.fullmatch(r"presk-opt: [1-9]\d* of \d+ functions rewritten, .*", first)
    assert "  Linear.apply.bwd: 9 → 9 lets, cost 6 → 5 " in opt.stderr  # puts summed: a record


def test_train_opt_with_a_native_backend_is_a_usage_error(tmp_path: Path) -> None:
    r = _train(tmp_path, "--opt", "--backend", "native")
    assert r.returncode == 2
    assert r.stderr == "presk train: --opt runs on the reference interpreter\n"
