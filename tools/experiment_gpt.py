"""The course GPT trained natively and by its exported train.py, from the same initial
weights on the same batches: `make experiment-gpt`.

    .venv/bin/python tools/experiment_gpt.py [--steps N] [--threads T] [--realize f32|f64]
        [--out DIR] [--data FILE] [--const NAME=V]… [--seed S] [--init torch|presk] [--bits B]
        [--backend native|kernel]

1. **The start.** θ₀ is the exported module's own initialization (torch's initializers at
   `--seed`), written into Presk's leaf paths (a stack's blocks stacked) and fed to both
   sides; `--init presk` draws it instead as `presk train --seed` does (presk_ad.step.Trainer,
   at `--bits`: exact, and about ten minutes at the course's size on this machine). The
   batches are the run's: its shuffle (the interpreter's permutation, not train.py's
   `torch.randperm`), the first N batches of B windows. The horizon is N (`--steps`), so
   both schedules run the same warm-up and cosine.
2. **Natively**: the steps of `presk train --backend native --realize f32` (the same
   objects: presk_cli.native_train.NativeTrainer, one compiled call a step), each timed as
   `presk train` times it (the batch, the call, reading the outputs, the finite check).
3. **In PyTorch**: `presk export --target pytorch`'s module and train.py, in a process of
   its own: train.py's own `build_model`, `make_optimizer` and `train_step` (eager,
   float32, `torch.optim.AdamW`, `--threads` intra-op threads), θ₀ loaded into the module
   (a Presk path to the module's parameter names, as the export's conformance test maps
   them), each step's batch from the same indices through train.py's `Data.batch`.
4. **The comparison**: each side's metrics as JSON lines in DIR (`native.jsonl`,
   `pytorch.jsonl`, written by `presk train --metrics`'s writer, presk_cli.metrics: the
   side's settings, then step, epoch, loss, lr, grad_norm, seconds), the largest |Δloss| and |Δloss|/loss over the
   steps, the relative distance of the two θ after the last step, and both curves drawn
   into DIR/loss_curves.png (matplotlib, Agg).

DIR is the run's checkpoint folder (corpus/nlp/ckpt/) by default; the export goes to
DIR/export. The first native run compiles the step (about 10 s at the course's size on this
machine; the cache keeps it for the next run). Each JSON-lines file is written a line a
step, flushed, so that it can be followed while the run goes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from presk_cli.metrics import MetricsWriter, read_metrics

ROOT = Path(__file__).resolve().parents[1]
GPT = ROOT / "corpus" / "nlp" / "05_gpt.psk"


# ---- the program, its run and its export ---------------------------------------------


def load(psk: Path, consts: dict[str, str], data: str | None):
    """The PSK-Core program of `psk` with `consts`, its training run opened on its data
    file (or `data`), as `presk train` loads them; SystemExit with the diagnostics."""
    from presk_cli.commands import _held_type
    from presk_cli.pipeline import run_pipeline
    from presk_syntax.pipeline import Context
    from presk_types.training import replace_data

    ctx = Context(consts=consts, check=True, data_header=None if data else _held_type)
    elaborated = run_pipeline("elab", str(psk), ctx)
    program, runs = elaborated.program, elaborated.runs
    if not runs:
        raise SystemExit(f"experiment_gpt: {psk} has no training run")
    problems = list(ctx.diagnostics)
    if data:
        problem = replace_data(runs[0], program.main, data, _held_type)
        problems += [problem] if problem is not None else []
    errors = [d for d in problems if d.is_error]
    if errors:
        raise SystemExit("experiment_gpt: " + "; ".join(f"[{d.code}] {d.message}" for d in errors))
    core = run_pipeline("core", str(psk), ctx, start=elaborated, first="elab")
    return core, core.trainings[0]


def export(psk: Path, consts: dict[str, str], out: Path, data: str | None = None) -> None:
    """The exported module files and train.py in `out` (no conformance test: its steps on
    the 256-bit interpreter would take hours at this size); `data` replaces the run's file."""
    from presk_cli.pipeline import run_pipeline
    from presk_core.lower import lower_checked
    from presk_export.export import write_files
    from presk_export.pyformat import lay_out
    from presk_export.pytorch import Export, Options
    from presk_export.train_export import Script, training_run
    from presk_syntax.pipeline import Context

    program = run_pipeline("elab", str(psk), Context(consts=consts)).program
    core, infos = lower_checked(program)
    ex = Export(program, core, infos, Options())
    files = ex.files()
    files["train.py"] = lay_out(Script(ex, training_run(ex, data), str(out)).render())
    out.mkdir(parents=True, exist_ok=True)
    write_files(str(out), files)


def write_atomic(path: Path, text: str) -> None:
    from presk_core.data import write_text

    write_text(str(path), text)


def save_tree(path: Path, tree: dict) -> list[str]:
    """A tree of reals as an .npz of its leaves in order (`a0`, `a1`, …); their paths."""
    from presk_core.data import atomic

    with atomic(str(path)) as f:
        np.savez(f, **{f"a{i}": np.asarray(x, np.float64) for i, x in enumerate(tree.values())})
    return list(tree)


# ---- the native side --------------------------------------------------------------------


def run_native(args, core, run, out: Path) -> tuple[list[dict], dict, dict]:
    """θ₀ and the batches written for the PyTorch side (plan.json, theta0.npz); the native
    steps run and logged to native.jsonl. (the metrics, θ₀, θ after the last step)."""
    from presk_ad.step import Trainer, finite
    from presk_cli.native_train import NativeTrainer, _tree

    folder = str(args.psk.parent)
    data = os.path.abspath(os.path.join(folder, run.data))
    start = time.perf_counter()
    if args.init == "presk":
        trainer = Trainer(core, run, folder, args.seed, args.bits, args.steps)
        theta0 = {
            k: np.asarray(x, dtype=object).astype(np.float64) for k, x in trainer.theta.items()
        }
        rates = [float(trainer.lr(t)) for t in range(1, args.steps + 1)]
        how = f"drawn by presk at {args.bits} bits"
    else:
        paths = [leaf.path for leaf in core.layout(run.model).leaves]
        _, _, _, model = exported(str(out / "export"), data, "float32", args.seed)
        theta0 = tree_of(model, paths)
        del model
        trainer = light_trainer(core, run, folder, theta0)
        rates = [trainer.lr(t, args.steps) for t in range(1, args.steps + 1)]
        how = "the exported module's initializers"
    drawn = time.perf_counter() - start
    start = time.perf_counter()
    native = NativeTrainer(trainer, args.backend, args.realize, args.threads)
    built = time.perf_counter() - start
    print(
        f"  θ₀ ({how}, seed {args.seed}) in {drawn:.1f} s; the step lowered and compiled"
        f" ({args.backend}, {args.realize}) in {built:.1f} s",
        flush=True,
    )
    batches = [native.batch(t)[0] for t in range(1, args.steps + 1)]
    plan = {
        "export": str(out / "export"),
        "data": data,
        "realize": args.realize,
        "threads": args.threads,
        "horizon": args.steps,
        "paths": save_tree(out / "theta0.npz", theta0),
        "batches": batches,
        "per_epoch": trainer.per_epoch,
        "settings": side_settings(args, "exported train.py (PyTorch eager)", run.model),
    }
    write_atomic(out / "plan.json", json.dumps(plan))
    theta = []
    settings = side_settings(args, f"presk train --backend {args.backend}", run.model)
    log = MetricsWriter(str(out / "native.jsonl"), settings, keep=True)
    for t in range(1, args.steps + 1):
        start = time.perf_counter()
        indices, batch = native.batch(t)
        loss, grads, theta = native.step(batch, t, rates[t - 1])
        finite(t, indices, loss, _tree(native, grads, copy=False))
        seconds = time.perf_counter() - start
        norm = math.sqrt(math.fsum(float(np.sum(np.square(g, dtype=np.float64))) for g in grads))
        log.step(t, (t - 1) // trainer.per_epoch, loss, rates[t - 1], norm, seconds)
        if args.log_every and t % args.log_every == 0:
            print(
                f"  native   step {t}/{args.steps}  loss {loss:.6f}  {seconds * 1e3:.0f} ms",
                flush=True,
            )
    log.close()
    return log.rows, theta0, _tree(native, theta)


def side_settings(args, side: str, model: str) -> dict:
    """The first line of a side's metrics (presk_cli.metrics): what ran, and how."""
    return {"side": side, "model": model, "backend": args.backend, "realize": args.realize,
            "threads": args.threads, "seed": args.seed, "init": args.init,
            "horizon": args.steps}  # fmt: skip


# ---- the PyTorch side (a process of its own) -------------------------------------------


def module_names(module, path: str):
    """The module's parameter name(s) of a Presk leaf path: a name, or for a stack (an
    nn.ModuleList) a list of the blocks' (`blocks.ln1.γ` → [`blocks.0.ln1.γ`, …])."""
    from torch import nn

    def walk(m, parts, prefix):
        head, *rest = parts
        if not rest:
            return prefix + head
        child = getattr(m, head)
        if isinstance(child, nn.ModuleList):
            return [walk(b, rest, f"{prefix}{head}.{i}.") for i, b in enumerate(child)]
        return walk(child, rest, f"{prefix}{head}.")

    return walk(module, path.split("."), "")


def tree_of(model, paths: list[str]) -> dict:
    """The module's parameters as a Presk tree of doubles (a stack's blocks stacked)."""
    import torch

    state = model.state_dict()

    def gather(names):
        if isinstance(names, list):
            return np.stack([gather(n) for n in names])
        return state[names].detach().to(torch.float64).numpy()

    return {p: gather(module_names(model, p)) for p in paths}


def load_tree(model, tree: dict, dtype) -> None:
    """A Presk tree (paths → arrays) into the module's parameters, in `dtype`."""
    import torch

    state = {}

    def place(names, value):
        if isinstance(names, list):
            for n, v in zip(names, value, strict=True):
                place(n, v)
        else:
            state[names] = torch.tensor(value, dtype=dtype)

    for p, value in tree.items():
        place(module_names(model, p), value)
    model.load_state_dict(state)


def exported(folder: str, data: str, dtype_name: str = "float32", seed: int = 0):
    """(torch, the exported train.py, its Data, its model at `seed`) from an export folder."""
    sys.path.insert(0, folder)
    import torch
    import train  # the exported train.py

    dtype = getattr(torch, dtype_name)
    torch.set_default_dtype(dtype)
    torch.manual_seed(seed)
    samples = train.Data(data, dtype)
    return torch, train, samples, train.build_model({**train.DIMS, **samples.dims})


def drawn_theta(core, run, seed: int = 0) -> dict:
    """θ at the run's shapes, each leaf drawn N(0, 0.02²) from `seed` (the benchmarks' θ)."""
    rng = np.random.default_rng(seed)
    dims = run.dims()

    def length(lin) -> int:  # a Lin of the run's dimensions
        return lin.constant + sum(c * dims[d] for d, c in lin.coeffs)

    theta = {}
    for leaf in core.layout(run.model).leaves:
        axes = [n for _, n in leaf.stack] + [a.length for a in leaf.type.shape.axes]
        theta[leaf.path] = rng.standard_normal([length(a) for a in axes]) * 0.02
    return theta


def course_call(consts: dict, data: str, forward: bool = False):
    """(trainer, program, entry, args): the course GPT's native training step on its first
    batch at a drawn θ (`drawn_theta`), or with `forward` its objective alone (θ, batch)."""
    from presk_cli.native_train import NATIVE_STEP, native_step
    from presk_core.run import stack_samples

    core, run = load(GPT, consts, data)
    theta = drawn_theta(core, run)
    trainer = light_trainer(core, run, str(GPT.parent), theta)
    (b,) = dict(run.batch).values()
    batch = stack_samples(run.batch_type, [trainer.samples[i] for i in range(b)])
    if forward:
        return trainer, trainer.interp.program, run.objective, [theta, batch]
    step = native_step(trainer.interp.program, run.objective)
    args = [batch, theta, trainer.m, trainer.v, np.full((), 1.0), np.full((), 1e-4)]
    return trainer, step, NATIVE_STEP.format(run.objective), args


def light_trainer(core, run, folder: str, theta: dict):
    """What NativeTrainer reads of presk_ad.step.Trainer, around a given θ₀ (no draw), and
    `lr(t, horizon)`, the rate of `adamw.lr` on the reference interpreter."""
    from types import MethodType, SimpleNamespace

    from presk_ad.step import Trainer, opened, training_step
    from presk_core import data as D
    from presk_core import mpfr as M
    from presk_core.interp import Interpreter
    from presk_core.passes import verified
    from presk_types.elab import type_from_text

    if run.file_type is None:
        run = opened(run, folder)
    program = verified(training_step(core, run.objective), "training step")
    interp = Interpreter(program, 256)
    path, held = os.path.join(folder, run.data), type_from_text(run.file_type)
    if hasattr(D, "read_columns"):
        columns = D.read_columns(path, held)
        samples = D.samples(columns)
    else:  # an older tree's packages (tools/bench_threads.py --against): rows alone
        columns, samples = None, D.read(path, held)
    (b,) = dict(run.batch).values()

    def lr(t: int, horizon: int) -> float:
        with M.precision(256):
            at, total = M.real(t), M.real(horizon)
        return float(interp.run("adamw.lr", [at, total], {}))

    zeros = {p: np.zeros_like(x) for p, x in theta.items()}
    v = dict(zeros)
    trainer = SimpleNamespace(
        interp=interp,
        objective=run.objective,
        theta=theta,
        m=zeros,
        v=v,
        fresh=(zeros, v),  # Trainer.fresh: the moments as they start
        dims=run.dims(),
        run=run,
        columns=columns,
        samples=samples,
        batch_size=b,
        per_epoch=len(samples) // b,
        lr=lr,
        _order=None,
        key=None,  # NativeTrainer's: an objective that draws takes one (the course GPT's not)
    )
    trainer.batch = MethodType(Trainer.batch, trainer)  # the one order of batches
    return trainer


def pytorch_worker(folder: Path) -> None:
    plan = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
    dtype_name = "float64" if plan["realize"] == "f64" else "float32"
    torch, train, data, model = exported(plan["export"], plan["data"], dtype_name)
    torch.set_num_threads(plan["threads"])
    with np.load(folder / "theta0.npz") as z:
        load_tree(
            model, {p: z[f"a{i}"] for i, p in enumerate(plan["paths"])}, getattr(torch, dtype_name)
        )
    optimizer, schedule = train.make_optimizer(model, plan["horizon"])
    log = MetricsWriter(str(folder / "pytorch.jsonl"), plan["settings"])
    for t, indices in enumerate(plan["batches"], 1):
        start = time.perf_counter()
        lr = optimizer.param_groups[0]["lr"]
        loss = train.train_step(model, optimizer, schedule, data.batch(indices))
        seconds = time.perf_counter() - start
        # the step's gradient is still in .grad (train_step zeroes it before the next)
        squares = (float(torch.sum(p.grad.double() ** 2)) for p in model.parameters())
        log.step(t, (t - 1) // plan["per_epoch"], loss, lr, math.sqrt(math.fsum(squares)), seconds)
    log.close()
    save_tree(folder / "theta_pytorch.npz", tree_of(model, plan["paths"]))


# ---- the comparison ---------------------------------------------------------------------


def read_rows(path: Path) -> list[dict]:
    return read_metrics(str(path))[1]


def distance(a: dict, b: dict) -> float:
    """‖a − b‖₂ / ‖b‖₂ over every leaf of two trees of the same paths."""
    num = math.fsum(float(np.sum((np.asarray(a[k]) - b[k]) ** 2)) for k in b)
    den = math.fsum(float(np.sum(np.asarray(b[k]) ** 2)) for k in b)
    return math.sqrt(num / den)


def compare(native: list[dict], torch_rows: list[dict]) -> dict:
    """The largest gaps between the two curves, and where."""
    diffs = [abs(a["loss"] - b["loss"]) for a, b in zip(native, torch_rows, strict=True)]
    rel = [d / abs(b["loss"]) for d, b in zip(diffs, torch_rows, strict=True)]
    lrs = [
        abs(a["lr"] - b["lr"]) / max(b["lr"], 1e-300)
        for a, b in zip(native, torch_rows, strict=True)
    ]
    at = max(range(len(diffs)), key=diffs.__getitem__)
    return {
        "max_abs": diffs[at],
        "at": at + 1,
        "max_rel": max(rel),
        "mean_abs": statistics.fmean(diffs),
        "lr_rel": max(lrs),
    }


def plot(native: list[dict], torch_rows: list[dict], title: str, label: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, height_ratios=(3, 1))
    steps = [r["step"] for r in native]
    top.plot(steps, [r["loss"] for r in native], label=label, lw=1.2)
    top.plot(
        steps, [r["loss"] for r in torch_rows], "--", label="exported train.py (PyTorch)", lw=1.2
    )
    top.set_ylabel("batch loss (nats)")
    top.set_title(title, fontsize=10)
    top.legend()
    top.grid(alpha=0.3)
    diff = [abs(a["loss"] - b["loss"]) for a, b in zip(native, torch_rows, strict=True)]
    bottom.semilogy(steps, [d if d > 0 else math.nan for d in diff], ".-", lw=1)
    bottom.set_ylabel("|Δ loss|")
    bottom.set_xlabel("step")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    from presk_core.data import atomic

    with atomic(str(path)) as f:
        fig.savefig(f, dpi=110, format="png")
    plt.close(fig)


def median_ms(rows: list[dict]) -> float:
    times = [r["seconds"] for r in rows[1:]] or [rows[0]["seconds"]]
    return statistics.median(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--steps", type=int, default=50, help="steps of each run, the horizon (50)")
    add("--threads", type=int, default=1, help="threads of both (1)")
    add("--realize", choices=["f32", "f64"], default="f32", help="native type, torch dtype")
    add("--backend", choices=["native", "kernel"], default="native")
    add("--out", help="where the metrics go (default: the run's checkpoint folder)")
    add("--data", help="another .psk.d file than the run's")
    add("--const", action="append", default=[], help="NAME=V, as presk's --const")
    add("--seed", type=int, default=0, help="θ₀'s seed (0)")
    add("--init", choices=["torch", "presk"], default="torch", help="who draws θ₀ (torch)")
    add("--bits", type=int, default=256, help="with --init presk: its precision (256)")
    add("--log-every", type=int, default=10)
    add("--psk", type=Path, default=GPT, help=argparse.SUPPRESS)
    add("--pytorch-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pytorch_worker:
        pytorch_worker(args.pytorch_worker)
        return
    if args.steps < 1:
        parser.error("--steps must be positive")
    consts = dict(c.split("=", 1) for c in args.const)
    core, run = load(args.psk, consts, args.data)
    out = Path(args.out) if args.out else args.psk.parent / run.checkpoint[0]
    out.mkdir(parents=True, exist_ok=True)
    dims = ", ".join(f"{k} {v}" for k, v in run.dims().items())
    title = f"{run.model} ({dims}{', ' if consts else ''}{', '.join(args.const)}), {args.realize}"
    print(
        f"experiment-gpt: {args.steps} steps of {title}, {args.threads} thread(s), seed {args.seed}"
    )
    start = time.perf_counter()
    export(args.psk, consts, out / "export", args.data)
    print(f"  exported to {out / 'export'} in {time.perf_counter() - start:.1f} s", flush=True)
    native, _, theta_native = run_native(args, core, run, out)
    del core, run
    cmd = [sys.executable, __file__, "--pytorch-worker", str(out)]
    start = time.perf_counter()
    if subprocess.run(cmd, check=False).returncode:
        raise SystemExit("experiment_gpt: the PyTorch run failed")
    print(f"  PyTorch: {args.steps} steps in {time.perf_counter() - start:.1f} s", flush=True)
    theirs = read_rows(out / "pytorch.jsonl")
    with np.load(out / "theta_pytorch.npz") as z:
        theta_torch = {k: z[f"a{i}"] for i, k in enumerate(theta_native)}
    gaps = compare(native, theirs)
    plot(
        native,
        theirs,
        f"{title}: {args.steps} steps from the same θ₀ and batches",
        f"presk train --backend {args.backend}",
        out / "loss_curves.png",
    )
    a, b = median_ms(native), median_ms(theirs)
    print(f"  {'':<40} {'median step ms':>15} {'first loss':>11} {'last loss':>10}")
    for name, rows, ms in (
        ("presk train --backend " + args.backend, native, a),
        ("exported train.py (PyTorch eager)", theirs, b),
    ):
        print(f"  {name:<40} {ms:>15.1f} {rows[0]['loss']:>11.6f} {rows[-1]['loss']:>10.6f}")
    print(f"  step time ratio native / PyTorch: {a / b:.2f}")
    print(
        f"  loss: max |Δ| {gaps['max_abs']:.3e} (step {gaps['at']}), max |Δ|/loss"
        f" {gaps['max_rel']:.3e}, mean |Δ| {gaps['mean_abs']:.3e}; rates within {gaps['lr_rel']:.1e}"
    )
    print(
        f"  θ after {args.steps} steps: ‖θ_native − θ_torch‖ / ‖θ_torch‖ = {distance(theta_native, theta_torch):.3e}"
    )
    print(
        f"  metrics: {out / 'native.jsonl'}, {out / 'pytorch.jsonl'}; curves: {out / 'loss_curves.png'}"
    )


if __name__ == "__main__":
    main()
