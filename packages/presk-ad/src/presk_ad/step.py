"""A training run on the interpreter: the step's function (an objective's loss and its
gradient in θ, in one call) and the loop of steps.

`presk train` (presk-cli) runs the loop; the export of a training run (presk-export)
records its first K steps for the conformance test of train.py. Both take it from here,
so the two see the same batches, rates and θ; so does `presk train --backend
native|kernel`, whose one call a step is `native_step` (value and gradient, then AdamW).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import gmpy2
import numpy as np
from presk_core import data as D
from presk_core import mpfr as M
from presk_core import random as R
from presk_core.build import FunctionBuilder
from presk_core.interp import Interpreter, RunError
from presk_core.ir import Function, Origin, Program, Training, Value
from presk_core.passes import verified
from presk_core.run import parse_entry, synthesize, take_samples
from presk_types.elab import type_from_text
from presk_types.presburger import Lin
from presk_types.training import match_sample
from presk_types.types import SCALAR, Real, TupleT

from presk_ad.vjp import differentiate

STEP = "{}.train_value_grad"
"""The function a step calls: the objective's loss and gradient in θ, in one call."""


def training_step(core: Program, objective: str, remat: str = "residuals") -> Program:
    """The program with `obj.train(batch, θ)`, the objective with θ last (the parameter
    `value_grad` differentiates in), and `obj.train_value_grad(batch, θ) = value_grad
    obj.train(batch, θ)`: the loss and its gradient in θ, a call of `obj.train.value_grad`
    once differentiated. An objective that takes a key, `obj(θ, key, batch)` (dropout),
    gives `obj.train(key, batch, θ)` and `obj.train_value_grad(key, batch, θ)`. `remat`: the
    reverse mode's form (presk_ad.vjp.differentiate)."""
    fn = core.function(objective)
    theta, *rest = fn.params  # (batch) or (key, batch)
    params = tuple(Value(i, p.type, p.name) for i, p in enumerate((*rest, theta)))
    dims = tuple((d, Lin.var(d)) for d in fn.dims)
    made = Origin(objective, f"training step of {objective}")
    w = FunctionBuilder(f"{objective}.train", len(params))
    args = (params[-1], *params[:-1])
    out = w.emit("call", args, fn.result, {"fn": objective, "dims": dims}, fn.span, made)
    wrap = Function(w.name, fn.dims, params, fn.result, tuple(w.body), out, fn.effects)
    s = FunctionBuilder(STEP.format(objective), len(params))
    pair_type = TupleT((fn.result, theta.type))
    pair = s.emit("value_grad", params, pair_type, {"fn": wrap.name, "dims": dims}, fn.span, made)
    step = Function(s.name, fn.dims, params, pair.type, tuple(s.body), pair, fn.effects)
    return differentiate(replace(core, functions=core.functions + (wrap, step)), remat)


# ---- the loop of a training run on the interpreter --------------------------------------


NATIVE_STEP = "{}.native_step"
"""The function a native step calls: value and gradient, then AdamW, in one call."""


def native_step(program: Program, objective: str) -> Program:
    """The program with `obj.native_step(batch, θ, m, v, t, lr) -> (loss, g, θ', m', v')`:
    a call of the training step's value and gradient, then of `adamw.step`. An objective
    that takes a key (dropout) gives `obj.native_step(batch, θ, m, v, t, lr, key)`, the host
    feeding step t's key `fold_in(key, t)` as the interpreter's Trainer draws it."""
    step = program.function(STEP.format(objective))
    adam = program.function("adamw.step")
    keyed = len(step.params) == 3  # (key, batch, θ): an objective that draws
    batch, theta = step.params[-2:]
    r0 = Real(SCALAR)
    names = (("batch", batch.type), ("θ", theta.type), ("m", theta.type), ("v", theta.type))
    params = tuple(Value(i, t, n) for i, (n, t) in enumerate(names)) + (
        Value(4, r0, "t"),
        Value(5, r0, "lr"),
    )
    if keyed:
        params += (Value(6, step.params[0].type, "key"),)
    dims = tuple(dict.fromkeys(step.dims + adam.dims))
    made = Origin(objective, f"native training step of {objective}")
    b = FunctionBuilder(NATIVE_STEP.format(objective), len(params))

    def call(fn: Function, args) -> Value:
        bound = {"fn": fn.name, "dims": tuple((d, Lin.var(d)) for d in fn.dims)}
        return b.emit("call", args, fn.result, bound, None, made)

    p_batch, p_theta, p_m, p_v, p_t, p_lr = params[:6]
    pair = call(step, (params[6], p_batch, p_theta) if keyed else (p_batch, p_theta))
    loss_type, grad_type = step.result.elements
    loss = b.emit("get", (pair,), loss_type, {"index": 0}, None, made)
    grads = b.emit("get", (pair,), grad_type, {"index": 1}, None, made)
    triple = call(adam, (p_theta, p_m, p_v, grads, p_t, p_lr))
    trees = [b.emit("get", (triple,), theta.type, {"index": i}, None, made) for i in range(3)]
    result = TupleT((loss_type, grad_type, theta.type, theta.type, theta.type))
    out = b.emit("tuple", (loss, grads, *trees), result, (), None, made)
    fn = Function(b.name, dims, params, result, tuple(b.body), out)
    return replace(program, functions=program.functions + (fn,))


class TrainError(RunError):
    """A run that cannot go on (E7008): the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__("E7008", message)


@dataclass(frozen=True, slots=True)
class StepRecord:
    """What one step did: its batch (the samples' indices and their doubles, stacked), the
    loss and gradient before the update, the rate, and θ and AdamW's moments after it."""

    t: int
    epoch: int
    indices: list[int]
    batch: object
    loss: object
    grads: dict
    lr: object
    theta: dict
    m: dict
    v: dict


def opened(run: Training, folder: str) -> Training:
    """The run with what its data file holds and the dimensions that fixes (T = 256), read
    from the file's header, as the checker's `open_data` reads them (TrainError when the
    file does not fit the objective)."""
    try:
        text = D.read_header(os.path.join(folder, run.data)).type_text
    except D.DataError as e:
        raise TrainError(str(e)) from None
    bound = match_sample(run.sample_type, type_from_text(text), dict(run.batch))
    if bound is None:
        raise TrainError(
            f"`{run.data}` holds `{text}`, and the objective's sample is `{run.sample_type}`"
        )
    batch = dict(run.batch)
    return replace(
        run, file_type=text, bound=tuple((k, v) for k, v in bound.items() if k not in batch)
    )


class Trainer:
    """The steps of a `training run` on the reference interpreter: each one call of the
    objective's value_vjp on a batch (samples in the run's shuffled order, epoch by epoch)
    and one AdamW step, from θ drawn at `seed` (docs/training.md, "A step"). `presk train`
    runs them; the export of a run records them for its conformance test."""

    def __init__(
        self,
        core: Program,
        run: Training,
        folder: str,
        seed: int,
        bits: int,
        horizon: int | None,
        rewrite=None,
        phase: Callable[[str], None] | None = None,
    ) -> None:
        """`run`: one of `core.trainings`; `folder`: the main file's, where its data are;
        `rewrite`: a pass the step's program goes through (`presk train --opt`); `phase`
        told the words of each phase as it begins (`presk train`'s progress)."""
        phase = phase or (lambda words: None)
        if run.file_type is None:  # the checker did not open the data file: open it here
            run = opened(run, folder)
        self.run, self.bits = run, bits
        self.objective = run.objective
        phase(f"differentiating `{self.objective}`")
        program = verified(training_step(core, self.objective), "training step")
        if rewrite is not None:
            program = rewrite(program)
        if not {"adamw.lr", "adamw.step"} <= {f.name for f in program.functions}:
            raise TrainError(
                "the run's optimizer has no step (its model needs dimension arguments)"
            )
        self.interp = Interpreter(program, bits)
        self.folder = folder
        held = type_from_text(run.file_type)
        phase(f"reading `{run.data}`")
        try:
            self.columns = D.read_columns(os.path.join(self.folder, run.data), held)
        except D.DataError as e:
            raise TrainError(str(e)) from None
        self.samples = D.samples(self.columns)
        (b,) = dict(run.batch).values() if len(run.batch) == 1 else (None,)
        if b is None or b <= 0:
            raise TrainError("the run's `batch(B = n)` must give one batch size")
        self.batch_size = b
        self._order: tuple[int, object] | None = None  # (epoch, its permutation)
        self.per_epoch = len(self.samples) // b
        if self.per_epoch == 0:
            raise TrainError(
                f"`{run.data}` holds {len(self.samples)} samples, fewer than a batch of {b}"
            )
        self.epochs_horizon = self.per_epoch * (run.epochs or 1)
        self.horizon = horizon if horizon is not None else self.epochs_horizon
        self.dims = run.dims()
        self.entry = parse_entry(self.objective, program, None, self.dims)
        phase(f"drawing θ₀ of `{run.model}` (seed {seed}, {bits} bits)")
        self.theta = synthesize(self.entry, self.interp, seed, skip_last=True)[0][2]
        params = program.function(self.objective).params
        # an objective that takes a key draws with fold_in(its key, t) at step t (issue 16)
        self.key = R.fold_in_name(R.root_key(seed), params[1].name) if len(params) == 3 else None
        with M.precision(bits):
            self.m = {k: M.zeros(np.shape(x)) for k, x in self.theta.items()}
            self.v = {k: M.zeros(np.shape(x)) for k, x in self.theta.items()}
        # the moments as they start, all +0: a native step reads doubles for them instead of
        # converting 2·|θ| objects (presk_cli.native_train; 1.6 s at the course GPT's size)
        self.fresh = (self.m, self.v)

    def lr(self, t: int) -> object:
        """`adamw.lr` at step t of the horizon."""
        with M.precision(self.bits):
            at, total = M.real(t), M.real(self.horizon)
        return self.interp.run("adamw.lr", [at, total], {})

    def batch(self, t: int) -> tuple[int, list[int], object]:
        """Step t's epoch, the indices of its samples and their stacked values (doubles):
        batch k of the epoch's permutation, seeded by the run's `shuffle` and the epoch. The
        one order of batches: these steps and the native ones (presk_cli.native_train)."""
        epoch, k = divmod(t - 1, self.per_epoch)
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, R.permutation(self.run.shuffle or 0, epoch, len(self.samples)))
        b = self.batch_size
        indices = [int(i) for i in self._order[1][k * b : (k + 1) * b]]
        value = take_samples(self.run.batch_type, self.columns, indices)
        return epoch, indices, value

    def steps(self, count: int | None = None, start: int = 0) -> Iterator[StepRecord]:
        """The steps after step `start` up to step `count` (the horizon by default), θ updated
        as they go; from a `start` past 0, θ, m and v must be that step's (a resumed run)."""
        for t in range(start + 1, (count or self.horizon) + 1):
            epoch, indices, value = self.batch(t)
            leaves = value if isinstance(value, tuple) else (value,)
            with M.precision(self.bits):
                exact = tuple(M.real(x) if x.dtype == np.float64 else x for x in leaves)
                step = M.real(t)
            batch = exact if isinstance(value, tuple) else exact[0]
            step_fn = STEP.format(self.objective)
            args = (
                [batch, self.theta]
                if self.key is None
                else [R.fold_in(self.key, t), batch, self.theta]
            )
            loss, grads = self.interp.run(step_fn, args, self.entry.dims)
            finite(t, indices, loss, grads)
            lr = self.lr(t)
            self.theta, self.m, self.v = self.interp.run(
                "adamw.step", [self.theta, self.m, self.v, grads, step, lr], self.dims
            )
            yield StepRecord(t, epoch, indices, value, loss, grads, lr, self.theta, self.m, self.v)


def _bad(x: object) -> bool:
    return not (gmpy2.is_finite(x) if isinstance(x, gmpy2.mpfr) else math.isfinite(float(x)))


def _bad_positions(value: object) -> list[int]:
    """The flat positions of `value`'s values that are not finite: numpy's isfinite on machine
    arrays (the native backend's, a million values a step), one test a value on mpfr ones."""
    flat = np.asarray(value).ravel()
    if flat.dtype != object:
        return np.flatnonzero(~np.isfinite(flat)).tolist()
    return [i for i, x in enumerate(flat) if _bad(x)]


def finite(t: int, indices: list[int], loss: object, grads: dict) -> None:
    """TrainError (E7008) at step t when the loss or a leaf of its gradient (mpfr or doubles)
    is not finite (a NaN or an infinity, from the data or an overflow): θ would become NaN,
    so the run stops before the update, its last checkpoint whole."""
    where = f"step {t} (samples {', '.join(map(str, indices))})"
    stop = (
        "not finite (a NaN or an infinity in the batch, or an overflow);"
        f" θ stays as step {t - 1} left it"
    )
    if _bad_positions(loss):
        value = float(np.asarray(loss).ravel()[0])
        raise TrainError(f"{where}: the loss is {value}, {stop}")
    for name, g in grads.items():
        flat = np.asarray(g).ravel()
        bad = _bad_positions(flat)
        if bad:
            raise TrainError(
                f"{where}: the gradient of `{name}` holds {len(bad)} of {flat.size} values"
                f" (the first {float(flat[bad[0]])}, at {bad[0]}) {stop}"
            )


__all__ = ["STEP", "StepRecord", "TrainError", "Trainer", "finite", "training_step"]
