"""`--opt` (and `--opt --profile FILE`) for the commands of presk-cli: the pass `core-opt`
after differentiation, its report on standard error (docs/cli.md, docs/optimizer.md).

`ctx.pricing`, when a command sets it, is the machine profile whose roofline prices the
extraction, at the sizes of its entries ((function, dims) each: `presk run`'s entry,
`presk train`'s step and AdamW step). A profile that cannot be read is E9002."""

from __future__ import annotations

import sys

from presk_core.ir import Program
from presk_syntax.diagnostics import DiagnosticError, error
from presk_syntax.pipeline import Context

from presk_opt.passes import Optimized, opt_pass, verified_optimized


def cost_model(program: Program, ctx: Context):
    """The cost model of `ctx`: the roofline of its profile at its entries' sizes, or
    operation counts."""
    from presk_opt.optimize import OPERATION_COUNTS

    if ctx.pricing is None:
        return OPERATION_COUNTS
    from presk_opt import roofline
    from presk_opt.price import roofline_model

    path = ctx.pricing.profile
    try:
        profile = roofline.read(path)
        if profile.fit is None:
            raise roofline.ProfileError(f"`{path}` holds no fit of the roofline")
    except roofline.ProfileError as e:
        raise DiagnosticError(
            error("E9002", str(e), help="write one with `presk bench FILE --entry E --calibrate`")
        ) from None
    return roofline_model(profile, program, list(ctx.pricing.entries))


def entry_sizes(core: Program, entry: str | None, dims: dict[str, int]) -> tuple:
    """`((function, dims),)` of `presk run --entry E --dim …` on `core` (none when the
    entry does not parse: the run reports it)."""
    from presk_core.run import EntryError, parse_entry

    if entry is None:
        return ()
    try:
        e = parse_entry(entry, core, None, dims)
    except EntryError:
        return ()
    return ((e.function.name, dict(e.dims) | dict(e.prefix)),)


def step_sizes(run, folder: str) -> tuple:
    """`((function, dims), …)` of `presk train`'s step: the objective's value and gradient
    (`presk_ad.step.STEP`) and AdamW's step, at the run's batch and its data's dimensions
    (none when the data cannot be opened: the training reports it)."""
    from presk_ad.step import STEP, TrainError, opened

    try:
        if run.file_type is None:
            run = opened(run, folder)
    except TrainError:
        return ()
    dims = run.dims()
    return ((STEP.format(run.objective), dims), ("adamw.step", dims))


def optimized(core: Program, ctx: Context) -> Optimized:
    """`core` through `core-opt`, verified under PRESK_VERIFY=1 as every pass; the report
    printed on standard error."""
    out = verified_optimized(opt_pass(core, ctx), "core-opt", None)
    print("\n".join(out.report.lines()), file=sys.stderr)
    return out


def step_rewrite(ctx: Context):
    """For `presk train --opt`: the training step's program through `core-opt` (verified
    under PRESK_VERIFY=1), its report printed on standard error."""

    def rewrite(program: Program) -> Program:
        return optimized(program, ctx).program

    return rewrite
