"""presk-opt's pass `core-opt` (`--opt`): the program after the e-graph optimizer, given
with its report and the cost model that priced it (presk_syntax.pipeline)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from presk_core.ir import Program
from presk_core.passes import verified
from presk_syntax.pipeline import Context, Pass

if TYPE_CHECKING:  # `presk --help` does not load egglog
    from presk_opt.optimize import CostModel, Report


@dataclass(frozen=True, slots=True)
class Optimized:
    """The value of `core-opt`: the rewritten program, what `presk run --opt` prints of the
    rewriting (`report.lines()`), and the cost model its extraction minimised."""

    program: Program
    report: Report
    model: CostModel


def opt_pass(program: Program, ctx: Context) -> Optimized:
    """The pass `core-opt`: `optimize` under the cost model of `ctx.pricing` (operation
    counts without one); E9002 when its profile cannot be read."""
    from presk_opt.cli import cost_model
    from presk_opt.optimize import optimize

    model = cost_model(program, ctx)
    out, report = optimize(program, model=model)
    return Optimized(out, report, model)


def verified_optimized(value: Optimized, after: str, first: Optimized | None) -> Optimized:
    """Its program through the Core verifier (presk_core.passes.verified)."""
    return replace(value, program=verified(value.program, after))


PASSES: tuple[Pass, ...] = (
    Pass(
        "core-opt",
        "PSK-Core after the e-graph optimizer (--opt): exact rules, the cheapest program",
        Program,
        Optimized,
        "core-after-ad",
        opt_pass,
        verify=verified_optimized,
    ),
)
