"""The step time of the tutorial's training run (07_train.psk: the tower, batches of 8) on
the reference interpreter (`presk train`, 256 bits) and in PyTorch (the exported train.py,
float32), side by side.

    .venv/bin/python tools/bench_train.py [--steps N] [--threads T] [--pairs P] [--cpu]
                                          [--minigpt N]

Each number is the median step time the loop itself prints (the first step, which pays for
warm-ups, left out). The two loops run one after the other, each in its own process, so
that neither slows the other; the export (`--conformance-entry train:1`) and the weights
go to a temporary folder. Both include making the batch, the loss and its gradient, and
the AdamW step.

With `--pairs P` the two loops run P times each, alternately (presk, train.py, presk, …),
and the figures are the medians over the pairs: the ratio is the median of the P pairs'
ratios, each pair's two loops having run back to back under the same load. With `--cpu`
each loop times its steps in process time (`time.perf_counter` replaced by
`time.process_time` before it starts), every thread's: a figure that others' load moves
less, though torch's CPU time is not its wall time. With `--minigpt N`, also the median
of N steps of tiny MiniGPT on the interpreter (`make train-examples`'s second run: V=64,
D=16, H=2, L=2, windows of 8).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import median_step, run_checked  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "tutorial" / "07_train.psk"
MINIGPT = ROOT / "tests" / "examples" / "minigpt"
TINY = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]
PRESK = [sys.executable, "-m", "presk_cli.main"]
CPU = "import sys, time; time.perf_counter = time.process_time; sys.argv[0] = 'x'; "


def _run(cmd: list[str], cwd: Path, env: dict | None = None) -> str:
    return run_checked("bench_train", cmd, cwd, env)


def _median(out: str) -> float:
    return median_step("bench_train", out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="steps of each loop (100)")
    parser.add_argument("--threads", type=int, help="torch's threads for train.py")
    parser.add_argument("--pairs", type=int, default=1, help="runs of each loop, alternating (1)")
    parser.add_argument("--minigpt", type=int, default=0, help="steps of tiny MiniGPT (0: none)")
    parser.add_argument("--cpu", action="store_true", help="time the steps in process time")
    args = parser.parse_args()
    presk_cmd, python = PRESK, [sys.executable]
    if args.cpu:
        presk_cmd = [sys.executable, "-c", CPU + "from presk_cli.main import main; main()"]
        python = [
            sys.executable,
            "-c",
            CPU + "sys.argv.pop(1); import runpy; runpy.run_path('train.py', run_name='__main__')",
        ]
    steps = ["--steps", str(args.steps), "--log-every", "0"]
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        folder = Path(tmp)
        export = folder / "export"
        _run(
            [*PRESK, "export", str(RUN), "--target", "pytorch"]
            + ["--conformance-entry", "train:1", "-o", str(export)],
            ROOT,
        )
        threads = ["--threads", str(args.threads)] if args.threads else []
        pairs = []
        for _ in range(max(1, args.pairs)):
            out = _run(
                [*presk_cmd, "train", str(RUN), *steps, "--ckpt", str(folder / "presk")], ROOT
            )
            presk = _median(out)
            out = _run(
                [*python, "train.py", *steps, *threads, "--ckpt", str(folder / "torch")], export
            )
            pairs.append((presk, _median(out)))
        header = out.splitlines()[0].removeprefix("train.py: ")
        presk = statistics.median(p for p, _ in pairs)
        torch = statistics.median(t for _, t in pairs)
        ratio = statistics.median(p / t for p, t in pairs)
        minigpt = None
        if args.minigpt:
            data = ["--data", str(MINIGPT / "data" / "tiny_T8.psk.d")]
            steps = ["--steps", str(args.minigpt), "--log-every", "0"]
            cmd = [*PRESK, "train", str(MINIGPT / "train_minigpt.psk"), *TINY, *data, *steps]
            minigpt = _median(_run([*cmd, "--ckpt", str(folder / "minigpt")], ROOT))
    rows = [("presk train (interpreter, 256 bits)", presk), (f"train.py ({header})", torch)]
    width = max(len(label) for label, _ in rows)
    over = f", the median of {len(pairs)} pairs" if len(pairs) > 1 else ""
    over += " (process time)" if args.cpu else ""
    print(f"07_train.psk (Tower, batches of 8), {args.steps} steps: the median step{over}")
    for label, ms in rows:
        print(f"  {label:<{width}}  {ms:7.1f} ms")
    print(f"  {'the interpreter / train.py':<{width}}  {ratio:7.1f}")
    if len(pairs) > 1:
        each = ", ".join(f"{p:.1f}/{t:.1f}" for p, t in pairs)
        print(f"  pairs (ms): {each}")
    if minigpt is not None:
        print(f"tiny MiniGPT (V=64, D=16, H=2, L=2, T=8), {args.minigpt} steps: the median step")
        print(f"  {'presk train (interpreter, 256 bits)':<{width}}  {minigpt:7.1f} ms")


if __name__ == "__main__":
    main()
