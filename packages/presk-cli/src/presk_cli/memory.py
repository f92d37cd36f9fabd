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
@click.option(
    "--symbolic",
    is_flag=True,
    help="The counts as exact polynomials in the dimensions given (--dim; with --step, the"
    " run's batch), fitted at several sizes and checked at one more.",
)
def memory(file, entry, dims, consts, realize, step, symbolic) -> None:
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
    ctx = Context(consts=consts)
    try:
        counters = (
            _step(file, consts, dims, realize)
            if step
            else [_entry(file, ctx, entry, dims, realize)]
        )
        lines: list[str] = []
        for title, at, count, free in counters:
            lines += [""] if lines else []
            if symbolic:
                lines += _symbolic(title, at, count, dims if not step else free)
            else:
                lines += report(f"{title}{_at(at)} in {_kind(realize)}", count(at))
    except DiagnosticError as e:
        _fail(e, ctx.sources)
    except (EntryError, RunError) as e:
        entry_fail("memory", e, ctx.sources)
    except NativeError as e:
        fail(e, ctx.sources)
    click.echo("\n".join(lines))
    sys.stdout.flush()


def _entry(file, ctx, entry, dims, realize):
    """(title, dimensions, count at dimensions -> Memory, the free dimensions)."""
    from presk_cback.memory import memory as count
    from presk_core.run import parse_entry
    from presk_types.types import ParamsT

    from presk_cli.native import lower
    from presk_cli.pipeline import PIPELINE, RUN

    core = PIPELINE.run(RUN, file, ctx)
    e = parse_entry(entry, core, None, dims)
    name = e.function.name
    trees = tuple(p.name for p in e.function.params if isinstance(p.type, ParamsT))

    def at(values: dict):
        return count(lower(core, name, values, None, realize), trees)

    return f"-- {name}", dict(e.dims) | dict(e.prefix), at, dims


def _at(dims: dict) -> str:
    return " at " + ", ".join(f"{d}={v}" for d, v in dims.items()) if dims else ""


def _kind(realize) -> str:
    return realize if isinstance(realize, str) else "a realization"


def _step(file, consts, dims, realize) -> list:
    """The training step under --remat residuals, then recompute: a counter each (_entry's)."""
    from presk_ad import ADError
    from presk_ad.step import NATIVE_STEP, TrainError, native_step, opened, training_step
    from presk_cback.memory import memory as count
    from presk_core.run import RunError

    from presk_cli.native import lower
    from presk_cli.pipeline import PIPELINE, TRAIN
    from presk_cli.train import checked_training, training_context

    out = []
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
        except DiagnosticError as e:
            _fail(e, ctx.sources)
        except (TrainError, ADError, RunError) as e:
            fail(NativeError(getattr(e, "code", "E7008"), str(e)), ctx.sources)
        name = NATIVE_STEP.format(run.objective)

        def at(values: dict, program=program, name=name):
            return count(lower(program, name, values, None, realize), ("θ",), ("m", "v"))

        title = f"-- the training step of `{run.objective}`, --remat {remat}: {name}"
        out.append((title, dict(run.dims()) | dims, at, dict(run.batch)))
    return out


# ---- --symbolic ----------------------------------------------------------------------------

FIELDS = (
    ("parameters", "parameters"),
    ("optimizer state", "state"),
    ("inputs", "inputs"),
    ("outputs", "outputs"),
    ("peak of live bytes", "peak"),
    ("native arena", "native_arena"),
    ("C arena", "c_arena"),
)


def _symbolic(title: str, at: dict, count, free: dict) -> list[str]:
    """Each count as an exact polynomial in the free dimensions: its degree in each at most
    the largest rank of a buffer (a size is a product of as many affine lengths), fitted on a
    grid of multiples of the given values (1×, 2×, …: a multiple keeps what divides), then
    checked at one more multiple; a count that is not one polynomial there (the peak moving
    from one launch to another) says so."""
    import itertools

    import gmpy2

    names = [d for d in at if d in free]
    if not names:
        raise click.UsageError("--symbolic needs a dimension to vary: give it with --dim")
    first = count(at)
    degree = max(first.rank, 1)
    grid = [[at[d] * (i + 1) for i in range(degree + 1)] for d in names]
    values = {}
    for point in itertools.product(*grid):
        values[point] = count(at | dict(zip(names, point, strict=True)))
    check_at = tuple(at[d] * (degree + 2) for d in names)
    checked = count(at | dict(zip(names, check_at, strict=True)))
    shown = ", ".join(
        f"{d} = {', '.join(str(v) for v in g)}" for d, g in zip(names, grid, strict=True)
    )
    lines = [
        f"{title}, polynomials in {', '.join(names)} (fitted at {shown}; checked at"
        f" {', '.join(f'{d} = {v}' for d, v in zip(names, check_at, strict=True))})"
    ]
    for label, attr in FIELDS:
        table = {p: gmpy2.mpq(getattr(m, attr)) for p, m in values.items()}
        if attr == "state" and not any(table.values()):
            continue
        poly = _interpolate(table, grid)
        want = getattr(checked, attr)
        got = _evaluate(poly, check_at)
        text = _format(poly, names)
        if got != want:
            text += f"   (not one polynomial here: {want:,} at the check, not {int(got):,})"
        lines.append(f"{label:<20}{text}")
    return lines


def _interpolate(table: dict, grid: list[list[int]]) -> dict[tuple, object]:
    """The polynomial through `table` (grid point -> value) on the tensor grid: its
    coefficients by monomial exponents, exact (one Vandermonde solve per variable)."""
    import gmpy2

    coeffs = dict(table)
    k = len(grid)
    for j in range(k):
        xs = grid[j]
        n = len(xs)
        out: dict[tuple, object] = {}
        others = {key[:j] + key[j + 1 :] for key in coeffs}
        for rest in others:
            ys = [coeffs[rest[:j] + (x,) + rest[j:]] for x in xs]
            for power, c in enumerate(
                _solve([[gmpy2.mpq(x) ** i for i in range(n)] for x in xs], ys)
            ):
                out[rest[:j] + (power,) + rest[j:]] = c
        coeffs = out
    return {e: c for e, c in coeffs.items() if c != 0}


def _solve(a: list[list], b: list) -> list:
    """a · x = b, exactly (Gaussian elimination on rationals)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = next(r for r in range(col, n) if m[r][col] != 0)
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col and m[r][col] != 0:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


def _evaluate(poly: dict, point: tuple) -> object:
    import gmpy2

    total = gmpy2.mpq(0)
    for exps, c in poly.items():
        term = c
        for x, e in zip(point, exps, strict=True):
            term *= gmpy2.mpq(x) ** e
        total += term
    return total


SUPER = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _format(poly: dict, names: list[str]) -> str:
    """`8·B² + 64·B + 608`: the terms by total degree, the largest first."""
    if not poly:
        return "0"
    parts = []
    for exps in sorted(poly, key=lambda e: (-sum(e), [-x for x in e])):
        c = poly[exps]
        mono = "·".join(
            n + (str(e).translate(SUPER) if e > 1 else "")
            for n, e in zip(names, exps, strict=True)
            if e
        )
        num = str(abs(c.numerator)) if c.denominator == 1 else f"{abs(c.numerator)}/{c.denominator}"
        coef = num if not mono else ("" if num == "1" else f"{num}·")
        sign = "−" if c < 0 else "+"
        parts.append((sign, f"{coef}{mono}" if mono else num))
    first_sign, first = parts[0]
    text = ("−" if first_sign == "−" else "") + first
    return text + "".join(f" {sg} {t}" for sg, t in parts[1:])


__all__ = ["memory", "report"]
