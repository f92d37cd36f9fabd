"""Python expressions as the export writes them: text with its precedence, so that an
operand is parenthesized only where Python needs it."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from presk_types.presburger import Lin
from presk_types.types import Shape

# Python's precedences, loosest first (the ones the export writes).
LAMBDA, CMP, ADD, MUL, UNARY, POW, ATOM = 0, 50, 60, 70, 80, 90, 100


class ExportError(Exception):
    """A construct the PyTorch export cannot write (E8xxx)."""

    def __init__(self, message: str, code: str = "E8001", span=None) -> None:
        super().__init__(message)
        self.code = code
        self.span = span


@dataclass(frozen=True, slots=True)
class Expr:
    text: str
    prec: int = ATOM
    scalar: bool = False  # a Python number rather than a tensor

    def at(self, prec: int) -> str:
        """The text as an operand that needs at least `prec`."""
        return self.text if self.prec >= prec else f"({self.text})"

    def __str__(self) -> str:
        return self.text


def binary(a: Expr, op: str, b: Expr, prec: int, right_assoc: bool = False) -> Expr:
    left = a.at(prec + 1 if right_assoc else prec)
    right = b.at(prec if right_assoc else prec + 1)
    if op == "**" and _simple(left) and _simple(right):
        return Expr(f"{left}**{right}", prec, a.scalar and b.scalar)  # ruff's `x**2`
    return Expr(f"{left} {op} {right}", prec, a.scalar and b.scalar)


# A name, an attribute of one, or a number, with a sign: a power's operand that ruff writes
# without spaces around `**`.
SIMPLE = re.compile(r"[-+~]*(?:[^\W\d][\w]*(?:\.[^\W\d]\w*)*|\d[\d_]*(?:\.\d*)?(?:e[-+]?\d+)?)")


def _simple(text: str) -> bool:
    return SIMPLE.fullmatch(text) is not None


def call(fn: str, *args: object, scalar: bool = False) -> Expr:
    return Expr(f"{fn}({', '.join(str(a) for a in args)})", ATOM, scalar)


def method(x: Expr, name: str, *args: object) -> Expr:
    return Expr(f"{x.at(ATOM)}.{name}({', '.join(str(a) for a in args)})")


RESERVED = {"torch", "nn", "F", "math", "self"}


PRIME = "\u02b9"  # ʹ, MODIFIER LETTER PRIME: a letter to Python, and it reads as a prime


def identifier(name: str) -> str:
    """A Presk name as a Python identifier: a prime (`x'`, `x''`) becomes `ʹ` (`xʹ`, `xʹʹ`),
    a letter to Python; keywords and the export's own names get a `_`."""
    name = name.replace("'", PRIME)
    return f"{name}_" if keyword.iskeyword(name) or name in RESERVED else name


def lin(e: Lin) -> str:
    """A length (`2*T + 1`) as Python; its dimensions must be bound where it is used."""
    parts = []
    for name, c in e.coeffs:
        parts.append(name if c == 1 else f"{c} * {name}")
    if e.constant or not parts:
        parts.append(str(e.constant))
    return " + ".join(parts).replace("+ -", "- ")


def dims_of(e: Lin) -> list[str]:
    return [name for name, _ in e.coeffs]


def axis_index(shape: Shape, i: int) -> int:
    """The data index of explicit axis i: from the end when an open prefix precedes it."""
    return i - shape.rank if shape.prefix else i


def placed(x: Expr, shape: Shape, where: tuple[int, ...], result_rank: int) -> Expr:
    """An operand laid out on the result's axes for broadcasting: its explicit axes go to
    `where` (counted from the result's last axis), the result's axes it lacks become `None`
    (after its own prefix, which goes to the end of the result's), and leading ones are
    left to broadcasting."""
    if x.scalar or (not where and not shape.prefix):
        return x
    order = sorted(range(len(where)), key=lambda k: where[k])
    if order != list(range(len(where))):
        if shape.prefix:
            raise ExportError("an operand with an open prefix whose axes a broadcast reorders")
        x = method(x, "permute", *order)
    targets = sorted(where)
    first = -result_rank if shape.prefix else targets[0]
    index = [":" if p in targets else "None" for p in range(first, 0)]
    while index and index[0] == ":":
        index.pop(0)  # after `...`, a leading `:` says nothing
    if not index:
        return x
    return Expr(f"{x.at(ATOM)}[..., {', '.join(index)}]")
