"""The reference interpreter: PSK-Core evaluated exactly, in MPFR at a given precision.

An interpreter in the style of JAX's `eval_jaxpr`: an environment from values to data, a
loop over a function's instructions, one rule per operation in `rules`. A function is
prepared once for each binding of its dimensions (and precision) before its first call: its
instructions become closures over what the instruction says (operands' places, literals,
lengths, axes, callees), so a call is `env[out] = step(env)` for each instruction.
Data: a real tensor is a numpy array of `gmpy2.mpfr` at the run's precision
(presk_core.mpfr), indices int64, masks bool; its leading axes are the function's open
prefix, if it has one, whose rank is known only at run time. A parameter tree is a dict from
dotted paths to tensors; a key a `random.Key`; a tuple a tuple; `f64` a `gmpy2.mpfr`, `nat`
an int.

An observer (`Interpreter(program, bits, observer)`), when given, is called as
`observer(site, value)` after each instruction executed (`site` is the instruction's own,
`F/%id`). If it has a true `wants_abs_sums`, each sum and contraction (`ABS_SUMS`) calls it
as `observer(site, value, abs_sum)` instead, `abs_sum` being Σ|terms| of each result: the
same operation evaluated on the absolute values of its operands (a `mean`'s terms are
xᵢ/n). An observer with a true `replaces` returns the value to keep instead (the
sensitivity's probes perturb a site's value: presk_core.sensitivity). Without an observer,
the loop is the plain one.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import gmpy2
import numpy as np
from presk_types.types import Bool, Idx, Real, TupleT

from presk_core import adjoints as A
from presk_core import mpfr as M
from presk_core import random as R
from presk_core.ir import Function, Instr, Program, Value
from presk_core.prepare import (
    PRIMITIVE_EVAL_RULES,
    Env,
    Placement,
    Prep,
    Rule,
    RunError,
    TakePlaces,
    Thunk,
    apply,
    explicit,
)
from presk_core.room import CHECKED, RoomError, make_room
from presk_core.trees import record, under

ABS_SUMS = frozenset({"sum", "mean", "dot", "ein", "dot_left", "dot_right", "sum_to"})
"""The sums and contractions: where an observer that wants them gets Σ|terms|."""


@dataclass
class Frame:
    """One instruction's surroundings, to evaluate it alone (`eval_rules`)."""

    fn: Function | None
    dims: dict[str, int]
    env: Env = field(default_factory=dict)


@dataclass
class Interpreter:
    program: Program
    bits: int = 256
    observer: Callable[..., None] | None = None
    _functions: dict[str, Function] | None = field(default=None, init=False, repr=False)
    _prepared: dict[tuple, Callable[[list], object]] = field(
        default_factory=dict, init=False, repr=False
    )

    def function(self, name: str) -> Function:
        if self._functions is None:
            self._functions = {f.name: f for f in self.program.functions}
        fn = self._functions.get(name)
        if fn is None:
            raise KeyError(name)
        return fn

    def call(self, name: str, args: list, dims: dict[str, int]) -> object:
        key = (name, gmpy2.get_context().precision, tuple(dims.items()))
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = self._prepared[key] = self.prepare(self.function(name), dims)
        return prepared(args)

    def prepare(self, fn: Function, dims: dict[str, int]) -> Callable[[list], object]:
        """`fn` as a Python function of its arguments, at these dimensions."""
        dims = dict(dims)
        steps = []
        for ins in fn.body:
            rule = rules.get(ins.op)
            if rule is None:
                raise RunError("E7002", f"the interpreter has no rule for `{ins.op}`")
            steps.append((ins.out.id, _roomy(ins, rule(Prep(self, ins, dims)), dims)))
        params = [p.id for p in fn.params]
        ret = Prep.reader(fn.ret, dims)
        observer = self.observer
        if observer is None:

            def run(args: list) -> object:
                env = dict(zip(params, args, strict=True))
                for out, step in steps:
                    env[out] = step(env)
                return ret(env)

            return run
        sums = getattr(observer, "wants_abs_sums", False)
        replaces = getattr(observer, "replaces", False)
        watched = [
            (out, step, ins.site, _abs_step(ins, step) if sums and ins.op in ABS_SUMS else None)
            for (out, step), ins in zip(steps, fn.body, strict=True)
        ]

        def observed(args: list) -> object:
            env = dict(zip(params, args, strict=True))
            for out, step, site, abs_step in watched:
                value = env[out] = step(env)
                if abs_step is None:
                    seen = observer(site, value)
                else:
                    seen = observer(site, value, abs_step(env))
                if replaces:
                    env[out] = seen
            return ret(env)

        return observed

    def run(self, name: str, args: list, dims: dict[str, int]) -> object:
        with M.precision(self.bits):
            try:
                return self.call(name, args, dims)
            except IndexError as e:  # an index out of its range: a fault of the data
                raise RunError("E7003", str(e)) from None
            except R.SizeError as e:  # an initializer's draw of a huge shape
                raise RunError("E7011", str(e)) from None
            except MemoryError as e:  # a tensor the machine cannot hold (issue 16's fuzzer)
                why = f": {e}" if isinstance(e, RoomError) else ""
                raise RunError("E7011", f"`{name}` needs more memory than there is{why}") from None
            except RecursionError:  # each call of a call is three Python frames
                raise RunError(
                    "E7012",
                    f"`{name}` nests calls deeper than the interpreter can follow (about"
                    f" {sys.getrecursionlimit() // 3} levels: functions, or modules' `init`s, each"
                    " calling the next)",
                ) from None


def _roomy(ins: Instr, step: Thunk, dims: dict[str, int]) -> Thunk:
    """`step`, which first makes sure there is room for its result if that is a large
    tensor of reals (presk_core.room: GMP aborts the process where memory runs out). The
    result's explicit axes are measured, its open prefix (known only at run time) not."""
    if not isinstance(ins.out.type, Real):
        return step
    shape = explicit(ins.out.type)
    if not all(n in dims for a in shape.axes for n, _ in a.length.coeffs):
        return step
    lengths = tuple(a.length.value(dims) for a in shape.axes)
    count = math.prod(lengths)
    if count < CHECKED or (ins.op == "init" and count > R.MAX_ELEMENTS):
        return step  # small; or a draw that refuses its size itself (R.SizeError)

    def checked(env: Env) -> object:
        make_room(lengths)
        return step(env)

    return checked


def _abs_step(ins: Instr, step: Thunk) -> Thunk:
    """Σ|terms| of a sum or contraction: `step` on its real operands' absolute values."""
    ids = [a.id for a in ins.args if isinstance(a, Value) and isinstance(a.type, Real)]
    if ins.op == "sum_to":
        ids = ids[:1]  # x gives its shape only

    def abs_step(env: Env) -> object:
        return step({**env, **{i: M.abs(M.real(env[i])) for i in ids}})

    return abs_step


# ---- structure ---------------------------------------------------------------------------


def _call(p: Prep) -> Thunk:
    interp, name, gets, dims = p.interp, p.attr("fn"), p.args, p.bound()
    return lambda env: interp.call(name, [g(env) for g in gets], dims)


def _fold(p: Prep) -> Thunk:
    interp, name, gets, dims = p.interp, p.attr("fn"), p.args, p.bound()
    count = p.length(p.attr("count"))

    def step(env: Env) -> object:
        tree, x, *rest = [g(env) for g in gets]
        for i in range(count):
            block = {path: leaf[i] for path, leaf in tree.items()}
            x = interp.call(name, [block, x, *rest], dims)
        return x

    return step


def _scan(p: Prep) -> Thunk:
    """`scan{n} F(pre…, c, xs…)` (issue 29): a loop of n calls, each x an xs's element at the
    step's index along the axis t, the carry threaded; the ys stacked on a new first axis t
    (after the prefix), leaf by leaf for a tuple of them. `reverse`: from index n − 1 to 0."""
    interp, name, dims = p.interp, p.attr("fn"), p.bound()
    count, m, t = p.length(p.attr("count")), p.attr("scanned"), p.attr("axes")[0]
    n_args = len(p.args)

    def at(t_xs) -> Callable[[object, int], object]:
        """Step k's element of a value of type t_xs (a tuple of them leaf by leaf)."""
        if isinstance(t_xs, TupleT):
            parts = [at(e) for e in t_xs.elements]
            return lambda x, k: tuple(f(v, k) for f, v in zip(parts, x, strict=True))
        s = explicit(t_xs)
        back = s.rank - s.axis(t)
        return lambda x, k: np.take(x, k, axis=np.ndim(x) - back)

    takes = [at(a.type) for a in p.ins.args[n_args - m :]]
    y_t = p.ins.out.type.elements[1]
    order = range(count - 1, -1, -1) if p.attr("reverse", False) else range(count)

    def empty(t, lead: tuple):  # the stacked ys of no step; `lead` an open prefix's lengths
        if isinstance(t, TupleT):
            return tuple(empty(e, lead) for e in t.elements)
        s = explicit(t)
        return M.zeros((*(lead if s.prefix else ()), *(p.length(a.length) for a in s.axes)))

    def lead(values: list) -> tuple:
        """The open prefix's lengths, from the first operand whose type has one."""
        for v, a in zip(values, p.ins.args, strict=True):
            s = explicit(a.type)
            if s.prefix:
                return np.shape(v)[: np.ndim(v) - s.rank]
        return ()

    def stack(ys: list, t):
        if isinstance(t, TupleT):
            return tuple(stack([y[i] for y in ys], e) for i, e in enumerate(t.elements))
        rank = explicit(t).rank - 1
        return np.stack(ys, axis=np.ndim(ys[0]) - rank)

    def step(env: Env) -> object:
        values = [g(env) for g in p.args]
        pre, c, xss = values[: n_args - m - 1], values[n_args - m - 1], values[n_args - m :]
        ys: list = [None] * count
        for k in order:
            xs = [take(x, k) for x, take in zip(xss, takes, strict=True)]
            c, ys[k] = interp.call(name, [*pre, c, *xs], dims)
        return (c, stack(ys, y_t) if count else empty(y_t, lead(values)))

    return step


def _slice(p: Prep) -> Thunk:
    get, i = p.args[0], p.attr("index")
    return lambda env: {path: leaf[i] for path, leaf in get(env).items()}


def _field(p: Prep) -> Thunk:
    get, path = p.args[0], p.attr("path")

    def step(env: Env) -> object:
        tree = get(env)
        return tree[path] if path in tree else under(tree, path)

    return step


def _record(p: Prep) -> Thunk:
    pairs = list(zip(p.attr("keys"), p.args, strict=True))
    return lambda env: record([k for k, _ in pairs], [get(env) for _, get in pairs])


def _get(p: Prep) -> Thunk:
    get, i = p.args[0], p.attr("index")
    return lambda env: get(env)[i]


def _fold_key(p: Prep) -> Thunk:
    get, name = p.args[0], p.attr("name")
    return lambda env: R.fold_in_name(get(env), name)


def _init(p: Prep) -> Thunk:
    shape = tuple(p.length(a.length) for a in explicit(p.ins.out.type).axes)
    attrs = {k: v for k, v in p.ins.attrs if k != "init"}
    get, init = p.args[0], p.attr("init")
    return lambda env: M.real(R.init_param(init, get(env), shape, **attrs))


def _fold_init(p: Prep) -> Thunk:
    interp, name, get, dims = p.interp, p.attr("fn"), p.args[0], p.bound()
    count = p.length(p.attr("count"))

    def step(env: Env) -> object:
        key = get(env)
        trees = [interp.call(name, [R.fold_in(key, i)], dims) for i in range(count)]
        return {path: np.stack([t[path] for t in trees]) for path in trees[0]} if trees else {}

    return step


def _grad(p: Prep) -> Thunk:
    def step(env: Env) -> object:
        raise RunError(
            "E7002",
            "`grad` needs differentiation (presk-ad), which this version of presk does not have"
            " yet",
        )

    return step


# ---- what differentiation writes (presk_types.ops.ADJOINT_OPS; presk_core.adjoints) ---------


def _sum_to(p: Prep) -> Thunk:
    """ct (of the result's type) back to the shape of operand x, as x was aligned to it."""
    (get_ct, get_x), (ct_val, x_val) = p.args, p.ins.args
    ct_rank = explicit(ct_val.type).rank
    place = Placement(explicit(x_val.type).rank, ct_rank, p.attr("_align"))

    def step(env: Env) -> object:
        ct, x = get_ct(env), get_x(env)
        if not isinstance(x, np.ndarray) or np.ndim(x) == 0:
            return M.sum(ct) if np.ndim(ct) else ct
        targets = place.targets(np.ndim(x), np.ndim(ct) - ct_rank)
        return A.sum_to(ct, targets, np.shape(x))

    return step


def _expand(p: Prep) -> Thunk:
    (get_ct, get_x), axis, mean = p.args, p.axis(1), bool(p.attr("mean"))

    def step(env: Env) -> object:
        x = get_x(env)
        return A.expand(get_ct(env), x, axis(x), mean)

    return step


def _softmax_adj(kernel: Callable) -> Rule:
    def rule(p: Prep) -> Thunk:
        (get_ct, get_y), axis = p.args, p.axis(1)

        def step(env: Env) -> object:
            y = get_y(env)
            return kernel(get_ct(env), y, axis(y))

        return step

    return rule


def _take_grad(p: Prep) -> Thunk:
    (get_ct, get_x, get_ids), axis = p.args, p.axis(1)
    places = TakePlaces(p.ins, 1)

    def step(env: Env) -> object:
        x = get_x(env)
        return A.take_grad(get_ct(env), x, np.asarray(get_ids(env)), axis(x), places)

    return step


def _reduce_pick(p: Prep) -> Thunk:
    (get_ct, get_x), axis, kind = p.args, p.axis(1), p.attr("kind")

    def step(env: Env) -> object:
        x = get_x(env)
        return A.reduce_pick(get_ct(env), x, axis(x), kind)

    return step


def _pick2(p: Prep) -> Thunk:
    operands, which, kind = p.placed(), p.attr("which"), p.attr("kind")

    def step(env: Env) -> object:
        ct, a, b = operands(env)
        shape = np.broadcast_shapes(np.shape(ct), np.shape(a), np.shape(b))
        ct, a, b = (np.broadcast_to(v, shape) for v in (ct, a, b))
        return A.pick2(np.array(ct, dtype=object), a, b, which, kind)

    return step


def _with_attr(kernel: Callable, name: str) -> Rule:
    """`kernel(a, attribute, b)`: put, put_slice, put_item."""

    def rule(p: Prep) -> Thunk:
        (get_a, get_b), value = p.args, p.attr(name)
        return lambda env: kernel(get_a(env), value, get_b(env))

    return rule


def _stack_axis(p: Prep) -> Thunk:
    """`stack_axis(axis t, y0, …)`: the operands on a new first axis (after the prefix)."""
    gets, rank = p.args, explicit(p.ins.args[0].type).rank

    def step(env: Env) -> object:
        ys = [g(env) for g in gets]
        return np.stack(ys, axis=np.ndim(ys[0]) - rank)

    return step


def _spread(p: Prep) -> Thunk:
    (get_ct, get_x), (ct_names, x_names) = p.args, p.attr("_names")
    return lambda env: A.spread(get_ct(env), ct_names, get_x(env), x_names)


rules: dict[str, Rule] = {
    **PRIMITIVE_EVAL_RULES,
    "grad": _grad,
    "value_grad": _grad,
    # structure
    "cast": apply(lambda x: x),  # the same data, named axes
    "stack_axis": _stack_axis,  # a scan's outputs (issue 29)
    "call": _call,
    "fold": _fold,
    "scan": _scan,  # issue 29: a scan over a symbolic number of steps
    "slice": _slice,
    "field": _field,
    "record": _record,
    "tuple": apply(lambda *xs: tuple(xs)),
    "get": _get,
    "fold_key": _fold_key,
    "init": _init,
    "fold_init": _fold_init,
    # what differentiation writes (presk_types.ops.ADJOINT_OPS)
    "zeros_like": apply(A.zeros_like),
    "accum": apply(A.accum),
    "sum_to": _sum_to,
    "expand": _expand,
    "put": _with_attr(A.put, "path"),
    "put_slice": _with_attr(A.put_slice, "index"),
    "put_item": _with_attr(A.put_item, "index"),
    "dot_left": apply(A.dot_left),
    "dot_right": apply(A.dot_right),
    "gelu_grad": apply(A.gelu_grad),
    "silu_grad": apply(A.silu_grad),
    "relu_grad": apply(A.relu_grad),
    "abs_grad": apply(A.abs_grad),
    "softmax_grad": _softmax_adj(A.softmax_grad),
    "log_softmax_grad": _softmax_adj(A.log_softmax_grad),
    "embed_grad": apply(A.embed_grad),
    "take_grad": _take_grad,
    "spread": _spread,
    "reduce_pick": _reduce_pick,
    "pick2": _pick2,
    "reshape_like": apply(lambda ct, x: ct.reshape(np.shape(x))),
}
"""How each operation of PSK-Core is prepared into a step, keyed by the operation set
(`presk_types.ops.OPS`), which it covers exactly (tests/test_ops.py)."""


def _alone(rule: Rule) -> Callable[[Interpreter, Frame, Instr], object]:
    def evaluate(interp: Interpreter, frame: Frame, ins: Instr) -> object:
        return rule(Prep(interp, ins, frame.dims))(frame.env)

    return evaluate


eval_rules: dict[str, Callable[[Interpreter, Frame, Instr], object]] = {
    op: _alone(rule) for op, rule in rules.items()
}
"""Each operation evaluated alone, `eval_rules[op](interp, frame, ins)`: prepared, then run
on the frame's environment (for tests of one instruction)."""

__all__ = ["ABS_SUMS", "Bool", "Idx", "Interpreter", "Real", "RunError", "eval_rules", "rules"]
