"""`make opt-examples`: the e-graph optimizer on every example (docs/optimizer.md).

For each run (the tutorial's and the reference examples' entries, as tests/run and `make
run-examples` run them), `presk run` without and with `--opt`, on the reference interpreter
and natively (`--backend native`, f64): the optimizer's report once, then whether the
printed outputs are the same, byte for byte. Exits 1 if one differs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRESK = str(ROOT / ".venv" / "bin" / "presk")
TINY = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]
RUNS = [
    ["tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4"],
    ["tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2"],
    ["tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=2", "--seed", "1"],
    ["tutorial/07_train.psk", "--entry", "loss", "--dim", "B=8"],
    ["tests/examples/mlp/mlp.psk", "--entry", "mse", "--dim", "D=3", "--dim", "B=2"],
    ["tests/examples/mlp/mlp.psk", "--entry", "mse_grad", "--dim", "D=3", "--dim", "B=2"],
    ["tests/examples/minigpt/minigpt.psk", "--entry", "MiniGPT.apply", *TINY, "--dim", "B=2",
     "--dim", "T=8"],
    ["tests/examples/minigpt/train_minigpt.psk", "--entry", "loss", *TINY, "--dim", "B=2",
     "--dim", "T=8"],
    ["tests/examples/bert/bert.psk", "--entry", "MaskedLM.apply", "--const", "V=32", "--const",
     "D=8", "--const", "H=2", "--const", "L=2", "--dim", "B=1", "--dim", "T=4"],
    ["tests/examples/llama/llama.psk", "--entry", "block", "--const", "D=8", "--const", "H=2",
     "--const", "F=12", "--dim", "B=1", "--dim", "T=3"],
]  # fmt: skip


def run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([PRESK, "run", *args], cwd=ROOT, capture_output=True, text=True)


def main() -> int:
    bad = 0
    for args in RUNS:
        print(f"presk run {' '.join(args)} --opt", flush=True)
        for backend in ("interp", "native"):
            extra = [] if backend == "interp" else ["--backend", "native"]
            plain, opt = run([*args, *extra]), run([*args, *extra, "--opt"])
            if plain.returncode or opt.returncode:
                print(f"  {backend}: failed\n{plain.stderr}{opt.stderr}")
                bad += 1
                continue
            if backend == "interp":
                print("\n".join("  " + line for line in opt.stderr.splitlines()))
            same = plain.stdout == opt.stdout
            bad += not same
            print(f"  {backend}: {'the same output' if same else 'DIFFERENT output'}", flush=True)
    print(f"opt-examples: {len(RUNS)} runs, {bad} different or failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
