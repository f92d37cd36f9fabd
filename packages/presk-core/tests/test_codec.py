"""The `core` document round-trips every node and every attribute (encode, decode, equal):
a program with one instruction of every operation of the set (`presk_types.ops.OPS`), each
with every attribute of its schema, of operands and results of every type, with sites,
origins, spans, literals, named values, effects, defaults and bounds."""

from __future__ import annotations

from dataclasses import fields

from presk_core.codec import CORE_CODEC, decode_core, encode_core
from presk_core.ir import Function, Instr, Lit, Origin, Program, Value
from presk_syntax.span import Source, Span
from presk_types.ops import OPS, Attr
from presk_types.presburger import Lin
from presk_types.types import (
    SCALAR,
    AxisT,
    Bool,
    FnT,
    Idx,
    Instance,
    KeyT,
    Machine,
    ModuleT,
    ParamsT,
    Real,
    Shape,
    TupleT,
)

B = Lin.var("B")
SHAPE = Shape(True, (AxisT("batch", B), AxisT(None, Lin.const(3) + B)))
LINEAR = Instance("m.psk:Linear", "Linear", (Lin.const(3), B))
STACKED = Instance("m.psk:Block", "Block", (), Lin.const(2), Instance("m.psk:Block", "Block", ()))
TYPES = [
    Real(SHAPE),
    Idx(B, SHAPE),
    Bool(SCALAR),
    Machine("f64"),
    KeyT(),
    ParamsT(LINEAR),
    ParamsT(STACKED),
    ModuleT(LINEAR),
    TupleT((Real(SCALAR), KeyT())),
    FnT((Real(SCALAR),), Real(SHAPE)),
]
VALUES = {
    Attr.NAME: "w",
    Attr.NAMES: ("batch", "seq"),
    Attr.INT: 2,
    Attr.BOOL: True,
    Attr.LIN: B * 2 + 1,
    Attr.BINDINGS: (("In", Lin.const(3)), ("Out", B)),
    Attr.SHAPES: (("seq", B),),
    Attr.ALIGN: ((-2, -1), (-1,)),
    Attr.POSITIONS: (-2, -1),
    Attr.NAME_LISTS: (("i", "k"), ("k", "j")),
    Attr.TEXT: "0.02",
}


def program(source: Source) -> Program:
    span = Span(source.path, 0, 5)
    params = tuple(Value(i, t, f"p{i}") for i, t in enumerate(TYPES))
    body = []
    for k, op in enumerate(OPS.values()):
        attrs = tuple((name, VALUES[t]) for name, t in op.attrs)
        if op.extra is not None:
            attrs += (("std", VALUES[op.extra]),)
        lo, hi = op.arity
        args = [params[(k + i) % len(params)] for i in range(lo)]
        if hi is None or hi > lo:
            args.append(Lit("1/3", Real(SCALAR)))
        out = Value(len(params) + k, TYPES[k % len(TYPES)], None if k % 2 else f"v{k}")
        assert op.check(len(args), attrs) is None, op.name
        origin = Origin("f/%1", f"vjp of {op.name}") if k % 3 else None
        body.append(Instr(out, op.name, tuple(args), attrs, span, f"f/%{out.id}", origin))
    fn = Function("f", ("B",), params, Real(SHAPE), tuple(body), body[-1].out, ("Rand",), span,
                  (("eps", "1e-6"),))  # fmt: skip
    return Program((fn,), bounds=(("B", None), ("T", 1024)))


METADATA = {"ParamLayout", "Leaf", "Training"}
"""The program's metadata (docs/ir.md, "The program's metadata"), round-tripped by
test_metadata.py on the tutorial's programs."""


def test_every_node_and_attribute_round_trips():
    source = Source("m.psk", "dim B\n")
    p = program(source)
    back, files = decode_core(encode_core(p, [source]), verified=False)  # one of every op
    assert back == p
    assert [s.path for s in files.sources] == ["m.psk"]


def test_the_program_holds_every_node_class_of_the_codec():
    """The program above is the whole codec: a node class added to PSK-Core is added here."""
    seen: set[str] = set()

    def walk(x: object) -> None:
        if isinstance(x, tuple):
            for y in x:
                walk(y)
        elif hasattr(x, "__dataclass_fields__"):
            seen.add(type(x).__name__)
            for f in fields(x):
                walk(getattr(x, f.name))

    walk(program(Source("m.psk", "")))
    assert set(CORE_CODEC.types) - METADATA <= seen
