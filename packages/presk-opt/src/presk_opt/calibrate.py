"""`presk bench --calibrate`: every kernel an entry launches natively, timed, priced by its
loop nest, and the roofline fitted to the times (docs/optimizer.md, "The roofline").

The schedule is the one `presk run --backend native` executes (fused, with the layouts of a
run), compiled with `NativeEntry(timed=True)`: one untimed call, then `repeat` timed ones,
each launch's nanoseconds read from `run_timed`. Launches of one kernel (the same nest at
another site: a block of a stack) are one sample, the median of all their calls.
"""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass, replace

import numpy as np

from presk_opt.roofline import Profile, Roofline, Sample, fit, sci, spearman, table, traffic, work


def digest(kernel) -> str:
    """The kernel's identity: the digest of its text but its site, steps and layout."""
    from presk_kernel.ir import Layout, format_kernel

    bare = replace(kernel, site="", steps=(), layout=Layout())
    return hashlib.sha256(format_kernel(bare).encode()).hexdigest()[:16]


def operations(kernel) -> int:
    """The kernel's operation count: the PSK-Core operations it computes (a fused kernel's
    steps), what the cost model `operation counts` prices."""
    return max(1, len(kernel.steps))


def time_kernels(entry, inputs: list, repeat: int, source: str) -> list[Sample]:
    """Each distinct kernel of the compiled entry (`NativeEntry(timed=True)`), timed over
    `repeat` calls after an untimed one: a sample each, in the order of first launch."""
    from presk_kernel.ir import header

    launches = entry.schedule.launches
    ns = np.zeros(len(launches) + 1)
    entry.run_timed(inputs, ns)
    per_call = []
    for _ in range(repeat):
        ns[:] = 0.0
        entry.run_timed(inputs, ns)
        per_call.append(ns[:-1].copy())
    times = np.array(per_call)  # repeat × launches, ns
    groups: dict[str, list[int]] = {}
    for i, launch in enumerate(launches):
        groups.setdefault(digest(launch.kernel), []).append(i)
    out = []
    for d, idx in groups.items():
        k = launches[idx[0]].kernel
        us = statistics.median(times[:, idx].reshape(-1).tolist()) / 1000.0
        us = max(us, 1e-3)  # a clock's nanosecond at least: the logarithm needs it positive
        out.append(
            Sample(header(k), k.site, operations(k), work(k), traffic(k), us, repeat, source, d)
        )
    return out


@dataclass
class Calibration:
    profile: Profile
    timed: list[Sample]  # this run's
    kept: int  # samples of the existing profile not timed again
    spearman: tuple[float, float, float]  # operation counts, work, roofline

    def text(self, out: str, repeat: int) -> str:
        roof = self.profile.fit
        assert roof is not None
        counts, w, r = self.spearman
        t = self.profile.machine["type"]
        return (
            table(self.profile.samples, roof)
            + f"-- {len(self.timed)} kernels timed ({self.kept} kept from {out}), "
            f"{repeat} calls, {t}\n"
            f"-- roofline: π = {sci(roof.pi)} ops/s, β = {sci(roof.beta)} bytes/s, "
            f"λ = {roof.lam * 1e6:.2f} µs per launch\n"
            f"-- Spearman with the measured times: operation counts {counts:.3f}, "
            f"work {w:.3f}, roofline {r:.3f}\n"
            f"-- profile written to {out}\n"
        )


def calibrate(timed: list[Sample], machine: dict, old: Profile | None) -> Calibration:
    """The profile of this run's samples and the old profile's not timed again (same
    digest), with the roofline fitted to all of them."""
    new = {s.digest for s in timed}
    kept = [s for s in (old.samples if old else []) if s.digest not in new]
    samples = kept + timed
    w = np.array([s.work for s in samples], float)
    q = np.array([s.bytes for s in samples], float)
    t = np.array([s.us for s in samples], float) * 1e-6
    roof = fit(w, q, t)
    counts = [s.operations for s in samples]
    pred = roof.seconds(w, q)
    rho = (spearman(counts, t), spearman(w, t), spearman(pred, t))
    return Calibration(Profile(machine, samples, roof), timed, len(kept), rho)


__all__ = ["Calibration", "Roofline", "calibrate", "digest", "operations", "time_kernels"]
