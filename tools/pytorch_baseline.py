"""One training step and one forward pass of the course GPT, natively (f32, f64) and in
PyTorch's forms a user would pick, interleaved in one run: `make pytorch-baseline`.

    .venv/bin/python tools/pytorch_baseline.py [--threads T] [--repeat R] [--torch-f64]
        [--const NAME=V]… [--data FILE] [--cache DIR] [--no-f64] [--no-breakdown]
        [--no-sdpa] [--no-compile] [--compile-mode MODE] [--against PYTHON]
        [--plan PLAN.json]

Each side is a process of its own that sets itself up, then waits for orders on its
standard input (`step`, `forward`) and answers with the time of one call. The PyTorch
sides stay up for the whole run; the native sides come one at a time (at the course's size
a native f64 step holds about 10 GB), each timed in R rounds (after one untimed) in which
the orders go round it and the PyTorch sides in turn, so that all see the same load. Each
figure is the median of its rounds; a native side's ratios are against each PyTorch f32
side in the rounds it shared, and against the best of them (step and forward apart). Before
each order the others' processes must be idle (their CPU time still for 50 ms): after a
call, torch's and OpenMP's thread pools spin for a while, and a side timed meanwhile would
have a core fewer (at two threads on two cores the native step measured 10× slower so).
Peak memory is each process's maximum resident set (ru_maxrss, `os.wait4`): the whole
process, its setup, step and forward pass together (and torch.compile's compilation).

- **PyTorch's sides** (f32): *eager*, the exported module as it is; *sdpa*, its causal
  self-attention rewritten on `F.scaled_dot_product_attention(is_causal=True)` (the same
  parameters; `sdpa_attention`); *compile+sdpa*, that module's objective under
  `torch.compile` (`--compile-mode`, e.g. `max-autotune-no-cudagraphs`; its compilation,
  the first step and the first forward pass, timed apart and undone so that it too starts
  from θ₀; TORCHINDUCTOR_COMPILE_THREADS=1 so that no compile worker runs beside a timed
  side). `--no-sdpa` compiles the eager module instead; `--no-compile` leaves it out.
- `--against PYTHON` adds the native f32 side of another checkout (`/work/main/.venv/bin/
  python`: the same tool run by that tree's packages), up for the whole run beside PyTorch's
  and timed in the same rounds, and its step by kernel class: a change measured before and
  after in one run.
- `--plan PLAN.json` adds the native f32 step under a layout plan of the training step
  (`presk plan FILE --train --realize f32 --profile P --out PLAN.json`, docs/plans.md), up
  for the whole run like `--against`'s side and timed in the same rounds as the default
  layouts' native f32 side: the plan's step over the default's, in one run (`make
  bench-plan`). A planned nest runs on the workers its split names, whatever `--threads`;
  its forward pass is the default's (the plan lays out the step).
- **The same batch and weights.** θ₀ is the exported module's own initialization
  (torch's initializers, seed 0), written by the PyTorch f32 process in Presk's leaf paths
  (a stack's blocks stacked) and read by the others; the batch is the run's first (its
  shuffle, B windows of its data file).
- **Natively**: the training step as `presk train --backend native` takes it
  (presk_cli.native_train.NativeTrainer: the batch in, one call of the compiled step —
  value, gradient and AdamW — θ, m and v kept in the arena, the loss, gradient and θ read
  back, the finite check); the forward pass is the objective `loss` lowered and compiled
  alone, its inputs written once, then one call a time. Lowering and compiling are timed
  in a fresh cache (cold: `--cache` reuses a folder), then again in a new process that
  finds the objects there (warm).
- **PyTorch**: the exported module (`presk export --target pytorch`), train.py's
  `train_step` (zero_grad, the objective, backward, `torch.optim.AdamW`, the schedule),
  and the objective under `torch.no_grad()` for the forward pass; `torch.set_num_threads`
  the same threads. `--torch-f64` adds PyTorch in float64 beside native f64.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from experiment_gpt import GPT, export, exported, light_trainer, load, load_tree, save_tree, tree_of  # noqa: E402

# ---- the sides (each in its own process) ------------------------------------------------


def answer(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def serve(step, forward) -> None:
    """Time one call of `step` or `forward` for each order read, until `quit`."""
    for line in sys.stdin:
        order = line.strip()
        if order == "quit":
            return
        call = {"step": step, "forward": forward}[order]
        start = time.perf_counter()
        call()
        answer(f"{(time.perf_counter() - start) * 1e3:.3f}")


def sdpa_attention(module) -> None:
    """The exported module's causal self-attention (a module holding `wq`, `wk`, `wv` and
    `wo`, its scores masked by a lower triangle) rewritten on
    `F.scaled_dot_product_attention(is_causal=True)`, as a user picking PyTorch's fast form
    writes it: the same parameters, the heads split by the export's own `split_heads`."""
    import torch.nn.functional as F

    cls = getattr(module, "SelfAttention", None)
    split = getattr(module, "split_heads", None)
    if cls is None or split is None:
        raise SystemExit("pytorch_baseline: the export has no SelfAttention to rewrite on sdpa")

    def forward(self, x):
        q, k, v = split(self.wq(x)), split(self.wk(x)), split(self.wv(x))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.permute(0, 2, 1, 3).flatten(2, 3))

    cls.forward = forward


def torch_side(folder: Path, plan: dict, what: str) -> None:
    """A PyTorch side: `float32`/`float64` eager, `+sdpa` (the attention on
    scaled_dot_product_attention), `+compile` (the objective under torch.compile, at
    plan["compile_mode"]: its first step and forward pass, the compilation, timed apart and
    undone — θ, the optimizer's moments and the schedule restored — so that every side
    starts from θ₀)."""
    import copy

    dtype_name, *forms = what.split("+")
    torch, train, data, model = exported(plan["export"], plan["data"], dtype_name)
    torch.set_num_threads(plan["threads"])
    if "sdpa" in forms:
        sdpa_attention(sys.modules[type(model).__module__])
    theta0 = folder / "theta0.npz"
    if not theta0.exists():  # the first side: its own initialization is everyone's θ₀
        save_tree(theta0, tree_of(model, plan["paths"]))
    else:
        with np.load(theta0) as z:
            tree = {p: z[f"a{i}"] for i, p in enumerate(plan["paths"])}
        load_tree(model, tree, getattr(torch, dtype_name))
    optimizer, schedule = train.make_optimizer(model, 1000)
    batch = data.batch(plan["indices"])
    objective = getattr(train, plan["objective"])
    setup = {"torch": torch.__version__}
    if "compile" in forms:
        mode = plan.get("compile_mode") or None
        objective = torch.compile(objective, mode=mode)
        setattr(train, plan["objective"], objective)  # train_step calls it by this name
        saved = [copy.deepcopy(x.state_dict()) for x in (model, optimizer, schedule)]
        start = time.perf_counter()
        train.train_step(model, optimizer, schedule, batch)
        setup["compile: step s"] = round(time.perf_counter() - start, 1)
        start = time.perf_counter()
        with torch.no_grad():
            objective(model, batch).item()
        setup["compile: forward s"] = round(time.perf_counter() - start, 1)
        for x, state in zip((model, optimizer, schedule), saved, strict=True):
            x.load_state_dict(state)

    def forward():
        with torch.no_grad():
            objective(model, batch).item()

    answer(json.dumps(setup))
    serve(lambda: train.train_step(model, optimizer, schedule, batch), forward)


def _compiled(setup: dict) -> str:
    """The launches the native entries compile (a GEMM's epilogues and prologues fused at
    emission), when the side says them."""
    if "step launches compiled" not in setup:
        return ""
    step, forward = setup["step launches compiled"], setup["forward launches compiled"]
    return f" (compiled: step {step}, forward {forward})"


def native_side(
    folder: Path, plan: dict, realize: str, warm_only: bool, planned: bool = False
) -> None:
    from presk_cli.native import compiled, lower, storage
    from presk_cli.native_train import NativeTrainer
    from presk_kernel.lower import argument_leaves

    start = time.perf_counter()
    core, run = load(Path(plan["psk"]), plan["consts"], plan.get("data_flag"))
    with np.load(folder / "theta0.npz") as z:
        theta = {p: z[f"a{i}"] for i, p in enumerate(plan["paths"])}
    trainer = light_trainer(core, run, str(Path(plan["psk"]).parent), theta)
    program = trainer.interp.program
    front = time.perf_counter() - start
    times = {"front end": front}
    start = time.perf_counter()
    layouts = None
    if planned:  # the step under `--plan`'s layouts (presk_cli.plans: the file checked)
        from presk_cli.plans import read_plan

        layouts = read_plan(plan["layout_plan"])
    native = NativeTrainer(trainer, "native", realize, plan["threads"], layouts)
    times["step: lower, compile"] = time.perf_counter() - start
    indices = plan["indices"]
    batch = native.batch(1)[1]
    assert native.batch(1)[0] == indices, "the batch is not the run's first"
    args = [theta, batch]
    start = time.perf_counter()
    schedule = lower(program, run.objective, run.dims(), args, realize, plan["threads"])
    times["forward: lower"] = time.perf_counter() - start
    start = time.perf_counter()
    entry = compiled(schedule)
    times["forward: compile"] = time.perf_counter() - start
    times["step launches"] = len(native.schedule.launches)
    times["forward launches"] = len(schedule.launches)
    # what the entries compile: a GEMM's epilogues and prologues fused (presk_kernel.epilogue)
    times["step launches compiled"] = len(native.entry.schedule.launches)
    times["forward launches compiled"] = len(entry.schedule.launches)
    answer(json.dumps(times))
    if warm_only:
        return
    from presk_cback.load import pointer

    entry.run(storage(schedule, argument_leaves(args)))  # the inputs into the arena, once
    arena = pointer(entry.arena, "char")

    def step():  # as presk train's: the finite check a scan in C of the arena's gradient
        loss, grads, _ = native.step(batch, 1, 1e-4)
        native.check(1, indices, loss, grads)

    def forward():
        if entry.module.lib.presk_entry(arena):
            raise SystemExit("pytorch_baseline: an index out of range")

    serve(step, forward)


def breakdown_side(folder: Path, plan: dict, realize: str, steps: int) -> None:
    """The native step compiled with a clock around each launch (NativeEntry(timed=True)),
    run `steps` times on the batch; each launch's time summed by class as
    tools/bench_minigpt.py classes them (host: the call's wall time beyond the launches and
    the zeroing, here the inputs written and the outputs read)."""
    from bench_minigpt import CLASSES, kernel_class
    from presk_cback.native import NativeEntry
    from presk_cli.native import lower, storage
    from presk_cli.native_train import NATIVE_STEP, native_step
    from presk_core.run import stack_samples
    from presk_kernel.lower import argument_leaves, lower_entry

    core, run = load(Path(plan["psk"]), plan["consts"], plan.get("data_flag"))
    with np.load(folder / "theta0.npz") as z:
        theta = {p: z[f"a{i}"] for i, p in enumerate(plan["paths"])}
    trainer = light_trainer(core, run, str(Path(plan["psk"]).parent), theta)
    step = native_step(trainer.interp.program, run.objective)
    batch = stack_samples(run.batch_type, [trainer.samples[i] for i in plan["indices"]])
    args = [batch, theta, trainer.m, trainer.v, np.full((), 1.0), np.full((), 1e-4)]
    name = NATIVE_STEP.format(run.objective)
    schedule = lower(step, name, trainer.dims, args, realize, plan["threads"])
    start = time.perf_counter()
    entry = NativeEntry(schedule, timed=True)
    compile_s = time.perf_counter() - start
    # in their storage types, read where they lie (as the training loop's arena holds θ,
    # m and v): a double's rounding to f32 each call is no host time of a step
    inputs = storage(schedule, argument_leaves(args), stored=True)
    # a fused kernel's class by the operations it computes (a softmax fused with the scores'
    # scale is the softmax's): the names of its steps' sites in the schedule before fusion
    names: dict[str, set[str]] = {}
    for lc in lower_entry(step, name, trainer.dims, args, realize).launches:
        names.setdefault(lc.kernel.site, set()).add(lc.kernel.name)

    def classed(k) -> str:
        c = kernel_class(k)
        steps = " ".join(n for site in k.steps for n in names.get(site, ()))
        return "softmax" if c == "elementwise" and "softmax" in steps else c

    schedule = entry.schedule  # what runs: a product and its epilogue one launch (dot+add)
    classes = [classed(launch.kernel) for launch in schedule.launches]
    ns = np.zeros(len(classes) + 1)
    entry.run_timed(inputs, ns)  # warm
    ns[:] = 0
    walls = []
    for _ in range(steps):
        start = time.perf_counter()
        entry.run_timed(inputs, ns)
        walls.append(time.perf_counter() - start)
    per = dict.fromkeys(CLASSES, 0.0)
    count = dict.fromkeys(CLASSES, 0)
    for c, t in zip(classes, ns[:-1], strict=True):
        per[c] += t / steps / 1e6
        count[c] += 1
    per["zeroing"] = ns[-1] / steps / 1e6
    wall = statistics.mean(walls) * 1e3
    per["host"] = wall - sum(per.values())
    lines = [
        f"  native {realize} step by kernel class: {len(classes)} launches, {wall:.0f} ms a call"
        f" (mean of {steps}; the timed build compiled in {compile_s:.0f} s)"
    ]
    for c in CLASSES:
        n = f"{count[c]} launches" if count[c] else ""
        lines.append(f"    {c:<12} {per[c]:>9.1f} ms {100 * per[c] / wall:>5.1f}%  {n}")
    worst = sorted(zip(ns[:-1], schedule.launches, strict=True), key=lambda p: -p[0])[:8]
    lines.append("  the slowest launches:")
    for t, launch in worst:
        k = launch.kernel
        lines.append(f"    {t / steps / 1e6:>8.1f} ms  {k.name[:48]:<48} {k.site}")
    answer(json.dumps({"text": "\n".join(lines)}))


# ---- the run ----------------------------------------------------------------------------

AGAINST = "native f32 (--against)"
PLANNED = "native f32 --plan"


def cpu_ticks(pid: int) -> int:
    """The process's CPU time so far (all its threads), in clock ticks."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def settle(others: list[Side], window: float = 0.05, limit: float = 3.0) -> None:
    """Wait until the other sides' processes are idle: their thread pools (OpenMP's, torch's)
    spin for a while after a call, and a side timed then would have a core fewer."""
    end = time.perf_counter() + limit
    before = [cpu_ticks(o.p.pid) for o in others]
    while time.perf_counter() < end:
        time.sleep(window)
        now = [cpu_ticks(o.p.pid) for o in others]
        if now == before:
            return
        before = now


class Side:
    """A side's process: started, its first answer (its setup) read."""

    def __init__(self, name: str, args: list[str], env: dict, python: str | None = None) -> None:
        self.name = name
        cmd = [python or sys.executable, __file__, *args]
        self.p = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        self.setup = json.loads(self.read())
        self.step: list[float] = []
        self.forward: list[float] = []

    def read(self) -> str:
        line = self.p.stdout.readline()
        if not line:
            self.p.wait()
            raise SystemExit(f"pytorch_baseline: the side `{self.name}` stopped")
        return line

    def time(self, order: str) -> float:
        self.p.stdin.write(order + "\n")
        self.p.stdin.flush()
        return float(self.read())

    def close(self) -> float:
        """Peak resident set in MiB."""
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        _, status, usage = os.wait4(self.p.pid, 0)
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"pytorch_baseline: the side `{self.name}` failed")
        return usage.ru_maxrss / 1024


def prepare(args, folder: Path) -> dict:
    """The export, and plan.json: the paths of θ's leaves, the first batch's indices."""
    from presk_core import data as D
    from presk_core import random as R

    consts = dict(c.split("=", 1) for c in args.const)
    core, run = load(args.psk, consts, args.data)
    data = os.path.join(os.path.dirname(os.path.abspath(args.psk)), run.data)
    count = D.read_header(data).count
    (b,) = dict(run.batch).values()
    order = R.permutation(run.shuffle or 0, 0, count)
    export(args.psk, consts, folder / "export")
    plan = {
        "psk": str(args.psk),
        "consts": consts,
        "data_flag": args.data,
        "data": data,
        "export": str(folder / "export"),
        "threads": args.threads,
        "compile_mode": args.compile_mode,
        "objective": run.objective,
        "paths": [leaf.path for leaf in core.layout(run.model).leaves],
        "indices": [int(i) for i in order[:b]],
        "title": f"{run.model} ({', '.join(f'{k} {v}' for k, v in run.dims().items())})",
        "layout_plan": str(Path(args.plan).resolve()) if args.plan else None,
    }
    (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--threads", type=int, default=1, help="threads of every side (1)")
    add("--repeat", type=int, default=5, help="timed rounds (5), after one untimed")
    add("--torch-f64", action="store_true", help="PyTorch in float64 too")
    add("--no-f64", action="store_true", help="no native f64 side")
    add("--no-sdpa", action="store_true", help="no side on scaled_dot_product_attention")
    add("--no-compile", action="store_true", help="no torch.compile side")
    add(
        "--compile-mode",
        default="",
        help="torch.compile's mode (its default; e.g. max-autotune-no-cudagraphs)",
    )
    add("--const", action="append", default=[], help="NAME=V, as presk's --const")
    add("--data", help="another .psk.d file than the run's")
    add("--cache", help="the compiled objects' folder (default: a fresh one: cold)")
    add("--no-breakdown", action="store_true", help="no native f32 step by kernel class")
    add(
        "--against",
        metavar="PYTHON",
        help="another tree's python (its .venv/bin/python): its native f32 side beside",
    )
    add(
        "--plan",
        metavar="PLAN.json",
        help="a layout plan of the training step (presk plan --train): its native f32 side"
        " beside the default layouts'",
    )
    add("--psk", type=Path, default=GPT, help=argparse.SUPPRESS)
    add("--side", help=argparse.SUPPRESS)
    add("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        plan = json.loads((args.folder / "plan.json").read_text(encoding="utf-8"))
        side, _, threads = args.side.partition("@")  # `SIDE@T`: at T threads (bench_threads)
        if threads:
            plan["threads"] = int(threads)
        kind, _, what = side.partition(":")
        if kind == "torch":
            torch_side(args.folder, plan, what)
        elif kind == "breakdown":
            breakdown_side(args.folder, plan, what, args.repeat)
        else:
            native_side(args.folder, plan, what, kind == "warm", kind == "native+plan")
        return
    with tempfile.TemporaryDirectory(prefix="pytorch-baseline-") as tmp:
        folder = Path(tmp)
        run(args, folder)


def run(args, folder: Path) -> None:
    plan = prepare(args, folder)
    env = {**os.environ, "PRESK_CACHE": args.cache or str(folder / "cache")}
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # no compile workers beside the sides
    print(
        f"pytorch-baseline: {plan['title']}, {args.threads} thread(s), {args.repeat} rounds",
        flush=True,
    )
    base = ["--folder", str(folder)]
    wanted = [("PyTorch eager f32", "torch:float32")]
    wanted += [] if args.no_sdpa else [("PyTorch sdpa f32", "torch:float32+sdpa")]
    mode = f" {args.compile_mode}" if args.compile_mode else ""
    if not args.no_compile:
        forms = "" if args.no_sdpa else "+sdpa"
        wanted += [(f"PyTorch compile{forms}{mode} f32", f"torch:float32{forms}+compile")]
    wanted += [("native f32", "native:f32")]
    wanted += [] if args.no_f64 else [("native f64", "native:f64")]
    wanted += [("PyTorch eager f64", "torch:float64")] if args.torch_f64 else []
    torches = [(n, w) for n, w in wanted if w.startswith("torch")]
    natives = [(n, w) for n, w in wanted if w.startswith("native")]

    def start(name: str, side: str, python: str | None = None) -> Side:
        begin = time.perf_counter()
        s = Side(name, ["--side", side, *base], env, python)
        took = time.perf_counter() - begin
        print(f"  {name}: ready in {took:.1f} s  {json.dumps(s.setup)}", flush=True)
        return s

    # The PyTorch sides stay up; the native ones come one at a time (at the course's size a
    # native f64 step holds ~10 GB), each timed in rounds interleaved with the PyTorch sides.
    alive = [start(n, w) for n, w in torches]
    if args.against:  # another tree's native f32 side, up for the whole run like PyTorch's
        alive.append(start(AGAINST, "native:f32", args.against))
    if args.plan:  # the step under the plan, up for the whole run, timed in every round
        alive.append(start(PLANNED, "native+plan:f32"))
    sides, rss, phase = list(alive), {}, {}
    f32 = [t for t in alive if t.name.startswith("PyTorch") and t.name.endswith(" f32")]
    other = [t for t in alive if t.name in (AGAINST, PLANNED)]
    for name, side in natives:
        s = start(name, side)
        sides.append(s)
        group = [*alive, s]
        marks = {t.name: (len(t.step), len(t.forward)) for t in alive}
        for r in range(args.repeat + 1):
            for order in ("step", "forward"):
                for t in group:
                    settle([o for o in group if o is not t])
                    ms = t.time(order)
                    if r:
                        getattr(t, order).append(ms)
            shown = "  ".join(f"{t.name} {t.step[-1] if r else 0:.0f}" for t in group)
            print(f"  round {r}: step ms {shown}", flush=True)
        phase[name] = {
            t.name: (
                statistics.median(t.step[marks[t.name][0] :]),
                statistics.median(t.forward[marks[t.name][1] :]),
            )
            for t in f32 + other
        }
        rss[name] = s.close()
    rss.update({t.name: t.close() for t in alive})
    warm = {}
    for name, side in wanted:
        if side.startswith("native:"):
            begin = time.perf_counter()
            w = Side(name, ["--side", "warm:" + side.split(":")[1], *base], env)
            w.close()
            warm[name] = (time.perf_counter() - begin, w.setup)
    parts = None
    if not args.no_breakdown:
        order = ["--side", "breakdown:f32", "--repeat", str(args.repeat), *base]
        b = Side("breakdown", order, env)
        b.close()
        parts = b.setup["text"]
        if args.against:
            b = Side("breakdown", order, env, args.against)
            b.close()
            parts += f"\n  {AGAINST}:\n" + b.setup["text"]
    print()
    print(f"  {'side':<26} {'step ms':>10} {'forward ms':>11} {'peak RSS MiB':>13}")
    for s in sides:
        a, f = statistics.median(s.step), statistics.median(s.forward)
        print(f"  {s.name:<26} {a:>10.1f} {f:>11.1f} {rss[s.name]:>13.0f}")
    print(
        f"  (medians of {args.repeat} rounds, same threads; peak RSS: the process's maximum"
        " resident set, its setup — and torch.compile's compilation — included)"
    )
    for name, against in phase.items():
        s = next(x for x in sides if x.name == name)
        a, f = statistics.median(s.step), statistics.median(s.forward)
        print(f"  {name} over each PyTorch f32 side, in the rounds it was timed with:")
        for t, (rs, rf) in against.items():
            print(f"    {t:<26} step {a / rs:>5.2f}  forward {f / rf:>5.2f}"
                  f"   (its step {rs:.1f} ms, forward {rf:.1f} ms)")  # fmt: skip
        against = {t: v for t, v in against.items() if t not in (AGAINST, PLANNED)}
        bs = min(against.items(), key=lambda p: p[1][0])
        bf = min(against.items(), key=lambda p: p[1][1])
        low = min(rss[t] for t in against)
        print(
            f"    {'best PyTorch':<26} step {a / bs[1][0]:>5.2f}  forward {f / bf[1][1]:>5.2f}"
            f"   ({bs[0]}; {bf[0]}); peak RSS {rss[name] / low:.2f}× the lowest PyTorch side's"
        )
    if args.plan and "native f32" in phase:  # the plan's step and the default's, same rounds
        s = next(x for x in sides if x.name == "native f32")
        ps, pf = phase["native f32"][PLANNED]
        a, f = statistics.median(s.step), statistics.median(s.forward)
        best = min(v[0] for t, v in phase["native f32"].items() if t not in (AGAINST, PLANNED))
        print(
            f"  {PLANNED} over native f32, in the rounds they shared: step {ps / a:.2f}"
            f" ({ps:.1f} ms against {a:.1f} ms); over the best PyTorch side's step"
            f" {ps / best:.2f}"
        )
    first = "cold" if not args.cache else "first, in --cache"
    for s in sides:
        if s.name in warm:
            cold, (secs, w) = s.setup, warm[s.name]
            print(
                f"  {s.name}: step {cold['step launches']} launches, forward {cold['forward launches']}"
                f"{_compiled(cold)};"
                f" lower+compile {first}: step {cold['step: lower, compile']:.1f} s, forward"
                f" {cold['forward: lower'] + cold['forward: compile']:.1f} s; warm (a new process):"
                f" step {w['step: lower, compile']:.1f} s, forward {w['forward: lower'] + w['forward: compile']:.1f} s"
                f" (whole process {secs:.1f} s)"
            )
        elif "step launches" in s.setup:
            print(
                f"  {s.name}: step {s.setup['step launches']} launches, forward"
                f" {s.setup['forward launches']}{_compiled(s.setup)}"
            )
        elif "compile: step s" in s.setup:
            print(
                f"  {s.name}: torch.compile's first step {s.setup['compile: step s']:.1f} s,"
                f" first forward {s.setup['compile: forward s']:.1f} s (not in the medians)"
            )

    if parts:
        print(parts)


if __name__ == "__main__":
    main()
