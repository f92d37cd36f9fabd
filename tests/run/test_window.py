"""Slices `x[a: i .. j]` and `pad(x[, c], axis a, before: i, after: j)` (issue 29): the
checker's goldens, the interpreter against numpy, the gradients against torch (float64
autograd; finite differences at 512 bits are presk-ad's test_gradients), the kernel
interpreter and the native backend bit for bit, the PyTorch export's conformance test."""

import functools

import numpy as np
import pytest
from helpers import ROOT, export_passes_conformance, floats, presk, run_json

PROGRAM = "tests/check/programs/window.psk"
GOLDEN = ROOT / "tests" / "check" / "golden"
DIMS = ("--dim", "B=2", "--dim", "T=4", "--dim", "C=3", "--dim", "O=2")


@functools.cache
def run(entry: str, *args) -> dict:
    """`presk run --json` of `entry`, once (the values' tests and the bit-for-bit tests read
    the same interpreter runs); a document the tests read, never change."""
    return run_json(PROGRAM, entry, *DIMS, *args, env={"PRESK_VERIFY": "1"})


def test_the_summary_is_the_golden():
    done = presk("check", PROGRAM, "--summary")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (GOLDEN / "window.summary.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["bad_window", "bad_slice_name"])
def test_the_misuses_are_the_golden(name):
    done = presk("check", f"programs/{name}.psk", cwd="tests/check")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")


def _conv3(x, w0, w1, w2):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    t = x.shape[-1]
    return sum(np.einsum("bcs,co->bos", xp[..., k : k + t], w) for k, w in enumerate((w0, w1, w2)))


def test_the_windows_are_numpys():
    doc = run("shifted")
    np.testing.assert_array_equal(floats(doc["result"]), floats(doc["inputs"]["x"])[:, 1:5])
    doc = run("corner")
    np.testing.assert_array_equal(floats(doc["result"]), floats(doc["inputs"]["x"])[:1, 4:6])
    doc = run("padded")
    x, c = floats(doc["inputs"]["x"]), float(doc["inputs"]["c"])
    want = np.pad(x, ((0, 0), (2, 1)), constant_values=c)
    np.testing.assert_array_equal(floats(doc["result"]), want)
    doc = run("zeroed", "--dim", "a=2")
    x = floats(doc["inputs"]["x"])
    np.testing.assert_array_equal(floats(doc["result"]), np.pad(x, ((0, 0), (1, 0))))
    doc = run("steps")
    x = floats(doc["inputs"]["x"])
    np.testing.assert_allclose(floats(doc["result"]), np.diff(x, axis=1), rtol=1e-15, atol=0)
    doc = run("mask_window")
    assert doc["result"] == doc["inputs"]["m"][1:]
    doc = run("conv3")
    ins = [floats(doc["inputs"][k]) for k in ("x", "w0", "w1", "w2")]
    np.testing.assert_allclose(floats(doc["result"]), _conv3(*ins), rtol=1e-13, atol=1e-14)


def test_the_gradients_are_torchs():
    torch = pytest.importorskip("torch")
    doc = run("dloss")
    x = torch.tensor(floats(doc["inputs"]["x"]), dtype=torch.float64, requires_grad=True)
    c = torch.tensor(float(doc["inputs"]["c"]), dtype=torch.float64, requires_grad=True)
    padded = torch.cat([c.expand(2, 2), x, c.expand(2, 1)], dim=1)
    loss = (torch.tanh(padded) ** 2).sum() + ((x[:, 1:] - x[:, :-1]) ** 2).sum()
    gx, gc = torch.autograd.grad(loss, (x, c))
    np.testing.assert_allclose(floats(doc["result"]), gx.numpy(), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(float(run("dloss_c")["result"]), gc.item(), rtol=1e-13)
    doc = run("dconv")
    ins = [
        torch.tensor(floats(doc["inputs"][k]), dtype=torch.float64, requires_grad=True)
        for k in ("x", "w0", "w1", "w2")
    ]
    weight = torch.stack([w.T for w in ins[1:]], dim=-1)  # [out, ch, k]
    y = torch.nn.functional.conv1d(ins[0], weight, padding=1)
    gx, gw1 = torch.autograd.grad(torch.tanh(y).sum(), (ins[0], ins[2]))
    np.testing.assert_allclose(floats(doc["result"]), gx.numpy(), rtol=1e-12, atol=1e-14)
    got = floats(run("dconv_w1")["result"])
    np.testing.assert_allclose(got, gw1.numpy(), rtol=1e-12, atol=1e-14)


ENTRIES = ["shifted", "corner", "padded", "steps", "mask_window", "conv3", "loss", "dloss",
           "dloss_c", "dconv", "dconv_w1"]  # fmt: skip


@pytest.mark.parametrize("entry", ENTRIES)
def test_native_is_the_kernel_interpreter_bit_for_bit(entry):
    kernel = run(entry, "--backend", "kernel")
    native = run(entry, "--backend", "native")
    assert native["result"] == kernel["result"]
    exact = run(entry)["result"]
    if entry == "mask_window":
        assert kernel["result"] == exact
        return
    np.testing.assert_allclose(floats(kernel["result"]), floats(exact), rtol=1e-13, atol=1e-13)


def test_native_f32_is_the_kernel_interpreter_bit_for_bit():
    kernel = run("dconv", "--backend", "kernel", "--realize", "f32")
    native = run("dconv", "--backend", "native", "--realize", "f32")
    assert native["result"] == kernel["result"]


@pytest.mark.parametrize("entry", ["dloss", "dloss_c", "dconv_w1", "zeroed"])
def test_the_export_passes_its_conformance_test(tmp_path, entry):
    dims = [f"--dim={d}" for d in DIMS[1::2]] + (["--dim=a=2"] if entry == "zeroed" else [])
    export_passes_conformance(PROGRAM, entry, tmp_path, *dims)
