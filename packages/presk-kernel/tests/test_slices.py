"""Slice fusion (presk_kernel.slices, issue 26): the launches of a causal attention's
gradient that run over the same (batch, head) points — its products, its softmax and its
adjoint, the copies of its heads — become kernels over those points, and the kernel
interpreter gives them the bits of the launches they replaced, laid out or not."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
from kernel_entries import lowered, nan_aside, read_at_zero, same_bits
from presk_kernel import calls, slices
from presk_kernel.codec import decode_kernel, encode_kernel
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.ir import For, GemmStmt, Layout, accesses, plain
from presk_kernel.layout import apply_layout, check_layout, lay_out, plain_nest
from presk_kernel.narrow import narrow
from presk_kernel.passes import emitted
from presk_kernel.spec import KernelVerifyError, verify_schedule
from presk_kernel.written import zeroed

PROGRAM = "packages/presk-kernel/tests/programs/attention_grad.psk"


def _case(realize: str, threads: int, t: int = 64, special: bool = False):
    """The attention's gradient (B 2, T `t`, H 2, HD 8) laid out and emitted without slice
    groups (its products large enough for GEMM statements), and inputs: normal draws, with
    `special` a row of q holding ±0, a NaN and large values, and a gradient row of −0."""
    consts = (("H", "2"), ("HD", "8"))
    sched, args, _ = lowered(PROGRAM, "grads", (("B", 2), ("T", t)), realize, False, consts)
    laid = lay_out(narrow(fuse(sched)[0])[0], threads)
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal(np.shape(a)) for a in args]
    if special:
        inputs[0][1, 1, 3, :] = [0.0, -0.0, np.nan, 1e30, -1e30, 0.0, 2.0, -0.0]
        inputs[3][0, 0, 5, :] = -0.0  # a gradient row of −0: products that round to −0
    return emitted(laid, slices=False), inputs


@pytest.mark.parametrize("realize", ["f32", "f64"])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_sliced_schedule_gives_the_unsliced_bits(realize, threads):
    for t, special in ((64, False), (71, True)):
        em, inputs = _case(realize, threads, t, special)
        fused = verify_schedule(slices.fuse_slices(em), "slice fusion")  # well formed
        grouped = [lc for lc in fused.launches if lc.kernel.layout.parts]
        assert grouped and len(fused.launches) < len(em.launches)
        for lc in grouped:
            assert lc.kernel.name == f"slices of {len(lc.kernel.layout.parts)} kernels"
            outer = lc.kernel.body[0]
            assert isinstance(outer, For) and outer.threads == (threads if threads > 1 else 1)
        want = run_schedule(em, inputs)
        assert same_bits(run_schedule(fused, inputs), want), (realize, threads, t)
        got = run_schedule(fused, inputs, laid=True)  # each GEMM at each point of the loops
        assert nan_aside(got, run_schedule(em, inputs, laid=True)), (realize, threads, t)


def test_the_attention_runs_as_groups_of_its_slices():
    em, _ = _case("f32", 1)
    groups = slices.slice_groups(em)
    names = [[em.launches[i].kernel.name for i in g] for _, g, _ in groups]
    assert groups and all(r == 2 for _, _, r in groups)  # (batch, heads)
    assert all(sum(n.startswith("ein[") for n in g) >= 2 for g in names)
    backward = max(names, key=len)  # the adjoint with the products beside it
    assert any(n.startswith("fused") for n in backward) and len(backward) >= 5
    fused = slices.fuse_slices(em)
    for lc in fused.launches:
        if lc.kernel.layout.parts:
            gemms = _gemms(lc.kernel.body)
            assert gemms and all(g.bound == 2 and not g.batched for g in gemms)
            assert all(g.threads == 1 for g in gemms)


def _gemms(body):
    for s in body:
        if isinstance(s, GemmStmt):
            yield s
        elif isinstance(s, For):
            yield from _gemms(s.body)


def _reads_slice_zero(lc, buf: int):
    """`lc` with its kernel's loads of `buf` at batch point 0 (a member reading another
    point's slice), its body not laid out."""
    k = lc.kernel
    body = read_at_zero(plain(k.body), buf)
    return dataclasses.replace(lc, kernel=dataclasses.replace(k, body=body, layout=Layout()))


def test_a_launch_that_reads_another_slice_stays_apart_from_its_writer():
    em, inputs = _case("f32", 1)
    _, group, _ = slices.slice_groups(em)[0]
    # the member after the first reads the first's output: at point 0 only, it reads
    # what other points' iterations of the first write
    at = group[1]
    first = em.launches[group[0]]
    out = first.args[len(first.kernel.inputs)].buf
    lc = em.launches[at]
    (buf,) = [n for n, a in enumerate(lc.args) if a.buf == out and n < len(lc.kernel.inputs)]
    broken = dataclasses.replace(em, launches=tuple(
        _reads_slice_zero(x, buf) if i == at else x for i, x in enumerate(em.launches)
    ))  # fmt: skip
    groups = slices.slice_groups(broken)
    assert groups  # (a reader of another slice may join a group its writer is not in)
    assert not any(group[0] in g and at in g for _, g, _ in groups)
    fused = slices.fuse_slices(broken)
    assert same_bits(run_schedule(fused, inputs), run_schedule(broken, inputs))


def test_a_group_needs_a_place_where_every_member_can_run():
    em, _ = _case("f32", 1)
    place, group, _ = slices.slice_groups(em)[0]
    members = [slices._member(em.launches[i], (2, 2)) for i in group]
    assert slices._place(em.launches, group, members) == place
    # a launch between two members that reads what the first writes and writes what the
    # second reads: neither can move past it
    first, second = em.launches[group[0]], em.launches[group[1]]
    wrote = first.args[len(first.kernel.inputs)]
    reads = second.args[0]
    between = dataclasses.replace(
        first, args=(wrote, *first.args[1 : len(first.kernel.inputs)], reads)
    )
    launches = list(em.launches)
    launches.insert(group[1], between)
    moved = [i if i < group[1] else i + 1 for i in group]
    assert slices._place(launches, moved[:2], members[:2]) is None


def test_the_verifier_refuses_a_slice_group_that_lays_out_its_loops():
    em, _ = _case("f32", 2)
    fused = slices.fuse_slices(em)
    lc = next(lc for lc in fused.launches if lc.kernel.layout.parts)
    k = lc.kernel
    v = k.layout.order[1]
    n = next(n for n, p in enumerate(k.layout.parts) if p.gemm is None)  # a nest's part
    parts = list(k.layout.parts)
    parts[n] = dataclasses.replace(parts[n], lanes=v, width=8)  # lanes on the group's loop
    broken = dataclasses.replace(k.layout, parts=tuple(parts))
    assert f"part {n}" in check_layout(k, broken)
    parts[n] = dataclasses.replace(k.layout.parts[n], split=v, threads=2)
    assert "one thread" in check_layout(k, dataclasses.replace(k.layout, parts=tuple(parts)))
    tiled = dataclasses.replace(k.layout, tiles=((v, 1),))
    assert "neither tiled" in check_layout(k, tiled)
    launches = tuple(
        dataclasses.replace(x, kernel=dataclasses.replace(k, layout=tiled)) if x is lc else x
        for x in fused.launches
    )
    with pytest.raises(KernelVerifyError):
        verify_schedule(dataclasses.replace(fused, launches=launches), "slice fusion")


def test_a_sliced_schedule_survives_the_kernel_document():
    em, inputs = _case("f32", 2)
    fused = slices.fuse_slices(em)
    back = decode_kernel(encode_kernel(fused))
    assert back == fused
    assert same_bits(run_schedule(back, inputs, laid=True), run_schedule(fused, inputs, laid=True))


def test_unfused_sees_the_members_in_order():
    em, _ = _case("f32", 1)
    fused = slices.fuse_slices(em)
    view, members = slices.unfused(fused)
    assert len(view.launches) == len(em.launches)
    assert members and all(view.launches[i].kernel.site for i in members)
    # each member's launch binds what the launch it came from bound, in one order or another
    before = sorted(sorted((a.buf, a.offset) for a in lc.args) for lc in em.launches)
    after = sorted(sorted((a.buf, a.offset) for a in lc.args) for lc in view.launches)
    assert before == after


# ---- a group's own temporaries kept as scratch ------------------------------------------


def _scratch_names(lc) -> set[str]:
    """The loop variables a group's laid-out accesses of its scratch buffers name."""
    from presk_kernel.ir import accesses

    k = lc.kernel
    return {
        v
        for b, index, _ in accesses(plain(k.body))
        if b in k.layout.scratch
        for i in index
        for v, _ in getattr(i, "terms", ())
    }


@pytest.mark.parametrize("threads", [1, 2])
def test_a_group_keeps_its_own_temporaries_as_one_slice_a_point(threads):
    em, _ = _case("f32", threads)
    fused = slices.fuse_slices(em)
    bound = Counter(a.buf for lc in fused.launches for a in lc.args)
    must_zero = set(zeroed(em))
    roles = {b.id: b.role for b in fused.buffers}
    passed = calls.passed(fused.body)  # results of a host function: its caller reads them
    grouped = [lc for lc in fused.launches if lc.kernel.layout.parts]
    assert all(lc.kernel.layout.scratch for lc in grouped)
    for lc in grouped:
        k = lc.kernel
        kept = {lc.args[i].buf for i in k.layout.scratch}
        for b in kept:  # bound by this launch alone, a temporary that need not start at zero
            assert bound[b] == 1 and roles[b] == "temp" and b not in must_zero
        outputs = {a.buf for a in lc.args[len(k.inputs) :]}
        assert outputs - kept  # (what a later launch or the caller reads is no scratch)
        assert all(bound[b] > 1 or roles[b] != "temp" or b in passed for b in outputs - kept)
        # the laid-out accesses name the split loop only (at one thread none): its points
        # own their slices, the others' share one
        assert _scratch_names(lc) & set(k.layout.order) == (
            {k.layout.split} if threads > 1 else set()
        )
        # the plain nest the interpreter runs: at their own points again
        unkept = dataclasses.replace(k, body=plain_nest(k), layout=Layout())
        assert _scratch_names(dataclasses.replace(lc, kernel=unkept)) == set()  # no scratch
        names = {v for b, ix, _ in accesses(unkept.body) if b in k.layout.scratch for i in ix
                 for v, _ in getattr(i, "terms", ())}  # fmt: skip
        assert names >= set(k.layout.order)
    # the zeroing sees the members at their own points: unchanged by the scratch
    assert zeroed(fused) == zeroed(slices.fuse_slices(em, scratch=False))


def test_a_buffer_that_must_start_at_zero_or_is_read_elsewhere_is_no_scratch(monkeypatch):
    em, inputs = _case("f32", 1)
    plainly = slices.fuse_slices(em, scratch=False)
    assert not any(lc.kernel.layout.scratch for lc in plainly.launches)
    import presk_kernel.written as written

    every = [b.id for b in em.buffers]
    monkeypatch.setattr(written, "zeroed", lambda schedule: every)
    assert not any(lc.kernel.layout.scratch for lc in slices.fuse_slices(em).launches)
    monkeypatch.undo()
    # a member reading a temporary at batch point 0, where it read its own point's: kept
    # apart from scratch (the group still forms: the reader and the writer are one member)
    n, lc = next((n, lc) for n, lc in enumerate(plainly.launches) if lc.kernel.layout.parts)
    k = lc.kernel
    kept = slices.with_scratch(plainly).launches[n].kernel.layout.scratch
    reads = {b for b, _, store in accesses(plain(k.body)) if not store}
    victim = next(b for b in kept if b in reads)
    body = read_at_zero(plain(k.body), victim)
    broken = apply_layout(dataclasses.replace(k, body=body), k.layout)
    launches = list(plainly.launches)
    launches[n] = dataclasses.replace(lc, kernel=broken)
    again = slices.with_scratch(dataclasses.replace(plainly, launches=tuple(launches)))
    assert victim not in again.launches[n].kernel.layout.scratch
    assert again.launches[n].kernel.layout.scratch  # (the others still kept)


def test_the_verifier_refuses_scratch_outside_a_group_or_on_an_input():
    em, _ = _case("f32", 1)
    fused = slices.fuse_slices(em)
    lc = next(lc for lc in fused.launches if lc.kernel.layout.parts)
    k = lc.kernel
    assert "an output" in check_layout(k, dataclasses.replace(k.layout, scratch=(0,)))
    twice = (k.layout.scratch[0],) * 2
    assert "once" in check_layout(k, dataclasses.replace(k.layout, scratch=twice))
    other = next(x for x in em.launches if not x.kernel.layout.parts)
    lone = dataclasses.replace(other.kernel.layout, scratch=(len(other.kernel.inputs),))
    assert "slice group" in check_layout(other.kernel, lone)
    # a laid-out body whose scratch access names a loop the layout leaves out
    unkept = apply_layout(
        dataclasses.replace(k, body=plain_nest(k)), dataclasses.replace(k.layout, scratch=())
    )
    launches = tuple(
        dataclasses.replace(x, kernel=dataclasses.replace(unkept, layout=k.layout))
        if x is lc
        else x
        for x in fused.launches
    )
    with pytest.raises(KernelVerifyError):
        verify_schedule(dataclasses.replace(fused, launches=launches), "slice fusion")
