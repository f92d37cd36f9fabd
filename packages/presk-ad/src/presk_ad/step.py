"""The training step's function: an objective's loss and its gradient in θ, in one call.

`presk train` and the export of a training run (presk-export) evaluate the same
`obj.train_value_grad(batch, θ)` on the interpreter, so both take it from here.
"""

from __future__ import annotations

from presk_core.ir import Function, Instr, Program, Value
from presk_types.presburger import Lin
from presk_types.types import TupleT

from presk_ad.vjp import differentiate

STEP = "{}.train_value_grad"
"""The function a step calls: the objective's loss and gradient in θ, in one call."""


def training_step(core: Program, objective: str) -> Program:
    """The program with `obj.train(batch, θ)`, the objective with θ last (the parameter
    `value_grad` differentiates in), and `obj.train_value_grad(batch, θ) = value_grad
    obj.train(batch, θ)`: the loss and its gradient in θ, a call of `obj.train.value_grad`
    once differentiated."""
    fn = core.function(objective)
    theta, batch = fn.params
    p_batch, p_theta = Value(0, batch.type, batch.name), Value(1, theta.type, theta.name)
    dims = tuple((d, Lin.var(d)) for d in fn.dims)
    out = Value(2, fn.result)
    call = Instr(out, "call", (p_theta, p_batch), (("fn", objective), ("dims", dims)))
    wrap = Function(f"{objective}.train", fn.dims, (p_batch, p_theta), fn.result, (call,), out)
    pair = Value(2, TupleT((fn.result, theta.type)))
    both = Instr(pair, "value_grad", (p_batch, p_theta), (("fn", wrap.name), ("dims", dims)))
    params = (p_batch, p_theta)
    step = Function(STEP.format(objective), fn.dims, params, pair.type, (both,), pair)
    return differentiate(Program(core.functions + (wrap, step)))


__all__ = ["STEP", "training_step"]
