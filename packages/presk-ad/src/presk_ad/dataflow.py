"""What a differentiated function's values depend on and what its result reads."""

from __future__ import annotations

from presk_core.ir import Function, Instr, Operand, Value


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
