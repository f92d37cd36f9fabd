"""`presk rank`: the layout cost model held to account on two days of measurement — the
statements L–Q and the close pairs per decision class (L1080–L1115; docs/plans.md, "rank").

Every figure is computed from the two days' files alone, so a report from recorded days is
the same bytes on any machine. The definitions:

- a **close pair**: two points of a nest whose decisions differ in one (its class; `kblock`
  is counted with `order`, the block loops' order and block being one decision's parts);
- **distinguished**: the two points' median times differ by more than twice the larger
  median absolute deviation on both days, with the same sign;
- **right**: day one's predictions order the pair as the measurement does; **tied**: they
  predict it equal (not right); **undecided**: the predictions are within 1 + u of each
  other (u: the profile's, recorded in day.json); **right, decided**: the share right among
  the distinguished pairs that are not undecided (— when none is);
- a point's **time**: the mean of its two medians; the model's **pick**: its least
  prediction (the first such point); its **candidates**: the points predicted within 1 + u
  of its best;
- a point's **measured time** on a day (question 72): its launches, the warm-up and the
  timed ones, at its median, plus the sweep's time outside launches over its points.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from presk_kernel.layout_day import Day, Nest, Point

CLASS_OF = {"kblock": "order"}
M_RIGHT, M_PAIRS = 0.90, 1000
N_RATIO = 1000.0
O_RATIO = 1.25
P_RATIO = 3.0
Q_REGRET, Q_COST = 1.05, 0.10


@dataclass
class Pair:
    cls: str
    close: bool
    distinguished: bool
    right: bool
    tied: bool
    undecided: bool


def pairs(n1: Nest, n2: Nest, u: float) -> list[Pair]:
    """The close pairs of a nest, measured on both days (points matched by index)."""
    out = []
    pts = list(zip(n1.points, n2.points, strict=True))
    for i in range(len(pts)):
        a1, a2 = pts[i]
        for j in range(i + 1, len(pts)):
            b1, b2 = pts[j]
            keys = set(a1.decisions) | set(b1.decisions)
            diff = [k for k in keys if a1.decisions.get(k) != b1.decisions.get(k)]
            if len(diff) != 1:
                continue
            d1 = _separated(a1, b1)
            d2 = _separated(a2, b2)
            dist = d1 != 0 and d1 == d2
            pa, pb = a1.predicted_us, b1.predicted_us
            pred = (pa > pb) - (pa < pb)
            lo, hi = sorted((pa, pb))
            undecided = hi <= lo * (1.0 + u)
            out.append(Pair(CLASS_OF.get(diff[0], diff[0]), True, dist, dist and pred == d1,
                            pred == 0, undecided))  # fmt: skip
    return out


def _separated(a: Point, b: Point) -> int:
    """+1 when a is slower than b by more than twice the larger MAD, −1 faster, 0 neither."""
    gap = a.median - b.median
    if abs(gap) > 2.0 * max(a.mad, b.mad):
        return 1 if gap > 0 else -1
    return 0


def _pct(n: int, of: int) -> str:
    return "—" if of == 0 else f"{100.0 * n / of:.1f} %"


def class_table(all_pairs: list[Pair]) -> list[str]:
    rows = ["| class | close pairs | distinguished | right | right, decided | undecided | tied |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    for cls in sorted({p.cls for p in all_pairs}):
        ps = [p for p in all_pairs if p.cls == cls]
        dist = [p for p in ps if p.distinguished]
        decided = [p for p in dist if not p.undecided]
        rows.append(
            f"| {cls} | {len(ps)} | {len(dist)} | {_pct(sum(p.right for p in dist), len(dist))} | "
            f"{_pct(sum(p.right for p in decided), len(decided))} | "
            f"{_pct(sum(p.undecided for p in dist), len(dist))} | "
            f"{_pct(sum(p.tied for p in dist), len(dist))} |"
        )
    return rows


def _time(p1: Point, p2: Point) -> float:
    return (p1.median + p2.median) / 2.0


def _pick(nest: Nest) -> int:
    return min(range(len(nest.points)), key=lambda i: (nest.points[i].predicted_us, i))


def candidates(nest: Nest, u: float) -> list[int]:
    best = min(p.predicted_us for p in nest.points)
    return [i for i, p in enumerate(nest.points) if p.predicted_us <= best * (1.0 + u)]


def _outside(day: Day) -> float:
    """The sweep's time outside its points' launches, over its points (seconds each)."""
    pts = [p for n in day.nests for p in n.points]
    launched = sum((p.warmup + p.launches) * p.median for p in pts) * 1e-6
    sweep = float(day.doc.get("sweep_s", 0.0))
    return max(0.0, sweep - launched) / max(1, len(pts))


def _measured(p: Point, outside: float) -> float:
    return (p.warmup + p.launches) * p.median * 1e-6 + outside


@dataclass
class NestQ:
    nest: str
    points: int
    candidates: int
    regret: float
    cost: tuple[float, float]
    static: tuple[float, float]
    cand_s: tuple[float, float]
    exhaustive: tuple[float, float]
    share: tuple[float, float]

    @property
    def holds(self) -> bool:
        return self.regret <= Q_REGRET and max(self.cost) <= Q_COST


def nest_q(n1: Nest, n2: Nest, d1: Day, d2: Day, u: float) -> NestQ:
    cand = candidates(n1, u)
    times = [_time(a, b) for a, b in zip(n1.points, n2.points, strict=True)]
    regret = min(times[i] for i in cand) / min(times)
    cost, static, cs, ex, share = [], [], [], [], []
    for day, nest in ((d1, n1), (d2, n2)):
        out = _outside(day)
        meas = [_measured(p, out) for p in nest.points]
        st = float(day.doc.get("costed_s", 0.0))
        c = sum(meas[i] for i in cand)
        total = sum(meas)
        launches = sum(p.launches for p in nest.points)
        cost.append((st + c) / total if total else float("inf"))
        static.append(st)
        cs.append(c)
        ex.append(total)
        share.append(sum(nest.points[i].launches for i in cand) / launches if launches else 0.0)
    return NestQ(
        n1.name, len(n1.points), len(cand), regret, *map(tuple, (cost, static, cs, ex, share))
    )  # type: ignore[arg-type]


def _verdict(ok: bool | None, why: str = "") -> str:
    if ok is None:
        return why
    return "**holds**" if ok else "**fails**"


def report(d1: Day, d2: Day, entry: str) -> str:
    """The report, Markdown (its sections from `## Statements` are the specification's)."""
    u = d1.u
    config, realize = d1.config, d1.realize
    where = f"{config} {realize}"
    nests = sorted(zip(d1.nests, d2.nests, strict=True), key=lambda t: t[0].name)
    eins = [(a, b) for a, b in nests if a.kind == "contraction"]
    by_nest = {a.name: pairs(a, b, u) for a, b in nests}
    lines = [
        f"# Rank of the layout cost model: `{entry}` at {config}, {realize}",
        "",
        f"Day 1: `{d1.path}`, {_npoints(d1)} points of {len(d1.nests)} nests swept in "
        f"{float(d1.doc.get('sweep_s', 0.0)):.1f} s; day 2: `{d2.path}`, {_npoints(d2)} points "
        f"swept in {float(d2.doc.get('sweep_s', 0.0)):.1f} s. Space `{d1.doc['space']}`; the "
        f"predictions are day 1's, by the profile `{d1.doc['profile'].get('path', '?')}`, "
        f"u = {u:.3f}.",
        "",
        "## Statements (plan 0.7.0 §3.7; Q, plan 0.8.0 §3.6)",
        "",
        "| | statement | measured | verdict |",
        "|---|---|---|---|",
    ]
    # L
    points1 = _npoints(d1)
    checked = int(d1.doc.get("checked_interp", 0))
    differing = int(d1.doc.get("differing", 0)) + int(d2.doc.get("differing", 0))
    differing += sum(not p.same_bits for d in (d1, d2) for n in d.nests for p in n.points)
    ok_l = False if differing else (True if checked >= points1 else None)
    lines.append(
        "| L | every point bit-identical to point 0, natively and on the kernel interpreter | "
        f"{checked} of {points1} points of day 1 checked on the interpreter; {differing} outputs "
        "differing, natively or on the interpreter, in any sweep | "
        f"{_verdict(ok_l, 'inconclusive: not every point checked on the interpreter')} |"
    )
    # M
    m_parts, total, every = [], 0, True
    for a, _ in eins:
        dist = [p for p in by_nest[a.name] if p.distinguished]
        right = sum(p.right for p in dist)
        total += len(dist)
        every &= bool(dist) and right > M_RIGHT * len(dist)
        m_parts.append(f"`{a.name}` {_pct(right, len(dist))} of {len(dist)}")
    if not eins:
        ok_m, why_m = None, "not measured: no contraction nest"
    elif total < M_PAIRS:
        ok_m, why_m = None, "inconclusive: fewer than 10³ distinguished pairs"
    else:
        ok_m, why_m = every, ""
    lines.append(
        "| M | more than 90 % of the distinguished close pairs ranked right, each `ein` of "
        f"`{entry}` at {config}, {realize} | {'; '.join(m_parts) or '—'} | {_verdict(ok_m, why_m)} |"
    )
    # N
    n_parts, ratios = [], []
    for d in (d1, d2):
        sweep = float(d.doc.get("sweep_s", 0.0))
        costed = float(d.doc.get("costed_s", 0.0))
        captured = float(d.doc.get("captured_s", 0.0))
        r = sweep / costed if costed else float("inf")
        r2 = sweep / (costed + captured) if costed + captured else float("inf")
        ratios.append(r)
        n_parts.append(f"{d.config} {d.realize} {r:.0f}× ({r2:.0f}× with the entry run)")
    lines.append(
        "| N | choosing statically at least 10³× cheaper than the exhaustive sweep of the same "
        f"points, `{entry}` | {'; '.join(n_parts)} | {_verdict(min(ratios) >= N_RATIO)} |"
    )
    # O
    o_parts, worst_o = [], 0.0
    for a, b in eins:
        times = [_time(x, y) for x, y in zip(a.points, b.points, strict=True)]
        ratio = times[_pick(a)] / min(times)
        worst_o = max(worst_o, ratio)
        o_parts.append(f"`{a.name}` {ratio:.2f}")
    ok_o = (worst_o <= O_RATIO) if eins else None
    lines.append(
        "| O | the model's pick within 1.25× of the best measured, every contraction nest of "
        f"`{entry}` at {config}, {realize} | {'; '.join(o_parts) or '—'} | "
        f"{_verdict(ok_o, 'not measured: no contraction nest')} |"
    )
    # P
    lines.append(_statement_p(d1, d2, entry, eins))
    # Q
    qs = [nest_q(a, b, d1, d2, u) for a, b in eins]
    if qs:
        worst_r = max(qs, key=lambda q: q.regret)
        worst_c = max(qs, key=lambda q: max(q.cost))
        worst_s = max(qs, key=lambda q: max(q.share))
        q_text = (
            f"{len(qs)} contraction nests: the best candidate within {worst_r.regret:.2f}× of "
            f"the best measured at worst (`{worst_r.nest}` {where}); the static side and the "
            f"candidates' measured time at most {100 * max(worst_c.cost):.1f} % of the nest's "
            f"exhaustive sweep (`{worst_c.nest}` {where}); their share of its timed launches "
            f"at most {100 * max(worst_s.share):.2f} % (`{worst_s.nest}` {where}, D71's count)"
        )
        ok_q = all(q.holds for q in qs)
    else:
        q_text, ok_q = "—", None
    lines.append(
        "| Q | measuring only the points predicted within 1 + u of the model's best finds one "
        "within 1.05× of the best measured, at no more than 10 % of the exhaustive sweep's time "
        "(question 72: the static side and the candidates' measured time), every contraction "
        f"nest of every configuration swept whole | {q_text} | "
        f"{_verdict(ok_q, 'not measured: no contraction nest')} |"
    )
    lines += [
        "",
        "## Statement Q, per contraction nest",
        "",
        "*Candidates*: the points predicted within 1 + u of the model's best. *Regret*: the "
        "best candidate over the best point measured, the mean of the two days' medians. *Cost* "
        "(question 72): statement N's static side, the whole configuration's, charged to each "
        "nest, and the candidates' measured time, over the exhaustive sweep of the nest's "
        "points. A point's measured time is its launches, the warm-up and the timed ones, at "
        "its median, and its time outside them (compiling it, comparing its bits), which a "
        "sweep records only as a whole: the sweep's time less its points' launches, over its "
        "points, 0.6.0's included (the dry run's estimate, D72). *Kernel share* (D71's count): "
        "the candidates' timed launches over the nest's. Each day apart, day one first.",
        "",
        "| nest | config | type | points | candidates | regret | cost | static, candidates, "
        "exhaustive (s) | kernel share | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for q in qs:
        secs = " / ".join(
            f"{q.static[i]:.2f}, {q.cand_s[i]:.2f}, {q.exhaustive[i]:.1f}" for i in (0, 1)
        )
        lines.append(
            f"| `{q.nest}` | {config} | {realize} | {q.points} | {q.candidates} | "
            f"{q.regret:.2f} | {100 * q.cost[0]:.1f} % / {100 * q.cost[1]:.1f} % | {secs} | "
            f"{100 * q.share[0]:.2f} % / {100 * q.share[1]:.2f} % | {_verdict(q.holds)} |"
        )
    lines += ["", "## Per decision class", ""]
    lines += class_table([p for ps in by_nest.values() for p in ps])
    return "\n".join(lines) + "\n"


def _npoints(d: Day) -> int:
    return sum(len(n.points) for n in d.nests)


def _statement_p(d1: Day, d2: Day, entry: str, eins) -> str:
    text = (
        "| P | the best point of the GEMM space at least 3× the 0.6.0 default, `gemm` at "
        "N=1024, f32 | "
    )
    n = d1.doc["dims"].get("N")
    if entry != "gemm" or n != 1024 or d1.realize != "f32" or not eins:
        return text + "— | not measured |"
    a, b = eins[0]
    times = [_time(x, y) for x, y in zip(a.points, b.points, strict=True)]
    if a.default_060 is not None and b.default_060 is not None:  # point 0 is the GEMM statement
        old, what = _time(a.default_060, b.default_060), "the 0.6.0 default"
    elif a.default_060 is None and b.default_060 is None:
        old, what = times[0], "point 0"
    else:
        return text + "— | not measured: one day has no 0.6.0 default |"
    ratio = old / min(times)
    return (
        text + f"`{a.name}` {ratio:.2f}× ({what} {old:.1f} µs, the best "
        f"{min(times):.1f} µs) | {_verdict(ratio >= P_RATIO)} |"
    )


def median(xs) -> float:
    return statistics.median(xs)


__all__ = ["Pair", "candidates", "class_table", "nest_q", "pairs", "report"]
