"""`presk calibrate --precision` and `presk check --precision` (spec L868–L892): the
magnitude envelope of an entry on the exact interpreter (presk_core.envelope), and a sound
bound on the error of a realization (presk_kernel.bound), docs/precision.md.

Nothing here is loaded by `presk --help` or a plain `presk check`.
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from presk_cli.flags import Count

WIDTH = 28  # the site column of calibrate's lists (spec L873)


class PrecisionError(Exception):
    """A calibration or a bound that cannot be made: its code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def fail(code: str, message: str, sources=None, help: str | None = None) -> NoReturn:
    """The diagnostic CODE on standard error (its `help` line if given), exit 1."""
    from presk_syntax.diagnostics import emit, error
    from presk_syntax.span import SourceMap

    emit([error(code, message, help=help)], sources or SourceMap())
    sys.exit(1)


def exp_text(x: float, digits: int) -> str:
    from presk_core.show import format_exp

    return format_exp(x, digits)


def envelope_option(help: str, name: str = "envelope_path", required: bool = True):
    """The `--precision ENV` option of `check`, `solve` and `quantize`: an envelope's path."""
    return click.option(
        "--precision",
        name,
        required=required,
        type=click.Path(dir_okay=False),
        metavar="ENV",
        help=help,
    )


def load_envelope(env_path: str, file: str, consts: dict):
    """(the envelope, FILE's core program, its Context): the envelope read (E7100), FILE run
    through the pipeline to RUN (its own diagnostics), and the envelope checked to be of that
    program (E7101). Every failure prints its diagnostic and exits 1."""
    from presk_core.envelope import Envelope, EnvelopeError
    from presk_syntax.diagnostics import DiagnosticError
    from presk_syntax.pipeline import Context

    from presk_cli.commands import _fail
    from presk_cli.pipeline import PIPELINE, RUN

    ctx = Context(consts=consts)
    try:
        envelope = Envelope.read(env_path)
    except EnvelopeError as e:
        fail(e.code, str(e))
    try:
        core = PIPELINE.run(RUN, file, ctx)
    except DiagnosticError as e:
        _fail(e, ctx.sources)
    try:
        envelope.check_program(core)
    except EnvelopeError as e:
        fail(e.code, str(e), ctx.sources)
    return envelope, core, ctx


# ---- presk calibrate -----------------------------------------------------------------------


@click.command(
    short_help="Measure the magnitude envelope of an entry, or one training step under each"
    " realization (--step)"
)
@click.option(
    "--precision",
    "file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="The program whose entry's envelope to measure (on the exact interpreter).",
)
@click.option("--entry", help="The function to measure: `f`, `M.f` or `M{3, 2}.f`.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="A dimension.")
@click.option(
    "--bits",
    type=Count(2, 100000),
    default=128,
    show_default=True,
    help="MPFR precision (with --step, 256 unless given).",
)
@click.option("--out", type=click.Path(dir_okay=False), help="Where the envelope goes (JSON).")
@click.option(
    "--samples",
    type=Count(1, 100000),
    default=1,
    show_default=True,
    help="How many inputs: synthesized from --seed, --seed + 1, … (θ stays the first's). With"
    " --step, the measured batch's samples (the run's batch size unless given).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The root of the draws.")
@click.option(
    "--weights",
    type=click.Path(),
    metavar="CKPT",
    help="θ from a checkpoint (a `.psk.d` of the entry's parameters) instead of the initializers.",
)
@click.option(
    "--data",
    "data_file",
    type=click.Path(dir_okay=False),
    help="The samples' last argument: windows of this .psk.d file, each of the --dim the"
    " batch axis has (--samples windows, from the first). With --step, the run's data file"
    " instead (as `presk train --data`).",
)
@click.option(
    "--step",
    "step",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Measure one training step of FILE's `training run` instead, under each --realize"
    ' (docs/precision.md, "The training step\'s budget").',
)
@click.option(
    "--warmup",
    type=Count(0, 10**9),
    default=0,
    show_default=True,
    help="--step: steps of the run's own pipeline, natively in f64, before the measured one.",
)
@click.option(
    "--realize",
    "realize",
    multiple=True,
    metavar="R",
    help="--step: a realization to measure (f64, f32, bf16, recipe or @FILE; repeatable).",
)
@click.option("--const", "consts", multiple=True, metavar="NAME=V", help="Override a constant.")
@click.pass_context
def calibrate(ctx, file, entry, dims, bits, out, samples, seed, weights, data_file, step, warmup,
              realize, consts):  # fmt: skip
    """Run an entry of FILE on the exact interpreter and record every site's magnitude and
    every sum's condition number: the envelope `presk check --precision` bounds with
    (docs/precision.md). With --step, one training step under each --realize instead."""
    from presk_cli.commands import _consts, _dims

    if step is not None:
        _calibrate_step(ctx, step, file, entry, weights, warmup, samples, realize, out, bits,
                        seed, _consts(consts), data_file)  # fmt: skip
        return
    if warmup or realize:
        click.echo("presk calibrate: --warmup and --realize go with --step", err=True)
        sys.exit(2)
    for flag, value in (("--precision FILE", file), ("--entry", entry), ("--out", out)):
        if value is None:
            click.echo(f"presk calibrate: give {flag}", err=True)
            sys.exit(2)
    envelope = _calibrate(
        file, entry, _dims(dims), bits, samples, seed, weights, _consts(consts), data_file
    )
    s = envelope.samples
    counted = envelope.counted()
    lines = [
        f"presk calibrate: {len(counted)} sites over {s} samples of `{envelope.entry}`"
        f" at {bits} bits"
    ]
    lines += [f"  {k:<{WIDTH}} {exp_text(v, 4)}" for k, v in envelope.largest()]
    sums = envelope.sums()
    lines.append(
        f"presk calibrate: {len(sums)} sums and contractions, worst condition numbers"
        " Σ|xᵢwᵢ| / |Σxᵢwᵢ|:"
    )
    lines += [f"  {k:<{WIDTH}} {exp_text(v, 4)}" for k, v in sums]
    try:
        envelope.write(out)
    except OSError as e:
        fail("E7106", f"cannot write the envelope `{out}`: {e.strerror or e}")
    lines.append(f"presk calibrate: wrote {out}")
    click.echo("\n".join(lines))


def _calibrate_step(ctx, step, file, entry, weights, warmup, samples, realize, out, bits, seed,
                    consts, data=None) -> None:  # fmt: skip
    """`--step`: presk_cli.step_budget; --bits defaults to 256 there, --samples to the run's
    batch, --data replaces the run's data file (as `presk train --data`)."""
    from click.core import ParameterSource

    from presk_cli.step_budget import calibrate_step

    if file is not None or entry is not None:
        click.echo("presk calibrate: --step measures a training run: no --precision or --entry",
                   err=True)  # fmt: skip
        sys.exit(2)
    given = lambda name: ctx.get_parameter_source(name) != ParameterSource.DEFAULT  # noqa: E731
    calibrate_step(step, weights, warmup, samples if given("samples") else None, realize, out,
                   bits if given("bits") else 256, seed, consts, data)  # fmt: skip


def _calibrate(file, entry_text, dims, bits, samples, seed, weights, consts, data=None):
    from presk_core.envelope import calibrate
    from presk_core.run import EntryError, RunError, parse_entry
    from presk_syntax.diagnostics import DiagnosticError
    from presk_syntax.pipeline import Context

    from presk_cli.commands import _fail, entry_fail
    from presk_cli.pipeline import PIPELINE, RUN

    ctx = Context(consts=consts)
    try:
        core = PIPELINE.run(RUN, file, ctx)
    except DiagnosticError as e:
        _fail(e, ctx.sources)
    try:
        entry = parse_entry(entry_text, core, None, dims)
        inputs = sample_inputs(core, entry, seed, bits, weights, dims, data, samples)
        return calibrate(core, entry, inputs, samples, bits, file, seed, weights, data=data)
    except PrecisionError as e:
        fail(e.code, str(e), ctx.sources)
    except (EntryError, RunError) as e:
        entry_fail("calibrate", e, ctx.sources)


def envelope_inputs(core, entry, envelope):
    """`sample_inputs` of the envelope's samples: drawn again as `calibrate` drew them (its
    seed, bits, weights, dimensions, data and number of samples)."""
    return sample_inputs(
        core, entry, envelope.seed, envelope.bits, envelope.weights, dict(envelope.dims),
        envelope.data, envelope.samples,
    )  # fmt: skip


def sample_inputs(
    core, entry, seed: int, bits: int, weights: str | None, dims: dict, data=None, samples=1
):
    """A function of i: the arguments (name, type, value) of sample i, as `calibrate` draws
    them: synthesized from seed + i, θ the first sample's (or the checkpoint's), the last
    argument window i of `data` when given."""
    from presk_core.interp import Interpreter
    from presk_core.run import entry_inputs

    interp = Interpreter(core, bits)
    window = _windows(core, entry, data, samples) if data else (lambda i: None)
    first = entry_inputs(entry, interp, seed, bits, window(0))
    theta = _weights(core, entry, first, weights, bits, dims) if weights else None
    tree = _tree_index(first)

    def inputs(i: int) -> list:
        args = first if i == 0 else entry_inputs(entry, interp, seed + i, bits, window(i))
        out = []
        for j, (name, t, value) in enumerate(args):
            if theta is not None and j == theta[0]:
                value = theta[1]
            elif i and j == tree:  # θ stays the first sample's
                value = first[j][2]
            out.append((name, t, value))
        return out

    return inputs


def _windows(core, entry, path: str, samples: int):
    """Window i of the `.psk.d` at `path` as the entry's last argument: the batch axis's
    length (its --dim) of consecutive samples; E7103 when there are fewer than `samples`."""
    import numpy as np
    from presk_core.run import EntryError, data_argument
    from presk_types.types import TupleT

    try:
        bound, given = data_argument(core, entry.shown, path)
    except EntryError as e:
        raise PrecisionError(getattr(e, "code", None) or "E7103", f"--data: {e}") from None
    last = entry.function.params[-1].type
    types = list(last.elements) if isinstance(last, TupleT) else [last]
    leaves = list(given) if isinstance(given, tuple) else [given]
    axes = [t.shape.axis("batch") for t in types]
    length = types[0].shape.axes[axes[0]].length
    name = length.coeffs[0][0] if length.coeffs else None
    width = entry.dims.get(name) if name else None
    total = leaves[0].shape[axes[0]]
    if not width:
        raise PrecisionError("E7103", f"--data: give the batch's length with --dim {name}=N")
    if total // width < samples:
        raise PrecisionError(
            "E7103",
            f"--data: `{path}` holds {total} samples: {total // width} windows of {width},"
            f" not {samples}",
        )

    def window(i: int):
        span = range(i * width, (i + 1) * width)
        cut = [np.take(x, span, axis=a) for x, a in zip(leaves, axes, strict=True)]
        return tuple(cut) if isinstance(given, tuple) else cut[0]

    return window


def _tree_index(args: list) -> int | None:
    from presk_types.types import ParamsT

    for j, (_, t, _) in enumerate(args):
        if isinstance(t, ParamsT):
            return j
    return None


def _weights(core, entry, args, path, bits, dims) -> tuple[int, dict]:
    """(the index of the entry's parameter tree, θ read from `path` as mpfr at `bits`)."""
    from presk_core.run import interp_real

    from presk_cli.serve import ServeError, load_weights

    j = _tree_index(args)
    if j is None:
        raise PrecisionError("E7103", f"`{entry.shown}` takes no parameter tree for --weights")
    t = args[j][1]
    model = t.instance.name  # as a checkpoint's header writes it: `params Tower`
    try:
        theta, _ = load_weights(core, model, path, dict(entry.dims) | dims)
    except ServeError as e:
        raise PrecisionError("E7103", f"--weights: {e}") from None
    want = {k: v.shape for k, v in args[j][2].items()}
    got = {k: v.shape for k, v in theta.items()}
    if want != got:
        raise PrecisionError(
            "E7103", f"--weights `{path}`: a tree of shapes {got}, not the entry's {want}"
        )
    return j, {k: interp_real(v, bits) for k, v in theta.items()}


# ---- presk check --precision ---------------------------------------------------------------


def check_precision(env_path: str, file: str, realize: str, model: str, consts: dict) -> None:
    """`presk check --precision ENV FILE --realize T`: the bound of the realization T of the
    envelope's entry (docs/precision.md, "The bound"), printed as the spec does (L888)."""
    from presk_core.envelope import EnvelopeError
    from presk_kernel.bound import BoundError
    from presk_kernel.realization import as_realization

    envelope, core, ctx = load_envelope(env_path, file, consts)
    try:
        b = realization_bound(core, envelope, realize, model)
    except EnvelopeError as e:
        fail(e.code, str(e), ctx.sources)
    except BoundError as e:
        fail(e.code, f"no bound for `{envelope.entry}` under {realize}: {e}", ctx.sources)
    except PrecisionError as e:
        fail(e.code, str(e), ctx.sources)
    shown = str(as_realization(realize)) if realize.startswith("@") else realize
    mag = envelope.output
    rel = b.absolute / mag if mag > 0 else float("inf")
    click.echo(
        "\n".join(
            [
                f"presk check --precision: `{envelope.entry}` under {shown}",
                f"  magnitude   {exp_text(mag, 4)}",
                f"  bound    {model:<10}{exp_text(b.absolute, 4)}  ({exp_text(rel, 2)} relative)",
                f"  envelope    {env_path} over {envelope.samples} samples,"
                f" {len(envelope.counted())} sites, {envelope.weights_text}",
            ]
        )
    )


def realization_bound(core, envelope, realize, model: str = "cond"):
    """The presk_kernel.bound.Bound of the envelope's entry of `core` under `realize` (a
    type name, `@FILE` or a Realization)."""
    from presk_core.run import EntryError, parse_entry
    from presk_kernel.bound import BoundError, bound
    from presk_kernel.lower import LowerError, lower_entry

    try:
        entry = parse_entry(envelope.entry, core, None, dict(envelope.dims))
    except EntryError as e:
        raise PrecisionError("E7101", f"the envelope's entry: {e}") from None
    dims = dict(entry.dims) | dict(entry.prefix)
    try:
        schedule = lower_entry(core, entry.function.name, dims, None, realize)
    except LowerError as e:
        raise PrecisionError(e.code, f"cannot lower `{entry.shown}` to kernels: {e}") from None
    sites = {k: (s.lo, s.hi, s.abs_sum, s.cond) for k, s in envelope.sites.items()}
    inputs = {k: (s.lo, s.hi) for k, s in envelope.inputs.items()}
    if model != "cond":
        return bound(schedule, sites, inputs, model)
    try:
        interval = bound(schedule, sites, inputs, model)
    except BoundError as e:
        interval, refused = None, e
    try:
        run = running_bound(core, envelope, entry, schedule)
    except BoundError:
        if interval is None:
            raise refused from None
        return interval
    if interval is None or run.absolute <= interval.absolute:
        return run
    return interval


def running_bound(core, envelope, entry, schedule):
    """The running error bound (presk_kernel.running) of `schedule` on each of the
    envelope's samples (their inputs drawn again as `calibrate` drew them), the largest."""
    from presk_core.run import EntryError, RunError
    from presk_kernel.bound import Bound
    from presk_kernel.interp import KernelError
    from presk_kernel.lower import argument_leaves
    from presk_kernel.running import running

    try:
        inputs = envelope_inputs(core, entry, envelope)
        worst: dict[str, float] = {}
        for i in range(envelope.samples):
            leaves = argument_leaves([v for _, _, v in inputs(i)])
            _, outs = running(schedule, leaves)
            for name, e in outs:
                worst[name] = max(worst.get(name, 0.0), e)
    except (EntryError, RunError, KernelError) as e:
        code = getattr(e, "code", None) or "E7101"
        raise PrecisionError(code, f"the envelope's inputs: {e}") from None
    outs = tuple(worst.items())
    return Bound(max((e for _, e in outs), default=0.0), outs)
