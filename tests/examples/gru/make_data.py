"""Writes data/signs_T8.psk.d: 64 sequences of 8 steps of one real, each noise around a level
that changes sign once, at a random step; the class is the sign the sequence ends on
(1 positive, 0 negative), which a model must carry to the last step. Deterministic (numpy's
PCG64, seed 29); run from this folder: `../../../.venv/bin/python make_data.py`."""

import numpy as np
import presk

N, T = 64, 8
rng = np.random.default_rng(29)
y = rng.integers(0, 2, size=N)
x = 0.4 * rng.standard_normal((N, T, 1))
for i in range(N):
    at = rng.integers(1, T)
    end = 1.0 if y[i] else -1.0
    x[i, :at, 0] -= end
    x[i, at:, 0] += end
presk.write_data("data/signs_T8.psk.d", (x, y), type="(ℝ[time: 8, inp: 1], idx[2][])")
