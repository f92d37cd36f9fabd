"""`top_k(axis a, x, k: K)` and `take` with indices of an axis x lacks (issue 29): the checker's goldens, the interpreter against numpy's
stable sort (ties to the first index, signed zeros and argmax's order), the gradient of the
values against torch's autograd (finite differences at 512 bits are presk-ad's
test_gradients), the kernel interpreter and the native backend bit for bit, the export's
conformance (its indices in presk's order, which torch.topk does not promise)."""

import numpy as np
import pytest
from helpers import ROOT, export_passes_conformance, floats, presk, run_json

torch = pytest.importorskip("torch")

PROGRAM = "tests/check/programs/top_k.psk"
GOLDEN = ROOT / "tests" / "check" / "golden"
DIMS = ("--dim", "B=3", "--dim", "N=7")


def run(entry: str, *args) -> dict:
    return run_json(PROGRAM, entry, *DIMS, *args, env={"PRESK_VERIFY": "1"})


def test_the_summary_is_the_golden():
    done = presk("check", PROGRAM, "--summary")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (GOLDEN / "top_k.summary.txt").read_text(encoding="utf-8")


def test_the_misuses_are_the_golden():
    done = presk("check", "programs/bad_top_k.psk", cwd="tests/check")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (GOLDEN / "bad_top_k.txt").read_text(encoding="utf-8")


def largest(x: np.ndarray, axis: int, k: int) -> np.ndarray:
    """numpy's oracle: a stable sort of -x (ties keep the first index first), the first k."""
    return np.take(np.argsort(-x, axis=axis, kind="stable"), np.arange(k), axis=axis)


def test_the_values_and_indices_are_numpys():
    doc = run("best")
    x = floats(doc["inputs"]["x"])
    values, ids = doc["result"]
    want = largest(x, 1, 2)
    assert np.array(ids).tolist() == want.tolist()
    assert floats(values).tolist() == np.take_along_axis(x, want, 1).tolist()
    doc = run("which")
    x = floats(doc["inputs"]["x"])
    assert np.array(doc["result"]).tolist() == largest(x, 0, 7).tolist()
    assert all(run("first")["result"])  # k: 1 is argmax's index


def test_take_with_indices_of_another_axis_is_numpys_take_along_axis():
    doc = run("gather")
    x, ids = floats(doc["inputs"]["x"]), np.array(doc["inputs"]["ids"])
    assert floats(doc["result"]).tolist() == np.take_along_axis(x, ids, 1).tolist()


def test_ties_go_to_the_first_index_and_plus_zero_above_minus_zero():
    assert run("order")["result"] == [[3, 4, 5, 0, 1, 2], [2, 3, 0, 1]]


def test_the_gradient_is_torchs():
    doc = run("dloss")
    x, w = (torch.tensor(floats(doc["inputs"][n]), dtype=torch.float64) for n in "xw")
    x.requires_grad_()
    v = torch.topk(x, 3, dim=0).values  # no ties in the drawn x: torch's order is ours
    (g,) = torch.autograd.grad((w * torch.tanh(v)).sum(), (x,))
    np.testing.assert_allclose(floats(doc["result"]), g.numpy(), rtol=1e-13, atol=1e-14)
    assert np.count_nonzero(floats(doc["result"])) == 9  # 3 of 7 in each of 3 columns


ENTRIES = ["best", "mix"]  # mix: the gradient, both orders, a gather


@pytest.mark.parametrize("entry", ENTRIES)
def test_native_is_the_kernel_interpreter_bit_for_bit(entry):
    kernel = run(entry, "--backend", "kernel")
    assert run(entry, "--backend", "native")["result"] == kernel["result"]
    exact = run(entry)["result"]
    if entry == "mix":  # the gradient's reals within rounding, the orders exactly
        np.testing.assert_allclose(floats(kernel["result"][0]), floats(exact[0]), rtol=1e-13)
        assert kernel["result"][3] == exact[3]  # a gather moves bits
        kernel, exact = kernel["result"][1:3], exact[1:3]
        assert kernel == exact == [[3, 4, 5, 0, 1, 2], [2, 3, 0, 1]]
    else:
        assert kernel["result"] == exact


def test_the_export_passes_its_conformance_test(tmp_path):
    export_passes_conformance(PROGRAM, "mix", tmp_path, "--dim=B=3", "--dim=N=7")
