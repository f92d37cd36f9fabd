"""Narrowing (issue 26): a causal softmax's folds and quotients visit the allowed positions
only, and no bit changes (presk_kernel.narrow; docs/native.md, "Causal attention")."""

from __future__ import annotations

import numpy as np
from kernel_entries import lowered, same_bits
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.ir import (
    Affine,
    Axis,
    Buffer,
    Const,
    Index,
    Kernel,
    Layout,
    Load,
    Loop,
    Op,
    Reduce,
    Store,
    Var,
    format_kernel,
)
from presk_kernel.narrow import Mask, mask_of, narrow, never_negative_zero
from presk_kernel.spec import problems

ATTEND = ("tutorial/03_attention.psk", "attend", (("B", 1), ("T", 4)))


def hard_inputs(args: list, dtype) -> list:
    """attend's q, k, v (batch 1, heads 2, seq T, hd 4) with the cases a skip could get
    wrong: row 1 whose allowed terms cancel to +0 (equal weights on v = 1 and v = −1), −0 and
    negative values, weights that underflow to +0 at allowed positions (head 1: scores a
    thousand apart), an infinite v at a hidden position of the rows before it."""
    q, k, v = (np.array(a, dtype=dtype) for a in args)
    q[0, 0, 1], k[0, 0, :2] = 0, 0.5  # row 1 of head 0: scores 0, 0: weights ½, ½
    v[0, 0, 0], v[0, 0, 1] = 1.0, -1.0  # ½·1 + ½·(−1) = +0
    v[0, 0, 0, 3] = -0.0
    t = q.shape[2]
    q[0, 1], k[0, 1] = 40.0, np.arange(t * 4).reshape(t, 4)  # head 1: exp underflows to +0
    v[0, 1] = -np.abs(v[0, 1])
    v[0, 1, 3, 2] = np.inf  # hidden from rows 0 … 2
    return [q, k, v]


def test_the_causal_softmax_folds_and_quotients_are_narrowed():
    schedule, _, _ = lowered(*ATTEND)
    narrowed, count = narrow(fuse(schedule)[0])
    assert count == 6  # the max, the sum, the quotients' loop; the scores' two loops; a·v
    (soft,) = [lc.kernel for lc in narrowed.launches if lc.kernel.name.startswith("softmax")]
    text = format_kernel(soft)
    assert "fold max over i4 < 4 in 0 .. i2 + 1 (seq2)" in text
    assert "fold add over i4 < 4 in 0 .. i2 + 1 (seq2)" in text
    assert "for i4 < 4 in i2 + 1 .. 4 (seq2) {\n          %2[i0, i1, i2, i4] = 0.0\n" in text
    assert problems(soft) == []
    # the values product folds its allowed prefix, the rest where it is −0 or a hidden v is
    # not finite: its hidden terms are +0·v, not no-ops at every accumulator (Reduce.zeros)
    (values,) = [lc.kernel for lc in narrowed.launches if lc.kernel.site == "attend/%6"]
    assert "fold fma over i4 < 4 (seq2), finite zeros from i2 + 1 {" in format_kernel(values)
    assert problems(values) == []


def test_narrowing_changes_no_bit_on_the_kernel_interpreter():
    for realize, dtype in (("f64", np.float64), ("f32", np.float32)):
        schedule, args, _ = lowered(*ATTEND, realize)
        fused = fuse(schedule)[0]
        narrowed, _ = narrow(fused)
        args = hard_inputs(args, dtype)
        want = run_schedule(fused, args)
        assert same_bits(run_schedule(narrowed, args), want)
        o = want[0][0]
        assert o[0, 1, :3].tobytes() == np.zeros(3, dtype).tobytes()  # the row summing to +0
        assert np.isnan(o[1, :3, 2]).all()  # 0·∞ at a hidden position: the fold kept whole


def test_a_hidden_term_of_the_values_product_is_not_a_no_op():
    """Why the values product stays whole: its allowed terms fold to −0 (v = −0), and the
    hidden +0·1 makes +0; folded to its allowed prefix it would stay −0."""
    a = Buffer(0, "f64", (Axis(None, 2),))
    v = Buffer(1, "f64", (Axis(None, 2),))
    out = Buffer(2, "f64", ())
    terms = (Load(0, (Affine.var("j"),)), Load(1, (Affine.var("j"),)))

    def product(stop):
        red = Reduce("s", "fma", (("j", None, 2),), (), terms, stop=stop)
        k = Kernel("ein", "f/%1", (a, v), (out,), (red, Store(2, (), Var("s"))))
        assert problems(k) == []
        return k

    from presk_kernel.interp import run_kernel

    got = []
    for stop in (None, Affine.constant(1)):
        views = [np.array([1.0, 0.0]), np.array([-0.0, 1.0]), np.zeros(())]
        run_kernel(product(stop), views)
        got.append(np.signbit(views[2]))
    assert got == [False, True]  # whole: +0; allowed prefix alone: −0


def test_masks_are_recognised_by_their_comparison():
    def mask(cmp: str, a: str, b: str) -> Kernel:
        store = Store(
            0, (Affine.var("i"), Affine.var("j")), Op("compare", (Index(a), Index(b)), cmp)
        )
        out = Buffer(0, "bool", (Axis(None, 3), Axis(None, 3)))
        return Kernel(
            "m", "f/%1", (), (out,), (Loop("i", None, 3, (Loop("j", None, 3, (store,)),)),)
        )

    assert mask_of(mask("<=", "j", "i")) == Mask(along=1, by=0, plus=1)  # causal
    assert mask_of(mask("<", "j", "i")) == Mask(along=1, by=0, plus=0)
    assert mask_of(mask(">=", "i", "j")) == Mask(along=1, by=0, plus=1)
    assert mask_of(mask(">", "j", "i")) == Mask(along=0, by=1, plus=0)
    assert mask_of(mask("==", "j", "i")) is None  # a diagonal: not a prefix
    assert never_negative_zero(Op("exp", (Var("x"),)))
    assert not never_negative_zero(Var("x")) and not never_negative_zero(Const(-0.0, "f64"))


def test_the_verifier_checks_triangular_bounds():
    out = Buffer(0, "f64", (Axis(None, 3), Axis(None, 3)))
    st = Store(0, (Affine.var("i"), Affine.var("j")), Const(0.0, "f64"))

    def kernel(inner: Loop) -> Kernel:
        body = (Loop("i", None, 3, (inner,)),)
        return Kernel("k", "f/%1", (), (out,), body, layout=Layout(order=("i",)))

    assert problems(kernel(Loop("j", None, 3, (st,), stop=Affine((("i", 1),), 1)))) == []
    bad = problems(kernel(Loop("j", None, 3, (st,), stop=Affine((("i", 1),), 2))))
    assert any("runs over 2 … 4, outside 0 … 3" in p for p in bad)
    bad = problems(kernel(Loop("j", None, 3, (st,), start=Affine.var("j"))))
    assert any("reads `j`, not an enclosing loop's" in p for p in bad)
    bad = problems(kernel(Loop("j", None, 3, (st,), serial=True, stop=Affine.var("i"))))
    assert any("serial loop over `j` has bounds" in p for p in bad)


def test_narrowing_changes_no_bit_in_the_training_step():
    """The adjoints: MiniGPT's step (its causal softmax narrowed, the backward's products
    cut at the diagonal)."""
    from kernel_entries import MINIGPT

    file = "tests/examples/minigpt/train_minigpt.psk"
    schedule, args, _ = lowered(file, "loss", (("B", 1), ("T", 4)), "f32", True, MINIGPT)
    fused = fuse(schedule)[0]
    narrowed, count = narrow(fused)
    assert count == 16  # two blocks: softmax (3), scores, a·v; the adjoint's dV, dK, dQ
    assert same_bits(run_schedule(narrowed, args), run_schedule(fused, args))


def test_a_kernel_document_with_a_bad_bound_is_refused():
    import msgpack
    import pytest
    from presk_kernel.codec import decode_kernel, encode_kernel
    from presk_syntax.codec import DocumentError

    schedule, _, _ = lowered(*ATTEND)
    narrowed, _ = narrow(fuse(schedule)[0])
    data = encode_kernel(narrowed)
    assert decode_kernel(data) == narrowed

    def broken(node):  # each fold's stop reads a variable of no enclosing loop
        if isinstance(node, dict):
            if node.get("@") == "Reduce" and node.get("stop") is not None:
                node["stop"] = {"@": "Affine", "terms": [["zz", 1]], "const": 1}
            for v in node.values():
                broken(v)
        elif isinstance(node, list):
            for v in node:
                broken(v)
        return node

    doc = broken(msgpack.unpackb(data, strict_map_key=False))
    with pytest.raises(DocumentError, match="reads `zz`, not an enclosing loop's"):
        decode_kernel(msgpack.packb(doc))


GRADS = ("packages/presk-kernel/tests/programs/attention_grad.psk", "grads")


def hard_grad_inputs(args: list, dtype, t: int) -> list:
    """`grads`' q, k, v (hard_inputs': an infinite v hidden from rows 0 … 2 of head 1) and
    the output's gradient g: head 0's column 0 +1 on rows 0, 1 and −0 below, so dV's rows
    from 2 on fold their allowed terms to −0 and the hidden +0·1 before them make +0; an
    infinite g at row t // 2 of head 0, column 1, which makes that row of dS NaN at its
    allowed positions (dS is +0 where the mask hides: the softmax's adjoint is masked)."""
    q, k, v = hard_inputs(args[:3], dtype)
    g = np.array(args[3], dtype=dtype)
    g[0, 0, :2, 0], g[0, 0, 2:, 0] = 1.0, -0.0
    g[0, 0, t // 2, 1] = np.inf
    return [q, k, v, g]


def test_the_adjoint_products_fold_their_allowed_terms_on_the_kernel_interpreter():
    """aᵀ·g (dV), dSᵀ·Q (dK) and dS·K (dQ) skip the terms past the diagonal and give the
    unnarrowed bits: dV's +0 where its allowed terms fold to −0, the NaNs of the infinite g
    and v. dS is +0 where the mask hides (`select` on the softmax's adjoint), divided by the
    scale sqrt(d), a constant neither zero nor NaN: finite zeros, like the weights a."""
    for realize, dtype in (("f64", np.float64), ("f32", np.float32)):
        schedule, args, _ = lowered(*GRADS, (("B", 1), ("T", 6)), realize)
        fused = fuse(schedule)[0]
        narrowed, _ = narrow(fused)
        texts = [format_kernel(lc.kernel) for lc in narrowed.launches]
        # in each grad: dV (aᵀ·g) and dK (dSᵀ·Q) skip their first terms, a·v and dQ (dS·K)
        # their last, every one finite zeros (no scan of what it skips)
        assert sum(", finite zeros before i2 {" in t for t in texts) == 6
        assert sum(", zeros before i2 {" in t for t in texts) == 0
        assert sum(", finite zeros from i2 + 1 {" in t for t in texts) == 6
        assert sum(", zeros from i2 + 1 {" in t for t in texts) == 0
        args = hard_grad_inputs(args, dtype, 6)
        want = run_schedule(fused, args)
        dq, dk, dv = (w[0] for w in want)
        assert (dv[0, 2:, 0] == 0).all() and not np.signbit(dv[0, 2:, 0]).any()
        assert np.isnan(dv[0, 4:, 1]).all()  # +0·∞ before the diagonal
        # g's infinity at row 3 reaches the keys row 3 attends to, not those it cannot see
        assert np.isnan(dk[0, :4]).any(axis=-1).all() and not np.isnan(dk[0, 4:]).any()
        assert np.isnan(dq[0, 3]).any() and not np.isnan(dq[0, [0, 1, 2, 4, 5]]).any()
        assert same_bits(run_schedule(narrowed, args), want)


def test_the_verifier_checks_a_contractions_zero_terms():
    """Reduce.zeros: a contraction over one variable, its bound within [0, extent]."""
    a = Buffer(0, "f64", (Axis(None, 3), Axis(None, 3)))
    out = Buffer(1, "f64", (Axis(None, 3),))
    terms = (
        Load(0, (Affine.var("i"), Affine.var("j"))),
        Load(0, (Affine.var("j"), Affine.var("i"))),
    )

    def kernel(op="fma", terms=terms, **mark) -> Kernel:
        red = Reduce("s", op, (("j", None, 3),), (), terms, **mark)
        body = (Loop("i", None, 3, (red, Store(1, (Affine.var("i"),), Var("s")))),)
        return Kernel("k", "f/%1", (a,), (out,), body, layout=Layout(order=("i",)))

    assert problems(kernel(zeros=Affine((("i", 1),), 1))) == []
    assert problems(kernel(zeros=Affine.var("i"), zeros_first=True, zeros_finite=True)) == []
    bad = problems(kernel(zeros=Affine((("i", 1),), 2)))
    assert any("runs over 2 … 4, outside 0 … 3" in p for p in bad)
    bad = problems(kernel("add", (terms[0],), zeros=Affine.var("i")))
    assert any("has zero terms: a contraction over one variable" in p for p in bad)
    assert any("without their bound" in p for p in problems(kernel(zeros_first=True)))


def test_a_quotient_by_a_steady_constant_keeps_the_hidden_zeros_finite():
    """The softmax adjoint's dS = select(m, …, +0) / sqrt(d): ±0 where the mask hides, and
    finite there when the divisor is a constant neither zero nor NaN — inline (evaluated in
    the kernel's arithmetic) or a 0-d input computed from constants (`steady`); by a zero,
    a NaN, or a scalar nothing proves, ±0/y may be NaN: not finite."""
    from presk_kernel.narrow import _region

    i, j = Affine.var("i"), Affine.var("j")
    masks = {0: Mask(along=1, by=0, plus=1)}  # causal_mask: j allowed below i + 1
    dS = Op("select", (Load(0, (i, j)), Load(1, (i, j)), Const(0.0, "f32")))

    def finite(divisor, steady=frozenset(), compute="f32"):
        r = _region(Op("div", (dS, divisor)), {}, masks, {}, steady, compute)
        assert r is not None and r[:3] == ("j", "i", 1)
        return r[3]

    assert _region(dS, {}, masks, {})[3]
    assert finite(Op("sqrt", (Const(32.0, "f32"),)))
    assert finite(Const(-0.5, "f32")) and finite(Const(float("inf"), "f32"))
    assert not finite(Const(0.0, "f32")) and not finite(Op("sqrt", (Const(-1.0, "f32"),)))
    assert not finite(Op("mul", (Const(1e-30, "f32"), Const(1e-30, "f32"))))  # +0 in f32
    assert finite(Op("mul", (Const(1e-30, "f64"), Const(1e-30, "f64"))), compute="f64")
    assert finite(Load(2, ()), steady=frozenset({2})) and not finite(Load(2, ()))
    assert not finite(Load(1, (i, j)))
