"""Narrowing (issue 26): the folds and loops of a kernel that reads a structured mask visit
only the positions the mask allows, where leaving the others out changes no bit.

A **structured mask** is a kernel that stores, at every point of a perfect nest over its
one bool output, a comparison of two loop variables: the causal mask's `compare <=(index
i1, index i0)` (`causal_mask(seq: T)`: position i attends to j ≤ i), or `<`, `>`, `>=` of
them. Its output, written by no other launch, is then known element by element: along the
axis of the smaller side, the allowed positions are a prefix `[0, stop)` whose end is the
other side's index (plus one for `<=`, `>=`).

A kernel reading such a mask at `%m[.., j, .., i, ..]` (j its variable along the prefix
axis, i an affine index of the enclosing loops) is narrowed, statement by statement:

- `fold max of select(m, x, −inf)` gets `stop i + 1`: max(a, −∞) = a for every a (NaN, −0
  and −∞ included), so the hidden terms are no-ops at every accumulator;
- `fold add of select(m, x, +0)` gets `stop i + 1` when x is never −0 (`exp(…)`, `abs(…)`,
  +0, a positive constant, a select of such): the accumulator then starts from +0 or a
  term that is not −0, is never −0, and a + (+0) = a for every other a (NaN included);
- `for j { %o[…] = select(m, x, c) }` becomes `for j in 0 .. i + 1 { … }` and `for j in
  i + 1 .. n { %o[…] = c }`: the hidden positions get the constant the select gave them.

Every other fold is kept whole as a fold, in particular a contraction of the masked output
(the values product `a·v`, the adjoints' `dS·K`): its hidden terms are +0·v, ±0 by v's sign
and NaN for an infinite v, and skipping them changes a −0 accumulator or drops a NaN
(docs/native.md, "Causal attention"). Such a contraction is cut and repaired instead
(**zero operands**, `zero_operands`, below: `Reduce.zeros`). A narrowed fold's terms past its stop stay in its
term (the select on the mask): an executor may fold a longer prefix — a strip of rows folds
up to its last row's stop — with the same bits.

**Dead positions** (`dead_suffixes`): a temporary buffer X whose every read, in every launch,
is guarded — inside the allowed branch of a `select(m, …, c)` on a mask whose index aligns
with the read's (the read's `j` is the mask's prefix variable and its `i` the mask's other
index), or inside a loop bounded to that prefix (`for j in 0 .. i + 1`) — is never used at
its hidden positions (x[…, i, …, j, …] with j ≥ i + plus): the select gives its constant
there whatever X holds, and a bounded loop does not run. So its one writer need not store
them: the loop of the writer's one store to X along j gets `stop i + plus`. The scores
product (QKᵀ, a contraction the softmax reads through the mask) computes its allowed
triangle only, and so does an elementwise kernel between the two (the scores' scale, when
not fused into the softmax), whose reads are then bounded in turn (launches are walked
from the last). No term of any fold changes, only which dead values are computed: the bits
of every value read are the same. The hidden positions of X hold whatever the arena held
(an executor never reads them but under the select, whose other branch it takes).

**Zero operands** (`zero_operands`): a temporary written by one launch that is ±0 or not
finite at every hidden position — the softmax's weights (its quotients' hidden loop stores
+0), a product or quotient of such a load — makes each contraction reading it along its
fold cut at the prefix, where it is known finite there (±0 constants, a quotient by a
constant neither zero nor NaN: the masked adjoint's dS = select(m, a·(g − Σ), +0)/√d):
`Reduce.zeros` (terms from `p + offset` on, the values product's and dS·K's) or
`zeros_first` (terms before it, the transposed products aᵀ·g and dSᵀ·Q). An executor
folds the allowed terms and folds the rest only where the result is −0 or a term it
skipped is not finite (the other operand's: the ±0 one is finite): elsewhere the rest is
±0 terms, which change no other accumulator. The whole fold's bits.
"""

from __future__ import annotations

import dataclasses
import math

from presk_kernel.contract import perfect_nest
from presk_kernel.ir import (
    Affine,
    Arg,
    Buffer,
    Const,
    Index,
    Kernel,
    Launch,
    Layout,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    Var,
    plain,
)

# a comparison `a OP b` of two loop variables -> (which side runs over the prefix axis,
# the end's offset past the other side): a <= b allows a in [0, b + 1)
_PREFIX = {"<=": (0, 1), "<": (0, 0), ">=": (1, 1), ">": (1, 0)}


@dataclasses.dataclass(frozen=True, slots=True)
class Mask:
    """A structured mask's buffer: along axis `along` the allowed positions are [0, the
    index at axis `by` + `plus`)."""

    along: int
    by: int
    plus: int
    shape: tuple[int, ...] = dataclasses.field(default=(), compare=False)  # the buffer's


def mask_of(k: Kernel) -> Mask | None:
    """The structure of the mask `k` stores, or None: a perfect nest over every axis of its
    one bool output, storing at its own point a comparison of two of its variables."""
    if k.inputs or len(k.outputs) != 1 or k.outputs[0].dtype != "bool":
        return None
    body, loops = k.body, []
    while len(body) == 1 and isinstance(body[0], Loop):
        lp = body[0]
        if lp.serial or lp.start is not None or lp.stop is not None:
            return None
        loops.append(lp)
        body = lp.body
    out = k.outputs[0]
    if len(body) != 1 or not isinstance(body[0], Store) or len(loops) != len(out.axes):
        return None
    st = body[0]
    names = [lp.var for lp in loops]
    if st.index != tuple(Affine.var(v) for v in names):
        return None
    if any(lp.extent != ax.length for lp, ax in zip(loops, out.axes, strict=True)):
        return None
    e = st.expr
    if not (isinstance(e, Op) and e.op == "compare" and e.attr in _PREFIX):
        return None
    if not all(isinstance(a, Index) and a.var in names for a in e.args):
        return None
    side, plus = _PREFIX[e.attr]
    along, by = (names.index(e.args[side].var), names.index(e.args[1 - side].var))
    if along == by or out.axes[along].length != out.axes[by].length:
        return None
    return Mask(along, by, plus, out.shape)


def never_negative_zero(e) -> bool:
    """Whether `e` is never −0 (a +0, a positive, +∞ or NaN): the terms a sum may skip +0s
    beside."""
    match e:
        case Const(value, dtype):
            return dtype not in ("bool",) and (value > 0 or math.copysign(1.0, value) > 0)
        case Op("exp" | "abs", _, _):
            return True
        case Op("select", (_, a, b), _):
            return never_negative_zero(a) and never_negative_zero(b)
    return False


class _Narrow:
    """One kernel's narrowing, given its mask inputs (kernel buffer -> Mask)."""

    def __init__(self, k: Kernel, masks: dict[int, Mask]) -> None:
        self.k, self.masks = k, masks
        self.changed = 0

    def bound(self, cond, var: str, extent: int) -> Affine | None:
        """The end of the prefix `cond` (a load of a mask) allows along `var`, or None."""
        if not isinstance(cond, Load) or cond.buf not in self.masks:
            return None
        m = self.masks[cond.buf]
        along, by = cond.index[m.along], cond.index[m.by]
        if along != Affine.var(var) or not isinstance(by, Affine):
            return None
        if any(v == var for v, _ in by.terms):
            return None
        if self.k.buffers[cond.buf].axes[m.along].length != extent:
            return None
        return Affine(by.terms, by.const + m.plus)

    def fold(self, r: Reduce) -> Reduce:
        if r.op not in ("max", "add") or r.stop is not None or r.block is not None:
            return r
        if len(r.vars) != 1 or r.body:
            return r
        (var, _, n), (term,) = r.vars[0], r.terms
        if not (isinstance(term, Op) and term.op == "select"):
            return r
        cond, value, hidden = term.args
        if not isinstance(hidden, Const):
            return r
        if r.op == "max" and hidden.value == -math.inf:
            ok = True  # max(a, −inf) = a for every a
        elif r.op == "add" and hidden.value == 0 and math.copysign(1.0, hidden.value) > 0:
            ok = never_negative_zero(value)  # an accumulator never −0: a + (+0) = a
        else:
            ok = False
        stop = self.bound(cond, var, n) if ok else None
        if stop is None:
            return r
        self.changed += 1
        return dataclasses.replace(r, stop=stop)

    def loop(self, lp: Loop) -> tuple:
        """A loop storing `select(mask, x, c)` split at the prefix's end: its hidden part
        stores `c`."""
        if lp.serial or lp.start is not None or lp.stop is not None or len(lp.body) != 1:
            return (lp,)
        st = lp.body[0]
        if not isinstance(st, Store):
            return (lp,)
        e = st.expr
        if not (isinstance(e, Op) and e.op == "select" and isinstance(e.args[2], Const)):
            return (lp,)
        stop = self.bound(e.args[0], lp.var, lp.extent)
        if stop is None:
            return (lp,)
        self.changed += 1
        allowed = dataclasses.replace(lp, stop=stop)
        hidden = dataclasses.replace(
            lp, start=stop, body=(dataclasses.replace(st, expr=e.args[2]),)
        )
        return (allowed, hidden)

    def body(self, body: tuple) -> tuple:
        out: list = []
        for s in body:
            match s:
                case Reduce():
                    out.append(self.fold(dataclasses.replace(s, body=self.body(s.body))))
                case Loop():
                    inner = dataclasses.replace(s, body=self.body(s.body))
                    out.extend(self.loop(inner))
                case _:
                    out.append(s)
        return tuple(out)


# ---- dead positions -------------------------------------------------------------------------

# a guard: the enclosing select or loop uses what it reads at prefix variable `j` only below
# `stop` (affine in the enclosing loops' variables, not j)
_Guard = tuple[str, Affine]


def _guards_of_select(e: Op, masks: dict[int, Mask]) -> _Guard | None:
    """The guard `select(m[…], x, c)` puts on x, m a structured mask: x is used where the
    mask allows, j below the mask's other index plus its offset."""
    cond, _, hidden = e.args
    if not isinstance(hidden, Const) or not isinstance(cond, Load) or cond.buf not in masks:
        return None
    m = masks[cond.buf]
    along, by = cond.index[m.along], cond.index[m.by]
    if not isinstance(along, Affine) or not isinstance(by, Affine):
        return None
    if along.const or len(along.terms) != 1 or along.terms[0][1] != 1:
        return None
    j = along.terms[0][0]
    if any(v == j for v, _ in by.terms):
        return None
    return j, Affine(by.terms, by.const + m.plus)


class _Reads:
    """Where a kernel reads its buffer `x`: each read's (prefix axis, other axis, offset)
    under some enclosing guard, or `ok` False when a read is unguarded."""

    def __init__(self, x: int, masks: dict[int, Mask], shape: tuple[int, ...]) -> None:
        self.x, self.masks, self.shape = x, masks, shape
        self.ok = True
        self.found: set[tuple[int, int, int]] = set()

    def load(self, ld: Load, guards: tuple) -> None:
        fits = set()
        for j, stop in guards:
            at = [a for a, ix in enumerate(ld.index) if ix == Affine.var(j)]
            if len(at) != 1:
                continue
            for b, ix in enumerate(ld.index):
                if b == at[0] or not isinstance(ix, Affine) or ix.terms != stop.terms:
                    continue
                plus = stop.const - ix.const
                if plus in (0, 1) and self.shape[at[0]] == self.shape[b]:
                    fits.add((at[0], b, plus))
        if len(fits) != 1:
            self.ok = False
        self.found |= fits

    def expr(self, e, guards: tuple) -> None:
        match e:
            case Load(buf, index):
                for ix in index:  # an index is never guarded: a gather reads where it says
                    if not isinstance(ix, Affine):
                        self.expr(ix, ())
                if buf == self.x:
                    self.load(e, guards)
            case Op("select", (cond, value, hidden), _):
                g = _guards_of_select(e, self.masks)
                self.expr(cond, guards)
                self.expr(value, guards if g is None else (*guards, g))
                self.expr(hidden, guards)
            case Op(_, args, _):
                for a in args:
                    self.expr(a, guards)

    def body(self, body: tuple, guards: tuple) -> None:
        for st in body:
            match st:
                case Let(_, e):
                    self.expr(e, guards)
                case Store(_, index, e):
                    for ix in index:
                        if not isinstance(ix, Affine):
                            self.expr(ix, ())
                    self.expr(e, guards)
                case Loop():
                    inner = guards
                    if st.start is None and st.stop is not None:
                        inner = (*guards, (st.var, st.stop))
                    self.body(st.body, inner)
                case Reduce():
                    self.body(st.body, guards)
                    for t in st.terms:
                        self.expr(t, guards)
                    if st.resume is not None:
                        self.expr(st.resume, guards)
                case _:  # a laid-out statement: not looked into
                    self.ok = False


def _stores(body: tuple, buf: int) -> int:
    n = 0
    for st in body:
        match st:
            case Store(b, _, _):
                n += b == buf
            case Loop() | Reduce():
                n += _stores(st.body, buf)
            case _:
                n += 1  # a laid-out statement: counted as a store, so left alone
    return n


def _bound_store(
    body: tuple, buf: int, dead: tuple[int, int, int], extent: int, outer: tuple
) -> tuple:
    """`body` with the loop around its one store to `buf` bounded to the allowed prefix
    (`dead`: the prefix axis, the other axis, the offset), or the same body when that loop is
    not a plain loop along the prefix axis inside one along the other."""
    along, by, plus = dead
    out = []
    for st in body:
        if isinstance(st, Loop) and _stores(st.body, buf):
            inner = [s for s in st.body if isinstance(s, Store) and s.buf == buf]
            if inner:
                (store,) = inner
                lp_ok = not st.serial and st.start is None and st.stop is None
                ix = store.index[by]
                if (
                    lp_ok
                    and st.extent == extent
                    and store.index[along] == Affine.var(st.var)
                    and isinstance(ix, Affine)
                    and ix.const == 0
                    and len(ix.terms) == 1
                    and ix.terms[0][1] == 1
                    and ix.terms[0][0] in outer
                    and all(isinstance(s, Let | Reduce | Store) for s in st.body)
                    and all(s.buf == buf for s in st.body if isinstance(s, Store))
                ):
                    st = dataclasses.replace(st, stop=Affine(((ix.terms[0][0], 1),), plus))
            else:
                st = dataclasses.replace(
                    st, body=_bound_store(st.body, buf, dead, extent, (*outer, st.var))
                )
        out.append(st)
    return tuple(out)


def dead_suffixes(schedule: Schedule, masks: dict[tuple[int, int], Mask]) -> tuple[Schedule, int]:
    """The schedule with each temporary buffer whose hidden positions nothing uses (see the
    module's doc) computed on its allowed positions only, and how many loops were bounded."""
    host = {b.id: b for b in schedule.buffers}
    launches = list(schedule.launches)
    count = 0
    for w in reversed(range(len(launches))):
        wk = launches[w].kernel
        for o, arg in enumerate(launches[w].args[len(wk.inputs) :], len(wk.inputs)):
            hb = host[arg.buf]
            if hb.role != "temp" or arg.buf in schedule.outputs or arg.buf in schedule.inputs:
                continue
            if wk.buffers[o].dtype not in ("f64", "f32", "bf16"):
                continue
            if _stores(wk.body, o) != 1:
                continue
            shape = wk.buffers[o].shape
            dead = _dead(launches, w, arg, masks, shape)
            if dead is None:
                continue
            body = _bound_store(wk.body, o, dead, shape[dead[0]], ())
            if body != wk.body:
                count += 1
                wk = dataclasses.replace(wk, body=body)
                order = tuple(lp.var for lp in perfect_nest(wk))
                if wk.layout.order != order:  # the bounded loop is body now, not layout
                    wk = dataclasses.replace(wk, layout=Layout(order=order))
                launches[w] = Launch(wk, launches[w].args)
    return dataclasses.replace(schedule, launches=tuple(launches)), count


def _dead(launches: list, w: int, x: Arg, masks: dict, shape: tuple) -> tuple[int, int, int] | None:
    """The hidden positions (prefix axis, other axis, offset) of `x`, written by launch `w`,
    that no launch uses; None when some read is unguarded, or none is."""
    found: set = set()
    for r, launch in enumerate(launches):
        k = launch.kernel
        for i, a in enumerate(launch.args):
            if a.buf != x.buf:
                continue
            if r == w and i >= len(k.inputs):
                continue
            if i >= len(k.inputs) or a.offset != x.offset or k.buffers[i].shape != shape:
                return None  # another writer, or a read of another slice or shape
            reads = _Reads(i, _bound(launch, masks), k.buffers[i].shape)
            reads.body(k.body, ())
            if not reads.ok:
                return None
            found |= reads.found
    return found.pop() if len(found) == 1 else None


def _writers(schedule: Schedule) -> dict[int, int]:
    """How many launches write each host buffer."""
    writers: dict[int, int] = {}
    for launch in schedule.launches:
        for a in launch.args[len(launch.kernel.inputs) :]:
            writers[a.buf] = writers.get(a.buf, 0) + 1
    return writers


def _masks(schedule: Schedule) -> dict[tuple[int, int], Mask]:
    """The structured masks the schedule's launches store, by (host buffer, offset): each
    written by one launch."""
    writers = _writers(schedule)
    masks: dict[tuple[int, int], Mask] = {}  # (host buffer, offset) -> its structure
    for launch in schedule.launches:
        k = launch.kernel
        m = mask_of(dataclasses.replace(k, body=plain(k.body)))
        if m is not None:
            (arg,) = launch.args
            if writers.get(arg.buf) == 1:
                masks[(arg.buf, arg.offset)] = m
    return masks


def mask_inputs(schedule: Schedule) -> list[dict[int, Mask]]:
    """For each launch, the inputs (kernel buffers) bound to a structured mask, with its
    structure: an executor may read such an input as the comparison it holds (the C
    backend's `KernelC`: a vector of a select on it then holds its values' lanes, not the
    mask's bytes)."""
    masks = _masks(schedule)
    return [_bound(launch, masks) for launch in schedule.launches]


def _bound(launch: Launch, masks: dict[tuple[int, int], Mask]) -> dict[int, Mask]:
    """The launch's inputs (kernel buffers) bound to a structured mask of `masks`, seen at
    the mask's own shape."""
    k = launch.kernel
    out = {}
    for i, a in enumerate(launch.args[: len(k.inputs)]):
        m = masks.get((a.buf, a.offset))
        if m is not None and k.inputs[i].shape == m.shape:
            out[i] = m
    return out


def dead_stores(schedule: Schedule) -> dict[int, set[int]]:
    """The outputs (launch -> kernel buffers) whose one store runs in a loop bounded to the
    allowed prefix of positions nothing uses (`dead_suffixes`'s, laid out or not): what
    it leaves unstored no launch sees, so it need not start at zero either."""
    masks = _masks(schedule)
    if not masks:
        return {}
    host = {b.id: b for b in schedule.buffers}
    launches = [
        Launch(dataclasses.replace(lc.kernel, body=plain(lc.kernel.body)), lc.args)
        for lc in schedule.launches
    ]
    out: dict[int, set[int]] = {}
    for w, launch in enumerate(launches):
        k = launch.kernel
        for o, arg in enumerate(launch.args[len(k.inputs) :], len(k.inputs)):
            if host[arg.buf].role != "temp" or arg.buf in schedule.outputs:
                continue
            if _stores(k.body, o) != 1 or _store_bound(k.body, o) is None:
                continue
            shape = k.buffers[o].shape
            dead = _dead(launches, w, arg, masks, shape)
            if dead is not None and _store_bound(k.body, o) == dead:
                out.setdefault(w, set()).add(o)
    return out


def _store_bound(body: tuple, buf: int) -> tuple[int, int, int] | None:
    """(prefix axis, other axis, offset) of the bounded loop around the one store to `buf`,
    when `_bound_store` wrote it: `for j in 0 .. p + plus { … buf[.., p, .., j, ..] = … }`."""
    for st in body:
        if not isinstance(st, Loop) or not _stores(st.body, buf):
            continue
        inner = [s for s in st.body if isinstance(s, Store) and s.buf == buf]
        if not inner:
            return _store_bound(st.body, buf)
        (store,) = inner
        stop = st.stop
        if st.start is not None or stop is None or len(stop.terms) != 1:
            return None
        if stop.terms[0][1] != 1 or stop.const not in (0, 1):
            return None
        along = [a for a, ix in enumerate(store.index) if ix == Affine.var(st.var)]
        by = [a for a, ix in enumerate(store.index) if ix == Affine.var(stop.terms[0][0])]
        if len(along) != 1 or len(by) != 1:
            return None
        return along[0], by[0], stop.const
    return None


def unstored(k: Kernel, o: int):
    """The positions of output `o` that a loop bounded to the allowed prefix leaves
    unstored (`dead_suffixes`' kernels: what an executor may leave as it finds it, or
    compute: a GEMM's block of rows computes up to its last row's bound), as a boolean array
    of the buffer's shape; None when it stores every position."""
    import numpy as np

    bound = _store_bound(plain(k.body), o)
    if bound is None:
        return None
    along, by, plus = bound
    shape = k.buffers[o].shape
    grid = np.indices(shape)
    return grid[along] >= grid[by] + plus


def narrow(schedule: Schedule) -> tuple[Schedule, int]:
    """The schedule with the kernels that read a structured mask narrowed, and how many
    folds and loops were."""
    masks = _masks(schedule)
    if not masks:
        return schedule, 0
    launches, count = [], 0
    for launch in schedule.launches:
        k = launch.kernel
        mine = _bound(launch, masks)
        if not mine:
            launches.append(launch)
            continue
        n = _Narrow(k, mine)
        body = n.body(k.body)
        count += n.changed
        launches.append(
            Launch(dataclasses.replace(k, body=body), launch.args) if n.changed else launch
        )
    narrowed = dataclasses.replace(schedule, launches=tuple(launches))
    narrowed, dead = dead_suffixes(narrowed, masks)
    narrowed, zeros = zero_operands(narrowed, masks)
    return narrowed, count + dead + zeros


# ---- zero operands ---------------------------------------------------------------------------

# A hidden region of a buffer: (its prefix axis, its other axis, offset): x[.., p, .., j, ..]
# with j ≥ p + offset. In an expression: (the variable j, the variable p, offset, finite),
# or ALL; `finite`: ±0 there, never NaN or infinite.
ALL = ("", "", 0, True)


def _region(
    e,
    lets: dict,
    masks: dict[int, Mask],
    known: dict,
    steady: frozenset = frozenset(),
    compute: str = "f64",
):
    """Where `e` is ±0 or not finite whatever else it reads (ALL, or (j, p, offset, finite):
    where j ≥ p + offset), or None: a ±0 constant; a load of a buffer `known` so there at
    an index aligned with its region; a product or a quotient of such (±0·y is ±0 or NaN,
    ±0/y ±0 or NaN, and a value not finite stays one or NaN: not finite), but a quotient by
    a constant neither zero nor NaN keeps ±0 finite (`_steady`: the scores' scale sqrt(d),
    inline or a 0-d input in `steady`, in arithmetic `compute`); a negation;
    `select(m, x, ±0)` on a structured mask, where the mask hides (or both branches such).
    A sum is not."""

    def region(x):
        return _region(x, lets, masks, known, steady, compute)

    match e:
        case Const(value, _):
            return ALL if value == 0 else None
        case Var(name):
            return lets.get(name)
        case Load(buf, index) if buf in known:
            along, by, plus, finite = known[buf]
            j, p = index[along], index[by]
            if not (_plain_var(j) and _plain_var(p)) or j == p:
                return None
            return (j.terms[0][0], p.terms[0][0], plus, finite)
        case Op("mul", (x, y), _):
            r = region(x)
            r = r if r is not None else region(y)
            return None if r is None else (*r[:3], False)
        case Op("div", (x, y), _):
            r = region(x)
            return (
                None if r is None else (*r[:3], r != ALL and r[3] and _steady(y, steady, compute))
            )
        case Op("neg", (x,), _):
            return region(x)
        case Op("select", (_, x, c), _):
            g = _guards_of_select(e, masks)
            if g is not None and region(c) == ALL:
                j, stop = g
                if _plain_var(Affine(stop.terms, 0)) and stop.const in (0, 1):
                    return (j, stop.terms[0][0], stop.const, True)
            rx, rc = region(x), region(c)
            if rx == ALL:
                return rc
            if rc == ALL or (rc is not None and rx is not None and rc[:3] == rx[:3]):
                return None if rx is None else (*rx[:3], rx[3] and rc[3])
            return None
    return None


def _steady(e, steady: frozenset, compute: str) -> bool:
    """Whether `e` is a constant neither zero nor NaN, by which ±0 divides to ±0: an
    expression of constants alone (the scale sqrt(d), evaluated in the kernel's `compute`
    type), or a load of a 0-d input in `steady` (the same, computed by another launch: a
    residual of the forward pass)."""
    match e:
        case Load(buf, ()) if buf in steady:
            return True
    if _varies(e):
        return False
    value = _value(e, compute)
    return value != 0 and value == value


def _value(e, dtype: str) -> float:
    """The value of an expression of constants, as the kernel interpreter computes it."""
    import numpy as np

    from presk_kernel.interp import NUMPY, Run

    out = np.zeros((), NUMPY[dtype])
    k = Kernel("constant", "", (), (Buffer(0, dtype, ()),), (Store(0, (), e),), dtype)
    Run(k, [out]).run()
    return float(out)


def _varies(e) -> bool:
    """Whether `e` reads a buffer, a variable or an index."""
    match e:
        case Load() | Var() | Index():
            return True
        case Op(_, args, _):
            return any(_varies(a) for a in args)
    return False


def _steady_scalars(schedule: Schedule) -> set[tuple[int, int]]:
    """The 0-d temporaries, by (host buffer, offset), that a launch computes from constants
    alone (no inputs, one store at `()`: the attention scores' scale sqrt(d), which the
    backward pass reads as a residual) and finds neither zero nor NaN (`_steady`)."""
    host = {b.id: b for b in schedule.buffers}
    writers = _writers(schedule)
    out: set[tuple[int, int]] = set()
    for launch in schedule.launches:
        k = launch.kernel
        body = plain(k.body)
        if k.inputs or len(k.outputs) != 1 or len(body) != 1 or not isinstance(body[0], Store):
            continue
        (arg,) = launch.args
        b = k.buffers[0]
        if b.shape or b.dtype not in ("f64", "f32") or writers.get(arg.buf) != 1:
            continue
        if (
            host[arg.buf].role == "temp"
            and not body[0].index
            and _steady(body[0].expr, frozenset(), b.dtype)
        ):
            out.add((arg.buf, arg.offset))
    return out


def _zero_suffix(
    k: Kernel, o: int, masks: dict[int, Mask], known: dict, steady: frozenset = frozenset()
) -> tuple | None:
    """(prefix axis, other axis, offset, finite) when kernel `k` leaves its output `o` ±0 or
    not finite at every hidden position (x[.., p, .., j, ..] with j ≥ p + offset,
    `_region`; `finite`: ±0 there): each store to `o` sits in a nest of loops over all of
    its axes, the last one bounded to the allowed prefix (a narrowed quotients' loop), or
    from its end storing what is ±0 there (their hidden part), or whole storing what is ±0
    where the mask hides; None otherwise. `known`: the kernel's inputs known so (kernel
    buffer -> region)."""
    found: set = set()
    zero, finite = False, True

    def walk(body: tuple, loops: tuple, lets: dict) -> bool:
        nonlocal zero, finite
        lets = dict(lets)
        for st in body:
            match st:
                case Loop():
                    if not walk(st.body, (*loops, st), lets):
                        return False
                case Reduce():
                    if _stores(st.body, o):
                        return False
                case Let(name, e):
                    lets[name] = _region(e, lets, masks, known, steady, k.compute)
                case Store(buf, index, e) if buf == o:
                    if not loops:
                        return False
                    at = {lp.var: lp for lp in loops}
                    axes = [ix.terms[0][0] if _plain_var(ix) else None for ix in index]
                    if None in axes or len(set(axes)) != len(axes) or not set(axes) <= set(at):
                        return False
                    shape = k.buffers[o].axes
                    if any(at[v].extent != ax.length for v, ax in zip(axes, shape, strict=True)):
                        return False
                    last = loops[-1]
                    bounded = [lp for lp in loops if lp.start is not None or lp.stop is not None]
                    if bounded not in ([], [last]):
                        return False
                    region = _region(e, lets, masks, known, steady, k.compute)
                    if bounded:
                        if (last.start is not None) == (last.stop is not None):
                            return False
                        bound = last.start if last.start is not None else last.stop
                        if not _plain_var(Affine(bound.terms, 0)) or bound.const not in (0, 1):
                            return False
                        p = bound.terms[0][0]
                        if p not in axes:
                            return False
                        where = (last.var, p, bound.const)
                        if last.start is not None:  # the hidden part: ±0 or not finite there
                            if region is None or (region != ALL and region[:3] != where):
                                return False
                            zero, finite = True, finite and region[3]
                        found.add((axes.index(last.var), axes.index(p), bound.const))
                        continue
                    if region is None or region == ALL:  # ALL: a whole buffer of zeros
                        return False
                    j, p, plus, fin = region
                    if j not in axes or p not in axes:
                        return False
                    found.add((axes.index(j), axes.index(p), plus))
                    zero, finite = True, finite and fin
                case Store():
                    pass
                case _:  # a laid-out statement: not looked into
                    return False
        return True

    if not walk(k.body, (), {}) or not zero or len(found) != 1:
        return None
    return (*found.pop(), finite)


def _plain_var(ix) -> bool:
    """Whether an index is one variable, coefficient 1, offset 0."""
    return isinstance(ix, Affine) and ix.const == 0 and len(ix.terms) == 1 and ix.terms[0][1] == 1


def _known_zeros(schedule: Schedule, masks: dict) -> dict:
    """The temporaries written by one launch that leave them ±0 or not finite past a
    structured mask's prefix (`_zero_suffix`): (host buffer, offset) -> (its writer, its
    shape, its region), found in launch order (a region proved from another's)."""
    host = {b.id: b for b in schedule.buffers}
    writers = _writers(schedule)
    known: dict = {}
    scalars = _steady_scalars(schedule)
    for w, launch in enumerate(schedule.launches):
        k = launch.kernel
        outs = list(enumerate(launch.args))[len(k.inputs) :]
        if not any(k.buffers[o].dtype in ("f64", "f32") for o, _ in outs):
            continue
        mine_masks = _bound(launch, masks)
        mine = {
            j: known[(b.buf, b.offset)][2]
            for j, b in enumerate(launch.args[: len(k.inputs)])
            if (b.buf, b.offset) in known and known[(b.buf, b.offset)][1] == k.buffers[j].shape
        }
        if not mine_masks and not mine:
            continue
        for o, arg in outs:
            if writers.get(arg.buf) != 1 or host[arg.buf].role != "temp":
                continue
            if k.buffers[o].dtype not in ("f64", "f32"):
                continue
            steady = frozenset(
                j
                for j, b in enumerate(launch.args[: len(k.inputs)])
                if (b.buf, b.offset) in scalars
            )
            z = _zero_suffix(k, o, mine_masks, mine, steady)
            if z is not None:
                known[(arg.buf, arg.offset)] = (w, k.buffers[o].shape, z)
    return known


def _with_zeros(body: tuple, zeros: dict) -> tuple:
    """`body` with each contraction reading a zero suffix along its one variable marked
    (`Reduce.zeros`): `zeros` maps a kernel buffer to its (prefix axis, other axis, offset,
    finite)."""
    out = []
    for st in body:
        match st:
            case Loop():
                st = dataclasses.replace(st, body=_with_zeros(st.body, zeros))
            case Reduce(_, "fma", ((v, _, _),), (), terms) if (
                st.stop is None and st.block is None and st.zeros is None
            ):
                for t in terms:
                    if not isinstance(t, Load) or t.buf not in zeros:
                        continue
                    along, by, plus, finite = zeros[t.buf]
                    j, p = t.index[along], t.index[by]
                    if not (_plain_var(j) and _plain_var(p)) or j == p:
                        continue
                    if j == Affine.var(v) and finite:  # ±0 from p + plus on: its last terms
                        # (not when that operand may be NaN there: the executor would read
                        # the part it skips to find out, a pass as long as the fold it saves,
                        # over rows the GEMM reads where they lie — dS·K measured slower
                        # when its dS was a·(g − Σ)/c there, before the adjoint's mask)
                        bound = Affine(((p.terms[0][0], 1),), plus)
                        st = dataclasses.replace(st, zeros=bound, zeros_finite=finite)
                        break
                    if p == Affine.var(v) and finite:  # ±0 while v < j + 1 − plus: its first
                        # terms (aᵀ·g, dSᵀ·Q)
                        bound = Affine(((j.terms[0][0], 1),), 1 - plus)
                        st = dataclasses.replace(
                            st, zeros=bound, zeros_first=True, zeros_finite=finite
                        )
                        break
        out.append(st)
    return tuple(out)


def zero_operands(schedule: Schedule, masks: dict) -> tuple[Schedule, int]:
    """The schedule with each contraction whose one operand is ±0 (or not finite) past a
    structured mask's allowed prefix along its fold — the softmax's weights, stored +0
    where the mask hides (the values product `a·v`, and `aᵀ·g`), the masked softmax
    adjoint's `select(m, a·(g − Σ), +0)/√d` (`dS·K`, `dSᵀ·Q`), known finite — marked to fold
    that prefix only (`Reduce.zeros`: the rest where
    the accumulator is −0 or a term past it is not finite), and how many were."""
    if not masks:
        return schedule, 0
    known = _known_zeros(schedule, masks)
    if not known:
        return schedule, 0
    launches = list(schedule.launches)
    count = 0
    for r, launch in enumerate(launches):
        k = launch.kernel
        zeros = {
            i: known[(a.buf, a.offset)][2]
            for i, a in enumerate(launch.args[: len(k.inputs)])
            if (a.buf, a.offset) in known
            and known[(a.buf, a.offset)][0] < r
            and known[(a.buf, a.offset)][1] == k.buffers[i].shape
        }
        if not zeros:
            continue
        body = _with_zeros(k.body, zeros)
        if body != k.body:
            count += 1
            launches[r] = Launch(dataclasses.replace(k, body=body), launch.args)
    return dataclasses.replace(schedule, launches=tuple(launches)), count


__all__ = [
    "Mask",
    "dead_stores",
    "dead_suffixes",
    "mask_of",
    "narrow",
    "never_negative_zero",
    "unstored",
    "zero_operands",
]
