"""The threads' pieces of issue 26 natively, bit for bit: a batched GEMM statement whose
threads share its batch points (one region, each call whole on one thread) against the
same statement splitting each call's columns (the schedule before) and one thread; launches
of few long rows split by their work (presk_kernel.layout.WORK_AT) against one thread and
the kernel interpreter."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
from presk_cback.host import entry_source
from presk_cback.native import NativeEntry
from presk_kernel import layout as L
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.ir import GemmStmt, format_kernel
from presk_kernel.layout import parallel_loops
from presk_kernel.narrow import narrow

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "presk-kernel" / "tests"))
from kernel_entries import MINIGPT, lowered, same_bits  # noqa: E402
from test_narrow import hard_inputs  # noqa: E402


def _unbatched(schedule):
    """`schedule` with each GEMM statement's threads on its calls' columns again."""

    def undo(k):
        body = tuple(
            dataclasses.replace(s, batched=False) if isinstance(s, GemmStmt) else s for s in k.body
        )
        return dataclasses.replace(k, body=body)

    launches = tuple(dataclasses.replace(lc, kernel=undo(lc.kernel)) for lc in schedule.launches)
    return dataclasses.replace(schedule, launches=launches)


def test_a_batched_product_shares_its_batch_among_threads(monkeypatch):
    # attention at B 2, H 2, T 100: the scores (narrowed: blocks of rows) and the values
    # products are GEMMs of 4 batch points, which two threads share two by two
    attend = ("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 100)), "f32")
    schedule, args, _ = lowered(*attend)
    fused = fuse(schedule)[0]
    args = hard_inputs(args, np.float32)
    want = run_schedule(fused, args)
    for narrowed in (fused, narrow(fused)[0]):
        laid = L.lay_out(narrowed, 2)
        stmts = [s for lc in laid.launches for s in lc.kernel.body if isinstance(s, GemmStmt)]
        assert stmts and all(s.batched and s.threads == 2 for s in stmts)
        gemms = [lc.kernel for lc in laid.launches if isinstance(lc.kernel.body[0], GemmStmt)]
        assert all("threads 2 over its batch" in format_kernel(k) for k in gemms)
        source = entry_source(laid)
        assert "num_threads(2) schedule(static) collapse(2)" in source
        got = NativeEntry(laid).run(args)
        assert same_bits(got, want)
        if narrowed is not fused:  # the columns split (the schedule before): the same bits
            # a body no pass writes (its layout says batched): compiled unverified
            with monkeypatch.context() as m:
                m.setenv("PRESK_VERIFY", "0")
                before = NativeEntry(_unbatched(laid)).run(args)
            assert same_bits(got, before)


def test_a_batch_that_does_not_share_evenly_splits_each_call():
    g = type("G", (), {"batch": (("b", 3),)})()
    assert not L.batch_split(g, "b", 2)  # 3 points: 2 and 1
    assert L.batch_split(type("G", (), {"batch": (("b", 17),)})(), "b", 2)  # 8 and more each
    assert L.batch_split(type("G", (), {"batch": (("b", 3), ("h", 2))})(), "b", 2)
    assert not L.batch_split(type("G", (), {"batch": (("b", 4),)})(), "i", 2)  # not the batch
    assert not L.batch_split(type("G", (), {"batch": ()})(), "b", 2)


def test_rows_split_by_their_work_keep_the_bits(monkeypatch):
    """MiniGPT's training step at B 2, T 8 with WORK_AT lowered so that its rows split (the
    softmax's, the norms', a sum over rows into columns), and a causal softmax whose rows
    grow (T 32: its tile of rows is not split, its batch loop under it is, in one region
    around the tile loops): the bits of the interpreter, plain and laid out (one
    thread's)."""
    file = "tests/examples/minigpt/train_minigpt.psk"
    schedule, args, _ = lowered(file, "loss", (("B", 2), ("T", 8)), "f32", True, MINIGPT)
    fused = fuse(schedule)[0]
    want = run_schedule(fused, args)
    before = L.lay_out(fused, 2)
    monkeypatch.setattr(L, "WORK_AT", 64)
    laid = L.lay_out(fused, 2)
    rows = [
        lc.kernel
        for lc, was in zip(laid.launches, before.launches, strict=True)
        if lc.kernel.layout.split and not was.kernel.layout.split
    ]
    assert any("softmax" in " ".join(k.steps) + k.name for k in rows)
    assert any(k.name == "sum_to" for k in rows)
    got = NativeEntry(laid).run(args)
    assert same_bits(got, want)
    assert same_bits(run_schedule(laid, args, laid=True), want)
    attend = ("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 32)), "f32")
    schedule, args, _ = lowered(*attend)
    fused = fuse(schedule)[0]
    args = hard_inputs(args, np.float32)
    laid = L.lay_out(narrow(fused)[0], 2)
    (soft,) = [lc.kernel for lc in laid.launches if "softmax" in lc.kernel.name]
    assert soft.layout.depth == 1 and soft.layout.split == parallel_loops(soft)[0].var
    # one region around its tile loops, each thread sharing the batch loop in every tile
    (c,) = [f for f in entry_source(laid).split("/* ") if f.startswith(soft.name)]
    assert c.count("#pragma omp parallel num_threads(2)\n") == 1
    assert "#pragma omp for schedule(static) nowait" in c and "parallel for" not in c
    assert same_bits(NativeEntry(laid).run(args), run_schedule(fused, args))


def test_the_gemm_shares_the_longer_side_among_threads():
    """m longer than n: the threads share m's panels (presk_cback.gemm's `split_columns`),
    A read in place, packed by rows or by columns; the bits of one thread's fold."""
    from presk_cback import gemm as G

    rng = np.random.default_rng(7)
    for dtype in (np.float64, np.float32):
        a = rng.standard_normal((203, 61)).astype(dtype)
        b = rng.standard_normal((61, 37)).astype(dtype)
        for x in (a, np.asfortranarray(a)):
            one = G.gemm(x, b, threads=1)
            assert same_bits(G.gemm(x, b, threads=2), one)
            assert same_bits(G.gemm(x[:, :1], b[:1], threads=2), G.gemm(x[:, :1], b[:1]))
