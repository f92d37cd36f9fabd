"""Lowering: every entry's kernels, run on the kernel interpreter, against the reference.

Tolerances: a fold of n terms in a format of unit roundoff u is within about n·u·Σ|terms|
of the exact sum (Higham, §4.2), and each other operation within u (or a few ulps, the
transcendentals): the entries here have folds of at most a few hundred terms and a few
dozen operations along any path, so 1e-12 in f64 (u = 1.1e-16), 1e-4 in f32 (u = 6e-8) and
0.1 in bf16 (u = 3.9e-3), relative to the size of the values, leave a margin of ten or more.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_entries import ENTRIES, MINIGPT, lowered
from presk_core.interp import eval_rules
from presk_kernel.interp import run_schedule
from presk_kernel.lower import HOST, KINDS, RULES, LowerError, lower_entry
from presk_types.rules import PRIMITIVES

TOLERANCE = {"f64": 1e-12, "f32": 1e-4, "bf16": 1e-1}
NO_KERNEL = {"random", "structural", "tree"}


def close(ref: list, got: list, realize: str) -> None:
    assert len(ref) == len(got)
    for r, g in zip(ref, got, strict=True):
        assert r.shape == g.shape
        scale = 1 + float(np.max(np.abs(r))) if r.size else 1
        err = float(np.max(np.abs(r - g))) if r.size else 0.0
        assert err <= TOLERANCE[realize] * scale, (err, scale)


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize(("file", "entry", "dims", "consts"), ENTRIES)
def test_kernels_compute_the_reference_within_a_tolerance(file, entry, dims, consts, realize):
    schedule, args, ref = lowered(file, entry, dims, realize, consts=consts)
    close(ref, run_schedule(schedule, args), realize)


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_the_training_step_of_the_tutorial(realize):
    schedule, args, ref = lowered("tutorial/07_train.psk", "loss", (("B", 8),), realize, True)
    assert len(ref) == 5  # the loss, then the gradient's four leaves
    close(ref, run_schedule(schedule, args), realize)


def test_the_training_step_of_a_tiny_minigpt():
    dims = (("B", 2), ("T", 8))
    file = "tests/examples/minigpt/train_minigpt.psk"
    schedule, args, ref = lowered(file, "loss", dims, train=True, consts=MINIGPT)
    assert abs(ref[0] - np.log(64)) < 1e-12  # its initial loss, free of the random draws
    close(ref, run_schedule(schedule, args), "f64")


def test_the_schedule_reads_the_inputs_and_writes_the_result():
    schedule, _, _ = lowered("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 3)))
    names = [schedule.buffers[i].name for i in schedule.inputs]
    assert names == ["q", "k", "v"]
    (out,) = schedule.outputs
    assert [a.length for a in schedule.buffers[out].axes] == [2, 2, 3, 4]
    assert [lc.kernel.site for lc in schedule.launches] == [
        "scores/%2",
        "scores/%4",
        "scores/%5",
        "attend/%4",
        "attend/%5",
        "attend/%6",
    ]


def test_a_stacked_tree_is_sliced_as_views_not_copies():
    schedule, _, _ = lowered("tutorial/06_tower.psk", "Tower.apply", (("batch", 2),))
    offsets = {a.offset for lc in schedule.launches for a in lc.args}
    assert len(offsets) > 1  # the blocks' leaves are read in place, one slice each
    assert all(lc.kernel.name != "slice" for lc in schedule.launches)


def test_every_operation_has_a_kind_and_every_tensor_operation_a_nest():
    ops = set(PRIMITIVES) | set(eval_rules)
    assert ops <= set(KINDS)
    missing = {op for op in ops if op not in RULES and op not in HOST}
    assert {KINDS[op] for op in missing} <= NO_KERNEL | {"structural"}, missing
    # a scan is unrolled after specialization (presk_core.unroll.unroll_scans), before lowering
    assert missing <= {"fold", "fold_init", "scan", "grad", "value_grad"}


def test_sample_is_lowered():
    """Issue 29: `sample` is a nest over the leading axes (tests/native/test_draws_native)."""
    from kernel_entries import case

    core, name, dims, args, ref = case("tutorial/05_sample.psk", "pick", (("B", 5),))
    schedule = lower_entry(core, name, dims, args)
    assert [launch.kernel.name for launch in schedule.launches] == ["sample"]


def test_the_optimizer_step():
    """AdamW's update of every leaf (the draws make some second moments negative: the
    square roots' NaNs are the reference's too)."""
    schedule, args, ref = lowered("tutorial/07_train.psk", "adamw.step", ())
    got = run_schedule(schedule, args)
    assert len(got) == len(ref) == 12  # θ, m and v: four leaves each
    for r, g in zip(ref, got, strict=True):
        assert np.allclose(g, r, rtol=1e-12, atol=1e-13, equal_nan=True)


# ---- from the core document alone ---------------------------------------------------------------

LOWERED = [(spec, False) for spec in ENTRIES] + [
    (("tutorial/07_train.psk", "loss", (("B", 8),), ()), True),
    (("tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 8)), MINIGPT), True),
]


@pytest.mark.parametrize(
    ("spec", "train"), LOWERED, ids=[f"{s[1]}{' step' if t else ''}" for s, t in LOWERED]
)
def test_an_entry_lowers_from_the_core_document_alone(spec, train):
    """No argument values: the trees' shapes from the program's layouts, a hyperparameter at
    its default; the same kernels as from the run's inputs."""
    from kernel_entries import case

    file, entry, dims, consts = spec
    core, name, d, args, _ = case(file, entry, dims, train, consts)
    assert lower_entry(core, name, d) == lower_entry(core, name, d, args)


def test_arguments_of_other_shapes_than_the_types_are_refused():
    from kernel_entries import case

    core, name, d, args, _ = case("tutorial/07_train.psk", "loss", (("B", 8),))
    theta = dict(args[0])
    path = next(iter(theta))
    theta[path] = np.zeros((1, *np.shape(theta[path])))
    with pytest.raises(LowerError, match="a tree of shapes"):
        lower_entry(core, name, d, [theta, *args[1:]])
    with pytest.raises(LowerError, match="takes 2 arguments, not 1"):
        lower_entry(core, name, d, args[:1])
