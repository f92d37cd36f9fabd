"""A budget on the training step (spec L918–L1003): `presk calibrate --step` measures one
optimizer step of a file's `training run` under each realization against the exact step at
256 bits, and `presk solve --step` chooses a type per function of the step under a budget
on the update (presk_kernel.step_solve; docs/precision.md, "The training step's budget").

The state: θ from `--weights` (a checkpoint of the run's model), then `--warmup` steps of
the run's own pipeline natively in f64 (its batches, its schedule's rates; AdamW's moments
from zero). The measured step is step N+1 of the run's horizon (its epochs), on the data
file's first `--samples` samples; the noise is the relative distance between the f64
gradients of those and of the next as many. The step calibration (a JSON document, kind
`step-calibration`) keeps the state, the exact step and every row, so that `solve --step`
measures its candidates from the same state against the same reference.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass

import click
import numpy as np

from presk_cli.precision import fail

KIND = "step-calibration"
VERSION = 1
NAMED = ("f64", "f32", "bf16", "recipe")
"""The realizations `calibrate --step --realize` names (besides @FILE): a type for every real,
and `recipe`, mixed precision as practised: bf16 everywhere but the optimizer (`adamw.*` in
f32) and its weights (θ and the moments stored in f32)."""
OPTIMIZER = ("adamw.lr", "adamw.step")
LR = "adamw.lr"
NORM = "‖θ̂′−θ′‖₂/‖θ′−θ‖₂"
TRAIN_BITS = 256
"""`presk train`'s default --bits: the precision of θ₀'s draws and of the warm-up's rates."""


class StepError(Exception):
    """A step calibration or solve that cannot be made: its code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def e(x: float, digits: int) -> str:
    from presk_core.show import format_exp

    return format_exp(float(x), digits)


# ---- the program and its step ---------------------------------------------------------------


def load_run(file: str, consts: dict, data: str | None = None):
    """(the core program, its training run, the main file's folder); E7138 when the file has
    no training run. Checking diagnostics print and stop as `presk train`'s do; `data`
    replaces the run's data file (`--data`, as `presk train --data`)."""
    from presk_syntax.diagnostics import DiagnosticError, emit

    from presk_cli.commands import _fail
    from presk_cli.pipeline import PIPELINE, TRAIN
    from presk_cli.train import checked_training, training_context

    ctx = training_context(consts, data)
    try:
        elaborated = checked_training(file, ctx, data)
        if any(d.is_error for d in ctx.diagnostics):
            emit(ctx.diagnostics, ctx.sources)
            sys.exit(1)
        if not elaborated.runs:
            fail("E7138", f"`{file}` has no `training run`: a step budget is a training run's")
        core = PIPELINE.run(TRAIN, file, ctx, start=elaborated, first="elab")
    except DiagnosticError as err:
        _fail(err, ctx.sources)
    return core, core.trainings[0], os.path.dirname(file), ctx.sources


_SUFFIX = re.compile(r"[{\[].*$")


@dataclass
class Step:
    """The step of a run, ready to be measured: its trainer (batches, rates, θ's keys), the
    native step's program and name, the dimensions it is measured at, and its functions."""

    trainer: object
    program: object
    name: str
    dims: dict
    keys: list
    shapes: dict
    functions: list  # presk_kernel.step_solve.Function, by name
    site_reals: dict  # site -> reals it stores (counted once)
    roots: dict  # site -> the narrowable site whose type it computes in

    def realization_cost(self, r) -> int:
        """The bytes a realization stores: each site's reals once, times its type's width."""
        from presk_kernel.step_solve import WIDTH

        return sum(n * WIDTH[r.site_type(self.roots.get(s, s))] for s, n in self.site_reals.items())


def build_step(core, run, folder: str, seed: int, samples: int) -> Step:
    """The run's step (presk_ad.step): its functions, their sites and reals at the measured
    batch of `samples`."""
    from presk_ad.step import NATIVE_STEP, Trainer, native_step
    from presk_core.run import RunError
    from presk_kernel.ir import REAL_DTYPES
    from presk_kernel.lower import LowerError, _lower
    from presk_kernel.realization import function_of, narrowable_sites
    from presk_kernel.step_solve import Function

    try:  # at `presk train`'s default precision: its θ₀ and its rates
        trainer = Trainer(core, run, folder, seed, TRAIN_BITS, None)
        program = native_step(trainer.interp.program, trainer.objective)
    except RunError as err:
        raise StepError("E7138", f"the run's step: {err}") from None
    if trainer.key is not None:  # its step takes a key each step (presk train draws it)
        raise StepError(
            "E7138",
            f"`{trainer.objective}` draws (it takes a key): a step budget of an objective that"
            " draws is not built (its exact step would need the same draws at 256 bits)",
        )
    held = len(trainer.samples)
    if 2 * samples > held:
        raise StepError(
            "E7132",
            f"--samples {samples}: the step's batch and the noise's next one need"
            f" {2 * samples} samples, and `{run.data}` holds {held}",
        )
    name = NATIVE_STEP.format(trainer.objective)
    (bname,) = dict(run.batch) if len(run.batch) == 1 else (None,)
    dims = dict(trainer.dims) | ({bname: samples} if bname else {})
    keys = list(trainer.theta)
    shapes = {k: np.shape(v) for k, v in trainer.theta.items()}
    batch = _batch(trainer, range(samples))
    zero = np.zeros((), np.float64)
    theta = {k: np.zeros(s) for k, s in shapes.items()}
    try:
        schedule, _ = _lower(program, name, dims, [batch, theta, theta, theta, zero, zero], "f64")
        lr_schedule, _ = _lower(program, LR, {}, [zero, zero], "f64")
    except LowerError as err:
        raise StepError(err.code or "E7138", f"cannot lower the step to kernels: {err}") from None
    reals: dict[str, int] = {}
    for sch in (schedule, lr_schedule):
        for launch in sch.launches:
            k = launch.kernel
            n = sum(b.size for b in k.outputs if b.dtype in REAL_DTYPES)
            if n:
                reals[k.site] = max(reals.get(k.site, 0), n)
    roots = dict(narrowable_sites(schedule).root)
    reached = [_SUFFIX.sub("", f.name) for f in schedule.functions]
    owners = {function_of(roots.get(s, s)) for s in reals}  # the functions sites take types from
    names = sorted({f for f in reached if f != name or f in owners} | owners | {LR})
    functions = []
    for f in names:  # a site's type is its group root's: it counts in the root's function
        mine = [s for s in reals if function_of(roots.get(s, s)) == f]
        functions.append(Function(f, len(mine), sum(reals[s] for s in mine)))
    return Step(trainer, program, name, dims, keys, shapes, functions, reals, roots)


def _batch(trainer, indices):
    from presk_core.run import take_samples

    return take_samples(trainer.run.batch_type, trainer.columns, indices)


@dataclass
class State:
    """θ, m and v (doubles, by path), the step t to take and the horizon."""

    theta: dict
    m: dict
    v: dict
    t: int
    horizon: int

    def flat(self) -> np.ndarray:
        return np.concatenate([np.ravel(x) for x in self.theta.values()])


def warm_state(step: Step, weights: str | None, warmup: int, seed: int) -> State:
    """θ from `weights` (or the initializers at `seed`), then `warmup` native f64 steps of
    the run's own pipeline from zero moments."""
    from presk_cli.native import NativeError
    from presk_cli.native_train import ArenaState, NativeTrainer

    trainer = step.trainer
    if weights is not None:
        trainer.theta = read_weights(step, weights)
    else:
        trainer.theta = {k: np.asarray(v, np.float64) for k, v in trainer.theta.items()}
    trainer.m = {k: np.zeros(s) for k, s in step.shapes.items()}
    trainer.v = {k: np.zeros(s) for k, s in step.shapes.items()}
    if warmup == 0:
        return State(trainer.theta, trainer.m, trainer.v, 1, trainer.horizon)
    try:
        native = NativeTrainer(trainer, "native", "f64", 1)
        for t in range(1, warmup + 1):
            _, batch = native.batch(t)
            native.step(batch, t, float(trainer.lr(t)))
    except NativeError as err:
        raise StepError(err.code, f"the warm-up: {err}") from None
    theta, m, v = ArenaState.snapshot(native)()

    def as64(tree):
        return {k: np.array(x, np.float64).reshape(step.shapes[k]) for k, x in tree.items()}

    return State(as64(theta), as64(m), as64(v), warmup + 1, trainer.horizon)


def read_weights(step: Step, path: str) -> dict:
    """θ from a checkpoint of the run's model (E7131 when it is another program's)."""
    from presk_cli.serve import ServeError, load_weights

    run = step.trainer.run
    core_program = step.trainer.interp.program
    try:
        theta, _ = load_weights(core_program, run.model, path, dict(step.trainer.dims))
    except ServeError as err:
        raise StepError("E7131", f"--weights: {err}") from None
    got = {k: np.shape(v) for k, v in theta.items()}
    if list(theta) != step.keys or any(got[k] != step.shapes[k] for k in step.keys):
        raise StepError(
            "E7131",
            f"--weights `{path}`: a tree of shapes {got}, not the run's `{run.model}`"
            f" {step.shapes}",
        )
    return {k: np.asarray(v, np.float64).reshape(step.shapes[k]) for k, v in theta.items()}


# ---- the exact step and a realized one ------------------------------------------------------


def exact_step(step: Step, state: State, indices, bits: int):
    """The step from `state` on the samples `indices` at `bits` (the reference interpreter):
    presk_kernel.step_solve.Reference."""
    from presk_ad.step import STEP
    from presk_core import mpfr as M
    from presk_core.interp import Interpreter
    from presk_core.run import RunError
    from presk_kernel.step_solve import Exact, Reference

    trainer = step.trainer
    interp = Interpreter(trainer.interp.program, bits)
    value = _batch(trainer, indices)
    with M.precision(bits):
        leaves = value if isinstance(value, tuple) else (value,)
        exact = tuple(M.real(x) if x.dtype == np.float64 else x for x in leaves)
        batch = exact if isinstance(value, tuple) else exact[0]
        tree = lambda d: {k: M.real(np.asarray(x, np.float64)) for k, x in d.items()}  # noqa: E731
        theta, m, v = tree(state.theta), tree(state.m), tree(state.v)
        t, total = M.real(state.t), M.real(state.horizon)
    dims = dict(step.dims)
    try:
        _, grads = interp.run(STEP.format(trainer.objective), [batch, theta], dims)
        lr = interp.run(LR, [t, total], {})
        new, _, _ = interp.run("adamw.step", [theta, m, v, grads, t, lr], dims)
    except RunError as err:
        raise StepError(getattr(err, "code", None) or "E7008", f"the exact step: {err}") from None
    flat = lambda d: np.concatenate([np.asarray(d[k], dtype=object).reshape(-1) for k in step.keys])  # noqa: E731
    return Reference(state.flat(), Exact.of(flat(new)), Exact.of(flat(grads)))


class Runner:
    """Realized steps from one state: each realization lowered, compiled and run natively
    (its rate from `adamw.lr` natively in that function's type)."""

    def __init__(self, step: Step, state: State) -> None:
        self.step, self.state = step, state
        self.count = 0

    def lowered(self, r, indices) -> tuple[object, list]:
        """(the step's schedule under `r`, as `--backend native` runs it; its arguments)."""
        from presk_cli.native import lower, refuse_quant
        from presk_cli.native_train import rate_entry, rate_of

        refuse_quant(r)
        s, st = self.step, self.state
        t = np.asarray(float(st.t))
        entry = rate_entry(s.program, r)
        lr = float(s.trainer.lr(st.t)) if entry is None else rate_of(entry, st.t, st.horizon)
        args = [_batch(s.trainer, indices), st.theta, st.m, st.v, t, np.asarray(float(lr))]
        return lower(s.program, s.name, s.dims, args, r, 1), args

    def grads_theta(self, r, indices) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(θ̂: the state as the realization stores it, θ̂′, ĝ), flattened doubles."""
        from presk_kernel.lower import argument_leaves
        from presk_kernel.step_solve import rounded

        from presk_cli.native import NativeError, compiled, storage

        s, st = self.step, self.state
        try:
            sched, args = self.lowered(r, indices)
            outs = compiled(sched).run(storage(sched, argument_leaves(args)))
        except NativeError as err:
            raise StepError(err.code, f"the step under {r}: {err}") from None
        self.count += 1
        n = len(s.keys)
        types = {b.id: b.dtype for b in sched.buffers}
        in_types = [types[b] for b in sched.inputs]
        first = len(in_types) - 3 * n - 2  # the batch's leaves come first
        held = np.concatenate(
            [rounded(np.ravel(st.theta[k]), in_types[first + i]) for i, k in enumerate(s.keys)]
        )
        flat = lambda xs: np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in xs])  # noqa: E731
        return held, flat(outs[1 + n : 1 + 2 * n]), flat(outs[1 : 1 + n]), sched

    def gaps(self, r, reference, indices):
        from presk_kernel.step_solve import Gaps, rounded

        held, new, grad, sched = self.grads_theta(r, indices)
        n = len(self.step.keys)
        kept = [sched.buffers[b].dtype for b in sched.outputs[1 + n : 1 + 2 * n]]
        cuts = np.cumsum([0] + [int(np.prod(self.step.shapes[k])) for k in self.step.keys])
        hi = reference.theta_next.hi
        near = np.concatenate(
            [rounded(hi[a:b], t) for a, b, t in zip(cuts[:-1], cuts[1:], kept, strict=True)]
        )
        return Gaps(
            reference.update_gap(held, new), reference.floor_of(near), reference.grad_gap(grad)
        )


def named_realization(name: str, step: Step):
    """A realization by its name on `calibrate --step`'s command line: f64, f32, bf16,
    recipe, or @FILE (E7035–E7039 as presk_kernel.realization says)."""
    from presk_kernel.realization import Realization, RealizationError, parse_realization

    if name == "recipe":
        funcs = tuple((f.name, "f32" if f.name in OPTIMIZER else "bf16") for f in step.functions)
        return Realization("bf16", params=tuple((k, "f32") for k in step.keys), functions=funcs)
    try:
        return parse_realization(name)
    except RealizationError as err:
        raise StepError(err.code, str(err)) from None


# ---- the step calibration document ----------------------------------------------------------


def _pack(x) -> dict:
    a = np.ascontiguousarray(np.asarray(x, dtype="<f8"))
    return {"shape": list(a.shape), "f64": base64.b64encode(a.tobytes()).decode("ascii")}


def _unpack(d: object, what: str, source: str) -> np.ndarray:
    try:
        shape = [int(n) for n in d["shape"]]
        raw = base64.b64decode(d["f64"], validate=True)
        return np.frombuffer(raw, dtype="<f8").reshape(shape).astype(np.float64)
    except (KeyError, TypeError, ValueError) as err:
        raise StepError("E7130", f"`{source}`: `{what}` is not an array ({err})") from None


def write_document(path: str, doc: dict) -> None:
    from presk_core.data import write_text

    try:
        write_text(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    except OSError as err:
        raise StepError("E7137", f"cannot write `{path}`: {err.strerror or err}") from None


def read_document(path: str) -> dict:
    """A step calibration (E7130 when it is not one: unreadable, not JSON, another kind or
    version, a field missing)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as err:
        raise StepError("E7130", f"cannot read `{path}`: {err.strerror or err}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise StepError("E7130", f"`{path}` is not JSON: {err}") from None
    if not isinstance(doc, dict) or doc.get("presk") != KIND:
        raise StepError(
            "E7130",
            f'`{path}` is not a step calibration: a JSON object with "presk": "{KIND}"'
            " (`presk calibrate --step` writes one)",
        )
    if doc.get("version") != VERSION:
        raise StepError(
            "E7130",
            f"`{path}`: a step calibration of version {doc.get('version')!r}: this presk reads"
            f" version {VERSION}",
        )
    need = ("program", "header", "state", "reference", "rows", "step", "horizon", "samples")
    missing = [k for k in need if k not in doc]
    if missing:
        raise StepError("E7130", f"`{path}`: a step calibration without `{missing[0]}`")
    kinds = {"program": str, "header": str, "state": dict, "reference": dict, "rows": list}
    for key, kind in kinds.items():
        if not isinstance(doc[key], kind):
            raise StepError("E7130", f"`{path}`: `{key}` is not a {kind.__name__}")
    for key in ("step", "horizon", "samples"):
        if not (isinstance(doc[key], int) and not isinstance(doc[key], bool) and doc[key] > 0):
            raise StepError("E7130", f"`{path}`: `{key}` is not a positive whole number")
    for row in doc["rows"]:
        if not (
            isinstance(row, dict)
            and isinstance(row.get("realization"), str)
            and isinstance(row.get("update"), (int, float))
            and not isinstance(row.get("update"), bool)
        ):
            raise StepError("E7130", f"`{path}`: a row that is not a realization's gaps")
    seed = doc.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise StepError("E7130", f"`{path}`: `seed` is not a whole number")
    return doc


def state_of(doc: dict, step: Step, source: str) -> tuple[State, object]:
    from presk_kernel.step_solve import Exact, Reference

    trees = []
    for name in ("theta", "m", "v"):
        tree = doc["state"].get(name) if isinstance(doc["state"], dict) else None
        if not isinstance(tree, dict) or list(tree) != step.keys:
            raise StepError("E7130", f"`{source}`: the state's `{name}` is not the run's tree")
        trees.append(
            {k: _unpack(tree[k], f"{name}.{k}", source).reshape(step.shapes[k]) for k in step.keys}
        )
    ref = doc["reference"]
    try:
        reference = Reference(
            np.concatenate([np.ravel(x) for x in trees[0].values()]),
            Exact(
                _unpack(ref["theta_hi"], "theta_hi", source),
                _unpack(ref["theta_lo"], "theta_lo", source),
            ),
            Exact(
                _unpack(ref["grad_hi"], "grad_hi", source),
                _unpack(ref["grad_lo"], "grad_lo", source),
            ),
        )
    except (KeyError, TypeError) as err:
        raise StepError("E7130", f"`{source}`: the reference lacks {err}") from None
    size = reference.theta.size
    parts = (reference.theta_next.hi, reference.theta_next.lo, reference.grad.hi, reference.grad.lo)
    if any(x.size != size for x in parts):
        raise StepError("E7130", f"`{source}`: the reference is not of θ's {size} reals")
    return State(*trees, int(doc["step"]), int(doc["horizon"])), reference


# ---- presk calibrate --step ---------------------------------------------------------------


def calibrate_step(
    file, weights, warmup, samples, realize, out, bits, seed, consts, data=None
) -> None:
    """`presk calibrate --step` (spec L926–L945); `data` replaces the run's data file."""
    if out is None:
        click.echo("presk calibrate: give --out", err=True)
        sys.exit(2)
    if not realize:
        realize = ("f64",)
    core, run, folder, sources = load_run(file, consts, data)
    if samples is None:  # the run's own batch
        samples = next(iter(dict(run.batch).values()), 1)
    try:
        lines, doc = _calibrate(
            core, run, folder, file, weights, warmup, samples, realize, bits, seed, data
        )
        doc["data_flag"] = data
        write_document(out, doc)
    except StepError as err:
        fail(err.code, str(err), sources)
    lines.append(f"presk calibrate: wrote {out}")
    click.echo("\n".join(lines))


def _calibrate(core, run, folder, file, weights, warmup, samples, realize, bits, seed, given=None):
    from presk_core.envelope import program_digest
    from presk_kernel.step_solve import norm

    step = _checked_step(core, run, folder, seed, samples, warmup)
    named = [(name, named_realization(name, step)) for name in realize]
    state = warm_state(step, weights, warmup, seed)
    data = given if given is not None else os.path.join(folder, run.data)
    origin = weights if weights is not None else f"the initial weights (seed {seed})"
    header = (
        f"step {state.t} of {state.horizon} from {origin} after {warmup} warm-up step(s) in"
        f" f64, on samples 0..{samples} of {data} (noise: the next {samples})"
    )
    first, second = range(samples), range(samples, 2 * samples)
    began = time.perf_counter()
    reference = exact_step(step, state, first, bits)
    seconds = time.perf_counter() - began
    runner = Runner(step, state)
    _, _, g_a, _ = runner.grads_theta(named_realization("f64", step), first)
    _, _, g_b, _ = runner.grads_theta(named_realization("f64", step), second)
    noise = norm(g_a - g_b) / norm(g_a)
    rows = []
    for name, r in named:
        gaps = runner.gaps(r, reference, first)
        rows.append(
            {
                "realization": name,
                "update": gaps.update,
                "floor": gaps.floor,
                "grad": gaps.grad,
                "bytes": step.realization_cost(r),
            }
        )
    sites = sum(f.sites for f in step.functions)
    upd, g_norm, t_norm = norm(reference.update), norm(reference.grad.hi), norm(reference.theta)
    lines = [
        f"presk calibrate: {header}",
        f"presk calibrate: {sites} sites in {len(step.functions)} functions of one exact step"
        f" at {bits} bits ({seconds:.1f} s)",
        f"  |θ′ − θ|    {e(upd, 4)}   |g| {e(g_norm, 4)}   |θ| {e(t_norm, 4)}",
        f"  noise       {e(noise, 4)}   ‖g_B − g_B′‖₂ / ‖g_B‖₂ between two batches of"
        f" {samples} (f64): what a rounding error is to be compared with",
        f"{'realization':<30}{'update gap':>11}{'storage floor':>14}{'grad gap':>13}"
        f"{'predicted B':>15}",
    ]
    for row in rows:
        lines.append(
            f"{row['realization']:<30}{e(row['update'], 3):>11}{e(row['floor'], 3):>14}"
            f"{e(row['grad'], 3):>13}{e(row['bytes'], 4):>15}"
        )
    doc = {
        "presk": KIND,
        "version": VERSION,
        "program": program_digest(core),
        "file": file,
        "weights": weights,
        "seed": seed,
        "warmup": warmup,
        "samples": samples,
        "step": state.t,
        "horizon": state.horizon,
        "data": data,
        "header": header,
        "bits": bits,
        "seconds": seconds,
        "norms": {"update": upd, "grad": g_norm, "theta": t_norm, "noise": noise},
        "functions": [{"name": f.name, "sites": f.sites, "reals": f.reals} for f in step.functions],
        "state": {
            name: {k: _pack(tree[k]) for k in step.keys}
            for name, tree in (("theta", state.theta), ("m", state.m), ("v", state.v))
        },
        "reference": {
            "theta_hi": _pack(reference.theta_next.hi),
            "theta_lo": _pack(reference.theta_next.lo),
            "grad_hi": _pack(reference.grad.hi),
            "grad_lo": _pack(reference.grad.lo),
        },
        "rows": rows,
    }
    return lines, doc


def _checked_step(core, run, folder, seed, samples, warmup) -> Step:
    """The step, once --samples and --warmup are known to fit the run (E7132)."""
    from presk_ad.step import TrainError

    try:
        step = build_step_checked(core, run, folder, seed, samples)
    except TrainError as err:
        raise StepError("E7138", f"the run: {err}") from None
    horizon = step.trainer.horizon
    if not 0 <= warmup < horizon:
        raise StepError(
            "E7132",
            f"--warmup {warmup}: the run has {horizon} steps, so the measured step (the one"
            f" after the warm-up) needs a warm-up of 0 to {horizon - 1}",
        )
    return step


def build_step_checked(core, run, folder, seed, samples) -> Step:
    if samples < 1:
        raise StepError("E7132", f"--samples {samples}: a batch holds at least one sample")
    return build_step(core, run, folder, seed, samples)


# ---- presk solve --step -----------------------------------------------------------------------


def solve_step_command(file, calibration, budget, out, consts, profile=None) -> None:
    """`presk solve --step` (spec L947–L978); `profile`: a machine profile whose roofline
    prices the step (the cost in predicted seconds, `--profile`)."""
    if not (math.isfinite(budget) and budget > 0):
        fail("E7134", f"a budget is a positive number, not {budget!r} (nothing is written)")
    roof = None
    if profile is not None:
        from presk_cli.solve import _roofline

        roof = _roofline(profile)
    try:
        doc = read_document(calibration)
    except StepError as err:
        fail(err.code, str(err))
    data = doc.get("data_flag")
    if data is not None and not isinstance(data, str):
        fail("E7130", f"`{calibration}`: `data_flag` is not a path")
    core, run, folder, sources = load_run(file, consts, data)
    try:
        lines, r = _solve(core, run, folder, doc, calibration, budget, roof)
        write_realization(r, out)
    except StepError as err:
        fail(err.code, str(err), sources)
    lines.append(f"presk solve: wrote {out} — train with it with `presk train --realize @{out}`")
    click.echo("\n".join(lines))


def write_realization(r, out: str) -> None:
    try:
        r.write(out)
    except OSError as err:
        raise StepError(
            "E7137", f"cannot write the realization `{out}`: {err.strerror or err}"
        ) from None


def _solve(core, run, folder, doc, source, budget, roof=None):
    from presk_core.envelope import program_digest
    from presk_kernel.step_solve import StepSolveError, solve_step

    if program_digest(core) != doc["program"]:
        raise StepError(
            "E7133",
            f"`{source}` was measured on another program (`{doc.get('file')}` as it was then,"
            " or other --const values): calibrate the step again with `presk calibrate --step`",
        )
    samples = int(doc["samples"])
    step = build_step_checked(core, run, folder, int(doc.get("seed") or 0), samples)
    state, reference = state_of(doc, step, source)
    runner = Runner(step, state)
    first = range(samples)
    baseline = next((row["update"] for row in doc["rows"] if row.get("realization") == "f64"), None)
    priced = None
    if roof is not None:
        from presk_cli.native import NativeError
        from presk_cli.solve import predicted

        def priced(r) -> float:  # the step's launches priced by the roofline (adamw.lr aside)
            try:
                return predicted(runner.lowered(r, first)[0], roof)
            except NativeError as err:
                raise StepError(err.code, f"the step under {r}: {err}") from None

    try:
        s = solve_step(
            step.functions, budget, lambda r: runner.gaps(r, reference, first), baseline, priced
        )
    except StepSolveError as err:
        raise StepError(err.code, str(err)) from None
    counts = {t: sum(1 for x in s.types.values() if x == t) for t in ("f64", "f32", "bf16")}
    ratio = s.all_f64 / s.cost if s.cost else math.inf
    lines = [
        f"presk solve: {doc['header']}",
        f"presk solve: the step under an update budget of {e(budget, 2)} ({NORM}),"
        f" {len(step.functions)} functions, {s.measurements} native steps measured",
        f"{'function':<32}{'sites':>5}{'f64 cost':>13}{'gap f32':>12}{'gap bf16':>12}{'chosen':>9}",
    ]
    for f in step.functions:
        lines.append(
            f"{f.name:<32}{f.sites:>5}{e(f.cost('f64'), 3):>13}"
            f"{e(s.isolated[(f.name, 'f32')], 2):>12}{e(s.isolated[(f.name, 'bf16')], 2):>12}"
            f"{s.types[f.name]:>9}"
        )
    m = s.measured
    inside = "inside the budget" if m.update <= budget else "OUTSIDE the budget"
    lines += [
        f"  chosen      {counts['f64']} f64, {counts['f32']} f32, {counts['bf16']} bf16",
        f"  cost        {e(s.cost, 4)} against {e(s.all_f64, 4)} all-f64 ({ratio:.2f}x),"
        + (" bytes" if roof is None else " predicted seconds (the profile's roofline)"),
        f"  estimate    {e(s.estimate, 3)} (√Σ of the chosen functions' isolated gaps: it"
        " proposes, it does not guarantee)",
        f"  measured    {e(m.update, 3)} update gap (storage floor {e(m.floor, 3)}),"
        f" {e(m.grad, 3)} gradient gap, after {s.rounds} widening round(s) — {inside}",
    ]
    from presk_kernel.step_solve import function_realization

    return lines, function_realization(s.types)


__all__ = ["NAMED", "StepError", "calibrate_step", "solve_step_command"]
