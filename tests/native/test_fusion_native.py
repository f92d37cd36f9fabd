"""Epilogue fusion into the generated GEMM (presk_kernel.fuse.merge_epilogue, docs/native.md):
the compiled entry, its products with their consumers fused in, computes the bits of the
unfused schedule on the kernel interpreter — over several of the GEMM's blocks of k (the
partial sums in C, the epilogue after the last), edge tiles, rows merged from a batch, one
and two threads."""

from __future__ import annotations

import dataclasses

import pytest
from kernel_entries import lowered
from presk_cli.native import executor, storage
from presk_kernel.contract import contraction
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.layout import default_layout, lay_out, nest_names, with_gemm


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_a_product_with_its_epilogue_gives_the_unfused_bits(compiler, realize):
    # k = 400: two of the GEMM's blocks of k (KC 384 or 256); 45 rows, 40 columns: edge tiles
    schedule, args, _ = lowered(
        "tutorial/01_linear.psk", "Linear{400, 40}.apply", (("batch", 45),), realize
    )
    want = [x.tobytes() for x in run_schedule(schedule, args)]
    fused = fuse(schedule)[0]
    (k,) = [lc.kernel for lc in fused.launches if contraction(lc.kernel) is not None]
    assert contraction(k).epilogue and k.steps  # the bias is the product's epilogue
    for threads in (1, 2):
        laid = lay_out(fused, threads)
        (g,) = [lc.kernel.layout.gemm for lc in laid.launches if lc.kernel.layout.gemm]
        assert g.epilogue and (g.rows, g.cols, g.depth) == (45, 40, 400)
        inputs = storage(laid, args)
        for lanes in (False, True):
            got = executor(laid, "native", lanes)(inputs)
            assert [x.tobytes() for x in got] == want, (threads, lanes)
        assert [x.tobytes() for x in executor(laid, "kernel")(inputs)] == want


def test_an_epilogue_of_a_batched_product_gives_the_unfused_bits(compiler):
    # the attention's scores: a product per (batch, head), divided by √hd in its epilogue
    schedule, args, _ = lowered("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 40)), "f32")
    want = [x.tobytes() for x in run_schedule(schedule, args)]
    fused = fuse(schedule)[0]
    plan = {}
    for lc, name in zip(fused.launches, nest_names(fused.launches), strict=True):  # all packed
        g = contraction(lc.kernel)
        if g is not None and name not in plan:
            plan[name] = with_gemm(
                lc.kernel, dataclasses.replace(default_layout(lc.kernel), pack=(g.a, g.b))
            )
    laid = lay_out(fused, 1, plan)
    gemms = [lc.kernel.layout.gemm for lc in laid.launches if lc.kernel.layout.gemm]
    assert any(g.epilogue and g.batch for g in gemms)
    inputs = storage(laid, args)
    assert [x.tobytes() for x in executor(laid, "native")(inputs)] == want
