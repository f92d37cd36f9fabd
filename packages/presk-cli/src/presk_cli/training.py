"""`Program.train` of the Python API: the file's `training run` checked and run as `presk
train` checks and runs it (presk_cli.train: checked_training, train_program), each step's
metrics given to a callback (the rows of `--metrics`), the final θ returned as a nested dict.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from presk_cli.api import PreskError, _raised


@dataclass(frozen=True, slots=True)
class Run:
    """What `Program.train` takes besides the program: `presk train`'s flags."""

    steps: int | None = None
    options: tuple[str, str, int] = ("native", "f64", 1)  # backend, realize, threads
    seed: int = 0
    bits: int = 256
    ckpt: str | None = None
    data: str | None = None
    metrics: str | None = None
    resume: str | None = None
    log_every: int = 10
    opt: bool = False  # the step rewritten by the exact rules (presk_opt)
    profile: str | None = None  # opt's pricing: a machine profile


def _counts(run: Run) -> None:
    for name, value, least in (("steps", run.steps, 1), ("log_every", run.log_every, 0)):
        if value is None and name == "steps":
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise PreskError.of("E7080", f"{name}={value!r}: a count of {least} or more")


def train_file(program, run: Run, callback: Callable[[dict], None] | None,
               log: Callable[[str], None] | None) -> dict:  # fmt: skip
    """`presk train FILE` with `run`'s flags for `program` (presk_cli.api.Program): the final
    θ, read back from the `final.psk.d` the run writes."""
    from presk_ad import ADError
    from presk_core.run import EntryError, RunError
    from presk_syntax.diagnostics import DiagnosticError

    from presk_cli.pipeline import PIPELINE, TRAIN
    from presk_cli.pydata import read_data
    from presk_cli.train import (
        Keeping,
        TrainError,
        checked_training,
        checkpoints,
        opt_rewrite,
        train_program,
        training_context,
    )

    _counts(run)
    path = program.path
    data = None if run.data is None else os.fspath(run.data)
    ctx = training_context(program.consts, data, program.remat)
    try:
        elaborated = checked_training(path, ctx, data)
        errors = [d for d in ctx.diagnostics if d.is_error]
        if errors:
            raise PreskError(errors, ctx.sources)
        if not elaborated.runs:
            raise PreskError.of("E7081", f"`{path}` has no `training run` to train")
        core = PIPELINE.run(TRAIN, path, ctx, start=elaborated, first="elab")
    except DiagnosticError as e:
        raise PreskError(e.diagnostics, ctx.sources) from None
    folder = os.path.dirname(path)
    flags = (run.steps, run.log_every, run.ckpt, run.seed, run.bits)
    keeping = Keeping(resume=run.resume, metrics=run.metrics, on_step=callback)
    try:
        rewrite = opt_rewrite(ctx, core, folder, run.profile) if run.opt else None
        with _mask_kept():
            train_program(core, folder, flags, run.options, log or _quiet, rewrite, keeping)
    except (TrainError, ADError, RunError, EntryError) as e:  # as `presk train` says them
        raise PreskError.of("E7008", f"training stopped: {e}") from None
    except Exception as e:  # the others with their own codes (resume, metrics, data, C)
        if getattr(e, "code", None) is None and not isinstance(e, DiagnosticError):
            raise
        raise _raised(e, ctx.sources) from None
    where, _ = checkpoints(core.trainings[0], folder, run.ckpt)
    return read_data(os.path.join(where or folder, "final.psk.d"))


@contextmanager
def _mask_kept() -> Iterator[None]:
    """The signal mask as it was: a run that Ctrl-C stops saves its last completed step with
    the signals masked (presk_cli.train.interrupted), which a command keeps as it exits, and
    a Python session must not (its next Ctrl-C would never come)."""
    main = threading.current_thread() is threading.main_thread()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set()) if main else None
    try:
        yield
    finally:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _quiet(line: str) -> None:
    """The log of a run from Python, without `log=`: not printed."""


__all__ = ["Run", "train_file"]
