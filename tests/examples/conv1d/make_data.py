"""Writes data/bumps_T16.psk.d: 128 sequences of 16 steps, each noise plus one bump of width 3
at a random place, going up (class 1) or down (class 0). Deterministic (numpy's PCG64, seed
29); run from this folder: `../../../.venv/bin/python make_data.py`."""

import numpy as np
import presk

N, T = 128, 16
rng = np.random.default_rng(29)
y = rng.integers(0, 2, size=N)
x = 0.3 * rng.standard_normal((N, 1, T))
for i in range(N):
    at = rng.integers(1, T - 2)
    x[i, 0, at - 1 : at + 2] += (1.0 if y[i] else -1.0) * np.array([0.5, 1.0, 0.5])
presk.write_data("data/bumps_T16.psk.d", (x, y), type="(ℝ[ch: 1, seq: 16], idx[2][])")
