"""Generated programs (hypothesis): lowered, fused and interpreted, against the reference."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kernel_entries import floats
from presk_ad import differentiate
from presk_core.interp import Interpreter
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.lower import argument_leaves, lower_entry
from presk_syntax.span import SourceMap
from presk_types.elab import load_program

HEAD = "fn f(x : ℝ[batch: 3, model: 4], y : ℝ[model: 4], z : ℝ[batch: 3]) -> ℝ[batch: 3, model: 4] =\n  "

UNARY = ["tanh({})", "-({})", "relu({})", "gelu({})", "sigmoid({})", "sqrt(abs({}))", "({})^2"]
BINARY = ["({}) + ({})", "({}) - ({})", "({}) * ({})", "max({}, {})", "({}) / (1 + ({})^2)"]
ROWS = ["sum(axis model, {})", "mean(axis model, {})", "max(axis model, {})"]


def tensors(depth: int) -> st.SearchStrategy[str]:
    """Expressions of type ℝ[batch: 3, model: 4]; the other operand of a binary operation is
    of that type too, or `y` (ℝ[model: 4]), `z` (ℝ[batch: 3]), or a row's reduction."""
    if depth == 0:
        return st.sampled_from(["x", "x * 0.5", "x - y", "z * x"])
    sub = tensors(depth - 1)
    other = st.one_of(
        sub,
        st.sampled_from(["y", "z", "0.25"]),
        st.tuples(st.sampled_from(ROWS), sub).map(lambda t: t[0].format(t[1])),
    )
    return st.one_of(
        sub,
        st.tuples(st.sampled_from(UNARY), sub).map(lambda t: t[0].format(t[1])),
        st.tuples(st.sampled_from(BINARY), sub, other, st.booleans()).map(
            lambda t: t[0].format(*((t[2], t[1]) if t[3] else (t[1], t[2])))
        ),
    )


GRAD = """
fn loss(x : ℝ[batch: 3, model: 4], y : ℝ[model: 4], z : ℝ[batch: 3]) -> ℝ[] = mean(f(x, y, z))

fn g(x : ℝ[batch: 3, model: 4], y : ℝ[model: 4], z : ℝ[batch: 3]) -> ℝ[batch: 3, model: 4] =
  grad(λ x. loss(x, y, z))(x)
"""


def run(source: str, entry: str = "f"):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "g.psk"
        path.write_text(HEAD + source + "\n" + GRAD, encoding="utf-8")
        elab = load_program(str(path), {}, SourceMap())
        core = differentiate(lower_program(elab), "residuals")
    e = parse_entry(entry, core, elab, {})
    interp = Interpreter(core, 256)
    args = [v for _, _, v in synthesize(e, interp, 0)]
    ref = floats(interp.run(entry, args, {}))
    return core, args, ref


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors(3))
def test_generated_programs(source):
    core, args, ref = run(source)
    schedule = lower_entry(core, "f", {}, args)
    inputs = argument_leaves(args)
    (got,) = run_schedule(schedule, inputs)
    assert np.allclose(got, ref, rtol=1e-12, atol=1e-12, equal_nan=True), source
    fused, _ = fuse(schedule)
    assert len(fused.launches) <= len(schedule.launches)
    (again,) = run_schedule(fused, inputs)
    assert np.array_equal(got.view(np.uint64), again.view(np.uint64)), source
    for realize in ("f32", "bf16"):
        narrow = lower_entry(core, "f", {}, args, realize)
        (a,) = run_schedule(narrow, inputs)
        (b,) = run_schedule(fuse(narrow)[0], inputs)
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), (source, realize)


def close_to_reference(got: np.ndarray, ref: np.ndarray, tol: float = 1e-12) -> bool:
    """`got` is the reference's `ref`: NaN exactly where it is NaN, the same infinities where
    it is infinite, and within `tol` × (1 + its largest finite magnitude) elsewhere. A NaN on
    one side alone is a failure."""
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    finite = np.isfinite(ref)
    if not np.array_equal(np.isnan(got), np.isnan(ref)):
        return False
    infinite = np.isinf(ref)
    if not np.array_equal(got[infinite], ref[infinite]) or not np.isfinite(got[finite]).all():
        return False
    if not finite.any():
        return True
    scale = 1 + float(np.max(np.abs(ref[finite])))
    return float(np.max(np.abs(got[finite] - ref[finite]))) <= tol * scale


def test_close_to_reference_takes_nan_only_where_the_reference_has_it():
    ref = np.array([1.0, np.nan, np.inf, -2.0])
    assert close_to_reference(ref + [1e-13, 0, 0, 0], ref)
    assert not close_to_reference(ref + [1e-9, 0, 0, 0], ref)
    assert not close_to_reference(np.array([np.nan, np.nan, np.inf, -2.0]), ref)  # one side
    assert not close_to_reference(np.array([1.0, 0.0, np.inf, -2.0]), ref)  # NaN lost
    assert not close_to_reference(np.array([1.0, np.nan, -np.inf, -2.0]), ref)
    assert not close_to_reference(np.array([1.0, np.nan, np.inf, np.inf]), ref)
    assert close_to_reference(np.full(3, np.nan), np.full(3, np.nan))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors(2))
# d/dx √|x − x| is 1/(2√0) · sign(0) · (1 − 1) = ∞ · 0: NaN at every position, in the
# reference interpreter, the kernels and torch's autograd alike (a replay once failed here)
@example("sqrt(abs(x - x))")
def test_gradients_of_generated_programs(source):
    """Differentiation's operations (accum, sum_to, expand, the _grad rules, reduce_pick,
    pick2) lowered: the gradient's kernels against the reference's gradient (NaN where, and
    only where, the reference's is NaN)."""
    core, args, ref = run(source, "g")
    schedule = lower_entry(core, "g", {}, args)
    inputs = argument_leaves(args)
    (got,) = run_schedule(schedule, inputs)
    assert close_to_reference(got, ref), source
    (again,) = run_schedule(fuse(schedule)[0], inputs)
    assert np.array_equal(got.view(np.uint64), again.view(np.uint64)), source
