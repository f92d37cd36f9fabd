"""Integer weights (spec L67, L1266; docs/precision.md, "Quantised weights"): the scheme
`presk quantize` applies to the parameter paths of a realization's `quant` map.

Symmetric, per channel: a weight w of rank ≥ 2 has one scale per index of every axis but
its second-to-last — the axis a contraction `x · w` sums over, so each output channel (and
each block of a stacked parameter) has its own; a weight of rank 0 or 1 has one scale.
With q_max = 127 (int8) or 7 (int4):

    s = max |w| over the channel / q_max, rounded to a binary32 not below it (1 where the
        channel is all zeros)
    q = round-half-even(w / s), within [−q_max, q_max]
    w̃ = q · s

The scale is a binary32 and q has at most 8 bits, so w̃ = q·s is exact in binary64: the
dequantised weights are the doubles a checkpoint holds, and their one rounding is the
scheme's, |w̃ − w| ≤ s/2 element by element (plus the rounding of w/s, below 2⁻⁵³ of it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

QMAX = {"int8": 127, "int4": 7}
BITS = {"int8": 8, "int4": 4}


@dataclass(frozen=True)
class Quantised:
    """A weight's integers, its binary32 scales (broadcasting against them) and w̃ = q·s."""

    scheme: str
    q: np.ndarray  # int8 (int4 values too: one a byte here, two a byte at rest)
    scales: np.ndarray  # float32, the weight's shape with the summed axis of length 1
    dequantised: np.ndarray  # float64, exact

    @property
    def bytes_at_rest(self) -> float:
        """Integers of BITS bits each, and a binary32 per scale."""
        return self.q.size * BITS[self.scheme] / 8 + 4 * self.scales.size


def quantise(w: np.ndarray, scheme: str) -> Quantised:
    """`w` (doubles) under `scheme` (int8 or int4), per the module's scheme."""
    if scheme not in QMAX:
        raise ValueError(f"no quantisation scheme `{scheme}` (the schemes: int8, int4)")
    w = np.asarray(w, dtype=np.float64)
    qmax = QMAX[scheme]
    a = np.abs(w)
    m = a.max(axis=-2, keepdims=True) if w.ndim >= 2 else np.full((1,) * w.ndim, a.max(initial=0.0))
    s = (m / qmax).astype(np.float32)
    low = s.astype(np.float64) * qmax < m  # rounded below: the largest would exceed q_max
    s = np.where(low, np.nextafter(s, np.float32(np.inf)), s)
    s = np.where(m == 0, np.float32(1), s).astype(np.float32)
    s64 = s.astype(np.float64)
    q = np.clip(np.rint(w / s64), -qmax, qmax).astype(np.int8)
    return Quantised(scheme, q, s, q.astype(np.float64) * s64)


__all__ = ["BITS", "QMAX", "Quantised", "quantise"]


# ---- integer weights in the kernels ------------------------------------------------------
#
# A parameter the realization quantises is stored as its integers (an `i8` host buffer; int4
# values too, one a byte: not packed) beside a host buffer of its binary32 scales (`NAME.scale`,
# its shape with the summed axis of length 1), and every kernel that reads it dequantises in
# the operand read: `Load(w)` becomes `dequant[T](Load(q), Load(s))`, q·s as a load of the
# parameter's type T gives w̃ (presk_kernel.interp.dequant), so the bits are those of w̃
# dequantised when loaded.


class IntegerWeightError(Exception):
    """A kernel that reads a quantised parameter otherwise than whole rows (E7150)."""

    code = "E7150"


def scale_name(name: str, scheme: str) -> str:
    """The scales' host buffer of the parameter buffer `name` (its scheme in the name, so
    that the inputs can be quantised from the schedule alone)."""
    return f"{name}.scale:{scheme}"


def integer_weights(schedule, quant: dict[str, str]):
    """`schedule` with the parameters of `quant` (path → int8 or int4) read as integers: each
    one's input host buffer `….path` i8, its scales an input appended (presk_kernel.ir), every
    load of it in a kernel the dequantisation of its integer (`dequant`)."""
    from dataclasses import replace

    from presk_kernel.ir import Axis, HostBuffer

    buffers = list(schedule.buffers)
    inputs = list(schedule.inputs)
    quantised: dict[int, tuple[int, str]] = {}  # host id → (scales' host id, the param type)
    tree = next(  # the first argument that has a quantised path: the weights' tree
        (
            buffers[b].name.partition(".")[0]
            for b in schedule.inputs
            if any(buffers[b].name.partition(".")[2] == p for p, _ in quant)
        ),
        None,
    )
    for b in schedule.inputs:  # the scales in the order of the inputs (the entry's call's)
        hb = buffers[b]
        head, _, path = hb.name.partition(".")
        scheme = next((t for p, t in quant if head == tree and path == p), None)
        if scheme is None or hb.dtype not in ("f64", "f32", "bf16"):
            continue  # a path this entry has no buffer of is the caller's E7038
        n = len(hb.axes)  # the summed axis of length 1; a vector's scale once an element
        saxes = tuple(
            Axis(a.name, 1 if (n >= 2 and i == n - 2) else a.length) for i, a in enumerate(hb.axes)
        )
        sid = len(buffers)
        buffers.append(HostBuffer(sid, "f32", saxes, scale_name(hb.name, scheme), "input"))
        inputs.append(sid)
        quantised[hb.id] = (sid, hb.dtype)
        buffers[hb.id] = replace(hb, dtype="i8")
    if not quantised:
        return schedule
    launches = tuple(_launch(x, quantised, buffers) for x in schedule.launches)
    out = replace(schedule, buffers=tuple(buffers), inputs=tuple(inputs), launches=launches)
    if schedule.body is None:
        return out
    functions: dict = {f.name: f for f in schedule.functions}
    body = _calls(schedule.body, quantised, buffers, functions)
    rewritten = tuple(functions.get(("rewritten", f.name), f) for f in schedule.functions)
    return replace(out, body=body, functions=rewritten)


def scale_view(host, axes: tuple, offset: int, who: str) -> tuple[tuple, int, str]:
    """The view of a weight's scales (their axes, their offset in the scales' host buffer,
    how they are indexed) for a view `axes` from element `offset` of its host buffer `host`:
    `row` within one row (the row's scales, element by element; a weight of rank 0 or 1 has
    its one scale stored once an element, so that a function reading a stacked vector's row
    and a vector takes the same view), `whole` by whole matrices (the scales indexed as the
    weights, their summed axis at 0); E7150 otherwise."""
    from presk_kernel.ir import Axis, elements

    hshape = [x.length for x in host.axes]
    if len(hshape) < 2:  # its one scale stored once an element (`integer_inputs`)
        return axes, offset, "row"
    r, c = hshape[-2:]
    shape, size = [x.length for x in axes], elements(axes)
    if offset % c + size <= c:
        return axes, offset // (r * c) * c + offset % c, "row"
    if len(shape) >= 2 and shape[-2:] == [r, c] and offset % (r * c) == 0:
        return (*axes[:-2], Axis(axes[-2].name, 1), axes[-1]), offset // r, "whole"
    raise IntegerWeightError(
        f"{who} reads `{host.name}` as {shape} from element {offset}: integer weights are"
        " read by rows or whole matrices"
    )


def _calls(call, quantised: dict, hosts: list, functions: dict):
    """The host call tree with each argument that is an integer weight passed with its
    scales (a parameter appended to the function, its weight's parameter `i8`): a function
    must take integer weights at one parameter in every call or in none (E7150)."""
    from dataclasses import replace

    from presk_kernel.ir import Arg, Buffer, Call

    f = functions[call.function]
    at = [i for i, a in enumerate(call.args) if a.buf in quantised]
    body = tuple(
        _calls(x, quantised, hosts, functions) if isinstance(x, Call) else x for x in call.body
    )
    extra = []
    params = list(f.params)
    for i in at:
        a = call.args[i]
        saxes, offset, _ = scale_view(hosts[a.buf], f.params[i].axes, a.offset, f"`{f.name}`")
        extra.append(Arg(quantised[a.buf][0], offset))
        params[i] = replace(params[i], dtype="i8")
        params.append(Buffer(len(params), "f32", saxes))
    n = len(params)
    new = replace(
        f,
        params=tuple(params),
        results=tuple(replace(b, id=n + k) for k, b in enumerate(f.results)),
    )
    seen = functions.setdefault(("rewritten", f.name), new)
    if seen != new:
        raise IntegerWeightError(
            f"`{f.name}` takes integer weights in one call and reals (or other views) in"
            " another: its calls must agree"
        )
    return replace(call, args=(*call.args, *extra), body=body)


def _launch(launch, quantised: dict, hosts: list):
    from dataclasses import replace

    from presk_kernel.ir import Affine, Arg, Buffer

    k = launch.kernel
    reads = [i for i, a in enumerate(launch.args[: len(k.inputs)]) if a.buf in quantised]
    if not reads:
        return launch
    inputs = list(k.inputs)
    args = list(launch.args[: len(k.inputs)])
    deq: dict[int, tuple[int, str, str]] = {}  # kernel buffer → (scales' buffer, type, mode)
    for i in reads:
        b, a = k.inputs[i], launch.args[i]
        sid, dtype = quantised[a.buf]
        host = hosts[a.buf]
        saxes, offset, mode = scale_view(host, b.axes, a.offset, f"`{k.name}` at {k.site}")
        j = len(inputs)
        inputs.append(Buffer(j, "f32", saxes))
        args.append(Arg(sid, offset))
        inputs[i] = replace(b, dtype="i8")
        deq[i] = (j, dtype, mode)
    shift = len(inputs) - len(k.inputs)
    n_in = len(k.inputs)
    outputs = tuple(replace(b, id=b.id + shift) for b in k.outputs)

    def buf(n: int) -> int:
        return n + shift if n >= n_in else n

    def index(ix: tuple) -> tuple:
        return tuple(i if isinstance(i, Affine) else expr(i) for i in ix)

    def expr(e):
        from presk_kernel.ir import Load, Op

        match e:
            case Load(b, ix):
                load = Load(buf(b), index(ix))
                if b not in deq:
                    return load
                j, dtype, mode = deq[b]
                six = {
                    "whole": (*load.index[:-2], Affine.constant(0), *load.index[-1:]),
                    "row": load.index,
                }[mode]
                return Op("dequant", (load, Load(j, six)), dtype)
            case Op(name, args_, attr):
                return Op(name, tuple(expr(x) for x in args_), attr)
        return e

    body = _map_body(k.body, expr, index, buf)
    layout = replace(k.layout, pack=tuple(buf(p) for p in k.layout.pack))
    kernel = replace(k, inputs=tuple(inputs), outputs=outputs, body=body, layout=layout)
    return replace(launch, kernel=kernel, args=(*args, *launch.args[n_in:]))


def _map_body(body: tuple, expr, index, buf) -> tuple:
    """A kernel body (before layout) with each expression through `expr`, each index
    through `index` and each stored buffer through `buf`."""
    from dataclasses import replace

    from presk_kernel.ir import Let, Loop, Reduce, Store

    def stmt(s):
        match s:
            case Let(name, e):
                return Let(name, expr(e))
            case Store(b, ix, e):
                return Store(buf(b), index(ix), expr(e))
            case Loop():
                return replace(s, body=_map_body(s.body, expr, index, buf))
            case Reduce():
                return replace(
                    s,
                    body=_map_body(s.body, expr, index, buf),
                    terms=tuple(expr(t) for t in s.terms),
                    resume=None if s.resume is None else expr(s.resume),
                )
        raise TypeError(f"integer weights: not a statement before layout: {s!r}")

    return tuple(stmt(s) for s in body)


def integer_inputs(schedule, leaves: list) -> list:
    """The entry's input leaves as `schedule` takes them: a quantised parameter's weights
    (doubles, as a checkpoint holds them) as their integers, and its scales appended, in the
    order of `schedule.inputs` (the leaves given are the inputs before `integer_weights`)."""
    by_name = {schedule.buffers[b].name: k for k, b in enumerate(schedule.inputs)}
    out = list(leaves)
    for b in schedule.inputs[len(leaves) :]:
        name = schedule.buffers[b].name
        base, _, scheme = name.rpartition(".scale:")
        k = by_name[base]
        q = quantise(np.asarray(leaves[k], dtype=np.float64), scheme)
        out[k] = q.q
        out.append(q.scales if q.q.ndim >= 2 else np.broadcast_to(q.scales, q.q.shape))
    return out
