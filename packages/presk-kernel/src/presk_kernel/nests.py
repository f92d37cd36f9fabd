"""The loop nest of each tensor operation: the table `NESTS`, keyed by operation.

Each rule gets a `InstrLowering` (presk_kernel.lower): the instruction, its operands as host values
(a `Tensor` in a host buffer, or a `Known` number) and a way to build kernels, and returns
the result's host value after adding its launches. The arithmetic follows the reference
interpreter's (presk_core.mpfr's docstring) operation for operation, in the realization's
type: the same formulas, the same orders of summation, each operation rounded once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from presk_kernel.ir import Affine, Const, Expr, Index, Let, Loop, Op, Reduce, Store, Var

E = Expr


def op(name: str, *args: E, attr=None) -> Op:
    return Op(name, tuple(args), attr)


# ---- scalar formulas (presk_core.mpfr) ----------------------------------------------------


def _sigmoid(c, x):
    return op("div", c(1), op("add", c(1), op("exp", op("neg", x))))


def _minus(x):
    """−x, but a NaN x as it is: silu's x meets exp(−x)'s NaN in its quotient (issue 26)."""
    return op("select", op("isnan", x), x, op("neg", x))


def _silu(c, x):
    return op("div", x, op("add", c(1), op("exp", _minus(x))))


# gelu and gelu_grad negate by a subtraction from zero, 0 − t = −t for every t but NaN
# (and ±0, where erfc and exp give 1 for either): a NaN t keeps its sign through it (`neg`
# flips it), so the NaNs that meet at x · erfc(…) are one NaN, whichever operand a C
# compiler's product propagates (issue 26; docs/native.md "NaN's bits"). The operations
# are as many as with `neg` (the spec's work of gelu, L759).
def _negated(c, t):
    return op("sub", c(0), t)


def _gelu(c, x):
    # x·Φ(x) = ∘(x · erfc(−x/√2)) / 2
    return op("div", op("mul", x, op("erfc", _negated(c, op("mul", x, c("sqrt1/2"))))), c(2))


def _relu(c, x):
    # x where x > 0 or NaN, +0 elsewhere
    keep = op("or", op("compare", x, c(0), attr=">"), op("isnan", x))
    return op("select", keep, x, c(0))


def _pow(c, x, k: int):
    return op("pow", x, attr=k)


def _gelu_grad(c, ct, x):
    phi = op("mul", op("erfc", _negated(c, op("mul", x, c("sqrt1/2")))), c("1/2"))
    square = op("mul", op("mul", x, x), c("1/2"))
    density = op("div", op("exp", _negated(c, square)), c("sqrt2pi"))
    return op("mul", ct, op("add", phi, op("mul", x, density)))


def _silu_grad(c, ct, x):
    s = op("div", c(1), op("add", c(1), op("exp", _minus(x))))
    return op("mul", ct, op("mul", s, op("add", c(1), op("mul", x, op("sub", c(1), s)))))


def _relu_grad(c, ct, x):
    return op("select", op("compare", x, c(0), attr=">"), ct, c(0))


def _abs_grad(c, ct, x):
    sign = op(
        "select",
        op("compare", x, c(0), attr=">"),
        c(1),
        op("select", op("compare", x, c(0), attr="<"), c(-1), c(0)),
    )
    return op("mul", ct, sign)


ELEMENTWISE: dict[str, Callable] = {
    "add": lambda c, a, b: op("add", a, b),
    "sub": lambda c, a, b: op("sub", a, b),
    "mul": lambda c, a, b: op("mul", a, b),
    "div": lambda c, a, b: op("div", a, b),
    "maximum": lambda c, a, b: op("max", a, b),
    "minimum": lambda c, a, b: op("min", a, b),
    "neg": lambda c, x: op("neg", x),
    "sqrt": lambda c, x: op("sqrt", x),
    "exp": lambda c, x: op("exp", x),
    "log": lambda c, x: op("log", x),
    "tanh": lambda c, x: op("tanh", x),
    "sin": lambda c, x: op("sin", x),
    "cos": lambda c, x: op("cos", x),
    "abs": lambda c, x: op("abs", x),
    "sigmoid": _sigmoid,
    "silu": _silu,
    "gelu": _gelu,
    "relu": _relu,
    "select": lambda c, m, a, b: op("select", m, a, b),
    "real": lambda c, x: op("real", x),
    "accum": lambda c, a, b: op("add", a, b),
    "gelu_grad": _gelu_grad,
    "silu_grad": _silu_grad,
    "relu_grad": _relu_grad,
    "abs_grad": _abs_grad,
}
"""The scalar formula of each elementwise operation, `c` making a constant."""


# ---- nests -------------------------------------------------------------------------------


def nest(vars_: list[str], axes, body: list) -> list:
    """Loops over `axes`, outermost first, around `body`."""
    out = list(body)
    for v, a in reversed(list(zip(vars_, axes, strict=True))):
        out = [Loop(v, a.name, a.length, tuple(out))]
    return out


def at(vars_: list[str | Affine]) -> tuple[Affine, ...]:
    return tuple(Affine.var(v) if isinstance(v, str) else v for v in vars_)


def flat(vars_: list[str], shape: tuple[int, ...]) -> Affine:
    """The row-major position of an element: Σ stride·var."""
    terms, stride = [], 1
    for v, n in reversed(list(zip(vars_, shape, strict=True))):
        terms.append((v, stride))
        stride *= n
    return Affine(tuple(reversed(terms)))


def reduce_rows(step, x, axes_red: list[int], op_name: str, finish: Callable[[E], E] | None = None):
    """A reduction of `x` over its axes `axes_red` (a fold in their row-major order)."""
    k = step.nest()
    xi = k.input(x)
    kept = [a for i, a in enumerate(x.axes) if i not in axes_red]
    out = k.output(step.out_axes(), step.out_dtype())
    ov = k.vars(len(kept))
    rv = k.vars(len(axes_red))
    idx, ki, ri = [], iter(ov), iter(rv)
    for i in range(len(x.axes)):
        idx.append(next(ri) if i in axes_red else next(ki))
    acc = k.temp()
    red = Reduce(
        acc,
        op_name,
        tuple((v, x.axes[i].name, x.axes[i].length) for v, i in zip(rv, axes_red, strict=True)),
        (),
        (k.load(xi, at(idx)),),
        step.compute,
    )
    value = Var(acc) if finish is None else finish(Var(acc))
    return k.finish(nest(ov, kept, [red, Store(out, at(ov), value)]))


def count(x, axes_red: list[int]) -> int:
    return math.prod(x.axes[i].length for i in axes_red)


def first_extremum(k, xi: int, x, prefix: list, axis: int, kind: str) -> tuple[list, E]:
    """Statements giving the first index along `axis` where x is its max (or min) bit for
    bit, at the other indices `prefix` (one entry None, the reduced axis)."""
    m, j, r = k.temp(), k.var(), k.temp()
    n = x.axes[axis].length
    load = k.load(xi, at([j if i == axis else p for i, p in enumerate(prefix)]))
    ax = x.axes[axis].name
    first = Reduce(m, kind, ((j, ax, n),), (), (load,), k.compute)
    hit = op("select", op("same", load, Var(m)), Index(j), Const(n, "i64"))
    pick = Reduce(r, "min", ((j, ax, n),), (), (hit,), "i64")
    return [first, pick], Var(r)


def softmax_body(k, xi, x, mask, vars_: list[str], axis: int, log: bool) -> list:
    """The three passes of a (masked) softmax over one row (presk_core.mpfr's order)."""
    j = k.var()
    row = [j if i == axis else v for i, v in enumerate(vars_)]
    load = k.load(xi, at(row))
    allowed = mask(row) if mask is not None else None
    c = k.const
    m, s = k.temp(), k.temp()
    red_m = Reduce(
        m,
        "max",
        ((j, x.axes[axis].name, x.axes[axis].length),),
        (),
        (load if allowed is None else op("select", allowed, load, c("-inf")),),
        k.compute,
    )
    d = op("sub", load, Var(m))
    e = op("exp", d)
    term = e if allowed is None else op("select", allowed, e, c(0))
    red_s = Reduce(s, "add", ((j, x.axes[axis].name, x.axes[axis].length),), (), (term,), k.compute)
    if log:
        y = op("sub", d, op("log", Var(s)))
        y = y if allowed is None else op("select", allowed, y, c("-inf"))
    else:
        y = op("div", e, Var(s))
        y = y if allowed is None else op("select", allowed, y, c(0))
    return [red_m, red_s], y, j


__all__ = ["ELEMENTWISE", "Let", "first_extremum", "flat", "nest", "reduce_rows", "softmax_body"]
