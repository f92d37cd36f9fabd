"""A stacked parameter's gradient written slot by slot (presk_kernel.stacks): the fills of
zeros and the sum of the L stacks gone, the same bits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from kernel_entries import MINIGPT, lowered, same_bits
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.ir import Const, Store, plain
from presk_kernel.spec import verify_schedule
from presk_kernel.stacks import one_stacks

STEPS = [  # (file, consts, dims, the sums of stacks, every input a real)
    ("tutorial/07_train.psk", (), (("B", 8),), 3, True),  # the tower: L 3, three leaves
    ("tests/examples/minigpt/train_minigpt.psk", MINIGPT, (("B", 2), ("T", 8)), None, False),
]


def _fused(file, consts, dims, realize):
    schedule, args, _ = lowered(file, "loss", dims, realize, True, consts)
    return fuse(schedule)[0], args


def _inputs(args, special: bool):
    """Draws for every input (each a real), with `special` signed zeros, a NaN and large
    values among them."""
    rng = np.random.default_rng(11)
    out = [rng.standard_normal(np.shape(a)) * 3 for a in args]
    if special:
        for x in out:
            flat = x.reshape(-1)
            flat[: min(4, flat.size)] = [0.0, -0.0, np.nan, 1e30][: min(4, flat.size)]
    return out


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(("file", "consts", "dims", "sums", "reals"), STEPS)
def test_a_stacked_gradient_is_written_slot_by_slot_with_the_same_bits(
    file, consts, dims, sums, reals, realize
):
    fused, args = _fused(file, consts, dims, realize)
    out, count = one_stacks(fused)
    verify_schedule(out, "stacks")
    assert count > 0 and (sums is None or count == sums)
    fills = [lc for lc in fused.launches if lc.kernel.name == "fill"]
    assert len(out.launches) < len(fused.launches)
    assert len([lc for lc in out.launches if lc.kernel.name == "fill"]) < len(fills)
    cases = [args] + ([_inputs(args, False), _inputs(args, True)] if reals else [])
    for inputs in cases:  # the run's own inputs; draws, with special values
        assert same_bits(run_schedule(fused, inputs), run_schedule(out, inputs))


def _sum_launch(schedule):
    """The first launch whose every input is a stack a fill wrote (a sum of stacks)."""
    filled = {lc.args[0].buf for lc in schedule.launches if lc.kernel.name == "fill"}
    for i, lc in enumerate(schedule.launches):
        ins = [a.buf for a in lc.args[: len(lc.kernel.inputs)]]
        if len(ins) > 1 and all(b in filled for b in ins):
            return i
    raise AssertionError("no sum of stacks")


def test_a_stack_written_again_or_filled_with_another_value_is_left_as_it_is():
    fused, _ = _fused("tutorial/07_train.psk", (), (("B", 8),), "f64")
    _, count = one_stacks(fused)
    r = _sum_launch(fused)
    stack = fused.launches[r].args[0].buf
    launches = list(fused.launches)
    writes = [i for i, lc in enumerate(launches) if lc.args[-1].buf == stack]
    assert len(writes) == 2 and launches[writes[0]].kernel.name == "fill"
    # its slot's writer runs again after the sum: the stack has three writers
    again = dataclasses.replace(fused, launches=(*launches, launches[writes[1]]))
    assert one_stacks(again)[1] == count - 1
    # its fill stores −0: the sum stays
    k = launches[writes[0]].kernel
    body = _with_value(plain(k.body), Const(-0.0, k.outputs[0].dtype))
    launches[writes[0]] = dataclasses.replace(
        launches[writes[0]], kernel=dataclasses.replace(k, body=body)
    )
    assert one_stacks(dataclasses.replace(fused, launches=tuple(launches)))[1] == count - 1


def _with_value(body, value):
    out = []
    for s in body:
        if isinstance(s, Store):
            s = dataclasses.replace(s, expr=value)
        elif hasattr(s, "body"):
            s = dataclasses.replace(s, body=_with_value(s.body, value))
        out.append(s)
    return tuple(out)
