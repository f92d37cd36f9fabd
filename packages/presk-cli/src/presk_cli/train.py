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
from presk_ad.step import Trainer, TrainError
from presk_core import data as D
from presk_core import mpfr as M
from presk_core.ir import Program, Training
from presk_core.show import format_exp


def train(
    core: Program,
    run: Training,
    folder: str,
    steps: int | None,
    log_every: int,
    ckpt: str | None,
    seed: int,
    bits: int,
    echo,
    progress=None,
    rewrite=None,
) -> None:
    """Train the run (one of `core.trainings`; its data in `folder`, the main file's);
    `echo` prints a line, `progress` (on a terminal) writes without a newline; `rewrite`
    a pass the step's program goes through (`--opt`)."""
    trainer = Trainer(core, run, folder, seed, bits, steps, rewrite)
    horizon = trainer.horizon
    ckpt_dir, every = checkpoints(run, folder, ckpt)
    times: list[float] = []
    loss_value = None
    start = time.perf_counter()
    for s in trainer.steps():
        times.append(time.perf_counter() - start)
        t = s.t
        loss_value = float(np.asarray(s.loss).item())
        if progress is not None:  # a terminal: the step we are at, overwritten in place
            progress(f"\rstep {t}/{horizon}  loss {loss_value:.6f}")
        if log_every and t % log_every == 0:
            with M.precision(bits):
                norm = gmpy2.sqrt(sum(M.sum(M.mul(g, g)).item() for g in s.grads.values()))
            if progress is not None:
                progress("\r\x1b[K")
            # np.asarray: a rate is a 0-d array, or an mpfr where --opt folded it to a constant
            rate = float(np.asarray(s.lr).item())
            echo(step_line(t, s.epoch, loss_value, rate, float(norm)))
        if ckpt_dir is not None and every and t % every == 0 and t != horizon:
            save(os.path.join(ckpt_dir, f"step_{t}.psk.d"), run.model, s.theta)
        start = time.perf_counter()
    if progress is not None:
        progress("\r\x1b[K")
    if len(times) > 1:
        median = statistics.median(times[1:]) * 1000
        echo(
            f"presk train: {median:.1f} ms a step, median of {len(times) - 1} (the first excluded)"
        )
    finish(run, ckpt_dir or folder, horizon, loss_value, trainer.theta, echo)


def checkpoints(run: Training, folder: str, ckpt: str | None) -> tuple[str | None, int | None]:
    """Where a run's checkpoints go (`--ckpt`, else the run's `checkpoint` folder beside the
    main file, else none) and every how many steps; the temporaries that dead runs left
    there (and beside `final.psk.d`) are removed first."""
    if run.checkpoint is None:
        where, every = ckpt, None
    else:
        name, every = run.checkpoint
        where = ckpt if ckpt is not None else os.path.join(folder, name)
    D.remove_stale(where or folder or ".")
    return where, every


def step_line(t: int, epoch: int, loss: float, rate: float, norm: float) -> str:
    """The line `presk train` logs at step t (`epoch` from 0, `norm` the gradient's |g|)."""
    return (
        f"step {t}  epoch {epoch + 1}  loss {loss:.6f}  lr {format_exp(rate, 3)}"
        f"  |g| {format_exp(norm, 4)}"
    )


def finish(run: Training, folder: str, horizon: int, loss: float, theta: dict, echo) -> None:
    """The final weights saved as `final.psk.d` in `folder`, and the last line of the log."""
    final = os.path.join(folder, "final.psk.d")
    save(final, run.model, theta)
    echo(f"presk train: {horizon} steps of {run.model}, final loss {loss:.6f}, weights in {final}")


def save(path: str, model: str, tree: dict) -> None:
    """A parameter tree as a one-sample `.psk.d` of type `params M`, its leaves in order and
    their paths and shapes in the header; E7004 (a DataError) when it cannot be written, the
    file before left as it was."""
    arrays = [np.asarray(x, dtype=object).astype(float) for x in tree.values()]
    try:
        D.write_tree(path, f"params {model}", arrays, list(tree))
    except OSError as e:
        why = (e.strerror or str(e)).lower()
        raise D.DataError("E7004", f"cannot write `{path}`: {why}") from None


__all__ = ["TrainError", "train"]
