"""A MiniGPT training step natively against the same model in PyTorch eager, and where the
native step's time goes.

    .venv/bin/python tools/bench_minigpt.py [--steps N] [--pairs P] [--threads T] [--dims ...]

The model is tests/examples/minigpt at V 256, D 128, 4 heads, 4 blocks, T 64, B 8 (f32) by
default: a copy of train_minigpt.psk whose run reads windows of T tokens (a synthetic
stream, written into a temporary folder) in batches of B.

1. **Step time and peak memory.** `presk train --backend native --realize f32` against the
   exported train.py (the exported module, torch.optim.AdamW, float32), both with
   `--threads T`, each in its own process; the runs alternate, presk then PyTorch, `--pairs`
   times (one untimed presk run first fills a fresh cache folder: the timed runs compile
   nothing). Each time is the median step the loop prints (the first step left out); the
   ratio is the median of the pairs' ratios (below 1, presk is faster). Peak memory is each
   process's maximum resident set (`getrusage`'s ru_maxrss through `os.wait4`): for presk
   the whole command (the front end, lowering, the arena), for PyTorch the whole script.
2. **Breakdown.** The native step's schedule compiled with a per-launch clock
   (`NativeEntry(timed=True)`: `clock_gettime` around each kernel's call), run `--steps`
   times in this process; each launch's time summed by class: contractions (a fold of
   `fma`), softmax (forward and backward), the optimizer (AdamW's kernels), fills, other
   elementwise kernels and reductions, the zeroing of the arena's temporaries, and the host
   (Python around the call: inputs in their storage types, read where they lie as the
   trainer's arena holds them; outputs out). `--clock cpu` times each launch and the
   step by the thread's CPU clock instead, which other jobs on a loaded machine do not stop.
   `--contractions` also lists the contractions by kernel and product: time, GFLOP/s, the
   product as the GEMM sees it (m×n×k, batch, each operand's row and column strides: `A 1,384`
   is A read down its columns, a transposed operand) and its path (`gemm`: packed, through
   the generated GEMM; `nest`: the kernel's own loops).

`--quick-init` draws θ's normals in doubles instead of 256 bits (QUICK_INIT), for both halves:
at the course GPT's size (`--dims V=86,D=384,H=6,L=6,T=256,B=16`) the exact draw takes
minutes before the first step.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GPT = ROOT / "tests" / "examples" / "minigpt"
RUN_DATA = 'stream "data/windows_T256.psk.d" |> shuffle(seed = 7) |> batch(B = 16)'
PRESK = [sys.executable, "-m", "presk_cli.main"]
# `--quick-init`: θ's normals in doubles from the same uniforms (numpy's log, sqrt, sin, cos)
# instead of 256-bit Box–Muller, which takes minutes at the course GPT's size; a step's time
# does not depend on θ's values.
QUICK_INIT = """
import numpy as np
import presk_core.random as R

def _normal(key, n):
    u = R._unit(key, 2 * ((n + 1) // 2))
    r, a = np.sqrt(-2 * np.log(1.0 - u[0::2])), 2 * np.pi * u[1::2]
    out = np.empty(2 * len(r))
    out[0::2], out[1::2] = r * np.cos(a), r * np.sin(a)
    return out[:n].tolist()

R._normal_mpfr = _normal
"""
MEDIAN = re.compile(r"^(presk train|train\.py): (\d+(?:\.\d+)?) ms a step, median of", re.M)
CLASSES = (
    "contraction",
    "slices",
    "softmax",
    "optimizer",
    "fill",
    "elementwise",
    "zeroing",
    "host",
)


def prepare(folder: Path, dims: dict[str, int], batch: int) -> Path:
    """The model's files in `folder`, its run reading windows of T tokens in batches of B;
    the exported module and train.py in `folder/export`. The .psk file written."""
    from presk_core.data import write
    from presk_core.text import lm_windows
    from presk_types.elab import type_from_text

    shutil.copy(GPT / "minigpt.psk", folder / "minigpt.psk")
    text = (GPT / "train_minigpt.psk").read_text()
    assert RUN_DATA in text, "train_minigpt.psk's run changed: update bench_minigpt.py"
    data = f'stream "windows_T{dims["T"]}.psk.d" |> shuffle(seed = 7) |> batch(B = {batch})'
    psk = folder / "train_minigpt.psk"
    psk.write_text(text.replace(RUN_DATA, data))
    rng = np.random.default_rng(2026)
    v, t = dims["V"], dims["T"]
    n = t * batch * 8
    steps = np.where(rng.random(n) < 0.8, 1, rng.integers(0, v, size=n))
    stream = np.cumsum(np.concatenate([[0], steps])) % v
    type_text, samples = lm_windows(stream, v, t)
    write(str(folder / f"windows_T{t}.psk.d"), type_text, type_from_text(type_text), samples)
    export(psk, dims, folder / "export")
    return psk


def consts(dims: dict[str, int]) -> list[str]:
    return [w for k in ("V", "D", "H", "L") for w in ("--const", f"{k}={dims[k]}")]


def export(psk: Path, dims: dict[str, int], out: Path) -> None:
    """The exported module files and train.py (without its conformance test, whose steps
    on the 256-bit interpreter would take hours at this size)."""
    from presk_cli.pipeline import run_pipeline
    from presk_core.lower import lower_checked
    from presk_export.export import write_files
    from presk_export.pyformat import lay_out
    from presk_export.pytorch import Export, Options
    from presk_export.train_export import Script, training_run
    from presk_syntax.pipeline import Context

    ctx = Context(consts={k: str(dims[k]) for k in ("V", "D", "H", "L")})
    program = run_pipeline("elab", str(psk), ctx).program
    core, infos = lower_checked(program)
    ex = Export(program, core, infos, Options())
    files = ex.files()
    files["train.py"] = lay_out(Script(ex, training_run(ex, None), str(out)).render())
    out.mkdir()
    write_files(str(out), files)


def measured(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[str, float]:
    """The command's output and its peak resident set in MiB (ru_maxrss of that process)."""
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(
            cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=err, env={**os.environ, **(env or {})}
        )
        out = p.stdout.read().decode()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            raise SystemExit(f"bench_minigpt: `{' '.join(cmd)}` failed:\n{err.read().decode()}")
    return out, usage.ru_maxrss / 1024


def median_ms(out: str) -> float:
    m = MEDIAN.search(out)
    if m is None:
        raise SystemExit(f"bench_minigpt: no median step time in:\n{out}")
    return float(m.group(2))


def compare(
    folder: Path, psk: Path, dims: dict, steps: int, pairs: int, threads: int, quick: bool
) -> None:
    env = {"PRESK_CACHE": str(folder / "cache")}
    presk = [sys.executable, "-c", QUICK_INIT + "\nfrom presk_cli.main import main\nmain()"]
    cmd = (presk if quick else PRESK) + ["train", str(psk), *consts(dims), "--log-every", "0"]
    cmd += ["--backend", "native", "--realize", "f32", "--threads", str(threads)]
    cmd += ["--ckpt", str(folder / "ck")]
    native = [*cmd, "--steps", str(steps)]
    torch = [sys.executable, "train.py", "--steps", str(steps), "--log-every", "0"]
    torch += ["--threads", str(threads), "--ckpt", str(folder / "tk")]
    torch += ["--data", str(folder / f"windows_T{dims['T']}.psk.d")]
    start = time.perf_counter()
    measured([*cmd, "--steps", "1"], folder, env)  # compile: fill the cache
    print(
        f"  (the first native run, compiling into a fresh cache: {time.perf_counter() - start:.1f} s)"
    )
    ours, theirs, ratios, rss = [], [], [], ([], [])
    for _ in range(pairs):
        out, mem = measured(native, folder, env)
        a = median_ms(out)
        rss[0].append(mem)
        out, mem = measured(torch, folder / "export")
        b = median_ms(out)
        rss[1].append(mem)
        ours.append(a)
        theirs.append(b)
        ratios.append(a / b)
    print(f"  {'':<28} {'median step ms':>15} {'peak RSS MiB':>13}")
    print(
        f"  {'presk train --backend native':<28} {statistics.median(ours):>15.2f} {max(rss[0]):>13.0f}"
    )
    print(
        f"  {'train.py (PyTorch eager)':<28} {statistics.median(theirs):>15.2f} {max(rss[1]):>13.0f}"
    )
    print(f"  ratio (median of {pairs} pairs, presk / PyTorch): {statistics.median(ratios):.3f}")


def kernel_class(k) -> str:
    from presk_kernel.ir import Loop, Reduce, plain

    def has_fma(body) -> bool:
        return any(
            (isinstance(s, Reduce) and (s.op == "fma" or has_fma(s.body)))
            or (isinstance(s, Loop) and has_fma(s.body))
            for s in body
        )

    if k.site.startswith("adamw"):
        return "optimizer"
    if k.layout.parts:  # a slice group (presk_kernel.slices): products, softmax and copies
        return "slices"
    if has_fma(plain(k.body)):  # a laid-out body: the nest it lays out
        return "contraction"
    if "softmax" in k.name or any("softmax" in s for s in k.steps):
        return "softmax"
    if k.name == "fill":
        return "fill"
    return "elementwise"


def breakdown(
    psk: Path, dims: dict, steps: int, threads: int, quick: bool, clock: str, table: bool
) -> None:
    """Each launch's time by class (in this process: `--breakdown`); `table`: the
    contractions one by one (`contractions`)."""
    if quick:
        exec(QUICK_INIT, {})
    from presk_ad.step import Trainer
    from presk_cback.native import NativeEntry
    from presk_cli.native import lower, storage
    from presk_cli.native_train import NATIVE_STEP, native_step
    from presk_cli.pipeline import run_pipeline
    from presk_core.run import stack_samples
    from presk_kernel.lower import argument_leaves
    from presk_syntax.pipeline import Context

    ctx = Context(consts={k: str(dims[k]) for k in ("V", "D", "H", "L")}, check=True)
    core = run_pipeline("core", str(psk), ctx)
    trainer = Trainer(core, core.trainings[0], str(psk.parent), 0, 64, 1)
    step = native_step(trainer.interp.program, trainer.objective)
    batch = stack_samples(trainer.run.batch_type, trainer.samples[: trainer.batch_size])
    args = [batch, trainer.theta, trainer.m, trainer.v, np.full((), 1.0), np.full((), 1e-4)]
    name = NATIVE_STEP.format(trainer.objective)
    schedule = lower(step, name, trainer.dims, args, "f32", threads)
    start = time.perf_counter()
    entry = NativeEntry(schedule, timed="cpu" if clock == "cpu" else True)
    print(f"  compiled in {time.perf_counter() - start:.1f} s ({len(entry.source)} units)")
    # in their storage types, read where they lie as the training loop's arena holds them
    inputs = storage(schedule, argument_leaves(args), stored=True)
    schedule = entry.schedule  # what runs: a product and its epilogue one launch (dot+add)
    classes = [kernel_class(launch.kernel) for launch in schedule.launches]
    ns = np.zeros(len(classes) + 1)
    entry.run_timed(inputs, ns)  # warm
    ns[:] = 0
    walls = []
    tick = time.thread_time if clock == "cpu" else time.perf_counter
    for _ in range(steps):
        start = tick()
        entry.run_timed(inputs, ns)
        walls.append(tick() - start)
    per = {c: 0.0 for c in CLASSES}
    count = {c: 0 for c in CLASSES}
    for c, t in zip(classes, ns[:-1], strict=True):
        per[c] += t / steps / 1e6
        count[c] += 1
    per["zeroing"] = ns[-1] / steps / 1e6
    wall = statistics.mean(walls) * 1e3
    per["host"] = wall - sum(per.values())
    what = "CPU time of each launch" if clock == "cpu" else "a clock around each launch"
    print(f"  {len(classes)} launches, {wall:.2f} ms a step (mean of {steps}; {what}):")
    for c in CLASSES:
        n = f"{count[c]} launches" if count[c] else ""
        print(f"    {c:<12} {per[c]:>9.2f} ms {100 * per[c] / wall:>5.1f}%  {n}")
    kinds: dict[tuple, list] = {}  # launches of one kernel at one shape
    for c, t, launch in zip(classes, ns[:-1], schedule.launches, strict=True):
        k = launch.kernel
        shapes = " ".join("x".join(str(a.length) for a in b.axes) or "()" for b in k.buffers)
        kind = kinds.setdefault((k.name[:32], shapes[:56]), [0, 0.0, 0])
        kind[0] += 1
        kind[1] += t / steps / 1e6
        kind[2] += multiply_adds(k) if c == "contraction" else 0
    print("  the kinds of launch that take longest (GFLOP/s for contractions):")
    for (name, shapes), (n, t, macs) in sorted(kinds.items(), key=lambda p: -p[1][1])[:12]:
        rate = f"{2 * macs / t / 1e6:6.1f}" if macs else ""
        print(f"    {t:>9.2f} ms {n:>3}x {name:<32} {shapes:<56} {rate}")
    if table:
        contractions(schedule, classes, ns[:-1] / steps / 1e6)


def ein(k) -> tuple[str, str]:
    """A contraction's product as the GEMM sees it (`m×n×k`, batch, each operand's row and
    column strides: `A 1,384` is A[m, k] read down its columns, a transposed operand) and
    its path: `gemm` (the layout packs it) or `nest` (the kernel's loops)."""
    from presk_cback.contract import contraction
    from presk_kernel.ir import Reduce, plain

    g = contraction(k, prologues=True)  # a GEMM with its epilogue or a computed operand
    if g is None:
        folds = [s for s in _statements(plain(k.body)) if isinstance(s, Reduce) and s.op == "fma"]
        summed = ",".join(f"{v}={n}" for r in folds for v, _, n in r.vars)
        shapes = " ".join("x".join(str(a.length) for a in b.axes) for b in k.buffers)
        return f"fold over {summed}: {shapes}", "nest"
    (ca, cb, cc), kv = g.coefs, g.kvar
    batch = "x".join(str(lp.extent) for lp in g.batch)
    text = f"{g.m.extent}x{g.n.extent}x{g.k}" + (f" batch {batch}" if batch else "")
    text += f"  A {ca[g.m.var]},{ca[kv]} B {cb[kv]},{cb[g.n.var]} C {cc[g.m.var]},1"
    return text, "gemm" if {g.a, g.b} <= set(k.layout.pack) else "nest"


def _statements(body):
    from presk_kernel.ir import Loop, Reduce

    for s in body:
        yield s
        if isinstance(s, (Loop, Reduce)):
            yield from _statements(s.body)


def contractions(schedule, classes: list[str], ms: np.ndarray) -> None:
    """Each contraction's launches by kernel and product: time, GFLOP/s, path."""
    rows: dict[tuple, list] = {}
    for c, t, launch in zip(classes, ms, schedule.launches, strict=True):
        if c != "contraction":
            continue
        k = launch.kernel
        text, path = ein(k)
        row = rows.setdefault((k.name[:24], text, path), [0, 0.0, 0])
        row[0] += 1
        row[1] += t
        row[2] += multiply_adds(k)
    total = sum(r[1] for r in rows.values())
    macs = sum(r[2] for r in rows.values())
    print(f"  contractions: {total:.2f} ms, {2 * macs / total / 1e6:.1f} GFLOP/s overall")
    print(f"    {'ms':>9} {'n':>4} {'GF/s':>6} path kernel{'':<19} m x n x k, strides")
    for (name, text, path), (n, t, macs) in sorted(rows.items(), key=lambda p: -p[1][1]):
        rate = f"{2 * macs / t / 1e6:6.1f}" if macs else f"{'':6}"
        print(f"    {t:>9.2f} {n:>3}x {rate} {path:<4} {name:<24} {text}")


def multiply_adds(k) -> int:
    """The fma folds' terms, each loop's extent over its body (a GEMM's m·n·k·batch)."""
    from presk_kernel.ir import Loop, Reduce, plain

    def count(body, outer: int) -> int:
        n = 0
        for s in body:
            if isinstance(s, Loop):
                n += count(s.body, outer * s.extent)
            elif isinstance(s, Reduce):
                inner = outer * math.prod(e for _, _, e in s.vars)
                n += (inner if s.op == "fma" else 0) + count(s.body, inner)
        return n

    return count(plain(k.body), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps of each loop (20)")
    parser.add_argument("--pairs", type=int, default=3, help="alternating runs of each (3)")
    parser.add_argument("--threads", type=int, default=1, help="threads of both (1)")
    parser.add_argument("--dims", default="V=256,D=128,H=4,L=4,T=64,B=8")
    parser.add_argument("--only", choices=["compare", "breakdown"], help="one half only")
    parser.add_argument(
        "--quick-init", action="store_true", help="θ's normals in doubles (the course GPT: minutes)"
    )
    parser.add_argument(
        "--clock", choices=["wall", "cpu"], default="wall", help="the breakdown's clock (wall)"
    )
    parser.add_argument(
        "--contractions", action="store_true", help="the breakdown lists each contraction"
    )
    parser.add_argument("--breakdown-in", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dims = {k: int(v) for k, v in (p.split("=") for p in args.dims.split(","))}
    if args.breakdown_in:
        breakdown(
            Path(args.breakdown_in),
            dims,
            args.steps,
            args.threads,
            args.quick_init,
            args.clock,
            args.contractions,
        )
        return
    title = ", ".join(f"{k} {v}" for k, v in dims.items())
    print(f"MiniGPT training step ({title}; f32), {args.threads} thread(s):")
    with tempfile.TemporaryDirectory(prefix="bench-minigpt-") as tmp:
        folder = Path(tmp)
        psk = prepare(folder, dims, dims["B"])
        if args.only != "breakdown":
            compare(folder, psk, dims, args.steps, args.pairs, args.threads, args.quick_init)
        if args.only != "compare":
            cmd = [sys.executable, __file__, "--breakdown-in", str(psk), "--dims", args.dims]
            cmd += ["--steps", str(args.steps), "--threads", str(args.threads)]
            cmd += ["--clock", args.clock] + (["--quick-init"] if args.quick_init else [])
            cmd += ["--contractions"] if args.contractions else []
            env = {**os.environ, "PRESK_CACHE": str(folder / "cache")}
            done = subprocess.run(cmd, cwd=ROOT, text=True, env=env, check=False)
            if done.returncode:
                raise SystemExit("bench_minigpt: the breakdown failed")


if __name__ == "__main__":
    main()
