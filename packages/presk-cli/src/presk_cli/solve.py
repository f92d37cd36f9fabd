"""`presk solve FILE --precision ENV --budget EPS --out OUT.json [--sites N] [--profile P]`
(spec L894–L908): the realization of least bytes (or predicted seconds under a machine
profile's roofline) whose gap to the exact reference, measured on the kernel interpreter
(the native backend's bits) over the envelope's inputs, is inside the budget
(presk_kernel.solve; docs/precision.md, "The solver")."""

from __future__ import annotations

import math

import click

from presk_cli.precision import PrecisionError, envelope_option, exp_text, fail, load_envelope


@click.command(short_help="Solve for a realization under a declared error budget")
@click.argument("file", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--step",
    "step",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Solve FILE's training step instead, under a budget on its update; --precision is"
    " then the step's calibration (presk calibrate --step).",
)
@envelope_option(
    "The envelope of the entry (presk calibrate --precision): its inputs and scale; with"
    " --step, the step's calibration (presk calibrate --step)."
)
@click.option(
    "--budget",
    required=True,
    type=float,
    metavar="EPS",
    help="The largest gap to the exact reference allowed, relative to |output|.",
)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The realization.")
@click.option(
    "--sites",
    "listed",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="List the first N sites and parameters with their types and isolated gaps.",
)
@click.option(
    "--backend",
    type=click.Choice(["kernel", "native"]),
    default="kernel",
    show_default=True,
    help="Where each candidate is measured: the kernel interpreter or compiled C (the same"
    " bits; C compiles each candidate).",
)
@click.option(
    "--profile",
    type=click.Path(dir_okay=False),
    metavar="P",
    help="A machine profile (presk bench --calibrate): the cost is the entry's predicted"
    " seconds under its roofline instead of bytes.",
)
@click.option("--const", "consts", multiple=True, metavar="NAME=V", help="Override a constant.")
def solve(file, step, envelope_path, budget, out, listed, backend, profile, consts) -> None:
    """Choose a type for every narrowable site and parameter of the envelope's entry in FILE:
    the fewest bytes (or predicted seconds under --profile) whose measured gap to the exact
    reference is inside --budget. With --step, a type for every function of a training step
    (docs/precision.md)."""
    from presk_cli.commands import _consts

    if (file is None) == (step is None):
        raise click.UsageError("give FILE (an entry's envelope) or --step FILE (a training step)")
    if step is not None:
        from presk_cli.step_budget import solve_step_command

        solve_step_command(step, envelope_path, budget, out, _consts(consts), profile)
        return

    if not (math.isfinite(budget) and budget > 0):
        fail("E7104", f"a budget is a positive number, not {budget!r} (nothing is written)")
    roof = _roofline(profile) if profile is not None else None
    from presk_core.envelope import EnvelopeError
    from presk_kernel.solve import SolveError

    envelope, core, ctx = load_envelope(envelope_path, file, _consts(consts))
    absolute = budget * envelope.output
    try:
        items, solution = _solve(core, envelope, absolute, backend, roof)
    except EnvelopeError as e:
        fail(e.code, str(e), ctx.sources)
    except (PrecisionError, SolveError) as e:
        fail(e.code, str(e), ctx.sources)
    from presk_kernel.solve import realization

    r = realization(items, solution.types)
    try:
        r.write(out)
    except OSError as e:
        fail("E7106", f"cannot write the realization `{out}`: {e.strerror or e}")
    click.echo("\n".join(_lines(envelope, budget, absolute, items, solution, out, listed)))


def _roofline(path: str):
    """The fitted roofline of the profile at `path` (E7140 when it cannot be read or has no
    fit)."""
    from presk_opt import roofline

    try:
        p = roofline.read(path)
    except roofline.ProfileError as e:
        fail("E7140", f"--profile: {e} (nothing is written)")
    if p.fit is None:
        fail(
            "E7140",
            f"--profile: `{path}` has no fitted roofline: `presk bench --calibrate` fits one"
            " (nothing is written)",
        )
    return p.fit


def predicted(schedule, roof) -> float:
    """The schedule's predicted seconds: Σ over its launches of λ + max(W/π, Q/β)."""
    from presk_opt.roofline import traffic, work

    return sum(float(roof.seconds(work(x.kernel), traffic(x.kernel))) for x in schedule.launches)


def time_floor(schedule, roof) -> float:
    """A lower bound of any realization's predicted seconds, from the all-f64 schedule: each
    launch's λ + max(W/π, Q₂/β) with its work in f64 (a realization only adds conversions)
    and its reals at 2 bytes (bf16's)."""
    from presk_opt.roofline import ITEMSIZE, REAL_TYPES, work

    total = 0.0
    for x in schedule.launches:
        q = sum(
            b.size * (2 if b.dtype in REAL_TYPES else ITEMSIZE[b.dtype]) for b in x.kernel.buffers
        )
        total += float(roof.seconds(work(x.kernel), q))
    return total


def _solve(core, envelope, absolute: float, backend: str = "kernel", roof=None):
    """(the items offered, the Solution) for the envelope's entry of `core`; `roof` a
    fitted roofline (--profile): the cost is then predicted seconds."""
    import numpy as np
    from presk_core.envelope import _reals
    from presk_core.interp import Interpreter
    from presk_core.run import EntryError, RunError, parse_entry
    from presk_kernel.fuse import fuse
    from presk_kernel.lower import LowerError, _lower, argument_leaves
    from presk_kernel.solve import offered, solve
    from presk_types.types import ParamsT

    from presk_cli.native import NativeError, executor, lower, storage
    from presk_cli.precision import envelope_inputs

    try:
        entry = parse_entry(envelope.entry, core, None, dict(envelope.dims))
        inputs = envelope_inputs(core, entry, envelope)
        samples = [inputs(i) for i in range(envelope.samples)]
        interp = Interpreter(core, envelope.bits)
        name = entry.function.name
        exact = []
        for args in samples:
            result = interp.run(name, [v for _, _, v in args], entry.dims)
            exact.append([np.asarray(a, dtype=object).astype(np.float64) for a in _reals(result)])
    except (EntryError, RunError) as e:
        raise PrecisionError(getattr(e, "code", "E7001"), f"the envelope's entry: {e}") from None
    dims = dict(entry.dims) | dict(entry.prefix)
    values = [[v for _, _, v in args] for args in samples]
    try:
        schedule, lw = _lower(core, name, dims, values[0], "f64")
    except LowerError as e:
        raise PrecisionError(e.code, f"cannot lower `{entry.shown}` to kernels: {e}") from None
    fused, groups = fuse(schedule)
    trees = [p.name for p in entry.function.params if isinstance(p.type, ParamsT)]
    items = offered(schedule, fused, groups, list(lw.paths), trees)

    def measure(r) -> float:
        gap = 0.0
        for vals, want in zip(values, exact, strict=True):
            try:
                laid = lower(core, name, dims, vals, r)
                got = executor(laid, backend)(storage(laid, argument_leaves(vals)))
            except NativeError as e:
                raise PrecisionError(e.code, str(e)) from None
            for g, w in zip(got, want, strict=True):
                d = np.abs(np.asarray(g, np.float64).reshape(-1) - w.reshape(-1))
                gap = max(gap, float(np.max(d, initial=0.0)))
        return gap

    if roof is None:
        return items, solve(items, absolute, measure)

    def priced(r) -> float:
        try:
            return predicted(lower(core, name, dims, values[0], r), roof)
        except NativeError as e:
            raise PrecisionError(e.code, str(e)) from None

    floor = time_floor(lower(core, name, dims, values[0], "f64"), roof)
    return items, solve(items, absolute, measure, priced, floor)


def _lines(envelope, budget, absolute, items, s, out, listed) -> list[str]:
    sites = [i for i in items if i.kind == "site"]
    params = [i for i in items if i.kind == "param"]
    away = [i for i in sites if s.types[i.name] != "f64"]
    stored = [i for i in params if s.types[i.name] != "f64"]
    n32 = sum(1 for i in stored if s.types[i.name] == "f32")
    n16 = len(stored) - n32
    rest = sum(i.cost(s.types[i.name]) for i in params)
    rest64 = sum(i.cost("f64") for i in params)
    ratio = s.all_f64 / s.cost if s.cost else math.inf
    if s.optimal is None:
        optimal = (
            "not searched (the space is too large); the relaxation floor above is the lower bound"
        )
    elif s.optimal[0] == s.proposal:
        optimal = (
            f"the proposal: no assignment of the {s.optimal[1]} costs less inside the budget"
            " on the estimate"
        )
    else:
        optimal = (
            f"{exp_text(s.optimal[0], 4)} on the estimate over {s.optimal[1]} assignments"
            " (the greedy proposal is not)"
        )
    inside = "inside the budget" if s.measured <= absolute else "OUTSIDE the budget"
    lines = [
        f"presk solve: `{envelope.entry}` under budget {_e(budget, 2)} relative"
        f" ({_e(absolute, 3)} absolute, |output| {_e(envelope.output, 3)})",
        f"  sites       {len(sites)} narrowable, {len(away)} assigned away from f64",
        f"  parameters  {len(params)} offered, {len(stored)} stored away from f64 ({n32} f32,"
        f" {n16} bf16): {exp_text(rest, 4)} bytes at rest against {exp_text(rest64, 4)} in f64",
        f"  cost        {exp_text(s.cost, 4)} against {exp_text(s.all_f64, 4)} all-f64"
        f" ({ratio:.2f}x), relaxation floor {exp_text(s.floor, 4)}",
        f"  proposal    {exp_text(s.proposal, 4)} before measurement widened anything (time"
        " when --profile is given, bytes otherwise)",
        f"  estimate    {_e(s.estimate, 3)} (isolated gaps, root-sum-square: it ranks, it does"
        " not guarantee)",
        f"  measured    {_e(s.measured, 3)} against the exact reference, after {s.rounds}"
        f" widening round(s) — {inside}",
        f"  optimal     {optimal}",
    ]
    for i in items[:listed]:
        t = s.types[i.name]
        gap = 0.0 if t == "f64" else s.isolated[(i.name, t)]
        lines.append(f"    {i.name:<28} {t:<5} {i.cost(t):>8} bytes  alone {_e(gap, 3)}")
    lines.append(f"presk solve: wrote {out} — run it with `--realize @{out}`")
    return lines


def _e(x: float, digits: int) -> str:
    return exp_text(float(x), digits)
