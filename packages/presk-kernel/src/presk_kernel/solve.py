"""A realization under an error budget (spec L894–L908), docs/precision.md "The solver".

What is offered: the entry's narrowable sites (presk_kernel.realization: one per fusion
group) and its parameter paths (a parameter is stored once, in its type), each in f64, f32
or bf16. What it costs: bytes, each item's reals once (a static site counted once however
often it runs) times its type's width; or, under a machine profile (`priced`, from
presk-cli: presk-opt's roofline), the entry's predicted seconds. What decides: the measured gap, the realization run
on the kernel interpreter (the native backend's bits) against the exact reference.

The solver (`solve`) is greedy: every item is first measured alone in f32 and in bf16 (its
isolated gap: the estimate ranks by it), then, from all-f64, the narrowing that saves the
most bytes per unit of estimated gap is taken while the estimate (the root-sum-square of the
chosen items' isolated gaps) stays inside the budget; the proposal is then measured, and
while it is outside the budget the narrowed item of largest isolated gap is widened one
step (bf16 → f32 → f64) and the candidate measured again. Where the space is small enough
(3^n ≤ `EXHAUSTIVE`), every assignment is costed on the estimate and the cheapest inside
the budget compared with the proposal. The relaxation floor is the cost of every item in
bf16: no realization costs less.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from presk_kernel.realization import Realization

WIDTH = {"f64": 8, "f32": 4, "bf16": 2}
NARROWER = {"f64": "f32", "f32": "bf16"}
WIDER = {"bf16": "f32", "f32": "f64"}
EXHAUSTIVE = 3**8
"""The largest space searched exhaustively (on the estimate): 6,561 assignments."""


class SolveError(Exception):
    """A budget that cannot be solved: its code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Item:
    """A choice the solver makes: a narrowable site or a parameter path, its reals."""

    kind: str  # site, param
    name: str
    count: int

    def cost(self, t: str) -> int:
        return self.count * WIDTH[t]


def offered(schedule, fused, groups, paths: list[str], param_names: list[str]) -> list[Item]:
    """The items of an entry: its narrowable sites, in launch order, each with the reals its
    group's kernels store (its largest launch: counted once), and its parameter paths with
    the reals of their input buffers (`param_names`: the entry's tree arguments)."""
    from presk_kernel.ir import REAL_DTYPES
    from presk_kernel.realization import narrowable_sites

    sites = narrowable_sites(schedule, fused, groups)
    counts: dict[str, int] = {}
    for launch in fused.launches:
        k = launch.kernel
        n = sum(b.size for b in k.outputs if b.dtype in REAL_DTYPES)
        counts[k.site] = max(counts.get(k.site, 0), n)
    items = [Item("site", s, counts.get(s, 0)) for s in sites.narrowable]
    sizes: dict[str, int] = {}
    for b in schedule.inputs:
        hb = schedule.buffers[b]
        for p in param_names:
            if hb.name.startswith(p + "."):
                path = hb.name[len(p) + 1 :]
                sizes[path] = sizes.get(path, 0) + math.prod(a.length for a in hb.axes)
    items += [Item("param", p, sizes.get(p, 0)) for p in paths]
    return items


def realization(items: list[Item], types: dict[str, str]) -> Realization:
    """The realization of an assignment: every item not in f64 named."""
    sites = tuple(
        (i.name, types[i.name]) for i in items if i.kind == "site" and types[i.name] != "f64"
    )
    params = tuple(
        (i.name, types[i.name]) for i in items if i.kind == "param" and types[i.name] != "f64"
    )
    return Realization("f64", sites, params)


def cost(items: list[Item], types: dict[str, str]) -> int:
    """Bytes: each item's reals times its type's width."""
    return sum(i.cost(types[i.name]) for i in items)


def rss(values) -> float:
    return math.sqrt(sum(v * v for v in values))


@dataclass
class Solution:
    types: dict[str, str]
    cost: float  # bytes, or predicted seconds under a profile
    all_f64: float
    floor: float
    proposal: float
    estimate: float
    measured: float
    rounds: int
    optimal: tuple[int, int] | None  # (its cost, the points searched); None: not searched
    isolated: dict[tuple[str, str], float]


def solve(
    items: list[Item],
    budget: float,
    measure: Callable[[Realization], float],
    priced: Callable[[Realization], float] | None = None,
    floor: float | None = None,
) -> Solution:
    """The realization of least cost whose measured gap is at most `budget` (absolute),
    greedily (see the module); `measure` runs a realization and gives its gap. The cost is
    bytes, or `priced`'s (a realization's predicted seconds under a machine profile), with
    `floor` its lower bound."""
    base = {i.name: "f64" for i in items}
    known: dict[tuple, float] = {}

    def price(types: dict[str, str]) -> float:
        if priced is None:
            return cost(items, types)
        key = tuple(sorted(types.items()))
        if key not in known:
            known[key] = priced(realization(items, types))
        return known[key]

    floor_gap = measure(realization(items, base))
    if floor_gap > budget:
        raise SolveError(
            "E7105",
            f"no realization meets the budget {budget:.3e}: f64 everywhere measures"
            f" {floor_gap:.3e}, the smallest gap there is",
        )
    isolated: dict[tuple[str, str], float] = {}
    for i in items:
        for t in ("f32", "bf16"):
            isolated[(i.name, t)] = measure(realization(items, {**base, i.name: t}))
    gap = lambda name, t: 0.0 if t == "f64" else isolated[(name, t)]  # noqa: E731
    types = dict(base)

    def estimate(ts: dict[str, str]) -> float:
        return rss(gap(n, t) for n, t in ts.items())

    while True:
        best = None
        for i in items:
            t = types[i.name]
            if t not in NARROWER:
                continue
            nt = NARROWER[t]
            trial = {**types, i.name: nt}
            if estimate(trial) > budget:
                continue
            saved = price(types) - price(trial)
            extra = max(gap(i.name, nt) - gap(i.name, t), 0.0)
            score = saved / extra if extra > 0 else math.inf
            key = (score, saved)
            if saved > 0 and (best is None or key > best[0]):
                best = (key, i.name, nt)
        if best is None:
            break
        types[best[1]] = best[2]
    proposal, est = price(types), estimate(types)
    measured, rounds = measure(realization(items, types)), 0
    while measured > budget:
        narrowed = [n for n, t in types.items() if t != "f64"]
        worst = max(narrowed, key=lambda n: gap(n, types[n]))
        types[worst] = WIDER[types[worst]]
        measured, rounds = measure(realization(items, types)), rounds + 1
    optimal = None
    if 3 ** len(items) <= EXHAUSTIVE and priced is None:  # pricing 3ⁿ lowerings: not searched
        cheapest = None
        for combo in itertools.product(("f64", "f32", "bf16"), repeat=len(items)):
            ts = {i.name: t for i, t in zip(items, combo, strict=True)}
            if estimate(ts) <= budget:
                c = price(ts)
                cheapest = c if cheapest is None else min(cheapest, c)
        optimal = (cheapest, 3 ** len(items))
    every = price(base)
    if floor is None:
        floor = price(dict.fromkeys(base, "bf16"))
    return Solution(
        types, price(types), every, floor, proposal, est, measured, rounds, optimal,
        isolated,
    )  # fmt: skip


__all__ = [
    "EXHAUSTIVE", "Item", "Solution", "SolveError", "cost", "offered", "realization",
    "solve",
]  # fmt: skip
