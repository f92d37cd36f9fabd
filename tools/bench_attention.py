"""Causal attention alone, natively with and without narrowing (issue 26), against PyTorch's
`scaled_dot_product_attention(is_causal=True)` and its eager masked softmax, interleaved in
one run: tutorial/03_attention.psk's `attend` (softmax(where = causal_mask) between the two
products), f32.

    .venv/bin/python tools/bench_attention.py [--T 256] [--B 4] [--D 384] [--H 6]
        [--threads 1] [--repeat 7]

Prints each side's median time and its ratio against sdpa in the same rounds, then each
native side's launches (their median times, from the timed entry, in the same rounds): the
softmax's is the one narrowing changes.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", type=int, default=256)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--D", type=int, default=384)
    ap.add_argument("--H", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()

    import torch
    from presk_cback.native import NativeEntry
    from presk_core.lower import lower_program
    from presk_kernel.fuse import fuse
    from presk_kernel.layout import lay_out
    from presk_kernel.lower import lower_entry
    from presk_kernel.narrow import narrow
    from presk_syntax.span import SourceMap
    from presk_types.elab import load_program

    torch.set_num_threads(a.threads)
    consts = {"D": str(a.D), "H": str(a.H)}
    core = lower_program(load_program("tutorial/03_attention.psk", consts, SourceMap()))
    dims = {"B": a.B, "T": a.T}
    fused = fuse(lower_entry(core, "attend", dims, None, "f32"))[0]
    narrowed, count = narrow(fused)
    hd = a.D // a.H
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((a.B, a.H, a.T, hd)).astype(np.float32) for _ in range(3)]
    sides = {
        "native": NativeEntry(lay_out(fused, a.threads), timed=True),
        "native narrowed": NativeEntry(lay_out(narrowed, a.threads), timed=True),
    }
    out = {name: e.run(args)[0] for name, e in sides.items()}
    assert out["native"].tobytes() == out["native narrowed"].tobytes(), "bits differ"
    q, k, v = (torch.from_numpy(x) for x in args)
    mask = torch.ones(a.T, a.T, dtype=torch.bool).tril()

    def eager():
        s = (q @ k.transpose(-1, -2)) / hd**0.5
        return torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    kernels = {name: [] for name in sides}  # each round's nanoseconds a launch

    def timed(name: str, e) -> None:
        ns = np.zeros(len(e.schedule.launches) + 1)
        e.run_timed(args, ns)
        kernels[name].append(ns[:-1])

    calls = {name: (lambda n=name, e=e: timed(n, e)) for name, e in sides.items()}
    calls |= {"torch eager": eager, "torch sdpa": sdpa}
    times: dict[str, list[float]] = {n: [] for n in calls}
    with torch.no_grad():
        for f in calls.values():
            f()
        for _ in range(a.repeat):
            for name, f in calls.items():
                t0 = time.perf_counter()
                f()
                times[name].append(time.perf_counter() - t0)
    best = statistics.median(times["torch sdpa"])
    print(
        f"attend B {a.B}, H {a.H}, T {a.T}, hd {hd}, f32, {a.threads} thread(s), "
        f"{count} folds and loops narrowed; medians of {a.repeat} interleaved rounds"
    )
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"  {name:<16} {m * 1e3:8.2f} ms   {m / best:5.2f}x sdpa")
    for name, e in sides.items():
        per = np.median(np.array(kernels[name][1:]), axis=0)
        print(f"  {name}, by launch:")
        for lc, ns in zip(e.schedule.launches, per, strict=True):
            print(f"    {ns / 1e6:8.2f} ms  {lc.kernel.name}")


if __name__ == "__main__":
    main()
