"""`conv(x, w, axis t[, axis g, …], dilation: d, before: p, after: q)`: a convolution over the
named axis t (issue 29), written by the checker as the primitives it is made of.

x has the axis t (length n), w has it too: its taps (length W, a number). The axes x and w
share besides t are the input channels, summed, except those named after t (`axis g`), which
are kept: groups, as torch's `groups` (a depthwise convolution keeps its channel axis). The
axes of w alone are the output channels. The result is x's other axes, then w's own, then
t, of length L = n + p + q - d·(W - 1), proved positive for every value of the dimensions.

    y = Σ_k ein[out](pad(x)[t: k·d .. k·d + L] * w[t: k .. k + 1])      k = 0, 1, …, W - 1

so its evaluation, adjoints, loop nests and PyTorch code are those of `pad`, `crop`, `sum`
(of w's one tap), `ein` (each tap a fold over the channels in x's order) and `add` (the
taps added in increasing k): the same bits on every backend. A stride s keeps every s-th
output: each tap's slice cut to every s-th element (`_every`), the length ⌊(L − 1)/s⌋ + 1
where it is affine (E2024 elsewhere).
"""

from __future__ import annotations

from presk_syntax import ast as A
from presk_syntax.diagnostics import Label
from presk_syntax.span import Span

from presk_types.core_rules import PRIMITIVE_SHAPE_RULES
from presk_types.operands import Operands
from presk_types.presburger import Ge, Lin
from presk_types.shapes import alignment, err, relabeled
from presk_types.types import Real
from presk_types.values import Val

SIGNATURE = "conv(x, w, axis t[, axis g, …][, dilation: d][, stride: s][, before: p][, after: q])"
LENGTHS = ("dilation", "stride", "before", "after")
MAX_TAPS = 4096  # each tap is four instructions of the program


def _wrong(message: str, span: Span, label: str = f"expected {SIGNATURE}") -> Exception:
    return err("E2024", message, Label(span, label))


def _strided(full: Lin, s: int, t: str, span: Span) -> Lin:
    """The output's length with a stride s: ⌊(L − 1)/s⌋ + 1 for L = `full`, affine when each
    coefficient of L's dimensions is a multiple of s (the constant is divided, rounded down);
    else E2024."""
    if s == 1:
        return full
    bad = [n for n, c in full.coeffs if c % s]
    if bad:
        raise _wrong(
            f"with `stride: {s}` the output along `{t}` is ⌊({full - 1})/{s}⌋ + 1, not an affine"
            " length", span,
            f"the coefficient of `{bad[0]}` is not a multiple of {s}",
        )  # fmt: skip
    return Lin(tuple((n, c // s) for n, c in full.coeffs), (full.constant - 1) // s + 1)


def _every(prim, x: Val, t: str, s: int, full: Lin, out_len: Lin) -> Val:
    """Every s-th element of x's axis t (length `full`), from the first: x padded after to
    out_len·s, split into (t: out_len, r: s), its r = 0, summed over r's one element."""
    r = f"{t}_stride"
    extra = out_len * s - full  # a constant in 0 … s − 1
    if not (extra.is_const and extra.constant == 0):
        sides = (("before", Lin.const(0)), ("after", extra))
        x = prim("pad", [x], {"axes": (t,), "shapes": sides}, axes=(t,), shapes=sides)
    parts = ((t, out_len), (r, Lin.const(s)))
    x = prim("split", [x], {"axes": (t,), "shapes": parts}, axes=(t,), shapes=parts)
    one = {"axes": (r,), "start": Lin.const(0), "stop": Lin.const(1)}
    x = prim("crop", [x], one, axes=(r,))
    return prim("sum", [x], {"axes": (r,)}, axes=(r,))


def conv(body, args: tuple[A.Arg, ...], span: Span) -> Val:
    """The convolution `conv(…)` of a function body (`check.Body`), as pad, crops and eins."""
    from presk_types.rules import CheckContext
    from presk_types.values import join

    positional, axes, lengths = [], [], {}
    for arg in args:
        match arg:
            case A.AxisArg(name, aspan):
                axes.append((name, aspan))
            case A.ShapeArg(key, length, sspan):
                if key not in LENGTHS or key in lengths:
                    named = ", ".join(f"`{k}:`" for k in LENGTHS)
                    raise _wrong(f"`conv` takes {named}, each once, not `{key}:` here", sspan)
                lengths[key] = (body.length(length), sspan)
            case A.KeywordArg(key, _, kspan):
                raise _wrong(f"`conv` has no keyword `{key}`", kspan)
            case _:
                positional.append(arg)
    if len(positional) != 2 or not axes:
        raise _wrong("wrong arguments for `conv`", span)
    x, w = (body.value(a) for a in positional)
    effects = tuple(x.effects) + tuple(w.effects)
    for v, a in ((x, positional[0]), (w, positional[1])):
        body.require_real(v, a.span)
        if v.type.shape.prefix or any(not ax.name for ax in v.type.shape.axes):
            raise _wrong(f"`conv` needs named axes, and this is `{v.type}`", a.span, "name them")
    sx, sw = x.type.shape, w.type.shape
    (t, _), kept = axes[0], [n for n, _ in axes[1:]]
    for name, aspan in axes:
        for v, what in ((x, "x"), (w, "w")):
            if v.type.shape.axis(name) is None:
                raise _wrong(
                    f"`{v.type}` ({what}) has no axis `{name}`", aspan, "not an axis of both"
                )
    width = sw.axes[sw.axis(t)].length
    if not width.is_const or not 1 <= width.constant <= MAX_TAPS:
        raise _wrong(
            f"a convolution's width is a number of taps (1 to {MAX_TAPS}), and `{t}: {width}` is not",
            positional[1].span, f"w's axis `{t}`",
        )  # fmt: skip
    d, dspan = lengths.get("dilation", (Lin.const(1), span))
    if not d.is_const or d.constant < 1:
        raise _wrong(f"`dilation:` is a number of at least 1, not `{d}`", dspan, "a number")
    s, sspan = lengths.get("stride", (Lin.const(1), span))
    if not s.is_const or s.constant < 1:
        raise _wrong(f"`stride:` is a number of at least 1, not `{s}`", sspan, "a number")
    s = s.constant
    zero = (Lin.const(0), span)
    (p, _), (q, _) = lengths.get("before", zero), lengths.get("after", zero)
    n = sx.axes[sx.axis(t)].length
    out_len = n + p + q - d * (width.constant - 1)
    at = body.lengths.fails(Ge(out_len, 1))
    if at is not None:
        raise err(
            "E2025",
            f"the convolution's output along `{t}` is `{out_len}` long: not positive",
            Label(span, f"`{out_len}` < 1 for {at}" if at else f"`{out_len}` < 1"),
            help="pad the input (`before:`, `after:`) or use a shorter window",
        )

    def prim(op: str, vals: list[Val], attrs: dict, axes=(), shapes=()) -> Val:
        ctx = CheckContext(body.lengths, span, {})
        o = Operands(op, tuple(v.type for v in vals), axes=axes, shapes=shapes, attrs=attrs)
        typ = PRIMITIVE_SHAPE_RULES[op](o, ctx)
        ref = body.emit.prim(op, [v.ref for v in vals], typ, attrs, span)
        return Val(typ, join(*(v.reg for v in vals)), (), ref)

    if not (p.is_const and p.constant == 0 and q.is_const and q.constant == 0):
        sides = (("before", p), ("after", q))
        x = prim("pad", [x], {"axes": (t,), "shapes": sides}, axes=(t,), shapes=sides)
    summed = [a for a in sx.names() if a in sw.names() and a != t and a not in kept]
    out = tuple(
        [a for a in sx.names() if a not in summed and a != t]
        + [a for a in sw.names() if a not in sx.names()]
        + [t]
    )
    full, out_len = out_len, _strided(out_len, s, t, sspan)
    y = None
    for k in range(width.constant):
        start = d * k
        window = {"axes": (t,), "start": start, "stop": start + full}
        xk = prim("crop", [x], window, axes=(t,))
        if s > 1:
            xk = _every(prim, xk, t, s, full, out_len)
        tap = {"axes": (t,), "start": Lin.const(k), "stop": Lin.const(k + 1)}
        wk = prim("sum", [prim("crop", [w], tap, axes=(t,))], {"axes": (t,)}, axes=(t,))
        ta, tb = xk.type, wk.type
        names = (tuple(ta.shape.names()), tuple(relabeled(out, ta.shape, tb.shape).names()))
        e = prim("ein", [xk, wk], {"axes": out, "_names": names}, axes=())
        if y is None:
            y = e
            continue
        aligned = (alignment(y.type.shape, e.type.shape), alignment(e.type.shape, e.type.shape))
        y = prim("add", [y, e], {"_align": aligned})
    assert isinstance(y.type, Real)
    return Val(y.type, y.reg, effects, y.ref)
