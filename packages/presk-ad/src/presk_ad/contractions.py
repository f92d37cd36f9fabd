"""The adjoints of contractions, `dot` and `ein`: each operand's adjoint is a contraction
of the cotangent with the other operand, typed as its rule gives it (the axes named as the
operands name them) and cast, or its labels renamed, to the operand's own type."""

from __future__ import annotations

from typing import TYPE_CHECKING

from presk_core.ir import Instr, Operand, Value
from presk_types.types import AxisT, Real, Shape

if TYPE_CHECKING:
    from presk_ad.vjp import Sweep


def dot(s: Sweep, ins: Instr, ct: Operand) -> None:
    """Each operand's adjoint has its axes from ct's and the other's (the rules of
    `dot_left`, `dot_right`), cast to its own names where they differ."""
    a, b = ins.args
    sa, sb, sc = a.type.shape, b.type.shape, ct.type.shape
    left = Real(Shape(sc.prefix, (*sc.axes[: sc.rank - sb.rank + 1], sb.axes[0])))
    right = Real(Shape(False, (sa.axes[-1], *sc.axes[sa.rank - 1 :])))
    for x, op, operands, t in ((a, "dot_left", [ct, b], left), (b, "dot_right", [a, ct], right)):
        adj = s.emit(op, operands, t)
        s.add(x, adj if t == x.type else s.emit("cast", [adj], x.type))


def ein(s: Sweep, ins: Instr, ct: Operand) -> None:
    """Each operand's adjoint is an `ein` of ct and the other operand onto its axes; the
    axes it summed alone (in neither the other operand nor the output) are spread back."""
    out = ins.attr("axes")
    names = ins.attr("_names")
    pairs = (
        [(ins.args[0], names[0], None, ())]
        if len(ins.args) == 1
        else [
            (ins.args[0], names[0], ins.args[1], names[1]),
            (ins.args[1], names[1], ins.args[0], names[0]),
        ]
    )
    for x, nx, other, no in pairs:
        if not isinstance(x, Value) or x.id not in s.active:
            continue
        alone = [n for n in nx if n not in out and n not in no]
        kept = tuple(n for n in nx if n not in alone)
        known = (out,) if other is None else (out, no)
        if not alone:  # the output named as x's axes are, the labels renamed to that end
            kept, known = _onto(kept, known, [a.name for a in x.type.shape.axes])
        shape = x.type.shape
        axes = [a for n, a in zip(nx, shape.axes, strict=True) if n not in alone]
        named = Real(
            Shape(shape.prefix, tuple(AxisT(n, a.length) for n, a in zip(kept, axes, strict=True)))
        )
        operands = [ct] if other is None else [ct, other]
        adj = s.emit("ein", operands, named, {"axes": kept, "_names": known})
        if alone:
            adj = s.emit("spread", [adj, x], x.type, {"_names": (kept, nx)})
        elif named != x.type:  # a positional axis of x
            adj = s.emit("cast", [adj], x.type)
        s.add(x, adj)


def _onto(kept: tuple, known: tuple, own: list) -> tuple[tuple, tuple]:
    """An adjoint `ein`'s output labels `kept` and operands' labels `known`, renamed one to
    one so that each output label is the name of x's axis it goes to (`own`; None for a
    positional axis, whose label stays): a label another takes gets a fresh one."""
    rename = {k: o for k, o in zip(kept, own, strict=True) if o is not None and o != k}
    used = set(kept).union(*known)
    taken = set(rename.values()) | used
    for n in sorted(used - set(rename)):
        if n in rename.values():
            i = 2
            while f"{n}{i}" in taken:
                i += 1
            rename[n] = f"{n}{i}"
            taken.add(rename[n])

    def m(ns: tuple) -> tuple:
        return tuple(rename.get(n, n) for n in ns)

    return m(kept), tuple(m(ns) for ns in known)
