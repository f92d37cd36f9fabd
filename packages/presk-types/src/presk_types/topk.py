"""`top_k(axis a, x, k: K)`: the K largest elements of x along the named axis a and their
indices (issue 29), written by the checker as two primitives:

    i = top_k(axis a, x, k: K)        the indices, an idx[n][s, a: K] (core_rules._top_k)
    v = take(axis a, x, i)            the values, a ℝ[s, a: K]

The result is the pair (v, i), largest first, ties to the first index (the order in which
`argmax` picks: `top_k(axis a, x, k: 1)` holds `argmax`'s index). The values are C⁰⁺ in x
(as `max`: their adjoint scatters the cotangent into the chosen positions, `take`'s), the
indices Disc (no adjoint): the pair keeps each element's own class (`Val.parts`).
"""

from __future__ import annotations

from presk_syntax import ast as A
from presk_syntax.diagnostics import Label
from presk_syntax.span import Span

from presk_types.core_rules import PRIMITIVE_SHAPE_RULES
from presk_types.operands import Operands
from presk_types.rules import Cls
from presk_types.shapes import err
from presk_types.types import TupleT
from presk_types.values import Val, through

SIGNATURE = "top_k(axis a, x, k: K)"


def top_k(body, args: tuple[A.Arg, ...], span: Span) -> Val:
    """The pair (values, indices) of `top_k(…)` in a function body (`check.Body`)."""
    from presk_types.rules import Args, CheckContext

    a = Args("top_k", span, body.lengths)
    x: Val | None = None
    for arg in args:
        match arg:
            case A.AxisArg(name, aspan):
                a.axes.append((name, aspan))
            case A.ShapeArg(key, length, sspan):
                a.shapes.append((key, body.length(length), sspan))
            case A.KeywordArg(key, _, kspan):
                raise err(
                    "E2030", f"`top_k` has no keyword `{key}`",
                    Label(kspan, f"expected {SIGNATURE}"),
                )  # fmt: skip
            case _:
                if x is not None:
                    raise err(
                        "E2030", "`top_k` takes one tensor",
                        Label(arg.span, f"expected {SIGNATURE}"),
                    )  # fmt: skip
                x = body.value(arg)
                a.positional.append((x.type, arg.span))
    if x is None or len(a.axes) != 1:
        raise err(
            "E2030", "`top_k` takes one axis, one tensor and `k:`",
            Label(span, f"expected {SIGNATURE}"),
        )  # fmt: skip
    ids_t = PRIMITIVE_SHAPE_RULES["top_k"](a.operands(), a.context())
    axes = (a.axes[0][0],)
    ids_attrs = {"axes": axes, "shapes": tuple((n, length) for n, length, _ in a.shapes)}
    ids = body.emit.prim("top_k", [x.ref], ids_t, ids_attrs, span)
    ctx = CheckContext(body.lengths, span, {})
    values_t = PRIMITIVE_SHAPE_RULES["take"](
        Operands("take", (x.type, ids_t), axes=axes, attrs={"axes": axes}), ctx
    )
    values = body.emit.prim("take", [x.ref, ids], values_t, {"axes": axes}, span)
    result = TupleT((values_t, ids_t))
    v_reg = through(x.reg, Cls.KINK, ("top_k", span))
    i_reg = through(x.reg, Cls.DISC, ("top_k", span))
    ref = body.emit.tuple([values, ids], result)
    return Val(result, i_reg, tuple(x.effects), ref, parts=(v_reg, i_reg))
