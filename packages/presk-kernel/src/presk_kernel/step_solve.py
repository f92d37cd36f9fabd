"""A budget on the training step (spec L918–L1003), docs/precision.md "The training step's
budget": the gaps of one optimizer step under a realization, and the greedy choice of a type
per function of the step.

The quantity a budget binds is the update's relative gap,

    ‖(θ̂′ − θ̂) − (θ′ − θ)‖₂ / ‖θ′ − θ‖₂

where θ′ is the exact step from the state θ (at 256 bits), θ̂ the state rounded to the type
the realization keeps θ in and θ̂′ the realized step from it: the update made, against the
update the mathematics makes (docs/spec-questions.md, issue 22: a step lost below the type's
resolution, θ̂′ = θ̂, is a gap of exactly one, L945). The exact values are kept as pairs of
doubles (`Exact`: hi + lo, the 256-bit value to some 106 bits), so that a gap of f64's size
(10⁻¹⁵ of the update, while θ is a hundred times the update) is measured, not rounded away.

The solver (`solve_step`) is step 15's greedy over functions instead of sites: every
function alone in f32 and in bf16 (its isolated gaps, measured), then from all-f64 the
narrowing that saves the most bytes per unit of isolated gap, while the root-sum-square of
the chosen functions' isolated gaps stays inside the budget; the combination is measured,
and while it is outside the budget the narrowed function of largest isolated gap is widened
one step (bf16 → f32 → f64) and measured again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from presk_kernel.realization import Realization

WIDTH = {"f64": 8, "f32": 4, "bf16": 2}
NARROWER = {"f64": "f32", "f32": "bf16"}
WIDER = {"bf16": "f32", "f32": "f64"}


class StepSolveError(Exception):
    """A step budget that cannot be solved: its code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Exact:
    """An exact value as two doubles, hi + lo (hi the value rounded to f64)."""

    hi: np.ndarray
    lo: np.ndarray

    @staticmethod
    def of(values) -> Exact:
        """From an array of mpfr (or anything float() takes), at their precision."""
        import gmpy2

        flat = np.asarray(values, dtype=object).reshape(-1)
        hi = np.array([float(x) for x in flat], dtype=np.float64)
        bits = max((x.precision for x in flat if isinstance(x, gmpy2.mpfr)), default=53)
        with gmpy2.context(gmpy2.get_context(), precision=bits + 64):
            lo = [
                float(gmpy2.mpfr(x) - gmpy2.mpfr(h)) for x, h in zip(flat, hi.tolist(), strict=True)
            ]
        return Exact(hi, np.array(lo, dtype=np.float64))

    def minus(self, other: np.ndarray) -> np.ndarray:
        """self − other (doubles), rounded once more than the exact difference."""
        return (self.hi - np.asarray(other, np.float64).reshape(-1)) + self.lo


def rounded(x: np.ndarray, t: str) -> np.ndarray:
    """Doubles rounded to the type `t` (to nearest even), as doubles."""
    from presk_kernel.interp import from_storage, to_storage

    return np.asarray(from_storage(to_storage(np.asarray(x, np.float64), t), t), np.float64)


def norm(x: np.ndarray) -> float:
    return float(np.sqrt(math.fsum(np.square(np.asarray(x, np.float64).reshape(-1)).tolist())))


@dataclass(frozen=True, slots=True)
class Reference:
    """One exact step: the state θ (doubles, flattened in the tree's order), the exact θ′
    and gradient g, as Exact."""

    theta: np.ndarray
    theta_next: Exact
    grad: Exact

    @property
    def update(self) -> np.ndarray:
        """θ′ − θ."""
        return self.theta_next.minus(self.theta)

    def storage_floor(self, t: str) -> float:
        """The exact θ′ merely rounded to `t`, relative to the update."""
        return self.floor_of(rounded(self.theta_next.hi, t))

    def floor_of(self, near: np.ndarray) -> float:
        """‖near − θ′‖ / ‖θ′ − θ‖: θ′ rounded to its storage (`near`, leaf by leaf)."""
        return norm(self.theta_next.minus(near)) / norm(self.update)

    def update_gap(self, theta_state: np.ndarray, theta_next: np.ndarray) -> float:
        """‖(θ̂′ − θ̂) − (θ′ − θ)‖ / ‖θ′ − θ‖ for the realized state θ̂ and step θ̂′."""
        made = np.asarray(theta_next, np.float64) - np.asarray(theta_state, np.float64)
        exact = self.update
        return norm(made.reshape(-1) - exact) / norm(exact)

    def grad_gap(self, grad: np.ndarray) -> float:
        """‖ĝ − g‖ / ‖g‖."""
        return norm(self.grad.minus(grad)) / norm(self.grad.hi)


@dataclass(frozen=True, slots=True)
class Gaps:
    """What one realized step measured: its update gap, its storage floor, its gradient gap."""

    update: float
    floor: float
    grad: float


@dataclass(frozen=True, slots=True)
class Function:
    """A function of the step: its sites (the values it stores) and their reals."""

    name: str
    sites: int
    reals: int

    def cost(self, t: str) -> int:
        return self.reals * WIDTH[t]


def function_realization(types: dict[str, str]) -> Realization:
    """The realization giving each function its type (every one not in f64 named)."""
    return Realization(
        "f64", functions=tuple((f, t) for f, t in sorted(types.items()) if t != "f64")
    )


def _costs(functions: Sequence[Function], priced) -> Callable[[str, str], float]:
    """cost(function, type): its bytes in that type, or under `priced` the step's predicted
    seconds with that function alone in that type (f64: the all-f64 step's)."""
    if priced is None:
        by_name = {f.name: f for f in functions}
        return lambda name, t: by_name[name].cost(t)
    f64 = priced(function_realization({}))
    alone = {
        (f.name, t): priced(function_realization({f.name: t}))
        for f in functions
        for t in ("f32", "bf16")
    }
    return lambda name, t: f64 if t == "f64" else alone[(name, t)]


def rss(values) -> float:
    return math.sqrt(math.fsum(v * v for v in values))


@dataclass
class StepSolution:
    types: dict[str, str]
    isolated: dict[tuple[str, str], float]
    cost: int
    all_f64: int
    estimate: float
    measured: Gaps
    rounds: int
    measurements: int
    trail: list[dict[str, str]] = field(default_factory=list)


def solve_step(
    functions: Sequence[Function],
    budget: float,
    measure: Callable[[Realization], Gaps],
    baseline: float | None = None,
    priced: Callable[[Realization], float] | None = None,
) -> StepSolution:
    """The types of least bytes whose measured update gap is at most `budget` (relative),
    greedily (see the module). `measure` runs one step under a realization; `baseline` the
    all-f64 update gap when the calibration has it (measured otherwise). `priced`: a
    realization's predicted seconds (`presk solve --step --profile`): the cost is then time,
    each function's narrowing worth the seconds it saves alone (the step priced with that
    function alone narrowed: 2F + 2 pricings), and the costs reported are predicted seconds."""
    cost = _costs(functions, priced)
    count = 0
    if baseline is None:
        baseline, count = measure(function_realization({})).update, 1
    if baseline > budget:
        raise StepSolveError(
            "E7135",
            f"no realization meets the budget {budget:.2e}: f64 everywhere measures an update"
            f" gap of {baseline:.3e}, the smallest there is (the budget is stated at a state:"
            " a falling learning rate raises this floor)",
        )
    isolated: dict[tuple[str, str], float] = {}
    for f in functions:
        for t in ("f32", "bf16"):
            isolated[(f.name, t)] = measure(function_realization({f.name: t})).update
            count += 1
    gap = lambda name, t: 0.0 if t == "f64" else isolated[(name, t)]  # noqa: E731
    types = {f.name: "f64" for f in functions}
    while True:
        best = None
        for f in functions:
            t = types[f.name]
            if t not in NARROWER:
                continue
            nt = NARROWER[t]
            trial = {**types, f.name: nt}
            if rss(gap(n, x) for n, x in trial.items()) > budget:
                continue
            saved = cost(f.name, t) - cost(f.name, nt)
            extra = max(gap(f.name, nt) - gap(f.name, t), 0.0)
            score = saved / extra if extra > 0 else math.inf
            key = (score, saved, f.name)
            if saved > 0 and (best is None or key > best[0]):
                best = (key, f.name, nt)
        if best is None:
            break
        types[best[1]] = best[2]
    trail = [dict(types)]
    measured = measure(function_realization(types))
    count, rounds = count + 1, 0
    while measured.update > budget:
        narrowed = [n for n, t in types.items() if t != "f64"]
        if not narrowed:  # all-f64 again: measured inside the budget above, by the baseline
            break
        worst = max(narrowed, key=lambda n: (gap(n, types[n]), n))
        types[worst] = WIDER[types[worst]]
        trail.append(dict(types))
        measured = measure(function_realization(types))
        count, rounds = count + 1, rounds + 1
    estimate = rss(gap(n, t) for n, t in types.items())  # the chosen ones', after widening
    if priced is None:
        total = sum(f.cost(types[f.name]) for f in functions)
        every = sum(f.cost("f64") for f in functions)
    else:
        total, every = priced(function_realization(types)), cost("", "f64")
    return StepSolution(types, isolated, total, every, estimate, measured, rounds, count, trail)


__all__ = [
    "Exact",
    "Function",
    "Gaps",
    "Reference",
    "StepSolution",
    "StepSolveError",
    "function_realization",
    "norm",
    "rounded",
    "solve_step",
]
