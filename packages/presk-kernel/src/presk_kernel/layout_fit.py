"""The fit of the layout cost model (presk_kernel.layout_model) to timed samples.

With the terms' exponent q fixed, t − λ − spawn·[workers > 1] = ‖(x_j / r_j)‖_q is solved
for the inverse rates c_j = 1/r_j ≥ 0 as a non-negative least-squares problem of the
relative residuals ((prediction − t)/t): for q = 1 it is linear in c; for q > 1 the norm is
written Σ_j x_j c_j s_j with s_j = (x_j c_j / ‖x c‖_q)^(q−1) (the identity ‖v‖_q =
Σ v_j (v_j/‖v‖_q)^(q−1)), and the weights s are iterated from the sum's solution (q = ∞,
the max: s is 1 on the largest term). Lawson and Hanson's active-set algorithm solves each
problem exactly, so a term that only makes the fit worse gets c = 0: it **vanishes**, its
rate printed as the one at which it adds a billionth of the shortest time (effectively ∞).
`--combine pnorm` tries q in `Q_GRID` and keeps the smallest sum of squared relative
residuals; `sum` is q = 1, `max` q = ∞. Nothing is random: the same samples give the same
model on every machine.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from presk_kernel.layout_model import Counts, Model, ModelError, combine_terms, group_key

Q_GRID = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
ROUNDS = 40  # iterations of the weights s for q > 1
VANISH = 1e-9  # a vanished term adds this fraction of the shortest time at most


def nnls(a: np.ndarray, b: np.ndarray, iterations: int = 500) -> np.ndarray:
    """min ‖a x − b‖ over x ≥ 0 (Lawson and Hanson's active-set algorithm)."""
    n = a.shape[1]
    norms = np.linalg.norm(a, axis=0)
    scale = np.where(norms > 0, norms, 1.0)
    a = a / scale
    x = np.zeros(n)
    passive = np.zeros(n, bool)
    usable = norms > 0
    for _ in range(iterations):
        w = a.T @ (b - a @ x)
        cand = usable & ~passive & (w > 1e-12 * max(1.0, float(np.abs(w).max(initial=0))))
        if not cand.any():
            break
        passive[int(np.argmax(np.where(cand, w, -np.inf)))] = True
        while True:
            z = np.zeros(n)
            idx = np.flatnonzero(passive)
            z[idx] = np.linalg.lstsq(a[:, idx], b, rcond=None)[0]
            if (z[idx] > 0).all():
                x = z
                break
            neg = idx[z[idx] <= 0]
            alpha = float(np.min(x[neg] / (x[neg] - z[neg])))
            x = x + alpha * (z - x)
            passive &= x > 1e-15
            x[~passive] = 0.0
            if not passive.any():
                break
    return x / scale


def ranks(x) -> np.ndarray:
    """Ranks from 1, ties at their average."""
    x = np.asarray(x, float)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        same = x == v
        if same.sum() > 1:
            r[same] = r[same].mean()
    return r


def spearman(x, y) -> float:
    """Spearman's rank correlation; nan for fewer than two samples or a constant side."""
    if len(x) < 2:
        return float("nan")
    a, b = ranks(x), ranks(y)
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den else float("nan")


class _Design:
    """The samples as columns: λ, spawn, then per term its column (π and ρ one per group)."""

    def __init__(self, counts: list[Counts], t: np.ndarray) -> None:
        self.groups = sorted({c.group for c in counts}, key=group_key)
        gi = {g: i for i, g in enumerate(self.groups)}
        n, k = len(counts), len(self.groups)
        self.t = t
        self.x = np.array([c.terms() for c in counts], float)  # n × 5
        self.spawn = np.array([1.0 if c.workers > 1 else 0.0 for c in counts])
        self.g = np.array([gi[c.group] for c in counts])
        self.n, self.k = n, k

    def columns(self, s: np.ndarray) -> np.ndarray:
        """n × (2 + 2k + 3): 1, spawn, work·s₀ per group, loads·s₁ per group, bytes·s."""
        n, k = self.n, self.k
        out = np.zeros((n, 2 + 2 * k + 3))
        out[:, 0] = 1.0
        out[:, 1] = self.spawn
        rows = np.arange(n)
        out[rows, 2 + self.g] = self.x[:, 0] * s[:, 0]
        out[rows, 2 + k + self.g] = self.x[:, 1] * s[:, 1]
        out[:, 2 + 2 * k :] = self.x[:, 2:] * s[:, 2:]
        return out

    def inverse_rates(self, c: np.ndarray) -> np.ndarray:
        """n × 5: each sample's c_j (its group's for work and loads)."""
        k = self.k
        out = np.empty((self.n, 5))
        out[:, 0] = c[2 + self.g]
        out[:, 1] = c[2 + k + self.g]
        out[:, 2:] = c[2 + 2 * k :]
        return out

    def predict(self, c: np.ndarray, q: float) -> np.ndarray:
        v = self.x * self.inverse_rates(c)
        norm = np.array([combine_terms(list(row), q) for row in v])
        return c[0] + c[1] * self.spawn + norm

    def solve(self, q: float) -> np.ndarray:
        w = 1.0 / self.t
        c = nnls(self.columns(np.ones((self.n, 5))) * w[:, None], np.ones(self.n))
        if q == 1.0:
            return c
        for _ in range(ROUNDS):
            v = self.x * self.inverse_rates(c)
            if math.isinf(q):
                s = np.zeros_like(v)
                s[np.arange(self.n), np.argmax(v, axis=1)] = 1.0
            else:
                norm = np.array([combine_terms(list(row), q) for row in v])
                safe = np.where(norm > 0, norm, 1.0)
                s = (v / safe[:, None]) ** (q - 1.0)
            new = nnls(self.columns(s) * w[:, None], np.ones(self.n))
            if np.allclose(new, c, rtol=1e-10, atol=0):
                c = new
                break
            c = new
        return c


def fit(
    counts: list[Counts], seconds, combine: str = "pnorm", rules: tuple[str, ...] = ()
) -> Model:
    """The model fitted to `counts` (one worker's share each) timed `seconds` (each > 0):
    λ, spawn, the three bandwidths, π and ρ per group, q; u and Spearman over all of them.
    E7126 without a sample."""
    t = np.asarray(seconds, float)
    if len(counts) == 0 or len(t) != len(counts) or not (t > 0).all():
        raise ModelError("E7126", "nothing to fit: no timed sample")
    d = _Design(counts, t)
    grid = {"pnorm": Q_GRID, "sum": (1.0,), "max": (math.inf,)}[combine]
    best = None
    for q in grid:
        c = d.solve(q)
        loss = float((((d.predict(c, q) - t) / t) ** 2).sum())
        if best is None or loss < best[0] - 1e-12 * max(1.0, best[0]):
            best = (loss, q, c)
    assert best is not None
    _, q, c = best
    pred = d.predict(c, q)
    floor = float(t.min()) * VANISH

    def rate(ci: float, column: np.ndarray) -> float:
        if ci > 0:
            return 1.0 / ci
        return max(float(column.max(initial=0.0)), 1.0) / floor

    k = d.k
    pi, rho = {}, {}
    for i, g in enumerate(d.groups):
        mine = d.g == i
        pi[g] = float(rate(c[2 + i], d.x[mine, 0]))
        rho[g] = float(rate(c[2 + k + i], d.x[mine, 1]))
    betas = [float(rate(c[2 + 2 * k + j], d.x[:, 2 + j])) for j in range(3)]
    u = statistics.median(np.abs(pred - t) / t)
    rho_s = spearman(pred, t)
    return Model(
        float(c[0]), float(c[1]), *betas, pi, rho, q, combine, rules, float(u),
        0.0 if math.isnan(rho_s) else rho_s, len(counts),
    )  # fmt: skip


def fit_line(m: Model) -> str:
    """`-- fit (p-norm, q = 1.00, load term, rules lines,overhead): λ = … bytes/s` and the π
    and ρ lines, groups ordered by lanes then workers (R17.5)."""
    from presk_kernel.layout_model import rules_text, sci

    form = {"pnorm": "p-norm", "sum": "sum", "max": "max"}[m.combine]
    q = "∞" if math.isinf(m.q) else f"{m.q:.2f}"
    lines = [
        f"-- fit ({form}, q = {q}, load term, rules {rules_text(m.rules)}): "
        f"λ = {m.lam * 1e6:.2f} µs, spawn = {m.spawn * 1e6:.2f} µs, β_L2 = {sci(m.beta_l2)}, "
        f"β_L3 = {sci(m.beta_l3)}, β_mem = {sci(m.beta_mem)} bytes/s"
    ]
    groups = sorted(m.pi, key=group_key)
    lines += [f"--      π[{g}] = {sci(m.pi[g])} ops/s" for g in groups]
    lines += [f"--      ρ[{g}] = {sci(m.rho[g])} loads/s" for g in groups]
    lines.append(
        f"-- uncertainty u = {m.u:.3f} (median relative residual over {m.samples} samples), "
        f"Spearman {m.spearman:.3f}"
    )
    return "\n".join(lines)


__all__ = ["Q_GRID", "fit", "fit_line", "fit_samples", "nnls", "ranks", "refit_profile", "spearman"]


def fit_samples(samples: list[dict], combine: str, rules: tuple[str, ...]) -> Model:
    """The model fitted to a profile's samples: each sample's counts under `rules`, its time
    the median of its calls (E7126 without a sample, E7120 a sample without those rules)."""
    from presk_kernel.layout_model import counts_for

    try:
        cs = [counts_for(s["counts"], rules) for s in samples]
    except ValueError as e:
        raise ModelError("E7120", f"a sample cannot be priced: {e}") from None
    t = [statistics.median(s["times_us"]) * 1e-6 for s in samples]
    return fit(cs, t, combine, rules)


def refit_profile(profile, combine: str, rules: tuple[str, ...]):
    """`presk refit`: the profile with its model fitted again on its samples."""
    from presk_kernel.layout_model import Profile

    return Profile(profile.machine, profile.samples, fit_samples(profile.samples, combine, rules))
