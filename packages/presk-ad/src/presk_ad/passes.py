"""presk-ad's pass `core-after-ad` and its stage program `presk-ad [--remat MODE]`
(presk_syntax.pipeline)."""

from __future__ import annotations

from presk_core import passes as core
from presk_core.ir import Program
from presk_core.passes import CORE, verified
from presk_syntax import passes as syntax
from presk_syntax.pipeline import Context, Option, Pass, StageProgram
from presk_types import passes as types


def ad_pass(program: Program, ctx: Context) -> Program:
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


def _remat(ctx: Context, mode: str) -> None:
    from presk_ad.vjp import REMATS

    if mode not in REMATS:
        raise ValueError(mode)
    ctx.remat = mode


REMAT = Option("--remat", "--remat MODE", _remat)

PASSES: tuple[Pass, ...] = (
    Pass(
        "core-after-ad",
        "PSK-Core after differentiation: grad replaced by generated .vjp, .grad, .fwd and .bwd",
        Program,
        Program,
        "core",
        ad_pass,
        StageProgram("presk-ad", CORE, CORE, (REMAT,)),
        verified,
    ),
)

UP_TO_AD = syntax.PASSES + types.PASSES + core.PASSES + PASSES
"""The passes from the file to differentiation, in order: the stage programs after it
(presk-kernel, presk-c) and the tests of the later packages assemble from these."""
