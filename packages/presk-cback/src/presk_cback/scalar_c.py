"""The C of each scalar operation of PSK-Kernel (presk_kernel.ir.SCALAR_TABLE): one rule an
operation in `C_RULES`, as the kernel interpreter has one in `OP_RULES`; a test asserts both
cover the table. Numpy's type promotion is written as explicit casts (`promote`), so the C
computes what the kernel interpreter computes, operation for operation."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from presk_kernel import libm

if TYPE_CHECKING:
    from presk_cback.emit import KernelC

SUFFIX = {"f64": "", "f32": "f"}
COMPARE = {"<", "<=", ">", ">=", "==", "!="}


def promote(a: str, b: str) -> str:
    """numpy's result type of two operands (as the kernel interpreter computes)."""
    if a == b:
        return a
    order = ["bool", "i64", "f32", "f64"]
    hi = max(a, b, key=order.index)
    if hi == "f32" and "i64" in (a, b):
        return "f64"
    return hi


# A rule takes the kernel's writer (its compute type, `cast`), the operation's name, the
# operands as (C, type) and the attr. A test asserts C_RULES covers presk_kernel.ir's
# SCALAR_TABLE, as the kernel interpreter's OP_RULES do.

ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
MINMAX = {"f64": "", "f32": "f", "i64": "i"}


def _arith(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    t = promote(a[0][1], a[1][1])
    if op == "div" and t in ("i64", "bool"):
        t = "f64"  # numpy's true division
    if t == "bool":
        t = "i64"
    x, y = (c.cast(code, ty, t) for code, ty in a)
    return f"({x} {ARITH[op]} {y})", t


def _fma(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    ct = c.k.compute
    x, y, z = (c.cast(code, ty, ct) for code, ty in a)
    return f"fma{SUFFIX.get(ct, '')}({x}, {y}, {z})", ct


def _abs(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    fn = {"f64": "fabs", "f32": "fabsf", "i64": "llabs"}[a[0][1]]
    return f"{fn}({a[0][0]})", a[0][1]


def _minmax(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    t = promote(a[0][1], a[1][1])
    x, y = (c.cast(code, ty, t) for code, ty in a)
    return f"presk_{op}{MINMAX[t]}({x}, {y})", t


def _select(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    t = promote(a[1][1], a[2][1])
    x, y = (c.cast(code, ty, t) for code, ty in a[1:])
    if "presk_checked" in x + y:  # a gather's check only where it is taken
        return f"({a[0][0]} ? {x} : {y})", t
    # both sides computed (a conditional load would not vectorize): no side effect is lost,
    # as a side has none but a gather's check
    return f"presk_select_{t}({a[0][0]}, {x}, {y})", t


def _compare(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    t = promote(a[0][1], a[1][1])
    x, y = (c.cast(code, ty, t) for code, ty in a)
    assert attr in COMPARE
    return f"({x} {attr} {y})", "bool"


def _same(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    t = promote(a[0][1], a[1][1])
    x, y = (c.cast(code, ty, t) for code, ty in a)
    return f"(({x} != {x} && {y} != {y}) || ({x} == {y} && !signbit({x}) == !signbit({y})))", "bool"


def _dequant(a: list, dtype: str) -> tuple[str, str]:
    """q·s as the kernel interpreter's `dequant`: f64 exact, f32 rounded once, bf16 twice."""
    (q, _), (s, _) = a
    if dtype == "f64":
        return f"((double)({q}) * (double)({s}))", "f64"
    p = f"((float)({q}) * (float)({s}))"
    return (f"presk_bf16_round({p})" if dtype == "bf16" else p), "f32"


def _real_type(t: str) -> str:
    return t if t in SUFFIX else "f64"


def _sqrt(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    t = _real_type(a[0][1])
    return f"sqrt{SUFFIX[t]}({c.cast(a[0][0], a[0][1], t)})", t


def _pow(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    t = _real_type(a[0][1])
    code = f"presk_powi{SUFFIX[t]}({c.cast(a[0][0], a[0][1], t)}, {int(attr)})"
    out = promote(t, c.k.compute)
    return c.cast(code, t, out), out


def _powf(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    t = _real_type(promote(a[0][1], a[1][1]))
    x, y = (c.cast(code, ty, t) for code, ty in a)
    return c.cast(f"pow{SUFFIX[t]}({x}, {y})", t, c.k.compute), c.k.compute


def _libm(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    ct = c.k.compute
    return f"presk_{op}{SUFFIX.get(ct, '')}({c.cast(a[0][0], a[0][1], ct)})", ct


def _draw(c: KernelC, op: str, a: list, attr) -> tuple[str, str]:
    """The counter-based draws (docs/randomness.md): the prelude's presk_key_word,
    presk_uniform (a double, then the compute type) and presk_bernoulli (p as a double)."""
    args = [c.cast(code, ty, "i64") for code, ty in a[:3]]
    if op == "key_word":
        return f"presk_key_word({', '.join(args)}, {c.cast(a[3][0], a[3][1], 'i64')})", "i64"
    if op == "bernoulli":
        p = c.cast(a[3][0], a[3][1], "f64")
        return f"presk_bernoulli({', '.join(args)}, {p})", "bool"
    return c.cast(f"presk_{op}({', '.join(args)})", "f64", c.k.compute), c.k.compute


def _c_number(text: str) -> str:
    """A literal's decimal text as a C string (presk_normal_std_at reads it with MPFR)."""
    if not re.fullmatch(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?", text):
        raise ValueError(f"`normal_std`'s std is a decimal literal, not {text!r}")
    return f'"{text}"'


def _init_draw(c: KernelC, op: str, a: list, attr: str) -> tuple[str, str]:
    """An initializer's value c (presk_core.normal_c's entry wrapper: MPFR, the interpreter's
    bits), a double, then the compute type."""
    args = [c.cast(code, ty, "i64") for code, ty in a[:3]]
    return c.cast(f"presk_{op}({', '.join(args)}, {attr})", "f64", c.k.compute), c.k.compute


C_RULES = {
    **dict.fromkeys(ARITH, _arith),  # (x op y) in the promoted type
    "fma": _fma,  # fma(x, y, z) in the compute type, rounded once
    "neg": lambda c, op, a, attr: (f"(-{a[0][0]})", a[0][1]),
    "abs": _abs,
    "max": _minmax,  # IEEE maximum: presk_max
    "min": _minmax,
    "select": _select,
    "compare": _compare,
    "same": _same,
    "and": lambda c, op, a, attr: (f"({a[0][0]} && {a[1][0]})", "bool"),
    "or": lambda c, op, a, attr: (f"({a[0][0]} || {a[1][0]})", "bool"),
    "not": lambda c, op, a, attr: (f"(!{a[0][0]})", "bool"),
    "isnan": lambda c, op, a, attr: (f"({a[0][0]} != {a[0][0]})", "bool"),
    "real": lambda c, op, a, attr: (c.cast(a[0][0], a[0][1], c.k.compute), c.k.compute),
    "sqrt": _sqrt,  # IEEE's
    "pow": _pow,  # presk_powi: binary powering, each product rounded
    "powf": _powf,  # the C library's pow
    "bf16": lambda c, op, a, attr: (f"presk_bf16_round({c.cast(a[0][0], a[0][1], 'f32')})", "f32"),
    "dequant": lambda c, op, a, attr: _dequant(a, attr),
    **dict.fromkeys(libm.FUNCTIONS, _libm),  # presk libm: presk_exp, presk_expf, …
    **dict.fromkeys(("key_word", "uniform", "bernoulli"), _draw),  # Threefry-2x32
    "normal": lambda c, op, a, attr: _draw(c, "normal_at", a, attr),  # MPFR: normal_c
    "xavier": lambda c, op, a, attr: _init_draw(c, "xavier_at", a, str(int(attr))),
    "normal_std": lambda c, op, a, attr: _init_draw(c, "normal_std_at", a, _c_number(attr)),
}
