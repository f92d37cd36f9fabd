"""Reaching a sub-module's parameters (issue 29): `θ.l1.w` from outside the module, `l1.w`
inside it, `θ.l1` as a subtree. The checker's goldens, the interpreter against numpy, the
gradient against its closed form and against finite differences of the interpreter (θ
perturbed through `presk run --weights`), native and the kernel interpreter bit for bit,
the PyTorch export's conformance test."""

from fractions import Fraction

import numpy as np
import pytest
from helpers import ROOT, conformance_passes, floats, presk, presk_ok, run_json

PROGRAM = "tests/check/programs/submodule.psk"
GOLDEN = ROOT / "tests" / "check" / "golden"
PATHS = ["l1.w", "l1.b", "l2.w", "l2.b"]


def run(entry: str, *args) -> dict:
    return run_json(PROGRAM, entry, *args, env={"PRESK_VERIFY": "1"})


def test_the_summary_is_the_golden():
    done = presk("check", PROGRAM, "--summary")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (GOLDEN / "submodule.summary.txt").read_text(encoding="utf-8")


def test_the_misuses_are_the_golden():
    done = presk("check", "programs/bad_submodule.psk", cwd="tests/check")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (GOLDEN / "bad_submodule.txt").read_text(encoding="utf-8")


def test_the_penalty_reads_the_layers_tensors():
    doc = run("penalty")
    θ = {p: floats(v) for p, v in doc["inputs"]["θ"].items()}
    want = np.sum(θ["l1.w"] ** 2) + np.sum(θ["l2.b"])
    assert float(doc["result"]) == pytest.approx(want, rel=1e-15)
    first = run("first")
    assert first["result"] == {"w": first["inputs"]["θ"]["l1.w"], "b": first["inputs"]["θ"]["l1.b"]}
    again = run("again", "--dim", "B=3")
    θ = {p: floats(v) for p, v in again["inputs"]["θ"].items()}
    x = floats(again["inputs"]["x"])
    np.testing.assert_allclose(floats(again["result"]), x @ θ["l1.w"] + θ["l1.b"], rtol=1e-14)


def test_the_penalty_differentiates_to_two_w_and_one():
    doc = run("dpen")
    θ = {p: floats(v) for p, v in doc["inputs"]["θ"].items()}
    g = {p: floats(v) for p, v in doc["result"].items()}
    assert list(g) == PATHS
    np.testing.assert_array_equal(g["l1.w"], 2 * θ["l1.w"])  # 2w is exact
    np.testing.assert_array_equal(g["l2.b"], np.ones(1))
    assert not g["l1.b"].any() and not g["l2.w"].any()


def _checkpoint(path, θ: dict) -> None:
    from presk_core.data import write_tree

    write_tree(str(path), "params MLP", [θ[p] for p in PATHS], PATHS)


def test_finite_differences_of_the_loss_agree_with_its_gradient(tmp_path):
    """θ as doubles in a checkpoint, one coordinate moved by a step the doubles hold exactly;
    the loss at 512 bits through `presk run --weights`."""
    doc = run("dloss", "--dim", "B=4", "--bits", 512)
    θ = {p: floats(v) for p, v in doc["inputs"]["θ"].items()}
    args = ("--dim", "B=4", "--bits", 512)
    base = tmp_path / "base.psk.d"
    _checkpoint(base, θ)
    for path, index in [("l1.w", (0, 1)), ("l2.w", (2, 0)), ("l1.b", (3,))]:
        losses = []
        for sign in (1, -1):
            moved = {p: v.copy() for p, v in θ.items()}
            moved[path][index] += sign * 2.0**-24
            ckpt = tmp_path / f"{path}{sign}.psk.d"
            _checkpoint(ckpt, moved)
            losses.append(Fraction(run("loss", *args, "--weights", ckpt)["result"]))
        step = Fraction(θ[path][index] + 2.0**-24) - Fraction(θ[path][index] - 2.0**-24)
        fd = (losses[0] - losses[1]) / step
        got = Fraction(np.array(doc["result"][path], dtype=object)[index])
        assert abs(fd - got) <= Fraction(1, 10**9) * (1 + abs(got)), (path, float(fd), float(got))
    assert run("loss", *args, "--weights", base)["result"] == run("loss", *args)["result"]


ENTRIES = [
    ("penalty", ()),
    ("loss", ("--dim", "B=5")),
    ("first", ()),
    ("again", ("--dim", "B=5")),
    ("dpen", ()),
    ("dloss", ("--dim", "B=5")),
]


@pytest.mark.parametrize(("entry", "args"), ENTRIES, ids=[e for e, _ in ENTRIES])
def test_native_is_the_kernel_interpreter_bit_for_bit(entry, args):
    kernel = run(entry, *args, "--backend", "kernel")
    native = run(entry, *args, "--backend", "native")
    assert native["result"] == kernel["result"]
    exact = run(entry, *args)["result"]
    if isinstance(exact, dict):
        for p in exact:
            np.testing.assert_allclose(floats(kernel["result"][p]), floats(exact[p]), rtol=1e-13)
    else:
        np.testing.assert_allclose(floats(kernel["result"]), floats(exact), rtol=1e-13)


def test_the_export_passes_its_conformance_test(tmp_path):
    args = ["export", PROGRAM, "--target", "pytorch", "--conformance-entry", "loss"]
    presk_ok(*args, "--dim=B=3", "-o", tmp_path)
    text = (tmp_path / "submodule.py").read_text()
    assert "(θ.l1.w**2).sum() + θ.l2.b.sum()" in text  # outside: the module's attributes
    assert "(self.l1.w**2).sum()" in text  # inside
    conformance_passes(tmp_path)


def test_the_gradient_is_torchs():
    """The same loss written in torch (float64), differentiated by autograd."""
    torch = pytest.importorskip("torch")
    doc = run("dloss", "--dim", "B=6")
    θ = {p: torch.tensor(floats(v), requires_grad=True) for p, v in doc["inputs"]["θ"].items()}
    x = torch.tensor(floats(doc["inputs"]["x"]))
    hidden = torch.relu(x @ θ["l1.w"] + θ["l1.b"])
    y = hidden @ θ["l2.w"] + θ["l2.b"]
    penalty = (θ["l1.w"] ** 2).sum() + θ["l2.b"].sum()
    loss = (y**2).mean() + penalty / 100 + (θ["l1.w"] ** 2).sum()
    loss.backward()
    for p in PATHS:
        np.testing.assert_allclose(floats(doc["result"][p]), θ[p].grad.numpy(), rtol=1e-12,
                                   atol=1e-14)  # fmt: skip
