"""The native backend's training step against PyTorch, and its compile time.

    .venv/bin/python tools/bench_native.py [--steps N] [--threads T] [--pairs P]

1. The tutorial's tower (07_train.psk, batches of 8): `presk train --backend native` in f64
   and f32 against the exported train.py (PyTorch eager, `--float64` or float32), with the
   same number of threads. Each number is the median step time the loop prints (the first
   step left out); the runs alternate, presk then PyTorch, `--pairs` times, and the ratio
   is the median of the pairs' ratios (presk's time over PyTorch's: below 1, presk is
   faster).
2. The compile time of the tiny MiniGPT's training step (train_minigpt.psk at V 64, D 16,
   H 2, L 2, T 8, B from its run; f32): its schedule lowered and fused first, then the C
   compiled and loaded into a fresh cache folder (cold), then, in another process, found
   in that folder (warm). The compiler's identity is probed before the clock starts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import median_step, run_checked  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "tutorial" / "07_train.psk"
GPT = ROOT / "tests" / "examples" / "minigpt" / "train_minigpt.psk"
GPT_DATA = ROOT / "tests" / "examples" / "minigpt" / "data" / "tiny_T8.psk.d"
TINY = {"V": "64", "D": "16", "H": "2", "L": "2"}
PRESK = [sys.executable, "-m", "presk_cli.main"]


def _run(cmd: list[str], cwd: Path, env: dict | None = None) -> str:
    return run_checked("bench_native", cmd, cwd, env)


def _median(out: str) -> float:
    return median_step("bench_native", out)


def tower(steps: int, threads: int, pairs: int) -> None:
    log = ["--steps", str(steps), "--log-every", "0"]
    with tempfile.TemporaryDirectory(prefix="bench-native-") as tmp:
        folder = Path(tmp)
        export = folder / "export"
        _run(
            [*PRESK, "export", str(RUN), "--target", "pytorch"]
            + ["--conformance-entry", "train:1", "-o", str(export)],
            ROOT,
        )
        print(f"07_train.psk (Tower, batches of 8), {steps} steps, {threads} thread(s):")
        print(f"  {'type':<5} {'presk native ms':>16} {'train.py ms':>12} {'ratio':>7}")
        for realize, flag in (("f64", ["--float64"]), ("f32", [])):
            ours, theirs, ratios = [], [], []
            for _ in range(pairs):
                out = _run(
                    [*PRESK, "train", str(RUN), *log, "--backend", "native", "--realize", realize]
                    + ["--threads", str(threads), "--ckpt", str(folder / "presk")],
                    ROOT,
                )
                a = _median(out)
                out = _run(
                    [sys.executable, "train.py", *log, *flag, "--threads", str(threads)]
                    + ["--ckpt", str(folder / "torch")],
                    export,
                )
                b = _median(out)
                ours.append(a)
                theirs.append(b)
                ratios.append(a / b)
            print(
                f"  {realize:<5} {statistics.median(ours):>16.3f}"
                f" {statistics.median(theirs):>12.3f} {statistics.median(ratios):>7.3f}"
            )


def compile_once() -> float:
    """Seconds to compile and load the tiny MiniGPT's native step (PRESK_CACHE: the caller's)."""
    from presk_ad.step import Trainer
    from presk_cback.toolchain import find_toolchain
    from presk_cli.commands import _held_type
    from presk_cli.native import compiled, lower
    from presk_cli.native_train import NATIVE_STEP, native_step
    from presk_cli.pipeline import run_pipeline
    from presk_core.run import stack_samples
    from presk_syntax.pipeline import Context
    from presk_types.training import replace_data

    ctx = Context(consts=dict(TINY), check=True)
    elaborated = run_pipeline("elab", str(GPT), ctx)
    program = elaborated.program
    problem = replace_data(elaborated.runs[0], program.main, str(GPT_DATA), _held_type)
    assert problem is None, problem
    core = run_pipeline("core", str(GPT), ctx, start=elaborated, first="elab")
    trainer = Trainer(core, core.trainings[0], str(GPT.parent), 0, 64, 1)
    step = native_step(trainer.interp.program, trainer.objective)
    batch = stack_samples(trainer.run.batch_type, trainer.samples[: trainer.batch_size])
    zero = np.zeros((), dtype=np.float64)
    args = [batch, trainer.theta, trainer.m, trainer.v, zero, zero]
    schedule = lower(step, NATIVE_STEP.format(trainer.objective), trainer.dims, args, "f32")
    find_toolchain()
    start = time.perf_counter()
    compiled(schedule)
    return time.perf_counter() - start


def compile_time() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-native-cache-") as cache:
        env = {"PRESK_CACHE": cache}
        cmd = [sys.executable, __file__, "--compile-once"]
        cold = float(_run(cmd, ROOT, env).strip())
        warm = float(_run(cmd, ROOT, env).strip())
        objects = sum(1 for _ in Path(cache).rglob("*.so"))
    print("tiny MiniGPT training step (V 64, D 16, H 2, L 2, T 8; f32), compile and load:")
    print(f"  cold (a fresh cache, {objects} object(s) written)  {cold:7.3f} s")
    print(f"  warm (found in the cache, another process)   {warm:7.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="steps of each loop (100)")
    parser.add_argument("--threads", type=int, default=1, help="threads of both loops (1)")
    parser.add_argument("--pairs", type=int, default=3, help="alternating runs of each (3)")
    parser.add_argument("--compile-once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compile_once:
        print(f"{compile_once():.6f}")
        return
    tower(args.steps, args.threads, args.pairs)
    compile_time()


if __name__ == "__main__":
    main()
