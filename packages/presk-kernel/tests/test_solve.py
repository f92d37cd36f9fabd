"""presk_kernel.solve on made-up items and a made-up measurement: the greedy proposal, the
widening rounds when the measurement disagrees with the estimate, the exhaustive search and
its optimum, the floor, and the budget no realization meets (E7105)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from presk_kernel.solve import Item, SolveError, cost, realization, solve

UNIT = {"f64": 0.0, "f32": 1e-7, "bf16": 1e-3}


def gaps(items, weights):
    """A measurement: each narrowed item adds weight × its type's unit; `power` > 1 makes
    the combination worse than the root-sum-square the estimate assumes."""

    def measure(r, power=1.0):
        types = {n: t for n, t in (*r.sites, *r.params)}
        return (
            1e-16
            + sum(w * UNIT[types.get(i.name, "f64")] for i, w in zip(items, weights, strict=True))
            * power
        )

    return measure


ITEMS = [Item("site", "f/%1", 100), Item("site", "f/%2", 10), Item("param", "w", 50)]


def test_a_loose_budget_narrows_everything():
    s = solve(ITEMS, 1.0, gaps(ITEMS, [1, 1, 1]))
    assert s.types == dict.fromkeys(["f/%1", "f/%2", "w"], "bf16")
    assert s.cost == s.floor == 160 * 2 and s.all_f64 == 160 * 8 and s.rounds == 0


def test_a_tight_budget_keeps_f64():
    s = solve(ITEMS, 1e-9, gaps(ITEMS, [1, 1, 1]))
    assert s.types == dict.fromkeys(["f/%1", "f/%2", "w"], "f64") and s.cost == s.all_f64


def test_the_greedy_takes_bytes_per_gap():
    # room for one bf16: the item that saves most bytes per unit of gap
    s = solve(ITEMS, 1.1e-3, gaps(ITEMS, [1, 1, 1]))
    assert s.types == {"f/%1": "bf16", "f/%2": "f32", "w": "f32"} and s.rounds == 0


def test_widening_rounds_bring_the_measurement_inside():
    # gaps add up linearly, the estimate is their root-sum-square: two bf16 items are
    # estimated at 1.41e-3, measured at 2e-3
    measure = gaps(ITEMS, [1, 1, 1])
    s = solve(ITEMS, 1.5e-3, measure)
    assert s.rounds > 0 and s.measured <= 1.5e-3 < s.estimate * 2
    assert measure(realization(ITEMS, s.types)) == s.measured


def test_no_realization_meets_a_budget_below_f64():
    with pytest.raises(SolveError) as e:
        solve(ITEMS, 1e-20, gaps(ITEMS, [1, 1, 1]))
    assert e.value.code == "E7105" and "1.000e-16" in str(e.value)


@settings(max_examples=30, deadline=None)
@given(
    weights=st.lists(st.floats(0.01, 100), min_size=3, max_size=3),
    budget=st.floats(1e-8, 1e-1),
)
def test_the_exhaustive_optimum_is_no_dearer_than_the_proposal(weights, budget):
    measure = gaps(ITEMS, weights)
    s = solve(ITEMS, budget, measure)
    assert s.optimal is not None and s.optimal[1] == 27
    assert s.optimal[0] <= s.proposal and s.floor <= s.cost <= s.all_f64
    assert s.measured <= budget
    # the optimum is the cheapest assignment whose estimate is inside the budget
    best = min(
        cost(ITEMS, ts)
        for combo in itertools.product(("f64", "f32", "bf16"), repeat=3)
        if (ts := {i.name: t for i, t in zip(ITEMS, combo, strict=True)})
        and sum((s.isolated.get((n, t), 0.0) if t != "f64" else 0.0) ** 2 for n, t in ts.items())
        ** 0.5
        <= budget
    )
    assert s.optimal[0] == best
