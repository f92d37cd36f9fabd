"""A scan over a symbolic number of steps (issue 29): `scan{T}` of a GRU along `time: T` and a
λ's linear recurrence along an axis that is not xs's first. The checker's goldens, the
interpreter against numpy loops (one program, two lengths), the gradients against torch's
autograd in both `--remat` forms (finite differences at 512 bits are presk-ad's
test_gradients), the kernel interpreter and the native backend bit for bit, the export's
conformance test."""

import json

import numpy as np
import pytest
from helpers import ROOT, export_passes_conformance, floats, presk, run_json

PROGRAM = "tests/check/programs/scan_n.psk"
GOLDEN = ROOT / "tests" / "check" / "golden"


def run(entry: str, t: int, *args) -> dict:
    dims = ("--dim", "B=2", "--dim", f"T={t}")
    return run_json(PROGRAM, entry, *dims, *args, env={"PRESK_VERIFY": "1"})


def test_the_summary_is_the_golden():
    done = presk("check", PROGRAM, "--summary")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (GOLDEN / "scan_n.summary.txt").read_text(encoding="utf-8")


def test_the_core_operation_is_the_golden():
    """`scan{T}` in PSK-Core, then its adjoint: a forward scan that stacks the carries and a
    reverse scan of the step's `.vjp`, both in T."""
    done = presk("dump", "--stage", "core-after-ad", PROGRAM)
    assert done.returncode == 0, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines() if "scan{" in line]
    assert lines == (GOLDEN / "scan_n.core.txt").read_text(encoding="utf-8").splitlines()


def sigmoid(v, lib=np):
    return 1 / (1 + lib.exp(-v))


def _gru(p, h, xs, lib=np):
    ys = []
    for x in xs:
        r = sigmoid(x @ p["wr"] + h @ p["ur"], lib)
        z = sigmoid(x @ p["wz"] + h @ p["uz"], lib)
        n = lib.tanh(x @ p["wn"] + r * (h @ p["un"]) + p["bn"])
        h = (1 - z) * n + z * h
        ys.append(h)
    return h, lib.stack(ys)


def _inputs(doc):
    i = doc["inputs"]
    return {k: floats(v) for k, v in i["θ"].items()}, floats(i["h0"]), floats(i["xs"])


@pytest.mark.parametrize("t", [1, 4])
def test_the_gru_is_a_numpy_loop(t):
    doc = run("run", t)
    h, ys = _gru(*_inputs(doc))
    got_h, got_ys = doc["result"]
    np.testing.assert_allclose(floats(got_h), h, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(floats(got_ys), ys, rtol=1e-13, atol=1e-15)
    assert floats(got_ys).shape == (t, 2, 3)


def test_a_linear_recurrence_is_its_closed_form():
    """c_k = Σ_{j ≤ k} a^(k − j) x_j, the outputs the carries each step starts from."""
    doc = run("linear", 5)
    a, xs = floats(doc["inputs"]["a"]), floats(doc["inputs"]["xs"])
    closed = [sum(a ** (k - j) * xs[:, j] for j in range(k + 1)) for k in range(5)]
    got_c, got_cs = doc["result"]
    np.testing.assert_allclose(floats(got_c), closed[-1], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(floats(got_cs), [np.zeros(2), *closed[:-1]], rtol=1e-13, atol=1e-15)


def _torch_grads(doc):
    torch = pytest.importorskip("torch")
    p, h0, xs = _inputs(doc)
    tp = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in p.items()}
    th0, txs = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (h0, xs))
    h, ys = _gru(tp, th0, txs, lib=torch)
    grads = torch.autograd.grad(h.sum() + (ys**2).mean(), (*tp.values(), th0, txs))
    return dict(zip(tp, grads, strict=False)), grads[-2].numpy(), grads[-1].numpy()


def _same_tree(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for k, g in want.items():
        np.testing.assert_allclose(floats(got[k]), g.numpy(), rtol=1e-12, atol=1e-15)


def test_the_gradients_are_torchs():
    doc = run("dloss", 3)
    dθ, dh0, dxs = _torch_grads(doc)
    _same_tree(doc["result"], dθ)
    np.testing.assert_allclose(floats(run("dloss_xs", 3)["result"]), dxs, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(floats(run("dloss_h0", 3)["result"]), dh0, rtol=1e-12, atol=1e-15)


def test_the_recomputing_form_is_torchs_too():
    doc = run("dloss", 2, "--remat", "recompute")
    _same_tree(doc["result"], _torch_grads(doc)[0])


def test_the_recurrences_gradients_are_torchs():
    torch = pytest.importorskip("torch")
    doc = run("dlin_xs", 4)
    a, xs = (torch.tensor(floats(doc["inputs"][k]), requires_grad=True) for k in ("a", "xs"))
    c, cs = torch.zeros(2, dtype=torch.float64), []
    for k in range(4):
        cs.append(c)
        c = a * c + xs[:, k]
    ga, gxs = torch.autograd.grad(torch.sin(c).sum() + (torch.stack(cs) ** 2).sum(), (a, xs))
    np.testing.assert_allclose(floats(doc["result"]), gxs.numpy(), rtol=1e-12, atol=1e-15)
    got_a = floats(run("dlin_a", 4)["result"])
    np.testing.assert_allclose(got_a, ga.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("entry", ["dloss", "dlin_xs"])
def test_native_is_the_kernel_interpreter_bit_for_bit(entry):
    kernel = run(entry, 3, "--backend", "kernel")
    assert run(entry, 3, "--backend", "native")["result"] == kernel["result"]


def test_the_export_passes_its_conformance_test(tmp_path):
    export_passes_conformance(PROGRAM, "total", tmp_path, "--dim=B=2", "--dim=T=3")


def test_the_export_runs_a_scan_of_no_step(tmp_path):
    """T = 0: the exported loop runs no step, the outputs zeros of shape (0, B, H) (not
    `torch.stack([])`), the carry h0 itself; the conformance documents keep the empty
    tensors' shapes (`empty`), which their nested lists lose."""
    export_passes_conformance(PROGRAM, "run", tmp_path, "--dim=B=2", "--dim=T=0")
    expected = json.loads((tmp_path / "conformance" / "expected.json").read_text())
    assert expected["empty"] == [[["result", 1], [0, 2, 3], "float64"]]


PREFIX = """dim T
dim U
fn along_t(a : ℝ[..., b: 2], xs : ℝ[..., b: 2, time: T])
    -> (ℝ[..., b: 2], ℝ[..., time: T, b: 2]) =
  scan(λ c x. (a * c + x, c), a, xs, axis time)
fn along_u(a : ℝ[..., b: 2], xs : ℝ[..., u: U, b: 2]) -> (ℝ[..., b: 2], ℝ[..., u: U, b: 2]) =
  scan(λ c x. (c + x, a * c), a, xs, axis u)
fn f(a : ℝ[n: 3, b: 2], xs : ℝ[n: 3, b: 2, time: T], zs : ℝ[n: 3, u: U, b: 2])
    -> ((ℝ[n: 3, b: 2], ℝ[n: 3, time: T, b: 2]), (ℝ[n: 3, b: 2], ℝ[n: 3, u: U, b: 2])) =
  (along_t(a, xs), along_u(a, zs))
"""


def test_a_scan_under_an_open_prefix_exports_at_no_step_and_at_two(tmp_path):
    """The outputs' new axis stands after an open prefix (n: 3 here), in the interpreter and
    in the export (`torch.stack(ys, -2)`), at two steps (U) and at none (T: zeros of shape
    3 × 0 × 2, the prefix's lengths xs's)."""
    program = tmp_path / "prefix.psk"
    program.write_text(PREFIX, encoding="utf-8")
    doc = run_json(program, "f", "--dim", "T=0", "--dim", "U=2")
    (_, ys), (_, zs) = doc["result"]
    assert (np.shape(floats(ys)), np.shape(floats(zs))) == ((3, 0), (3, 2, 2))
    export_passes_conformance(program, "f", tmp_path / "export", "--dim=T=0", "--dim=U=2")
    expected = json.loads((tmp_path / "export" / "conformance" / "expected.json").read_text())
    assert expected["empty"] == [[["result", 0, 1], [3, 0, 2], "float64"]]
