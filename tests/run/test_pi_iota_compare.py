"""The constant π, `iota(n: T)` and comparisons of indices (issue 29), through every stage:
the checker's goldens, the interpreter against mpmath and numpy, gradients against their
closed forms and torch's autograd, the kernel interpreter and the native backend bit for
bit, and the PyTorch export's conformance test."""

import functools
import json
import math
from pathlib import Path

import gmpy2
import mpmath
import numpy as np
import pytest
from helpers import ROOT, export_passes_conformance, presk, presk_ok, run_json

PROGRAM = "tests/check/programs/pi_iota.psk"
GOLDEN = ROOT / "tests" / "check" / "golden"


@functools.cache
def run(entry: str, *args) -> dict:
    """`presk run --json` of `entry`, once: the oracles' tests run each entry at the sizes the
    bit-for-bit tests give it (ENTRIES: odd sizes, a vector's tail), so that those tests find
    the interpreter's run done; a document the tests read, never change."""
    return run_json(PROGRAM, entry, *args)


def exact(text: str, bits: int) -> gmpy2.mpfr:
    """A JSON real (80 digits: more than 256 bits need) read back at `bits`."""
    with gmpy2.context(precision=bits):
        return gmpy2.mpfr(text)


# ---- the checker -------------------------------------------------------------------------


def test_the_summary_is_the_golden():
    done = presk("check", PROGRAM, "--summary")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (GOLDEN / "pi_iota.summary.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["bad_pi_iota", "bad_iota", "bad_pi_const", "bad_pi_call"])
def test_the_misuses_are_the_goldens(name):
    done = presk("check", f"programs/{name}.psk", cwd="tests/check")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")


def test_a_name_of_the_program_hides_pi(tmp_path):
    (tmp_path / "p.psk").write_text("fn f(pi : ℝ[n: 2]) -> ℝ[n: 2] = pi * 2\n")
    doc = json.loads(presk_ok("run", "p.psk", "--entry", "f", "--json", cwd=tmp_path).stdout)
    x = [float(v) for v in doc["inputs"]["pi"]]
    assert [float(v) for v in doc["result"]] == [2 * v for v in x]


# ---- the interpreter against outside oracles ---------------------------------------------


@pytest.mark.parametrize("bits", [24, 53, 113, 256, 1000])
def test_pi_is_const_pi_correctly_rounded(bits):
    got = run("tau", "--bits", bits)["result"]
    mpmath.mp.prec = bits + 40
    digits = mpmath.nstr(2 * mpmath.pi, bits // 3 + 30, strip_zeros=False)
    with gmpy2.context(precision=bits):
        want = gmpy2.mpfr(digits)  # mpmath's 2π, rounded once to `bits`
    if bits > 256:  # the JSON has 80 digits: compare what they hold
        assert abs(exact(got, bits) - want) <= want * gmpy2.mpfr(10) ** -78
    else:
        assert exact(got, bits) == want
    with gmpy2.context(precision=bits):  # a near miss the test must refuse: 2π at bits - 1
        near = gmpy2.mpfr(digits, bits - 1)
    assert exact(got, bits) != near or near == want


def test_iota_is_arange_and_index_comparisons_are_numpys():
    assert [int(v) for v in run("positions", "--dim", "T=9")["result"]] == list(range(9))
    doc = run("differ", "--dim", "B=64")
    a, b = (np.array(doc["inputs"][n]) for n in "ab")
    assert doc["result"] == (a != b).tolist() and any(doc["result"]) and not all(doc["result"])
    doc = run("before", "--dim", "B=64")
    a, b = (np.array(doc["inputs"][n]) for n in "ab")
    assert [float(v) for v in doc["result"]] == (a < b).astype(float).tolist()


def test_accuracy_counts_the_argmax_equal_to_the_labels():
    doc = run("accuracy", "--dim", "B=33")
    logits = np.array(doc["inputs"]["logits"], dtype=float)
    y = np.array(doc["inputs"]["y"])
    assert float(doc["result"]) == pytest.approx(np.mean(logits.argmax(axis=1) == y), abs=1e-15)


# ---- gradients against their closed forms ------------------------------------------------


def test_the_gradient_through_pi_and_iota_is_pi_cos_pi_x_times_the_index():
    doc = run("dwave", "--dim", "T=7")
    mpmath.mp.prec = 300
    for i, (x, g) in enumerate(zip(doc["inputs"]["x"], doc["result"], strict=True)):
        want = mpmath.pi * mpmath.cos(mpmath.pi * mpmath.mpf(x)) * i
        assert abs(mpmath.mpf(g) - want) <= mpmath.mpf(2) ** -240, (i, g)


def test_the_gradient_through_an_index_mask_is_one_at_the_index():
    doc = run("dmasked", "--dim", "T=6")
    k = int(doc["inputs"]["k"])
    assert [float(v) for v in doc["result"]] == [float(i == k) for i in range(6)]


def test_the_gradients_are_torchs():
    torch = pytest.importorskip("torch")
    doc = run("dwave", "--dim", "T=5")
    x = torch.tensor([float(v) for v in doc["inputs"]["x"]], dtype=torch.float64)
    x.requires_grad_()
    wave = (torch.sin(math.pi * x) * torch.arange(5, dtype=torch.float64)).sum()
    (g,) = torch.autograd.grad(wave, (x,))
    np.testing.assert_allclose([float(v) for v in doc["result"]], g.numpy(), rtol=1e-13)
    doc = run("dmasked", "--dim", "T=5")
    x = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    k = int(doc["inputs"]["k"])
    masked = torch.where(torch.arange(5) == k, x, 0.0).sum()
    (g,) = torch.autograd.grad(masked, (x,))
    assert [float(v) for v in doc["result"]] == g.tolist()


def test_finite_differences_at_512_bits_agree():
    doc = run("dwave", "--dim", "T=3", "--bits", 512)
    xs = [exact(v, 512) for v in doc["inputs"]["x"]]
    h = gmpy2.mpfr(2) ** -120

    def wave(x):
        with gmpy2.context(precision=512):
            return sum(gmpy2.sin(gmpy2.const_pi() * v) * i for i, v in enumerate(x))

    with gmpy2.context(precision=512):
        for i in range(3):
            up = [v + h if j == i else v for j, v in enumerate(xs)]
            down = [v - h if j == i else v for j, v in enumerate(xs)]
            fd = (wave(up) - wave(down)) / (2 * h)
            assert abs(fd - exact(doc["result"][i], 512)) <= gmpy2.mpfr(2) ** -200


# ---- the kernels: native and the kernel interpreter bit for bit --------------------------

ENTRIES = [
    ("tau", ()),
    ("circle", ()),
    ("wave", ("--dim", "T=7")),
    ("dwave", ("--dim", "T=7")),
    ("positions", ("--dim", "T=9")),
    ("accuracy", ("--dim", "B=33")),
    ("differ", ("--dim", "B=17")),
    ("before", ("--dim", "B=17")),
    ("masked", ("--dim", "T=6")),
    ("dmasked", ("--dim", "T=6")),
]


@pytest.mark.parametrize(("entry", "args"), ENTRIES, ids=[e for e, _ in ENTRIES])
def test_native_is_the_kernel_interpreter_bit_for_bit(entry, args):
    kernel = run(entry, *args, "--backend", "kernel")
    native = run(entry, *args, "--backend", "native")
    assert native["result"] == kernel["result"]
    exact_ = run(entry, *args)["result"]
    flat = lambda v: np.array(v, dtype=object).ravel().tolist()  # noqa: E731
    for k, e in zip(flat(kernel["result"]), flat(exact_), strict=True):
        if isinstance(e, bool) or e in ("True", "False", True, False):
            assert k == e
        else:
            assert abs(float(k) - float(e)) <= 1e-14 * (1 + abs(float(e)))


def test_pi_natively_is_the_nearest_double():
    assert float(run("tau", "--backend", "native")["result"]) == 2 * math.pi
    f32 = float(run("tau", "--backend", "native", "--realize", "f32")["result"])
    assert f32 == float(np.float32(2 * np.float32(math.pi)))


# ---- the PyTorch export ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "dims"),
    [("circle", ()), ("accuracy", ("B=6",)), ("masked", ("T=5",)), ("dwave", ("T=4",))],
)
def test_the_export_passes_its_conformance_test(tmp_path, entry, dims):
    export_passes_conformance(PROGRAM, entry, tmp_path, *(f"--dim={d}" for d in dims))
    text = next(Path(tmp_path).glob("pi_iota.py")).read_text()
    assert "3.141592653589793" in text or entry != "circle"


# ---- the editors' queries ----------------------------------------------------------------


def test_the_highlights_name_every_primitive_called_and_pi():
    import re

    import tree_sitter as ts
    from presk_syntax.parse import language, parse_tree
    from presk_types.rules import CALL_NAMES, CHECKER_FORMS, CONSTANT_NAMES

    text = (ROOT / "packages/presk-syntax/grammar/queries/highlights.scm").read_text()
    query = ts.Query(language(), text)
    builtin = text[text.index("@function.builtin\n") :]
    assert set(re.findall(r'"(\w+)"', builtin)) == set(CALL_NAMES) | CHECKER_FORMS
    data = (ROOT / PROGRAM).read_bytes()
    captures = ts.QueryCursor(query).captures(parse_tree(data).root_node)
    texts = {
        name: {data[n.start_byte : n.end_byte].decode() for n in nodes}
        for name, nodes in captures.items()
    }
    assert texts["constant.builtin"] == set(CONSTANT_NAMES)
    assert {"iota", "sin", "select"} <= texts["function.builtin"]
