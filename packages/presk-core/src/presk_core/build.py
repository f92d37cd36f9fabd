"""The function builder: fresh value ids, sites and origins for the body of one function.

Every pass that writes PSK-Core writes it through a `FunctionBuilder` (lowering, the
initializers, the optimizer's functions, stack unrolling, differentiation, the residual
split, the training step), so that every instruction has a site, `F/%id` (the function
that holds it and the id of the value it binds), unique in the program, and every
instruction a pass makes says what it was made from (`Origin`: a site and a rule, `vjp of
mul`) and carries that instruction's span (docs/ir.md, "Sites and origins").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from presk_syntax.span import Span
from presk_types.ops import OPS
from presk_types.shapes import alignment
from presk_types.types import Shape, Type, shape_of

from presk_core.ir import Instr, Operand, Origin, Value, site_of


class FunctionBuilder:
    """The body of function `name`: values numbered from `start` (one past the ids already
    taken), each instruction with its site; `origin` and `span`, when set, are given to the
    instructions emitted until they change (what a pass is rewriting at the time)."""

    def __init__(self, name: str, start: int = 0) -> None:
        self.name = name
        self.count = start
        self.body: list[Instr] = []
        self.origin: Origin | None = None
        self.span: Span | None = None

    @staticmethod
    def after(values: Iterable[Value], body: Iterable[Instr] = ()) -> int:
        """The first id free after `values` and the values `body` binds."""
        ids = [v.id for v in values] + [i.out.id for i in body]
        return max(ids, default=-1) + 1

    def fresh(self, t: Type, name: str | None = None) -> Value:
        v = Value(self.count, t, name)
        self.count += 1
        return v

    def emit(
        self,
        op: str,
        args: Iterable[Operand],
        t: Type,
        attrs: dict | tuple = (),
        span: Span | None = None,
        origin: Origin | None = None,
    ) -> Value:
        """A new instruction binding a fresh value of type t."""
        out = self.fresh(t)
        self.bind(out, op, args, attrs, span, origin)
        return out

    def bind(
        self,
        out: Value,
        op: str,
        args: Iterable[Operand],
        attrs: dict | tuple = (),
        span: Span | None = None,
        origin: Origin | None = None,
    ) -> Value:
        """A new instruction binding `out` (a value numbered by this builder or given)."""
        args = tuple(args)
        items = tuple(attrs.items()) if isinstance(attrs, dict) else tuple(attrs)
        items = items + placement(op, args, out.type, items)
        origin = origin if origin is not None else self.origin
        span = span if span is not None else self.span
        self.count = max(self.count, out.id + 1)
        site = site_of(self.name, out)
        self.body.append(Instr(out, op, args, items, span, site, origin))
        return out

    def place(self, ins: Instr, rule: str) -> Instr:
        """An instruction of another function (or of this one) placed in this body: kept
        as it is when it is already this function's, else a copy with its own site, made
        from the original's by `rule`."""
        site = site_of(self.name, ins.out)
        if ins.site != site:
            ins = replace(ins, site=site, origin=Origin(ins.site, rule))
        self.count = max(self.count, ins.out.id + 1)
        self.body.append(ins)
        return ins


def placement(
    op: str, args: tuple[Operand, ...], t: Type, attrs: tuple[tuple[str, object], ...]
) -> tuple[tuple[str, object], ...]:
    """The `_align` attribute of an elementwise operation that lacks it: where each operand's
    axes go among the result's (`shapes.alignment`), so that no stage computes it again at
    run time (docs/ir.md, "Layout"). `sum_to ct, x` places x among ct's axes, a softmax its
    mask among its operand's."""
    declared = OPS.get(op)
    if declared is None or "_align" not in dict(declared.attrs) or "_align" in dict(attrs):
        return ()
    if op == "sum_to":
        ct, x = args
        if shape_of(x.type) is None:
            return ()
        return (("_align", alignment(_explicit(x.type), _explicit(ct.type))),)
    if op in ("softmax", "log_softmax"):  # the mask `where` among the operand's axes
        if not dict(attrs).get("where"):
            return ()
        x, mask = args
        return (("_align", alignment(_explicit(mask.type), _explicit(x.type))),)
    return (("_align", tuple(alignment(_explicit(a.type), _explicit(t)) for a in args)),)


def _explicit(t: Type) -> Shape:
    s = shape_of(t)
    return s if s is not None else Shape(False, ())


def made_from(ins: Instr, rule: str) -> Origin:
    """The origin of what a pass makes from instruction `ins` by `rule`."""
    return Origin(ins.site, rule)
