"""A convolution in the export as `F.conv1d` (issue 29).

The checker writes `conv(x, w, axis t, …)` as the primitives it is made of
(presk_types.conv): x padded (P), then for each tap k = 0 … W − 1 the slice
`P[t: k·d .. k·d + L]` (with a stride s: padded after to a multiple of s, `split` into
(t, t_stride: s), the first of each s kept) contracted by `ein` with `sum(w[t: k .. k + 1])`,
the taps added in increasing k. The `add` that ends such a chain is written here as one
`F.conv1d` of P and w: P's axes permuted to (batch…, groups…, channels…, t) and flattened to
torch's (N, G·C, n), w's to (G·O, C, W), `groups=G`, `dilation=d`, `stride=s`, and the
result unflattened and permuted to the `ein`s' axes. Which axis plays which part comes from
the `ein`s' own names: an axis of both operands kept in the result is a group, summed a
channel; of the slice alone a batch axis; of the tap alone an output channel.

Anything else — a chain that is not the whole of a convolution, a tensor with an open
prefix or an unnamed axis — is not recognised (None), and the primitives' own rules write
it, as before: the same values, less one call. Its gradient is torch's autograd through
`F.conv1d` where the export's `grad` is `torch.func.grad`; presk's own adjoints of the
primitives are the primitives' rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from presk_core.ir import Instr, Value
from presk_types.presburger import Lin
from presk_types.types import shape_of

from presk_export.pyexpr import ATOM, Expr, call, method

if TYPE_CHECKING:
    from presk_export.body import Body


@dataclass(frozen=True, slots=True)
class Conv:
    """What the chain computes: F.conv1d of `source` (P) and `taps` (w) along `axis`."""

    source: Value
    taps: Value
    axis: str
    dilation: int
    stride: int
    out: tuple[str, ...]  # the eins' result axes
    names: tuple[tuple[str, ...], ...]  # the eins' operands' names


def _is(ins: Instr | None, op: str, axis: str | None = None) -> bool:
    return ins is not None and ins.op == op and (axis is None or ins.attr("axes") == (axis,))


def _def(defs: dict[int, Instr], a) -> Instr | None:
    """The instruction that makes operand `a` (None for a literal or an entry's argument)."""
    return defs.get(a.id) if isinstance(a, Value) else None


def _made(defs: dict[int, Instr], a, op: str, axis: str | None = None) -> Instr | None:
    """`a`'s instruction if it is `op` (along `axis` alone, if given) of a value, else None."""
    ins = _def(defs, a)
    return ins if _is(ins, op, axis) and isinstance(ins.args[0], Value) else None


def _zero(e: Lin) -> bool:
    return e.is_const and e.constant == 0


def _tap(defs: dict[int, Instr], a, t: str) -> tuple[Value, Lin] | None:
    """`sum(axis t, crop(axis t, w, k .. k + 1))`: (w, k)."""
    s = _made(defs, a, "sum", t)
    c = _made(defs, s.args[0], "crop", t) if s is not None else None
    if c is None:
        return None
    start, stop = c.attr("start"), c.attr("stop")
    if not _zero(stop - start - 1):
        return None
    return c.args[0], start


def _window(defs: dict[int, Instr], a) -> tuple[Value, str, Lin, Lin, int] | None:
    """A tap's slice of P: `crop(axis t, P, start .. start + L)`, or with a stride s
    `sum(crop(split(pad?(that))))` keeping the first of each s: (P, t, start, L, s)."""
    x = _def(defs, a)
    stride = 1
    if x is not None and x.op == "sum":
        if len(x.attr("axes")) != 1:
            return None
        (r,) = x.attr("axes")
        kept = _made(defs, x.args[0], "crop", r)
        if kept is None or not (_zero(kept.attr("start")) and _zero(kept.attr("stop") - 1)):
            return None
        sp = _made(defs, kept.args[0], "split")
        if sp is None or len(sp.attr("shapes")) != 2:
            return None
        ((t, _), (r2, s)) = sp.attr("shapes")
        if r2 != r or not s.is_const or sp.attr("axes") != (t,):
            return None
        stride = s.constant
        x = _def(defs, sp.args[0])
        if _is(x, "pad", t):
            if not _zero(dict(x.attr("shapes"))["before"]):
                return None
            x = _def(defs, x.args[0])
    if not _is(x, "crop") or not isinstance(x.args[0], Value) or len(x.attr("axes")) != 1:
        return None
    (t,) = x.attr("axes")
    start, stop = x.attr("start"), x.attr("stop")
    return x.args[0], t, start, stop - start, stride


def recognise(b: Body, ins: Instr) -> Conv | None:
    """The convolution whose last `add` is `ins`, or None."""
    defs = b.defs
    eins: list[Instr] = []
    at = ins
    while at is not None and at.op == "add" and len(at.args) == 2:
        right = _def(defs, at.args[1])
        if not _is(right, "ein"):
            return None
        eins.append(right)
        at = _def(defs, at.args[0])
        if _is(at, "ein"):
            eins.append(at)
            break
    else:
        return None
    eins.reverse()
    first = eins[0]
    if len(first.args) != 2 or any(e.attrs != first.attrs for e in eins):
        return None
    window = _window(defs, first.args[0])
    if window is None:
        return None
    source, t, _, length, stride = window
    taps = _tap(defs, first.args[1], t)
    if taps is None:
        return None
    w = taps[0]
    sx, sw, sy = shape_of(source.type), shape_of(w.type), shape_of(ins.out.type)
    if any(s is None or s.prefix or any(not a.name for a in s.axes) for s in (sx, sw, sy)):
        return None
    width = sw.axes[sw.axis(t)].length if sw.axis(t) is not None else None
    if width is None or not width.is_const or width.constant != len(eins):
        return None
    d = None
    for k, e in enumerate(eins):
        win, tap = _window(defs, e.args[0]), _tap(defs, e.args[1], t)
        if win is None or tap is None or tap[0] != w or not _zero(tap[1] - k):
            return None
        p, t2, start, n, s = win
        if (p, t2, s) != (source, t, stride) or not _zero(n - length):
            return None
        if k == 1:
            if not start.is_const or start.constant < 1:
                return None
            d = start.constant
        if not _zero(start - (d or 0) * k):
            return None
    full = sx.axes[sx.axis(t)].length - (d or 1) * (len(eins) - 1)
    if not _zero(full - length):
        return None  # not every window of P: not torch's valid convolution
    names = first.attr("_names")
    return Conv(source, w, t, d or 1, stride, tuple(first.attr("axes")), tuple(names))


def _product(b: Body, lengths: list[Lin]) -> str:
    """Π lengths in Python, the numbers multiplied out (`2 * T`, not `2 * 1 * T`)."""
    number, parts = 1, []
    for e in lengths:
        if e.is_const:
            number *= e.constant
        else:
            text = b.length(e)
            parts.append(text if text.isidentifier() else f"({text})")
    if number != 1 or not parts:
        parts.insert(0, str(number))
    return " * ".join(parts)


def conv1d(b: Body, ins: Instr) -> Expr | None:
    """`F.conv1d` for the `add` that ends a convolution's chain, or None."""
    c = recognise(b, ins)
    if c is None:
        return None
    xs_names, ws_names = c.names
    sx, sw = shape_of(c.source.type), shape_of(c.taps.type)
    x_names = tuple(a.name for a in sx.axes)
    w_rest = [i for i, a in enumerate(sw.axes) if a.name != c.axis]  # the tap's axes in w
    if xs_names != x_names or len(ws_names) != len(w_rest) or len(set(ws_names)) != len(ws_names):
        return None
    out, t = set(c.out), c.axis
    if t in ws_names or len(set(x_names)) != len(x_names):
        return None
    batch = [n for n in x_names if n != t and n not in ws_names]
    groups = [n for n in x_names if n in ws_names and n in out]
    chans = [n for n in x_names if n in ws_names and n not in out]
    outs = [n for n in ws_names if n not in x_names]
    if (
        any(n not in out for n in batch + outs)
        or t not in out
        or len(c.out) != len(batch + groups + outs) + 1
    ):
        return None
    in_w = {n: w_rest[i] for i, n in enumerate(ws_names)}
    tw = sw.axis(t)
    len_x = {n: sx.axes[i].length for i, n in enumerate(x_names)}
    len_w = {n: sw.axes[in_w[n]].length for n in outs}
    x = b.value(c.source)
    w = b.value(c.taps)
    if not isinstance(x, Expr) or not isinstance(w, Expr):
        return None
    px = [x_names.index(n) for n in batch + groups + chans + [t]]
    pw = [in_w[n] for n in groups + outs + chans] + [tw]
    if px != sorted(px):
        x = method(x, "permute", *px)
    if pw != sorted(pw):
        w = method(w, "permute", *pw)
    g = _product(b, [len_x[n] for n in groups])
    gc = _product(b, [len_x[n] for n in groups + chans])
    go = _product(b, [len_x[n] for n in groups] + [len_w[n] for n in outs])
    c_in = _product(b, [len_x[n] for n in chans])
    x = method(x, "reshape", -1, gc, b.length(len_x[t]))
    w = method(w, "reshape", go, c_in, b.length(sw.axes[tw].length))
    options = [f"{k}={v}" for k, v in (("stride", c.stride), ("dilation", c.dilation)) if v != 1]
    if g != "1":
        options.append(f"groups={g}")
    b.imports.add("F")
    y = call("F.conv1d", x, w, *options)
    sy = shape_of(ins.out.type)
    order = batch + groups + outs + [t]
    sizes = [b.length(len_x[n] if n in len_x else len_w[n]) for n in order[:-1]]
    sizes.append(b.length(sy.axes[sy.axis(t)].length))
    y = method(y, "reshape", *sizes)
    perm = [order.index(n) for n in c.out]
    if perm != sorted(perm):
        y = method(y, "permute", *perm)
    return Expr(y.text, ATOM)
