"""`presk memory FILE --entry E --dim … [--realize T] [--step]` (L59, L540): what one call of
an entry needs in memory, counted from the schedule it lowers to, nothing run
(presk_cback.memory; docs/memory.md). `--step`: the file's training step (the objective's
value and gradient, then AdamW's step, as `presk train --backend native` calls it) under
both `--remat`s."""

from __future__ import annotations

import os
import sys

import click
from presk_syntax.diagnostics import DiagnosticError

from presk_cli.commands import CONST, _consts, _dims, _fail, entry_fail
from presk_cli.native import REALIZE, NativeError, fail


def _bytes(n: int) -> str:
    return f"{n:,} B"


def _share(n: int, peak: int) -> str:
    return f"{100 * n / peak:.1f} %" if peak else "—"


def report(title: str, m) -> list[str]:
    """The lines `presk memory` prints for one schedule's Memory."""
    rows = [("parameters", m.parameters)]
    if m.state:
        rows.append(("optimizer state", m.state))
    rows += [("inputs", m.inputs), ("outputs", m.outputs)]
    lines = [title]
    lines += [f"{name:<20}{_bytes(n):>14}  {_share(n, m.peak)}" for name, n in rows]
    lines.append(
        f"{'peak of live bytes':<20}{_bytes(m.peak):>14}   at launch {m.peak_launch + 1} of"
        f" {m.launches}, the parameters, inputs and outputs included"
    )
    width = max([len("function"), *(len(f.function) for f in m.functions)])
    lines.append(f"{'function':<{width}}  calls  {'temporaries':>14}  {'at the peak':>14}  share")
    for f in m.functions:
        lines.append(
            f"{f.function:<{width}}  {f.calls:>5}  {_bytes(f.temporaries):>14}"
            f"  {_bytes(f.at_peak):>14}  {_share(f.at_peak, m.peak)}"
        )
    lines.append(
        f"-- arenas: the native backend's {_bytes(m.native_arena)} (temporaries sharing space),"
        f" the C program's {_bytes(m.c_arena)} ({_bytes(m.c_unreleased)} if no call released"
        " its locals)"
    )
    return lines


@click.command(
    short_help="What one call of an entry needs in memory: its parameters, the peak of its"
    " live bytes, the C program's arena beside them"
)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--entry", help="The function: `f`, `M.f` or `M{3, 2}.f` (not with --step).")
@click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="A dimension.")
@CONST
@click.option(
    "--realize",
    type=REALIZE,
    default="f64",
    show_default=True,
    help="The type of the reals: f64, f32, bf16 (their bytes), or a realization @FILE.",
)
@click.option(
    "--step",
    is_flag=True,
    help="The file's training step (value, gradient and AdamW's step) under both --remat.",
)
def memory(file, entry, dims, consts, realize, step) -> None:
    """What one call of an entry of FILE needs in memory, counted from the schedule it lowers
    to (nothing is run): the parameters, the inputs and outputs, the peak of live bytes and
    each function's share of it, beside the arenas the native backend and the C program
    allocate (docs/memory.md)."""
    from presk_core.run import EntryError, RunError
    from presk_syntax.pipeline import Context

    if step == (entry is not None):
        raise click.UsageError("give --entry E, or --step for the training run's step")
    dims = _dims(dims)
    consts = _consts(consts)
    if step:
        lines = _step(file, consts, dims, realize)
    else:
        ctx = Context(consts=consts)
        try:
            lines = _entry(file, ctx, entry, dims, realize)
        except DiagnosticError as e:
            _fail(e, ctx.sources)
        except (EntryError, RunError) as e:
            entry_fail("memory", e, ctx.sources)
        except NativeError as e:
            fail(e, ctx.sources)
    click.echo("\n".join(lines))
    sys.stdout.flush()


def _entry(file, ctx, entry, dims, realize) -> list[str]:
    from presk_cback.memory import memory as count
    from presk_core.run import parse_entry
    from presk_types.types import ParamsT

    from presk_cli.native import lower
    from presk_cli.pipeline import PIPELINE, RUN

    core = PIPELINE.run(RUN, file, ctx)
    e = parse_entry(entry, core, None, dims)
    all_dims = dict(e.dims) | dict(e.prefix)
    schedule = lower(core, e.function.name, all_dims, None, realize)
    trees = tuple(p.name for p in e.function.params if isinstance(p.type, ParamsT))
    return report(f"-- {_title(e.function.name, all_dims, realize)}", count(schedule, trees))


def _title(name: str, dims: dict, realize) -> str:
    at = ", ".join(f"{d}={v}" for d, v in dims.items())
    kind = realize if isinstance(realize, str) else "a realization"
    return f"{name}{f' at {at}' if at else ''} in {kind}"


def _step(file, consts, dims, realize) -> list[str]:
    """The training step's lines under --remat residuals, then recompute."""
    from presk_ad import ADError
    from presk_ad.step import NATIVE_STEP, TrainError, native_step, opened, training_step
    from presk_cback.memory import memory as count
    from presk_core.run import RunError

    from presk_cli.native import lower
    from presk_cli.pipeline import PIPELINE, TRAIN
    from presk_cli.train import checked_training, training_context

    lines: list[str] = []
    for remat in ("residuals", "recompute"):
        ctx = training_context(consts, None, remat)
        try:
            elaborated = checked_training(file, ctx, None)
            errors = [d for d in ctx.diagnostics if d.is_error]
            if errors:
                raise DiagnosticError(errors)
            if not elaborated.runs:
                fail(NativeError("E7081", f"`{file}` has no `training run`"), ctx.sources)
            core = PIPELINE.run(TRAIN, file, ctx, start=elaborated, first="elab")
            run = opened(core.trainings[0], os.path.dirname(file))
            program = native_step(training_step(core, run.objective, remat), run.objective)
            at = dict(run.dims()) | dims
            name = NATIVE_STEP.format(run.objective)
            schedule = lower(program, name, at, None, realize)
        except DiagnosticError as e:
            _fail(e, ctx.sources)
        except (TrainError, ADError, RunError) as e:
            fail(NativeError(getattr(e, "code", "E7008"), str(e)), ctx.sources)
        except NativeError as e:
            fail(e, ctx.sources)
        title = f"-- the training step of `{run.objective}`, --remat {remat}: " + _title(
            name, at, realize
        )
        lines += [*([""] if lines else []), *report(title, count(schedule, ("θ",), ("m", "v")))]
    return lines


__all__ = ["memory", "report"]
