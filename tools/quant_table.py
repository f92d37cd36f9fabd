"""Integer weights at the course's scale (spec L847, `make quant-table`; docs/precision.md,
"Quantised weights"): the course GPT's loss (corpus/nlp/05_gpt.psk at a reduced width, on
the first window of the corpus, weights trained `--steps` natively in f32) quantised per scheme — every parameter in int8, then in
int4 (per-channel scales; a vector one scale) — and the gap to the exact
reference in its two parts (`presk quantize`: the weights' rounding, the arithmetic, the
total), with the bytes at rest, under an f32 and a bf16 default. The integers are computed
in the kernels (natively). One table; skips with one line where the corpus is absent.

    .venv/bin/python tools/quant_table.py [--consts D=16,H=2,L=1] [--batch 2]
"""

from __future__ import annotations

import argparse
import json
import re
import sys

import corpus_tool
from corpus_tool import GPT, ROOT, absent

DATA = "corpus/nlp/data/civil_T32.psk.d"


def run(*args: str) -> str:
    return corpus_tool.run(*args, echo=False)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--consts", default="D=16,H=2,L=1", help="the GPT's constants")
    p.add_argument("--batch", type=int, default=2, help="the envelope's batch B")
    p.add_argument("--steps", type=int, default=100, help="training steps of the weights")
    p.add_argument("--out", default="out/quant_table")
    a = p.parse_args()
    if absent("quant-table", DATA):
        return 0
    consts = [x for kv in a.consts.split(",") if kv for x in ("--const", kv)]
    out = ROOT / a.out
    out.mkdir(parents=True, exist_ok=True)
    # trained weights: at the initializers the head is zero and the loss log V whatever the
    # other weights are, so that no rounding would show
    ckpt = out / "ckpt"
    run("train", GPT, *consts, "--data", DATA, "--backend", "native", "--realize", "f32",
        "--steps", str(a.steps), "--log-every", str(max(a.steps // 4, 1)), "--ckpt", str(ckpt))  # fmt: skip
    env = out / "env.json"
    run("calibrate", "--precision", GPT, *consts, "--entry", "loss", "--dim", f"B={a.batch}",
        "--dim", "T=32", "--data", DATA, "--bits", "128", "--weights",
        str(ckpt / "final.psk.d"), "--out", str(env))  # fmt: skip
    inputs = json.loads(env.read_text())["inputs"]
    paths = [k.partition(".")[2] for k in inputs if k.startswith("θ.")]  # every parameter
    rows = []
    for default in ("f32", "bf16"):
        for scheme in ("int8", "int4"):
            r = out / f"{default}_{scheme}.json"
            doc = {"presk": "realization", "version": 1, "default": default,
                   "quant": {m: scheme for m in paths}}  # fmt: skip
            r.write_text(json.dumps(doc, ensure_ascii=False))
            text = run("quantize", GPT, *consts, "--precision", str(env), "--realize", f"@{r}",
                       "--backend", "native")  # fmt: skip
            part = {
                k: re.search(rf"^  {k} +(\S+) \((\S+) relative\)", text, re.M).groups()
                for k in ("rounding", "arithmetic", "total")
            }
            at_rest = re.search(r"^  weights +(\S+) bytes at rest against (\S+)", text, re.M)
            rows.append((default, scheme, at_rest.groups(), part))
    print(f"\nthe course GPT's loss at {a.consts}, B={a.batch}, T=32, trained {a.steps} steps,"
          " every parameter quantised"
          f" ({len(paths)} of them), the integers in the kernels (natively)")  # fmt: skip
    print(f"{'default':<9}{'scheme':<8}{'bytes':>12}{'f64 bytes':>12}"
          f"{'rounding':>12}{'arithmetic':>12}{'total':>12}{'relative':>11}")  # fmt: skip
    for default, scheme, (b, f64), part in rows:
        print(f"{default:<9}{scheme:<8}{b:>12}{f64:>12}{part['rounding'][0]:>12}"
              f"{part['arithmetic'][0]:>12}{part['total'][0]:>12}{part['total'][1]:>11}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
