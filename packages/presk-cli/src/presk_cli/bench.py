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

import statistics
import sys
import time
from collections.abc import Callable

import click
from presk_syntax.diagnostics import DiagnosticError

from presk_cli.commands import CONST, SEED, _consts, _dims, _fail, entry_fail
from presk_cli.native import REALIZES, NativeError, fail

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


def bench_rows(core, entry, args, rows, bits: int, repeat: int, threads: int) -> list:
    """(name, median ms, best ms) of each row: (executor, type, lanes)."""
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
                schedules[realize] = lower(core, name, dims, args, realize, threads)[1]
            schedule = schedules[realize]
            inputs = storage(schedule, argument_leaves(args))
            if kind == "kernel":
                run = executor(schedule, "kernel")
            else:
                run = compiled(schedule, lanes).run
            call = lambda run=run, inputs=inputs: run(inputs)  # noqa: E731
        median, best = timed(call, repeat)
        out.append((row_name(kind, realize, lanes, bits), median, best))
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
    type=click.IntRange(2, 100000),
    default=64,
    show_default=True,
    help="The reference row's MPFR precision.",
)
@click.option(
    "--repeat", type=click.IntRange(1), default=21, show_default=True, help="Timed calls a row."
)
@click.option(
    "--realize",
    type=click.Choice(REALIZES),
    help="Only the native rows of this type (no reference row, no speedup column).",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Threads of the native rows' large launches.",
)
def bench(file, entry, dims, consts, seed, bits, repeat, realize, threads) -> None:
    """Time an entry of FILE on every executor: the reference interpreter at --bits, the
    kernel interpreter, and the compiled kernels in f64, f32 (with and without vector lanes)
    and bf16; the median and best of --repeat calls, each after one untimed call
    (docs/native.md, "Running natively")."""
    from presk_core.passes import Context, run_pipeline
    from presk_core.run import EntryError, RunError, parse_entry

    from presk_cli.commands import RUN
    from presk_cli.native import entry_inputs

    ctx = Context(consts=_consts(consts))
    sources = ctx.sources
    try:
        core = run_pipeline(RUN, file, ctx)
    except DiagnosticError as e:
        _fail(e, sources)
    if realize is None:
        rows = list(ROWS)
    else:
        rows = [r for r in ROWS if r[0] == "native" and r[1] == realize]
    try:
        e = parse_entry(entry, core, None, _dims(dims))
        args = [v for _, _, v in entry_inputs(core, e, seed, bits)]
        table = bench_rows(core, e, args, rows, bits, repeat, threads)
    except (EntryError, RunError) as err:
        entry_fail("bench", err, sources)
    except NativeError as err:
        fail(err, sources)
    click.echo(format_table(table, realize is None), nl=False)
    sys.stdout.flush()


__all__ = ["ROWS", "bench", "bench_rows", "format_table", "row_name", "timed"]
