"""A tensor under presk's size limit that the machine cannot hold is E7011, not an internal
error (issue 16's fuzzer: `const D : nat = 2^31` in the tutorial's tower)."""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRESK = ROOT / ".venv" / "bin" / "presk"


def limited() -> None:  # 3 GB of address space: 2^30 doubles (8 GiB) cannot be allocated
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


def test_an_argument_too_large_for_the_machine_is_e7011(tmp_path):
    (tmp_path / "m.psk").write_text(
        "const D : nat = 2^30\n"
        "fn f(x : ℝ[model: D]) -> ℝ[] = sum(x)\n"
        "module M {\n  param w : ℝ[model: D] init = xavier_uniform\n"
        "  fn apply(x : ℝ[model: 2]) -> ℝ[model: 2] = x\n}\n"
        "fn g(θ : params M, x : ℝ[model: 2]) -> ℝ[model: 2] = M.apply(θ, x)\n"
    )
    for entry, message in (("f", "cannot synthesize `x`"), ("g", "needs more memory")):
        done = subprocess.run(
            [str(PRESK), "run", "m.psk", "--entry", entry],
            cwd=tmp_path, capture_output=True, text=True, preexec_fn=limited,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("[E7011]") and message in done.stderr, done.stderr
