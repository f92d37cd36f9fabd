"""`presk train`: a file's `training run`, on the reference interpreter.

Each step evaluates the objective and its gradient in θ on one batch in one call, of the
`value_vjp` presk-ad generates (`obj.train.value_grad` calls it with ct = 1), which runs
the forward pass once and returns the loss it computed beside the gradient; then it takes
one AdamW step (PSK-Core throughout, evaluated by the interpreter at `--bits`). The data
are the run's `.psk.d` file, each epoch in the order of a permutation drawn from the run's
`shuffle(seed = s)` (a key folded from the seed and the epoch), cut into batches of B
(a last partial batch is dropped). θ starts from the model's initializers at `--seed`.

The learning rate and the AdamW step are the PSK-Core functions `adamw.lr` and
`adamw.step` that the lowering writes from the optimizer block (presk_core.optim), run by
the interpreter like the objective.
"""

from __future__ import annotations

import os
import statistics
import time

import gmpy2
import numpy as np
from presk_ad.step import STEP, training_step
from presk_core import data as D
from presk_core import mpfr as M
from presk_core import random as R
from presk_core.interp import Interpreter
from presk_core.ir import Program
from presk_core.run import parse_entry, stack_samples, synthesize
from presk_core.show import format_exp
from presk_types.elab import Program as Elab
from presk_types.training import Run
from presk_types.types import TupleT


class TrainError(Exception):
    """A run that cannot go on: the message says why (its code is E7008)."""


def train(
    core: Program,
    elab: Elab,
    run: Run,
    steps: int | None,
    log_every: int,
    ckpt: str | None,
    seed: int,
    bits: int,
    echo,
    progress=None,
) -> None:
    """Train; `echo` prints a line, `progress` (on a terminal) writes without a newline."""
    main = elab.main
    objective = run.objective.key
    program = training_step(core, objective)
    names = {f.name for f in program.functions}
    if not {"adamw.lr", "adamw.step"} <= names:
        raise TrainError("the run's optimizer has no step (its model needs dimension arguments)")
    step_dims = {d: dims_value for d, dims_value in run.dims().items()}
    interp = Interpreter(program, bits)
    folder = os.path.dirname(main.path)
    data_path = os.path.join(folder, run.data)
    try:
        samples = D.read(data_path, held_type(run))
    except D.DataError as e:
        raise TrainError(str(e)) from None
    dims = run.dims()
    (batch_size,) = run.batch.values() if len(run.batch) == 1 else (None,)
    if batch_size is None or batch_size <= 0:
        raise TrainError("the run's `batch(B = n)` must give one batch size")
    per_epoch = len(samples) // batch_size
    if per_epoch == 0:
        raise TrainError(
            f"`{run.data}` holds {len(samples)} samples, fewer than a batch of {batch_size}"
        )
    horizon = steps if steps is not None else per_epoch * (run.epochs or 1)
    entry = parse_entry(objective, program, elab, dims)
    theta = synthesize(entry, interp, seed, skip_last=True)[0][2]
    with M.precision(bits):
        m = {k: M.zeros(np.shape(v)) for k, v in theta.items()}
        v = {k: M.zeros(np.shape(x)) for k, x in theta.items()}
    ckpt_dir = (
        ckpt
        if ckpt is not None
        else (os.path.join(folder, run.checkpoint.dir) if run.checkpoint is not None else None)
    )
    every = run.checkpoint.every if run.checkpoint is not None else None
    times: list[float] = []
    loss_value = None
    order = None
    for t in range(1, horizon + 1):
        start = time.perf_counter()
        epoch, k = divmod(t - 1, per_epoch)
        if k == 0 or order is None:
            order = R.permutation(run.shuffle or 0, epoch, len(samples))
        chosen = [samples[i] for i in order[k * batch_size : (k + 1) * batch_size]]
        batch = _batch(run.batch_type, chosen, bits)
        loss, grads = interp.run(STEP.format(objective), [batch, theta], entry.dims)
        with M.precision(bits):
            step, total = M.real(t), M.real(horizon)
            norm = gmpy2.sqrt(sum(M.sum(M.mul(g, g)).item() for g in grads.values()))
        lr = interp.run("adamw.lr", [step, total], {})
        theta, m, v = interp.run("adamw.step", [theta, m, v, grads, step, lr], step_dims)
        times.append(time.perf_counter() - start)
        loss_value = float(np.asarray(loss).item())
        if progress is not None:  # a terminal: the step we are at, overwritten in place
            progress(f"\rstep {t}/{horizon}  loss {loss_value:.6f}")
        if log_every and t % log_every == 0:
            rate = format_exp(float(lr.item()), 3)
            if progress is not None:
                progress("\r\x1b[K")
            echo(
                f"step {t}  epoch {epoch + 1}  loss {loss_value:.6f}  lr {rate}"
                f"  |g| {format_exp(float(norm), 4)}"
            )
        if ckpt_dir is not None and every and t % every == 0 and t != horizon:
            save(os.path.join(ckpt_dir, f"step_{t}.psk.d"), run.model, theta)
    if progress is not None:
        progress("\r\x1b[K")
    if len(times) > 1:
        median = statistics.median(times[1:]) * 1000
        echo(
            f"presk train: {median:.1f} ms a step, median of {len(times) - 1} (the first excluded)"
        )
    final = os.path.join(ckpt_dir or folder, "final.psk.d")
    save(final, run.model, theta)
    echo(
        f"presk train: {horizon} steps of {run.model}, final loss {loss_value:.6f}, weights in {final}"
    )


def held_type(run: Run):
    from presk_types.elab import type_from_text

    return type_from_text(run.file_type) if run.file_type else run.sample_type


def _batch(t, chosen: list, bits: int) -> object:
    """The chosen samples as the objective's batch, its reals in MPFR."""
    value = stack_samples(t, chosen)
    leaves = value if isinstance(value, tuple) else (value,)
    with M.precision(bits):
        leaves = tuple(M.real(x) if x.dtype == np.float64 else x for x in leaves)
    return leaves if isinstance(t, TupleT) else leaves[0]


def save(path: str, model: str, tree: dict) -> None:
    """A parameter tree as a one-sample `.psk.d` of type `params M`, its leaves in order."""
    D.write_tree(
        path, f"params {model}", [np.asarray(x, dtype=object).astype(float) for x in tree.values()]
    )


__all__ = ["TrainError", "train"]
