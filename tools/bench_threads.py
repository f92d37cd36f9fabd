"""Where the second thread is idle in the course GPT's native step: each launch's CPU time on
each thread, at one and at two threads (issue 26, "Threads"): `make bench-threads`.

    .venv/bin/python tools/bench_threads.py [--const D=192]… [--steps 3] [--data FILE]
        [--forward] [--top 15] [--regions] [--wall R [--torch FORM] [--against PYTHON]]
        [--no-cpu] [--json FILE] [--ceiling R]

Each side (a thread count) is a process of its own that lowers the step at its threads
(presk_cli.native.lower: the layouts `presk train --backend native --threads T` compiles),
compiles it with three clocks around each launch (`NativeEntry(timed="threads")`: the wall
time, the calling thread's CPU time and the process's, presk_cback.host), runs it once
untimed and `--steps` times, and reports each launch's mean (`--forward`: the objective
alone, the forward pass, instead of the step). The timed entry runs the schedule the
untimed one runs, a GEMM's elementwise consumers in its epilogue (presk_kernel.epilogue:
one launch, named for what it holds, `dot+add+gelu`, a contraction); the untimed entry is
compiled beside it and called after each timed call, and its mean wall time printed with
the timed launches' sum over it (the clocks' own cost: within a few %). A launch's CPU time off the
calling thread is its other threads' (OpenMP's workers: OpenBLAS is held at one thread in
the sides, and no other thread of the process runs meanwhile). CPU clocks count work, not
waiting: the sides run with GOMP_SPINCOUNT 0 unless it is set (libgomp's workers sleep on
a futex at once; presk_cback.load would let them spin ~32 µs on a quiet machine, and a
spin is CPU time), so the figures hold on a loaded machine where wall clocks do not: on
two idle cores a launch takes the longer of its threads' CPU times, plus its regions' fork
and join. `--wall`'s processes keep presk_cback.load's choice.

Printed, by kernel class (tools/bench_minigpt.py's, a fused kernel that computes a softmax
the softmax's, as tools/pytorch_baseline.py's breakdown) and in total:

- at one thread, the step's CPU time (its work, W1);
- at two, each thread's CPU time, the launches that open no parallel region (the serial
  part: the calling thread alone), the parallel regions a step opens (counted from the
  laid-out kernels: a loop with threads, each call of the generated GEMM with threads,
  times the loops around it), and the extra work two threads do (their CPU time beyond
  W1: fork and join, caches);
- **the bound**: W1 over the step's two-thread time on two idle cores, the sum over the
  launches of the longer thread's CPU time (what the layouts allow, the regions' wake-up
  latency aside; this machine's load does not move it), and the wall clocks' ratio of the
  run (which the load does move);
- the launches that leave most time on the table: the longer thread's CPU time beyond half
  the launch's one-thread CPU time, each with its regions and its split.

`--wall R` then times the step and the forward pass at one and two threads, natively and in PyTorch (`--torch`:
`sdpa`, the exported module on scaled_dot_product_attention, by default; `eager`;
`compile+sdpa`), four processes of tools/pytorch_baseline.py's sides (the same θ₀ and
batch), R rounds after one untimed, interleaved as that tool does (each order after the
others' processes are idle); printed, each side's median and each stack's two-thread
speedup (step and forward), the median of the rounds' ratios, with the load average. `--against PYTHON` adds
another tree's native sides at one and two threads (`/work/main/.venv/bin/python`: the
change before and after, in the same rounds).

`--regions` also times parallel regions of two threads in their own processes, at
libgomp's spin counts from 0 (presk_cback.load's) through small ones to its default: the
wall time a region costs beyond its work, empty and back to back, and in the step's
pattern (50 µs of work on each thread, 5 µs on the calling thread between regions): what
a fork and join costs here and now (with the load average: measure it quiet).

`--ceiling R` times what two threads give on this machine to work that shares nothing but
the machine: a loop of multiplies and adds in registers (twelve chains of the widest
vector), and a stream (a sum of 128 MB of floats a thread, beyond the caches), each on one
thread alone and then on two at once, R times, in a process of its own; printed, each one's
median scaling and range, and one thread's GFLOP/s and GB/s. A step's two-thread scaling is
read between them: its products are work in registers and caches, its elementwise launches
streams; on a virtual machine whose cores lose clock or time to other guests when both are
busy, even the loop in registers scales below 2× (`--no-cpu --ceiling R` alone: seconds).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
DATA = Path(__file__).resolve().parents[1] / "corpus" / "nlp" / "data" / "civil_T256.psk.d"


def regions(k) -> int:
    """The parallel regions one launch of the laid-out kernel `k` opens (as presk_cback.emit
    writes them): a `For` or `Tile` with threads, one per run of the loops around it (one
    for all, when it opens around the serial tile loops outside it: `one_region`); a
    GEMM statement with threads, one per call of the generated GEMM (a point of its batch
    loops; a narrowed product's too, one banded call), when its columns (or rows) split, or one
    when its threads share its batch's points (`batched`)."""
    from presk_cback.emit import one_region
    from presk_kernel.ir import For, GemmStmt, Loop, Reduce, Tile, TwoPass

    def count(body, times: int) -> int:
        n = 0
        for s in body:
            match s:
                case GemmStmt(threads=threads, batched=True) if threads > 1:
                    n += times  # the batch's points shared: one region
                case GemmStmt(g, threads) if threads > 1:
                    n += times * math.prod(e for _, e in g.batch)
                case For(threads=threads) | Tile(threads=threads) if threads > 1:
                    n += times
                case Tile() if one_region(k, s) is not None:
                    n += times  # one region around the tile loops (presk_cback.emit)
                case Tile(extent=extent, size=size, body=inner):
                    n += count(inner, times * -(-extent // size))
                case For(extent=extent, body=inner, size=size, tile=tile):
                    n += count(inner, times * (size if tile is not None else extent))
                case Loop(extent=extent, body=inner):
                    n += count(inner, times * extent)
                case TwoPass(body=inner):
                    n += count(inner, times)
                case Reduce(body=inner):
                    n += count(inner, times)
        return n

    return count(k.body, 1)


def side(consts: dict, data: str, threads: int, steps: int, forward: bool = False) -> None:
    import numpy as np
    from bench_minigpt import kernel_class
    from experiment_gpt import course_call
    from presk_cback.native import NativeEntry
    from presk_cli.native import lower, storage
    from presk_kernel.lower import argument_leaves, lower_entry

    # the objective alone with `forward` (tools/pytorch_baseline.py's forward pass)
    trainer, step, name, args = course_call(consts, data, forward)
    schedule = lower(step, name, trainer.dims, args, "f32", threads)
    # a fused kernel's class by the operations it computes (a softmax fused with the scores'
    # scale is the softmax's), as tools/pytorch_baseline.py's breakdown classes it
    names: dict[str, set[str]] = {}
    for lc in lower_entry(step, name, trainer.dims, args, "f32").launches:
        names.setdefault(lc.kernel.site, set()).add(lc.kernel.name)

    def classed(k) -> str:
        c = kernel_class(k)
        steps = " ".join(n for site in k.steps for n in names.get(site, ()))
        return "softmax" if c == "elementwise" and "softmax" in steps else c

    entry = NativeEntry(schedule, timed="threads")
    untimed = NativeEntry(schedule)  # the same schedule compiled without the clocks
    inputs = storage(schedule, argument_leaves(args), stored=True)  # read where they lie
    schedule = entry.schedule  # what runs: a product and its epilogue one launch (dot+add)
    assert schedule == untimed.schedule
    n = len(schedule.launches)
    ns = np.zeros(3 * (n + 1))
    entry.run_timed(inputs, ns)  # warm
    untimed.run(inputs)
    ns[:] = 0
    calls = []  # the untimed entry's wall ms a call, interleaved with the timed calls
    for _ in range(steps):
        entry.run_timed(inputs, ns)
        start = time.perf_counter()
        untimed.run(inputs)
        calls.append((time.perf_counter() - start) * 1e3)
    per = (ns / steps / 1e6).reshape(n + 1, 3)  # ms: wall, calling thread, process
    out = []
    for launch, (wall, main, proc) in zip(schedule.launches, per[:-1], strict=True):
        k = launch.kernel
        shapes = " ".join("x".join(str(a.length) for a in b.axes) or "()" for b in k.buffers)
        out.append(
            {
                "name": k.name,
                "site": k.site,
                "class": classed(k),
                "shapes": shapes,
                "regions": regions(k),
                "wall": wall,
                "main": main,
                "other": max(0.0, proc - main),
            }
        )
    zero = {"wall": per[-1][0], "main": per[-1][1], "other": max(0.0, per[-1][2] - per[-1][1])}
    doc = {"launches": out, "zeroing": zero, "untimed": statistics.mean(calls)}
    print(json.dumps(doc), flush=True)


NOW_C = r"""
#define _POSIX_C_SOURCE 199309L
#include <time.h>
static double presk_now(void) {
    struct timespec a; clock_gettime(CLOCK_MONOTONIC, &a);
    return (double)a.tv_sec * 1e9 + (double)a.tv_nsec;
}
"""
"""The monotonic clock in nanoseconds, for the C sources below."""


REGIONS_C = r"""
static void presk_busy(double ns) { const double end = presk_now() + ns; while (presk_now() < end) {} }
double presk_regions(int count, double work, double gap) {
    volatile int sink = 0;
    const double a = presk_now();
    for (int i = 0; i < count; i++) {
#pragma omp parallel num_threads(2)
        { sink += 1; if (work > 0) presk_busy(work); }
        if (gap > 0) presk_busy(gap);
    }
    return (presk_now() - a) / count - work - gap;
}
"""


def empty_regions(count: int) -> None:
    """Wall nanoseconds a parallel region of two threads costs beyond its work, at this
    process's GOMP_SPINCOUNT (the median of 5 batches of `count`): an empty region, back to
    back; then the step's pattern, each thread busy 50 µs in the region and the calling
    thread 5 µs between regions (a launch's work and the host's call of the next)."""
    from presk_cback.load import declare, load

    src = NOW_C + REGIONS_C
    cdef = "double presk_regions(int count, double work, double gap);"
    declare(cdef)
    lib = load(src, cdef, ("presk_regions",), threads=True).lib
    lib.presk_regions(100, 0.0, 0.0)
    empty = statistics.median(lib.presk_regions(count, 0.0, 0.0) for _ in range(5))
    worked = statistics.median(lib.presk_regions(count // 4, 5e4, 5e3) for _ in range(5))
    print(json.dumps([empty, worked]))


CEILING_C = r"""
#include <omp.h>
typedef float presk_v __attribute__((vector_size(VECTOR_BYTES)));
/* twelve independent chains of a multiply and an add in registers: no memory, no sharing */
static float presk_fmas(long n, float m, float c) {
    presk_v z = {0}, a0 = z + 1, a1 = z + 2, a2 = z + 3, a3 = z + 4, a4 = z + 5, a5 = z + 6,
            a6 = z + 7, a7 = z + 8, a8 = z + 9, a9 = z + 10, a10 = z + 11, a11 = z + 12;
    for (long t = 0; t < n; t++) {
        a0 = a0 * m + c; a1 = a1 * m + c; a2 = a2 * m + c; a3 = a3 * m + c;
        a4 = a4 * m + c; a5 = a5 * m + c; a6 = a6 * m + c; a7 = a7 * m + c;
        a8 = a8 * m + c; a9 = a9 * m + c; a10 = a10 * m + c; a11 = a11 * m + c;
    }
    presk_v s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) + ((a8 + a9) + (a10 + a11));
    return s[0];
}
/* a sum of n floats read from memory in vectors (eight partial sums: the adds' latency
 * hidden), far beyond the caches: a stream */
static float presk_stream(const float *x, long n) {
    presk_v p[8] = {{0}};
    const long w = VECTOR_BYTES / 4;
    for (long i = 0; i + 8 * w <= n; i += 8 * w)
        for (int j = 0; j < 8; j++) {
            presk_v v;
            __builtin_memcpy(&v, x + i + j * w, sizeof v);
            p[j] += v;
        }
    presk_v s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
    return s[0];
}
/* seconds of the work on one thread, then on two threads at once, each its own (the
 * longer of them): n steps in registers (memory = NULL), or a stream of n floats of each
 * thread's half of memory */
void presk_ceiling(long n, const float *memory, double *one, double *two) {
    volatile float sink[2]; /* each thread's result, kept: the work is not left out */
    double t = presk_now();
    sink[0] = memory ? presk_stream(memory, n) : presk_fmas(n, 0.999999f, 1e-7f);
    *one = (presk_now() - t) * 1e-9;
    t = presk_now();
#pragma omp parallel num_threads(2)
    {
        const int me = omp_get_thread_num();
        const float *mine = memory ? memory + me * n : NULL;
        sink[me] = memory ? presk_stream(mine, n) : presk_fmas(n, 0.999999f, 1e-7f);
    }
    *two = (presk_now() - t) * 1e-9;
}
"""


def ceiling(rounds: int) -> None:
    """What two threads give on this machine to work that shares nothing but the memory: in
    registers (twelve independent chains of a multiply and an add, the target's widest
    vector, compiled as the backend compiles: no fused products), and a stream (a sum of
    128 MB of floats a thread, far beyond the caches), each timed on one thread alone, then
    on two at once, `rounds` times; prints each one's scalings and one thread's rate."""
    import numpy as np
    from presk_cback.load import declare, ffi, load, pointer
    from presk_core.cc.toolchain import find_toolchain

    vb = find_toolchain().vector_bytes
    cdef = "void presk_ceiling(long n, const float *memory, double *one, double *two);"
    declare(cdef)
    src = NOW_C + CEILING_C.replace("VECTOR_BYTES", str(vb))
    lib = load(src, cdef, ("presk_ceiling",), threads=True).lib
    one, two = ffi().new("double *"), ffi().new("double *")
    n = 1000
    while True:  # steps enough for about 0.2 s on one thread
        lib.presk_ceiling(n, ffi().NULL, one, two)
        if one[0] > 0.05:
            break
        n *= 4
    n = int(n * 0.2 / one[0])
    floats = 32 << 20  # 128 MB a thread
    memory = np.ones(2 * floats, np.float32)  # written: its pages are there
    got: dict[str, dict] = {}
    for what, count, mem, per in (
        ("registers", n, ffi().NULL, 12 * (vb // 4) * 2 / 1e9),  # GFLOP/s
        ("stream", floats, pointer(memory, "float"), 4 / 1e9),  # GB/s
    ):
        scalings, rates = [], []
        for _ in range(rounds):
            lib.presk_ceiling(count, mem, one, two)
            scalings.append(2 * one[0] / two[0])
            rates.append(count * per / one[0])
        got[what] = {"scalings": scalings, "rate": statistics.median(rates)}
    print(json.dumps(got))


def by_class(rows: list[dict]) -> dict[str, list[dict]]:
    from bench_minigpt import CLASSES

    out: dict[str, list[dict]] = {c: [] for c in CLASSES if c not in ("zeroing", "host")}
    for r in rows:
        out.setdefault(r["class"], []).append(r)
    return out


def report(sides: dict[int, dict], top: int) -> None:
    one, two = sides[1]["launches"], sides[2]["launches"]
    if [r["name"] for r in one] != [r["name"] for r in two]:
        raise SystemExit("bench_threads: the two sides launch different kernels")
    pairs = list(zip(one, two, strict=True))
    w1 = sum(a["main"] + a["other"] for a in one)
    print(f"  {len(one)} launches a step; milliseconds of CPU time a step (means)")
    head = (
        f"  {'class':<12}{'1 thread':>10}{'| thread 0':>11}{'thread 1':>10}{'serial':>9}"
        f"{'split':>7}{'regions':>9}{'extra':>8}{'bound':>8}{'x bound':>9}{'wall 1':>9}"
        f"{'wall 2':>9}"
    )
    print(head)

    def line(label: str, ps: list[tuple[dict, dict]]) -> tuple[float, float]:
        c1 = sum(a["main"] + a["other"] for a, _ in ps)
        t0 = sum(b["main"] for _, b in ps)
        t1 = sum(b["other"] for _, b in ps)
        serial = sum(b["main"] + b["other"] for _, b in ps if not b["regions"])
        split = sum(1 for _, b in ps if b["regions"])
        regs = sum(b["regions"] for _, b in ps)
        bound = sum(max(b["main"], b["other"]) for _, b in ps)
        x = c1 / bound if bound else float("nan")
        wall1 = sum(a["wall"] for a, _ in ps)
        wall2 = sum(b["wall"] for _, b in ps)
        print(
            f"  {label:<12}{c1:>10.1f}{t0:>11.1f}{t1:>10.1f}{serial:>9.1f}{split:>4}/{len(ps):<3}"
            f"{regs:>8}{t0 + t1 - c1:>8.1f}{bound:>8.1f}{x:>9.2f}{wall1:>9.1f}{wall2:>9.1f}"
        )
        return c1, bound

    classes: dict[str, list] = {}
    for a, b in pairs:
        classes.setdefault(a["class"], []).append((a, b))
    for c in by_class(one):
        if classes.get(c):
            line(c, classes[c])
    z1, z2 = sides[1]["zeroing"], sides[2]["zeroing"]
    print(
        f"  {'zeroing':<12}{z1['main'] + z1['other']:>10.1f}{z2['main']:>11.1f}"
        f"{z2['other']:>10.1f}{'':>57}{z1['wall']:>9.1f}{z2['wall']:>9.1f}"
    )
    c1, bound = line("all", pairs)
    serial = sum(b["main"] + b["other"] for _, b in pairs if not b["regions"])
    print(
        f"  (serial: the CPU time of the launches that open no region at two threads, "
        f"{100 * serial / c1:.1f}% of the work;"
    )
    print(
        "   extra: the two threads' CPU time beyond one thread's; bound: the sum of the"
        " longer thread's CPU time, a launch on two idle cores;"
    )
    print(
        f"   x bound: one thread's CPU time over it, the most two threads can give here:"
        f" {w1 / bound:.2f}× the step)"
    )
    wall1 = sum(a["wall"] for a in one) + z1["wall"]
    wall2 = sum(b["wall"] for b in two) + z2["wall"]
    print(f"  wall clocks, this run (the load moves them): 1 thread {wall1:.1f} ms, 2 threads "
          f"{wall2:.1f} ms, {wall1 / wall2:.2f}×")  # fmt: skip
    u1, u2 = sides[1]["untimed"], sides[2]["untimed"]  # the entry without clocks, same calls
    print(f"  the untimed entry's call (wall, the same schedule, interleaved): 1 thread"
          f" {u1:.1f} ms, 2 threads {u2:.1f} ms; the timed launches' wall over it"
          f" {wall1 / u1:.3f} and {wall2 / u2:.3f}")  # fmt: skip
    print(f"  the {top} launches that leave most on the table at two threads (the longer"
          " thread's CPU time beyond half the one-thread CPU time):")  # fmt: skip
    lost = sorted(
        pairs,
        key=lambda p: -(max(p[1]["main"], p[1]["other"]) - (p[0]["main"] + p[0]["other"]) / 2),
    )
    print(
        f"    {'lost ms':>8}{'1 thr':>8}{'thr 0':>8}{'thr 1':>8}{'regions':>8}  kernel, site, shapes"
    )
    for a, b in lost[:top]:
        c = a["main"] + a["other"]
        loss = max(b["main"], b["other"]) - c / 2
        print(
            f"    {loss:>8.2f}{c:>8.2f}{b['main']:>8.2f}{b['other']:>8.2f}{b['regions']:>8}"
            f"  {a['class'][:5]} {a['name'][:36]} {a['site'][:28]} {a['shapes'][:44]}"
        )
    kinds: dict[tuple, list] = {}
    for a, b in pairs:
        c = a["main"] + a["other"]
        loss = max(b["main"], b["other"]) - c / 2
        kind = kinds.setdefault((a["class"], a["name"][:36], bool(b["regions"])), [0, 0.0, 0.0])
        kind[0] += 1
        kind[1] += loss
        kind[2] += c
    print("  the same by kernel (launches, ms lost, ms at one thread; split: opens regions):")
    for (c, name, split), (n, loss, w) in sorted(kinds.items(), key=lambda p: -p[1][1])[:top]:
        print(
            f"    {loss:>8.2f}{w:>8.2f}{n:>5}x  {c[:5]} {name:<36} {'split' if split else 'serial'}"
        )


def wall(
    consts: list[str], data: str | None, rounds: int, torch: str, against: str | None = None
) -> None:
    """The step at one and two threads, native and PyTorch's, interleaved (`--wall`);
    `against`: another tree's python, its native sides beside (a change before and after)."""
    import pytorch_baseline as PB

    ns = argparse.Namespace(
        psk=PB.GPT, const=consts, data=data, threads=1, compile_mode="", plan=None
    )
    form = {"sdpa": "float32+sdpa", "eager": "float32", "compile+sdpa": "float32+sdpa+compile"}
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        folder = Path(tmp)
        plan = PB.prepare(ns, folder)
        env = {**os.environ, "PRESK_CACHE": str(folder / "cache")}
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        base = ["--folder", str(folder)]
        sides = []
        for name, side in (
            (f"PyTorch {torch} 1", f"torch:{form[torch]}@1"),  # first: its θ₀ is everyone's
            (f"PyTorch {torch} 2", f"torch:{form[torch]}@2"),
            ("native 1", "native:f32@1"),
            ("native 2", "native:f32@2"),
        ):
            sides.append(PB.Side(name, ["--side", side, *base], env))
        if against:  # another tree's tool takes its threads from plan.json: a folder each
            for t in (1, 2):
                other = folder / f"against{t}"
                other.mkdir()
                (other / "plan.json").write_text(json.dumps({**plan, "threads": t}))
                (other / "theta0.npz").symlink_to(folder / "theta0.npz")
                order = ["--side", "native:f32", "--folder", str(other)]
                sides.append(PB.Side(f"against {t}", order, env, against))
        loads = []
        for r in range(rounds + 1):
            for order in ("step", "forward"):
                for s in sides if r % 2 else sides[::-1]:
                    PB.settle([o for o in sides if o is not s])
                    ms = s.time(order)
                    if r:
                        getattr(s, order).append(ms)
            loads.append(os.getloadavg()[0])
        for s in sides:
            s.close()
    print(f"  the step, {plan['title']}, f32, {rounds} rounds interleaved; load average"
          f" {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores")  # fmt: skip
    print(f"    {'side':<24} {'step ms':>9} {'forward ms':>11}")
    for s in sides:
        print(
            f"    {s.name:<24} {statistics.median(s.step):>9.1f} {statistics.median(s.forward):>11.1f}"
        )
    for a, b in zip(sides[::2], sides[1::2], strict=True):
        x = statistics.median(p / q for p, q in zip(a.step, b.step, strict=True))
        f = statistics.median(p / q for p, q in zip(a.forward, b.forward, strict=True))
        print(f"    {a.name[:-2]:<24} two threads over one: step {x:.2f}×, forward {f:.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--const", action="append", default=[])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--regions", action="store_true", help="time empty parallel regions")
    parser.add_argument("--side", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--empty", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write both sides' launches to this file")
    parser.add_argument("--wall", type=int, default=0, help="rounds of the interleaved steps")
    parser.add_argument("--torch", choices=["sdpa", "eager", "compile+sdpa"], default="sdpa")
    parser.add_argument("--no-cpu", action="store_true", help="only --wall's steps")
    parser.add_argument("--forward", action="store_true", help="the forward pass, not the step")
    parser.add_argument("--against", metavar="PYTHON", help="--wall: another tree's native sides")
    parser.add_argument(
        "--ceiling",
        type=int,
        default=0,
        help="rounds of work in registers and of a stream, at one and two threads",
    )
    parser.add_argument("--ceiling-side", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.no_cpu and not (args.wall or args.ceiling):
        parser.error("--no-cpu times only --wall's steps and --ceiling: give either")
    consts = dict(c.split("=", 1) for c in args.const)
    if args.ceiling_side:
        ceiling(args.ceiling_side)
        return
    if args.empty:
        empty_regions(args.empty)
        return
    if args.side:
        side(consts, args.data, args.side, args.steps, args.forward)
        return
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    env.setdefault("GOMP_SPINCOUNT", "0")  # CPU clocks count work, not spins (above)
    data = None if args.data == str(DATA) else args.data
    if args.no_cpu:
        if args.wall:
            wall(args.const, data, args.wall, args.torch, args.against)
        if args.ceiling:
            print_ceiling(args.ceiling)
        return
    sides = {}
    for threads in (1, 2):
        cmd = [sys.executable, __file__, "--side", str(threads), "--data", args.data]
        cmd += ["--steps", str(args.steps)] + [f"--const={c}" for c in args.const]
        cmd += ["--forward"] if args.forward else []
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if out.returncode:
            raise SystemExit(f"bench_threads: the {threads}-thread side failed:\n{out.stderr}")
        sides[threads] = json.loads(out.stdout.strip().splitlines()[-1])
    load = os.getloadavg()[0]
    what = "forward pass" if args.forward else "step"
    print(f"course GPT {consts or '(full width)'}, f32 {what}, {args.steps} calls a side;"
          f" load average {load:.1f} on {os.cpu_count()} cores")  # fmt: skip
    report(sides, args.top)
    if args.json:
        from presk_core.data import write_text

        write_text(args.json, json.dumps(sides))
    if args.wall:
        wall(args.const, data, args.wall, args.torch, args.against)
    if args.regions:
        print(
            "  a parallel region of two threads, wall time beyond its work (median of 5 × 2000;"
            f" load average {os.getloadavg()[0]:.1f}): empty, back to back; the step's pattern,"
            " 50 µs of work each thread and 5 µs on the calling thread between regions"
        )
        for spin in ("0", "10", "30", "100", "300", "1000", "3000", "300000"):
            e = {**env, "GOMP_SPINCOUNT": spin}
            cmd = [sys.executable, __file__, "--empty", "2000"]
            out = subprocess.run(cmd, env=e, capture_output=True, text=True, check=True)
            empty, worked = json.loads(out.stdout)
            print(f"    GOMP_SPINCOUNT {spin:>7}: {empty:>9.0f} ns empty, {worked:>9.0f} ns worked")
    if args.ceiling:
        print_ceiling(args.ceiling)


def print_ceiling(rounds: int) -> None:
    """`ceiling` in a process of its own, and its lines: the most two threads give here."""
    cmd = [sys.executable, __file__, "--ceiling-side", str(rounds)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"bench_threads: the ceiling's side failed:\n{out.stderr}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"  the machine's ceiling: work that shares nothing, one thread alone then two at once,"
        f" {rounds} rounds; load average {os.getloadavg()[0]:.1f}"
    )
    for what, label, unit in (
        ("registers", "multiplies and adds in registers", "GFLOP/s"),
        ("stream", "a sum of 128 MB a thread (memory)", "GB/s"),
    ):
        x = got[what]["scalings"]
        print(
            f"    {label:<36} two threads over one: median {statistics.median(x):.2f}×"
            f" ({min(x):.2f}–{max(x):.2f}); one thread {got[what]['rate']:.1f} {unit}"
        )


if __name__ == "__main__":
    main()
