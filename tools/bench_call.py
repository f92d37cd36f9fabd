"""What a native call costs around its kernels: `presk bench`'s native row of a one-line
GEMM program (`fn gemm(a : ℝ[N, N], b : ℝ[N, N]) -> ℝ[N, N] = a · b`) against the same
entry's kernels alone and numpy's matmul (OpenBLAS), in one process.

    .venv/bin/python tools/bench_call.py [--n 1024] [--pairs 11] [--threads 1 2]

For each type (f32, f64) and thread count, `pairs` rounds, each timing in turn (the order
rotating from round to round): the call as `presk bench` makes it (`NativeEntry.run` on
inputs in their storage types: read where they lie, the output written where it is
returned), the call as it was before zero-copy calls (the inputs as doubles converted and
copied into the arena, `presk_entry`, the outputs copied out), the kernels alone (the sum
of the launches' clocks, `run_timed`) and numpy's matmul into a preallocated output with
OpenBLAS at the same threads. Prints each side's median ms and the medians of the
per-round ratios. Every call first waits for the process's other threads to be idle
(tools/bench_gemm.py's `settle`). The host is shared: only the ratios mean anything.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gemm import blas_call, openblas, settle  # noqa: E402

PROGRAM = "dim N\nfn gemm(a : ℝ[N, N], b : ℝ[N, N]) -> ℝ[N, N] = a · b\n"


def sides(n: int, realize: str, threads: int):
    import presk_cli.api as api
    from presk_cback.load import pointer
    from presk_cback.native import NativeEntry
    from presk_cli.native import compiled, lower, storage
    from presk_kernel.interp import from_storage

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gemm.psk")
        Path(path).write_text(PROGRAM)
        core = api.load(path).core
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    schedule = lower(core, "gemm", {"N": n}, [a, b], realize, threads)
    entry = compiled(schedule)
    timed = NativeEntry(schedule, timed=True)
    inputs = storage(schedule, [a, b], stored=True)
    dtype = np.float32 if realize == "f32" else np.float64
    x, y, z = a.astype(dtype), b.astype(dtype), np.empty((n, n), dtype)
    ns = np.zeros(len(schedule.launches) + 1)

    def before():  # NativeEntry.run as it was: doubles converted and copied, outputs copied
        entry.view(schedule.inputs[0])[...] = a.astype(dtype)
        entry.view(schedule.inputs[1])[...] = b.astype(dtype)
        entry.module.lib.presk_entry(pointer(entry.arena, "char"))
        return [np.array(from_storage(entry.view(o), realize)) for o in schedule.outputs]

    def kernels():
        ns[:] = 0.0
        timed.run_timed(inputs, ns)
        return float(ns[:-1].sum()) / 1e9

    got = entry.run(inputs)[0]
    assert np.array_equal(got, before()[0]), "zero-copy and copying calls differ"
    return {
        "bench": lambda: entry.run(inputs),
        "before": before,
        "kernels": kernels,
        "numpy": lambda: np.matmul(x, y, out=z),
    }


def measure(fns: dict, pairs: int) -> dict:
    for fn in fns.values():
        fn(), fn()
    names = list(fns)
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(pairs):
        for k in names[r % len(names) :] + names[: r % len(names)]:
            settle()
            t = time.perf_counter()
            inner = fns[k]()
            took = time.perf_counter() - t
            times[k].append(inner if isinstance(inner, float) else took)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--pairs", type=int, default=11)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    set_threads = blas_call(
        openblas(), "scipy_openblas_set_num_threads64_", "openblas_set_num_threads"
    )
    print(f"n = {args.n}, {args.pairs} rounds; median ms, and medians of per-round ratios")
    head = ("type", "thr", "bench", "before", "kernels", "numpy", "k/bench", "np/bench", "np/bef")
    print("{:5}{:>4}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}".format(*head))
    for realize in ("f32", "f64"):
        for threads in args.threads:
            if set_threads is not None:
                set_threads(threads)
            t = measure(sides(args.n, realize, threads), args.pairs)

            def ratio(num, den, t=t):
                return statistics.median(p / q for p, q in zip(t[num], t[den], strict=True))

            med = {k: statistics.median(v) * 1e3 for k, v in t.items()}
            print(
                f"{realize:5}{threads:4d}{med['bench']:9.2f}{med['before']:9.2f}"
                f"{med['kernels']:9.2f}{med['numpy']:9.2f}{ratio('kernels', 'bench'):9.3f}"
                f"{ratio('numpy', 'bench'):9.3f}{ratio('numpy', 'before'):9.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
