"""The numbers a type holds. A literal, a constant or a default the checker evaluates exactly
(in ℚ) is refused when its type cannot hold it (E1013), before any executor rounds it:

- `f64` is IEEE binary64: a value is rounded once, to nearest even, and must stay finite and,
  when it is not 0, must not round to 0 (`1e400`, `1e-400` are refused);
- `ℝ` is exact in the interpreter, but every native executor (the kernel interpreter, the
  native backend, the exports) computes in binary64: an ℝ literal must round to a finite
  double that is 0 only when the literal is, or `x^1e-400` would be `x^0` natively;
- `nat` (hyperparameters, constants, epochs, batch sizes), lengths, bounds and integer
  exponents are int64s: naturals up to 2^63 - 1; a seed is a natural below 2^64.

Where each is checked: constants and bounds in `elab`, defaults, literals and exponents in
`check`, lengths in `elab.scope_length`, a run's and a serve's numbers in `training` and
`serving`, initializers' in `modules`; a literal too long to even convert is presk_syntax's
E0014.

A hyperparameter's default is any constant expression (`= S`, `= 1/2`, `= -2`): its exact
value, rounded once to the hyperparameter's type (`default_text`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import gmpy2
from presk_syntax import ast as A
from presk_syntax.diagnostics import Label
from presk_syntax.span import Span

from presk_types.constants import ConstError, error, eval_const, format_q

if TYPE_CHECKING:
    from presk_types.elab import FileEnv

NAT_MAX = 2**63 - 1
"""The largest `nat`: an int64 (DESIGN §4: indices are int64, and so are lengths natively)."""

SEED_LIMIT = 2**64
"""A seed is a 64-bit integer (`presk_core.random.root_key`): naturals below 2^64."""

_F64_NOTE = "f64 is IEEE binary64: finite magnitudes from about 4.9e-324 to 1.8e308, and 0"
_REAL_NOTE = (
    "ℝ is exact in the interpreter, but the native executors compute in binary64: a literal"
    " must be a finite double, and 0 only if it is 0"
)


def double_of(q: gmpy2.mpq) -> float | None:
    """`q` rounded once to the nearest binary64 (ties to even), or None when that is not
    `q`'s: an overflow to ±∞, or a non-zero `q` that rounds to 0."""
    try:
        d = int(q.numerator) / int(q.denominator)  # Python's int division rounds correctly
    except OverflowError:
        return None
    return None if d == 0.0 and q != 0 else d


def _shown(q: gmpy2.mpq, text: str | None) -> str:
    if text is not None:
        return text
    s = format_q(q)
    return s if len(s) <= 40 else f"{s[:18]}…{s[-18:]}"


def check_double(q: gmpy2.mpq, span: Span, kind: str = "f64", text: str | None = None) -> float:
    """The double nearest `q`, or E1013 when `q` is outside binary64's range; `kind` is the
    type that holds it (`f64`, `ℝ`), `text` the literal as written (for the message)."""
    d = double_of(q)
    if d is not None:
        return d
    why = "rounds to infinity in binary64" if abs(q) >= 1 else "rounds to 0 in binary64"
    raise ConstError(
        error(
            "E1013",
            f"`{_shown(q, text)}` is outside the range of `{kind}`",
            Label(span, why),
            note=_F64_NOTE if kind == "f64" else _REAL_NOTE,
        )
    )


def check_natural(
    q: gmpy2.mpq,
    span: Span,
    what: str,
    limit: int = NAT_MAX + 1,
    kind: str = "nat",
) -> int:
    """`q` as a natural below `limit`: E1005 when it is no natural, E1013 when it is too large
    for `kind` (`what` names the value in the message)."""
    if q.denominator != 1 or q < 0:
        raise ConstError(
            error(
                "E1005",
                f"{what} is not a natural number",
                Label(span, f"evaluates to {_shown(q, None)}"),
                note="constants are evaluated exactly: a division must be exact and the"
                " result non-negative",
            )
        )
    if q >= limit:
        bound = "2^63 - 1" if limit == NAT_MAX + 1 else f"2^{limit.bit_length() - 1} - 1"
        held = f"`{kind}`" if kind != "seed" else "a 64-bit seed"
        raise ConstError(
            error(
                "E1013",
                f"{what} is outside the range of {held}",
                Label(span, f"{_shown(q, None)} is over {bound}"),
                note=f"`{kind}` is a 64-bit machine integer: at most {bound}"
                if kind != "seed"
                else f"a seed is a 64-bit integer: at most {bound}",
            )
        )
    return int(q)


def literal_value(e: A.IntLit | A.FloatLit) -> gmpy2.mpq:
    return gmpy2.mpq(e.value) if isinstance(e, A.IntLit) else gmpy2.mpq(e.text)


def check_real_literal(e: A.IntLit | A.FloatLit) -> None:
    """E1013 when the ℝ literal `e` has no double of its own (`1e400`, `1e-400`)."""
    text = str(e.value) if isinstance(e, A.IntLit) else e.text
    check_double(literal_value(e), e.span, "ℝ", text if len(text) <= 40 else None)


def default_text(e: A.Expr, kind: str, env: FileEnv, name: str) -> str:
    """The text of the default `e` of the hyperparameter `name : kind`, evaluated exactly in
    `env` (E1003 when it is not a constant expression) and rounded once to `kind`: a literal
    as written, any other expression the shortest text of its double (or its natural)."""
    q = eval_const(e, env)
    if kind == "nat":
        n = check_natural(q, e.span, f"the default of `{name}`")
        return str(n)
    d = check_double(q, e.span, "f64", e.text if isinstance(e, A.FloatLit) else None)
    if isinstance(e, A.FloatLit):
        return e.text
    if isinstance(e, A.IntLit) and float(e.value) == e.value:
        return str(e.value)
    return repr(d)
