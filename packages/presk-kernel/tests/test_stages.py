"""`presk dump --stage sched` and `--stage kernel`, through the list of passes."""

from __future__ import annotations

import pytest
from kernel_entries import ROOT
from presk_ad.passes import UP_TO_AD
from presk_kernel import passes as kernel
from presk_kernel.ir import format_schedule
from presk_syntax.diagnostics import DiagnosticError
from presk_syntax.pipeline import Context, EntryOptions, Pipeline

PIPELINE = Pipeline(UP_TO_AD + kernel.PASSES)


def dump(stage: str, file: str, entry: str | None, **dims) -> str:
    ctx = Context(entry=EntryOptions(entry, tuple(dims.items()), "f64"))
    value = PIPELINE.run(stage, str(ROOT / file), ctx)
    return value if stage == "sched" else format_schedule(value)


def test_the_stages_come_after_differentiation():
    find = PIPELINE.find
    assert find("sched").after == "core-after-ad" and find("kernel").after == "core-after-ad"


def test_the_kernel_stage_prints_the_specs_header():
    text = dump("kernel", "tutorial/03_attention.psk", "attend", B=1, T=3)
    assert text.splitlines()[0] == "entry attend at B = 1, T = 3: 4 launches"
    assert text.splitlines()[1] == (
        "kernel ein[batch, heads, seq, seq2] (%0 : f64[batch: 1, heads: 2, seq: 3, hd: 4],"
        " %1 : f64[batch: 1, heads: 2, seq: 3, hd: 4]) -> %2 : f64[batch: 1, heads: 2, seq: 3,"
        " seq2: 3] {"
    )
    assert "  // site scores/%2, f64," in text


def test_the_sched_stage_counts_the_launches_fusion_removes():
    text = dump("sched", "tutorial/07_train.psk", "loss", B=8)
    lines = text.splitlines()
    assert lines[0] == (
        "-- entry loss at B = 8: 14 kernel launches, 39 without fusion (64% removed),"
        " 11 fusion groups"
    )
    assert lines[1].split() == ["k0", "fused", "4", "steps", "RMSNorm.apply/%7"]
    assert lines[2].split() == ["pow", "2", "RMSNorm.apply/%3"]
    assert lines[3].split() == ["mean", "axis", "model", "RMSNorm.apply/%4"]


def test_without_an_entry_it_is_a_diagnostic():
    with pytest.raises(DiagnosticError, match="needs an entry"):
        dump("kernel", "tutorial/03_attention.psk", None)
    with pytest.raises(DiagnosticError, match="E7001|no function"):
        dump("sched", "tutorial/03_attention.psk", "nope", B=1, T=3)
    with pytest.raises(DiagnosticError, match="cannot lower `Linear{3, 2}.init` to kernels"):
        dump("kernel", "tutorial/01_linear.psk", "Linear{3, 2}.init")  # xavier_uniform: MPFR
