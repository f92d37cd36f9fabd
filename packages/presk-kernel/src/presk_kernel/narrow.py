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

Every other fold is kept whole, in particular a contraction of the masked output (the
values product `a·v`, the adjoints' `dS·K`): its hidden terms are +0·v, ±0 by v's sign and
NaN for an infinite v, and skipping them changes a −0 accumulator or drops a NaN
(docs/native.md, "Causal attention"). A narrowed fold's terms past its stop stay in its
term (the select on the mask): an executor may fold a longer prefix — a strip of rows folds
up to its last row's stop — with the same bits.
"""

from __future__ import annotations

import dataclasses
import math

from presk_kernel.ir import (
    Affine,
    Const,
    Index,
    Kernel,
    Launch,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
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
    return Mask(along, by, plus)


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


def narrow(schedule: Schedule) -> tuple[Schedule, int]:
    """The schedule with the kernels that read a structured mask narrowed, and how many
    folds and loops were."""
    writers: dict[int, int] = {}
    for launch in schedule.launches:
        for a in launch.args[len(launch.kernel.inputs) :]:
            writers[a.buf] = writers.get(a.buf, 0) + 1
    masks: dict[tuple[int, int], Mask] = {}  # (host buffer, offset) -> its structure
    for launch in schedule.launches:
        m = mask_of(launch.kernel)
        if m is not None:
            (arg,) = launch.args
            if writers.get(arg.buf) == 1:
                masks[(arg.buf, arg.offset)] = m
    if not masks:
        return schedule, 0
    launches, count = [], 0
    for launch in schedule.launches:
        k = launch.kernel
        mine = {
            i: masks[(a.buf, a.offset)]
            for i, a in enumerate(launch.args[: len(k.inputs)])
            if (a.buf, a.offset) in masks
        }
        if not mine:
            launches.append(launch)
            continue
        n = _Narrow(k, mine)
        body = n.body(k.body)
        count += n.changed
        launches.append(
            Launch(dataclasses.replace(k, body=body), launch.args) if n.changed else launch
        )
    return dataclasses.replace(schedule, launches=tuple(launches)), count


__all__ = ["Mask", "mask_of", "narrow", "never_negative_zero"]
