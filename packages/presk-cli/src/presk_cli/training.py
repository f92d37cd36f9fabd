"""`Program.train` of the Python API: the file's `training run` checked and run as `presk
train` checks and runs it (presk_cli.train.train_program), each step's metrics given to a
callback (the rows of `--metrics`), the final θ returned as a nested dict.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from presk_cli.api import PreskError, _raised


def train_file(program, steps: int | None, options: tuple[str, str, int], seed: int, bits: int,
               callback: Callable[[dict], None] | None, ckpt: str | None,
               log: Callable[[str], None] | None) -> dict:  # fmt: skip
    """`presk train FILE --steps --backend --realize --threads --seed --bits --ckpt` for
    `program` (presk_cli.api.Program): the final θ, read back from its `final.psk.d`."""
    from presk_ad import ADError
    from presk_core.run import EntryError, RunError
    from presk_syntax.diagnostics import DiagnosticError
    from presk_syntax.pipeline import Context

    from presk_cli.commands import _held_type
    from presk_cli.pipeline import PIPELINE, TRAIN
    from presk_cli.pydata import read_data
    from presk_cli.train import Keeping, TrainError, checkpoints, train_program

    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1):
        raise PreskError.of("E7080", f"steps={steps!r}: a count of 1 or more")
    path = program.path
    ctx = Context(consts=program.consts, remat=program.remat, check=True, data_header=_held_type)
    try:
        elaborated = PIPELINE.run("elab", path, ctx)
        errors = [d for d in ctx.diagnostics if d.is_error]
        if errors:
            raise PreskError(errors, ctx.sources)
        if not elaborated.runs:
            raise PreskError.of("E7081", f"`{path}` has no `training run` to train")
        core = PIPELINE.run(TRAIN, path, ctx, start=elaborated, first="elab")
    except DiagnosticError as e:
        raise PreskError(e.diagnostics, ctx.sources) from None
    folder = os.path.dirname(path)
    flags = (steps, 0, ckpt, seed, bits)
    keeping = Keeping(on_step=callback)
    try:
        train_program(core, folder, flags, options, log or _quiet, None, keeping)
    except (TrainError, ADError, RunError, EntryError) as e:  # as `presk train` says them
        raise PreskError.of("E7008", f"training stopped: {e}") from None
    except Exception as e:  # the stages' errors, each with its code (E7008: training stopped)
        if getattr(e, "code", None) is None and not isinstance(e, DiagnosticError):
            raise
        raise _raised(e, ctx.sources) from None
    where, _ = checkpoints(core.trainings[0], folder, ckpt)
    return read_data(os.path.join(where or folder, "final.psk.d"))


def _quiet(line: str) -> None:
    """The log of a run from Python, without `log=`: not printed."""


__all__ = ["train_file"]
