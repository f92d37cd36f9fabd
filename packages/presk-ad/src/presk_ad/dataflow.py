"""What a differentiated function's values depend on, what its result reads, and the
prefix a call binds its callee's `...` to."""

from __future__ import annotations

from presk_core.ir import Function, Instr, Operand, Value
from presk_types.types import Shape, shape_of


def active_values(fn: Function, needed: set[int]) -> set[int]:
    """The values of fn that depend on its needed parameters."""
    active = {fn.params[i].id for i in needed}
    for ins in fn.body:
        if any(isinstance(a, Value) and a.id in active for a in ins.args):
            active.add(ins.out.id)
    return active


def dead_code(body: tuple[Instr, ...], ret: Operand) -> tuple[Instr, ...]:
    """The instructions whose values the result reads, directly or not (all are pure)."""
    live = {ret.id} if isinstance(ret, Value) else set()
    kept = []
    for ins in reversed(body):
        if ins.out.id in live:
            kept.append(ins)
            live.update(a.id for a in ins.args if isinstance(a, Value))
    return tuple(reversed(kept))


def call_prefix(callee: Function, ins: Instr) -> Shape | None:
    """The axes a call binds the callee's open prefix `...` to (None if it has none): those
    of the first argument for a parameter with a prefix, before the parameter's own axes."""
    for p, a in zip(callee.params, ins.args, strict=True):
        ps, s = shape_of(p.type), shape_of(a.type)
        if ps is not None and ps.prefix and s is not None:
            return Shape(s.prefix, s.axes[: s.rank - ps.rank])
    return None
