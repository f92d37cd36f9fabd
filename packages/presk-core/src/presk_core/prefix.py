"""Incremental evaluation of a causal function over a window: `presk serve`'s cache.

`incremental(program, entry, window)` takes a specialized, flattened served function (the
logits of a window of T tokens, `presk serve`'s `generate`: `(θ leaves…, ids : idx[V][batch:
1, seq: T]) -> ℝ[batch: 1, seq: T, V]`) and derives from its causal structure two functions
(docs/serve.md, "Generation with a cache"):

- the **fill** (`serve_fill`): the function itself, inlined, returning its logits and the
  values a later position reads at earlier rows (the keys and values of each attention: the
  *cached* values), all T rows;
- the **step** (`serve_step`): row t alone. Its inputs are θ (a leaf indexed by the window's
  positions, such as a position table, as its row t), the token at t, the row t of each
  causal mask, the one-hot row of t, and each cached value's T rows as the fill or earlier
  steps left them; it returns the logits at t and each cached value's row t, which the
  caller writes into its cache.

*Prefix analysis.* Each value's axes that run over the window's positions are tagged: `q`
(the value's row i is computed at position i: the token ids' window axis and what is
computed from it position by position) or `k` (an axis over the positions a row reads: the
scores' second axis). Elementwise work, folds over other axes, products (`dot`, `ein`),
`split`, `merge` and `embed` keep the tags; an `ein` whose result would have two `q` axes
keeps the one named as the ids' window axis and makes the other `k`, its operand a cached
value. A fold over a `k` axis is allowed only where its terms outside j ≤ i are exact
zeros: a softmax over `k` whose `where` is a `causal_mask` with its rows on `q` and its
columns on `k` (exp(−∞) = +0), and an `ein` that sums `k` against such a softmax. Anything
else that touches the positions (a fold over `q`, a `k` fold without that mask, a gather
along the positions, a value over the positions that is not computed from the window) is
`NoCache`, with its reason: the caller keeps the whole-window loop.

*The step's bits.* Row t of every value is computed by the same operations on the same
operands' rows, so it is the whole window's row t bit for bit (DESIGN §11: every fold a
left fold per output element, whatever the other axes' lengths); a cached value's row t
enters its cache by a `select` against the one-hot row of t (exact), after a `sum` over its
length-1 axis (one term: the term itself). The folds over `k` read all T cached rows as the
whole window reads all T rows; their terms at j > t have weight +0 in both, so the logits
at t are the whole window's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk_types.ops import OPS, Kind
from presk_types.presburger import Lin
from presk_types.types import AxisT, Bool, Idx, Real, Shape, TupleT, Type, shape_of

from presk_core.build import FunctionBuilder
from presk_core.ir import Function, Instr, Operand, Program, Value


class NoCache(Exception):
    """A served function whose incremental evaluation is not derived: the reason."""


@dataclass(frozen=True, slots=True)
class Incremental:
    """The fill and the step of a served function, and what the step's inputs are.

    `inputs` describes the step's parameters in order: `("leaf", i, axis)` the i-th
    parameter of the served function (its row t along `axis`, or whole when axis is None),
    `("ids",)` the token at t (shape [1, 1]), `("mask", T)` the row t of a causal mask
    (`[1, T]`: j ≤ t), `("onehot", T)` the one-hot row of t, `("cache", k)` the k-th cached
    value's T rows. `caches` gives each cached value's shape and the axis of its rows."""

    program: Program
    fill: str
    step: str
    inputs: tuple[tuple, ...]
    caches: tuple[tuple[tuple[int, ...], int], ...]


_LAYOUT = ("split", "merge")
_FOLDS = ("sum", "mean", "max", "min", "argmax", "softmax", "log_softmax")


def _shape(t: Type) -> Shape:
    s = shape_of(t)
    return s if s is not None else Shape(False, ())


def _lengths(t: Type) -> tuple[int, ...]:
    return tuple(a.length.constant for a in _shape(t).axes)


def _shrunk(t: Type, axes: set[int]) -> Type:
    """`t` with the axes `axes` of length 1."""
    if not axes:
        return t
    s = _shape(t)
    new = Shape(
        s.prefix,
        tuple(AxisT(a.name, Lin.const(1)) if i in axes else a for i, a in enumerate(s.axes)),
    )
    match t:
        case Real():
            return Real(new)
        case Bool():
            return Bool(new)
        case Idx(bound, _):
            return Idx(bound, new)
    raise NoCache(f"a value of type {t} over the positions")


def _dropped(t: Type, axis: int) -> Type:
    s = _shape(t)
    return replace(t, shape=Shape(s.prefix, s.axes[:axis] + s.axes[axis + 1 :]))


def inline(program: Program, entry: str) -> Function:
    """`entry` with every call spliced in: one body, fresh values."""
    fn = program.function(entry)
    b = FunctionBuilder(entry)
    params = tuple(b.fresh(p.type, p.name) for p in fn.params)

    def splice(f: Function, args: list[Operand]) -> Operand:
        env: dict[int, Operand] = {}
        for p, a in zip(f.params, args, strict=True):  # the callee's names for the axes
            named = isinstance(a, Value) and a.type != p.type and shape_of(p.type) is not None
            env[p.id] = b.emit("cast", [a], p.type) if named else a
        get = lambda a: env[a.id] if isinstance(a, Value) else a  # noqa: E731
        for ins in f.body:
            if ins.op == "call":
                env[ins.out.id] = splice(
                    program.function(ins.attr("fn")), [get(a) for a in ins.args]
                )
                continue
            if "fn" in dict(ins.attrs):
                raise NoCache(f"`{ins.op}` of `{ins.attr('fn')}` (unroll the stacks first)")
            out = b.fresh(ins.out.type, ins.out.name)
            b.bind(out, ins.op, [get(a) for a in ins.args], ins.attrs, ins.span)
            env[ins.out.id] = out
        return get(f.ret)

    ret = splice(fn, list(params))
    return Function(entry, (), params, fn.result, tuple(b.body), ret, fn.effects, fn.span)


class _Analysis:
    """The tags of every value (axis -> `q`|`k`), the cached reads, the leaves read by row."""

    def __init__(self, fn: Function, ids: int, axis: int) -> None:
        self.fn = fn
        self.window = _lengths(fn.params[ids].type)[axis]
        self.name = _shape(fn.params[ids].type).axes[axis].name
        self.param_index = {p.id: i for i, p in enumerate(fn.params)}
        self.tags: dict[int, dict[int, str]] = {fn.params[ids].id: {axis: "q"}}
        self.zero_above: set[int] = set()  # k-tagged values whose terms j > i are +0
        self.masks: dict[int, Instr] = {}  # causal_mask values
        self.masked: set[tuple[int, int]] = set()  # (instr out id, arg index): a mask row
        self.cached: dict[int, int] = {}  # value id -> its position axis
        self.reads: set[tuple[int, int]] = set()  # (instr out id, arg index): a cache read
        self.rows: dict[int, int] = {}  # parameter id -> the axis read by row
        self.whole: set[int] = set()  # parameters read whole somewhere
        self.plain_masks: set[int] = set()
        for ins in fn.body:
            self.visit(ins)
        ret = fn.ret
        if not isinstance(ret, Value) or set(self.tags.get(ret.id, {}).values()) != {"q"}:
            raise NoCache("its result is not computed position by position")
        clash = set(self.rows) & self.whole
        if clash:
            p = fn.params[self.param_index[min(clash)]]
            raise NoCache(f"`{p.name}` is read both by position and whole")

    def t(self, a: Operand) -> dict[int, str]:
        return self.tags.get(a.id, {}) if isinstance(a, Value) else {}

    def visit(self, ins: Instr) -> None:
        args = ins.args
        if ins.op == "causal_mask":
            self.masks[ins.out.id] = ins
            return
        tagged = any(self.t(a) for a in args)
        if not tagged:
            for a in args:
                if isinstance(a, Value):
                    if a.id in self.param_index:
                        self.whole.add(a.id)
                    if a.id in self.masks:
                        self.plain_masks.add(a.id)
            return
        kind = OPS[ins.op].kind if ins.op in OPS else None
        if ins.op in _FOLDS:
            self.fold(ins)
        elif ins.op == "dot":
            x, w = args
            tx = self.t(x)
            if self.t(w) or (len(_shape(x.type).axes) - 1) in tx:
                raise NoCache(f"`{ins.site}`: a product over the positions")
            self.tags[ins.out.id] = dict(tx)
        elif ins.op == "ein":
            self.ein(ins)
        elif ins.op in _LAYOUT:
            self.layout(ins)
        elif ins.op == "cast" and len(_shape(ins.out.type).axes) == len(_shape(args[0].type).axes):
            self.tags[ins.out.id] = dict(self.t(args[0]))
        elif ins.op == "embed":
            table, ids = args
            if self.t(table):
                raise NoCache(f"`{ins.site}`: a table over the positions")
            self._whole(table)
            self.tags[ins.out.id] = dict(self.t(ids))
        elif kind == Kind.ELEMENTWISE:
            self.elementwise(ins)
        else:
            raise NoCache(f"`{ins.site}`: `{ins.op}` over the positions")

    def _whole(self, a: Operand) -> None:
        if isinstance(a, Value) and a.id in self.param_index:
            self.whole.add(a.id)

    def elementwise(self, ins: Instr) -> None:
        out_rank = len(_shape(ins.out.type).axes)
        align = ins.attr("_align")
        places = []
        for i, a in enumerate(ins.args):
            rank = len(_shape(a.type).axes)
            pos = align[i] if align is not None else tuple(range(-rank, 0))
            places.append([out_rank + p for p in pos])
        out: dict[int, str] = {}
        for a, place in zip(ins.args, places, strict=True):
            for ax, tag in self.t(a).items():
                if out.get(place[ax], tag) != tag:
                    raise NoCache(f"`{ins.site}`: a row and a key axis meet")
                out[place[ax]] = tag
        for a, place in zip(ins.args, places, strict=True):
            if not isinstance(a, Value) or self.t(a):
                continue
            lengths = _lengths(a.type)
            over = [ax for ax, o in enumerate(place) if o in out and lengths[ax] != 1]
            if not over:
                self._whole(a)
                continue
            if a.id not in self.param_index or len(over) != 1 or out[place[over[0]]] != "q":
                raise NoCache(f"`{ins.site}`: a value over the positions not computed from them")
            if self.rows.get(a.id, over[0]) != over[0]:
                raise NoCache(f"`{a.name}` is read by position along two axes")
            self.rows[a.id] = over[0]
        self.tags[ins.out.id] = out

    def fold(self, ins: Instr) -> None:
        x = ins.args[0]
        tx = self.t(x)
        names = ins.attr("axes")
        axes = _shape(x.type).axes
        if names is None:
            raise NoCache(f"`{ins.site}`: a fold of every axis, the positions too")
        folded = [i for i, a in enumerate(axes) if a.name in names]
        keeps = ins.op in ("softmax", "log_softmax")
        for i in folded:
            if tx.get(i) == "q":
                raise NoCache(f"`{ins.site}`: `{ins.op}` over the positions")
            if tx.get(i) == "k":
                if ins.op != "softmax" or not self.causal(ins, x, tx, i):
                    raise NoCache(
                        f"`{ins.site}`: `{ins.op}` over the positions it reads, without a"
                        " causal mask that leaves out j > i"
                    )
                self.zero_above.add(ins.out.id)
        if len(ins.args) > 1 and isinstance(ins.args[1], Value) and ins.args[1].id in self.masks:
            if (ins.out.id, 1) not in self.masked:
                self.plain_masks.add(ins.args[1].id)
        if keeps:
            self.tags[ins.out.id] = dict(tx)
        else:
            kept = [i for i in range(len(axes)) if i not in folded]
            self.tags[ins.out.id] = {j: tx[i] for j, i in enumerate(kept) if i in tx}

    def causal(self, ins: Instr, x: Value, tx: dict[int, str], k: int) -> bool:
        """A softmax over the `k` axis whose `where` is a causal mask, rows on `q`."""
        if not ins.attr("where") or len(ins.args) != 2:
            return False
        mask = ins.args[1]
        if not isinstance(mask, Value) or mask.id not in self.masks:
            return False
        rank = len(_shape(x.type).axes)
        row, col = (rank + p for p in ins.attr("_align"))
        if tx.get(row) != "q" or col != k or _lengths(mask.type) != (self.window, self.window):
            return False
        self.masked.add((ins.out.id, 1))
        return True

    def ein(self, ins: Instr) -> None:
        out_names = ins.attr("axes")
        names = ins.attr("_names")
        sources: dict[str, list[tuple[int, int, str | None]]] = {}
        for i, (a, ns) in enumerate(zip(ins.args, names, strict=True)):
            ta = self.t(a)
            for ax, n in enumerate(ns):
                sources.setdefault(n, []).append((i, ax, ta.get(ax)))
        out: dict[int, str] = {}
        rows = []
        for o, n in enumerate(out_names):
            tags = {tg for _, _, tg in sources.get(n, []) if tg}
            if tags == {"q", "k"}:
                raise NoCache(f"`{ins.site}`: a row and a key axis meet")
            if tags:
                out[o] = tags.pop()
                if out[o] == "q":
                    rows.append(o)
        if len(rows) > 1:
            keep = [o for o in rows if out_names[o] == self.name]
            if len(keep) != 1 or len(rows) != 2:
                raise NoCache(f"`{ins.site}`: positions against positions, no row axis kept")
            (o,) = (o for o in rows if o != keep[0])
            if "k" in out.values():
                raise NoCache(f"`{ins.site}`: two axes of the positions read")
            out[o] = "k"
            for i, ax, tg in sources[out_names[o]]:
                if tg == "q":
                    self.cache(ins, i, ax)
        for o, tag in out.items():  # an operand over the rows that is not computed from them
            for i, ax, tg in sources[out_names[o]]:
                a = ins.args[i]
                if tag == "q" and tg is None and _lengths(a.type)[ax] != 1:
                    raise NoCache(
                        f"`{ins.site}`: a value over the positions not computed from them"
                    )
        for n, srcs in sources.items():
            if n in out_names or not any(tg for _, _, tg in srcs):
                continue
            zero = [
                i
                for i, _, tg in srcs
                if tg == "k"
                and isinstance(ins.args[i], Value)
                and ins.args[i].id in self.zero_above
            ]
            if not zero or any(tg == "k" and i not in zero for i, _, tg in srcs):
                raise NoCache(
                    f"`{ins.site}`: a sum over the positions without a causal mask's zeros"
                )
            for i, ax, tg in srcs:
                if tg == "q":
                    self.cache(ins, i, ax)
                elif tg is None:
                    raise NoCache(f"`{ins.site}`: a sum over the positions against a constant")
        self.tags[ins.out.id] = out

    def cache(self, ins: Instr, i: int, ax: int) -> None:
        a = ins.args[i]
        if self.cached.get(a.id, ax) != ax:
            raise NoCache(f"`{ins.site}`: a value read by position along two axes")
        if _shape(a.type).axes[ax].name is None:
            raise NoCache(f"`{ins.site}`: a cached value's positions are not a named axis")
        self.cached[a.id] = ax
        self.reads.add((ins.out.id, i))

    def layout(self, ins: Instr) -> None:
        (x,) = ins.args
        tx = self.t(x)
        names = ins.attr("axes") or ()
        src = _shape(x.type).axes
        dst = [a.name for a in _shape(ins.out.type).axes]
        out = {}
        for ax, tag in tx.items():
            n = src[ax].name
            if n is None or n in names or dst.count(n) != 1:
                raise NoCache(f"`{ins.site}`: `{ins.op}` of the positions' axis")
            out[dst.index(n)] = tag
        self.tags[ins.out.id] = out


def incremental(program: Program, entry: str, ids: int, axis: int) -> Incremental:
    """The fill and the step of `entry` (specialized and flattened, stacks unrolled): its
    `ids`-th parameter the window's tokens, `axis` their positions. NoCache when the prefix
    analysis fails."""
    fn = inline(program, entry)
    try:
        an = _Analysis(fn, ids, axis)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        # an instruction of a form the analysis does not expect: no cache (the whole window
        # is always right), the reason naming what it met
        raise NoCache(
            f"the prefix analysis does not read this function ({type(e).__name__})"
        ) from None
    T = an.window
    cached = list(an.cached.items())
    # the fill: the function, and the cached values' T rows
    fb = FunctionBuilder("serve_fill", FunctionBuilder.after(fn.params, fn.body))
    for ins in fn.body:
        fb.place(ins, "fill")
    fill_ret = fb.emit(
        "tuple",
        [fn.ret, *(Value(v, _type_of(fn, v)) for v, _ in cached)],
        TupleT((fn.result, *(_type_of(fn, v) for v, _ in cached))),
    )
    fill = Function(fb.name, (), fn.params, fill_ret.type, tuple(fb.body), fill_ret)
    # the step: row t
    sb = FunctionBuilder("serve_step", FunctionBuilder.after(fn.params, fn.body))
    env: dict[int, Operand] = {}
    params: list[Value] = []
    inputs: list[tuple] = []
    for i, p in enumerate(fn.params):
        if i == ids:
            v = sb.fresh(_shrunk(p.type, {axis}), p.name)
            inputs.append(("ids",))
        elif p.id in an.rows:
            v = sb.fresh(_shrunk(p.type, {an.rows[p.id]}), p.name)
            inputs.append(("leaf", i, an.rows[p.id]))
        else:
            v = sb.fresh(p.type, p.name)
            inputs.append(("leaf", i, None))
        env[p.id] = v
        params.append(v)
    mask_rows: dict[tuple, Value] = {}
    onehots: dict[str, Value] = {}
    caches: dict[int, Value] = {}
    for k, (v, ax) in enumerate(cached):
        t = _type_of(fn, v)
        caches[v] = sb.fresh(t, f"cache.{k}")
        params.append(caches[v])
        inputs.append(("cache", k))
        name = _shape(t).axes[ax].name
        if name not in onehots:
            onehots[name] = sb.fresh(Bool(Shape(False, (AxisT(name, Lin.const(T)),))), f"at.{name}")
            params.append(onehots[name])
            inputs.append(("onehot", T))
    used = {a.id for ins in fn.body for i, a in enumerate(ins.args) if (ins.out.id, i) in an.masked}
    for m in an.masks.values():
        key = tuple(a.name for a in _shape(m.out.type).axes)
        if m.out.id not in used or key in mask_rows:
            continue
        row = _shrunk(m.out.type, {0})
        mask_rows[key] = sb.fresh(row, "mask.row")
        params.append(mask_rows[key])
        inputs.append(("mask", T))
    rows: dict[int, Value] = {}
    full: dict[int, Value] = {}

    def row_of(v: int) -> Value:
        if v not in rows:
            ax = an.cached[v]
            x = env[v]
            name = _shape(x.type).axes[ax].name
            rows[v] = sb.emit("sum", [x], _dropped(x.type, ax), {"axes": (name,)})
        return rows[v]

    def full_of(v: int) -> Value:
        if v not in full:
            t = _type_of(fn, v)
            name = _shape(t).axes[an.cached[v]].name
            full[v] = sb.emit("select", [onehots[name], row_of(v), caches[v]], t)
        return full[v]

    for ins in fn.body:
        if ins.op == "causal_mask":
            if ins.out.id in an.plain_masks:
                env[ins.out.id] = sb.emit(ins.op, [], ins.out.type, ins.attrs, ins.span)
            continue
        args = []
        for i, a in enumerate(ins.args):
            if not isinstance(a, Value):
                args.append(a)
            elif (ins.out.id, i) in an.reads:
                args.append(full_of(a.id))
            elif (ins.out.id, i) in an.masked:
                args.append(mask_rows[tuple(x.name for x in _shape(a.type).axes)])
            else:
                args.append(env[a.id])
        tags = an.tags.get(ins.out.id, {})
        t = _shrunk(ins.out.type, {ax for ax, tg in tags.items() if tg == "q"})
        out = sb.fresh(t, ins.out.name)
        sb.bind(out, ins.op, args, ins.attrs, ins.span)
        env[ins.out.id] = out
    ret_row = env[fn.ret.id]
    step_rows = [row_of(v) for v, _ in cached]
    step_ret = sb.emit(
        "tuple", [ret_row, *step_rows], TupleT((ret_row.type, *(r.type for r in step_rows)))
    )
    step = Function(sb.name, (), tuple(params), step_ret.type, tuple(sb.body), step_ret)
    shapes = tuple((_lengths(_type_of(fn, v)), ax) for v, ax in cached)
    out = replace(program, functions=(fill, step))
    return Incremental(out, fill.name, step.name, tuple(inputs), shapes)


def _type_of(fn: Function, v: int) -> Type:
    for p in fn.params:
        if p.id == v:
            return p.type
    for ins in fn.body:
        if ins.out.id == v:
            return ins.out.type
    raise KeyError(v)


__all__ = ["Incremental", "NoCache", "incremental", "inline"]
