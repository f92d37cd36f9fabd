"""Step 16 at the course's scale (spec L847, L1003): statement J′ (`make j-step`) and the
trajectory under a solved step (`make step-train`), on the course GPT (corpus/nlp/05_gpt.psk)
scaled to this 2-core machine (a reduced width, windows of 32 characters, few steps).

- `j-step`: the step calibrated (f64) after a warm-up to the peak rate, solved under
  `--budget` (bytes, or the predicted seconds of `--profile`), the solved realization's
  update gap measured again from the same state (`calibrate --step --realize @solved`), and
  the step timed natively under all-f64 and under the solved realization, interleaved
  (`presk train --steps N`, its median a step, `--rounds` times each, alternating). J′ holds
  when the solved step is faster than all-f64 and its measured gap is inside the budget.
- `step-train`: the model trained `--train-steps` steps natively under the solved
  realization, under all-f64, and under all-f64 from another seed; `presk data diff` of the
  solved run's weights and of the other seed's against the f64 run's (spec L994–L999).

The machine is loaded by other jobs while this runs: the times are ratios of medians taken
interleaved, not times. Skips with one line where the corpus or its windows are absent.

    .venv/bin/python tools/step_budget_gpt.py j-step|step-train [--consts D=32,H=2,L=2] …
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

import corpus_tool
from corpus_tool import GPT, ROOT, absent

DATA = "corpus/nlp/data/civil_T32.psk.d"


def run(*args: str, quiet: bool = False) -> str:
    return corpus_tool.run(*args, echo=not quiet)


def solved(a, consts: list[str], out: Path) -> tuple[Path, Path, float]:
    """(the calibration, the solved realization, its update gap measured again)."""
    step = out / "step.json"
    common = [GPT, *consts, "--data", DATA]
    cal = ["--warmup", str(a.warmup), "--samples", str(a.samples)]
    run("calibrate", "--step", *common, *cal, "--realize", "f64", "--out", str(step))
    r = out / "solved.json"
    profile = ["--profile", a.profile] if a.profile else []
    run(
        "solve",
        "--step",
        GPT,
        *consts,
        "--precision",
        str(step),
        "--budget",
        a.budget,
        "--out",
        str(r),
        *profile,
    )  # fmt: skip  (the data file is the calibration's)
    again = run("calibrate", "--step", *common, *cal, "--realize", f"@{r}",
                "--out", str(out / "again.json"))  # fmt: skip
    row = next(x for x in again.splitlines() if x.startswith("@"))
    return step, r, float(row.split()[1])


MS = re.compile(r"presk train: ([\d.]+) ms a step")


def j_step(a, consts: list[str], out: Path) -> int:
    _, r, gap = solved(a, consts, out)
    times: dict[str, list[float]] = {"f64": [], f"@{r}": []}
    for _ in range(a.rounds):  # interleaved: the load falls on both sides alike
        for realize in times:
            text = run("train", GPT, *consts, "--data", DATA, "--steps", str(a.time_steps),
                       "--log-every", "0", "--backend", "native", "--realize", realize,
                       "--ckpt", str(out / "timing"), quiet=True)  # fmt: skip
            times[realize].append(float(MS.search(text).group(1)))
    f64, mine = (statistics.median(v) for v in times.values())
    budget = float(a.budget)
    print(f"\nJ′ at {a.consts} (machine loaded by other jobs: a ratio of medians, interleaved)")
    print(f"  all-f64        {f64:.3f} ms a step (median of {a.rounds} runs' medians)")
    print(f"  solved         {mine:.3f} ms a step: {f64 / mine:.2f}x all-f64")
    inside = gap <= budget
    print(f"  measured       {gap:.3e} update gap again from the state, budget {budget:.2e}:"
          f" {'inside' if inside else 'OUTSIDE'}")  # fmt: skip
    holds = inside and mine < f64
    print(
        f"  J′ {'holds' if holds else 'fails'} here (it asks: faster than all-f64, inside the budget)"
    )
    return 0


DIFF = re.compile(r"relative (\S+)")


def step_train(a, consts: list[str], out: Path) -> int:
    _, r, gap = solved(a, consts, out)
    common = [GPT, *consts, "--data", DATA, "--steps", str(a.train_steps),
              "--log-every", str(max(a.train_steps // 5, 1)), "--backend", "native"]  # fmt: skip
    run("train", *common, "--realize", f"@{r}", "--ckpt", str(out / "ckpt_solved"))
    run("train", *common, "--realize", "f64", "--ckpt", str(out / "ckpt_f64"))
    run("train", *common, "--realize", "f64", "--seed", "1", "--ckpt", str(out / "ckpt_seed1"))
    f64 = str(out / "ckpt_f64" / "final.psk.d")
    near = run("data", "diff", f64, str(out / "ckpt_solved" / "final.psk.d"))
    far = run("data", "diff", f64, str(out / "ckpt_seed1" / "final.psk.d"))
    x, y = (float(DIFF.search(t).group(1)) for t in (near, far))
    print(f"\nthe solved step's run ends {x:.3e} from the f64 run's (relative), another seed"
          f" {y:.3e}: {y / x:.3g} times closer (the step measured {gap:.3e} against its"
          f" budget {float(a.budget):.2e})")  # fmt: skip
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["j-step", "step-train"])
    p.add_argument("--consts", default="D=32,H=2,L=2", help="the GPT's constants")
    p.add_argument("--warmup", type=int, default=100, help="native f64 steps before the state")
    p.add_argument("--samples", type=int, default=4, help="the measured batch")
    p.add_argument("--budget", default="1e-3")
    p.add_argument("--profile", help="solve by this machine profile's predicted seconds")
    p.add_argument("--time-steps", type=int, default=20, help="j-step: steps of each timing run")
    p.add_argument("--rounds", type=int, default=3, help="j-step: timing runs of each side")
    p.add_argument("--train-steps", type=int, default=100, help="step-train: steps of each run")
    p.add_argument("--out", default="out/step_gpt")
    a = p.parse_args()
    if absent(a.mode, DATA):
        return 0
    consts = [x for kv in a.consts.split(",") if kv for x in ("--const", kv)]
    out = ROOT / a.out / a.mode
    out.mkdir(parents=True, exist_ok=True)
    return (j_step if a.mode == "j-step" else step_train)(a, consts, out)


if __name__ == "__main__":
    sys.exit(main())
