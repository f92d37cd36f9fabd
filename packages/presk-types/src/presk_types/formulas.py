"""Conditions written in Presk (`D % H == 0`, `T <= 1024`) as Presburger formulas."""

from __future__ import annotations

from collections.abc import Callable

from presk_syntax import ast as A
from presk_syntax.diagnostics import Label

from presk_types.presburger import Eq, Formula, Ge, Gt, Le, Lin, Lt, ModZero, Ne, Not

_COMPARISONS = {"==": Eq, "!=": Ne, "<": Lt, "<=": Le, ">": Gt, ">=": Ge}


def formula_of(e: A.Expr, length: Callable[[A.Expr], Lin]) -> Formula:
    """The formula of a comparison of lengths; `a % m == 0` (and `!= 0`) is divisibility."""
    match e:
        case A.Binary(op, A.Binary("%", a, m), A.IntLit(0)) if op in ("==", "!="):
            a_len, m_len = length(a), length(m)
            if a_len.is_const and m_len.is_const:  # both known: compare the remainder
                return _COMPARISONS[op](length(e.left), 0)
            divides = ModZero(a_len, m_len)
            return divides if op == "==" else Not(divides)
        case A.Binary(op, left, right) if op in _COMPARISONS:
            return _COMPARISONS[op](length(left), length(right))
    from presk_types.elab import ConstError, error  # elab imports this module when it runs

    raise ConstError(
        error(
            "E1004",
            "a static assertion is a comparison of lengths",
            Label(e.span, "not a comparison"),
            help="compare two lengths (`D <= 1024`), or test divisibility (`D % H == 0`)",
        )
    )
