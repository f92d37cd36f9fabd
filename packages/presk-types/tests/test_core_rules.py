"""The shape rules of PSK-Core (core_rules) on operands given directly, in PSK-Core's context:
lengths equal as terms, functions and trees from the program."""

from __future__ import annotations

import pytest
from presk_types.core_rules import CORE_RULES
from presk_types.operands import Context, CoreContext, Operands, Signature
from presk_types.presburger import Lin
from presk_types.shapes import TypeErr
from presk_types.types import SCALAR, AxisT, Instance, ParamsT, Real, Shape, TupleT

B, D = Lin.var("B"), Lin.var("D")


def real(*axes: tuple[str | None, Lin | int], prefix: bool = False) -> Real:
    return Real(
        Shape(prefix, tuple(AxisT(n, Lin.const(x) if isinstance(x, int) else x) for n, x in axes))
    )


def rule(name: str, *types, ctx: Context | None = None, **attrs):
    return CORE_RULES[name](Operands(name, types, attrs=attrs), ctx or Context())


def code(name: str, *types, ctx: Context | None = None, **attrs) -> str:
    with pytest.raises(TypeErr) as e:
        rule(name, *types, ctx=ctx, **attrs)
    return e.value.diagnostics[0].code


def test_broadcasting_and_its_placement() -> None:
    x, b = real(("batch", B), ("model", 4)), real((None, 4))
    assert rule("add", x, b) == x
    assert rule("mul", x, b, _align=((-2, -1), (-1,))) == x
    assert code("add", x, b, _align=((-2, -1), (-2,))) == "E2006"  # 4 on batch: B
    square = real(("batch", 4), ("model", 4))
    assert rule("add", square, real(("batch", 4)), _align=((-2, -1), (-2,))) == square
    assert code("add", square, real(("batch", 4)), _align=((-2, -1), (-1,))) == "E2003"
    assert code("add", x, real((None, 5))) == "E2006"
    assert rule("compare", x, Real(SCALAR), op="<").shape == x.shape
    assert code("compare", x, x, op="=>") == "E2004"


def test_ein_by_its_operands_names() -> None:
    q = real(("seq", 3), ("hd", 2))
    k = real(("seq", 3), ("hd", 2))
    names = (("seq", "hd"), ("seq2", "hd"))
    assert rule("ein", q, k, axes=("seq", "seq2"), _names=names) == real(("seq", 3), ("seq2", 3))
    assert rule("ein", q, k, axes=("seq", "seq2")) == real(("seq", 3), ("seq2", 3))
    assert code("ein", q, k, axes=("seq", "other"), _names=names) == "E2007"


def _program() -> CoreContext:
    lin = Instance("m.psk:Linear", "Linear", (Lin.var("In"), Lin.var("Out")))
    functions = {
        "Linear.apply": Signature(
            ("In", "Out"),
            (ParamsT(lin), real((None, Lin.var("In")), prefix=True)),
            real((None, Lin.var("Out")), prefix=True),
        ),
        "pair": Signature(("D",), (TupleT((real((None, D), prefix=True),) * 2),), Real(SCALAR)),
    }
    layouts = {
        "m.psk:Linear": (
            ("In", "Out"),
            (
                ("w", real((None, Lin.var("In")), (None, Lin.var("Out")))),
                ("b", real((None, Lin.var("Out")))),
            ),
        )
    }
    return CoreContext(functions, layouts)


def test_a_call_binds_dimensions_and_the_prefix() -> None:
    ctx = _program()
    tree = ParamsT(Instance("m.psk:Linear", "Linear", (D, Lin.const(1))))
    x = real(("batch", B), (None, D))
    dims = (("In", D), ("Out", Lin.const(1)))
    out = rule("call", tree, x, ctx=ctx, fn="Linear.apply", dims=dims)
    assert out == real(("batch", B), (None, 1))
    assert code("call", tree, x, ctx=ctx, fn="Linear.apply", dims=dims[:1]) == "E2004"
    assert code("call", tree, real((None, 5)), ctx=ctx, fn="Linear.apply", dims=dims) == "E2006"
    assert code("call", tree, x, ctx=ctx, fn="nowhere", dims=()) == "E2001"


def test_a_prefix_inside_a_tuple() -> None:
    ctx = _program()
    arg = real(("batch", B), (None, 4))
    pair = TupleT((arg, arg))
    assert rule("call", pair, ctx=ctx, fn="pair", dims=(("D", Lin.const(4)),)) == Real(SCALAR)
    other = TupleT((arg, real((None, 4))))
    assert code("call", other, ctx=ctx, fn="pair", dims=(("D", Lin.const(4)),)) == "E2008"


def test_fields_of_a_tree() -> None:
    ctx = _program()
    tree = ParamsT(Instance("m.psk:Linear", "Linear", (D, Lin.const(1))))
    assert rule("field", tree, ctx=ctx, path="w") == real((None, D), (None, 1))
    assert code("field", tree, ctx=ctx, path="v") == "E2001"
    leaves = (real((None, D), (None, 1)), real((None, 1)))
    assert (
        CORE_RULES["record"](
            Operands("record", leaves, attrs={"keys": ("w", "b")}, declared=tree), ctx
        )
        == tree
    )
    with pytest.raises(TypeErr):
        CORE_RULES["record"](
            Operands("record", leaves, attrs={"keys": ("b", "w")}, declared=tree), ctx
        )
