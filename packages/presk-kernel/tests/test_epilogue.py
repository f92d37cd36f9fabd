"""A GEMM's epilogues and prologues at emission (presk_kernel.epilogue): the laid-out
schedule a native entry compiles, on the laid-out interpreter, gives the unfused schedule's
bits; the schedule the stages print is left as it is."""

from __future__ import annotations

import dataclasses

import pytest
from kernel_entries import lowered, same_bits
from presk_kernel.epilogue import (
    _shared_producer,
    _unlaid,
    gemm_epilogues,
    with_epilogue,
    with_operand,
)
from presk_kernel.fuse import _index, fuse
from presk_kernel.interp import run_schedule
from presk_kernel.ir import GemmStmt, Store, format_schedule
from presk_kernel.layout import default_layout, lay_out
from presk_kernel.rows import fuse_rows
from presk_kernel.spec import KernelVerifyError, schedule_problems, verify_schedule


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_the_bias_is_the_products_epilogue_and_the_bits_are_the_same(realize):
    schedule, args, _ = lowered(
        "tutorial/01_linear.psk", "Linear{300, 12}.apply", (("batch", 10),), realize
    )
    laid = lay_out(fuse(schedule)[0], 1)
    printed = format_schedule(laid)
    emitted = gemm_epilogues(laid)
    assert format_schedule(laid) == printed and len(laid.launches) == 2
    (lc,) = emitted.launches
    (stmt,) = lc.kernel.body
    assert isinstance(stmt, GemmStmt) and stmt.gemm.epilogue and stmt.gemm.acc
    # named for what it holds (a timed entry lists it so), the product's site
    assert lc.kernel.name == "dot+add" and lc.kernel.site == laid.launches[0].kernel.site
    assert "with epilogue" in str(stmt.gemm)
    want = run_schedule(schedule, args)
    assert same_bits(run_schedule(emitted, args, laid=True), want)


def test_no_epilogue_without_a_gemm_statement_or_under_a_k_block():
    schedule, _, _ = lowered(
        "tutorial/01_linear.psk", "Linear{300, 12}.apply", (("batch", 10),), "f32"
    )
    fused = fuse(schedule)[0]
    p, c = lay_out(fused, 1).launches
    loops = dataclasses.replace(
        p, kernel=dataclasses.replace(p.kernel, layout=default_layout(p.kernel))
    )
    assert with_epilogue(loops, c) is None  # no GEMM statement: the loops keep their store
    blocked = dataclasses.replace(
        p, kernel=dataclasses.replace(p.kernel, layout=dataclasses.replace(p.kernel.layout, kblock=64))
    )  # fmt: skip
    assert with_epilogue(blocked, c) is None
    assert with_operand(c, p) is None  # the bias reads the product: no producer of it


def test_a_small_product_keeps_its_loops():
    # below PACK_AT multiply-adds the run gives no GEMM statement: nothing to fuse into
    schedule, _, _ = lowered("tutorial/01_linear.psk", "Linear{3, 2}.apply", (("batch", 4),))
    laid = lay_out(fuse(schedule)[0], 1)
    assert gemm_epilogues(laid).launches == laid.launches


def test_an_epilogue_stores_its_operand_too_where_later_launches_read_it():
    # the step's h = x·W + b, read by the GELU and later by gelu_grad: the consumer joins
    # the product's epilogue, which stores the product too (two stores, C first); not
    # where a launch between them reads the product (the fused launch writes it later)
    schedule, args, _ = lowered(
        "tutorial/01_linear.psk", "Linear{300, 12}.apply", (("batch", 10),), "f32"
    )
    p, laid_c = lay_out(fuse(schedule)[0], 1).launches
    c = _unlaid(laid_c)  # as gemm_epilogues passes a consumer
    launches = [p, c, c]  # the product read by the consumer, then by another launch
    reads, writes = {}, {}
    for i, lc in enumerate(launches):
        _index(lc, i, reads, writes, add=True)
    assert _shared_producer(c, 1, set(), reads, writes, launches) == 0
    assert _shared_producer(c, 2, set(), reads, writes, launches) is None
    assert _shared_producer(c, 1, {p.args[-1].buf}, reads, writes, launches) is None
    fused = with_epilogue(p, c, keep=True)
    g = fused.kernel.body[0].gemm
    stores = [s for s in g.epilogue if isinstance(s, Store)]
    assert [s.buf for s in stores][0] == g.c and len(stores) == 2
    assert [a.buf for a in fused.args[-2:]] == [p.args[-1].buf, c.args[-1].buf]
    want = run_schedule(schedule, args)
    got = run_schedule(dataclasses.replace(schedule, launches=(fused,), body=None), args, laid=True)
    assert same_bits(got, want)


def test_a_factor_of_the_products_result_is_computed_forward_where_only_it_reads_it(
    monkeypatch,
):
    # gelu_grad(ct, h) = ct · E(h): E into the epilogue that stores h, stored in h's place,
    # only where gelu_grad is h's one reader
    from presk_kernel import epilogue

    dims = (("V", "64"), ("D", "48"), ("H", "2"), ("L", "1"))  # products the GEMM takes
    schedule, _, _ = lowered(
        "tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 16)), "f32", True,
        dims,
    )  # fmt: skip
    laid = lay_out(fuse(schedule)[0], 1)
    factors = epilogue._factors_forward
    monkeypatch.setattr(epilogue, "_factors_forward", lambda *a: [])
    before = list(gemm_epilogues(laid).launches)
    (j,) = [n for n, lc in enumerate(before) if lc.kernel.name == "gelu_grad"]
    h = before[j].args[1].buf
    for extra in (False, True):
        launches, reads, writes = list(before), {}, {}
        for i, lc in enumerate(launches):
            _index(lc, i, reads, writes, add=True)
        if extra:  # another launch reads h too: h stays
            reads[h].add(j + 1)
        factors(launches, set(), reads, writes)
        assert (launches == before) == extra
        if not extra:
            (i,) = writes[h]
            assert "exp" in str(launches[i].kernel.layout.gemm.epilogue)
            assert "erfc" not in str(launches[j].kernel.body)


@pytest.mark.parametrize("threads", [1, 2])
def test_the_emitted_forward_and_step_are_well_formed(threads):
    # the verifier after the emission's passes (PRESK_VERIFY=1: gemm_epilogues and
    # fuse_rows run it): GEMM statements with a prologue (the forward's norm, its scaled
    # rows into the up-projection's panels), epilogues storing C and the GELU (the step's
    # `keep`) and a factor computed forward, then the row kernels fused
    dims = (("V", "64"), ("D", "48"), ("H", "2"), ("L", "1"))
    gemms = []
    for train in (False, True):
        schedule, _, _ = lowered(
            "tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 16)), "f32",
            train, dims,
        )  # fmt: skip
        laid = lay_out(fuse(schedule)[0], threads)
        emitted = gemm_epilogues(laid)
        assert schedule_problems(emitted) == []
        gemms += [lc.kernel.layout.gemm for lc in emitted.launches if lc.kernel.layout.gemm]
        rowed = fuse_rows(emitted)
        assert len(rowed.launches) < len(emitted.launches)
        assert schedule_problems(rowed) == []
    assert any(g.prologue for g in gemms)
    assert any(sum(isinstance(s, Store) for s in g.epilogue) == 2 for g in gemms)


def test_a_product_whose_gemm_statement_lost_its_epilogue_is_refused():
    schedule, _, _ = lowered(
        "tutorial/01_linear.psk", "Linear{300, 12}.apply", (("batch", 10),), "f64"
    )
    laid = lay_out(fuse(schedule)[0], 1)
    emitted = gemm_epilogues(laid)
    (lc,) = emitted.launches
    bare = dataclasses.replace(lc.kernel.layout.gemm, acc="", epilogue=())  # the product's own
    k = dataclasses.replace(lc.kernel, layout=dataclasses.replace(lc.kernel.layout, gemm=bare))
    broken = dataclasses.replace(emitted, launches=(dataclasses.replace(lc, kernel=k),))
    with pytest.raises(KernelVerifyError, match="the GEMM statement is not the kernel's contr"):
        verify_schedule(broken, "epilogues")
    found = schedule_problems(broken)
    assert any("its epilogue is not the statements after its fold" in p for p in found), found
