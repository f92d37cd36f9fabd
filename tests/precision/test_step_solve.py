"""presk_kernel.step_solve (spec L920–L978): the update gap and the storage floor as the spec
defines them, and the greedy choice of a type per function on a small problem whose answer
is worked out by hand below."""

from __future__ import annotations

import math

import gmpy2
import numpy as np
import pytest
from presk_kernel.step_solve import (
    Exact,
    Function,
    Gaps,
    Reference,
    StepSolveError,
    function_realization,
    rss,
    solve_step,
)


def reference(theta, theta_next, grad):
    with gmpy2.context(gmpy2.get_context(), precision=256):
        new = [gmpy2.mpfr(x) for x in theta_next]
        g = [gmpy2.mpfr(x) for x in grad]
    return Reference(np.asarray(theta, np.float64), Exact.of(new), Exact.of(g))


def test_a_step_lost_below_resolution_is_a_gap_of_exactly_one():
    # θ̂′ = θ̂: the parameters come back unchanged (spec L945)
    ref = reference([1.0, 2.0], ["1.01", "1.99"], ["0.5", "-0.5"])
    state = np.array([1.0, 2.0])
    assert ref.update_gap(state, state) == 1.0


def test_the_exact_update_has_no_gap_and_f64_s_floor_is_its_rounding():
    third = gmpy2.mpfr(1) / 3
    with gmpy2.context(gmpy2.get_context(), precision=256):
        new = [gmpy2.mpfr(1) + gmpy2.mpfr(1) / 3]
    ref = Reference(np.array([1.0]), Exact.of(new), Exact.of([third]))
    assert ref.theta_next.hi[0] == float(new[0])
    assert ref.theta_next.lo[0] != 0.0  # 1 + 1/3 is not a double
    update = ref.update
    assert update[0] == pytest.approx(1 / 3, rel=1e-15)
    floor = ref.storage_floor("f64")
    assert floor == pytest.approx(abs(ref.theta_next.lo[0]) / (1 / 3), rel=1e-12)
    assert 0 < floor <= 3 * 2**-53  # half an ulp of 4/3, over 1/3
    # the f32 floor: 1 + 1/3 rounded to f32, against the update
    want = abs(float(np.float32(4 / 3)) - 4 / 3) / (1 / 3)
    assert ref.storage_floor("f32") == pytest.approx(want, rel=1e-9)


def test_the_gradient_gap_is_relative():
    ref = reference([0.0, 0.0], ["0.1", "0.1"], ["3", "4"])
    assert ref.grad_gap(np.array([3.0, 4.0])) == 0.0
    assert ref.grad_gap(np.array([3.0, 4.5])) == pytest.approx(0.1)


# A B C: reals 100, 10, 50 (f64 costs 800, 80, 400).
FUNCTIONS = [Function("A", 3, 100), Function("B", 1, 10), Function("C", 2, 50)]
ISOLATED = {
    ("A", "f32"): 1e-6,
    ("A", "bf16"): 4e-4,
    ("B", "f32"): 1e-7,
    ("B", "bf16"): 1e-3,
    ("C", "f32"): 2e-6,
    ("C", "bf16"): 6e-4,
}


def measuring(extra=lambda types: 0.0):
    """A measure that answers the root-sum-square of the isolated gaps of what a
    realization narrows (plus `extra`), counting its calls."""
    calls = []

    def measure(r):
        types = dict(r.functions)
        calls.append(types)
        if len(types) == 1:
            ((name, t),) = types.items()
            return Gaps(ISOLATED[(name, t)], 0.0, 0.0)
        gap = rss(ISOLATED[(n, t)] for n, t in types.items()) + extra(types)
        return Gaps(gap, 0.0, 0.0)

    return measure, calls


def test_the_greedy_order_by_bytes_per_gap():
    # From all-f64, per unit of gap: A→f32 saves 400 for 1e-6 (4e8), B→f32 40/1e-7 (4e8,
    # fewer bytes), C→f32 200/2e-6 (1e8). A first, then B, then C. Then the bf16 steps:
    # A 200 for 4e-4 (5e5), B 20/1e-3 (2e4), C 100/6e-4 (1.7e5): A→bf16 (rss 4.0e-4 ≤ 1e-3),
    # then C→bf16 (rss 7.2e-4), then B→bf16 would give rss 1.3e-3 > 1e-3: stop.
    measure, calls = measuring()
    s = solve_step(FUNCTIONS, 1e-3, measure, baseline=1e-16)
    assert s.types == {"A": "bf16", "B": "f32", "C": "bf16"}
    assert s.cost == 200 + 40 + 100
    assert s.all_f64 == 1280
    assert s.estimate == pytest.approx(math.sqrt(4e-4**2 + 1e-7**2 + 6e-4**2))
    assert s.rounds == 0
    assert s.measurements == 2 * len(FUNCTIONS) + 1 == len(calls)
    assert s.measured.update <= 1e-3


def test_a_combination_measured_outside_is_widened_by_its_largest_isolated_gap():
    # the combination measures worse than its estimate: C (bf16, 6e-4, the largest) widens
    # to f32 first, then A (4e-4) to f32: inside.
    def extra(types):
        return 1e-3 if "bf16" in types.values() and len(types) > 1 else 0.0

    measure, calls = measuring(extra)
    s = solve_step(FUNCTIONS, 1e-3, measure, baseline=1e-16)
    assert s.trail[0] == {"A": "bf16", "B": "f32", "C": "bf16"}
    assert s.trail[1] == {"A": "bf16", "B": "f32", "C": "f32"}
    assert s.types == {"A": "f32", "B": "f32", "C": "f32"}
    assert s.estimate == pytest.approx(rss([1e-6, 1e-7, 2e-6]))  # the chosen types'
    assert s.rounds == 2
    assert s.measurements == 2 * 3 + 3 == len(calls)
    assert s.measured.update <= 1e-3


def test_a_budget_below_f64_s_gap_is_refused():
    measure, _ = measuring()
    with pytest.raises(StepSolveError) as e:
        solve_step(FUNCTIONS, 1e-17, measure, baseline=1e-16)
    assert e.value.code == "E7135"


def test_without_a_baseline_it_is_measured_and_counted():
    measure, calls = measuring()
    calls_before = len(calls)
    s = solve_step(FUNCTIONS, 1e-3, lambda r: Gaps(1e-16, 0, 0) if not r.functions else measure(r))
    assert s.measurements == 1 + 2 * 3 + 1
    assert calls_before == 0


def test_the_realization_names_the_functions_away_from_f64():
    r = function_realization({"A": "bf16", "B": "f64", "C": "f32"})
    assert r.to_json()["functions"] == {"A": "bf16", "C": "f32"}
    assert r.site_type("A/%3") == "bf16" and r.site_type("B/%1") == "f64"


def test_priced_by_time_the_greedy_takes_what_saves_seconds():
    # `presk solve --step --profile`: the step's predicted seconds with one function alone
    # narrowed. A saves nothing in f32 and costs time in bf16 (its conversions: the spec's
    # L978, bf16 refused), B saves 3 s per step narrower, C 1 s in f32 and nothing more in
    # bf16. All-f64 takes 10 s. Per unit of gap: B→f32 3/1e-7, C→f32 1/2e-6, then B→bf16
    # 3/1e-3 (rss 1e-3 ≤ 1e-3 … just inside), A never (it saves nothing), C→bf16 never.
    seconds = {("A", "f32"): 10.0, ("A", "bf16"): 12.0, ("B", "f32"): 7.0,
               ("B", "bf16"): 4.0, ("C", "f32"): 9.0, ("C", "bf16"): 9.0}  # fmt: skip
    priced_calls = []

    def priced(r):
        types = dict(r.functions)
        priced_calls.append(types)
        saved = sum(10.0 - seconds[(n, t)] for n, t in types.items())
        return 10.0 - saved  # additive here, so the final price is the sum of the savings

    measure, _ = measuring()
    s = solve_step(FUNCTIONS, 1.1e-3, measure, baseline=1e-16, priced=priced)
    assert s.types == {"A": "f64", "B": "bf16", "C": "f32"}
    assert s.all_f64 == 10.0 and s.cost == pytest.approx(10.0 - 6.0 - 1.0)
    assert len(priced_calls) == 1 + 2 * len(FUNCTIONS) + 1  # all-f64, each alone, the chosen
    # by bytes the same problem narrows A first: time and bytes disagree
    assert solve_step(FUNCTIONS, 1.1e-3, measure, baseline=1e-16).types["A"] != "f64"
