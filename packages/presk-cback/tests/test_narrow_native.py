"""Narrowed causal attention natively (issue 26): the bits of the unnarrowed schedule on the
kernel interpreter, at the run's layouts (strips of rows whose folds end at their last
row's stop), at one and two threads, at every point of the softmax's layout space, and in
a training step."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import numpy as np
from presk_cback.native import NativeEntry
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.layout import apply_layout, lay_out, layout_space
from presk_kernel.narrow import narrow

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "presk-kernel" / "tests"))
from kernel_entries import MINIGPT, lowered, same_bits  # noqa: E402
from test_narrow import hard_inputs  # noqa: E402


def test_narrowed_attention_gives_the_unnarrowed_bits_natively():
    for realize, dtype in (("f64", np.float64), ("f32", np.float32)):
        attend = ("tutorial/03_attention.psk", "attend", (("B", 1), ("T", 11)), realize)
        schedule, args, _ = lowered(*attend)
        fused = fuse(schedule)[0]
        narrowed, _ = narrow(fused)
        args = hard_inputs(args, dtype)
        want = run_schedule(fused, args)
        for threads in (1, 2):
            laid = lay_out(narrowed, threads)
            assert same_bits(NativeEntry(laid).run(args), want)
            assert same_bits(run_schedule(laid, args, laid=True), want)
        if realize == "f64":
            continue
        # points of the narrowed softmax's layout space: two passes, and the first and last
        at = [i for i, lc in enumerate(narrowed.launches) if "softmax" in lc.kernel.name][0]
        k = narrowed.launches[at].kernel
        points = layout_space(k, 2)
        chosen = [points[0], points[-1], next(p for p in points if p.passes == 2)]
        for p in chosen:
            one = dataclasses.replace(narrowed.launches[at], kernel=apply_layout(k, p))
            launches = laid.launches[:at] + (one,) + laid.launches[at + 1 :]
            s = dataclasses.replace(laid, launches=launches)
            assert same_bits(NativeEntry(s).run(args), want), p


def test_strips_of_16_rows_give_the_bits_of_8():
    """A strip of f32 rows as C writes it: 16 rows, their folds as two vectors of 8 lanes in
    one loop (a strip of 8 to 15 rows: one vector and single rows; f64: 8 rows), the kept
    exponentials in a loop of their own, the quotients' loop rounded up to whole vectors.
    At T 27 the softmax's rows come in tiles of 16:
    a strip of 16 and one of 11 (8 in a vector, 3 alone); rows whose allowed scores are all
    −∞ or hold a NaN among them, at one and two threads: the unnarrowed schedule's
    bits on the kernel interpreter."""
    for realize, dtype in (("f32", np.float32), ("f64", np.float64)):
        attend = ("tutorial/03_attention.psk", "attend", (("B", 1), ("T", 27)), realize)
        schedule, args, _ = lowered(*attend)
        fused = fuse(schedule)[0]
        narrowed, _ = narrow(fused)
        q, k, v = hard_inputs(args, dtype)
        k[0, 0, :, 0] = np.abs(k[0, 0, :, 0]) + 0.5  # row 1's scores stay 0 (its q is 0)
        for row in (5, 25):  # every allowed score −∞ (in the strip of 16, in a single row)
            q[0, 0, row] = [-np.inf, 0.0, 0.0, 0.0]
        q[0, 0, 20, 2] = np.nan  # a NaN score (in the 11 rows' vector; f64 too: issue 26, H7)
        args = [q, k, v]
        want = run_schedule(fused, args)
        for threads in (1, 2):
            laid = lay_out(narrowed, threads)
            c = "".join(NativeEntry(laid).source)
            assert ("_n >= 16) {" in c) == (realize == "f32")
            # the quotients' loop up to its row's bound rounded up to whole vectors (the
            # hidden zeros' loop after it stores those positions again: strip._widened)
            lanes = 16 if realize == "f32" else 8
            assert re.search(rf"< presk_mini\(27, \(v_\w+ \+ 1 \+ {lanes - 1}\) & -{lanes}\)", c)
            assert same_bits(NativeEntry(laid).run(args), want)


def test_a_narrowed_training_step_gives_the_unnarrowed_bits_natively():
    file = "tests/examples/minigpt/train_minigpt.psk"
    schedule, args, _ = lowered(file, "loss", (("B", 1), ("T", 4)), "f32", True, MINIGPT)
    fused = fuse(schedule)[0]
    narrowed, _ = narrow(fused)
    assert same_bits(NativeEntry(lay_out(narrowed, 2)).run(args), run_schedule(fused, args))


def test_the_scores_product_computes_its_allowed_triangle_only():
    """The scores' hidden positions are dead (the softmax reads them under the mask's
    select): their product runs as one banded GEMM call, each panel of MR rows over the
    columns its last row allows, and their scale over the allowed prefix; the attention's
    bits are the unnarrowed schedule's, at one and two threads and in f64 (T 100: a short
    last panel of every default MR, 12, 6 and 4)."""
    from presk_kernel.contract import gemm_stop
    from presk_kernel.ir import GemmStmt

    for realize, dtype, threads in (
        ("f32", np.float32, 1),
        ("f32", np.float32, 2),
        ("f64", np.float64, 1),
    ):
        attend = ("tutorial/03_attention.psk", "attend", (("B", 1), ("T", 100)), realize)
        schedule, args, _ = lowered(*attend)
        fused = fuse(schedule)[0]
        narrowed, _ = narrow(fused)
        args = hard_inputs(args, dtype)
        want = run_schedule(fused, args)
        laid = lay_out(narrowed, threads)
        (scores,) = [lc.kernel for lc in laid.launches if lc.kernel.site == "scores/%2"]
        (g,) = [s for s in scores.body if isinstance(s, GemmStmt)]
        assert gemm_stop(g.gemm, g.nest) == 1
        assert same_bits(NativeEntry(laid).run(args), want)


def test_the_values_product_folds_each_rows_allowed_prefix():
    """a·v: the softmax's weights are +0 where the mask hides (their writer stores the
    constant), so each panel of rows folds the prefix its last row allows, then the rest
    only where the sum is −0 or v holds a value that is not finite past it. Head 1's column
    0 folds to −0 on rows 0 … 97 (v = −0 there, the other weights +0) and the hidden +1s
    of rows 98 and 99, past the prefix of every panel before the last, make it +0 there
    (the rest's fold, the repair); head 0's column 1 has an
    infinite v at row 98, hidden from the rows before it (their whole fold NaN). The
    unnarrowed bits, at one and two threads and in f64."""
    from presk_kernel.contract import gemm_kstop
    from presk_kernel.ir import GemmStmt

    for realize, dtype, threads in (
        ("f32", np.float32, 1),
        ("f32", np.float32, 2),
        ("f64", np.float64, 1),
    ):
        attend = ("tutorial/03_attention.psk", "attend", (("B", 1), ("T", 100)), realize)
        schedule, args, _ = lowered(*attend)
        fused = fuse(schedule)[0]
        narrowed, _ = narrow(fused)
        q, k, v = hard_inputs(args, dtype)
        v[0, 1, :98, 0], v[0, 1, 98:, 0] = -0.0, 1.0
        v[0, 0, 98, 1] = np.inf
        args = [q, k, v]
        want = run_schedule(fused, args)
        o = want[0][0]
        assert not np.signbit(o[1, :98, 0]).any() and (o[1, :98, 0] == 0).all()
        assert np.isnan(o[0, :98, 1]).all() and not np.isnan(o[0, 98:, 1]).any()
        laid = lay_out(narrowed, threads)
        (values,) = [lc.kernel for lc in laid.launches if lc.kernel.site == "attend/%6"]
        (g,) = [s for s in values.body if isinstance(s, GemmStmt)]
        assert gemm_kstop(g.gemm, g.nest) == (1, False, True)
        assert same_bits(NativeEntry(laid).run(args), want)
        assert same_bits(run_schedule(laid, args, laid=True), want)


def test_the_adjoint_products_fold_their_allowed_terms_natively():
    """aᵀ·g and dSᵀ·Q as one banded GEMM call each, each panel of rows from its first row's
    diagonal, dS·K each panel up to its last row's, the whole fold again where the result is
    −0 or a skipped value is not finite: the unnarrowed bits at T 200 (dV's rows from 2 fold
    to −0 from the diagonal beside g's +1s in rows 0, 1; g's row 100 is infinite, skipped by
    the panels that start past it), at two threads and in f64, against the unnarrowed
    schedule natively."""
    from presk_kernel.contract import gemm_kstop
    from presk_kernel.ir import GemmStmt
    from test_narrow import GRADS, hard_grad_inputs

    for realize, dtype, threads in (("f32", np.float32, 2), ("f64", np.float64, 1)):
        schedule, args, _ = lowered(*GRADS, (("B", 1), ("T", 200)), realize)
        fused = fuse(schedule)[0]
        narrowed, _ = narrow(fused)
        args = hard_grad_inputs(args, dtype, 200)
        # column 2: +1 on rows 0, 1 (skipped products +0), then the least subnormal's
        # negative, whose products with the weights are not zeros but round to −0: dV stays
        # −0 there (the fold from +0 reaches the same −0), which a scan of signs alone misses
        args[3][0, 0, :2, 2], args[3][0, 0, 2:, 2] = 1.0, -np.finfo(dtype).smallest_subnormal
        want = NativeEntry(lay_out(fused, 1)).run(args)  # the kernel interpreter's: test_narrow
        dv = want[2][0]
        assert (dv[0, 2:, 0] == 0).all() and not np.signbit(dv[0, 2:, 0]).any()
        assert np.signbit(dv[0, 2:, 2]).all() and (dv[0, 2:, 2] == 0).sum() > 150
        laid = lay_out(narrowed, threads)
        stops = [
            gemm_kstop(s.gemm, s.nest)
            for lc in laid.launches
            for s in lc.kernel.body
            if isinstance(s, GemmStmt)
        ]
        for stop in ((0, True, True), (1, False, True)):  # aᵀ·g and dSᵀ·Q, a·v and dS·K
            assert stops.count(stop) == 6
        assert same_bits(NativeEntry(laid).run(args), want)
