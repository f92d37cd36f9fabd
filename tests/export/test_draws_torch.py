"""Draws in the PyTorch export (issue 29): the exported module computes presk's Threefry in
torch's int64 ops, so `split_key`, `uniform` and `bernoulli` give the interpreter's numbers
bit for bit, `normal` within a few ulps and `sample` the same tokens, a dropout's forward and its gradient (torch.autograd through the mask) match
the reference interpreter's, and the conformance test of an entry that draws passes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import export_passes_conformance
from presk_core import random as R

torch = pytest.importorskip("torch")

KEYS = [R.root_key(0), R.Key(0xFFFFFFFF, 0xFFFFFFFF), R.fold_in_name(R.root_key(7), "key")]


def key_tensor(key: R.Key):
    return torch.tensor(list(key), dtype=torch.long)


@pytest.mark.parametrize("key", KEYS)
def test_keys_and_uniforms_are_the_interpreters_bits(exported, key):
    draws = exported("draws.psk")["draws"]
    got = [tuple(int(w) for w in k) for k in draws.keys(key_tensor(key))]
    assert got == [tuple(k) for k in R.split(key, 2)]
    for b in (1, 3, 40):
        u = draws.unif(key_tensor(key), B=b)
        assert u.dtype == torch.float64
        assert u.numpy().tobytes() == R.uniform(key, (b, 5)).tobytes()


@pytest.mark.parametrize("key", KEYS)
def test_dropout_and_its_gradient_are_the_interpreters(exported, reference, key):
    draws = exported("draws.psk")["draws"]
    x = np.random.default_rng(3).normal(size=(4, 5))
    dims = {"B": 4}
    want = reference.run("draws.psk", "drop", dims, [key, x])
    got = draws.drop(key_tensor(key), torch.from_numpy(x.copy()))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-15, atol=1e-15)
    grad = reference.run("draws.psk", "drop_grad", dims, [key, x])
    torch_grad = torch.func.grad(lambda t: draws.drop_loss(key_tensor(key), t))
    np.testing.assert_allclose(torch_grad(torch.from_numpy(x.copy())).numpy(), grad, rtol=1e-14)


@pytest.mark.parametrize("key", KEYS)
def test_a_reparameterised_normal_and_its_gradient(exported, reference, key):
    """The export's normals are float64 Box–Muller on presk's uniforms: within a few ulps of
    the interpreter's (the 256-bit values rounded once); the gradient in μ through them."""
    draws = exported("draws.psk")["draws"]
    mu = np.random.default_rng(5).normal(size=(3, 5))
    dims = {"B": 3}
    want = reference.run("draws.psk", "noise", dims, [key, mu])
    got = draws.noise(key_tensor(key), torch.from_numpy(mu.copy()))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14, atol=1e-15)
    grad = reference.run("draws.psk", "noise_grad", dims, [key, mu])
    torch_grad = torch.func.grad(lambda t: draws.noise_loss(key_tensor(key), t))
    np.testing.assert_allclose(torch_grad(torch.from_numpy(mu.copy())).numpy(), grad, atol=1e-14)


def test_sample_draws_the_interpreters_tokens(exported):
    """`sample`'s inverse CDF in float64 (the interpreter's in MPFR): the same tokens unless a
    uniform falls within rounding of a cumulative probability (never, here); a logit of −∞
    is never drawn."""
    draws = exported("draws.psk")["draws"]
    x = np.random.default_rng(4).normal(scale=3.0, size=(400, 7))
    x[::3, 2] = -np.inf
    for key in KEYS:
        got = draws.pick(key_tensor(key), torch.from_numpy(x.copy()))
        assert got.dtype == torch.long
        assert np.array_equal(got.numpy(), R.sample(key, x))


def test_the_conformance_test_of_an_entry_that_draws_passes(tmp_path):
    program = Path(__file__).parent / "programs" / "draws.psk"
    for entry in ("drop", "keys", "noise", "pick"):
        out = tmp_path / entry
        export_passes_conformance(program, entry, out, "--dim", "B=3")
