"""presk-ad's pass `core-after-ad` and its stage program `presk-ad [--remat MODE]`
(presk_syntax.pipeline)."""

from __future__ import annotations

from presk_core import passes as core
from presk_core.ir import Program
from presk_core.passes import CORE, verified
from presk_syntax import passes as syntax
from presk_syntax.pipeline import Context, Option, Pass, StageProgram, Text
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


def sensitivity_pass(program: Program, ctx: Context):
    """The pass `sensitivity` (presk_core.sensitivity's table), from one reverse sweep of
    the entry's `.vjp` (presk_ad.sensitivity) where it can, by forward probes otherwise."""
    from presk_core.sensitivity import sensitivity_pass as run

    def sweep(core, entry, args):
        from presk_ad.sensitivity import SensitivityError, reverse_sensitivities
        from presk_ad.vjp import ADError

        try:
            found, sweeps = reverse_sensitivities(core, entry, args)
        except (SensitivityError, ADError):
            return None
        return found, "one reverse sweep" if sweeps == 1 else f"{sweeps} reverse sweeps"

    return run(program, ctx, sweep)


SENSITIVITY: tuple[Pass, ...] = (  # after differentiation, at the end of the list
    Pass(
        "sensitivity",
        "where a precision budget should go: each site's first-order effect on an entry's"
        " output (--entry, --dim), from one reverse sweep on the exact interpreter",
        Program,
        Text,
        "core-after-ad",
        sensitivity_pass,
    ),
)

UP_TO_AD = syntax.PASSES + types.PASSES + core.PASSES + PASSES
"""The passes from the file to differentiation, in order: the stage programs after it
(presk-kernel, presk-c) and the tests of the later packages assemble from these."""
