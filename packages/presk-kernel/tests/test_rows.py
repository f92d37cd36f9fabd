"""Row fusion (presk_kernel.rows, issue 26): the kernels that sweep one row loop — a row's
folds with their producers and consumers — become one kernel, and the kernel interpreter
gives that kernel the bits of the launches it replaced, laid out or not, on rows of odd
lengths and on rows holding NaN and infinities."""

from __future__ import annotations

import dataclasses

import pytest
from kernel_entries import lowered, nan_aside, read_at_zero, same_bits
from kernel_entries import rows_case as _case
from presk_kernel import rows
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.ir import Axis, Loop, Reduce, plain
from presk_kernel.layout import lay_out
from presk_kernel.spec import verify_schedule

ENTRIES = ["layer_norm", "layer_norm_dx", "rms_norm", "row_variance", "by_row_max", "shifted_norm"]


@pytest.mark.parametrize("realize", ["f32", "f64", "bf16"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_row_fused_schedule_gives_the_unfused_bits(entry, realize):
    for d, threads in ((7, 1), (13, 2), (192, 1)):
        laid, inputs = _case(entry, d, realize, threads)
        want = run_schedule(laid, inputs)
        fused = verify_schedule(rows.fuse_rows(laid), "row fusion")  # well formed
        assert len(fused.launches) == 1 < len(laid.launches), (entry, d)
        (lc,) = fused.launches
        assert lc.kernel.name == f"rows of {len(laid.launches)} kernels"
        assert len(lc.kernel.steps) == sum(len(x.kernel.steps) or 1 for x in laid.launches)
        assert same_bits(run_schedule(fused, inputs), want), (entry, d, threads)
        laid_want = run_schedule(laid, inputs, laid=True)
        got = run_schedule(fused, inputs, laid=True)  # as its layout runs it (strips)
        assert nan_aside(got, laid_want) and nan_aside(got, want), (entry, d, threads)


def test_a_long_row_of_a_thousand_terms():
    for entry in ("layer_norm_dx", "by_row_max"):
        laid, inputs = _case(entry, 1000, "f32")
        fused = rows.fuse_rows(laid)
        assert len(fused.launches) == 1
        want = run_schedule(laid, inputs)
        assert same_bits(run_schedule(fused, inputs), want)
        assert nan_aside(run_schedule(fused, inputs, laid=True), want)


def test_each_fold_stays_its_rows_left_fold():
    # the fused kernel holds each member's folds as they were: the same ops over the same
    # variables' extents, in the members' order
    laid, _ = _case("layer_norm", 13, "f32")
    (lc,) = rows.fuse_rows(laid).launches

    def folds(body):
        for s in body:
            if isinstance(s, Reduce):
                yield s.op, tuple(n for _, _, n in s.vars), s.dtype
            if isinstance(s, Loop | Reduce):
                yield from folds(s.body)

    before = [f for x in laid.launches for f in folds(plain(x.kernel.body))]
    assert list(folds(plain(lc.kernel.body))) == before == [("add", (13,), "f32")] * 2


def test_a_row_too_long_for_the_cache_is_not_fused(monkeypatch):
    laid, inputs = _case("layer_norm", 7, "f32")
    monkeypatch.setattr(rows, "ROW_BYTES", 7 * 4 - 1)  # a row of x: 28 bytes
    assert rows.row_groups(laid) == []
    assert rows.fuse_rows(laid) is laid
    monkeypatch.setattr(rows, "ROW_BYTES", 7 * 4)
    assert len(rows.fuse_rows(laid).launches) == 1


def test_a_kernel_reading_another_row_of_a_members_result_is_not_fused():
    laid, inputs = _case("layer_norm", 7, "f32")
    # `sub` (x − μ) made to read μ of row 0 at every row: its rows depend on another's
    k = laid.launches[1].kernel
    assert k.name == "sub"
    body = read_at_zero(plain(k.body), 1)
    changed = dataclasses.replace(laid.launches[1], kernel=dataclasses.replace(k, body=body))
    odd = dataclasses.replace(laid, launches=(laid.launches[0], changed, *laid.launches[2:]))
    groups = rows.row_groups(odd)
    assert all(not {0, 1} <= set(at) for _, at in groups)
    fused = rows.fuse_rows(odd)
    assert same_bits(run_schedule(fused, inputs), run_schedule(odd, inputs))


def test_the_course_gpts_norms_are_one_launch_each():
    consts = (("V", "11"), ("D", "16"), ("H", "2"), ("L", "1"))
    schedule, args, _ = lowered(
        "corpus/nlp/05_gpt.psk", "loss", (("B", 2), ("T", 8)), "f32", True, consts
    )
    laid = lay_out(fuse(schedule)[0], 1)
    fused = verify_schedule(rows.fuse_rows(laid), "row fusion")

    def norms(s, part: str) -> int:
        site = f"LayerNorm.apply.{part}/"
        return sum(any(site in x for x in (*lc.kernel.steps, lc.kernel.site)) for lc in s.launches)

    # three norms (ln1, ln2, final): five launches each forward, one after; backward nine,
    # five after: the row's five kernels one, the column sums for dγ and dβ (folds down
    # the columns: another axis) and the optimizer's two that add them up as they were
    assert (norms(laid, "fwd"), norms(laid, "bwd")) == (15, 27)
    assert (norms(fused, "fwd"), norms(fused, "bwd")) == (3, 15)
    sums = [lc for lc in laid.launches if lc.kernel.name == "sum_to"]
    assert sums and all(rows._row_nest(lc) is None for lc in sums)
    assert sum(lc.kernel.name == "sum_to" for lc in fused.launches) == len(sums)
    assert len(fused.launches) < len(laid.launches)
    assert same_bits(run_schedule(fused, args), run_schedule(laid, args))


def test_a_buffer_under_two_axis_names_is_one_buffer():
    # the course GPT's x = embed + pos, stored with an unnamed last axis, read by its norm
    # as `model`: one buffer of the fused kernel (two would let the store go unseen)
    laid, inputs = _case("shifted_norm", 7, "f32")
    k = laid.launches[1].kernel
    assert k.name == "mean axis model" and k.inputs[0].axes[-1].name is None
    (b,) = k.inputs
    named = dataclasses.replace(b, axes=(*b.axes[:-1], Axis("model", b.axes[-1].length)))
    renamed = dataclasses.replace(k, inputs=(named,))
    lc = dataclasses.replace(laid.launches[1], kernel=renamed)
    odd = dataclasses.replace(laid, launches=(laid.launches[0], lc, *laid.launches[2:]))
    fused = rows.fuse_rows(odd)
    assert len(fused.launches) == 1
    assert same_bits(run_schedule(fused, inputs), run_schedule(laid, inputs))


def test_a_group_keeps_one_arithmetic():
    # a mixed realization: the norm computes in f32, the add before it in f64; fusing them
    # would compute one of them in the other's type (the bits of `presk solve`'s steps)
    from kernel_entries import ROWS_PROGRAM, floats
    from presk_kernel.realization import Realization

    mixed = Realization("f64", functions=(("layer_norm", "f32"),))
    for d in (7, 13):
        schedule, args, _ = lowered(
            ROWS_PROGRAM, "shifted_norm", (("B", 5),), mixed, consts=(("D", str(d)),)
        )
        laid = lay_out(fuse(schedule)[0], 1)
        assert {lc.kernel.compute for lc in laid.launches} == {"f32", "f64"}
        fused = rows.fuse_rows(laid)
        for lc in fused.launches:
            steps = lc.kernel.steps or (lc.kernel.site,)
            assert all(("layer_norm" in s) == (lc.kernel.compute == "f32") for s in steps), steps
        inputs = [floats(a) for a in args]
        assert same_bits(run_schedule(fused, inputs), run_schedule(laid, inputs))
