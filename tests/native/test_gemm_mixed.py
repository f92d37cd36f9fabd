"""A contraction whose operands are of two types (a realization that stores a parameter in
bf16 or f32 while the site computes in f64 or f32) is not a GEMM: the generated GEMM reads
both operands, and writes C, in its one compute type, so the layout pass keeps such a
nest as loops (presk_kernel.contract.contraction refuses it) and a plan cannot ask for the
statement (E7040). Natively and on `--backend kernel` (the laid-out interpreter) the bits
are the same; the uniform realizations of the same nest are GEMMs (the near miss)."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import core_of
from presk_cli.native import NativeError, entry_inputs, executor, lower, storage
from presk_core.run import parse_entry
from presk_kernel.contract import recognize
from presk_kernel.lower import argument_leaves
from presk_kernel.realization import Realization

FILE, ENTRY, DIMS = "tutorial/01_linear.psk", "Linear{64, 64}.apply", {"batch": 8}  # 2^15 MACs

REALIZATIONS = [  # (realization, a GEMM expected)
    (Realization("f64"), True),
    (Realization("f32"), True),
    (Realization("f64", params=(("w", "bf16"),)), False),  # f64 compute, bf16 w
    (Realization("f64", params=(("w", "f32"),)), False),  # f64 compute, f32 w
    (Realization("f32", params=(("w", "bf16"),)), False),  # f32 compute, bf16 w
    (Realization("f32", params=(("w", "f64"),)), False),  # f32 compute, f64 w
    (Realization("bf16"), False),  # bf16 operands computed in f32
]


def _entry():
    c = core_of(FILE)
    e = parse_entry(ENTRY, c, None, DIMS)
    args = [v for _, _, v in entry_inputs(c, e, 0, 53)]
    return c, e.function.name, dict(e.dims) | dict(e.prefix), args


def _dot(schedule):
    (k,) = [lc.kernel for lc in schedule.launches if lc.kernel.name.startswith("dot")]
    return k


@pytest.mark.parametrize("realization,gemm", REALIZATIONS, ids=lambda r: str(r))
@pytest.mark.parametrize("threads", [1, 2])
def test_mixed_operands_are_loops_and_both_backends_agree(compiler, realization, gemm, threads):
    c, name, dims, args = _entry()
    schedule = lower(c, name, dims, args, realization, threads)
    k = _dot(schedule)
    assert (k.layout.gemm is not None) == gemm, (realization, k.layout)
    assert (recognize(k) is not None) == gemm
    inputs = storage(schedule, argument_leaves(args))
    native = executor(schedule, "native")(inputs)
    kernel = executor(schedule, "kernel")(inputs)
    assert [x.tobytes() for x in native] == [x.tobytes() for x in kernel]


def test_a_plan_cannot_put_a_gemm_on_mixed_operands():
    c, name, dims, args = _entry()
    uniform = _dot(lower(c, name, dims, args, "f64"))
    mixed = _dot(lower(c, name, dims, args, REALIZATIONS[2][0]))
    planned = dataclasses.replace(mixed.layout, pack=(0, 1), gemm=uniform.layout.gemm)
    with pytest.raises(NativeError, match="GEMM statement is not the kernel's contraction") as e:
        lower(c, name, dims, args, REALIZATIONS[2][0], plan={mixed.site: planned})
    assert e.value.code == "E7040"
    packed = dataclasses.replace(mixed.layout, pack=(0, 1), gemm=None)  # no GEMM to pack for
    with pytest.raises(NativeError, match="only a GEMM statement packs") as e:
        lower(c, name, dims, args, REALIZATIONS[2][0], plan={mixed.site: packed})
    assert e.value.code == "E7040"
