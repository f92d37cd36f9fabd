"""`presk memory` (issue 25): what one call needs, counted from the schedule (nothing run),
against sizes worked out by hand, the arenas' invariants (no arena holds less than the peak
of live bytes), both --remat forms of the training step, and its usage errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from presk_cback.arena import plan
from presk_cback.memory import memory
from presk_cli.native import lower
from presk_cli.pipeline import PIPELINE, RUN
from presk_core.run import parse_entry
from presk_kernel.passes import emitted
from presk_syntax.pipeline import Context
from presk_types.types import ParamsT

ROOT = Path(__file__).resolve().parents[2]
PRESK = [sys.executable, "-m", "presk_cli.main"]


def presk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PRESK, *args], capture_output=True, text=True, cwd=ROOT)


def counted(file: str, entry: str, dims: dict[str, int], realize: str = "f64"):
    core = PIPELINE.run(RUN, str(ROOT / file), Context())
    e = parse_entry(entry, core, None, dims)
    schedule = lower(core, e.function.name, dict(e.dims) | dict(e.prefix), None, realize)
    trees = tuple(p.name for p in e.function.params if isinstance(p.type, ParamsT))
    return schedule, memory(schedule, trees)


def test_the_tutorials_loss_by_hand():
    out = presk("memory", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "-- loss at B=4 in f64"
    # 76 reals of θ, the batch's two ℝ[4, 4], the loss: 8 bytes each
    assert lines[1] == "parameters                   608 B  " + lines[1].split("B  ")[1]
    assert lines[2].startswith("inputs                       256 B  ")
    assert lines[3].startswith("outputs                        8 B  ")
    assert re.fullmatch(r"peak of live bytes +[\d,]+ B   at launch \d+ of \d+, the .*", lines[4])
    assert lines[5].split() == ["function", "calls", "temporaries", "at", "the", "peak", "share"]
    assert lines[-1].startswith("-- arenas: the native backend's ")
    # the shares of the peak add up to all of it
    shares = [float(x) for x in re.findall(r"([\d.]+) %$", out.stdout, re.M)]
    assert sum(shares) == pytest.approx(100, abs=0.1 * len(shares))


@pytest.mark.parametrize("realize, size", [("f64", 8), ("f32", 4), ("bf16", 2)])
def test_the_bytes_follow_the_realization(realize, size):
    _, m = counted("tutorial/03_attention.psk", "attend", {"B": 2, "T": 8}, realize)
    # q, k, v: ℝ[batch: B, heads: 2, seq: T, hd: 4]; the output the same
    assert (m.parameters, m.inputs, m.outputs) == (0, 3 * 2 * 2 * 8 * 4 * size, 128 * size)


@pytest.mark.parametrize(
    "file, entry, dims",
    [
        ("tutorial/07_train.psk", "loss", {"B": 4}),
        ("tutorial/03_attention.psk", "attend", {"B": 2, "T": 16}),
        ("tests/examples/mlp/mlp.psk", "mse_grad", {"B": 3, "D": 5}),
    ],
)
def test_no_arena_holds_less_than_the_peak(file, entry, dims):
    schedule, m = counted(file, entry, dims)
    assert m.native_arena == plan(emitted(schedule), share=True).size
    assert m.peak <= m.native_arena and m.peak <= m.c_arena <= m.c_unreleased
    assert sum(f.at_peak for f in m.functions) + m.parameters + m.inputs + m.outputs == m.peak
    assert all(f.at_peak <= f.temporaries * f.calls for f in m.functions)


def test_the_step_under_both_remats():
    out = presk("memory", "tutorial/07_train.psk", "--step")
    assert out.returncode == 0, out.stderr
    titles = [line for line in out.stdout.splitlines() if line.startswith("-- the training")]
    assert titles == [
        "-- the training step of `loss`, --remat residuals: loss.native_step at B=8 in f64",
        "-- the training step of `loss`, --remat recompute: loss.native_step at B=8 in f64",
    ]
    # θ, then AdamW's two moments: the same bytes under both forms
    assert out.stdout.count("parameters                   608 B") == 2
    assert out.stdout.count("optimizer state            1,216 B") == 2
    peaks = [
        int(x.replace(",", ""))
        for x in re.findall(r"^peak of live bytes +([\d,]+) B", out.stdout, re.M)
    ]
    assert len(peaks) == 2 and peaks[0] != peaks[1]


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["tutorial/07_train.psk"], 2, "give --entry E, or --step"),
        (["tutorial/07_train.psk", "--entry", "loss", "--step"], 2, "give --entry E, or --step"),
        (["tutorial/07_train.psk", "--entry", "nope", "--dim", "B=4"], 2, "nope"),
        (["tutorial/03_attention.psk", "--step"], 1, "[E7081]"),
        (["missing.psk", "--entry", "f"], 1, "[E0001]"),
    ],
)
def test_bad_input(args, code, words):
    out = presk("memory", *args)
    assert out.returncode == code and words in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_symbolic_polynomials_agree_with_the_numbers():
    out = presk("memory", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=2",
                "--dim", "T=8", "--realize", "f32", "--symbolic")  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("-- attend, polynomials in B, T (fitted at B = 2, 4, 6, 8, 10,")
    # q, k, v of [B, 2, T, 4] in f32: 3·32·B·T bytes; the mask T² bytes of truth values
    assert "inputs              96·B·T" in lines
    assert "outputs             32·B·T" in lines
    peak = next(line for line in lines if line.startswith("peak of live bytes"))
    assert "not one polynomial" not in peak
    _, m = counted("tutorial/03_attention.psk", "attend", {"B": 3, "T": 24}, "f32")
    assert m.peak == 16 * 3 * 24**2 + 128 * 3 * 24 + 24**2 == _poly(peak, B=3, T=24)


def _poly(line: str, **values: int) -> int:
    """The value of a printed polynomial (`16·B·T² + 128·B·T + T²`) at `values`."""
    text = line.split("  ", 1)[1].strip().replace("−", "-").replace("·", "*")
    for sup, digit in zip("²³⁴", "234", strict=True):
        text = text.replace(sup, f"**{digit}")
    return eval(text, {}, values)  # the test's own text: digits, names, + - * **


def test_symbolic_says_where_a_count_is_not_one_polynomial():
    out = presk("memory", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4", "--symbolic")
    assert out.returncode == 0, out.stderr
    assert "peak of live bytes  160·B + 616" in out.stdout.splitlines()
    c_arena = next(x for x in out.stdout.splitlines() if x.startswith("C arena"))
    assert "(not one polynomial here:" in c_arena  # 64-byte rounding is no polynomial


def test_symbolic_needs_a_dimension():
    out = presk("memory", "tests/export/programs/consts.psk", "--entry", "c", "--symbolic")
    assert out.returncode == 2 and "--symbolic needs a dimension to vary" in out.stderr


def test_the_native_backend_allocates_the_arena_counted():
    """The arena a compiled entry allocates (its high-water mark: every temporary lives in
    it) is the one `presk memory` prints, and holds at least the peak of live bytes."""
    from presk_cback.native import NativeEntry

    for file, entry, dims in [
        ("tutorial/07_train.psk", "loss", {"B": 4}),
        ("tutorial/03_attention.psk", "attend", {"B": 2, "T": 16}),
    ]:
        schedule, m = counted(file, entry, dims)
        native = NativeEntry(schedule)
        assert native.arena.nbytes == m.native_arena >= m.peak
