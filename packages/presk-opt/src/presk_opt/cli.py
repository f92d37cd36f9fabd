"""`--opt` (and `--opt --profile FILE`) for the commands of presk-cli: the pass `core-opt`
after differentiation, its report on standard error (docs/cli.md, docs/optimizer.md).

`ctx.options["opt_profile"]`, when a command sets it, is `(FILE, entries)`: the machine
profile whose roofline prices the extraction, at the sizes of `entries` ((function, dims)
each: `presk run`'s entry, `presk train`'s step and AdamW step). A profile that cannot be
read is E9002."""

from __future__ import annotations

import sys

from presk_core.ir import Program
from presk_syntax.diagnostics import DiagnosticError, error


def cost_model(program: Program, ctx):
    """The cost model of `ctx`: the roofline of its profile at its entries' sizes, or
    operation counts."""
    from presk_opt.optimize import OPERATION_COUNTS

    given = ctx.options.get("opt_profile")
    if given is None:
        return OPERATION_COUNTS
    from presk_opt import roofline
    from presk_opt.price import roofline_model

    path, entries = given
    try:
        profile = roofline.read(path)
        if profile.fit is None:
            raise roofline.ProfileError(f"`{path}` holds no fit of the roofline")
    except roofline.ProfileError as e:
        raise DiagnosticError(
            error("E9002", str(e), help="write one with `presk bench FILE --entry E --calibrate`")
        ) from None
    return roofline_model(profile, program, entries)


def entry_sizes(core: Program, entry: str | None, dims: dict[str, int]) -> list:
    """`[(function, dims)]` of `presk run --entry E --dim …` on `core` (none when the entry
    does not parse: the run reports it)."""
    from presk_core.run import EntryError, parse_entry

    if entry is None:
        return []
    try:
        e = parse_entry(entry, core, None, dims)
    except EntryError:
        return []
    return [(e.function.name, dict(e.dims) | dict(e.prefix))]


def step_sizes(run, folder: str) -> list:
    """`[(function, dims)]` of `presk train`'s step: the objective's value and gradient
    (`presk_ad.step.STEP`) and AdamW's step, at the run's batch and its data's dimensions
    (none when the data cannot be opened: the training reports it)."""
    from presk_ad.step import STEP, TrainError, opened

    try:
        if run.file_type is None:
            run = opened(run, folder)
    except TrainError:
        return []
    dims = run.dims()
    return [(STEP.format(run.objective), dims), ("adamw.step", dims)]


def optimized(core: Program, file: str, ctx, after: str) -> Program:
    """`core` (the value of pass `after`) through `core-opt`, verified under
    PRESK_VERIFY=1 as every pass; the report printed on standard error."""
    from presk_core.passes import run_pipeline

    out = run_pipeline("core-opt", file, ctx, start=core, first=after)
    report = ctx.options["opt_report"]
    print("\n".join(report.lines()), file=sys.stderr)
    return out


def step_rewrite(ctx):
    """For `presk train --opt`: the training step's program through `core-opt` (verified
    under PRESK_VERIFY=1), its report printed on standard error."""
    from presk_core.passes import verified

    from presk_opt.optimize import opt_pass

    def rewrite(program: Program) -> Program:
        out = verified(opt_pass(program, ctx), "core-opt")
        print("\n".join(ctx.options["opt_report"].lines()), file=sys.stderr)
        return out

    return rewrite
