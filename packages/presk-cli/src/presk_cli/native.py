"""`--backend native|kernel` for `presk run` (and what `presk train` and `presk bench` share):
an entry through the pipeline's native passes (presk_cli.pipeline.native_schedule: `kernel`,
lowered and fused; `layout`, the layouts of a run: threads, contractions through the GEMM)
from an `EntryOptions`, then executed as laid out by the kernel interpreter or compiled to C
(presk-cback); its outputs put back into the shape of the entry's result and printed by the
interpreter's printer.

Nothing here is imported by `presk run` on the interpreter: numpy, the kernels and cffi are
loaded when a native backend is asked for.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from typing import NoReturn

import click

from presk_cli.flags import Count

BACKENDS = ("interp", "kernel", "native")
REALIZES = ("f64", "f32", "bf16")


class RealizeType(click.ParamType):
    """`--realize f64|f32|bf16|@FILE`: a type for every real, or a realization file (read
    here, so that a bad one is its diagnostic before anything runs: E7035, E7036). The value
    stays the text given; presk_kernel.lower_entry reads it."""

    name = "f64|f32|bf16|@FILE"

    def convert(self, value, param, ctx):
        if not isinstance(value, str) or value in REALIZES:
            return value
        if not value.startswith("@"):
            self.fail(f"{value!r} is not one of f64, f32, bf16 or @FILE (a realization)")
        from presk_kernel.realization import RealizationError, parse_realization

        try:
            parse_realization(value)
        except RealizationError as e:
            fail(NativeError(e.code, str(e)))
        return value


REALIZE = RealizeType()


def _exact(command: Callable) -> Callable:
    """The reference interpreter computes at --bits, exactly rounded: a realization is for
    the kernels, which it measures (docs/spec-questions.md)."""

    @functools.wraps(command)
    def checked(*args, **kwargs):
        realize = kwargs.get("realize", "f64")
        if kwargs.get("backend") == "interp" and realize != "f64":
            raise click.UsageError(
                f"`--realize {realize}` is for --backend kernel|native: the reference"
                " interpreter is exact (at --bits) and every realization is measured against it"
            )
        return command(*args, **kwargs)

    return checked


def backend_options(command: Callable) -> Callable:
    """`--backend`, `--realize` and `--threads`, as `presk run` and `presk train` take them."""
    command = _exact(command)
    for option in reversed(
        [
            click.option(
                "--backend",
                type=click.Choice(BACKENDS),
                default="interp",
                show_default=True,
                help="The reference interpreter, the kernel interpreter, or compiled C.",
            ),
            click.option(
                "--realize",
                type=REALIZE,
                default="f64",
                show_default=True,
                help="With --backend kernel|native: the type of every real, or a realization"
                " file (@FILE: a type per site, parameter and function; docs/ir.md).",
            ),
            click.option(
                "--threads",
                type=Count(1, 256),
                default=1,
                show_default=True,
                help="With --backend native: threads for the large launches (no bit changes).",
            ),
        ]
    ):
        command = option(command)
    return command


PLAN = click.option(
    "--plan",
    metavar="@FILE",
    help="With --backend kernel|native: a layout per nest and the realization, from presk plan"
    " (the same output as without it; docs/plans.md).",
)


def plan_options(plan: str | None, native: dict):
    """(the plan's layouts reader, the realization the run takes) for `--plan @FILE`: the
    plan read here (E7111) and its realization taken unless --realize names another (E7113);
    --plan is for the kernel backends."""
    if plan is None:
        return None, native["realize"]
    if native["backend"] == "interp":
        raise click.UsageError(
            "--plan is for --backend kernel|native: the reference interpreter has no layouts"
        )
    from click.core import ParameterSource

    from presk_cli.plans import PlanError, plan_realize

    ctx = click.get_current_context(silent=True)
    given = ctx is not None and ctx.get_parameter_source("realize") not in (
        ParameterSource.DEFAULT,
        None,
    )
    try:
        return plan_realize(plan, native["realize"], given)
    except PlanError as e:
        fail(NativeError(e.code, str(e), e.help))


def planned(plan, core, name: str, dims: dict, args=None) -> dict | None:
    """The plan's layouts by site for `name` at `dims` (presk_cli.plans.plan_for), None
    without a plan; NativeError with the plan's code."""
    if plan is None:
        return None
    from presk_cli.plans import PlanError, plan_for

    try:
        return plan_for(plan, core, name, dims, args)
    except PlanError as e:
        raise NativeError(e.code, str(e), e.help) from None


class NativeError(Exception):
    """An entry the kernel backends cannot run: its diagnostic's code and message."""

    def __init__(self, code: str, message: str, help: str | None = None) -> None:
        super().__init__(message)
        self.code, self.help = code, help


# ---- schedules -----------------------------------------------------------------------------


def entry_text(core, name: str, dims: dict) -> str:
    """The function `name` of `core` as `--entry` reads it: `M{3, 2}.f` for a function of
    a module with dimensions (their values from `dims`), the name otherwise."""
    head, dot, tail = name.partition(".")
    layout = core.layout(head) if dot else None
    if layout is None or not layout.dims or any(d not in dims for d in layout.dims):
        return name
    return f"{head}{{{', '.join(str(dims[d]) for d in layout.dims)}}}.{tail}"


def lower(core, name: str, dims: dict, args, realize, threads: int = 1, plan=None):
    """The schedule a run executes: the function `name` of `core` at `dims` (every
    dimension), with the run's inputs `args`, through the pipeline's passes `kernel` and
    `layout` (presk_cli.pipeline.native_schedule) at `realize`, `threads` and `plan`."""
    from presk_syntax.diagnostics import DiagnosticError
    from presk_syntax.pipeline import EntryOptions

    from presk_cli.pipeline import native_schedule

    given = None if args is None else tuple(args)
    entry = EntryOptions(
        entry_text(core, name, dims), tuple(dims.items()), realize, threads, given, plan
    )
    try:
        return native_schedule(core, entry)
    except DiagnosticError as e:
        d = e.diagnostics[0]
        raise NativeError(d.code, d.message) from None


def refuse_quant(realize) -> None:
    """A training step takes no integer weights (E7151): its θ is updated in its own type,
    and a `quant` map is for an entry's weights (presk quantize, docs/precision.md)."""
    from presk_kernel.realization import RealizationError, as_realization

    try:
        quant = as_realization(realize).quant
    except RealizationError:
        return  # the lowering says what is wrong with it
    if quant:
        raise NativeError(
            "E7151",
            f"the realization `{realize}` quantises {quant[0][0]}: a training step takes no"
            " integer weights (train in f32 or bf16, then `presk quantize` the weights)",
        )


def executor(schedule, backend: str, lanes: bool = True) -> Callable[[list], list]:
    """A function from the entry's input leaves to its output leaves: the kernel interpreter
    on the laid-out kernels (`kernel`: each nest as its layout executes it, the schedule
    `native` compiles, presk_kernel.interp_laid) or the compiled entry (`native`, with or
    without vector lanes)."""
    from presk_kernel.interp import KernelError, run_schedule

    if backend == "kernel":
        run = lambda inputs: run_schedule(schedule, inputs, laid=True)  # noqa: E731
    else:
        run = compiled(schedule, lanes).run

    def call(inputs: list) -> list:
        try:
            return run(inputs)
        except KernelError as e:
            raise NativeError("E7003", str(e)) from None

    return call


def compiled(schedule, lanes: bool = True):
    """presk_cback's NativeEntry, its compiler's diagnostics (E9001) as NativeError."""
    from presk_cback.native import NativeEntry
    from presk_syntax.diagnostics import DiagnosticError

    try:
        return NativeEntry(schedule, lanes=lanes)
    except DiagnosticError as e:
        d = e.diagnostics[0]
        raise NativeError(d.code, d.message, getattr(d, "help", None)) from None


def storage(schedule, leaves: list, stored: bool = False) -> list:
    """The input leaves as numpy arrays the executors take without a conversion of each
    element (done once, outside any timing): reals as doubles, which each executor rounds to
    its buffers' type; with `stored`, each in its buffer's storage type (bf16 reals still
    doubles), which the compiled entry reads where it lies (presk_cback.native: `presk
    bench` times the call, not a conversion). A schedule with integer weights (a `quant`
    map) takes the weights as doubles and quantises them here (presk_kernel.quant)."""
    from presk_kernel.interp import to_storage
    from presk_kernel.quant import integer_inputs

    if len(leaves) < len(schedule.inputs):  # integer weights: quantised, their scales added
        leaves = integer_inputs(schedule, leaves)
    types = {b.id: b.dtype for b in schedule.buffers}
    real = ("f64", "bf16") if stored else ("f64", "f32", "bf16")
    return [
        to_storage(v, "f64" if types[b] in real else types[b])
        for b, v in zip(schedule.inputs, leaves, strict=True)
    ]


# ---- results -------------------------------------------------------------------------------


def rebuild(core, t, outputs: Iterator, real: Callable | None = None):
    """The entry's result, of type `t`, from its output leaves in order: trees as dicts of
    their leaves' paths, tuples, tensors (reals as exact mpfr, as the interpreter gives, or
    as `real` makes them of the doubles: the Python API's float64)."""
    import numpy as np
    from presk_core.run import interp_real
    from presk_types.types import KeyT, ParamsT, Real, TupleT

    match t:
        case ParamsT(inst):
            layout = core.layout(inst.module) or core.layout(inst.name)
            if layout is None:
                raise NativeError("E7002", f"no parameter tree for `{t}` in the program")
            return {leaf.path: rebuild(core, leaf.type, outputs, real) for leaf in layout.leaves}
        case TupleT(elements):
            return tuple(rebuild(core, e, outputs, real) for e in elements)
    value = next(outputs, None)
    if value is None:
        raise NativeError("E7002", f"the kernels give no value for a `{t}` of the result")
    if isinstance(t, KeyT):  # its two words (presk_kernel.draws)
        from presk_core.random import Key

        return Key(*(int(w) for w in np.asarray(value).reshape(2)))
    if isinstance(t, Real):
        doubles = np.asarray(value, dtype=np.float64)
        return interp_real(doubles, 53) if real is None else real(doubles)
    return np.asarray(value)


def result_of(core, entry, outputs: list, real: Callable | None = None):
    """The result of `entry` (presk_core.run.Entry) from all its kernels' outputs (rebuild)."""
    it = iter(outputs)
    result = rebuild(core, entry.function.result, it, real)
    if next(it, None) is not None:
        raise NativeError(
            "E7002", f"the kernels of `{entry.shown}` give more values than it returns"
        )
    return result


# ---- presk run --backend kernel|native -----------------------------------------------------


def run_text(
    core, entry_text, dims, seed, bits, digits, verbose, as_json, data, options, weights=None
):
    """The text `presk run --backend kernel|native` prints: as presk_core.run.run_entry
    prints the interpreter's result, from the kernels' outputs. `options`: (backend,
    realize, threads); `weights`: run_entry's."""
    from presk_core.run import data_argument, parse_entry, result_text
    from presk_kernel.lower import argument_leaves

    backend, realize, threads, *rest = options
    plan = rest[0] if rest else None
    given = None
    if data is not None:
        bound, given = data_argument(core, entry_text, data)
        dims = {**bound, **dims}
    entry = parse_entry(entry_text, core, None, dims)
    trees = weights(entry) if weights is not None else None
    inputs = entry_inputs(core, entry, seed, bits, given, trees)
    args = [v for _, _, v in inputs]
    all_dims = dict(entry.dims) | dict(entry.prefix)
    layouts = planned(plan, core, entry.function.name, all_dims)
    schedule = lower(core, entry.function.name, all_dims, args, realize, threads, layouts)
    outputs = executor(schedule, backend)(storage(schedule, argument_leaves(args)))
    result = result_of(core, entry, outputs)
    return result_text(
        entry, inputs, result, seed, bits, digits, verbose, as_json, (backend, realize)
    )


def fail(e: NativeError, sources=None) -> NoReturn:
    """The diagnostic of a NativeError on standard error, exit 1."""
    from presk_syntax.diagnostics import emit, error
    from presk_syntax.span import SourceMap

    emit([error(e.code, str(e), help=e.help)], sources or SourceMap())
    sys.exit(1)


def run_native(core, args: tuple, native: dict, sources, weights=None, plan=None) -> str:
    """`presk run --backend kernel|native`: `args` are run_entry's (entry, dims, seed, bits,
    digits, verbose, as_json, data), `native` the options of backend_options, `weights`
    run_entry's."""
    from presk_core.run import EntryError, RunError

    from presk_cli.commands import entry_fail

    plan, realize = plan_options(plan, native)
    options = (native["backend"], realize, native["threads"], plan)
    try:
        return run_text(core, *args, options, weights)
    except (EntryError, RunError) as e:
        entry_fail("run", e, sources)
    except NativeError as e:
        fail(e, sources)


def entry_inputs(core, entry, seed: int, bits: int, given=None, bound=None) -> list:
    """The entry's arguments as `presk run` synthesizes them (DESIGN §5), the last one from
    `--data` when given, the trees `--weights` binds (`bound`): (name, type, value)."""
    from presk_core import run
    from presk_core.interp import Interpreter

    return run.entry_inputs(entry, Interpreter(core, bits), seed, bits, given, bound)


__all__ = [
    "BACKENDS",
    "NativeError",
    "PLAN",
    "plan_options",
    "planned",
    "backend_options",
    "compiled",
    "entry_inputs",
    "executor",
    "fail",
    "entry_text",
    "lower",
    "rebuild",
    "result_of",
    "run_native",
    "run_text",
    "storage",
]
