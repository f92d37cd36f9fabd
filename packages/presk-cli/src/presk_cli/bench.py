"""`presk bench`: one entry timed on every executor, as the specification's table.

    backend               median ms      best ms   speedup
    interp 64 bits            0.306        0.293      1.0x
    kernel f64                0.123        0.115      2.5x
    native f64                0.075        0.071      4.1x
    …

The rows: the reference interpreter at `--bits` (64 by default, its cheapest setting), the
kernel interpreter in f64, and the compiled kernels in f64, f32 (each without and with
vector lanes) and bf16. Every row runs the entry on the same inputs, synthesized as `presk
run` synthesizes them, once untimed (compiling, warming the caches), then `--repeat` times;
the speedup is the first row's median over the row's. `--realize T` times only the native
rows of type T: no reference row and no speedup column, so that an entry too large for the
interpreter (a 1024³ GEMM) is timed in seconds.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

import click
from presk_syntax.diagnostics import DiagnosticError

from presk_cli.commands import CONST, SEED, WEIGHTS, _consts, _dims, _fail, entry_fail
from presk_cli.flags import Count
from presk_cli.native import REALIZE, REALIZES, NativeError, fail
from presk_cli.progress import on_terminal

ROWS = (
    ("interp", "f64", False),
    ("kernel", "f64", False),
    ("native", "f64", False),
    ("native", "f64", True),
    ("native", "f32", False),
    ("native", "f32", True),
    ("native", "bf16", False),
)
"""(executor, type, vector lanes) of each row, in the table's order."""


def row_name(executor: str, realize: str, lanes: bool, bits: int) -> str:
    if executor == "interp":
        return f"interp {bits} bits"
    return f"{executor} {realize}{' +lanes' if lanes else ''}"


def timed(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median, best) in milliseconds of `repeat` calls, after one untimed call."""
    call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def format_table(rows: list[tuple[str, float, float]], speedup: bool) -> str:
    """The specification's columns: the backend, left; median and best ms; the speedup over
    the first row's median."""
    head = f"{'backend':<18}{'median ms':>13}{'best ms':>13}"
    lines = [head + (f"{'speedup':>10}" if speedup else "")]
    first = rows[0][1] if rows else 0.0
    for name, median, best in rows:
        line = f"{name:<18}{median:>13.3f}{best:>13.3f}"
        if speedup:
            line += f"{first / median if median else float('inf'):>9.1f}x"
        lines.append(line)
    return "\n".join(lines) + "\n"


def bench_rows(core, entry, args, rows, bits: int, repeat: int, threads: int, shown=None) -> list:
    """(name, median ms, best ms) of each row: (executor, type, lanes); `shown` (a
    presk_cli.progress.Progress, on a terminal) told each phase: lowering, compiling, timing."""
    from presk_cli.progress import Progress

    shown = shown or Progress(None)
    from presk_core.interp import Interpreter
    from presk_kernel.lower import argument_leaves

    from presk_cli.native import compiled, executor, lower, storage

    dims = dict(entry.dims) | dict(entry.prefix)
    name = entry.function.name
    schedules: dict[str, object] = {}
    out = []
    for kind, realize, lanes in rows:
        if kind == "interp":
            interp = Interpreter(core, bits)
            call = lambda interp=interp: interp.run(name, args, entry.dims)  # noqa: E731
        else:
            if realize not in schedules:
                shown.phase(f"lowering `{name}` to kernels in {realize}")
                schedules[realize] = lower(core, name, dims, args, realize, threads)
            schedule = schedules[realize]
            inputs = storage(schedule, argument_leaves(args), stored=kind == "native")
            if kind == "kernel":
                run = executor(schedule, "kernel")
            else:
                n = len(schedule.launches)
                shown.phase(f"compiling {n} launch{'es' if n != 1 else ''} ({realize})")
                run = compiled(schedule, lanes).run
            call = lambda run=run, inputs=inputs: run(inputs)  # noqa: E731
        label = row_name(kind, realize, lanes, bits)
        shown.phase(f"timing {label.strip()} ({repeat} calls)")
        median, best = timed(call, repeat)
        out.append((label, median, best))
    shown.end_phase()
    return out


@click.command(
    short_help="Time an entry on every backend (the reference at --bits, the kernel interpreter,"
    " native f64, f32 and bf16)"
)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--entry", required=True, help="The function to time, as `presk run` takes it.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="A dimension.")
@CONST
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="The inputs' seed.",
)
@click.option(
    "--bits",
    type=Count(2, 100000),
    default=64,
    show_default=True,
    help="The reference row's MPFR precision.",
)
@click.option("--repeat", type=Count(1), default=21, show_default=True, help="Timed calls a row.")
@click.option(
    "--realize",
    type=REALIZE,
    help="Only the native rows of this type, or of this realization file (@FILE: with and"
    " without lanes), with no reference row and no speedup column.",
)
@click.option(
    "--threads",
    type=Count(1, 256),
    default=1,
    show_default=True,
    help="Threads of the native rows' large launches.",
)
@click.option(
    "--calibrate",
    "calibrate_out",
    metavar="OUT.json",
    help="Time every kernel the entry launches natively (in --realize, f64 by default), fit"
    " the roofline to the times and write the machine profile (docs/optimizer.md).",
)
@click.option(
    "--space",
    type=click.Choice(("calib", "small", "full", "gemm")),
    help="With --calibrate: calibrate the layout cost model instead, timing the entry's first"
    " contraction under every point of this layout space (docs/plans.md; gemm: the calib"
    " space's GEMM statement points alone, point 0 and its splits).",
)
@click.option(
    "--combine",
    metavar="pnorm|sum|max",
    help="With --space: how the model's five terms combine (default pnorm, its q fitted).",
)
@click.option(
    "--rules",
    metavar="RULES",
    help="With --space: how a layout is counted, a comma-separated subset of lines, overhead,"
    " or none (default lines,overhead).",
)
@click.option(
    "--opt",
    is_flag=True,
    help="Time the entry natively without and with --opt's rewriting (its report on standard"
    " error).",
)
@WEIGHTS
@click.option(
    "--profile",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="With --opt: price the rewriting by this machine profile's roofline, and print the"
    " times it predicts.",
)
@click.option(
    "--plan",
    metavar="@FILE",
    help="Add a row timing the entry natively under this plan (presk plan), in its"
    " realization (docs/plans.md).",
)
def bench(
    file,
    entry,
    dims,
    consts,
    seed,
    bits,
    repeat,
    realize,
    threads,
    calibrate_out,
    space,
    combine,
    rules,
    opt,
    weights_file,
    profile,
    plan=None,
) -> None:
    """Time an entry of FILE on every executor: the reference interpreter at --bits, the
    kernel interpreter, and the compiled kernels in f64, f32 (with and without vector lanes)
    and bf16; the median and best of --repeat calls, each after one untimed call
    (docs/native.md, "Running natively")."""
    from presk_core.run import EntryError, RunError, parse_entry
    from presk_syntax.pipeline import Context

    from presk_cli.pipeline import PIPELINE, RUN

    ctx = Context(consts=_consts(consts))
    sources = ctx.sources
    try:
        core = PIPELINE.run(RUN, file, ctx)
    except DiagnosticError as e:
        _fail(e, sources)
    if realize is None:
        rows = list(ROWS)
    elif realize not in REALIZES:  # a realization file: its native rows
        rows = [("native", realize, False), ("native", realize, True)]
    else:
        rows = [r for r in ROWS if r[0] == "native" and r[1] == realize]
    if profile is not None and not opt:
        click.echo("presk bench: --profile prices --opt's rewriting: give --opt", err=True)
        sys.exit(2)
    if opt and calibrate_out is not None:
        click.echo("presk bench: --opt and --calibrate are two runs: give one", err=True)
        sys.exit(2)
    if space is None and (combine is not None or rules is not None):
        click.echo(
            "presk bench: --combine and --rules are the layout model's: give --space", err=True
        )
        sys.exit(2)
    if space is not None and calibrate_out is None:
        click.echo("presk bench: --space calibrates the layout model: give --calibrate P", err=True)
        sys.exit(2)
    if space is not None:
        from presk_cli.bench_layout import calibrate_layouts

        run = (file, entry, _dims(dims), seed, bits, weights_file)
        return calibrate_layouts(
            core, run, realize or "f32", repeat, calibrate_out, space, combine or "pnorm",
            rules or "lines,overhead", sources,
        )  # fmt: skip
    if opt:
        run = (file, entry, _dims(dims), seed, bits, weights_file)
        return opt_command(core, ctx, run, realize or "f64", threads, repeat, profile)
    if calibrate_out is not None:
        return calibrate_command(
            core, (file, entry, _dims(dims), seed, bits, weights_file), realize or "f64", threads,
            repeat,
            calibrate_out, sources,
        )  # fmt: skip
    try:
        e = parse_entry(entry, core, None, _dims(dims))
        args = arguments(core, e, seed, bits, weights_file)
        table = bench_rows(core, e, args, rows, bits, repeat, threads, on_terminal("bench"))
        if plan is not None:
            table.append(plan_row(core, e, args, plan, repeat))
    except (EntryError, RunError) as err:
        entry_fail("bench", err, sources)
    except NativeError as err:
        fail(err, sources)
    click.echo(format_table(table, realize is None), nl=False)
    sys.stdout.flush()


def plan_row(core, entry, args, plan_text: str, repeat: int) -> tuple[str, float, float]:
    """`--plan @FILE`'s row, `native T --plan` (T the plan's realization): the entry
    compiled under the plan's layouts (E7110–E7113 as NativeError)."""
    from presk_kernel.lower import argument_leaves

    from presk_cli.native import compiled, lower, planned, storage
    from presk_cli.plans import PlanError, read_plan

    try:
        plan = read_plan(plan_text)
    except PlanError as e:
        raise NativeError(e.code, str(e), e.help) from None
    dims = dict(entry.dims) | dict(entry.prefix)
    name = entry.function.name
    layouts = planned(plan, core, name, dims)
    schedule = lower(core, name, dims, args, plan.realize, 1, layouts)
    run = compiled(schedule).run
    inputs = storage(schedule, argument_leaves(args))
    median, best = timed(lambda: run(inputs), repeat)
    return (f"native {plan.realize} --plan", median, best)


def arguments(core, entry, seed: int, bits: int, weights: str | None) -> list:
    """The entry's arguments as `presk run` makes them: drawn from `seed`, its tree bound
    from the checkpoint `weights` when given (presk_cli.weights)."""
    from presk_cli.native import entry_inputs
    from presk_cli.weights import bind_weights

    trees = bind_weights(core, entry, weights, bits) if weights is not None else None
    return [v for _, _, v in entry_inputs(core, entry, seed, bits, None, trees)]


def calibrate_command(core, run, realize, threads, repeat, out, sources) -> None:
    """`presk bench --calibrate OUT.json`: the table and `--` lines of the specification
    (presk_opt.calibrate), the profile written atomically; an existing profile's samples
    kept. `run`: (file, entry, dims, seed, bits, weights)."""
    from presk_core.run import EntryError, RunError, parse_entry
    from presk_kernel.lower import argument_leaves
    from presk_opt import roofline
    from presk_opt.calibrate import calibrate, time_kernels

    from presk_cli.native import lower, storage

    file, entry, dims, seed, bits, weights = run
    machine = roofline.machine(realize)
    old = None
    try:
        if os.path.exists(out):
            old = roofline.read(out)
            if old.machine != machine:
                raise roofline.ProfileError(
                    f"`{out}` profiles another machine or type ({_described(old.machine)}); "
                    f"this run times {_described(machine)}"
                )
    except roofline.ProfileError as err:
        fail(NativeError("E9002", str(err), "write the profile to another file"), sources)
    try:
        e = parse_entry(entry, core, None, dims)
        args = arguments(core, e, seed, bits, weights)
        schedule = lower(core, e.function.name, dict(e.dims) | dict(e.prefix), args, realize,
                         threads)  # fmt: skip
        if not schedule.launches:
            raise NativeError("E7002", f"`{e.shown}` launches no kernel: nothing to time")
        native = timed_entry(schedule)
        inputs = storage(schedule, argument_leaves(args))
        samples = time_kernels(native, inputs, repeat, f"{file}:{entry}")
    except (EntryError, RunError) as err:
        entry_fail("bench", err, sources)
    except NativeError as err:
        fail(err, sources)
    result = calibrate(samples, machine, old)
    try:
        roofline.write(result.profile, out)
    except OSError as err:
        fail(NativeError("E7004", f"cannot write `{out}`: {err.strerror or err}"), sources)
    click.echo(result.text(out, repeat), nl=False)
    sys.stdout.flush()


def opt_command(core, ctx, run, realize, threads, repeat, profile) -> None:
    """`presk bench --opt [--profile FILE]`: the entry natively without and with the
    rewriting, timed as the other rows (median and best of --repeat calls after an untimed
    one); with a profile, the times its roofline predicts for both programs."""
    from presk_core.run import EntryError, RunError, parse_entry
    from presk_kernel.lower import argument_leaves
    from presk_opt.cli import entry_sizes, optimized
    from presk_opt.optimize import number
    from presk_syntax.pipeline import Pricing

    from presk_cli.native import compiled, lower, storage

    file, entry, dims, seed, bits, weights = run
    sources = ctx.sources
    if profile is not None:
        ctx.pricing = Pricing(profile, entry_sizes(core, entry, dims))
    try:
        optimization = optimized(core, ctx)
    except DiagnosticError as e:
        _fail(e, sources)
    rewritten = optimization.program
    rows, kernels = [], []
    try:
        for name, program in ((f"native {realize}", core), (f"native {realize} --opt", rewritten)):
            e = parse_entry(entry, program, None, dims)
            args = arguments(program, e, seed, bits, weights)
            all_dims = dict(e.dims) | dict(e.prefix)
            schedule = lower(program, e.function.name, all_dims, args, realize, threads)
            call = compiled(schedule).run
            inputs = storage(schedule, argument_leaves(args), stored=True)
            rows.append((name, *timed(lambda call=call, inputs=inputs: call(inputs), repeat)))
            if profile is not None:
                kernels.append(kernel_time(timed_entry(schedule), inputs, repeat))
    except (EntryError, RunError) as err:
        entry_fail("bench", err, sources)
    except NativeError as err:
        fail(err, sources)
    click.echo(format_table(rows, True), nl=False)
    model = optimization.model
    if profile is not None and model is not None:
        from presk_opt.price import predicted

        before, after = (number(predicted(p, model), " µs") for p in (core, rewritten))
        click.echo(
            f"-- predicted by the roofline ({model.name.split(', ', 1)[1]}), the kernels "
            f"alone: {before}, {after} with --opt"
        )
        measured = [number(k, " µs") for k in kernels]
        click.echo(f"-- measured, the kernels alone: {measured[0]}, {measured[1]} with --opt")
    sys.stdout.flush()


def kernel_time(entry, inputs: list, repeat: int) -> float:
    """The median over `repeat` calls (after an untimed one) of the sum of the launches'
    times, in µs: the kernels alone, without the host's call."""
    import numpy as np

    ns = np.zeros(len(entry.schedule.launches) + 1)
    entry.run_timed(inputs, ns)
    totals = []
    for _ in range(repeat):
        ns[:] = 0.0
        entry.run_timed(inputs, ns)
        totals.append(float(ns[:-1].sum()) / 1000.0)
    return statistics.median(totals)


def _described(m: dict) -> str:
    return f"{m['os']} {m['arch']} {m['type']}, {m['cpu'] or 'an unnamed CPU'}"


def timed_entry(schedule):
    """The schedule compiled with each launch's clock (`NativeEntry(timed=True)`), its
    launches the plan's (`epilogues=False`: no GEMM takes its consumers, which the
    calibrations and the roofline's predictions price as kernels of their own); the
    compiler's diagnostics as NativeError."""
    from presk_cback.native import NativeEntry
    from presk_syntax.diagnostics import DiagnosticError

    try:
        return NativeEntry(schedule, timed=True, epilogues=False, rows=False)
    except DiagnosticError as e:
        d = e.diagnostics[0]
        raise NativeError(d.code, d.message, getattr(d, "help", None)) from None


__all__ = [
    "ROWS",
    "bench",
    "calibrate_command",
    "opt_command",
    "bench_rows",
    "format_table",
    "row_name",
    "timed",
]
