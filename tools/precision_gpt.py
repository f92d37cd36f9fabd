"""`make precision`: step 15 at the course's scale (docs/precision.md, "At course scale").

The course GPT (corpus/nlp/05_gpt.psk) at a width this 2-core machine's exact interpreter
can afford (--const D=32 H=2 L=2 by default, windows of T = 32 characters), trained a few
hundred steps natively in f32 (the checkpoint the target makes), then on its loss:

1. `presk calibrate --precision` at the trained weights, on windows of the data;
2. `presk check --precision` under f64, f32 and bf16 (a refused bound is printed as such);
3. the sensitivities at those weights and windows, from one reverse sweep
   (presk_ad.sensitivity), the largest;
4. `presk solve` under a budget, the realization measured against the exact reference.

Without ../shared/data/civil.md (the corpus), one line and nothing done.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from corpus_tool import GPT, ROOT, absent, run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--consts", default="D=32,H=2,L=2", help="the GPT's constants")
    p.add_argument("--seq", type=int, default=32, help="the windows' length T (32 or 256)")
    p.add_argument("--batch", type=int, default=2, help="the envelope's batch B")
    p.add_argument("--steps", type=int, default=200, help="training steps of the checkpoint")
    p.add_argument("--samples", type=int, default=1, help="the envelope's windows")
    p.add_argument("--budget", default="1e-3")
    p.add_argument("--out", default="out/precision_gpt")
    a = p.parse_args()
    data = f"corpus/nlp/data/civil_T{a.seq}.psk.d"
    if absent("precision", data):
        return 0
    consts = [x for kv in a.consts.split(",") if kv for x in ("--const", kv)]
    out = ROOT / a.out
    out.mkdir(parents=True, exist_ok=True)
    ckpt = out / "final.psk.d"
    if not ckpt.exists():
        run("train", GPT, *consts, "--data", data, "--backend", "native", "--realize", "f32",
            "--steps", str(a.steps), "--log-every", str(max(a.steps // 4, 1)),
            "--ckpt", str(out))  # fmt: skip
    else:
        print(f"precision: {ckpt} is there (rm it to train again)")
    env = out / "env.json"
    dims = ("--dim", f"B={a.batch}", "--dim", f"T={a.seq}")
    run("calibrate", "--precision", GPT, *consts, "--entry", "loss", *dims, "--bits", "128",
        "--weights", str(ckpt), "--data", data, "--samples", str(a.samples),
        "--out", str(env))  # fmt: skip
    for t in ("f64", "f32", "bf16"):
        run("check", "--precision", str(env), GPT, *consts, "--realize", t, check=False)
    sensitivities(consts, env)
    solved = out / "solved.json"
    run("solve", GPT, *consts, "--precision", str(env), "--budget", a.budget,
        "--out", str(solved), "--sites", "12")  # fmt: skip
    return 0


def sensitivities(consts: list[str], env: Path, top: int = 12) -> None:
    """The table of `presk dump --stage sensitivity`, at the envelope's weights and first
    window (the pass itself draws inputs and initial weights)."""
    from presk_ad.sensitivity import reverse_sensitivities
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_cli.precision import sample_inputs
    from presk_core.envelope import Envelope
    from presk_core.run import parse_entry
    from presk_core.sensitivity import format_sensitivities
    from presk_syntax.pipeline import Context

    given = dict(kv.split("=") for kv in consts[1::2])
    core = PIPELINE.run(RUN, str(ROOT / GPT), Context(consts=given))
    e = Envelope.read(str(env))
    entry = parse_entry(e.entry, core, None, dict(e.dims))
    inputs = sample_inputs(core, entry, e.seed, 256, e.weights, dict(e.dims), e.data, 1)
    t = time.monotonic()
    found, sweeps = reverse_sensitivities(core, entry, [v for _, _, v in inputs(0)])
    text = format_sensitivities(
        entry, found, "one reverse sweep" if sweeps == 1 else f"{sweeps} sweeps"
    )
    lines = text.splitlines()
    print(f"$ (sensitivities at {e.weights} on window 0 of {e.data})")
    print("\n".join(lines[: top + 2]) + f"\n  … ({len(found)} sites, {time.monotonic() - t:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
