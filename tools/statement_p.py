"""Statement P (L1090) where a whole sweep cannot run: the GEMM of experiments/gemm.psk at N
(1024 by default, f32), its GEMM statement's points (point 0 on one worker and its column
splits over the machine's worker counts, as `presk bench --space gemm` times them) against
the 0.6.0 default (the loop nest point 0's decisions name: the default register tile, order
IJ, one worker, no lanes, no pack; presk_kernel.layout_space.default_060), each compiled as
`presk autotune` compiles a point, its output compared bit for bit with point 0's, timed
interleaved: a warm-up each, then --rounds rounds of one call of every side.

The ratio printed, the 0.6.0 default over the fastest point timed, is a lower bound of P's
(the space's best point is at least as fast as the fastest one timed): P holds when it is
at least 3. (`presk autotune` on the gemm at N 1024 times every point of the space and
`presk rank` reads P from it exactly; at N 1024 its loop nests take hours on this machine.)

    .venv/bin/python tools/statement_p.py [--n 1024] [--realize f32] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--realize", default="f32", choices=("f64", "f32"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from presk_cback.native import NativeEntry
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_cli.planning import _stored_bits, nest_schedule
    from presk_cli.plans import capture
    from presk_kernel.layout import apply_layout
    from presk_kernel.layout_model import read_machine
    from presk_kernel.layout_space import default_060, describe, points
    from presk_syntax.pipeline import Context

    core = PIPELINE.run(RUN, "experiments/gemm.psk", Context())
    _, nests, _ = capture(core, "gemm", {"N": args.n}, args.realize)
    nest = nests[0]
    k = nest.kernel
    workers = read_machine().workers
    sides = [(pt.text, pt.layout) for pt in points(k, "calib", workers)
             if pt.why is None and pt.layout.gemm is not None]  # fmt: skip
    old = default_060(k)
    if old is None:
        raise SystemExit(f"statement_p: at N {args.n} point 0 is the loop nest itself")
    sides.append(("the 0.6.0 default: " + describe(k, old), old))
    rng = np.random.default_rng(args.seed)
    inputs = [rng.standard_normal(b.shape) for b in k.inputs]
    compiled = [NativeEntry(nest_schedule(apply_layout(k, lay)), timed=True) for _, lay in sides]
    ns = np.zeros(2)
    ref = None
    for (text, _), c in zip(sides, compiled, strict=True):  # the warm-up, and the bits
        got = c.run_timed(inputs, ns)
        bits = _stored_bits(k, got)
        ref = bits if ref is None else ref
        if bits != ref:
            raise SystemExit(f"statement_p: {text} does not compute point 0's bits")
    times: list[list[float]] = [[] for _ in sides]
    t0 = time.perf_counter()
    for _ in range(args.rounds):
        for i, c in enumerate(compiled):
            ns[:] = 0
            c.run_timed(inputs, ns)
            times[i].append(ns[0] / 1e3)
    print(f"statement P: gemm at N={args.n}, {args.realize}, {workers} workers, "
          f"{args.rounds} rounds interleaved ({time.perf_counter() - t0:.1f} s); "
          "every side bit-identical to point 0")  # fmt: skip
    for (text, _), ts in zip(sides, times, strict=True):
        print(f"  {statistics.median(ts):>14.1f} µs  {text}")
    best = min(statistics.median(ts) for ts in times[:-1])
    ratio = statistics.median(times[-1]) / best
    verdict = "holds" if ratio >= 3 else "not shown (a lower bound below 3)"
    print(f"the 0.6.0 default over the fastest GEMM point: {ratio:.1f}× (P ≥ that): {verdict}")


if __name__ == "__main__":
    main()
