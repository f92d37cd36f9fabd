"""Preparing one instruction for the interpreter (presk_core.interp): a rule per operation
turns an instruction, at its function's dimensions, into a step, a closure of the
environment (`env[out] = step(env)`), with what the instruction says worked out once:
its operands' readers and literals, the places of an elementwise operation's operands
among the result's axes, the axes its attributes name, the lengths its dimensions give.
The rank of an open prefix is known only at run time: placements are worked out once for
each (data rank, prefix) they meet. This module holds the primitives' rules; the interpreter
adds the structural ones and those of differentiation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from operator import itemgetter
from typing import TYPE_CHECKING

import gmpy2
import numpy as np
from presk_types.presburger import Lin
from presk_types.types import F64, Shape, Type, shape_of

from presk_core import mpfr as M
from presk_core import random as R
from presk_core.ir import Instr, Lit, Value

if TYPE_CHECKING:
    from presk_core.interp import Interpreter

Env = dict[int, object]
Thunk = Callable[[Env], object]  # an instruction prepared: its value from the environment


class RunError(Exception):
    """An error of the program at run time (E7…): an index out of range, a missing rule."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def literal(a: Lit, dims: dict[str, int]) -> object:
    if a.text in dims:
        return dims[a.text]
    if a.text == "π":
        return gmpy2.const_pi()
    if a.type == F64:  # a hyperparameter is a double (its default rounded once), at any --bits
        return gmpy2.mpfr(float(Fraction(a.text)))
    return gmpy2.mpfr(gmpy2.mpq(a.text)) if "/" in a.text else gmpy2.mpfr(a.text)


# ---- preparing an instruction ------------------------------------------------------------


def constant(value: object) -> Thunk:
    return lambda env: value


def explicit(t: Type) -> Shape:
    s = shape_of(t)
    return s if s is not None else Shape(False, ())


class Prep:
    """What a rule reads to prepare an instruction: its operands' readers, its lengths."""

    def __init__(self, interp: Interpreter, ins: Instr, dims: dict[str, int]) -> None:
        self.interp, self.ins, self.dims = interp, ins, dims
        self.args = [Prep.reader(a, dims) for a in ins.args]

    @staticmethod
    def reader(a: Value | Lit, dims: dict[str, int]) -> Thunk:
        return constant(literal(a, dims)) if isinstance(a, Lit) else itemgetter(a.id)

    def attr(self, name: str, default: object = None) -> object:
        return self.ins.attr(name, default)

    def length(self, e: Lin) -> int:
        return e.value(self.dims)

    def bound(self) -> dict[str, int]:
        """The callee's dimensions, as the instruction binds them."""
        return {d: self.length(e) for d, e in self.attr("dims", ())}

    def back(self, i: int, name: str) -> int:
        """How far from the data's last axis the axis `name` of operand i is."""
        s = explicit(self.ins.args[i].type)
        return s.rank - s.axis(name)

    def axis(self, i: int, key: str = "axes") -> Callable[[object], int | None]:
        """The data axis of operand i named by the attribute `key` (None if it has none)."""
        axes = self.attr(key, ())
        if not axes:
            return lambda x: None
        back = self.back(i, axes[0])
        return lambda x: np.ndim(x) - back

    def placed(self) -> Callable[[Env], list[np.ndarray]]:
        """The operands of an elementwise instruction, each laid out on the result's axes."""
        ins = self.ins
        maps = self.attr("_align")
        if maps is None:  # the builder gives every elementwise instruction its placement
            raise RunError("E7002", f"`{ins.op}` ({ins.site}) does not say where its operands go")
        rank = explicit(ins.out.type).rank
        ranks = [explicit(a.type).rank for a in ins.args]
        places = [Placement(r, rank, pos) for r, pos in zip(ranks, maps, strict=True)]
        reads = [
            constant(M.real(literal(a, self.dims))) if isinstance(a, Lit) else get
            for a, get in zip(ins.args, self.args, strict=True)
        ]
        pairs = list(zip(reads, places, ranks, strict=True))
        if len(pairs) == 2:  # most elementwise operations: the same, unrolled
            (read_a, place_a, rank_a), (read_b, place_b, rank_b) = pairs

            def two(env: Env) -> tuple[np.ndarray, np.ndarray]:
                a, b = read_a(env), read_b(env)
                if type(a) is not np.ndarray:
                    a = M.real(a)
                if type(b) is not np.ndarray:
                    b = M.real(b)
                prefix = max(a.ndim - rank_a, b.ndim - rank_b)
                return place_a.place(a, prefix), place_b.place(b, prefix)

            return two

        def operands(env: Env) -> list[np.ndarray]:
            values = []
            for read, _, _ in pairs:
                v = read(env)
                values.append(v if type(v) is np.ndarray else M.real(v))
            prefix = max(v.ndim - r for v, (_, _, r) in zip(values, pairs, strict=True))
            return [p.place(v, prefix) for v, (_, p, _) in zip(values, pairs, strict=True)]

        return operands


class Placement:
    """Where an operand of explicit rank `rank` goes among a result's axes, by the
    checker's alignment `pos` (counted from the result's last axis): its data's prefix on
    the end of the result's prefix. Worked out once for each (data rank, prefix)."""

    def __init__(self, rank: int, result_rank: int, pos) -> None:
        self.rank, self.result_rank, self.pos = rank, result_rank, pos
        self.known: dict[tuple[int, int], tuple | None] = {}

    def targets(self, ndim: int, prefix: int) -> list[int]:
        if self.pos is None:  # the builder gives every placement (presk_core.build.placement)
            raise RunError("E7002", "an operand without its placement among the result's axes")
        own = ndim - self.rank
        big = prefix + self.result_rank
        return [prefix - own + i for i in range(own)] + [big + p for p in self.pos]

    def place(self, v: np.ndarray, prefix: int) -> np.ndarray:
        ndim = v.ndim
        if ndim == 0:
            return v
        how = self.known.get((ndim, prefix), ())
        if how is None:
            return v
        if how == ():
            how = self.known[ndim, prefix] = self._how(ndim, prefix)
            if how is None:
                return v
        order, where, big = how
        moved = v.transpose(order) if order is not None else v
        shape = [1] * big
        for axis, target in enumerate(where):
            shape[target] = moved.shape[axis]
        return moved.reshape(shape)

    def _how(self, ndim: int, prefix: int) -> tuple | None:
        targets = self.targets(ndim, prefix)
        big = prefix + self.result_rank
        if targets == list(range(big)):
            return None  # already on the result's axes
        order = [int(i) for i in np.argsort(targets, kind="stable")]
        return (None if order == sorted(order) else order), sorted(targets), big


# ---- rules -------------------------------------------------------------------------------

Rule = Callable[[Prep], Thunk]


def _real_of(get: Thunk) -> Thunk:
    def read(env: Env) -> np.ndarray:
        x = get(env)
        if type(x) is not np.ndarray or x.dtype != object:
            return M.real(x)
        return x

    return read


def _elementwise(kernel: Callable) -> Rule:
    def rule(p: Prep) -> Thunk:
        operands = p.placed()
        return lambda env: kernel(*operands(env))

    return rule


def _unary(kernel: Callable) -> Rule:
    def rule(p: Prep) -> Thunk:
        read = _real_of(p.args[0])
        return lambda env: kernel(read(env))

    return rule


def _reduce(kernel: Callable) -> Rule:
    def rule(p: Prep) -> Thunk:
        (get,), axis = p.args, p.axis(0)

        def step(env: Env) -> object:
            x = get(env)
            return kernel(x, axis(x))

        return step

    return rule


def _pow(p: Prep) -> Thunk:
    get, y = p.args[0], p.ins.args[1]
    if isinstance(y, Lit):
        q = gmpy2.mpq(y.text)
        e = int(q) if q.denominator == 1 else M.real(gmpy2.mpfr(q))
        return lambda env: M.pow(get(env), e)
    get_y = p.args[1]
    return lambda env: M.pow(get(env), get_y(env))


def _softmax(kernel: Callable) -> Rule:
    def rule(p: Prep) -> Thunk:
        get, axis = p.args[0], p.axis(0)
        if not p.attr("where"):

            def plain(env: Env) -> object:
                x = get(env)
                return kernel(x, axis(x), None)

            return plain
        rank = explicit(p.ins.args[0].type).rank
        mask_rank = explicit(p.ins.args[-1].type).rank
        place, get_mask = Placement(mask_rank, rank, p.attr("_align")), p.args[-1]

        def step(env: Env) -> object:
            x = get(env)
            mask = place.place(np.asarray(get_mask(env)), np.ndim(x) - rank)
            return kernel(x, axis(x), np.broadcast_to(mask, np.shape(x)))

        return step

    return rule


def _compare(p: Prep) -> Thunk:
    operands, op = p.placed(), p.attr("op")
    return lambda env: M.compare(op, *operands(env))


def _select(p: Prep) -> Thunk:
    operands = p.placed()
    return lambda env: M.select(*operands(env))


def _causal_mask(p: Prep) -> Thunk:
    ((_, length),) = p.attr("shapes")
    n = p.length(length)
    return lambda env: np.tril(np.ones((n, n), dtype=bool))


def _draw(p: Prep) -> Thunk:
    """`uniform(key, n: T, …)` and `bernoulli(key, p, n: T, …)` (issue 16): doubles drawn
    by presk_core.random, exact at 53 bits or more."""
    shape = tuple(p.length(length) for _, length in p.attr("shapes", ()))
    key = p.args[0]
    if p.ins.op == "uniform":
        return lambda env: M.real(R.uniform(key(env), shape))
    if p.ins.op == "normal":  # Box–Muller at 256 bits, rounded to doubles (issue 29)
        return lambda env: M.real(R.normal(key(env), shape))
    prob = _real_of(p.args[1])
    return lambda env: M.real(R.bernoulli(key(env), prob(env).reshape(()).item(), shape))


def _filled(p: Prep) -> Thunk:
    """`zeros(n: T, …)` and `ones(n: T, …)`."""
    shape = tuple(p.length(length) for _, length in p.attr("shapes", ()))
    value = 0.0 if p.ins.op == "zeros" else 1.0
    return lambda env: M.real(np.full(shape, value))


def _pi(p: Prep) -> Thunk:
    """π: MPFR's const_pi at the working precision (correctly rounded), a real scalar."""
    return lambda env: M.real(gmpy2.const_pi())


def _iota(p: Prep) -> Thunk:
    """`iota(n: T)`: the indices 0, 1, …, T - 1 (int64, as every index)."""
    ((_, length),) = p.attr("shapes")
    n = p.length(length)
    return lambda env: np.arange(n, dtype=np.int64)


def _ein(p: Prep) -> Thunk:
    out, names = p.attr("axes"), p.attr("_names")
    gets = p.args
    if len(gets) == 1:
        (get,), (nx,) = gets, names
        summed_names = [i for i, n in enumerate(nx) if n not in out]
        keep_names = [nx.index(n) for n in out]

        def one(env: Env) -> object:
            x = get(env)
            q = np.ndim(x) - len(nx)
            keep, summed = [q + i for i in keep_names], [q + i for i in summed_names]
            moved = np.transpose(x, list(range(q)) + keep + summed)
            if not summed:
                return moved
            kept = moved.shape[: q + len(keep)]  # the summed axes as one, of any length (0)
            flat = moved.reshape(kept + (math.prod(moved.shape[len(kept) :]),))
            return M.sum(flat, flat.ndim - 1)

        return one
    (get_a, get_b), (na0, nb0) = gets, names
    na1 = tuple(n for n in na0 if n in nb0 or n in out)
    nb1 = tuple(n for n in nb0 if n in na1 or n in out)
    batch = [n for n in out if n in na1 and n in nb1]
    summed = [n for n in na1 if n in nb1 and n not in out]
    got = batch + [n for n in na1 if n not in nb1] + [n for n in nb1 if n not in na1]
    where = [got.index(n) for n in out]

    def two(env: Env) -> object:
        a, b = get_a(env), get_b(env)
        pa, pb = np.ndim(a) - len(na0), np.ndim(b) - len(nb0)
        a, na = _sum_alone(a, na0, pa, nb0, out)
        b, nb = _sum_alone(b, nb0, pb, na, out)
        if pa != pb:
            raise RunError("E7003", "`ein` operands with different prefixes")
        bat_a = list(range(pa)) + [pa + na.index(n) for n in batch]
        bat_b = list(range(pb)) + [pb + nb.index(n) for n in batch]
        sum_a, sum_b = [pa + na.index(n) for n in summed], [pb + nb.index(n) for n in summed]
        r = M.contract(a, b, sum_a, sum_b, bat_a, bat_b)
        # batch first (after the prefix), then a's free axes, then b's: reorder as `out`
        return np.transpose(r, list(range(pa)) + [pa + i for i in where])

    return two


def _sum_alone(x, names, p, other, out):
    """Sum first the axes of one operand that are neither in the other nor in the output."""
    names = list(names)
    for n in [n for n in names if n not in other and n not in out][::-1]:
        x = M.sum(x, p + names.index(n))
        names.remove(n)
    return x, tuple(names)


def _argmax(p: Prep) -> Thunk:
    get, axis = p.args[0], p.axis(0)

    def step(env: Env) -> object:
        x = get(env)
        a = axis(x)
        return M.argmax(x, np.ndim(x) - 1 if a is None else a)

    return step


def _one_hot(p: Prep) -> Thunk:
    get, n = p.args[0], p.length(p.ins.args[0].type.bound)
    return lambda env: M.one_hot(get(env), n)


class TakePlaces:
    """Where `take(axis a, x, ids)`'s operands go among its result's axes, as the checker
    aligned them (by trailing position, else by name: an index tensor may have axes x lacks,
    as `top_k`'s): x with the axis a moved last (its other axes placed, a kept last), ids."""

    def __init__(self, ins: Instr, x: int) -> None:
        from presk_types.shapes import alignment

        src, ids = explicit(ins.args[x].type), explicit(ins.args[x + 1].type)
        i = src.axis(ins.attr("axes")[0])
        rest = Shape(False, src.axes[:i] + src.axes[i + 1 :])
        dst = Shape(False, explicit(ins.out.type if x == 0 else ins.args[0].type).axes)
        pos = tuple(q - 1 for q in alignment(rest, dst)) + (-1,)
        self.x = Placement(rest.rank + 1, dst.rank + 1, pos)
        self.ids = Placement(ids.rank, dst.rank, alignment(ids, dst))
        self.ranks = (rest.rank, ids.rank, dst.rank)

    def place(self, moved: np.ndarray, ids: np.ndarray, ct_ndim: int = 0):
        """moved (x's axis a last) and ids on the result's axes, with the common prefix."""
        rest, n_ids, dst = self.ranks
        prefix = max(moved.ndim - 1 - rest, ids.ndim - n_ids, ct_ndim - dst, 0)
        return self.x.place(moved, prefix), self.ids.place(ids, prefix)


def _take(p: Prep) -> Thunk:
    (get, get_ids), axis = p.args, p.axis(0)
    places = TakePlaces(p.ins, 0)

    def step(env: Env) -> object:
        x = get(env)
        moved = np.moveaxis(x, axis(x), -1)
        xs, ids = places.place(moved, np.asarray(get_ids(env), dtype=np.int64))
        return M.take(xs, ids, -1)

    return step


def _top_k(p: Prep) -> Thunk:
    """`top_k(axis a, x, k: K)`'s indices (argmax's order, ties to the first)."""
    get, axis = p.args[0], p.axis(0)
    ((_, k),) = p.attr("shapes")
    count = p.length(k)

    def step(env: Env) -> object:
        x = get(env)
        return M.top_k(x, axis(x), count)

    return step


def _merge(p: Prep) -> Thunk:
    get, axis = p.args[0], p.axis(0)

    def step(env: Env) -> object:
        x = get(env)
        i = axis(x)
        return x.reshape(x.shape[:i] + (x.shape[i] * x.shape[i + 1],) + x.shape[i + 2 :])

    return step


def _split(p: Prep) -> Thunk:
    get, axis = p.args[0], p.axis(0)
    (_, la), (_, lb) = p.attr("shapes")
    lengths = (p.length(la), p.length(lb))

    def step(env: Env) -> object:
        x = get(env)
        i = axis(x)
        return x.reshape(x.shape[:i] + lengths + x.shape[i + 1 :])

    return step


def _crop(p: Prep) -> Thunk:
    """`x[a: i .. j]`: the elements i to j - 1 of the axis a (a copy)."""
    get, axis = p.args[0], p.axis(0)
    start, stop = p.length(p.attr("start")), p.length(p.attr("stop"))

    def step(env: Env) -> object:
        x = get(env)
        i = axis(x)
        return x[(slice(None),) * i + (slice(start, stop),)].copy()

    return step


def _pad(p: Prep) -> Thunk:
    """`pad(x[, c], axis a, before: i, after: j)`: x between i and j copies of c (or 0)."""
    get, axis = p.args[0], p.axis(0)
    sides = {k: p.length(v) for k, v in p.attr("shapes", ())}
    before, after = sides.get("before", 0), sides.get("after", 0)
    get_c = p.args[1] if len(p.args) == 2 else constant(gmpy2.mpfr(0))

    def step(env: Env) -> object:
        x, c = get(env), get_c(env)
        c = c.item() if isinstance(c, np.ndarray) else c
        i = axis(x)
        shape = x.shape[:i] + (before + x.shape[i] + after,) + x.shape[i + 1 :]
        out = np.full(shape, +c, dtype=object)  # `+c`: at the working precision
        out[(slice(None),) * i + (slice(before, before + x.shape[i]),)] = x
        return out

    return step


def apply(kernel: Callable) -> Rule:
    """`kernel` of the operands as they are."""

    def rule(p: Prep) -> Thunk:
        gets = p.args
        if len(gets) == 1:
            (get,) = gets
            return lambda env: kernel(get(env))
        if len(gets) == 2:
            get_a, get_b = gets
            return lambda env: kernel(get_a(env), get_b(env))
        return lambda env: kernel(*[g(env) for g in gets])

    return rule


PRIMITIVE_EVAL_RULES: dict[str, Rule] = {
    "add": _elementwise(M.add),
    "sub": _elementwise(M.sub),
    "mul": _elementwise(M.mul),
    "div": _elementwise(M.div),
    "maximum": _elementwise(M.maximum),
    "minimum": _elementwise(M.minimum),
    "pow": _pow,
    "neg": _unary(M.neg),
    "dot": apply(M.dot),
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
    "real": apply(M.real),
    "argmax": _argmax,
    "one_hot": _one_hot,
    "embed": apply(M.embed),
    "take": _take,
    "top_k": _top_k,
    "crop": _crop,
    "pad": _pad,
    "merge": _merge,
    "split": _split,
    "sample": apply(R.sample),
    "split_key": apply(lambda key: tuple(R.split(key, 2))),
    "uniform": _draw,
    "normal": _draw,
    "bernoulli": _draw,
    "stop_grad": _unary(lambda x: x),
    "zeros": _filled,
    "ones": _filled,
    "pi": _pi,
    "iota": _iota,
}
"""The rules of the primitives of the language (`presk_types.rules.PRIMITIVES`) but `grad`."""
