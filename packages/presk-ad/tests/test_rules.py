"""The conventions of the adjoint rules, where finite differences say nothing: the kinks,
the indices (no adjoint, no failure), the parameters a function does not read, the
operations without a rule (max and min, a stack of symbolic length), and second order.
Programs of tests/programs/*.psk, through the pipeline at 512 bits, compared exactly.
"""

from __future__ import annotations

from pathlib import Path

import gmpy2
import numpy as np
import pytest
from presk_ad import ADError, differentiate
from presk_core import mpfr as M
from presk_core.interp import Interpreter
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize
from presk_syntax.diagnostics import DiagnosticError
from presk_types.elab import load_program
from presk_types.types import Bool, Idx, TupleT

PROGRAMS = Path(__file__).resolve().parent / "programs"
BITS = 512


def lowered(name: str):
    elab = load_program(str(PROGRAMS / name))
    return elab, lower_program(elab)


def run(name: str, entry: str, args: list | None = None) -> tuple[object, list]:
    """`entry` of programs/`name` at 512 bits, on `args` or on the synthesized inputs."""
    elab, core = lowered(name)
    core = differentiate(core)
    interp = Interpreter(core, BITS)
    if args is None:
        args = [v for _, _, v in synthesize(parse_entry(entry, core, elab, {}), interp, 0)]
    return interp.run(entry, args, {}), args


def reals(values: list[float]) -> np.ndarray:
    with M.precision(BITS):
        return M.real(np.array(values))


# ---- kinks: PyTorch's derivatives at 0 -------------------------------------------------------

AT_KINK = [0.0, -0.0, 2.0, -2.0, 1e-300, -1e-300]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("relu_sum_dx", [0, 0, 1, 0, 1, 0]),  # relu′(0) = relu′(−0) = 0
        ("abs_sum_dx", [0, 0, 1, -1, 1, -1]),  # abs′(0) = abs′(−0) = 0
    ],
)
def test_the_derivative_at_a_kink_is_zero(entry: str, expected: list[int]) -> None:
    g, _ = run("kinks.psk", entry, [reals(AT_KINK)])
    assert [gmpy2.mpfr(v) for v in g] == [gmpy2.mpfr(e) for e in expected]


# ---- indices: no adjoint, and no failure ---------------------------------------------------


def _generated(name: str):
    """The functions differentiation added to programs/`name`."""
    _, core = lowered(name)
    before = {f.name for f in core.functions}
    return [f for f in differentiate(core).functions if f.name not in before]


def _discrete(t) -> bool:
    match t:
        case Idx() | Bool():
            return True
        case TupleT(elements):
            return any(_discrete(e) for e in elements)
    return False


def test_no_adjoint_of_an_index_is_computed() -> None:
    """embed's and take's ids, passed through a call too: their functions get adjoints of
    their real arguments only (no zeros of an index, no tuple holding one)."""
    generated = _generated("indices.psk")
    assert generated
    sweeps = [f for f in generated if f.name.endswith((".vjp", ".bwd"))]
    assert {f.name.split(".")[0] for f in sweeps} >= {"lookup", "f", "pick"}
    for fn in sweeps:
        assert not _discrete(fn.result), f"`{fn.name}` returns an adjoint of an index"
    for fn in generated:
        for ins in fn.body:
            if ins.op in ("zeros_like", "accum", "put_item"):
                assert not _discrete(ins.out.type), f"`{fn.name}`: {ins.op} of an index"


def test_the_gradient_through_embed_counts_each_row_read() -> None:
    """f = Σ embed(table, ids)², so ∂f/∂table[r] = 2 · #{i : ids[i] = r} · table[r], exactly."""
    g, (table, ids) = run("indices.psk", "f_dtable")
    counts = np.bincount(np.asarray(ids), minlength=5)
    assert counts.max() >= 2 and counts.min() == 0  # a row read twice, a row never read
    with M.precision(BITS):
        expected = M.mul(table, M.real(2.0 * counts[:, None]))
    assert np.array_equal(g, expected)


def test_the_gradient_through_take_is_the_index_at_the_index() -> None:
    """pick = Σ_b x[b, ids[b]] · ids[b]: its gradient is ids[b] at (b, ids[b]), else 0."""
    g, (x, ids) = run("indices.psk", "pick_dx")
    expected = np.zeros((4, 5))
    expected[np.arange(4), ids] = ids
    assert np.array_equal(np.vectorize(float)(g), expected)


# ---- what f does not read --------------------------------------------------------------------


def test_the_gradient_in_an_unread_parameter_is_zero() -> None:
    g, _ = run("unused.psk", "f_dx")
    assert np.shape(g) == (2, 3)
    assert all(v == 0 for v in g.flat)


# ---- primitives without an adjoint ---------------------------------------------------------


def _gradient_at(program: str, name: str, args: list) -> list:
    from presk_core import mpfr as M
    from presk_core.interp import Interpreter

    _, core = lowered(program)
    interp = Interpreter(differentiate(core), 256)
    with M.precision(256):
        values = [M.real(np.array(a, dtype=float)) for a in args]
    return [float(v) for v in np.asarray(interp.run(name, values, {})).reshape(-1)]


def test_maximum_gives_half_to_each_at_a_tie() -> None:
    """As `torch.maximum`: the winner takes the cotangent, a tie splits it."""
    g = _gradient_at("maximum.psk", "f_dx", [[1.0, 2.0, 3.0], [0.0, 2.0, 5.0]])
    assert g == [1.0, 0.5, 0.0]


def test_max_over_an_axis_gives_it_to_the_first_maximum() -> None:
    """As `torch.max(x, dim)`: the index `argmax` finds takes the whole cotangent."""
    g = _gradient_at("max.psk", "f_dx", [[[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]]])
    assert g == [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]


def test_a_stack_of_a_symbolic_length_is_refused() -> None:
    """`stack{N}` with N a dimension stays a `fold` (only constant stacks are unrolled, as
    docs/language.md says), and `fold` has no adjoint rule: an ADError that names it."""
    _, core = lowered("stack_dim.psk")
    with pytest.raises(ADError, match=r"no adjoint rule for `fold` \(in `Deep.apply`\)"):
        differentiate(core)


# ---- second order --------------------------------------------------------------------------


@pytest.mark.parametrize("program", ["second_order.psk", "second_order_lambda.psk"])
def test_second_order_is_refused(program: str) -> None:
    """The gradient of a function that takes a gradient is refused by the checker (E3002, on
    the function that reaches it), before lowering: nothing of the program runs, first order
    included. differentiate keeps its own refusal (`grad` has no adjoint rule) behind it."""
    with pytest.raises(DiagnosticError) as refused:
        lowered(program)
    assert [d.code for d in refused.value.diagnostics] == ["E3002"]


def test_first_order_alone_runs() -> None:
    """second_order.psk's f_dx, in a program without its second-order h_dx: 3x²."""
    g, (x,) = run("first_order.psk", "f_dx")
    with M.precision(BITS):
        assert np.array_equal(g, M.mul(M.mul(x, x), M.real(3)))


# ---- a masked softmax ------------------------------------------------------------------------


def test_a_masked_softmax_gives_plus_zero_where_the_mask_hides() -> None:
    """softmax(x, where = m) is +0 where m hides whatever x is, so x's adjoint there is +0:
    not y·(w − Σ) = +0·(a negative), which is −0 (issue 26: the attention backward's
    products skip those terms, presk_kernel.narrow). The allowed positions keep the rule."""
    x = [[0.5, 2.0, -1.0], [1.0, -3.0, 0.25], [2.0, 0.0, -0.5]]
    w = [[1.0, -5.0, -7.0], [2.0, -1.0, -9.0], [0.5, 1.5, -2.0]]
    _, core = lowered("softmax.psk")
    g = Interpreter(differentiate(core), BITS).run("causal_dx", [reals(x), reals(w)], {"T": 3})
    hidden = [g[i, j] for i in range(3) for j in range(i + 1, 3)]
    assert all(v == 0 and not gmpy2.is_signed(v) for v in hidden)
    # row 1: y = softmax(1, −3), dx = y·(w − Σ_j w_j y_j), exactly as the rule gives it
    with M.precision(BITS):
        e0, e1 = gmpy2.exp(gmpy2.mpfr(1.0)), gmpy2.exp(gmpy2.mpfr(-3.0))
        y0, y1 = e0 / (e0 + e1), e1 / (e0 + e1)
        s = 2 * y0 + (-1) * y1
        assert abs(g[1, 0] - y0 * (2 - s)) < gmpy2.mpfr("1e-140")
        assert abs(g[1, 1] - y1 * (-1 - s)) < gmpy2.mpfr("1e-140")
