"""The C emitter's rules cover the table of scalar operations (presk_kernel.ir.SCALAR_TABLE),
as the kernel interpreter's do; the emitter renders a layout's GEMM statement and never
looks for one in a kernel whose layout has none."""

from __future__ import annotations

import dataclasses

from presk_cback.emit import KernelC
from presk_cback.scalar_c import C_RULES
from presk_kernel.contract import recognize
from presk_kernel.ir import (
    SCALAR_TABLE,
    Affine,
    Axis,
    Buffer,
    Kernel,
    Layout,
    Load,
    Loop,
    Reduce,
    Store,
    Var,
)
from presk_kernel.layout import apply_layout


def test_the_emitter_has_a_rule_for_every_operation():
    missing = sorted(set(SCALAR_TABLE) - set(C_RULES))
    assert not missing, f"the C emitter's C_RULES lack {missing}"


def _matmul() -> Kernel:
    v = Affine.var
    ax = lambda *ns: tuple(Axis(None, n) for n in ns)  # noqa: E731
    fold = Reduce("s", "fma", (("p", None, 8),), (), (Load(0, (v("i"), v("p"))),
                  Load(1, (v("p"), v("j")))), "f64")  # fmt: skip
    body = (
        Loop("i", None, 4, (Loop("j", None, 5, (fold, Store(2, (v("i"), v("j")), Var("s")))),)),
    )
    return Kernel("ein", "e/%1", (Buffer(0, "f64", ax(4, 8)), Buffer(1, "f64", ax(8, 5))),
                  (Buffer(2, "f64", ax(4, 5)),), body, "f64", Layout(order=("i", "j")))  # fmt: skip


def test_the_emitter_renders_the_layouts_gemm_statement_only():
    k = _matmul()
    g = recognize(k)
    assert g is not None and (g.rows, g.cols, g.depth) == (4, 5, 8)
    packed = dataclasses.replace(k.layout, pack=(0, 1))
    loops = "\n".join(KernelC(apply_layout(k, packed), "k0", True).function())
    assert "presk_gemm" not in loops  # packed, but no GEMM statement: the loops
    laid = dataclasses.replace(packed, gemm=g)
    call = "\n".join(KernelC(apply_layout(k, laid), "k0", True).function())
    assert "presk_gemm_f64(4, 5, 8, b0 + 0, 8, 1, b1 + 0, 5, 1, b2 + 0, 5, 1);" in call
