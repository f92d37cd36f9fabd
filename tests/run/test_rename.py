"""Renaming an axis in an ascription (issue 29): `(x : ℝ[src: N])` of an `x : ℝ[dst: N]`.
The checker's goldens, the interpreter against numpy, the gradient against its closed form,
finite differences and torch's autograd, the kernel interpreter and the native backend bit for bit, the
PyTorch export's conformance test."""

import gmpy2
import numpy as np
import pytest
from helpers import ROOT, export_passes_conformance, floats, presk, run_json

PROGRAM = "tests/check/programs/rename.psk"
GOLDEN = ROOT / "tests" / "check" / "golden"
DIMS = ("--dim", "B=2", "--dim", "T=3")


def run(entry: str, *args) -> dict:
    return run_json(PROGRAM, entry, *args, env={"PRESK_VERIFY": "1"})


def test_the_summary_is_the_golden():
    done = presk("check", PROGRAM, "--summary")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (GOLDEN / "rename.summary.txt").read_text(encoding="utf-8")


def test_the_misuses_are_the_golden():
    done = presk("check", "programs/bad_rename.psk", cwd="tests/check")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (GOLDEN / "bad_rename.txt").read_text(encoding="utf-8")


def test_lengths_are_proved_equal_within_the_bounds(tmp_path):
    src = "dim 1 <= N <= 4\ndim M <= 4\nfn f(x : ℝ[a: N]) = (x : ℝ[b: M])\n"
    (tmp_path / "b.psk").write_text(src)
    done = presk("check", "b.psk", cwd=tmp_path)
    assert done.returncode == 1 and "differ for N = 1, M = 0" in done.stderr
    (tmp_path / "c.psk").write_text("fn f{N : dim}(x : ℝ[a: 2*N]) = (x : ℝ[b: N + N])\n")
    assert presk("check", "c.psk", cwd=tmp_path).returncode == 0


def test_the_renamed_keys_give_numpys_scores():
    doc = run("scores", *DIMS)
    x = floats(doc["inputs"]["x"])
    want = np.einsum("bsm,btm->bst", x, x)
    np.testing.assert_allclose(floats(doc["result"]), want, rtol=1e-14, atol=1e-14)
    named = run("named")
    assert named["result"] == named["inputs"]["x"]  # the same data, named


def test_the_gradient_is_four_s_x_and_finite_differences_agree():
    doc = run("dloss", *DIMS)
    x = floats(doc["inputs"]["x"])
    s = np.einsum("bsm,btm->bst", x, x)
    np.testing.assert_allclose(floats(doc["result"]), 4 * np.einsum("bst,btm->bsm", s, x),
                               rtol=1e-12)  # fmt: skip
    exact = run("dloss", *DIMS, "--bits", 512)
    with gmpy2.context(precision=512):
        xs = np.array(exact["inputs"]["x"], dtype=object)
        xs = np.vectorize(gmpy2.mpfr, otypes=[object])(xs)
        h = gmpy2.mpfr(2) ** -100

        def loss(v):
            sc = np.einsum("bsm,btm->bst", v, v)  # object arrays: exact at 512 bits
            return sum((e * e for e in sc.ravel()), gmpy2.mpfr(0))

        for index in [(0, 0, 0), (1, 2, 3), (0, 1, 2)]:
            up, down = xs.copy(), xs.copy()
            up[index] += h
            down[index] -= h
            fd = (loss(up) - loss(down)) / (2 * h)
            got = gmpy2.mpfr(np.array(exact["result"], dtype=object)[index])
            assert abs(fd - got) <= gmpy2.mpfr(2) ** -150 * (1 + abs(got)), index


def test_the_gradient_is_torchs():
    torch = pytest.importorskip("torch")
    doc = run("dloss", *DIMS)
    x = torch.tensor(floats(doc["inputs"]["x"]), dtype=torch.float64, requires_grad=True)
    s = torch.einsum("bsm,btm->bst", x, x)  # the keys renamed seq -> seq2 are x again
    (g,) = torch.autograd.grad((s**2).sum(), (x,))
    np.testing.assert_allclose(floats(doc["result"]), g.numpy(), rtol=1e-13, atol=1e-13)


ENTRIES = [
    ("scores", DIMS),
    ("named", ()),
    ("shifted", ("--dim", "N=4")),
    ("picks", DIMS),
    ("loss", DIMS),
    ("dloss", DIMS),
]


@pytest.mark.parametrize(("entry", "args"), ENTRIES, ids=[e for e, _ in ENTRIES])
def test_native_is_the_kernel_interpreter_bit_for_bit(entry, args):
    kernel = run(entry, *args, "--backend", "kernel")
    native = run(entry, *args, "--backend", "native")
    assert native["result"] == kernel["result"]
    exact = run(entry, *args)["result"]
    np.testing.assert_allclose(floats(kernel["result"]), floats(exact), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("entry", ["scores", "dloss"])
def test_the_export_passes_its_conformance_test(tmp_path, entry):
    export_passes_conformance(PROGRAM, entry, tmp_path, "--dim=B=2", "--dim=T=3")
