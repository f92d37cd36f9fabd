"""`scan(f, c, xs, axis t)` (issue 29): a recurrent cell along `time`. The checker's goldens,
the interpreter against a numpy loop, the gradients (in the parameters and in xs) against
torch's autograd through the same loop (finite differences at 512 bits are presk-ad's
test_gradients), the kernel interpreter and the native backend bit for bit, the export's
conformance test."""

import numpy as np
import pytest
from helpers import ROOT, export_passes_conformance, floats, presk, run_json

PROGRAM = "tests/check/programs/scan.psk"
GOLDEN = ROOT / "tests" / "check" / "golden"
DIMS = ("--dim", "B=2")


def run(entry: str, *args) -> dict:
    return run_json(PROGRAM, entry, *DIMS, *args, env={"PRESK_VERIFY": "1"})


def test_the_summary_is_the_golden():
    done = presk("check", PROGRAM, "--summary")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (GOLDEN / "scan.summary.txt").read_text(encoding="utf-8")


def test_the_misuses_are_the_golden():
    done = presk("check", "programs/bad_scan.psk", cwd="tests/check")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (GOLDEN / "bad_scan.txt").read_text(encoding="utf-8")


def _inputs(doc):
    i = doc["inputs"]
    return floats(i["θ"]["wx"]), floats(i["θ"]["wh"]), floats(i["h0"]), floats(i["xs"])


def _loop(wx, wh, h, xs, lib=np):
    ys = []
    for x in xs:
        h = lib.tanh(x @ wx + h @ wh)
        ys.append(h)
    return h, lib.stack(ys)


def test_the_scan_is_a_numpy_loop():
    doc = run("run")
    h, ys = _loop(*_inputs(doc))
    got_h, got_ys = doc["result"]
    np.testing.assert_allclose(floats(got_h), h, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(floats(got_ys), ys, rtol=1e-13, atol=1e-15)


def test_a_lambda_step_is_a_numpy_loop():
    doc = run("running")
    h, xs, w = (floats(doc["inputs"][k]) for k in ("h", "xs", "w"))
    ys = []
    for x in xs:
        ys.append(np.sin(h))
        h = h + x @ w
    got_h, got_ys = doc["result"]
    np.testing.assert_allclose(floats(got_h), h, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(floats(got_ys), np.stack(ys), rtol=1e-13, atol=1e-15)


def test_the_gradients_are_torchs():
    torch = pytest.importorskip("torch")
    doc = run("dloss")
    wx, wh, h0, xs = (
        torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in _inputs(doc)
    )
    h, ys = _loop(wx, wh, h0, xs, lib=torch)
    gx, gh, gxs = torch.autograd.grad(h.sum() + (ys**2).mean(), (wx, wh, xs))
    got = doc["result"]
    np.testing.assert_allclose(floats(got["wx"]), gx.numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(floats(got["wh"]), gh.numpy(), rtol=1e-12, atol=1e-15)
    got_xs = floats(run("dloss_xs")["result"])
    np.testing.assert_allclose(got_xs, gxs.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("entry", ["run", "dloss", "dloss_xs", "running"])
def test_native_is_the_kernel_interpreter_bit_for_bit(entry):
    kernel = run(entry, "--backend", "kernel")
    assert run(entry, "--backend", "native")["result"] == kernel["result"]


@pytest.mark.parametrize("entry", ["run", "dloss_xs"])
def test_the_export_passes_its_conformance_test(tmp_path, entry):
    export_passes_conformance(PROGRAM, entry, tmp_path, "--dim=B=2")
