"""A stacked parameter's gradient written slot by slot (issue 26, b24).

A stack's blocks (`stack{L}(Block)`) are unrolled before differentiation, each block
reading its parameters as slot l of the stacked ones. The adjoint of reading slot l is a
stack of zeros with the block's gradient in slot l, and the stack's gradient is the sum of
those L stacks. After fusion that is, for each block, a launch filling a whole stack S_l
with +0 (`fill`) and one writing its slot (W_l, the block's gradient: `fused 15 steps`),
and at the end one launch adding the L stacks element by element (R: `fused 13 steps`):
L stacks of L slots each filled and read for L slots of gradient, L² slots of traffic
(the course GPT's step: 96 fills, 6 MB of zeros a weight, 12–16 ms of its 0.8 s).

`one_stacks` writes W_l's slot straight into R's output instead, with R's expression
evaluated there: R's loads of S_l become W_l's value, its loads of the other stacks the
+0 their fill left at that element (no other launch writes there). The fills and R go.
Each element of R's output is then the same expression of the same values: the same bits
(a −0 gradient still becomes +0 where R adds a +0 to it).

Taken only where all of it is so: R one perfect nest storing its one output at its loop
variables, from loads of its inputs at the same index, constants and operations (no
loop index, no fold); each input a temporary of R's shape, read by R alone, written by a
fill of +0 and then by one launch that writes its whole output once (a perfect nest, one
store) at a slot of it; the slots disjoint and covering the stack; none of the buffers
passed to or from a host function, and the launches in one; the stacks of the kernels'
arithmetic type, or bf16 under f32 arithmetic (the slot's value then rounded to bf16 where
R reads it, as the stack's store rounded it). Anything else is left as it is.
"""

from __future__ import annotations

import dataclasses
import math

from presk_kernel.calls import fused_body, launch_paths, passed
from presk_kernel.fuse import whole_store
from presk_kernel.ir import (
    Arg,
    Const,
    Launch,
    Load,
    Loop,
    Op,
    Schedule,
    Store,
    plain,
)


def one_stacks(schedule: Schedule) -> tuple[Schedule, int]:
    """The schedule with each stacked gradient written slot by slot into its sum's output
    (the module's docstring), and how many sums were."""
    launches = schedule.launches
    host = {b.id: b for b in schedule.buffers}
    fixed = {*schedule.inputs, *schedule.outputs, *passed(schedule.body)}
    writers: dict[int, list[int]] = {}
    readers: dict[int, list[int]] = {}
    for i, lc in enumerate(launches):
        n = len(lc.kernel.inputs)
        for j, a in enumerate(lc.args):
            (readers if j < n else writers).setdefault(a.buf, []).append(i)
    owner = {} if schedule.body is None else launch_paths(schedule.body)  # its calls
    new: dict[int, Launch] = {}  # W_l rewritten
    gone: set[int] = set()  # the fills and the sums
    count = 0
    for r, lc in enumerate(launches):
        plan = _sum(lc, r, host, fixed, writers, readers, launches, owner)
        if plan is None or any(w in new or w in gone for w, _ in plan):
            continue
        out = lc.args[-1]
        _, store = _store(lc.kernel)
        last = max(w for w, _ in plan)
        for slot, (w, fill) in enumerate(plan):
            # the steps the launch now stands for: its fill's, its own, and (the last of
            # them) the sum's; `presk train`'s count without fusion stays the lowering's
            steps = _steps(launches[fill]) + _steps(launches[w])
            steps += _steps(lc) if w == last else ()
            new[w] = _written(launches[w], lc, slot, store.expr, out, steps)
            gone.add(fill)
        gone.add(r)
        count += 1
    if not count:
        return schedule, 0
    kept = [i for i in range(len(launches)) if i not in gone]
    out = dataclasses.replace(schedule, launches=tuple(new.get(i, launches[i]) for i in kept))
    if schedule.body is not None:
        out = dataclasses.replace(out, body=fused_body(schedule.body, [], kept))
    return out, count


def _sum(lc, r, host, fixed, writers, readers, launches, owner) -> list | None:
    """For a launch R summing stacks (the module's docstring), each input's (its slot's
    writer, its fill) in the order of R's inputs; else None."""
    k = lc.kernel
    if len(k.outputs) != 1 or not k.inputs or k.body != plain(k.body):
        return None
    found = _store(k)
    if found is None:
        return None
    store = found[1]
    if store.buf != len(k.inputs) or not _pure(store.expr, store.index, len(k.inputs)):
        return None
    shape = k.outputs[0].shape
    size = math.prod(shape)
    plan, slots = [], []
    for i, (b, a) in enumerate(zip(k.inputs, lc.args, strict=False)):
        hb = host[a.buf]
        if a.offset or b.shape != shape or hb.role != "temp" or a.buf in fixed:
            return None
        if math.prod(x.length for x in hb.axes) != size or readers.get(a.buf) != [r]:
            return None
        ws = writers.get(a.buf, [])
        if len(ws) != 2 or not ws[0] < ws[1] < r or _stored(b.dtype, k.compute) is None:
            return None
        fill, w = ws
        if not _fills_zero(launches[fill], a.buf) or owner.get(fill) != owner.get(r):
            return None
        wl = launches[w]
        wk = wl.kernel
        if (
            wk.body != plain(wk.body)
            or len(wk.outputs) != 1
            or wl.args[-1].buf != a.buf
            or owner.get(w) != owner.get(r)
        ):
            return None
        if any(x.buf == a.buf for x in wl.args[: len(wk.inputs)]) or wk.compute != k.compute:
            return None
        if _store(wk) is None or wk.outputs[0].dtype != b.dtype:
            return None
        at = wl.args[-1].offset
        plan.append((w, fill))
        slots.append((at, at + wk.outputs[0].size, i))
    slots.sort()
    if slots[0][0] != 0 or slots[-1][1] != size:
        return None
    if any(slots[n][1] != slots[n + 1][0] for n in range(len(slots) - 1)):
        return None
    out = lc.args[-1].buf  # R's alone: the W_l write it in R's host function instead
    if host[out].role == "input" or writers.get(out) != [r]:
        return None
    if readers.get(out) and min(readers[out]) <= max(w for w, _ in plan):
        return None
    return plan


def _store(k) -> tuple[list[Loop], Store] | None:
    """`fuse.whole_store`, its loops over the whole of the output: each element stored once."""
    found = whole_store(k)
    if found is None or tuple(lp.extent for lp in found[0]) != k.outputs[0].shape:
        return None
    return found


def _pure(e, index: tuple, inputs: int) -> bool:
    """An expression of loads of the inputs at `index`, constants and operations."""
    match e:
        case Const():
            return True
        case Load(buf, ix):
            return buf < inputs and ix == index
        case Op(_, args, _):
            return all(_pure(a, index, inputs) for a in args)
    return False  # a Var, an Index


def _fills_zero(lc: Launch, buf: int) -> bool:
    """A launch that stores +0 at every element of `buf`, and nothing else."""
    k = lc.kernel
    if k.inputs or len(k.outputs) != 1 or lc.args != (Arg(buf, 0),):
        return False
    found = _store(k)
    if found is None:
        return False
    value = found[1].expr
    return isinstance(value, Const) and value.value == 0 and math.copysign(1, value.value) > 0


def _steps(lc: Launch) -> tuple[str, ...]:
    return lc.kernel.steps or (lc.kernel.site,)


def _written(w: Launch, r: Launch, slot: int, expr, out: Arg, steps: tuple) -> Launch:
    """W_l writing R's output at its slot, its value R's expression there: R's load of
    W_l's stack (its input `slot`) W_l's value, the others' their fill's +0."""
    wk = w.kernel
    _, store = _store(wk)
    value = _substitute(expr, slot, store.expr, r.kernel)
    body = _replace_store(plain(wk.body), store, dataclasses.replace(store, expr=value))
    name = f"fused {len(steps)} steps"
    kernel = dataclasses.replace(wk, name=name, body=body, steps=steps)
    args = (*w.args[:-1], Arg(out.buf, out.offset + w.args[-1].offset))
    return Launch(kernel, args)


def _stored(dtype: str, compute: str):
    """What a value of the arithmetic's type becomes stored in a buffer of `dtype` and read
    back, as an expression of it; None where no operation says (an f64 value in f32)."""
    if dtype == compute:
        return lambda value: value
    if dtype == "bf16" and compute == "f32":  # rounded to bf16, as a fused store is
        return lambda value: Op("bf16", (value,))
    return None


def _substitute(e, slot: int, value, k):
    match e:
        case Load(buf, _):
            if buf == slot:
                return _stored(k.inputs[buf].dtype, k.compute)(value)
            return Const(0.0, k.compute)
        case Op(op, args, attr):
            return Op(op, tuple(_substitute(a, slot, value, k) for a in args), attr)
    return e


def _replace_store(body: tuple, old: Store, new: Store) -> tuple:
    out = []
    for s in body:
        if s is old:
            s = new
        elif isinstance(s, Loop):
            s = dataclasses.replace(s, body=_replace_store(s.body, old, new))
        out.append(s)
    return tuple(out)


__all__ = ["one_stacks"]
