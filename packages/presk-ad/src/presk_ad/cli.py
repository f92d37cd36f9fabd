"""`presk-ad [--remat residuals|recompute]`: a `core` document in, the differentiated one
out (`stage_main("presk-ad")`, presk_core.passes); the function of the pass
`core-after-ad`."""

from __future__ import annotations

import sys

from presk_core.passes import stage_main


def ad_pass(program, ctx):
    """The pass `core-after-ad`: `grad` replaced by generated functions (`ctx.remat`);
    E7002 when a program cannot be differentiated."""
    from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Severity

    from presk_ad.vjp import ADError, differentiate

    try:
        return differentiate(program, ctx.remat)
    except ADError as e:
        raise DiagnosticError(
            [Diagnostic("E7002", Severity.ERROR, f"cannot differentiate: {e}")]
        ) from None


def ad_main(argv: list[str] | None = None) -> int:
    return stage_main("presk-ad", argv)


if __name__ == "__main__":
    sys.exit(ad_main())
