"""`top_k` natively (issue 29: the selection kernel, O(K·n) comparisons a row) against
PyTorch's `torch.topk` on the same rows, interleaved in one run, f64.

    .venv/bin/python tools/bench_top_k.py [--B 16] [--N 512] [--K 16] [--threads 1]
        [--repeat 21]

Prints each side's median time (ms) over the rounds and the native side's ratio against
torch.topk in the same rounds; checks first that the indices are a stable descending sort's
(presk's order; the drawn rows have no ties, so torch.topk's order is the same).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

PROGRAM = """dim B
dim N >= {k}
fn best(x : ℝ[batch: B, c: N]) -> idx[N][batch: B, c: {k}] =
  let (v, i) = top_k(axis c, x, k: {k})
  i
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--N", type=int, default=512)
    ap.add_argument("--K", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=21)
    a = ap.parse_args()

    import torch
    from presk_cback.native import NativeEntry
    from presk_core.lower import lower_program
    from presk_kernel.layout import lay_out
    from presk_kernel.lower import lower_entry
    from presk_syntax.span import SourceMap
    from presk_types.elab import load_program

    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "top_k.psk"
        path.write_text(PROGRAM.format(k=a.K), encoding="utf-8")
        core = lower_program(load_program(str(path), {}, SourceMap()))
    schedule = lower_entry(core, "best", {"B": a.B, "N": a.N}, None, "f64")
    native = NativeEntry(lay_out(schedule, a.threads))
    x = np.random.default_rng(0).standard_normal((a.B, a.N))
    t = torch.from_numpy(x)
    (got,) = native.run([x])
    want = np.argsort(-x, axis=1, kind="stable")[:, : a.K]
    assert np.array_equal(got, want), "the native indices are not the stable sort's"
    sides = {"native": lambda: native.run([x]), "torch.topk": lambda: torch.topk(t, a.K, dim=1)}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(a.repeat):  # interleaved: each round times both sides
        for name, fn in sides.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["torch.topk"])
    print(f"top_k of {a.K} along {a.N}, {a.B} rows, f64, {a.threads} thread(s)")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"  {name:<12} {m * 1e3:10.4f} ms  {m / base:8.1f}x torch.topk")


if __name__ == "__main__":
    main()
