"""The printing of values, as `presk run` prints them (DESIGN §4, the tutorial's steps 1–6).

A real prints at `digits` significant digits (default 12), correctly rounded from its exact
binary value, ties to even, then in its shortest form:

- trailing zeros are dropped (-2.51907504100 prints `-2.519075041`), and a point with
  nothing after it: `3`, not `3.`;
- with a decimal exponent k (10^k ≤ |x| < 10^(k+1), after rounding) from −5 to digits − 1,
  in fixed notation: `0.0351536766703`, `0.00001`, `123456789012`;
- otherwise in scientific notation as the tutorial's logs print it (Rust's `{:e}`): one
  digit before the point, `e`, the exponent without `+` or leading zeros: `1.5e-7`,
  `1e12`, `-2.5e300`;
- zero is `0` and negative zero `-0`: the sign of zero is part of the value (a sum keeps
  it, DESIGN §4) and the reference interpreter shows what it computed; NaN is `NaN`, the
  infinities `inf` and `-inf`.

Indices print as integers, truth values as `true`/`false`. A tensor prints as its axes
then its elements, nested lists in row-major order: `[batch: 4, 2] [[a, b], …]`; a scalar
as the number alone. A parameter tree prints one leaf a line, with dotted paths.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

import gmpy2
import numpy as np

Axes = Sequence[tuple[str | None, int]]
Path = str | Sequence[str]
_MPFR, _MPQ, _MPZ = type(gmpy2.mpfr(0)), type(gmpy2.mpq(0)), type(gmpy2.mpz(0))
_LOG10_2 = math.log10(2)


def _decimal(p: int, q: int, digits: int) -> tuple[str, int]:
    """The digits (trailing zeros dropped) and the exponent k of p/q > 0 rounded to `digits`
    significant digits, ties to even: p/q ≈ 0.d1d2… × 10^(k+1)."""
    k = math.floor((p.bit_length() - q.bit_length()) * _LOG10_2)  # within 1 of the answer
    while _below_pow10(p, q, k):
        k -= 1
    while not _below_pow10(p, q, k + 1):
        k += 1
    shift = digits - 1 - k  # p/q · 10^shift has `digits` digits before the point
    num, den = (p * 10**shift, q) if shift >= 0 else (p, q * 10**-shift)
    n, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and n % 2 == 1):
        n += 1
    if n == 10**digits:  # 9.99…5 rounded up to 10.0…
        n, k = 10 ** (digits - 1), k + 1
    return str(n).rstrip("0"), k


# Beyond 2^±4096 a real is shown by MPFR's conversion (correctly rounded, ties to even, as
# `_decimal`), not as a ratio of integers of millions of digits.
_EXACT_BITS = 4096


def _mpfr_decimal(x: object, digits: int) -> str:
    mantissa, exponent = format(x, f".{digits - 1}e").split("e")
    sign = "-" if mantissa.startswith("-") else ""
    ds = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    return _layout(sign, ds, int(exponent), digits)


def _below_pow10(p: int, q: int, k: int) -> bool:
    """p/q < 10^k, exactly."""
    return p < q * 10**k if k >= 0 else p * 10**-k < q


def _layout(sign: str, ds: str, k: int, digits: int) -> str:
    if -5 <= k <= digits - 1:
        if k < 0:
            return f"{sign}0.{'0' * (-k - 1)}{ds}"
        whole, frac = ds[: k + 1].ljust(k + 1, "0"), ds[k + 1 :]
        return f"{sign}{whole}.{frac}" if frac else f"{sign}{whole}"
    mantissa = f"{ds[0]}.{ds[1:]}" if len(ds) > 1 else ds
    return f"{sign}{mantissa}e{k}"


def format_real(x: object, digits: int = 12) -> str:
    """A real (gmpy2.mpfr, float, mpq, Fraction) at `digits` significant digits, shortest
    form; the rounding is of the exact value, not of a conversion to float."""
    if digits < 1:
        raise ValueError(f"digits must be at least 1, not {digits}")
    if isinstance(x, _MPFR):
        if gmpy2.is_nan(x):
            return "NaN"
        if gmpy2.is_infinite(x):
            return "-inf" if x < 0 else "inf"
        if gmpy2.is_zero(x):
            return "-0" if gmpy2.is_signed(x) else "0"
        if abs(gmpy2.get_exp(x)) > _EXACT_BITS:  # x^1e8: MPFR's own rounding, as exact
            return _mpfr_decimal(x, digits)
        p, q = (int(v) for v in x.as_integer_ratio())
    elif isinstance(x, float | np.floating):
        x = float(x)
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "-inf" if x < 0 else "inf"
        if x == 0:
            return "-0" if math.copysign(1.0, x) < 0 else "0"
        p, q = x.as_integer_ratio()
    elif isinstance(x, Fraction | _MPQ):
        p, q = int(x.numerator), int(x.denominator)
        if p == 0:
            return "0"
    else:
        raise TypeError(f"not a real: {type(x).__name__}")
    ds, k = _decimal(abs(p), q, digits)
    return _layout("-" if p < 0 else "", ds, k, digits)


def format_number(x: object, digits: int = 12) -> str:
    """One element: a truth value as true/false, an index as an integer, a real as
    `format_real` prints it."""
    if isinstance(x, bool | np.bool_):
        return "true" if x else "false"
    if isinstance(x, int | np.integer | _MPZ):
        return str(int(x))
    return format_real(x, digits)


def format_axes(axes: Axes) -> str:
    """`[batch: 4, 2]`: each axis as `name: length`, or its length when it has no name."""
    return "[" + ", ".join(str(n) if name is None else f"{name}: {n}" for name, n in axes) + "]"


def _nested(items: Iterable[str], shape: tuple[int, ...]) -> str:
    it = iter(items)

    def level(depth: int) -> str:
        if depth == len(shape):
            return next(it)
        return "[" + ", ".join(level(depth + 1) for _ in range(shape[depth])) + "]"

    return level(0)


def format_tensor(values: object, axes: Axes, digits: int = 12) -> str:
    """A tensor as `presk run` prints it: its axes, then its elements in row-major order,
    `[batch: 4, 2] [[a, b], …]`; with no axes, the number alone. `values` is an array whose
    shape is the axes' lengths (mpfr objects, int64 indices or bool masks)."""
    values = np.asarray(values)
    shape = tuple(n for _, n in axes)
    if values.shape != shape:
        raise ValueError(f"values of shape {values.shape} for the axes {format_axes(axes)}")
    items = (format_number(v, digits) for v in values.reshape(-1))  # row-major
    if not shape:
        return next(items)
    return f"{format_axes(axes)} {_nested(items, shape)}"


def format_tree(
    leaves: Sequence[tuple[Path, object, Axes]], digits: int = 12, label: str = "params"
) -> str:
    """A parameter tree, one leaf a line in the order given, nested paths dotted:

        params = {
          w = [3, 2] [[…], …]
          norm.γ = [4] [1, 1, 1, 1]
        }

    `label` is what comes before ` = {` (`θ : params` for `--verbose`)."""
    if not leaves:
        return f"{label} = {{}}"
    lines = [f"{label} = {{"]
    for path, values, axes in leaves:
        name = path if isinstance(path, str) else ".".join(path)
        lines.append(f"  {name} = {format_tensor(values, axes, digits)}")
    lines.append("}")
    return "\n".join(lines)


def format_exp(x: float, digits: int) -> str:
    """x in the logs' scientific form, Rust's `{:.N e}`: `1.000e-2`, `2.0695e0`, `0.000e0`;
    `NaN`, `inf` and `-inf` as the interpreter shows them."""
    if not math.isfinite(x):
        return "NaN" if math.isnan(x) else "-inf" if x < 0 else "inf"
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"
