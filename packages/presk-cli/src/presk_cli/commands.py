"""The commands of `presk`, each calling the stages' functions in one process."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, NoReturn

import click
from presk_core.passes import PASSES
from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Severity, emit
from presk_syntax.span import SourceMap

from presk_cli.native import NativeError, backend_options
from presk_cli.native import fail as native_fail

if TYPE_CHECKING:
    from presk_core.run import EntryError, RunError

# The modules a command needs are imported by the command, when it runs (`presk --help` and
# `presk check` stay quick: numpy, the interpreter and differentiation are not loaded).

# The stages `presk dump` prints: the list of passes (presk_core.passes.PASSES).
STAGES = {p.name: p.line for p in PASSES}


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


def _held_type(path: str) -> str:
    """The sample type a data file holds (its header), for the checker's training runs."""
    from presk_core.data import read_header

    return read_header(path).type_text


def _step_rewrite(ctx):
    from presk_opt.cli import step_rewrite  # `--opt`: the step through core-opt

    return step_rewrite(ctx)


def _consts(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in values:
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise click.BadParameter(f"`{item}` is not NAME=VALUE", param_hint="--const")
        try:  # V is a number, exactly: `8`, `1/2`, `0.02`
            import gmpy2

            gmpy2.mpq(value.strip())
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


RUN = "core-after-ad"  # the last pass `presk run` runs before the interpreter
TRAIN = "core"  # and `presk train`, before its step (presk_ad.step differentiates it)

REMATS = ("residuals", "recompute")  # presk_ad.vjp.REMATS (a test says they agree)

REMAT = click.option(
    "--remat",
    type=click.Choice(list(REMATS)),
    default="residuals",
    show_default=True,
    help="Reverse mode: `residuals`, a .fwd returns what its .bwd reads; `recompute`, each"
    " .vjp computes its forward pass again.",
)


@click.command(short_help="Type-check a program: shapes, regularity classes, effects")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--summary", is_flag=True, help="Print each function's type and lets, then classes and effects."
)
@CONST
def check(file: str, summary: bool, consts: tuple[str, ...]) -> None:
    """Check FILE: syntax, constants, shapes for every value of the dimensions,
    regularity classes and effects. Silent on success (exit 0); diagnostics on standard
    error (exit 1 if any is an error)."""
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
    type=click.Choice(["f64", "f32", "bf16"]),
    default="f64",
    show_default=True,
    help="With --stage kernel: the type of every real.",
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
) -> None:
    """Print FILE after a stage of the compiler. The format is not stable."""
    from presk_core.passes import Context, find, run_pipeline, show

    p = find(stage)
    ctx = Context(consts=_consts(consts), remat=remat, check=p.gives == "elab")
    ctx.options.update(file=file, entry=entry, dims=_dims(dims), realize=realize)
    try:
        value = run_pipeline(stage, file, ctx)
    except DiagnosticError as e:
        _fail(e, ctx.sources)
    if p.gives == "core":
        from presk_core.ir import format_program
        from presk_core.passes import unroll_stack as unroll
        from presk_core.passes import verified

        if unroll_stack:
            value = verified(unroll(value), "--unroll-stack")
        click.echo(format_program(value, sites), nl=False)
        return
    if p.gives == "elab":  # printed even when the checker found errors
        emit([d for d in ctx.diagnostics if d.is_error], ctx.sources)
        click.echo(show(p.gives, value), nl=False)
        sys.exit(1 if any(d.is_error for d in ctx.diagnostics) else 0)
    click.echo(show(p.gives, value), nl=False)


def _dims(values: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in values:
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip().isdigit():
            raise click.BadParameter(
                f"`{item}` is not NAME=N (N a natural number)", param_hint="--dim"
            )
        out[name.strip()] = int(value)
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
    "--seed", type=int, default=0, show_default=True, help="The root of every random draw."
)
@click.option(
    "--bits", type=click.IntRange(2, 100000), default=256, show_default=True, help="MPFR precision."
)
@click.option(
    "--digits",
    type=click.IntRange(1, 1000),
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
@REMAT
@click.option("--opt", is_flag=True, help="Rewrite by the exact rules first (docs/optimizer.md).")
@backend_options
def run(
    file, entry, dims, consts, seed, bits, digits, verbose, as_json, data_file, remat, opt, **native
) -> None:
    """Evaluate an entry of FILE on the reference interpreter: exact arithmetic (MPFR at
    --bits), inputs synthesized from the types and --seed; or, with --backend, on the
    kernels of the entry, interpreted or compiled (docs/native.md)."""
    from presk_core.passes import Context, run_pipeline
    from presk_core.run import EntryError, RunError, entry_names, run_entry

    ctx = Context(consts=_consts(consts), remat=remat)
    sources = ctx.sources
    dim_values = _dims(dims)
    try:  # the passes of the list up to differentiation (presk_core.passes.PASSES)
        program = run_pipeline("elab", file, ctx)
        core = run_pipeline(RUN, file, ctx, start=program, first="elab")
        if opt:  # the pass core-opt, its report on standard error
            from presk_opt.cli import optimized

            core = optimized(core, file, ctx, RUN)
    except DiagnosticError as e:
        _fail(e, sources)
    if entry is None:
        if program.main.trainings:
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
    if native["backend"] != "interp":
        from presk_cli.native import run_native

        args = (entry, dim_values, seed, bits, digits, verbose, as_json, data_file)
        text = run_native(core, args, native, sources)
        click.echo(text, nl=False)
        return
    try:
        text = run_entry(  # the core program alone: its metadata says what the source did
            core, None, entry, dim_values, seed, bits, digits, verbose, as_json, data_file
        )
    except (EntryError, RunError) as e:
        entry_fail("run", e, sources)
    click.echo(text, nl=False)


# ---- presk data ----------------------------------------------------------------------------


def _data_fail(e: Exception, code: str | None = None) -> None:
    emit([Diagnostic(getattr(e, "code", code or "E7004"), Severity.ERROR, str(e))], SourceMap())
    sys.exit(1)


def _type_of(text: str, where: str | None = None):
    from presk_core.data import DataError
    from presk_core.data import type_of as data_type_of

    try:
        return data_type_of(text, where)
    except DataError as e:
        _data_fail(e)


@click.group(short_help="Produce and inspect `.psk.d` data files")
def data() -> None:
    """Produce and inspect `.psk.d` data files; turn a text into windows of tokens
    (docs/data.md)."""


@data.command("pack")
@click.argument("text", type=click.Path(dir_okay=False))
@click.option("--type", "type_text", required=True, help="The type of one sample.")
@click.option(
    "-o", "out", required=True, type=click.Path(dir_okay=False), help="The file to write."
)
def data_pack(text: str, type_text: str, out: str) -> None:
    """Pack TEXT, numbers separated by blanks (a sample a line, by custom), into a .psk.d file
    of samples of the given type."""
    from presk_core.data import DataError, parse_samples
    from presk_core.data import write as write_data

    t = _type_of(type_text)
    try:
        numbers = open(text, encoding="utf-8").read().split()
    except (OSError, UnicodeDecodeError) as e:
        _data_fail(Exception(f"cannot read `{text}`: {e}"))
    try:
        samples = parse_samples(numbers, t, text)
    except DataError as e:
        _data_fail(e)
    try:
        write_data(out, str(t), t, samples)
    except OSError as e:
        _data_fail(Exception(f"cannot write `{out}`: {(e.strerror or str(e)).lower()}"))
    click.echo(f"presk data: wrote {out} ({len(samples)} samples of type {t})")


def _sample_text(values: list, t) -> str:
    import numpy as np
    from presk_types.types import TupleT

    parts = [
        repr(v.tolist()) if v.dtype != np.uint8 else repr(v.astype(bool).tolist()) for v in values
    ]
    parts = [p.replace("True", "true").replace("False", "false") for p in parts]
    return "(" + ", ".join(parts) + ")" if isinstance(t, TupleT) else parts[0]


@data.command("info")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--limit", type=click.IntRange(0), default=10, show_default=True, help="Samples shown."
)
def data_info(file: str, limit: int) -> None:
    """The type, count, version and sample size of FILE, then its first samples."""
    from presk_core.data import DataError, leaves, read_header, read_reals
    from presk_core.data import read as read_data

    try:
        header = read_header(file)
        if header.type_text.startswith("params "):  # a parameter tree: its reals in order
            click.echo(f"type    {header.type_text}")
            click.echo(f"count   {header.count}")
            click.echo(f"version {header.version}")
            click.echo(f"sample  {header.sample_size} bytes, {header.sample_size // 8} reals")
            reals = read_reals(file)
            click.echo(f"[0] {reals[:limit].tolist()}" + (" …" if reals.size > limit else ""))
            return
        t = _type_of(header.type_text, file)
        samples = read_data(file, t)
    except DataError as e:
        _data_fail(e)
    spec = leaves(t)
    click.echo(f"type    {header.type_text}")
    click.echo(f"count   {header.count}")
    click.echo(f"version {header.version}")
    click.echo(f"sample  {header.sample_size} bytes, {len(spec)} leaves")
    for i, sample in enumerate(samples[:limit]):
        click.echo(f"[{i}] {_sample_text(sample, t)}")
    if len(samples) > limit:
        click.echo(f"… ({len(samples) - limit} more)")


@data.command("diff")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
def data_diff(a: str, b: str) -> None:
    """‖a − b‖₂, ‖a‖₂ and their ratio over the reals of two files of the same type."""
    import math

    import numpy as np
    from presk_core.data import DataError, read_header, read_reals
    from presk_core.data import read as read_data
    from presk_core.show import format_exp

    try:
        ha, hb = read_header(a), read_header(b)
        if (ha.type_text, ha.count) != (hb.type_text, hb.count):
            raise DataError(
                "E7007",
                f"`{a}` holds {ha.count} of `{ha.type_text}`, `{b}` {hb.count} of `{hb.type_text}`",
            )
        if ha.type_text.startswith("params "):
            xa, xb = [read_reals(a)], [read_reals(b)]
        else:
            t = _type_of(ha.type_text, a)
            xa = [v for s in read_data(a, t) for v in s if v.dtype == np.float64]
            xb = [v for s in read_data(b, t) for v in s if v.dtype == np.float64]
    except DataError as e:
        _data_fail(e)
    va = np.concatenate([v.ravel() for v in xa]) if xa else np.zeros(0)
    vb = np.concatenate([v.ravel() for v in xb]) if xb else np.zeros(0)
    dist = math.sqrt(math.fsum((va - vb) ** 2))
    norm = math.sqrt(math.fsum(va**2))
    rel = dist / norm if norm else float("inf") if dist else 0.0
    click.echo(
        f"presk data: ‖a − b‖₂ {format_exp(dist, 6)}   ‖a‖₂ {format_exp(norm, 6)}   relative {format_exp(rel, 6)}"
        f"   over {va.size} reals"
    )


def _read_text(path: str) -> str:
    """A text file's characters exactly (UTF-8, line ends kept); E7004 when it cannot be."""
    from presk_core.data import DataError

    try:
        blob = open(path, "rb").read()
    except OSError as e:
        _data_fail(DataError("E7004", f"cannot read `{path}`: {(e.strerror or str(e)).lower()}"))
    try:
        return blob.decode("utf-8")
    except UnicodeDecodeError as e:
        line = blob.count(b"\n", 0, e.start) + 1
        _data_fail(
            DataError(
                "E7004",
                f"`{path}` is not UTF-8 text: byte 0x{blob[e.start]:02x} at offset {e.start}"
                f" (line {line})",
            )
        )


def _write_text(path: str, text: str) -> None:
    from presk_core.data import DataError, write_bytes

    try:
        write_bytes(path, text.encode("utf-8"))
    except OSError as e:
        _data_fail(DataError("E7004", f"cannot write `{path}`: {(e.strerror or str(e)).lower()}"))


OUT = click.option(
    "-o", "out", required=True, type=click.Path(dir_okay=False), help="The file to write."
)


@data.command("chars", short_help="The vocabulary of a text: its characters, a JSON array")
@click.argument("text", type=click.Path(dir_okay=False))
@OUT
def data_chars(text: str, out: str) -> None:
    """The vocabulary of TEXT: its distinct characters (not bytes), sorted by code point,
    as a JSON array."""
    from presk_core.text import count, vocabulary, vocabulary_json

    content = _read_text(text)
    vocab = vocabulary(content)
    _write_text(out, vocabulary_json(vocab))
    click.echo(
        f"presk data: wrote {out} ({count(len(vocab), 'character')} over {len(content)} of text)"
    )


@data.command("encode", short_help="A text as tokens, by a vocabulary")
@click.argument("text", type=click.Path(dir_okay=False))
@click.option(
    "--vocab",
    "vocab_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="The vocabulary, a JSON array of characters (`presk data chars`).",
)
@OUT
def data_encode(text: str, vocab_file: str, out: str) -> None:
    """The tokens of TEXT, each character's position in the vocabulary, as decimal numbers
    separated by blanks."""
    from presk_core.data import DataError
    from presk_core.text import count, encode, format_tokens, parse_vocabulary

    try:
        vocab = parse_vocabulary(_read_text(vocab_file), vocab_file)
        tokens = encode(_read_text(text), vocab, text, vocab_file)
    except DataError as e:
        _data_fail(e)
    _write_text(out, format_tokens(tokens))
    click.echo(
        f"presk data: wrote {out} ({count(len(tokens), 'token')} over a vocabulary of {len(vocab)})"
    )


@data.command("lm-windows", short_help="Windows of tokens and their next tokens, a .psk.d file")
@click.argument("tokens", type=click.Path(dir_okay=False))
@click.option(
    "--vocab",
    "vocab_size",
    required=True,
    type=click.IntRange(1, 2**63 - 1),
    help="The vocabulary's size V: every token is below it.",
)
@click.option("--seq", required=True, type=click.IntRange(1), help="The window's length T.")
@OUT
def data_lm_windows(tokens: str, vocab_size: int, seq: int, out: str) -> None:
    """Windows of a token file for a language model: samples (x, y) of type
    (idx[V][seq: T], idx[V][seq: T]), y being x shifted by one token, side by side."""
    from presk_core.data import DataError
    from presk_core.data import write as write_data
    from presk_core.text import count, lm_windows, parse_tokens

    try:
        stream = parse_tokens(_read_text(tokens), tokens)
        type_text, samples = lm_windows(stream, vocab_size, seq, tokens)
    except DataError as e:
        _data_fail(e)
    t = _type_of(type_text)
    try:
        write_data(out, str(t), t, samples)
    except OSError as e:
        _data_fail(DataError("E7004", f"cannot write `{out}`: {(e.strerror or str(e)).lower()}"))
    click.echo(
        f"presk data: wrote {out} ({count(len(samples), 'window')} of type {t}"
        f" from {count(len(stream), 'token')})"
    )


@click.command(
    short_help="Run the `training run` of a file, on the reference interpreter or natively"
)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--steps", type=click.IntRange(1), help="The horizon (default: the run's epochs).")
@click.option(
    "--log-every",
    type=click.IntRange(0),
    default=10,
    show_default=True,
    help="Log a line every K steps.",
)
@click.option(
    "--ckpt", type=click.Path(file_okay=False), help="Where checkpoints go (default: the block's)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="The root of θ's draws.")
@click.option(
    "--bits", type=click.IntRange(2, 100000), default=256, show_default=True, help="MPFR precision."
)
@click.option(
    "--data",
    "data_file",
    type=click.Path(dir_okay=False),
    help="Train on this .psk.d file instead of the run's.",
)
@CONST
@click.option("--opt", is_flag=True, help="Rewrite the step by the exact rules first.")
@backend_options
def train(file, steps, log_every, ckpt, seed, bits, data_file, consts, opt, **native) -> None:
    """Train the model of FILE's `training run`: each step the objective and its gradient on
    a batch, then an AdamW step, on the reference interpreter (docs/training.md), or with
    --backend native as one call of compiled kernels (docs/native.md)."""
    from presk_ad import ADError
    from presk_core.passes import Context, run_pipeline
    from presk_core.run import EntryError, RunError
    from presk_types.training import replace_data

    from presk_cli.train import TrainError
    from presk_cli.train import train as run_training

    header = None if data_file else _held_type
    ctx = Context(consts=_consts(consts), check=True, data_header=header)
    sources = ctx.sources
    try:  # the passes of the list up to lowering; the step differentiates (presk_ad.step)
        program = run_pipeline("elab", file, ctx)
    except DiagnosticError as e:
        _fail(e, sources)
    runs, diagnostics = ctx.options["runs"], ctx.diagnostics
    if runs and data_file:  # the run's data replaced: open and match this file
        problem = replace_data(runs[0], program.main, data_file, _held_type)
        if problem is not None:
            diagnostics.append(problem)
    emit(diagnostics, sources)
    if not any(d.is_error for d in diagnostics) and not runs:
        click.echo(f"presk train: `{file}` has no `training run`", err=True)
        sys.exit(2)
    if any(d.is_error for d in diagnostics):
        sys.exit(1)
    try:
        core = run_pipeline(TRAIN, file, ctx, start=program, first="elab")
        terminal = sys.stdout.isatty()
        progress = (lambda text: click.echo(text, nl=False)) if terminal else None
        if opt and native["backend"] != "interp":
            click.echo("presk train: --opt runs on the reference interpreter", err=True)
            sys.exit(2)
        if native["backend"] != "interp":
            from presk_cli.native_train import train_native

            where = (core, core.trainings[0], os.path.dirname(file))
            options = (native["backend"], native["realize"], native["threads"])
            train_native(*where, steps, log_every, ckpt, seed, bits, click.echo, options)
            return
        run_training(  # from the core program: its training run, its data by the file's folder
            core,
            core.trainings[0],
            os.path.dirname(file),
            steps,
            log_every,
            ckpt,
            seed,
            bits,
            click.echo,
            progress,
            _step_rewrite(ctx) if opt else None,
        )
    except KeyboardInterrupt:
        # checkpoints are written whole or not at all: the last one is intact
        click.echo("\npresk train: interrupted; the checkpoints written so far are whole", err=True)
        sys.exit(130)
    except NativeError as e:
        native_fail(e, sources)
    except (TrainError, ADError, RunError, EntryError) as e:
        emit([Diagnostic("E7008", Severity.ERROR, f"training stopped: {e}")], sources)
        sys.exit(1)
