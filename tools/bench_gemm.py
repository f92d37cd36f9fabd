"""presk-cback's generated GEMM against numpy's matmul (OpenBLAS) in the same process.

    .venv/bin/python tools/bench_gemm.py [--n 1024] [--pairs 15] [--threads 1 2] [--tune [--save]]
    .venv/bin/python tools/bench_gemm.py --shapes 4096x192x192 96*256x256x32:nt [--types f32]
        [--against OTHER/packages/presk-cback/src/presk_cback/gemm.py] [--clock cpu]

For each type (f32, f64) and thread count: R paired runs, the order inside a pair
alternating, both writing into preallocated outputs (at two threads or more each run a
burst of calls back to back, `burst`: the pool awake, as in a step); prints each side's
best GFLOP/s and the median of the per-pair ratios (presk's GFLOP/s over numpy's: ≥ 0.8
is the goal); then the same product as a PSK-Kernel contraction run by the native backend
(one call of an entry's host function, its operands packed: the GEMM inside).
OpenBLAS runs with the same number of threads (set through its own API). Each timed call
waits first until the process's other threads are idle (`settle`): OpenBLAS's workers spin
~0.1–0.3 s after each call and would hold the second core while presk runs (which then ran
its two threads at one-thread speed). The host is noisy and shared, so only the paired
ratio means anything. OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE, where the machine sets them, slow a current OpenBLAS: the script runs
itself again without both, and prints the kernel OpenBLAS then uses. `--tune` also times
the other register blockings measured on this kind of machine; `--save` keeps the best
one-thread blocking of each type for this host (the cache folder's gemm-blocking.json),
which the GEMM and the native entries then use.

`--shapes` times other products instead of n³, each `[batch*]MxNxK[:ab]`: `a`, `b` are each
`n` (the operand C-ordered) or `t` (transposed: Fortran-ordered, as `dy·Wᵀ`'s B or `xᵀ·dy`'s
A). A batch is that many products on separate operands, the GEMM called once each (as a
native entry's batch loop does; at two threads or more the products shared among the
threads, each on one, as a batched GEMM statement runs them) against numpy's matmul of
the stacked operands.
`--against GEMM_PY` times another tree's presk_cback/gemm.py beside (before and after a
change, in the same rounds, their bits compared); `--clock cpu` times one thread's calls
on the thread's CPU clock, which other jobs on a loaded machine do not stop (two threads
are timed on the wall clock whatever the flag).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# The calls come from Python, tens of µs apart (a step's launches are µs apart, its pool
# spinning between them: presk_cback.load.spin_count). Sleeping between calls, presk's
# worker woke ~1.5 ms late a call on this host (4096×192×192 at two threads: 3.2–3.5 ms a
# call with GOMP_SPINCOUNT 0, 2.1–2.5 with OMP_WAIT_POLICY active, 1.7 at best), while
# OpenBLAS's workers spin 0.1–0.3 s after each call; so presk's spin too, unless set.
os.environ.setdefault("GOMP_SPINCOUNT", "1000000")
CAVEAT = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(v in os.environ for v in CAVEAT) and not os.environ.get("PRESK_BENCH_REEXEC"):
    env = {k: v for k, v in os.environ.items() if k not in CAVEAT}
    env["PRESK_BENCH_REEXEC"] = "1"
    os.execve(sys.executable, [sys.executable, *sys.argv], env)

import numpy as np  # noqa: E402
from presk_cback import gemm as G  # noqa: E402
from presk_cback.load import pointer  # noqa: E402
from presk_cback.native import NativeEntry  # noqa: E402
from presk_cback.toolchain import find_toolchain  # noqa: E402
from presk_kernel.ir import Layout, Schedule  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages/presk-kernel/tests"))
from kernel_entries import contraction_schedule  # noqa: E402

CANDIDATES = {  # the other start points of the measurements, and other KC
    "f32": [G.Blocking(6, 4, 384, 192), G.Blocking(12, 2, 256, 96)],
    "f64": [G.Blocking(8, 3, 384, 192), G.Blocking(6, 4, 256, 192)],
}


def ein_schedule(n: int, tag: str, threads: int) -> Schedule:
    """`out[i, j] = Σ_p x[i, p]·w[p, j]` as PSK-Kernel data: one kernel, both operands packed,
    which the native backend runs through the generated GEMM."""
    split = "i" if threads > 1 else None
    layout = Layout(order=("i", "j"), pack=(0, 1), split=split, threads=threads)
    return contraction_schedule(n, n, n, tag, layout=layout)


def measure_entry(n: int, tag: str, dtype, threads: int, pairs: int, set_threads):
    """The same product as an entry of the native backend: one call of its host function
    over its arena (inputs already there, as in a training step), against numpy."""
    entry = NativeEntry(ein_schedule(n, tag, threads))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(dtype) for _ in range(2))
    entry.view(0)[...], entry.view(1)[...] = a, b
    c2 = np.empty((n, n), dtype)
    arena = pointer(entry.arena, "char")
    if set_threads is not None:
        set_threads(threads)
    return pair_up(lambda: entry.module.lib.presk_entry(arena),
                   lambda: np.matmul(a, b, out=c2), 2.0 * n**3, pairs, threads)  # fmt: skip


def thread_cpu(tid: int) -> float:
    """The CPU seconds thread `tid` of this process has used (Linux's per-thread clock)."""
    try:
        return time.clock_gettime((~tid << 3) | 6)  # CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD
    except OSError:  # the thread has ended
        return 0.0


def settle(window: float = 0.01, limit: float = 2.0) -> float:
    """Wait until the other threads of this process are idle: less than a tenth of a
    window's CPU in a window. After a call OpenBLAS's workers spin for ~0.1–0.3 s (their
    THREAD_TIMEOUT) and libgomp's for a few ms: a side timed while the other side's
    threads still spin gets one core fewer. Returns the seconds waited."""
    start = time.perf_counter()
    me = threading.get_native_id()
    while time.perf_counter() - start < limit:
        tids = [int(t) for t in os.listdir("/proc/self/task") if int(t) != me]
        before = [thread_cpu(t) for t in tids]
        time.sleep(window)
        used = sum(thread_cpu(t) - b for t, b in zip(tids, before, strict=True))
        if used < window / 10:
            break
    return time.perf_counter() - start


def pair_up(ours, theirs, flop: float, pairs: int, threads: int = 1):
    ours(), theirs(), ours(), theirs()  # compile, warm caches and thread pools
    r_ours, r_theirs = burst(ours, threads), burst(theirs, threads)
    t_ours, t_theirs, ratios = [], [], []
    for i in range(pairs):
        if i % 2:
            t2, t1 = timed(theirs, r_theirs), timed(ours, r_ours)
        else:
            t1, t2 = timed(ours, r_ours), timed(theirs, r_theirs)
        t_ours.append(t1)
        t_theirs.append(t2)
        ratios.append(t2 / t1)
    return flop / min(t_ours) / 1e9, flop / min(t_theirs) / 1e9, statistics.median(ratios)


def openblas() -> ctypes.CDLL | None:
    """numpy's OpenBLAS, found among the libraries of this process."""
    with open("/proc/self/maps") as f:
        paths = {ln.split()[-1] for ln in f if "openblas" in ln}
    return ctypes.CDLL(sorted(paths)[0]) if paths else None


def blas_call(lib, *names):
    for name in names:
        if lib is not None and hasattr(lib, name):
            return getattr(lib, name)
    return None


BURST = 0.02  # seconds of back-to-back calls a timing takes at two threads or more


def burst(fn, threads: int) -> int:
    """How many calls of `fn` one timing makes back to back: one at one thread; at more,
    enough for BURST, so that a timing is of a pool at work, as a step's launches find it,
    not of the wake-up of one that `settle` left asleep (the spin count above)."""
    if threads <= 1:
        return 1
    settle()
    t = time.perf_counter()
    fn()
    return max(1, round(BURST / max(time.perf_counter() - t, 1e-6)))


def timed(fn, reps: int = 1) -> float:
    """A call of `fn`, the mean of `reps` back to back (`burst`), once the other side's
    threads are idle."""
    settle()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def measure(n: int, dtype, threads: int, pairs: int, blocking, set_threads):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    c1, c2 = np.empty((n, n), dtype), np.empty((n, n), dtype)
    if set_threads is not None:
        set_threads(threads)

    def ours():
        G.gemm(a, b, c1, threads=threads, blocking=blocking)

    def theirs():
        np.matmul(a, b, out=c2)

    ours(), theirs()
    scale = 1e-6 if dtype == np.float32 else 1e-12
    assert np.allclose(c1, c2, rtol=scale * n, atol=scale * n), "the two products differ"
    return pair_up(ours, theirs, 2.0 * n**3, pairs, threads)


STEP_SHAPES = [  # the course GPT step's products at D 192 (4096 = B·T rows; 32 a head's width)
    "4096x192x192", "4096x768x192", "4096x192x768", "4096x192x192:nt", "192x192x4096:tn",
    "96*256x256x32:nt", "96*256x32x256", "96*256x32x256:tn",
]  # fmt: skip


def parse_shape(spec: str) -> tuple[int, int, int, int, str]:
    dims, _, orders = spec.partition(":")
    batch, _, mnk = dims.rpartition("*")
    m, n, k = (int(v) for v in mnk.split("x"))
    orders = orders or "nn"
    if len(orders) != 2 or set(orders) - {"n", "t"} or min(m, n, k, int(batch or 1)) < 1:
        raise ValueError(spec)
    return int(batch or 1), m, n, k, orders


def gemm_function(module_path: str | None, tag: str, tc):
    """The generated GEMM of this tree (`module_path` None) or of another tree's gemm.py
    (`--against`: its `source` at this host's blocking), compiled or found in the cache."""
    mod = G
    if module_path:
        spec = importlib.util.spec_from_file_location("presk_gemm_against", module_path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # its dataclasses look their module up
        spec.loader.exec_module(mod)
    b = G.host_blocking(tag, tc)
    text = mod.source(tag, mod.Blocking(b.mr, b.nv, b.kc, b.mc, b.nc), tc)
    module = G.load(text, G.CDEF, (f"presk_gemm_{tag}",), threads=True, toolchain=tc)
    return getattr(module.lib, f"presk_gemm_{tag}")


def cpu_timed(fn) -> float:
    """One call of `fn` on this thread's CPU clock (one thread: other jobs do not stop it)."""
    settle()
    t = time.thread_time()
    fn()
    return time.thread_time() - t


def measure_shape(spec: str, dtype, threads: int, args, set_threads):
    """One `--shapes` product (`parse_shape`): presk's GEMM (and `--against`'s) and numpy's
    matmul, in rounds whose order rotates; GFLOP/s (best) and the median ratios."""
    batch, m, n, k, orders = parse_shape(spec)
    rng = np.random.default_rng(0)

    def operand(rows, cols, order):
        x = rng.standard_normal((batch, rows, cols)).astype(dtype)
        return x if order == "n" else np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)

    a, b = operand(m, k, orders[0]), operand(k, n, orders[1])
    tag = G.TAGS[np.dtype(dtype)]
    ctype = G.CTYPE[tag]
    tc = find_toolchain()
    outs = [np.empty((batch, m, n), dtype) for _ in range(3)]

    shared = batch > 1 and threads > 1  # the batch's products shared, each on one thread
    pool = ThreadPoolExecutor(threads) if shared else None

    def side(fn, c):
        calls = []
        for i in range(batch):
            (abuf, rsa, csa), (bbuf, rsb, csb) = G._operand(a[i]), G._operand(b[i])
            pa, pb, pc = pointer(abuf, ctype), pointer(bbuf, ctype), pointer(c[i], ctype)
            calls.append((m, n, k, pa, rsa, csa, pb, rsb, csb, pc, n, 1 if shared else threads))

        def run(part=calls):
            for call in part:
                fn(*call)

        if not shared:
            return run
        parts = [calls[batch * t // threads : batch * (t + 1) // threads] for t in range(threads)]
        return lambda: list(pool.map(run, parts))  # cffi's calls release the GIL

    sides = [side(gemm_function(None, tag, tc), outs[0]), lambda: np.matmul(a, b, out=outs[1])]
    if args.against:
        sides.append(side(gemm_function(args.against, tag, tc), outs[2]))
    if set_threads is not None:
        set_threads(threads)
    for run in sides:
        run(), run()  # compile, warm caches and thread pools
    scale = 1e-6 if dtype == np.float32 else 1e-12
    assert np.allclose(outs[0], outs[1], rtol=scale * k, atol=scale * k), "the products differ"
    if args.against:
        assert np.array_equal(outs[0], outs[2]), "the two trees' GEMMs differ in bits"
    cpu = args.clock == "cpu" and threads == 1
    reps = [burst(run, threads) for run in sides]
    times: list[list[float]] = [[] for _ in sides]
    for r in range(args.pairs):
        order = [(r + j) % len(sides) for j in range(len(sides))]
        for j in order[::-1] if r % 2 else order:
            times[j].append(cpu_timed(sides[j]) if cpu else timed(sides[j], reps[j]))
    if pool is not None:
        pool.shutdown()
    flop = 2.0 * batch * m * n * k
    best = [flop / min(t) / 1e9 for t in times]

    def ratio(x, y):  # x's speed over y's, the median of the rounds
        return statistics.median(ty / tx for tx, ty in zip(times[x], times[y], strict=True))

    return best, [ratio(0, 1)] + ([ratio(2, 1), ratio(0, 2)] if args.against else [])


def main_shapes(args, set_threads) -> None:
    against = f" {'before GF/s':>11} {'before/np':>9} {'after/before':>12}" if args.against else ""
    print(f"{'product':>18} {'type':5} {'threads':>7} {'presk GF/s':>10} {'numpy GF/s':>10} "
          f"{'ratio':>6}{against}  ({args.clock} clock)")  # fmt: skip
    shapes = [s for spec in args.shapes for s in (STEP_SHAPES if spec == "step" else [spec])]
    for tag in args.types:
        dtype = np.float32 if tag == "f32" else np.float64
        for threads in args.threads:
            for spec in shapes:
                best, ratios = measure_shape(spec, dtype, threads, args, set_threads)
                line = f"{spec:>18} {tag:5} {threads:7d} {best[0]:10.1f} {best[1]:10.1f} {ratios[0]:6.2f}"
                if args.against:
                    line += f" {best[2]:11.1f} {ratios[1]:9.2f} {ratios[2]:12.2f}"
                print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tune", action="store_true")
    parser.add_argument(
        "--save", action="store_true", help="with --tune: keep the best one-thread blocking"
    )
    parser.add_argument(
        "--shapes", nargs="+", help="[batch*]MxNxK[:ab] products instead of n³ (`step`: the GPT's)"
    )
    parser.add_argument("--types", nargs="+", default=["f32", "f64"], choices=["f32", "f64"])
    parser.add_argument(
        "--against", metavar="GEMM_PY", help="with --shapes: another tree's gemm.py, timed beside"
    )
    parser.add_argument(
        "--clock", choices=["wall", "cpu"], default="wall",
        help="with --shapes: one thread's calls on the thread's CPU clock (cpu)",
    )  # fmt: skip
    args = parser.parse_args()
    lib = openblas()
    corename = blas_call(lib, "scipy_openblas_get_corename64_", "openblas_get_corename")
    set_threads = blas_call(lib, "scipy_openblas_set_num_threads64_", "openblas_set_num_threads")
    if corename is not None:
        corename.restype = ctypes.c_char_p
        core = corename().decode()
    else:
        core = "unknown"
    tc = find_toolchain()
    print(f"numpy {np.__version__}, OpenBLAS kernel {core}; {tc.identity}")
    print(f"target {tc.target.split()[0]}, vectors of {tc.vector_bytes} bytes, n = {args.n}")
    if args.shapes:
        for spec in args.shapes:
            try:
                spec == "step" or parse_shape(spec)
            except ValueError:
                parser.error(f"--shapes: {spec!r} is not [batch*]MxNxK[:ab] (a, b: n or t)")
        main_shapes(args, set_threads)
        return
    print(
        f"{'type':5} {'threads':>7} {'blocking':>24} {'presk GF/s':>10} "
        f"{'numpy GF/s':>10} {'ratio':>6}"
    )
    for tag, dtype in (("f32", np.float32), ("f64", np.float64)):
        if tag not in args.types:
            continue
        first = G.host_blocking(tag, tc)
        blockings = [first] + (
            [b for b in [G.default_blocking(tag, tc), *CANDIDATES[tag]] if b != first]
            if args.tune
            else []
        )
        best: dict = {}
        for threads in args.threads:
            for bl in blockings:
                ours, theirs, ratio = measure(args.n, dtype, threads, args.pairs, bl, set_threads)
                if threads == 1:
                    best[bl] = ratio
                shown = f"{bl.mr}x{bl.nv * G.lanes(tag, tc)} kc{bl.kc} mc{bl.mc}"
                print(
                    f"{tag:5} {threads:7d} {shown:>24} {ours:10.1f} {theirs:10.1f} {ratio:6.2f}",
                    flush=True,
                )
            if args.tune and args.save and best and threads == args.threads[-1]:
                winner = max(best, key=best.get)
                path = G.save_blocking(tag, tc, winner)
                print(f"{tag}: kept {winner} for this host in {path}", flush=True)
            ours, theirs, ratio = measure_entry(
                args.n, tag, dtype, threads, args.pairs, set_threads
            )
            shown = "ein kernel, native entry"
            print(
                f"{tag:5} {threads:7d} {shown:>24} {ours:10.1f} {theirs:10.1f} {ratio:6.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
