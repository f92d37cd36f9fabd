"""The rule `a sum over axes of length 1 = reshape` (docs/optimizer.md, "Rules").

Differentiation writes the adjoint of a broadcast as `sum_to ct, x`: ct summed over the
axes x lacks (and over those where x has length 1) back to x's type. Where every axis it
sums has the literal length 1 in the type (`ℝ[1, batch: B]` to `ℝ[batch: B]`), each sum
has one term, and a sum of one term is that term (the kernels' and the interpreter's sums
are left folds from the first term: no `+ 0`, a −0 stays −0), so the result is ct's own
elements in ct's row-major order: `reshape_like ct, x`, which every stage accepts (the
verifier: x's type; the interpreter: a numpy reshape; the kernels: a view of ct's
buffer, no kernel; the export: `reshape`).

Which `sum_to`s qualify depends on their placement (`_align`, which the terms do not
carry), so the program's instructions are checked here, one fact `squeezes(site)` each:
x's axes at increasing places among ct's, each the same length as the axis it faces (no
length-1 broadcasting), every other axis of ct of length 1, the same prefix. A generic
program's lengths are symbolic: only a literal 1 counts (`D` bound to 1 by a call does
not).
"""

from __future__ import annotations

from egglog import String, relation, rewrite, vars_
from presk_core.ir import Instr, Program
from presk_types.presburger import Lin
from presk_types.shapes import alignment
from presk_types.types import shape_of

from presk_opt.terms import Made, Term

NAME = "a sum over axes of length 1 = reshape"
WHY = (
    "a sum of one term is that term (a left fold from the first term): summing only axes "
    "of length 1 keeps ct's elements in their order, x's shape"
)

squeezes = relation("presk_squeezes", String)
"""`squeezes(site)`: the `sum_to` at site sums only axes of the literal length 1."""

at, t, s = vars_("at t s", String)
ct, x = vars_("ct x", Term)

REWRITES = (
    rewrite(Term.n2("sum_to", at, t, Made.at(s), ct, x)).to(
        Term.n2("reshape_like", "", t, Made.by(Made.at(s), NAME), ct, x), squeezes(s)
    ),
)


def _one(length: Lin) -> bool:
    return not length.coeffs and length.constant == 1


def only_ones(ins: Instr) -> bool:
    """Whether `sum_to ct, x` (`ins`) sums only axes of length 1 (module docstring)."""
    cs, xs = shape_of(ins.args[0].type), shape_of(ins.args[1].type)
    if cs is None or xs is None or cs.prefix != xs.prefix or xs.rank >= cs.rank:
        return False
    place = dict(ins.attrs).get("_align")
    if place is None:
        place = alignment(xs, cs)
    at_ = [cs.rank + p for p in place]
    if len(at_) != xs.rank or any(b <= a for a, b in zip(at_, at_[1:], strict=False)):
        return False
    if any(not 0 <= i < cs.rank for i in at_):
        return False
    for i, a in zip(at_, xs.axes, strict=True):
        if a.length != cs.axes[i].length:
            return False
    return all(_one(a.length) for j, a in enumerate(cs.axes) if j not in at_)


def facts(program: Program) -> list:
    """`squeezes(site)` of every `sum_to` of the program that sums only axes of length 1."""
    return [
        squeezes(ins.site)
        for fn in program.functions
        for ins in fn.body
        if ins.op == "sum_to" and ins.site and only_ones(ins)
    ]
