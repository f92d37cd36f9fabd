"""The commands of `presk`, each calling the stages' functions in one process."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, NoReturn

import click
from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Severity, emit
from presk_syntax.span import SourceMap

from presk_cli.flags import Count
from presk_cli.native import PLAN, REALIZE, NativeError, backend_options
from presk_cli.native import fail as native_fail
from presk_cli.pipeline import PIPELINE, RUN, SHOWN, TRAIN
from presk_cli.precision import envelope_option

if TYPE_CHECKING:
    from presk_core.run import EntryError, RunError

# The modules a command needs are imported by the command, when it runs (`presk --help` and
# `presk check` stay quick: numpy, the interpreter and differentiation are not loaded).

# The stages `presk dump` prints: the list of passes (presk_cli.pipeline.PIPELINE).
STAGES = {p.name: p.line for p in PIPELINE}


DIM_MAX = 2**63 - 1  # a dimension is a natural of int64 (indices are int64)
SEED = Count(-(2**63), 2**64 - 1)  # --seed: a 64-bit integer (docs/randomness.md)


def _fail(error: DiagnosticError, sources: SourceMap) -> None:
    emit(error.diagnostics, sources)
    sys.exit(1)


def entry_fail(command: str, e: EntryError | RunError, sources: SourceMap) -> NoReturn:
    """An entry that cannot run: a usage error (exit 2) or its diagnostic (exit 1)."""
    from presk_core.run import EntryError

    if isinstance(e, EntryError) and e.usage:
        click.echo(f"presk {command}: {e}", err=True)
        sys.exit(2)
    emit(
        [
            e.diagnostic()
            if isinstance(e, EntryError)
            else Diagnostic(e.code, Severity.ERROR, str(e))
        ],
        sources,
    )
    sys.exit(1)


def _keeping(resume, stop_after, metrics, plot, compare, resumable):
    """What `presk train` keeps beside its log (presk_cli.train.Keeping): `--compare`'s file
    read and matplotlib's presence checked before the run, not after it."""
    from presk_cli.metrics import MetricsError, label, needs_matplotlib, read_metrics
    from presk_cli.train import Keeping

    if compare is not None and plot is None:
        raise click.BadParameter(
            "draws beside --plot's run: give --plot FILE.png", param_hint="--compare"
        )
    other = None
    try:
        if plot is not None:
            needs_matplotlib()
        if compare is not None:
            head, rows = read_metrics(compare)
            other = (label(head, compare), rows)
    except MetricsError as e:
        emit([Diagnostic(e.code, Severity.ERROR, str(e))], {})
        sys.exit(1)
    return Keeping(resume, metrics, stop_after, plot, other, resumable)


def _train_lowered(file, ctx, elaborated, shown, flags, opt, profile, native, keeping) -> None:
    """`presk train` past checking: the file lowered to PSK-Core, its step rewritten
    (`--opt`), trained on the interpreter or the kernels (`flags`: steps, log_every, ckpt,
    seed, bits)."""
    from presk_cli.train import opt_rewrite, train_program

    shown.phase("lowering to PSK-Core")
    core = PIPELINE.run(TRAIN, file, ctx, start=elaborated, first="elab")
    rewrite = opt_rewrite(ctx, core, os.path.dirname(file), profile) if opt else None
    # from the core program: its training run, its data by the file's folder (--opt: the
    # rewritten step, lowered to kernels with --backend kernel|native)
    plan, realize = native.get("plan_read"), native["realize"]
    options = (native["backend"], realize, native["threads"], *((plan,) if plan else ()))
    train_program(core, os.path.dirname(file), flags, options, click.echo, rewrite, keeping, shown)


def _write_on_terminal(text: str) -> None:
    click.echo(text, nl=False)


def _say_saved(e: BaseException, sources: SourceMap) -> None:
    """Where an interrupted run saved its last completed step (presk_cli.train.interrupted)."""
    error = getattr(e, "save_error", None)
    if error is not None:
        emit([Diagnostic(error.code, Severity.ERROR, str(error))], sources)
    elif getattr(e, "saved", None):
        click.echo(f"presk train: continue with --resume {e.saved}", err=True)
    elif hasattr(e, "saved"):
        click.echo("presk train: no step was complete: nothing to resume", err=True)


def _held_type(path: str) -> str:
    """presk_cli.train.held_type, imported when a file has a training run: `presk check`
    of one without loads neither numpy nor the trainer."""
    from presk_cli.train import held_type

    return held_type(path)


def _consts(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in values:
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise click.BadParameter(f"`{item}` is not NAME=VALUE", param_hint="--const")
        try:  # V is a number, exactly: `8`, `1/2`, `0.02` (not one GMP aborts on: 1e99999999)
            from presk_types.constants import read_number

            read_number(value.strip())
        except ZeroDivisionError:  # `1/0`: elaboration's E1003 says it, with the constant
            pass
        except ValueError:
            raise click.BadParameter(
                f"`{item}`: `{value.strip()}` is not a number", param_hint="--const"
            ) from None
        out[name.strip()] = value.strip()
    return out


CONST = click.option(
    "--const",
    "consts",
    multiple=True,
    metavar="NAME=V",
    help="Override a constant of the file or of a file it imports; everything is re-checked.",
)


REMATS = ("residuals", "recompute")  # presk_ad.vjp.REMATS (a test says they agree)

REMAT = click.option(
    "--remat",
    type=click.Choice(list(REMATS)),
    default="residuals",
    show_default=True,
    help="Reverse mode: `residuals`, a .fwd returns what its .bwd reads; `recompute`, each"
    " .vjp computes its forward pass again.",
)

WEIGHTS = click.option(
    "--weights",
    "weights_file",
    type=click.Path(dir_okay=False),
    metavar="CKPT",
    help="Bind the entry's parameter tree from a checkpoint (a .psk.d of `params M`, as"
    " `presk train` writes it) instead of drawing it from its initializers.",
)
PROFILE = click.option(
    "--profile",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="With --opt: price the rewriting by the roofline of this machine profile (presk bench"
    " --calibrate), in µs (docs/optimizer.md).",
)


def _profile_needs_opt(command: str, opt: bool, profile: str | None) -> None:
    if profile is not None and not opt:
        click.echo(f"presk {command}: --profile prices --opt's rewriting: give --opt", err=True)
        sys.exit(2)


@click.command(short_help="Type-check a program: shapes, regularity classes, effects")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--summary", is_flag=True, help="Print each function's type and lets, then classes and effects."
)
@CONST
@envelope_option(
    "Bound the error of --realize on the entry of this envelope (presk calibrate"
    " --precision): a sound bound, docs/precision.md.",
    name="envelope",
    required=False,
)
@click.option(
    "--realize",
    type=REALIZE,
    default=None,
    help="With --precision: the realization to bound (f64, f32, bf16 or @FILE).",
)
@click.option(
    "--model",
    type=click.Choice(["cond", "interval"]),
    default="cond",
    show_default=True,
    help="With --precision: the smaller of the running bound on the envelope's inputs and the"
    " interval bound through each sum's measured Σ|terms| (cond), or the interval bound from"
    " the terms' magnitudes alone (interval).",
)
def check(
    file: str,
    summary: bool,
    consts: tuple[str, ...],
    envelope: str | None,
    realize: str | None,
    model: str,
) -> None:
    """Check FILE: syntax, constants, shapes for every value of the dimensions,
    regularity classes and effects. Silent on success (exit 0); diagnostics on standard
    error (exit 1 if any is an error). With --precision ENV --realize T: print a sound bound
    on the error of T on the envelope's entry instead."""
    if envelope is not None or realize is not None:
        if envelope is None or realize is None or summary:
            raise click.UsageError("--precision ENV and --realize T go together, without --summary")
        from presk_cli.precision import check_precision

        check_precision(envelope, file, realize, model, _consts(consts))
        return
    from presk_types.driver import check_file
    from presk_types.summary import summary as summary_text

    overrides = _consts(consts)
    sources = SourceMap()
    try:
        checked = check_file(file, overrides, sources, data_header=_held_type)
    except DiagnosticError as e:
        _fail(e, sources)
    emit(checked.diagnostics, sources)
    if summary:
        click.echo(summary_text(checked.checker, checked.runs), nl=False)
    if not checked.ok:
        sys.exit(1)


@click.command(short_help="Dump an intermediate representation (development aid)")
@click.argument("file", type=click.Path(dir_okay=False))
@CONST
@click.option(
    "--stage",
    required=True,
    type=click.Choice(list(STAGES)),
    help="What to print: " + "; ".join(f"{k}: {v}" for k, v in STAGES.items()),
)
@click.option("--unroll-stack", is_flag=True, help="With --stage core: each stack{L} as L calls.")
@click.option(
    "--sites", is_flag=True, help="With a core stage: each instruction's site and origin."
)
@REMAT
@click.option(
    "--entry",
    help="With --stage specialize, flat, sched or kernel: the entry, as `presk run` takes it.",
)
@click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="With --entry: a dimension.")
@click.option(
    "--realize",
    type=REALIZE,
    default="f64",
    show_default=True,
    help="With --stage sched or kernel: the type of every real, or a realization (@FILE).",
)
@click.option(
    "--format",
    "form",
    type=click.Choice(["text", "unicode"]),
    default="text",
    show_default=True,
    help="With a Core stage: `unicode`, each function as equations, each made by a pass with"
    " the rule that made it.",
)
def dump(
    file: str,
    stage: str,
    consts: tuple[str, ...],
    unroll_stack: bool,
    sites: bool,
    remat: str,
    entry: str | None,
    dims: tuple[str, ...],
    realize: str,
    form: str,
) -> None:
    """Print FILE after a stage of the compiler. The format is not stable."""
    from presk_core.ir import Program
    from presk_opt.passes import Optimized
    from presk_syntax.pipeline import Context, EntryOptions
    from presk_types.passes import Elaborated

    from presk_cli.pipeline import show

    p = PIPELINE.find(stage)
    if form == "unicode" and not issubclass(p.gives, (Program, Optimized)):
        raise click.UsageError(f"--format unicode is for the Core stages, not `{stage}`")
    where = EntryOptions(entry, tuple(_dims(dims).items()), realize)
    elab = issubclass(p.gives, Elaborated)
    ctx = Context(consts=_consts(consts), remat=remat, check=elab, entry=where)
    try:
        value = PIPELINE.run(SHOWN.get(stage, stage), file, ctx)
    except DiagnosticError as e:
        _fail(e, ctx.sources)
    if isinstance(value, Optimized):  # printed as its program
        value = value.program
    if unroll_stack and isinstance(value, Program):
        from presk_core.passes import unroll_stack as unroll
        from presk_core.passes import verified

        value = verified(unroll(value), "--unroll-stack")
    if elab:  # printed even when the checker found errors
        emit([d for d in ctx.diagnostics if d.is_error], ctx.sources)
        click.echo(show(value), nl=False)
        sys.exit(1 if any(d.is_error for d in ctx.diagnostics) else 0)
    if form == "unicode":
        from presk_core.equations import format_equations

        click.echo(format_equations(value), nl=False)
        return
    click.echo(show(value, sites), nl=False)


def _dims(values: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in values:
        name, eq, value = item.partition("=")
        digits = value.strip()  # ASCII only: str.isdigit takes `²`, and int() reads `١` as 1
        if not eq or not name.strip() or not (digits.isascii() and digits.isdigit()):
            raise click.BadParameter(
                f"`{item[:60]}` is not NAME=N (N a natural number)", param_hint="--dim"
            )
        if len(digits.lstrip("0")) > 19 or int(digits) > DIM_MAX:  # int() stops at 4300 digits
            raise click.BadParameter(
                f"`{item[:60]}`: a dimension is at most 2^63 - 1", param_hint="--dim"
            )
        out[name.strip()] = int(digits)
    return out


@click.command(short_help="Evaluate an entry point on the reference interpreter or natively")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--entry", help="The function to run: `f`, `M.f` or `M{3, 2}.f`.")
@click.option(
    "--dim",
    "dims",
    multiple=True,
    metavar="NAME=N",
    help="A dimension, or an axis of an open prefix.",
)
@CONST
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="The root of every random draw.",
)
@click.option(
    "--bits", type=Count(2, 100000), default=256, show_default=True, help="MPFR precision."
)
@click.option(
    "--digits",
    type=Count(1, 1000),
    default=12,
    show_default=True,
    help="Significant digits printed.",
)
@click.option(
    "--verbose", is_flag=True, help="Print the entry, θ and the inputs before the result."
)
@click.option(
    "--json", "as_json", is_flag=True, help="The inputs and the result as JSON, at full precision."
)
@click.option(
    "--data",
    "data_file",
    type=click.Path(dir_okay=False),
    help="Fill the entry's last argument from a .psk.d file, its samples on the `batch` axis.",
)
@WEIGHTS
@REMAT
@click.option("--opt", is_flag=True, help="Rewrite by the exact rules first (docs/optimizer.md).")
@PROFILE
@PLAN
@backend_options
def run(
    file,
    entry,
    dims,
    consts,
    seed,
    bits,
    digits,
    verbose,
    as_json,
    data_file,
    weights_file,
    remat,
    opt,
    profile,
    plan,
    **native,
) -> None:
    """Evaluate an entry of FILE on the reference interpreter: exact arithmetic (MPFR at
    --bits), inputs synthesized from the types and --seed; or, with --backend, on the
    kernels of the entry, interpreted or compiled (docs/native.md)."""
    from presk_core.run import EntryError, RunError, entry_names, run_entry
    from presk_syntax.pipeline import Context, Pricing

    ctx = Context(consts=_consts(consts), remat=remat)
    sources = ctx.sources
    dim_values = _dims(dims)
    _profile_needs_opt("run", opt, profile)
    if plan is not None and native["backend"] == "interp":
        raise click.UsageError(
            "--plan is for --backend kernel|native: the reference interpreter has no layouts"
        )
    try:  # the passes of the pipeline up to differentiation (presk_cli.pipeline)
        elaborated = PIPELINE.run("elab", file, ctx)
        core = PIPELINE.run(RUN, file, ctx, start=elaborated, first="elab")
        if opt:  # the pass core-opt, its report on standard error
            from presk_opt.cli import entry_sizes, optimized

            if profile is not None:
                ctx.pricing = Pricing(profile, entry_sizes(core, entry, dim_values))
            core = optimized(core, ctx).program
    except DiagnosticError as e:
        _fail(e, sources)
    if entry is None:
        if elaborated.program.main.trainings:
            click.echo(
                "presk run: this file has a `training run`: use `presk train` to execute it,"
                " or --entry to evaluate one function",
                err=True,
            )
        else:
            names = ", ".join(entry_names(core))
            click.echo(f"presk run: --entry is required; functions: {names}", err=True)
        sys.exit(2)
    if data_file is None:  # a mistyped --dim is not an axis (the data's dimensions aside)
        from presk_core.run import check_dim_names, parse_entry

        try:
            check_dim_names(parse_entry(entry, core, None, dim_values))
        except EntryError as e:
            entry_fail("run", e, sources)
    weights = None
    if weights_file is not None:  # the entry's tree from a checkpoint (presk_cli.weights)
        from presk_cli.weights import bind_weights

        weights = lambda e: bind_weights(core, e, weights_file, bits)  # noqa: E731
    if native["backend"] != "interp":
        from presk_cli.native import run_native

        args = (entry, dim_values, seed, bits, digits, verbose, as_json, data_file)
        text = run_native(core, args, native, sources, weights, plan)
        click.echo(text, nl=False)
        return
    try:
        text = run_entry(  # the core program alone: its metadata says what the source did
            core, None, entry, dim_values, seed, bits, digits, verbose, as_json, data_file,
            weights,
        )  # fmt: skip
    except (EntryError, RunError) as e:
        entry_fail("run", e, sources)
    click.echo(text, nl=False)


@click.command(
    short_help="Run the `training run` of a file, on the reference interpreter or natively"
)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--steps", type=Count(1), help="The horizon (default: the run's epochs).")
@click.option(
    "--log-every",
    type=Count(0),
    default=10,
    show_default=True,
    help="Log a line every K steps.",
)
@click.option(
    "--ckpt", type=click.Path(file_okay=False), help="Where checkpoints go (default: the block's)."
)
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="The root of θ's draws.",
)
@click.option(
    "--bits", type=Count(2, 100000), default=256, show_default=True, help="MPFR precision."
)
@click.option(
    "--data",
    "data_file",
    type=click.Path(dir_okay=False),
    help="Train on this .psk.d file instead of the run's.",
)
@CONST
@click.option("--opt", is_flag=True, help="Rewrite the step by the exact rules first.")
@PROFILE
@click.option(
    "--resume",
    type=click.Path(dir_okay=False),
    metavar="CKPT",
    help="Continue the run from this checkpoint and the state saved beside it (a run saves"
    " one when a signal or --stop-after stops it).",
)
@click.option(
    "--stop-after",
    type=Count(1),
    metavar="K",
    help="Stop after step K of the horizon, saved for --resume.",
)
@click.option(
    "--resumable",
    is_flag=True,
    help="Write the state --resume needs beside every checkpoint too (a run killed by"
    " SIGKILL resumes from its last one).",
)
@click.option(
    "--metrics",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the run's settings, then each step's metrics, as JSON lines.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Plot the loss and |g| against the step into this PNG (needs matplotlib).",
)
@click.option(
    "--compare",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="With --plot: another run's --metrics file, drawn beside this run's.",
)
@click.option(
    "--quiet",
    is_flag=True,
    help="On a terminal too, only the log: no phases before step 1, no line of the step.",
)
@PLAN
@backend_options
def train(
    file,
    steps,
    log_every,
    ckpt,
    seed,
    bits,
    data_file,
    consts,
    opt,
    profile,
    resume,
    stop_after,
    resumable,
    metrics,
    plot,
    compare,
    quiet,
    plan,
    **native,
) -> None:
    """Train the model of FILE's `training run`: each step the objective and its gradient on
    a batch, then an AdamW step, on the reference interpreter (docs/training.md), or with
    --backend native as one call of compiled kernels (docs/native.md)."""
    from presk_ad import ADError
    from presk_core.data import DataError
    from presk_core.run import EntryError, RunError

    from presk_cli.metrics import MetricsError
    from presk_cli.progress import Progress
    from presk_cli.resume import ResumeError
    from presk_cli.train import StoppedAfter, TrainError, checked_training, training_context

    keeping = _keeping(resume, stop_after, metrics, plot, compare, resumable)
    if plan is not None:  # read before the run (E7111, E7113); its layouts at the step's lowering
        from presk_cli.native import plan_options

        native["plan_read"], native["realize"] = plan_options(plan, native)
    ctx = training_context(_consts(consts), data_file)
    sources = ctx.sources
    _profile_needs_opt("train", opt, profile)
    # on a terminal: what the run waits for, then where it is (nothing through a pipe)
    shown = Progress(_write_on_terminal if sys.stdout.isatty() and not quiet else None)
    shown.phase(f"checking `{file}`")
    try:  # the passes of the pipeline up to lowering; the step differentiates (presk_ad.step)
        elaborated = checked_training(file, ctx, data_file)
    except DiagnosticError as e:
        shown.clear()
        _fail(e, sources)
    runs, diagnostics = elaborated.runs, ctx.diagnostics
    if diagnostics:
        shown.clear()  # the diagnostics where the phase's line was
    emit(diagnostics, sources)
    if not any(d.is_error for d in diagnostics) and not runs:
        click.echo(f"presk train: `{file}` has no `training run`", err=True)
        sys.exit(2)
    if any(d.is_error for d in diagnostics):
        sys.exit(1)
    try:
        with shown:  # its line cleared when the run stops on an error or a signal
            _train_lowered(file, ctx, elaborated, shown, (steps, log_every, ckpt, seed, bits),
                           opt, profile, native, keeping)  # fmt: skip
    except KeyboardInterrupt as e:  # SIGINT, SIGTERM, SIGHUP (presk_cli.main.Interrupted)
        from presk_cli.main import mask_signals, stopped

        mask_signals()  # the way out is not interrupted again; main() removes the temporaries
        status, words = stopped(e)
        # checkpoints are written whole or not at all: the last one is intact
        click.echo(f"\npresk train: {words}; the checkpoints written so far are whole", err=True)
        _say_saved(e, sources)
        sys.exit(status)
    except StoppedAfter as e:
        click.echo(
            f"presk train: stopped after step {e.t} (--stop-after); continue with --resume"
            f" {e.where}"
        )
    except (ResumeError, MetricsError) as e:
        emit([Diagnostic(e.code, Severity.ERROR, str(e))], sources)
        sys.exit(1)
    except DataError as e:  # a checkpoint that cannot be written: the file before is kept
        emit([Diagnostic(e.code, Severity.ERROR, str(e))], sources)
        sys.exit(1)
    except NativeError as e:
        native_fail(e, sources)
    except DiagnosticError as e:  # the step's passes: `--opt --profile`'s E9002
        _fail(e, sources)
    except (TrainError, ADError, RunError, EntryError) as e:
        emit([Diagnostic("E7008", Severity.ERROR, f"training stopped: {e}")], sources)
        sys.exit(1)
