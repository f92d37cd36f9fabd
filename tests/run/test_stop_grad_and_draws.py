"""Issue 16's language features: `stop_grad` (the identity, adjoint zero, a constant for the
checker's classes) and the keyed draws `uniform` and `bernoulli` (dropout), through the
checker, the interpreter, differentiation, the PyTorch export and the kernel lowering."""

from __future__ import annotations

import json

import numpy as np
import pytest
from presk_cli.commands import RUN
from presk_cli.pipeline import run_pipeline
from presk_core import random as R
from presk_core.run import run_entry
from presk_syntax.pipeline import Context
from presk_syntax.span import SourceMap
from presk_types.driver import check_file
from presk_types.passes import Elaborated

torch = pytest.importorskip("torch")

PROGRAM = """\
dim B
fn hard(w : ℝ[4, c: 8], x : ℝ[batch: B, 4]) -> ℝ[] =
  mean(real(argmax(axis c, x · w)))
fn straight_through(w : ℝ[4, c: 8], x : ℝ[batch: B, 4]) -> ℝ[batch: B, c: 8] =
  let s = softmax(axis c, x · w)
  s + stop_grad(one_hot(argmax(axis c, x · w)) - s)
fn st_loss(w : ℝ[4, c: 8], x : ℝ[batch: B, 4], y : ℝ[batch: B, c: 8]) -> ℝ[] =
  mean((straight_through(w, x) - y)^2)
fn st_grad(w : ℝ[4, c: 8], x : ℝ[batch: B, 4], y : ℝ[batch: B, c: 8]) -> ℝ[4, c: 8] =
  grad(λ w. st_loss(w, x, y))(w)
fn half(x : ℝ[n: 5]) -> ℝ[n: 5] = x * stop_grad(x)
fn half_grad(x : ℝ[n: 5]) -> ℝ[n: 5] = grad(λ x. sum(half(x)))(x)
fn dropout(key : key, x : ℝ[batch: B, model: 4], keep : ℝ[]) -> ℝ[batch: B, model: 4]
    uses Rand =
  x * bernoulli(key, keep, batch: B, model: 4) / keep
fn draws(key : key) -> ℝ[n: 6] uses Rand = uniform(key, n: 6)
fn coin(key : key) -> ℝ[n: 6] uses Rand = bernoulli(key, 0.5, n: 6)
fn filled(x : ℝ[batch: B, model: 3]) -> ℝ[batch: B, model: 3] =
  x * ones(batch: B, model: 3) + zeros(model: 3) + sum(ones(n: 2)) + sum(zeros())
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    path = tmp_path_factory.mktemp("sg") / "sg.psk"
    path.write_text(PROGRAM)
    checked = check_file(str(path), None, SourceMap())
    assert [d.code for d in checked.diagnostics if d.is_error] == []
    ctx = Context()
    core = run_pipeline(RUN, str(path), ctx, start=Elaborated(checked.program), first="elab")
    return checked.program, core, path


def run(program, entry: str, **dims: int) -> dict:
    _, core, _ = program
    return json.loads(run_entry(core, None, entry, dims, as_json=True))


def f64(x) -> np.ndarray:
    return np.array(x, dtype=object).astype(float) if isinstance(x, list) else np.float64(x)


def test_grad_through_argmax_is_e3001_and_through_stop_grad_is_accepted(tmp_path):
    bad = tmp_path / "bad.psk"
    bad.write_text(
        PROGRAM.split("fn straight_through")[0] + "fn g(w : ℝ[4, c: 8], x : "
        "ℝ[batch: B, 4]) -> ℝ[4, c: 8] =\n  grad(λ w. hard(w, x))(w)\n"
    )
    assert [d.code for d in check_file(str(bad), None, SourceMap()).diagnostics] == ["E3001"]


def test_stop_grad_is_the_identity_with_a_zero_adjoint(program):
    out = run(program, "half_grad")
    x = f64(out["inputs"]["x"])
    np.testing.assert_array_equal(f64(out["result"]), x)  # d(x·c)/dx = c = x: half, not 2x
    value = run(program, "half")
    np.testing.assert_array_equal(f64(value["result"]), x * x)


def test_the_straight_through_gradient_is_pytorchs(program):
    out = run(program, "st_grad", B=3)
    w = torch.tensor(f64(out["inputs"]["w"]), requires_grad=True)
    x = torch.tensor(f64(out["inputs"]["x"]))
    y = torch.tensor(f64(out["inputs"]["y"]))
    logits = x @ w
    s = torch.softmax(logits, dim=1)
    h = torch.nn.functional.one_hot(logits.argmax(dim=1), 8).double()
    loss = ((s + (h - s).detach() - y) ** 2).mean()
    loss.backward()
    np.testing.assert_allclose(f64(out["result"]), w.grad.numpy(), rtol=1e-13, atol=1e-16)


def test_draws_are_the_random_modules(program):
    key = R.fold_in_name(R.root_key(0), "key")
    assert list(f64(run(program, "draws")["result"])) == list(R.uniform(key, 6))
    assert list(f64(run(program, "coin")["result"])) == list(R.bernoulli(key, 0.5, 6))
    assert set(R.bernoulli(key, 0.5, 6)) <= {0.0, 1.0}


def test_dropout_keeps_and_scales(program):
    out = run(program, "dropout", B=64)
    x = f64(out["inputs"]["x"])
    keep = float(f64(out["inputs"]["keep"]))
    key = R.fold_in_name(R.root_key(0), "key")
    mask = R.uniform(key, (64, 4)) < keep
    np.testing.assert_allclose(f64(out["result"]), np.where(mask, x / keep, 0.0), rtol=1e-15)


def test_bernoulli_is_exact_at_its_threshold():
    key = R.root_key(7)
    u = R.uniform(key, 100)
    for i in range(5):
        p = float(u[i])
        assert R.bernoulli(key, p, 100)[i] == 0.0  # u < p is false at u = p
        assert R.bernoulli(key, np.nextafter(p, 2), 100)[i] == 1.0
    assert R.bernoulli(key, 0, 4).sum() == 0 and R.bernoulli(key, 1, 4).sum() == 4
    assert R.bernoulli(key, float("nan"), 4).sum() == 0
    assert 4000 < R.bernoulli(key, 0.45, 10_000).sum() < 5000


def test_the_export_detaches_and_agrees_with_the_interpreter(program, tmp_path, monkeypatch):
    import importlib

    from presk_export import Options, export_pytorch

    elab, _, path = program
    notes: list = []
    files = export_pytorch(elab, Options(), notes=notes)
    # issue 29: the draws are exported with presk's Threefry in torch: nothing left out
    assert notes == [], notes
    assert all(f"def {f}(" in files["sg.py"] for f in ("dropout", "draws", "coin"))
    (tmp_path / "sg.py").write_text(files["sg.py"])
    assert "x * x.detach()" in files["sg.py"]
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("sg")
    out = run(program, "st_grad", B=3)
    w, x, y = (torch.tensor(f64(out["inputs"][n])) for n in ("w", "x", "y"))
    got = module.st_grad(w, x, y).numpy()
    np.testing.assert_allclose(got, f64(out["result"]), rtol=1e-12, atol=1e-15)
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # a draw is made in the default dtype
    try:
        for f in ("draws", "coin"):  # the interpreter's draws, bit for bit
            out = run(program, f, B=3)
            key = torch.tensor([int(w) for w in out["inputs"]["key"]])
            assert getattr(module, f)(key).numpy().tolist() == f64(out["result"]).tolist()
    finally:
        torch.set_default_dtype(dtype)


def test_the_kernel_lowering_elides_stop_grad(program):
    from presk_kernel.lower import HOST

    assert "stop_grad" in HOST


def test_zeros_and_ones_of_a_shape(program):
    out = run(program, "filled", B=2)
    np.testing.assert_array_equal(f64(out["result"]), f64(out["inputs"]["x"]) + 2)
