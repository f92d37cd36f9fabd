"""The reference interpreter: PSK-Core evaluated exactly, in MPFR at a given precision.

An interpreter in the style of JAX's `eval_jaxpr`: an environment from values to data,
a loop over a function's instructions, and one rule per operation in `eval_rules`.
Data: a real tensor is a numpy array of `gmpy2.mpfr` (presk_core.mpfr), indices int64,
masks bool; its leading axes are the function's open prefix, if it has one. A parameter
tree is a dict from dotted paths to tensors; a key a `random.Key`; a tuple a tuple; `f64`
a `gmpy2.mpfr`, `nat` an int.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import gmpy2
import numpy as np
from presk_types.presburger import Lin
from presk_types.types import Bool, Idx, Real, Shape, Type, shape_of

from presk_core import adjoints as A
from presk_core import mpfr as M
from presk_core import random as R
from presk_core.ir import Function, Instr, Lit, Program, Value


class RunError(Exception):
    """An error of the program at run time (E7…): an index out of range, a missing rule."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Frame:
    fn: Function
    dims: dict[str, int]
    env: dict[int, object] = field(default_factory=dict)

    def read(self, a: Value | Lit) -> object:
        if isinstance(a, Lit):
            return literal(a, self.dims)
        return self.env[a.id]

    def length(self, e: Lin) -> int:
        return e.value(self.dims)


def literal(a: Lit, dims: dict[str, int]) -> object:
    if a.text in dims:
        return dims[a.text]
    if a.text == "π":
        return gmpy2.const_pi()
    return gmpy2.mpfr(gmpy2.mpq(a.text)) if "/" in a.text else gmpy2.mpfr(a.text)


@dataclass
class Interpreter:
    program: Program
    bits: int = 256

    def call(self, name: str, args: list, dims: dict[str, int]) -> object:
        fn = self.program.function(name)
        frame = Frame(fn, dims)
        for p, v in zip(fn.params, args, strict=True):
            frame.env[p.id] = v
        for ins in fn.body:
            rule = eval_rules.get(ins.op)
            if rule is None:
                raise RunError("E7002", f"the interpreter has no rule for `{ins.op}`")
            frame.env[ins.out.id] = rule(self, frame, ins)
        return frame.read(fn.ret)

    def run(self, name: str, args: list, dims: dict[str, int]) -> object:
        with M.precision(self.bits):
            try:
                return self.call(name, args, dims)
            except IndexError as e:  # an index out of its range: a fault of the data
                raise RunError("E7003", str(e)) from None


# ---- alignment ---------------------------------------------------------------------------


def _explicit(t: Type) -> Shape:
    s = shape_of(t)
    return s if s is not None else Shape(False, ())


def _prefix_of(values: list[tuple[np.ndarray, Type]]) -> int:
    return max((np.ndim(v) - _explicit(t).rank for v, t in values), default=0)


def broadcast_operands(frame: Frame, ins: Instr) -> list[np.ndarray]:
    """The operands of an elementwise instruction, each laid out on the result's axes."""
    values = [(frame.read(a), a.type) for a in ins.args]
    prefix = _prefix_of(values)
    maps = ins.attr("_align")
    if maps is None:  # the builder gives every elementwise instruction its placement
        raise RunError("E7002", f"`{ins.op}` ({ins.site}) does not say where its operands go")
    out = []
    for i, (v, t) in enumerate(values):
        if not isinstance(v, np.ndarray):
            v = M.real(v) if not isinstance(v, np.ndarray) else v
        out.append(_place(v, t, ins.out.type, prefix, maps[i]))
    return out


def _targets(ndim: int, t: Type, result: Type, prefix: int, pos) -> list[int]:
    """Where each axis of an operand's data goes among the result's data axes: its prefix on
    the end of the result's prefix, its axes as the checker aligned them (`pos`, counted
    from the result's last axis), by trailing position or by name."""
    src, dst = _explicit(t), _explicit(result)
    own_prefix = ndim - src.rank
    if pos is None:  # the builder gives every placement (presk_core.build.placement)
        raise RunError("E7002", f"no placement of `{t}` among the axes of `{result}`")
    where = pos
    big = prefix + dst.rank
    return [prefix - own_prefix + i for i in range(own_prefix)] + [big + p for p in where]


def _place(v: np.ndarray, t: Type, result: Type, prefix: int, pos) -> np.ndarray:
    if v.ndim == 0:
        return v
    big = prefix + _explicit(result).rank
    targets = _targets(v.ndim, t, result, prefix, pos)
    order = np.argsort(targets, kind="stable")
    moved = np.transpose(v, order)
    shape = [1] * big
    for axis, target in enumerate(sorted(targets)):
        shape[target] = moved.shape[axis]
    return moved.reshape(shape)


def _axis(frame: Frame, a: Value, name: str) -> int:
    """The index in the data of the axis `name` of operand `a`."""
    s = _explicit(a.type)
    data = frame.read(a)
    return np.ndim(data) - s.rank + s.axis(name)


# ---- rules -------------------------------------------------------------------------------

Rule = Callable[[Interpreter, Frame, Instr], object]


def _elementwise(kernel: Callable) -> Rule:
    def rule(interp: Interpreter, frame: Frame, ins: Instr) -> object:
        return kernel(*broadcast_operands(frame, ins))

    return rule


def _unary(kernel: Callable) -> Rule:
    def rule(interp: Interpreter, frame: Frame, ins: Instr) -> object:
        return kernel(M.real(frame.read(ins.args[0])))

    return rule


def _reduce(kernel: Callable) -> Rule:
    def rule(interp: Interpreter, frame: Frame, ins: Instr) -> object:
        x = frame.read(ins.args[0])
        axes = ins.attr("axes", ())
        return kernel(x, _axis(frame, ins.args[0], axes[0]) if axes else None)

    return rule


def _pow(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    x, y = frame.read(ins.args[0]), ins.args[1]
    if isinstance(y, Lit):
        q = gmpy2.mpq(y.text)
        return M.pow(x, int(q) if q.denominator == 1 else M.real(gmpy2.mpfr(q)))
    return M.pow(x, frame.read(y))


def _softmax(kernel: Callable) -> Rule:
    def rule(interp: Interpreter, frame: Frame, ins: Instr) -> object:
        x = frame.read(ins.args[0])
        axis = _axis(frame, ins.args[0], ins.attr("axes")[0])
        mask = None
        if ins.attr("where"):
            m = ins.args[-1]
            prefix = np.ndim(x) - _explicit(ins.args[0].type).rank
            pos = ins.attr("_align")
            mask = _place(frame.read(m), m.type, ins.args[0].type, prefix, pos)
            mask = np.broadcast_to(mask, np.shape(x))
        return kernel(x, axis, mask)

    return rule


def _compare(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    a, b = broadcast_operands(frame, ins)
    return M.compare(ins.attr("op"), a, b)


def _select(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return M.select(*broadcast_operands(frame, ins))


def _real(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return M.real(frame.read(ins.args[0]))


def _causal_mask(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    ((_, length),) = ins.attr("shapes")
    n = frame.length(length)
    return np.tril(np.ones((n, n), dtype=bool))


def _dot(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return M.dot(frame.read(ins.args[0]), frame.read(ins.args[1]))


def _ein(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    out = ins.attr("axes")
    names = ins.attr("_names")
    datas = [frame.read(a) for a in ins.args]
    prefixes = [np.ndim(d) - len(n) for d, n in zip(datas, names, strict=True)]
    if len(datas) == 1:
        (x,), (nx,) = datas, names
        p = prefixes[0]
        keep = [p + nx.index(n) for n in out]
        summed = [p + i for i, n in enumerate(nx) if n not in out]
        moved = np.transpose(x, list(range(p)) + keep + summed)
        flat = moved.reshape(moved.shape[: p + len(keep)] + (-1,))
        return M.sum(flat, flat.ndim - 1) if summed else moved
    (a, b), (na, nb) = datas, names
    pa, pb = prefixes
    a, na = _sum_alone(a, na, pa, nb, out)
    b, nb = _sum_alone(b, nb, pb, na, out)
    batch = [n for n in out if n in na and n in nb]
    summed = [n for n in na if n in nb and n not in out]
    bat_a = list(range(pa)) + [pa + na.index(n) for n in batch]
    bat_b = list(range(pb)) + [pb + nb.index(n) for n in batch]
    if pa != pb:
        raise RunError("E7003", "`ein` operands with different prefixes")
    r = M.contract(
        a, b, [pa + na.index(n) for n in summed], [pb + nb.index(n) for n in summed], bat_a, bat_b
    )
    got = batch + [n for n in na if n not in nb] + [n for n in nb if n not in na]
    # batch first (after the prefix), then a's free axes, then b's: reorder as `out`
    order = list(range(pa)) + [pa + got.index(n) for n in out]
    return np.transpose(r, order)


def _sum_alone(x, names, p, other, out):
    """Sum first the axes of one operand that are neither in the other nor in the output."""
    names = list(names)
    for n in [n for n in names if n not in other and n not in out][::-1]:
        x = M.sum(x, p + names.index(n))
        names.remove(n)
    return x, tuple(names)


def _argmax(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    x = frame.read(ins.args[0])
    axes = ins.attr("axes", ())
    axis = _axis(frame, ins.args[0], axes[0]) if axes else np.ndim(x) - 1
    return M.argmax(x, axis)


def _one_hot(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    t = ins.args[0].type
    return M.one_hot(frame.read(ins.args[0]), frame.length(t.bound))


def _embed(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return M.embed(frame.read(ins.args[0]), frame.read(ins.args[1]))


def _take(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    x = frame.read(ins.args[0])
    return M.take(x, frame.read(ins.args[1]), _axis(frame, ins.args[0], ins.attr("axes")[0]))


def _merge(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    x = frame.read(ins.args[0])
    i = _axis(frame, ins.args[0], ins.attr("axes")[0])
    shape = x.shape[:i] + (x.shape[i] * x.shape[i + 1],) + x.shape[i + 2 :]
    return x.reshape(shape)


def _split(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    x = frame.read(ins.args[0])
    i = _axis(frame, ins.args[0], ins.attr("axes")[0])
    (_, la), (_, lb) = ins.attr("shapes")
    return x.reshape(x.shape[:i] + (frame.length(la), frame.length(lb)) + x.shape[i + 1 :])


def _sample(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return R.sample(frame.read(ins.args[0]), frame.read(ins.args[1]))


def _split_key(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return tuple(R.split(frame.read(ins.args[0]), 2))


# ---- structure ---------------------------------------------------------------------------


def _bind(frame: Frame, ins: Instr) -> dict[str, int]:
    return {d: frame.length(e) for d, e in ins.attr("dims", ())}


def _call(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return interp.call(ins.attr("fn"), [frame.read(a) for a in ins.args], _bind(frame, ins))


def _fold(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    tree, x, *rest = [frame.read(a) for a in ins.args]
    dims = _bind(frame, ins)
    for i in range(frame.length(ins.attr("count"))):
        block = {path: leaf[i] for path, leaf in tree.items()}
        x = interp.call(ins.attr("fn"), [block, x, *rest], dims)
    return x


def _slice(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return {path: leaf[ins.attr("index")] for path, leaf in frame.read(ins.args[0]).items()}


def _field(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    tree, path = frame.read(ins.args[0]), ins.attr("path")
    if path in tree:
        return tree[path]
    return {k[len(path) + 1 :]: v for k, v in tree.items() if k.startswith(path + ".")}


def _record(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    tree: dict[str, object] = {}
    for key, a in zip(ins.attr("keys"), ins.args, strict=True):
        v = frame.read(a)
        if isinstance(v, dict):
            tree.update({f"{key}.{k}": x for k, x in v.items()})
        else:
            tree[key] = v
    return tree


def _tuple(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return tuple(frame.read(a) for a in ins.args)


def _get(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return frame.read(ins.args[0])[ins.attr("index")]


def _fold_key(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    return R.fold_in_name(frame.read(ins.args[0]), ins.attr("name"))


def _init(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    shape = tuple(frame.length(a.length) for a in _explicit(ins.out.type).axes)
    attrs = {k: v for k, v in ins.attrs if k != "init"}
    doubles = R.init_param(ins.attr("init"), frame.read(ins.args[0]), shape, **attrs)
    return M.real(doubles)


def _fold_init(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    key = frame.read(ins.args[0])
    trees = [
        interp.call(ins.attr("fn"), [R.fold_in(key, i)], _bind(frame, ins))
        for i in range(frame.length(ins.attr("count")))
    ]
    return {path: np.stack([t[path] for t in trees]) for path in trees[0]} if trees else {}


def _grad(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    raise RunError(
        "E7002",
        "`grad` needs differentiation (presk-ad), which this version of presk does not have yet",
    )


# ---- what differentiation writes (presk_types.ops.ADJOINT_OPS; presk_core.adjoints) ---------


def _sum_to(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    """ct (of the result's type) back to the shape of operand x, as x was aligned to it."""
    ct_val, x_val = ins.args
    ct, x = frame.read(ct_val), frame.read(x_val)
    if not isinstance(x, np.ndarray) or np.ndim(x) == 0:
        return M.sum(ct) if np.ndim(ct) else ct
    prefix = np.ndim(ct) - _explicit(ct_val.type).rank
    targets = _targets(np.ndim(x), x_val.type, ct_val.type, prefix, ins.attr("_align"))
    return A.sum_to(ct, targets, np.shape(x))


def _expand(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    ct, x = frame.read(ins.args[0]), frame.read(ins.args[1])
    axes = ins.attr("axes", ())
    axis = _axis(frame, ins.args[1], axes[0]) if axes else None
    return A.expand(ct, x, axis, bool(ins.attr("mean")))


def _softmax_adj(kernel: Callable) -> Rule:
    def rule(interp: Interpreter, frame: Frame, ins: Instr) -> object:
        ct, y = frame.read(ins.args[0]), frame.read(ins.args[1])
        return kernel(ct, y, _axis(frame, ins.args[1], ins.attr("axes")[0]))

    return rule


def _pair(kernel: Callable) -> Rule:
    def rule(interp: Interpreter, frame: Frame, ins: Instr) -> object:
        return kernel(*[frame.read(a) for a in ins.args])

    return rule


def _take_grad(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    ct, x, ids = (frame.read(a) for a in ins.args)
    return A.take_grad(ct, x, ids, _axis(frame, ins.args[1], ins.attr("axes")[0]))


def _reduce_pick(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    ct, x = frame.read(ins.args[0]), frame.read(ins.args[1])
    axes = ins.attr("axes", ())
    axis = _axis(frame, ins.args[1], axes[0]) if axes else None
    return A.reduce_pick(ct, x, axis, ins.attr("kind"))


def _pick2(interp: Interpreter, frame: Frame, ins: Instr) -> object:
    ct, a, b = broadcast_operands(frame, ins)
    shape = np.broadcast_shapes(np.shape(ct), np.shape(a), np.shape(b))
    ct, a, b = (np.broadcast_to(v, shape) for v in (ct, a, b))
    return A.pick2(np.array(ct, dtype=object), a, b, ins.attr("which"), ins.attr("kind"))


eval_rules: dict[str, Rule] = {
    "add": _elementwise(M.add),
    "sub": _elementwise(M.sub),
    "mul": _elementwise(M.mul),
    "div": _elementwise(M.div),
    "maximum": _elementwise(M.maximum),
    "minimum": _elementwise(M.minimum),
    "pow": _pow,
    "neg": _unary(M.neg),
    "dot": _dot,
    "ein": _ein,
    "sqrt": _unary(M.sqrt),
    "exp": _unary(M.exp),
    "log": _unary(M.log),
    "tanh": _unary(M.tanh),
    "sigmoid": _unary(M.sigmoid),
    "gelu": _unary(M.gelu),
    "silu": _unary(M.silu),
    "sin": _unary(M.sin),
    "cos": _unary(M.cos),
    "relu": _unary(M.relu),
    "abs": _unary(M.abs),
    "sum": _reduce(M.sum),
    "mean": _reduce(M.mean),
    "max": _reduce(M.max),
    "min": _reduce(M.min),
    "softmax": _softmax(M.softmax),
    "log_softmax": _softmax(M.log_softmax),
    "causal_mask": _causal_mask,
    "compare": _compare,
    "select": _select,
    "real": _real,
    "argmax": _argmax,
    "one_hot": _one_hot,
    "embed": _embed,
    "take": _take,
    "merge": _merge,
    "split": _split,
    "sample": _sample,
    "split_key": _split_key,
    "grad": _grad,
    "value_grad": _grad,
    # structure
    "cast": lambda interp, frame, ins: frame.read(ins.args[0]),  # the same data, named axes
    "call": _call,
    "fold": _fold,
    "slice": _slice,
    "field": _field,
    "record": _record,
    "tuple": _tuple,
    "get": _get,
    "fold_key": _fold_key,
    "init": _init,
    "fold_init": _fold_init,
    # what differentiation writes (presk_types.ops.ADJOINT_OPS)
    "zeros_like": lambda interp, frame, ins: A.zeros_like(frame.read(ins.args[0])),
    "accum": _pair(A.accum),
    "sum_to": _sum_to,
    "expand": _expand,
    "put": lambda i, f, ins: A.put(f.read(ins.args[0]), ins.attr("path"), f.read(ins.args[1])),
    "put_slice": lambda i, f, ins: A.put_slice(
        f.read(ins.args[0]), ins.attr("index"), f.read(ins.args[1])
    ),
    "put_item": lambda i, f, ins: A.put_item(
        f.read(ins.args[0]), ins.attr("index"), f.read(ins.args[1])
    ),
    "dot_left": _pair(A.dot_left),
    "dot_right": _pair(A.dot_right),
    "gelu_grad": _pair(A.gelu_grad),
    "silu_grad": _pair(A.silu_grad),
    "relu_grad": _pair(A.relu_grad),
    "abs_grad": _pair(A.abs_grad),
    "softmax_grad": _softmax_adj(A.softmax_grad),
    "log_softmax_grad": _softmax_adj(A.log_softmax_grad),
    "embed_grad": _pair(A.embed_grad),
    "take_grad": _take_grad,
    "spread": lambda i, f, ins: A.spread(
        f.read(ins.args[0]), ins.attr("_names")[0], f.read(ins.args[1]), ins.attr("_names")[1]
    ),
    "reduce_pick": _reduce_pick,
    "pick2": _pick2,
    "reshape_like": lambda i, f, ins: f.read(ins.args[0]).reshape(np.shape(f.read(ins.args[1]))),
}
"""The evaluation of each operation of PSK-Core, keyed by the operation set
(`presk_types.ops.OPS`), which it covers exactly (tests/test_interp_ops.py)."""

__all__ = ["Bool", "Idx", "Interpreter", "Real", "RunError", "eval_rules"]
