"""Integer weights natively (issue 22): the course GPT's forward pass (its `loss`) compiled
under a realization with every parameter in f32, and under the same with every parameter
quantised (int8 or int4 in i8, dequantised in the kernel that reads it), timed interleaved
(the two sides alternate, the median of each kept) and their weight bytes counted from the
schedules. Prints the ratio of the medians; the machine may be loaded: a ratio, not a time.

    .venv/bin/python tools/quant_native.py [--consts D=64,H=2,L=2] [--batch 4] [--seq 64]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GPT = "corpus/nlp/05_gpt.psk"


def main(argv=None) -> int:
    from presk_cli.native import compiled, entry_inputs, lower, storage
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_core.run import parse_entry
    from presk_kernel.lower import argument_leaves
    from presk_kernel.realization import parse_realization
    from presk_syntax.pipeline import Context

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--consts", default="D=64,H=2,L=2")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--scheme", default="int8", choices=["int8", "int4"])
    p.add_argument("--rounds", type=int, default=15)
    a = p.parse_args(argv)
    consts = dict(kv.split("=") for kv in a.consts.split(",") if kv)
    core = PIPELINE.run(RUN, GPT, Context(consts=consts))
    entry = parse_entry("loss", core, None, {"B": a.batch, "T": a.seq})
    values = [v for _, _, v in entry_inputs(core, entry, 0, 64)]
    theta = next(v for v in values if isinstance(v, dict))
    dims = dict(entry.dims) | dict(entry.prefix)
    tmp = Path(tempfile.mkdtemp())
    sides = {}
    for name, quant in (("f32", None), (f"f32+{a.scheme}", {k: a.scheme for k in theta})):
        doc = {"presk": "realization", "version": 1, "default": "f32"}
        if quant:
            doc["quant"] = quant
        (tmp / f"{len(sides)}.json").write_text(json.dumps(doc, ensure_ascii=False))
        r = parse_realization(f"@{tmp / f'{len(sides)}.json'}")
        s = lower(core, "loss", dims, values, r)
        ids = set(s.inputs)
        weight_bytes = sum(
            int(np.prod([x.length for x in b.axes]))
            * {"f64": 8, "f32": 4, "bf16": 2, "i8": 1}.get(b.dtype, 8)
            for b in s.buffers
            if b.id in ids and (b.name.startswith("θ.") or ".scale:" in b.name)
        )
        entry_c = compiled(s)
        leaves = storage(s, argument_leaves(values), stored=True)
        out = entry_c.run(leaves)
        sides[name] = {
            "entry": entry_c,
            "leaves": leaves,
            "bytes": weight_bytes,
            "loss": out,
            "t": [],
        }
    for _ in range(a.rounds):  # interleaved
        for side in sides.values():
            t0 = time.perf_counter()
            side["entry"].run(side["leaves"])
            side["t"].append(time.perf_counter() - t0)
    base = sides["f32"]
    print(
        f"course GPT `loss` at {a.consts}, B={a.batch}, T={a.seq}, native, {a.rounds} interleaved calls each (machine loaded: ratios, not times)"
    )
    print(f"{'realization':<14}{'weights B':>12}{'median ms':>12}{'time ratio':>12}{'loss':>14}")
    for name, side in sides.items():
        med = statistics.median(side["t"])
        print(
            f"{name:<14}{side['bytes']:>12,}{med * 1e3:>12.3f}"
            f"{med / statistics.median(base['t']):>11.2f}x{float(np.ravel(side['loss'][0])[0]):>14.6f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
