"""Slice fusion in the compiled entry (presk_kernel.slices, docs/native.md "An attention's
launches over its slices"): the entry compiles a causal attention's gradient with its
launches over the same (batch, head) points as kernels over those points, and gives the
bits of the same entry compiled without them (`slices=False`) and the kernel
interpreter's — rows of ±0, a NaN and large values, a gradient row of −0, f32 and f64,
one and two threads — and needs no more zeros."""

from __future__ import annotations

import re

import numpy as np
import pytest
from kernel_entries import lowered, nan_aside
from presk_cback.native import NativeEntry
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.layout import lay_out
from presk_kernel.narrow import narrow
from presk_kernel.passes import emitted
from presk_kernel.written import zeroed

PROGRAM = "packages/presk-kernel/tests/programs/attention_grad.psk"


def _case(realize: str, threads: int, t: int):
    consts = (("H", "2"), ("HD", "8"))
    sched, args, _ = lowered(PROGRAM, "grads", (("B", 2), ("T", t)), realize, False, consts)
    laid = lay_out(narrow(fuse(sched)[0])[0], threads)
    rng = np.random.default_rng(3)
    dtype = np.float32 if realize == "f32" else np.float64
    inputs = [rng.standard_normal(np.shape(a)).astype(dtype) for a in args]
    inputs[0][1, 1, 3, :] = [0.0, -0.0, np.nan, 1e30, -1e30, 0.0, 2.0, -0.0]
    inputs[3][0, 0, 5, :] = -0.0
    return laid, inputs


@pytest.mark.parametrize("realize, threads, t", [("f32", 1, 64), ("f32", 2, 71), ("f64", 2, 64)])
def test_the_sliced_entry_gives_the_unsliced_entrys_bits(compiler, realize, threads, t):
    laid, inputs = _case(realize, threads, t)
    apart = NativeEntry(laid, slices=False)
    sliced = NativeEntry(laid)
    groups = [lc for lc in sliced.schedule.launches if lc.kernel.layout.parts]
    assert groups and len(sliced.schedule.launches) < len(apart.schedule.launches)
    want = apart.run(inputs)
    got = sliced.run(inputs)
    assert [x.tobytes() for x in got] == [x.tobytes() for x in want], (realize, threads, t)
    assert nan_aside(got, run_schedule(laid, inputs))
    assert np.isnan(got[0]).any() and not np.isnan(got[0]).all()


def test_a_sliced_entry_zeroes_what_the_unsliced_one_zeroes():
    # the products' bands leave the hidden scores unstored: nothing reads them, in a group
    # or not, so no buffer needs zeros either way
    laid, _ = _case("f32", 1, 64)
    apart, sliced = emitted(laid, slices=False), emitted(laid)
    assert any(lc.kernel.layout.parts for lc in sliced.launches)
    assert zeroed(sliced) == zeroed(apart) == []


def test_a_sliced_softmax_keeps_its_exponentials(compiler):
    # a strip keeps a fold's exponentials for the quotients' loop when they read nothing the
    # strip stores: in a group the scores are an output an earlier member wrote
    laid, _ = _case("f32", 1, 64)
    source = "\n".join(NativeEntry(laid).source)
    sliced = [s for s in source.split("/* ") if s.startswith("slices of")]
    assert sliced and any("_k0[lj][" in s for s in sliced)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_groups_scratch_gives_the_bits_of_its_whole_temporaries(compiler, threads):
    # a group's own temporaries one slice a point (Layout.scratch): the entry addresses the
    # slice of the split loop's point, the others' terms left out, and the bits stay
    laid, inputs = _case("f32", threads, 71)
    whole = NativeEntry(laid, scratch=False)
    kept = NativeEntry(laid)
    groups = [lc.kernel for lc in kept.schedule.launches if lc.kernel.layout.parts]
    assert groups and all(k.layout.scratch for k in groups)
    assert not any(lc.kernel.layout.scratch for lc in whole.schedule.launches)
    assert [x.tobytes() for x in kept.run(inputs)] == [x.tobytes() for x in whole.run(inputs)]
    # a group's product stores its scratch at one slice (one thread: every point's) or at
    # the split loop's point's (two threads), the other loop's term left out
    one = r"\(b\d+ \+ 0\)" if threads == 1 else r"\(b\d+ \+ 0 \+ \d+\*v_i0\)"
    calls = re.findall(r"presk_gemm_band_f32\([^;]*", "\n".join(kept.source))
    assert any(re.search(rf", {one}, \d+, 1, BAND_", c) for c in calls)
    calls = re.findall(r"presk_gemm_band_f32\([^;]*", "\n".join(whole.source))
    assert not any(re.search(rf", {one}, \d+, 1, BAND_", c) for c in calls)
