"""Constants: their exact values in ℚ (numbers, constants, `+ - * / % ^`), the overrides of
`--const`, and the error of a constant or a length (`ConstError`). Re-exported by elab."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import gmpy2
from presk_syntax import ast as A
from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Label, Severity
from presk_syntax.literals import MAX_DIGITS, MAX_EXPONENT

if TYPE_CHECKING:
    from presk_types.elab import FileEnv


def error(
    code: str, message: str, *labels: Label, help: str | None = None, note: str | None = None
):
    return Diagnostic(code, Severity.ERROR, message, tuple(labels), help, note)


class ConstError(Exception):
    def __init__(self, diagnostic: Diagnostic) -> None:
        self.diagnostic = diagnostic


REPORTED = Diagnostic("E1000", Severity.ERROR, "(reported)")
"""An error already reported (a constant whose declaration is in error): not shown again."""


def keep(diags: list[Diagnostic], d: Diagnostic) -> None:
    """Append `d` to `diags` unless it stands for an error already reported."""
    if d.code != "E1000":
        diags.append(d)


def eval_const(e: A.Expr, env: FileEnv) -> gmpy2.mpq:
    """The exact value of a constant expression (numbers, constants, + - * / % ^)."""
    match e:
        case A.IntLit(value):
            return gmpy2.mpq(value)
        case A.FloatLit(text):
            return gmpy2.mpq(text)
        case A.Var(name, span):
            if name in env.consts:
                return env.consts[name]
            if name in env.const_decls:  # declared, and its error reported: not again here
                raise ConstError(REPORTED)
            from presk_types.rules import CONSTANT_NAMES  # rules' imports reach this module

            why = (
                "π is not a rational: it is a value of functions, not of constants"
                if name in CONSTANT_NAMES
                else None
            )
            raise ConstError(
                error(
                    "E2001",
                    f"unresolved name `{name}`",
                    Label(span, "not a constant in scope"),
                    help=why,
                )
            )
        case A.FieldAccess(A.Var(alias), name, span) if alias in env.imports:
            target = env.imports[alias]
            if name in target.consts:
                return target.consts[name]
            if name in target.const_decls:
                raise ConstError(REPORTED)
            raise ConstError(
                error("E2001", f"unresolved name `{alias}.{name}`", Label(span, "not a constant"))
            )
        case A.Unary("-", operand):
            return -eval_const(operand, env)
        case A.Binary(op, left, right, span) if op in "+-*/%^":
            a, b = eval_const(left, env), eval_const(right, env)
            if op in "/%" and b == 0:
                raise ConstError(
                    error("E1003", "division by zero in a constant", Label(span, "divides by 0"))
                )
            if op == "%":
                if a.denominator != 1 or b.denominator != 1:
                    raise ConstError(
                        error("E1003", "`%` of constants that are not integers", Label(span, ""))
                    )
                return gmpy2.mpq(int(a) % int(b))
            if op == "^":
                if b.denominator != 1:
                    raise ConstError(error("E1003", "a non-integer power", Label(span, "")))
                if b < 0 and a == 0:
                    raise ConstError(
                        error("E1003", "division by zero in a constant", Label(span, "0^-n"))
                    )
                if (
                    abs(b) > 1
                    and abs(a) != 1
                    and a != 0
                    and _bits(a) * abs(int(b)) > MAX_CONST_BITS
                ):
                    raise ConstError(
                        error(
                            "E1003",
                            "a constant too large to compute",
                            Label(span, f"over 2^{MAX_CONST_BITS}"),
                        )
                    )
                return a ** int(b)
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            return a / b
    raise ConstError(
        error(
            "E1003",
            "not a constant expression",
            Label(e.span, "constants are built from numbers and constants"),
        )
    )


MAX_CONST_BITS = 4096
"""The largest constant's numerator or denominator, in bits: `2^2^31` is refused, not computed."""


def _bits(q: gmpy2.mpq) -> int:
    return max(int(q.numerator).bit_length(), int(q.denominator).bit_length())


def format_q(q: gmpy2.mpq) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


_NUMBER = re.compile(r"[+-]?(\d+/\d+|(\d+\.?\d*|\.\d+)([eE]([+-]?\d+))?)")


def read_number(text: str) -> gmpy2.mpq:
    """A number written on the command line (`8`, `-2`, `1/2`, `0.02`, `1e-3`), exactly;
    ValueError when it is not one or is too long to read (the limits of a literal,
    presk_syntax.build: `1e999999999999` made GMP abort), ZeroDivisionError for `1/0`."""
    m = _NUMBER.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"`{text}` is not a number")
    exponent = (m.group(4) or "0").lstrip("+-").lstrip("0") or "0"
    if len(m.group(0)) > 2 * MAX_DIGITS or len(exponent) > 5 or int(exponent) > MAX_EXPONENT:
        raise ValueError(f"`{text}` is too long to be read")
    return gmpy2.mpq(m.group(0).removeprefix("+"))


def _parse_override(name: str, text: str) -> gmpy2.mpq:
    try:
        return read_number(text)
    except ZeroDivisionError:  # `--const D=1/0`
        raise DiagnosticError(
            error("E1003", f"--const {name}={text}: division by zero in a constant")
        ) from None
    except ValueError as e:
        raise DiagnosticError(error("E1006", f"--const {name}={text}: {e}")) from None
