"""Fusion: fewer launches, the same bits."""

from __future__ import annotations

import pytest
from kernel_entries import ENTRIES, MINIGPT, lowered, same_bits
from presk_kernel.fuse import _recomputable, fuse, launch_counts, unfused_launches
from presk_kernel.interp import run_schedule
from presk_kernel.ir import Affine, Const, Load, Op, Reduce, Var, format_kernel


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(("file", "entry", "dims", "consts"), ENTRIES)
def test_fusion_changes_no_bit(file, entry, dims, consts, realize):
    schedule, args, _ = lowered(file, entry, dims, realize, consts=consts)
    fused, _ = fuse(schedule)
    assert same_bits(run_schedule(schedule, args), run_schedule(fused, args))


@pytest.mark.parametrize("realize", ["f64", "bf16"])
def test_fusion_changes_no_bit_in_training_steps(realize):
    for file, consts, dims in [
        ("tutorial/07_train.psk", (), (("B", 8),)),
        ("tests/examples/minigpt/train_minigpt.psk", MINIGPT, (("B", 2), ("T", 8))),
    ]:
        schedule, args, _ = lowered(file, "loss", dims, realize, True, consts)
        fused, groups = fuse(schedule)
        assert len(fused.launches) < len(schedule.launches)
        assert same_bits(run_schedule(schedule, args), run_schedule(fused, args))


def test_launch_counts_of_the_tutorial_step():
    schedule, _, _ = lowered("tutorial/07_train.psk", "loss", (("B", 8),), train=True)
    assert launch_counts(schedule) == (76, 187)
    assert unfused_launches(fuse(schedule)[0]) == 187  # what `presk train` prints, after fusion
    assert unfused_launches(schedule) == 187


@pytest.mark.parametrize(("file", "entry", "dims", "consts"), ENTRIES)
def test_a_fused_schedule_counts_its_launches_without_fusion(file, entry, dims, consts):
    schedule, _, _ = lowered(file, entry, dims, consts=consts)
    assert unfused_launches(fuse(schedule)[0]) == len(schedule.launches)


def test_an_elementwise_producer_moves_into_the_reduction_that_reads_it():
    schedule, _, _ = lowered("tutorial/07_train.psk", "loss", (("B", 8),))
    fused, groups = fuse(schedule)
    first = fused.launches[0].kernel
    # the square moves into the mean; the mean's consumers (+ eps, √) into its store
    assert first.name == "fused 4 steps"
    assert groups[0].names == ("pow 2", "mean axis model", "add", "sqrt")
    assert groups[0].steps[:2] == ("RMSNorm.apply/%3", "RMSNorm.apply/%4")
    (loop,) = first.body
    reduce = loop.body[0]
    assert isinstance(reduce, Reduce) and reduce.op == "add"
    assert reduce.terms[0] == Op("pow", reduce.terms[0].args, 2)  # the square, then the sum
    assert "} of pow 2(%0[i0, i1])" in format_kernel(first)


def test_a_cheap_value_read_in_several_passes_is_computed_again_in_each():
    schedule, args, _ = lowered(
        "tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 8)), "f64", True,
        MINIGPT,
    )  # fmt: skip
    fused, groups = fuse(schedule)
    # the softmax reads its scores in three passes: their division by √hd is computed again
    # in each (one operation) rather than stored and loaded back
    (group, *_) = [g for g in groups if g.names == ("div", "softmax axis seq2")]
    (k, *_) = [lc.kernel for lc in fused.launches if lc.kernel.steps == group.steps]
    passes = [r for r in k.body[0].body[0].body[0].body if isinstance(r, Reduce)]
    assert len(passes) == 2 and all("div(" in str(r.terms[0]) for r in passes)
    assert "div(" in str(k.body[0].body[0].body[0].body[-1].body[0].expr)  # the third pass
    assert same_bits(run_schedule(schedule, args), run_schedule(fused, args))


def test_a_value_read_in_several_passes_is_not_computed_again_across_a_function():
    schedule, _, _ = lowered("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 3)))
    fused, groups = fuse(schedule)
    names = [lc.kernel.name for lc in fused.launches]
    # the division is `scores`'s, the softmax `attend`'s: each function keeps its nests
    assert names == ["ein[batch, heads, seq, seq2]", "fused 2 steps", "causal_mask"] + [
        "softmax axis seq2",
        "ein[batch, heads, seq, hd]",
    ]


def test_a_costly_value_read_in_several_passes_is_not_fused():
    x = Load(0, (Affine.var("i0"),))
    assert _recomputable(Op("div", (x, Op("sqrt", (Const(4.0, "f64"),)))), 3)
    assert not _recomputable(Op("exp", (x,)), 2)  # a transcendental: stored once
    assert not _recomputable(Op("add", (x, x)), 2)  # two loads
    assert not _recomputable(Op("neg", (x,)), 4)  # more passes than PASSES
    assert _recomputable(Op("neg", (x,)), 1)


def test_bf16_fusion_rounds_where_the_producer_stored():
    schedule, _, _ = lowered("tutorial/07_train.psk", "loss", (("B", 8),), "bf16")
    fused, _ = fuse(schedule)
    text = format_kernel(fused.launches[0].kernel)
    assert "bf16(pow 2(" in text


def test_the_optimizer_step_fuses_each_leafs_update():
    schedule, args, _ = lowered("tutorial/07_train.psk", "adamw.step", ())
    fused, _ = fuse(schedule)
    assert launch_counts(schedule) == (len(fused.launches), 74)
    assert len(fused.launches) <= 16
    assert same_bits(run_schedule(schedule, args), run_schedule(fused, args))


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
def test_an_elementwise_consumer_becomes_the_epilogue_of_its_producer(realize):
    schedule, args, _ = lowered(
        "tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 8)), realize, True,
        MINIGPT,
    )  # fmt: skip
    fused, groups = fuse(schedule)
    names = [g.names for g in groups]
    # the adjoint's mask (+0 where it hides) and the backward's division by √hd, computed
    # where softmax_grad stores its operand
    adjoint = ("softmax_grad axis seq2", "select", "div")
    assert adjoint in names
    (group, *_) = [g for g in groups if g.names == adjoint]
    (k, *_) = [lc.kernel for lc in fused.launches if lc.kernel.steps == group.steps]
    assert len(k.outputs) == 1 and "e0 = " in format_kernel(k)
    assert same_bits(run_schedule(schedule, args), run_schedule(fused, args))


def test_a_contraction_takes_no_epilogue():
    schedule, _, _ = lowered("tutorial/07_train.psk", "loss", (("B", 8),))
    fused, _ = fuse(schedule)
    stores = [  # what each fold of fma stores: its accumulator, plain (the GEMM's store)
        (body[n + 1], r.acc)
        for lc in fused.launches
        for body in _bodies(lc.kernel.body)
        for n, r in enumerate(body)
        if isinstance(r, Reduce) and r.op == "fma"
    ]
    assert stores and all(st.expr == Var(acc) for st, acc in stores)
    dots = [lc.kernel for lc in fused.launches if lc.kernel.name == "dot"]
    assert dots and all(k.steps == () for k in dots)  # each a kernel of its own, unfused


def _bodies(body):
    yield body
    for s in body:
        yield from _bodies(getattr(s, "body", ()))


def test_a_long_chain_is_fused_no_deeper_than_deepest(tmp_path, monkeypatch):
    """An unrolled scan's adjoint sums θ's cotangents a step at a time: hundreds of adds in a
    chain. Fused inline they made one expression hundreds deep (a RecursionError in the
    layout pass at 256 steps); past `DEEPEST` the chain goes on as `let`s, the same bits."""
    import presk_kernel.fuse as fusion
    from presk_kernel.fuse import _body_depth

    src = tmp_path / "chain.psk"
    terms = " + ".join(["x"] + [f"x * {k}" for k in range(1, 40)])
    src.write_text(f"fn chain(x : ℝ[n: 4]) -> ℝ[n: 4] =\n    {terms}\n")
    schedule, args, _ = lowered(str(src), "chain", ())
    deep, _ = fuse(schedule)
    assert max(_body_depth(lc.kernel.body) for lc in deep.launches) > 20
    monkeypatch.setattr(fusion, "DEEPEST", 8)
    cut, _ = fuse(schedule)
    assert max(_body_depth(lc.kernel.body) for lc in cut.launches) <= 8
    assert same_bits(run_schedule(schedule, args), run_schedule(cut, args))
