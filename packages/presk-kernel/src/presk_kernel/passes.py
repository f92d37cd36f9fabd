"""presk-kernel's passes `sched`, `kernel` and `layout`, and the `kernel` document the stage
program `presk-kernel --entry E --dim N=V… [--realize T]` writes (presk_syntax.pipeline).

They lower the entry of `ctx.entry` (as `presk run --entry E --dim …` takes it) from the
core document alone: the shapes of θ from the program's parameter layouts, no interpreter
run. `kernel` gives the entry's kernels lowered (`lower_entry`) and fused (`fuse`);
`layout` each nest's layout applied (`lay_out`: the run's at `ctx.entry.threads`, or the
plan's, `ctx.entry.plan`): what a native run compiles, what `presk dump --stage kernel`
prints and `presk-kernel` writes (it runs both). The PSK-Kernel verifier
(presk_kernel.spec) follows each. `sched` prints the fusion groups and the launches they
remove. `emitted` is the schedule a native entry compiles from `layout`'s: no stage
prints it (the products' epilogues and the row kernels fused, at emission).
"""

from __future__ import annotations

from presk_core.ir import Program
from presk_core.passes import CORE
from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Severity
from presk_syntax.pipeline import (
    Context,
    Document,
    EntryOptions,
    Option,
    Pass,
    StageProgram,
    Text,
    with_entry,
)

from presk_kernel.ir import Schedule

REALIZES = ("f64", "f32", "bf16")  # the uniform realizations; `@FILE` reads one


def _error(code: str, message: str) -> DiagnosticError:
    return DiagnosticError(Diagnostic(code, Severity.ERROR, message))


def entry_schedule(core: Program, entry: EntryOptions) -> Schedule:
    """The schedule of `entry` before fusion (`entry.args`: the run's inputs, when a run
    has them); E7001 for an entry that cannot be, the lowering's code for what has no
    kernel."""
    from presk_core.run import EntryError, parse_entry

    from presk_kernel.lower import LowerError, lower_entry

    if not entry.entry:
        raise _error("E7001", "`presk dump --stage sched|kernel` needs an entry: give `--entry F`")
    try:
        e = parse_entry(entry.entry, core, None, entry.dim_values)
        dims = dict(e.dims) | dict(e.prefix)
        args = None if entry.args is None else list(entry.args)
        return lower_entry(core, e.function.name, dims, args, entry.realize)
    except EntryError as err:
        raise _error("E7001", str(err)) from None
    except LowerError as err:
        raise _error(err.code, f"cannot lower `{entry.entry}` to kernels: {err}") from None


def sched_pass(core: Program, ctx: Context) -> Text:
    """The pass `sched`: the launches after fusion, what each fused kernel computes."""
    from presk_kernel.cli import format_groups
    from presk_kernel.fuse import fuse

    schedule = entry_schedule(core, ctx.entry)
    fused, groups = fuse(schedule)
    return Text(format_groups(schedule, fused, groups))


def kernel_pass(core: Program, ctx: Context) -> Schedule:
    """The pass `kernel`: the kernels the entry launches, lowered, fused and narrowed to
    their masks (presk_kernel.narrow; each nest at the lowering's layout, its natural
    order); the parameters of the realization's `quant` map stored as integers and
    dequantised in the kernels that read them (presk_kernel.quant.integer_weights)."""
    import os

    from presk_kernel.fuse import fuse
    from presk_kernel.narrow import narrow
    from presk_kernel.quant import IntegerWeightError, integer_weights
    from presk_kernel.realization import RealizationError, as_realization
    from presk_kernel.stacks import one_stacks

    schedule = one_stacks(fuse(entry_schedule(core, ctx.entry))[0])[0]
    if os.environ.get("PRESK_NARROW") != "0":  # "0": the unnarrowed schedule, to measure
        schedule = narrow(schedule)[0]
    try:
        quant = as_realization(ctx.entry.realize).quant
    except RealizationError:  # the lowering read it already: not reached
        quant = ()
    if not quant:
        return schedule
    try:  # the realization's integer weights, dequantised where a kernel reads them
        return integer_weights(schedule, quant)
    except IntegerWeightError as err:
        raise _error(err.code, str(err)) from None


def layout_pass(schedule: Schedule, ctx: Context) -> Schedule:
    """The pass `layout`: each nest's layout applied (`lay_out`: the run's at
    `ctx.entry.threads`, or the plan's for its site); a plan's illegal layout is its
    diagnostic (E7040, E7041)."""
    from presk_kernel.layout import LayoutError, lay_out

    try:
        return lay_out(schedule, ctx.entry.threads, ctx.entry.plan)
    except LayoutError as err:
        raise _error(err.code, str(err)) from None


def emitted(
    schedule: Schedule,
    *,
    epilogues: bool = True,
    rows: bool = True,
    slices: bool = True,
    scratch: bool = True,
) -> Schedule:
    """The schedule a native entry compiles from the laid-out `schedule` (the pass `layout`'s
    value; presk_cback.native.NativeEntry, `presk memory`'s arena): each GEMM statement with
    its elementwise consumers as its epilogue (presk_kernel.epilogue, `epilogues=False`:
    not), then the kernels that sweep one row loop as one kernel (presk_kernel.rows,
    `rows=False`: not), then the kernels over the same batch points (an attention's (batch,
    head)) as one kernel over them, each group's own temporaries one slice a point
    (presk_kernel.slices, `slices=False`: not; `scratch=False`: the groups, not their
    scratch); none changes a bit, and the verifier follows each."""
    from presk_kernel.epilogue import gemm_epilogues
    from presk_kernel.rows import fuse_rows
    from presk_kernel.slices import fuse_slices

    if epilogues:
        schedule = gemm_epilogues(schedule)
    if rows:
        schedule = fuse_rows(schedule)
    if slices:
        schedule = fuse_slices(schedule, scratch)
    return schedule


def verified(schedule: Schedule, after: str, first: object = None) -> Schedule:
    """The PSK-Kernel verifier after the pass `after` (presk_kernel.spec.verified: when
    `PRESK_VERIFY=1`)."""
    from presk_kernel.spec import verified as spec_verified

    return spec_verified(schedule, after)


def read_kernel(data: bytes, ctx: Context) -> Schedule:
    from presk_kernel.codec import decode_kernel

    return decode_kernel(data)


def write_kernel(value: Schedule, ctx: Context) -> bytes:
    from presk_kernel.codec import encode_kernel

    return encode_kernel(value)


def _dim(ctx: Context, text: str) -> None:
    name, eq, value = text.partition("=")
    if not eq or not name.strip() or not value.strip().isdigit():
        raise ValueError(text)
    with_entry(ctx, dims=(*ctx.entry.dims, (name.strip(), int(value))))


def _realize(ctx: Context, text: str) -> None:
    if text not in REALIZES and not text.startswith("@"):  # @FILE: read by the lowering
        raise ValueError(text)
    with_entry(ctx, realize=text)


KERNEL = Document("kernel", read_kernel, write_kernel)
ENTRY = Option("--entry", "--entry E", lambda ctx, e: with_entry(ctx, entry=e), required=True)
DIM = Option("--dim", "--dim N=V", _dim, repeat=True)
REALIZE = Option("--realize", "--realize T|@FILE", _realize)

PASSES: tuple[Pass, ...] = (
    Pass(
        "sched",
        "the fusion groups of an entry (--entry, --dim), and the launches they remove",
        Program,
        Text,
        "core-after-ad",
        sched_pass,
    ),
    Pass(
        "kernel",
        "PSK-Kernel: the kernels an entry (--entry, --dim) launches, after fusion and layout",
        Program,
        Schedule,
        "core-after-ad",
        kernel_pass,
        verify=verified,
    ),
    Pass(
        "layout",
        "each nest's layout applied: loop order, tiles, lanes, threads, packs, GEMM statements",
        Schedule,
        Schedule,
        "kernel",
        layout_pass,
        StageProgram("presk-kernel", CORE, KERNEL, (ENTRY, DIM, REALIZE), since="core-after-ad"),
        verify=verified,
    ),
)

SHOWN = {"kernel": "layout"}
"""`presk dump --stage kernel` prints the kernels an entry launches (the specification's
stage list, §7): the value of the pass `layout`, the schedule a native run compiles, as
`presk-kernel` writes it."""
