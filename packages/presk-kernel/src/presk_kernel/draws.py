"""The loop nests of the random operations (`DRAWS`): keys and draws as kernels, with the
counter-based bits of presk_core.random (docs/randomness.md, DESIGN §5).

A key is a host buffer `i64[2]` holding its two uint32 words (k0, k1): an argument of the
entry (a run's key, a training step's `fold_in(key, t)`) or a kernel's output. Every draw is
a function of the key's words and the element's row-major position `c` (the scalar
operations `key_word`, `uniform`, `bernoulli` of presk_kernel.ir), so a draw's element is
the interpreter's whatever the layout, the lanes or the threads:

- `split_key(k)`: keys 0 and 1 of `split(k, 2)`, word w of key i `key_word(k, i, w)`;
- `fold_key(k, name)`: `fold_in` of each word of the name (`fold_in(k, d)` is draw d's words);
- `uniform(k, shape)`: element c `uniform(k, c)`, exact in f64 (rounded once to f32);
- `normal(k, shape)`: element c `normal(k, c)`, the double of the 256-bit Box–Muller value
  (natively presk_core.normal_c's C, linked with MPFR);
- `bernoulli(k, p, shape)`: 1 where `uniform(k, c) < p`, p read as a double: exactly the
  interpreter's `k < ⌈p·2^53⌉` for a p that is a double;
- `init(k)` with `zeros` or `ones`: the fill; with `xavier_uniform` or `normal(std = S)`:
  element c `xavier(k, c)` or `normal_std(k, c)`, the interpreter's double (natively
  presk_core.normal_c's C, linked with MPFR).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from decimal import Decimal

from presk_core.random import fans, name_words, normal_init

from presk_kernel.ir import Affine, Axis, Const, Index, Let, Load, Reduce, Store, Var
from presk_kernel.lower import InstrLowering, LowerError, Tensor
from presk_kernel.nests import at, nest, op

KEY_AXES = (Axis(None, 2),)
"""A key's host buffer: its two uint32 words, as i64."""


def _key(step: InstrLowering, k, i: int = 0) -> tuple:
    """The words of the key operand i, as loads of kernel k."""
    t = step.tensor(i)
    if t.axes != KEY_AXES or t.dtype != "i64":
        raise LowerError(f"`{step.ins.op}`: operand {i + 1} is not a key buffer")
    b = k.input(t)
    return Load(b, (Affine.constant(0),)), Load(b, (Affine.constant(1),))


def _i64(v: int) -> Const:
    return Const(v, "i64")


def counter(vars_: list[str], axes) -> object:
    """The row-major position of the element at `vars_` as an integer expression."""
    expr, stride = None, 1
    for v, a in reversed(list(zip(vars_, axes, strict=True))):
        term = Index(v) if stride == 1 else op("mul", Index(v), _i64(stride))
        expr = term if expr is None else op("add", term, expr)
        stride *= a.length
    return _i64(0) if expr is None else expr


def _words(step: InstrLowering, name: str, make: Callable) -> Tensor:
    """A kernel writing a key: `make(k, k0, k1)` gives the statements and the two words."""
    k = step.nest(name)
    k0, k1 = _key(step, k)
    out = k.output(KEY_AXES, "i64")
    body, w0, w1 = make(k, k0, k1)
    stores = [Store(out, (Affine.constant(0),), w0), Store(out, (Affine.constant(1),), w1)]
    return k.finish([*body, *stores])


def _split_key(step: InstrLowering) -> tuple[Tensor, Tensor]:
    def key(i: int) -> Tensor:
        def make(k, k0, k1):
            return [], *(op("key_word", k0, k1, _i64(i), _i64(w)) for w in (0, 1))

        return _words(step, f"split_key {i}", make)

    return key(0), key(1)


def _fold_key(step: InstrLowering) -> Tensor:
    words = name_words(step.ins.attr("name"))

    def make(k, k0, k1):
        body = []
        for d in words:
            a, b = k.temp(), k.temp()
            body += [
                Let(a, op("key_word", k0, k1, _i64(d), _i64(0))),
                Let(b, op("key_word", k0, k1, _i64(d), _i64(1))),
            ]
            k0, k1 = Var(a), Var(b)
        return body, k0, k1

    return _words(step, "fold_key", make)


def _draw(step: InstrLowering) -> Tensor:
    k = step.nest()
    k0, k1 = _key(step, k)
    if step.ins.op == "bernoulli":
        step.inputs(k, [1])
    axes = step.out_axes()
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(axes))
    c = counter(v, axes)
    if step.ins.op in ("uniform", "normal"):
        value = op(step.ins.op, k0, k1, c)
    else:
        p = step.operand(k, 1, v, axes)
        value = op("real", op("bernoulli", k0, k1, c, p))
    return k.finish(nest(v, axes, [Store(out, at(v), value)]))


def _sample(step: InstrLowering) -> Tensor:
    """`sample(key, logits)`: per row of the leading axes (position c), the least j whose
    cumulative probability exceeds `uniform(k, c)`, as presk_core.random.sample computes it
    (m = max, e_j = exp(l_j − m), s their left fold, p_j = e_j / s, c_j = p_0 + … + p_j left to
    right), in the kernel's compute type instead of MPFR at --bits; the last index of
    positive probability where rounding leaves c_{V−1} ≤ u. c_j is a fold of its own (its
    terms past j are zeros, which add nothing), so the count of j with c_j ≤ u is the
    sequential scan's answer."""
    x = step.tensor(1)
    k = step.nest()
    k0, k1 = _key(step, k)
    xi = k.input(x)
    axes = step.out_axes()
    out = k.output(axes, "i64")
    v = k.vars(len(axes))
    a = x.axes[-1]
    n = a.length
    j, i = k.var(), k.var()
    m, total, c, count, last = k.temp(), k.temp(), k.temp(), k.temp(), k.temp()

    def logit(w: str):
        return Load(xi, at([*v, w]))

    def e(w: str):
        return op("exp", op("sub", logit(w), Var(m)))

    def p(w: str):
        return op("div", e(w), Var(total))

    zero = k.const(0)
    stmts = [
        Reduce(m, "max", ((j, a.name, n),), (), (logit(j),), k.compute),
        Reduce(total, "add", ((j, a.name, n),), (), (e(j),), k.compute),
    ]
    upto = op("select", op("compare", Index(i), Index(j), attr="<="), p(i), zero)
    prefix = Reduce(c, "add", ((i, a.name, n),), (), (upto,), k.compute)
    u = op("uniform", k0, k1, counter(v, axes))
    below = op("select", op("compare", Var(c), u, attr="<="), _i64(1), _i64(0))
    stmts.append(Reduce(count, "add", ((j, a.name, n),), (prefix,), (below,), "i64"))
    positive = op("select", op("compare", p(j), zero, attr=">"), Index(j), _i64(-1))
    stmts.append(Reduce(last, "max", ((j, a.name, n),), (), (positive,), "i64"))
    fell = op("compare", Var(count), _i64(n), attr="<")
    value = op("select", fell, Var(count), Var(last))
    return k.finish(nest(v, axes, [*stmts, Store(out, at(v), value)]))


DEFAULT_STD = inspect.signature(normal_init).parameters["std"].default
STD_TEXT = re.compile(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?")


def _init(step: InstrLowering) -> Tensor:
    """A parameter's initial value: zeros and ones a fill; `xavier_uniform` and `normal(std =
    S)` element c the interpreter's value c (presk_core.random.init_param: the fans of the
    whole shape, S's decimal text), through the scalar operations `xavier` and `normal_std`."""
    from presk_kernel.rules import _fill

    init = step.ins.attr("init")
    axes = step.out_axes()
    if init in ("zeros", "ones"):
        return _fill(step, axes, step.out_dtype(), 0 if init == "zeros" else 1)
    extra = {k: v for k, v in step.ins.attrs if k != "init"}
    if init == "xavier_uniform" and not extra:
        fan_in, fan_out = fans([a.length for a in axes])
        attr = fan_in + fan_out
    elif init == "normal" and set(extra) <= {"std"}:
        # without `std =`, random.normal_init's default: the double 0.02, its exact digits
        attr = str(extra["std"]) if "std" in extra else format(Decimal(DEFAULT_STD), "f")
        if not STD_TEXT.fullmatch(attr):
            raise LowerError(f"the initializer `normal`'s std `{attr}` is not a decimal literal")
    else:
        raise LowerError(f"the initializer `{init}` with {extra or 'no arguments'} has no kernel")
    k = step.nest()
    k0, k1 = _key(step, k)
    out = k.output(axes, step.out_dtype())
    v = k.vars(len(axes))
    name = "xavier" if init == "xavier_uniform" else "normal_std"
    value = op(name, k0, k1, counter(v, axes), attr=attr)
    return k.finish(nest(v, axes, [Store(out, at(v), value)]))


DRAWS: dict[str, Callable[[InstrLowering], object]] = {
    "split_key": _split_key,
    "fold_key": _fold_key,
    "uniform": _draw,
    "bernoulli": _draw,
    "normal": _draw,
    "sample": _sample,
    "init": _init,
}
"""The loop nest of every random operation the kernels draw."""
