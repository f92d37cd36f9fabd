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
