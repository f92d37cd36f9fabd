"""`conv(x, w, axis t[, axis g…], dilation:, before:, after:)` over a named axis (issue 29),
written by the checker as pad, crops and eins: the checker's goldens, the values against
torch's F.conv1d (dilation, padding, groups, depthwise) in float64, the gradients in x and w
against torch's autograd (finite differences at 512 bits are presk-ad's test_gradients),
the kernel interpreter and the native backend bit for bit, the export's conformance and
each convolution exported as one F.conv1d (any axis order, groups, dilation, stride)."""

import functools

import numpy as np
import pytest
from helpers import ROOT, export_passes_conformance, floats, presk, run_json

torch = pytest.importorskip("torch")
F = torch.nn.functional

PROGRAM = "tests/check/programs/conv.psk"
GOLDEN = ROOT / "tests" / "check" / "golden"
DIMS = ("--dim", "B=2", "--dim", "T=6")


@functools.cache
def run(entry: str, *args) -> dict:
    """`presk run --json` of `entry`, once (the values' tests and the bit-for-bit tests read
    the same interpreter runs); a document the tests read, never change."""
    return run_json(PROGRAM, entry, *DIMS, *args, env={"PRESK_VERIFY": "1"})


def tensors(doc, *names):
    return [torch.tensor(floats(doc["inputs"][n]), dtype=torch.float64) for n in names]


def test_the_summary_is_the_golden():
    done = presk("check", PROGRAM, "--summary")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (GOLDEN / "conv.summary.txt").read_text(encoding="utf-8")


def test_the_misuses_are_the_golden():
    done = presk("check", "programs/bad_conv.psk", cwd="tests/check")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (GOLDEN / "bad_conv.txt").read_text(encoding="utf-8")


def close(doc, want):
    got = floats(doc["result"])
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-13, atol=1e-14)


def test_the_convolutions_are_torchs():
    doc = run("valid")
    x, w = tensors(doc, "x", "w")
    close(doc, F.conv1d(x, w))
    doc = run("dilated")
    x, w = tensors(doc, "x", "w")
    close(doc, F.conv1d(x, w, padding=2, dilation=2))
    doc = run("depthwise")
    x, w = tensors(doc, "x", "w")
    close(doc, F.conv1d(F.pad(x, (1, 0)), w[:, None, :], groups=3))
    doc = run("grp")
    x, w = tensors(doc, "x", "w")
    y = F.conv1d(x.reshape(2, 4, 6), w.reshape(6, 2, 3), groups=2)
    close(doc, y.reshape(2, 2, 3, 4))
    doc = run("moved")  # x (seq, ch, batch), w (seq, out, ch)
    x, w = tensors(doc, "x", "w")
    close(doc, F.conv1d(F.pad(x.permute(2, 1, 0), (1, 0)), w.permute(1, 2, 0)))
    doc = run("gmoved")  # x (ch, batch, g, seq), w (ch, g, seq, out): groups g
    x, w = tensors(doc, "x", "w")
    xs = x.permute(1, 2, 0, 3).reshape(2, 4, 6)
    y = F.conv1d(xs, w.permute(1, 3, 0, 2).reshape(6, 2, 3), groups=2)
    close(doc, y.reshape(2, 2, 3, 4))


@pytest.mark.parametrize("wrt", ["x", "w"])
def test_the_gradients_are_torchs(wrt):
    doc = run(f"dloss_{wrt}")
    x, w = (t.requires_grad_() for t in tensors(doc, "x", "w"))
    y = F.conv1d(F.pad(x, (2, 1)), w, dilation=2)
    (g,) = torch.autograd.grad(torch.tanh(y).sum(), (x if wrt == "x" else w,))
    close(doc, g)


def test_the_grouped_gradient_is_torchs():
    doc = run("dgloss_w")
    x, w = tensors(doc, "x", "w")
    w.requires_grad_()
    y = F.conv1d(x.reshape(2, 4, 6), w.reshape(6, 2, 3), groups=2)
    (g,) = torch.autograd.grad(torch.sin(y).sum(), (w,))
    close(doc, g)


def test_a_stride_is_torchs():
    doc = run("strided")
    x, w = tensors(doc, "x", "w")
    close(doc, F.conv1d(x, w, stride=2, padding=1))
    for wrt in ("x", "w"):
        doc = run(f"dsloss_{wrt}")
        x, w = (t.requires_grad_() for t in tensors(doc, "x", "w"))
        y = F.conv1d(x, w, stride=2, padding=1)
        (g,) = torch.autograd.grad(torch.tanh(y).sum(), (x if wrt == "x" else w,))
        close(doc, g)


ENTRIES = ["valid", "dilated", "depthwise", "grp", "dloss_x", "dloss_w", "dgloss_w", "dsloss_w"]


@pytest.mark.parametrize("entry", ENTRIES)
def test_native_is_the_kernel_interpreter_bit_for_bit(entry):
    kernel = run(entry, "--backend", "kernel")
    assert run(entry, "--backend", "native")["result"] == kernel["result"]
    exact = floats(run(entry)["result"])
    np.testing.assert_allclose(floats(kernel["result"]), exact, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("entry", ["dilated", "dloss_w", "both"])
def test_the_export_passes_its_conformance_test(tmp_path, entry):
    export_passes_conformance(PROGRAM, entry, tmp_path, "--dim=B=2", "--dim=T=6")


CONVS = ["valid", "dilated", "depthwise", "grp", "loss", "strided", "moved", "gmoved"]


def test_the_export_writes_each_convolution_as_one_conv1d(tmp_path):
    presk("export", PROGRAM, "--target", "pytorch", "-o", tmp_path)
    (code,) = tmp_path.glob("*.py")
    text = code.read_text(encoding="utf-8")
    bodies = {b.split("(", 1)[0]: b for b in text.split("\ndef ")[1:]}
    for name in CONVS:
        assert bodies[name].count("F.conv1d(") == 1, bodies[name]
        assert "einsum" not in bodies[name] and "narrow" not in bodies[name], bodies[name]
    assert "stride=2" in bodies["strided"] and "dilation=2" in bodies["dilated"]
    assert "groups=3" in bodies["depthwise"] and "groups=2" in bodies["gmoved"]
