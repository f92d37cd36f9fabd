"""`--opt` for the commands of presk-cli: the pass `core-opt` after differentiation, its
report on standard error (docs/cli.md)."""

from __future__ import annotations

import sys

from presk_core.ir import Program


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
