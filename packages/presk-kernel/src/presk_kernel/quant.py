"""Integer weights (spec L67, L1266; docs/precision.md, "Quantised weights"): the scheme
`presk quantize` applies to the parameter paths of a realization's `quant` map.

Symmetric, per channel: a weight w of rank ≥ 2 has one scale per index of every axis but
its second-to-last — the axis a contraction `x · w` sums over, so each output channel (and
each block of a stacked parameter) has its own; a weight of rank 0 or 1 has one scale.
With q_max = 127 (int8) or 7 (int4):

    s = max |w| over the channel / q_max, rounded to a binary32 not below it (1 where the
        channel is all zeros)
    q = round-half-even(w / s), within [−q_max, q_max]
    w̃ = q · s

The scale is a binary32 and q has at most 8 bits, so w̃ = q·s is exact in binary64: the
dequantised weights are the doubles a checkpoint holds, and their one rounding is the
scheme's, |w̃ − w| ≤ s/2 element by element (plus the rounding of w/s, below 2⁻⁵³ of it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

QMAX = {"int8": 127, "int4": 7}
BITS = {"int8": 8, "int4": 4}


@dataclass(frozen=True)
class Quantised:
    """A weight's integers, its binary32 scales (broadcasting against them) and w̃ = q·s."""

    scheme: str
    q: np.ndarray  # int8 (int4 values too: one a byte here, two a byte at rest)
    scales: np.ndarray  # float32, the weight's shape with the summed axis of length 1
    dequantised: np.ndarray  # float64, exact

    @property
    def bytes_at_rest(self) -> float:
        """Integers of BITS bits each, and a binary32 per scale."""
        return self.q.size * BITS[self.scheme] / 8 + 4 * self.scales.size


def quantise(w: np.ndarray, scheme: str) -> Quantised:
    """`w` (doubles) under `scheme` (int8 or int4), per the module's scheme."""
    if scheme not in QMAX:
        raise ValueError(f"no quantisation scheme `{scheme}` (the schemes: int8, int4)")
    w = np.asarray(w, dtype=np.float64)
    qmax = QMAX[scheme]
    a = np.abs(w)
    m = a.max(axis=-2, keepdims=True) if w.ndim >= 2 else np.full((1,) * w.ndim, a.max(initial=0.0))
    s = (m / qmax).astype(np.float32)
    low = s.astype(np.float64) * qmax < m  # rounded below: the largest would exceed q_max
    s = np.where(low, np.nextafter(s, np.float32(np.inf)), s)
    s = np.where(m == 0, np.float32(1), s).astype(np.float32)
    s64 = s.astype(np.float64)
    q = np.clip(np.rint(w / s64), -qmax, qmax).astype(np.int8)
    return Quantised(scheme, q, s, q.astype(np.float64) * s64)


__all__ = ["BITS", "QMAX", "Quantised", "quantise"]
