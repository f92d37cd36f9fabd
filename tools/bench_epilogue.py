"""A GEMM with its elementwise consumer as its epilogue against the GEMM then the consumer
as a kernel of its own (issue 26, presk_kernel.epilogue), natively, at the course GPT's
shapes (D 192, B 16, T 256: 4096 rows).

    .venv/bin/python tools/bench_epilogue.py [--rows 4096] [--pairs 15] [--realize f32]
        [--threads 1] [--shape K,N]… [--gpt D=192,H=4,L=2 [--batch 16] [--seq 256]]
        [--step D=192]

Each shape is tutorial/01_linear.psk's `Linear{K, N}.apply` at `batch` = rows (x · w + b:
the product, the bias its consumer), fused and laid out as a run lays it out, compiled twice
(`NativeEntry(epilogues=True)` and `False`); the two are called in pairs, the order inside
a pair alternating. Prints each side's median time and the median of the per-pair ratios
(fused over apart: < 1 is a gain), and whether the outputs have the same bits. `--gpt
CONSTS` times the course GPT's forward pass (its `loss`, corpus/nlp/05_gpt.psk) instead,
compiled with every epilogue and prologue the emission fuses against none. `--step
CONSTS` the course GPT's training step (its run's B and T), each side timed on the calling
thread's CPU clock launch by launch (`NativeEntry(timed="cpu")`, which a loaded machine's
other jobs do not stop; random θ, m, v and a batch of token 0): the whole step and the
launches the emission fuses, apart and fused. The machine may be loaded: only the paired
ratio means much.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from presk_ad.step import training_step
from presk_cback.native import NativeEntry
from presk_core.lower import lower_program
from presk_core.run import parse_entry
from presk_kernel.fuse import fuse
from presk_kernel.interp import NUMPY
from presk_kernel.layout import lay_out
from presk_kernel.lower import lower_entry
from presk_syntax.span import SourceMap
from presk_types.elab import load_program

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ((192, 576), (192, 192), (192, 768), (768, 192))  # qkv, proj, fc, fc2 at D 192


def entries(k: int, n: int, rows: int, realize: str, threads: int):
    elab = load_program(str(ROOT / "tutorial/01_linear.psk"), {}, SourceMap())
    core = lower_program(elab)
    e = parse_entry(f"Linear{{{k}, {n}}}.apply", core, elab, {"batch": rows})
    dims = dict(e.dims) | dict(e.prefix)
    schedule = lower_entry(core, e.function.name, dims, None, realize)
    laid = lay_out(fuse(schedule)[0], threads)
    rng = np.random.default_rng(0)
    byid = {b.id: b for b in laid.buffers}
    inputs = [
        rng.standard_normal(tuple(a.length for a in byid[i].axes)).astype(NUMPY[byid[i].dtype])
        for i in laid.inputs
    ]
    return NativeEntry(laid), NativeEntry(laid, epilogues=False), inputs


def gpt_entries(consts: str, batch: int, seq: int, realize: str, threads: int):
    from presk_cli.native import entry_inputs, lower, storage
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_kernel.lower import argument_leaves
    from presk_syntax.pipeline import Context

    core = PIPELINE.run(RUN, "corpus/nlp/05_gpt.psk", Context(consts=dict(
        kv.split("=") for kv in consts.split(",") if kv
    )))  # fmt: skip
    e = parse_entry("loss", core, None, {"B": batch, "T": seq})
    values = [v for _, _, v in entry_inputs(core, e, 0, 64)]
    s = lower(core, "loss", dict(e.dims) | dict(e.prefix), values, realize, threads)
    inputs = storage(s, argument_leaves(values), stored=True)
    return NativeEntry(s), NativeEntry(s, epilogues=False), inputs


def step_cpu(consts: str, realize: str, threads: int, n: int) -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    from experiment_gpt import load
    from presk_cli.native import lower
    from presk_cli.native_train import NATIVE_STEP, native_step
    from presk_kernel.epilogue import gemm_epilogues

    core, run = load(ROOT / "corpus/nlp/05_gpt.psk", dict(
        kv.split("=") for kv in consts.split(",") if kv
    ), None)  # fmt: skip
    name = NATIVE_STEP.format(run.objective)
    apart = lower(native_step(training_step(core, run.objective), run.objective), name,
                  run.dims(), None, realize, threads)  # fmt: skip
    fused = gemm_epilogues(apart)
    rng = np.random.default_rng(0)
    byid = {b.id: b for b in apart.buffers}
    inputs = []
    for i in apart.inputs:
        b = byid[i]
        shape = tuple(a.length for a in b.axes)
        real = b.dtype in ("f64", "f32", "bf16")
        x = rng.standard_normal(shape) * 0.02 if real else np.zeros(shape)
        inputs.append(x.astype(NUMPY["f32" if b.dtype == "bf16" else b.dtype]))
    sides = {}
    for key, s in (("apart", apart), ("fused", fused)):
        e = NativeEntry(s, timed="cpu", epilogues=False)  # each side as it is
        e.run_timed(inputs, np.zeros(len(s.launches) + 1))  # warm
        sides[key] = (s, e, np.zeros(len(s.launches) + 1), [])
    for p in range(n):
        for key in ("apart", "fused") if p % 2 == 0 else ("fused", "apart"):
            s, e, ns, calls = sides[key]
            before = ns.sum()
            e.run_timed(inputs, ns)
            calls.append(ns.sum() - before)
    ratio = statistics.median(
        f / a for f, a in zip(sides["fused"][3], sides["apart"][3], strict=True)
    )
    gone = sum(
        t
        for lc, t in zip(apart.launches, sides["apart"][2][:-1], strict=True)
        if lc not in fused.launches
    )
    new = sum(
        t
        for lc, t in zip(fused.launches, sides["fused"][2][:-1], strict=True)
        if lc not in apart.launches
    )
    print(
        f"bench-epilogue: the course GPT's step at {consts} ({run.dims()}), {realize}, CPU"
        f" clock, {n} pairs: {len(apart.launches)} → {len(fused.launches)} launches; the step"
        f" fused/apart {ratio:.3f} ({statistics.median(sides['fused'][3]) / 1e6:.1f} ms against"
        f" {statistics.median(sides['apart'][3]) / 1e6:.1f}); the launches fused"
        f" {gone / n / 1e6:.1f} ms apart, {new / n / 1e6:.1f} ms fused"
    )


def pairs(fused, apart, inputs, n: int) -> tuple[float, float, float, bool]:
    """The median of fused's and apart's times and of their per-pair ratio, interleaved (the
    order inside a pair alternating), and whether their outputs have the same bits."""
    same = all(
        x.tobytes() == y.tobytes()
        for x, y in zip(fused.run(inputs), apart.run(inputs), strict=True)
    )
    times: dict[str, list[float]] = {"fused": [], "apart": []}
    for p in range(n):
        order = (("fused", fused), ("apart", apart))
        for name, e in order if p % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            e.run(inputs)
            times[name].append(time.perf_counter() - t0)
    ratio = statistics.median(f / s for f, s in zip(times["fused"], times["apart"], strict=True))
    f_ms, s_ms = (statistics.median(times[x]) * 1e3 for x in ("fused", "apart"))
    return f_ms, s_ms, ratio, same


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--realize", default="f32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--gpt", default=None)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--step", default=None)
    a = ap.parse_args()
    if a.step:
        step_cpu(a.step, a.realize, a.threads, a.pairs)
        return
    if a.gpt:
        fused, apart, inputs = gpt_entries(a.gpt, a.batch, a.seq, a.realize, a.threads)
        f_ms, s_ms, ratio, same = pairs(fused, apart, inputs, a.pairs)
        print(
            f"bench-epilogue: the course GPT's loss at {a.gpt}, B {a.batch}, T {a.seq},"
            f" {a.realize}, {a.threads} thread(s), {a.pairs} pairs: fused {f_ms:.1f} ms"
            f" ({len(fused.schedule.launches)} launches), apart {s_ms:.1f} ms"
            f" ({len(apart.schedule.launches)}), fused/apart {ratio:.3f}, same bits {same}"
        )
        return
    shapes = [tuple(int(x) for x in s.split(",")) for s in a.shape] or SHAPES
    print(f"bench-epilogue: {a.rows} rows, {a.realize}, {a.threads} thread(s), {a.pairs} pairs")
    for k, n in shapes:
        fused, apart, inputs = entries(k, n, a.rows, a.realize, a.threads)
        f_ms, s_ms, ratio, same = pairs(fused, apart, inputs, a.pairs)
        print(
            f"  {a.rows}x{k} · {k}x{n} + bias: fused {f_ms:.3f} ms ({len(fused.schedule.launches)}"
            f" launch), apart {s_ms:.3f} ms ({len(apart.schedule.launches)}), fused/apart"
            f" {ratio:.3f}, same bits {same}"
        )


if __name__ == "__main__":
    main()
