"""presk libm's erfc in blocks (presk_erfcf_n, docs/native.md "presk libm") where a loop in
lanes computes it in f32: an elementwise GELU over long rows (two in one kernel), its adjoint
(erfc and exp), and a GELU as a product's epilogue, several blocks of 256 a row. The entry
gives the kernel interpreter's bits (a NaN's sign aside) with almost every argument in
erfc's small branch and with most in its large one, NaN, ±inf and −0 among them."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_entries import lowered, nan_aside
from presk_cback.native import NativeEntry
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.layout import lay_out

PROGRAM = "packages/presk-kernel/tests/programs/erfc.psk"


def _case(entry: str, b: int, d: int, realize: str, threads: int, scale: float):
    schedule, _, _ = lowered(PROGRAM, entry, (("B", b),), realize, consts=(("D", str(d)),))
    laid = lay_out(fuse(schedule)[0], threads)
    rng = np.random.default_rng(5)
    shapes = {buf.id: tuple(ax.length for ax in buf.axes) for buf in laid.buffers}
    inputs = [rng.standard_normal(shapes[i]) * scale for i in laid.inputs]
    x = inputs[0].reshape(-1)
    x[3::97], x[5::89], x[7::83], x[9::79] = np.nan, np.inf, -np.inf, -0.0
    return laid, inputs


@pytest.mark.parametrize(
    "entry, b, d, threads",
    [
        ("gelu_rows", 3, 700, 1),
        ("gelu_dx", 3, 700, 1),
        ("gelu_up", 40, 48, 1),
        ("gelu_up", 40, 48, 2),
    ],
)
@pytest.mark.parametrize("scale", [0.3, 4.0])  # erfc's arguments: small, then mostly large
def test_erfc_in_blocks_gives_the_interpreters_bits(compiler, entry, b, d, threads, scale):
    laid, inputs = _case(entry, b, d, "f32", threads, scale)
    native = NativeEntry(laid)
    calls = "\n".join(native.source).count("presk_erfcf_n(v_")
    assert calls == {"gelu_rows": 2, "gelu_dx": 2, "gelu_up": 1}[entry]
    if entry == "gelu_up":  # the GELU as the product's epilogue
        assert "_e0(void" in "\n".join(native.source)
    assert nan_aside(native.run(inputs), run_schedule(laid, inputs))


def test_f64_erfc_stays_in_its_loop(compiler):
    laid, inputs = _case("gelu_rows", 3, 40, "f64", 1, 1.0)
    native = NativeEntry(laid)
    assert "presk_erfcf_n(v_" not in "\n".join(native.source)
    assert nan_aside(native.run(inputs), run_schedule(laid, inputs))


def test_an_argument_the_body_computes_after_keeps_erfc_in_its_loop():
    # `_erfc_blocks` computes every argument before the body runs: where one reads a buffer
    # the body stores, a Let after the first erfc, or another erfc, the loop stays as it is
    from presk_cback.emit import _erfc_blocks
    from presk_kernel.ir import Affine, Const, Let, Load, Op, Store, Var

    at = (Affine.var("i"),)

    def erfc(x):
        return Op("erfc", (x,), None)

    two = Const(2.0, "f32")
    a = Let("a", Op("mul", (Load(0, at), two), None))
    lets, ops = _erfc_blocks([a, Store(1, at, erfc(Var("a")))])
    assert lets == [a] and ops == [erfc(Var("a"))]
    assert _erfc_blocks([Store(0, at, two), Store(1, at, erfc(Load(0, at)))]) is None
    b = Let("b", Load(0, at))
    assert _erfc_blocks([Store(1, at, erfc(two)), b, Store(2, at, erfc(Var("b")))]) is None
    assert _erfc_blocks([Store(1, at, erfc(erfc(Load(0, at))))]) is None
    assert _erfc_blocks([Store(1, at, Op("exp", (Load(0, at),), None))]) is None
