"""What a literal of the syntax tree may hold: the grammar's forms and the sizes a reader
can convert (E0014), shared by the parser's tree builder, the document decoder (a tree read
from a document must be one the parser could have built) and the constants' reader.

A number literal's size: an integer's digits or a decimal's mantissa at most Python's limit
for converting text to an integer (4300 digits), an exponent at most 99999 (10^99999 is
exact in 40 kB; `1e999999999999` made GMP abort). Far beyond every machine type: within
these, presk_types.numbers says which type holds a number (E1013).
"""

from __future__ import annotations

import re
import unicodedata

MAX_DIGITS = 4300
MAX_EXPONENT = 99999

FLOAT = re.compile(r"[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")  # grammar.js


def float_too_long(text: str) -> str | None:
    """`digits` or `exponent` when the decimal `text` is too long to be read, else None."""
    mantissa, _, exponent = text.lower().partition("e")
    if len(mantissa) > MAX_DIGITS:
        return "digits"
    digits = exponent.lstrip("+-").lstrip("0")
    if len(digits) > len(str(MAX_EXPONENT)) or int(digits or "0") > MAX_EXPONENT:
        return "exponent"
    return None


def float_problem(text: str) -> str | None:
    """Why `text` is not a decimal literal the parser could have read, or None."""
    if not FLOAT.fullmatch(text):
        return f"`{text[:40]}` is not a decimal literal"
    if float_too_long(text):
        return f"the decimal `{text[:20]}…` is too long to be read"
    return None


def name_problem(parts: tuple[str, ...]) -> str | None:
    """Why `parts` is not a (qualified) name the parser could have read, or None."""
    if not parts:
        return "a name of no part"
    for p in parts:
        if not isinstance(p, str) or not is_identifier(p):
            return f"`{str(p)[:40]}` is not an identifier"
    return None


def is_identifier(text: str) -> bool:
    """grammar.js's identifier: `[\\p{L}_][\\p{L}\\p{N}_'\\p{Mn}]*`."""
    cats = [unicodedata.category(c) for c in text]
    return (
        bool(text)
        and (cats[0][0] == "L" or text[0] == "_")
        and all(k[0] in "LN" or k == "Mn" or c in "_'" for c, k in zip(text, cats, strict=True))
    )
