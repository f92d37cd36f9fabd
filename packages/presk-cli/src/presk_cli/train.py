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

import functools
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import gmpy2
import numpy as np
from presk_ad.step import StepRecord, Trainer, TrainError
from presk_core import data as D
from presk_core import mpfr as M
from presk_core.ir import Program, Training
from presk_core.show import format_exp

from presk_cli import resume as R
from presk_cli.metrics import MetricsWriter, label, plot
from presk_cli.progress import Progress


@dataclass(frozen=True, slots=True)
class Keeping:
    """What a run keeps beside its log lines: the checkpoint it resumes from (`--resume`, a
    state beside it: presk_cli.resume), the JSON-lines file of its metrics (`--metrics`),
    the step it stops after (`--stop-after`), the plot of its metrics (`--plot`, with
    another run's beside them: `--compare`), a state beside every checkpoint
    (`--resumable`)."""

    resume: str | None = None
    metrics: str | None = None
    stop_after: int | None = None
    plot: str | None = None
    compare: tuple[str, list[dict]] | None = None
    """`--compare`: a label and the rows of another run's metrics, read before the run."""
    resumable: bool = False
    """`--resumable`: the state beside every checkpoint, not only when the run stops early."""
    on_step: Callable[[dict], None] | None = None
    """Given each step's metrics (the Python API's `callback`: presk_cli.training)."""

    def writer(self, settings, start: int) -> MetricsWriter | None:
        """The run's metrics writer (None without --metrics, --plot or a callback), its first
        line `settings()` (computed only when a writer is made)."""
        if self.metrics is None and self.plot is None and self.on_step is None:
            return None
        return MetricsWriter.open(
            self.metrics, settings(), start, self.plot is not None, self.on_step
        )

    def draw(self, metrics: MetricsWriter | None, echo) -> None:
        """`--plot`: the run's loss and |g|, and `--compare`'s beside them."""
        if self.plot is None or metrics is None:
            return
        mine = (label(metrics.head, self.metrics or "this run"), metrics.rows)
        plot(self.plot, [mine, *([self.compare] if self.compare else [])])
        echo(f"presk train: the loss and |g| plotted in {self.plot}")


class StoppedAfter(Exception):
    """`--stop-after K` reached: the run saved step K for `--resume` (`where`) and stops."""

    def __init__(self, t: int, where: str) -> None:
        super().__init__(f"stopped after step {t}")
        self.t, self.where = t, where


def resumed(keeping: Keeping, steps: int | None) -> tuple[object, int | None]:
    """The state `--resume` names (None without it) and the horizon: `--steps`, else the
    resumed run's."""
    if keeping.resume is None:
        return None, steps
    state = R.read_state(keeping.resume)
    return state, steps if steps is not None else int(state.settings["horizon"])


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
    keeping: Keeping | None = None,
) -> None:
    """Train the run (one of `core.trainings`; its data in `folder`, the main file's);
    `echo` prints a line, `progress` (on a terminal) shows the phases and the steps
    (presk_cli.progress.Progress); `rewrite` a pass the step's program goes through
    (`--opt`); `keeping` what the run keeps beside its log (resume, metrics, a step to stop
    after)."""
    keeping, shown = keeping or Keeping(), progress or Progress(None)
    state, horizon = resumed(keeping, steps)
    trainer = Trainer(core, run, folder, seed, bits, horizon, rewrite, shown.phase)
    horizon = trainer.horizon
    # the settings, the data's digest among them, when a state or metrics record them
    recorded = functools.cache(
        lambda: R.settings(trainer, "interp", None, bits, seed, rewrite is not None)
    )
    start, loss_value = 0, None
    if state is not None:
        R.check(state, keeping.resume, recorded(), keeping.stop_after)
        trainer.theta, trainer.m, trainer.v = state.theta, state.m, state.v
        start, loss_value = state.t, state.settings.get("loss")
    ckpt_dir, every = checkpoints(run, folder, ckpt)
    metrics = None
    written: set[int] = set()  # the steps this run wrote a checkpoint of
    done = R.Completed(start, loss_value, saved=keeping.resume)
    times: list[float] = []
    shown.steps(start, horizon)
    start_time = time.perf_counter()
    try:
        metrics = keeping.writer(recorded, start)
        for s in trainer.steps(start=start):
            times.append(time.perf_counter() - start_time)
            t = s.t
            loss_value = float(np.asarray(s.loss).item())
            shown.step(t, loss_value)  # a terminal: the step we are at, overwritten in place
            logged = log_every and t % log_every == 0
            if logged or metrics is not None:
                with M.precision(bits):
                    norm = gmpy2.sqrt(sum(M.sum(M.mul(g, g)).item() for g in s.grads.values()))
                # np.asarray: a rate is a 0-d array, or an mpfr where --opt folded it
                rate = float(np.asarray(s.lr).item())
            if logged:
                shown.clear()
                echo(step_line(t, s.epoch, loss_value, rate, float(norm)))
            if metrics is not None:
                metrics.step(t, s.epoch, loss_value, rate, float(norm), times[-1])
            if ckpt_dir is not None and every and t % every == 0 and t != horizon:
                save(os.path.join(ckpt_dir, f"step_{t}.psk.d"), run.model, s.theta)
                written.add(t)
            done = R.Completed(t, loss_value, _exact_of(s), _doubles_of(s))  # one store
            if keeping.resumable and t in written:  # the state beside the checkpoint
                _keep(done, ckpt_dir, run.model, recorded, written)
            if keeping.stop_after == t and t != horizon:
                where = _keep(done, ckpt_dir or folder, run.model, recorded, written)
                raise StoppedAfter(t, where)
            start_time = time.perf_counter()
    except KeyboardInterrupt as e:  # SIGINT, SIGTERM, SIGHUP: the last completed step saved
        interrupted(e, done, ckpt_dir or folder, run.model, recorded, written)
        raise
    finally:
        if metrics is not None:
            metrics.close()
    shown.clear()
    if len(times) > 1:
        median = statistics.median(times[1:]) * 1000
        echo(
            f"presk train: {median:.1f} ms a step, median of {len(times) - 1} (the first excluded)"
        )
    finish(run, ckpt_dir or folder, horizon, loss_value, trainer.theta, echo)
    keeping.draw(metrics, echo)


def held_type(path: str) -> str:
    """The sample type a data file holds (its header), for the checker's training runs."""
    return D.read_header(path).type_text


def training_context(consts: dict[str, str], data: str | None, remat: str = "residuals"):
    """The context `presk train` checks a file in: the checker on, the run's data file
    opened by its header unless `data` (`--data`) replaces it."""
    from presk_syntax.pipeline import Context

    header = None if data else held_type
    return Context(consts=consts, check=True, data_header=header, remat=remat)


def checked_training(file: str, ctx, data: str | None):
    """`file` elaborated and checked in `ctx` (training_context) up to the pass `elab`, its
    run's data replaced by `data` and opened and matched (`--data`); its problems in
    `ctx.diagnostics`. `presk train` and the Python API's Program.train call it."""
    from presk_types.training import replace_data

    from presk_cli.pipeline import PIPELINE

    elaborated = PIPELINE.run("elab", file, ctx)
    if elaborated.runs and data:  # the run's data replaced: open and match this file
        problem = replace_data(elaborated.runs[0], elaborated.program.main, data, held_type)
        if problem is not None:
            ctx.diagnostics.append(problem)
    return elaborated


def opt_rewrite(ctx, core: Program, folder: str, profile: str | None = None):
    """`--opt`: the training step's program through core-opt (presk_opt), priced by the
    roofline of `profile` at the step's sizes (its batch, its data's dimensions) if given."""
    from presk_opt.cli import step_rewrite, step_sizes
    from presk_syntax.pipeline import Pricing

    if profile is not None:
        ctx.pricing = Pricing(profile, step_sizes(core.trainings[0], folder))
    return step_rewrite(ctx)


def train_program(core: Program, folder: str, flags: tuple, options: tuple[str, str, int], echo,
                  rewrite=None, keeping: Keeping | None = None, progress=None) -> None:  # fmt: skip
    """The first `training run` of `core` (the pass TRAIN's value; its data in `folder`, the
    main file's) on the reference interpreter or, by `options` (backend, realize, threads),
    the kernels: `flags` are (steps, log_every, ckpt, seed, bits). `presk train` and the
    Python API's Program.train call it."""
    steps, log_every, ckpt, seed, bits = flags
    where = (core, core.trainings[0], folder)
    if options[0] != "interp":
        from presk_cli.native_train import train_native

        train_native(*where, steps, log_every, ckpt, seed, bits, echo, options, rewrite, keeping,
                     progress)  # fmt: skip
        return
    train(*where, steps, log_every, ckpt, seed, bits, echo, progress, rewrite, keeping)


def _exact_of(s: StepRecord):
    return lambda: (s.theta, s.m, s.v)


def _doubles_of(s: StepRecord):
    return lambda: s.theta


def _keep(done: R.Completed, folder: str, model: str, recorded, written: set) -> str | None:
    return R.keep(done, folder, model, recorded, written, save)


def interrupted(e: BaseException, done: R.Completed, folder: str, model: str, recorded,
                written: set) -> None:  # fmt: skip
    """A signal stopped the run: signals masked (the save is not cut in two), the last
    completed step saved for `--resume`; where, or the error that kept it from being written,
    recorded on `e` (`saved`, `save_error`) for the command to say."""
    import signal

    from presk_cli.main import STOPS, mask_signals

    mask_signals()
    # and ignored: a signal sent to the process reaches the threads that do not mask it
    before = {s: signal.signal(s, signal.SIG_IGN) for s in STOPS if _main_thread()}
    try:
        e.saved = _keep(done, folder, model, recorded, written)
    except D.DataError as error:
        e.saved, e.save_error = None, error
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


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


__all__ = ["Keeping", "StoppedAfter", "TrainError", "train", "train_program"]
