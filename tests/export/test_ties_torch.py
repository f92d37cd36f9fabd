"""`max` and `min` at ties (issue 27): Presk gives the cotangent to the first extremum
(docs/language.md, "Kinks"); the export's forward must make torch.autograd do the same,
where `amax`/`amin` split it among the tied elements. The oracle is the reference
interpreter's gradient (presk-ad), on inputs whose rows tie, against `torch.func.grad` of
the exported function; the plain `amax` form must fail this test (the near miss)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

# rows: a tie of the maximum in the middle, all equal, ties of both maximum and minimum
X = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [5.0, -1.0, 5.0, -1.0]])


def test_the_cotangent_goes_to_the_first_extremum(exported, reference):
    dims = {"B": 3}
    ref = reference.run("ties.psk", "peaks_grad", dims, [X])
    # by hand: 3/3 to the first maximum of each row, 1/3 to its first minimum, 1 to the
    # first maximum of all (X[2, 0])
    want = np.zeros_like(X)
    for r, row in enumerate(X):
        want[r, int(np.argmax(row))] += 1.0
        want[r, int(np.argmin(row))] += 1 / 3
    want[2, 0] += 1.0
    np.testing.assert_allclose(ref, want, rtol=0, atol=1e-15)
    peaks = exported("ties.psk")["ties"].peaks
    got = torch.func.grad(peaks)(torch.from_numpy(X.copy()))
    np.testing.assert_allclose(got.numpy(), ref, rtol=0, atol=1e-15)


def test_amax_would_split_the_cotangent():
    """The near miss: torch's `amax` gives each tied element a share."""
    x = torch.from_numpy(X.copy())
    split = torch.func.grad(lambda x: x.amax(dim=1).sum())(x)
    assert split[1].tolist() == [0.25] * 4
