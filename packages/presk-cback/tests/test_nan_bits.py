"""A NaN's bits natively, on the kernel interpreter and in the C export (issue 26, H7;
DESIGN §11): a NaN operand propagates its own sign and payload, an invalid operation
(∞ − ∞, ∞·0) gives x86's default NaN (negative), a max or a select gives what it picks.
f64 `attend` once gave a NaN score's row +NaN natively and −NaN on the interpreter (its
binary64 fma took MPFR's NaN, which has no sign); gelu met x's NaN and erfc(−x/√2)'s,
of the other sign, in one product, whose NaN the C compiler's operand order chose."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from presk_cback.native import NativeEntry
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.layout import lay_out
from presk_kernel.narrow import narrow

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "presk-kernel" / "tests"))
from kernel_entries import lowered  # noqa: E402
from test_narrow import hard_inputs  # noqa: E402

NAN_BITS = "packages/presk-kernel/tests/programs/nan_bits.psk"
UINT = {np.float64: np.uint64, np.float32: np.uint32}


def bits(arrays) -> list:
    return [np.asarray(a).view(UINT[np.asarray(a).dtype.type]).copy() for a in arrays]


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(bits(a), bits(b), strict=True))


def nan(dtype, negative=False):
    n = np.array(np.nan, dtype)
    return -n if negative else n


def executors(schedule, args) -> list:
    """The unnarrowed schedule on the kernel interpreter, then the narrowed one natively at
    one and two threads and on the interpreter as laid out, the unnarrowed one natively."""
    fused = fuse(schedule)[0]
    narrowed, _ = narrow(fused)
    out = [run_schedule(fused, args)]
    for threads in (1, 2):
        laid = lay_out(narrowed, threads)
        out.append(NativeEntry(laid).run(args))
    out.append(run_schedule(laid, args, laid=True))
    out.append(NativeEntry(lay_out(fused, 1)).run(args))
    return out


def test_a_nan_score_gives_its_own_nan_in_attend():
    """attend at T 27: a +NaN score row (q's NaN: allowed and hidden positions), a −NaN one,
    a NaN at positions hidden from the rows before it (k's row 25), rows of +∞ and −∞ scores
    (∞ − ∞: the default NaN), f32 and f64, one and two threads."""
    for realize, dtype in (("f64", np.float64), ("f32", np.float32)):
        schedule, args, _ = lowered(
            "tutorial/03_attention.psk", "attend", (("B", 1), ("T", 27)), realize
        )
        q, k, v = hard_inputs(args, dtype)
        q[0, 0, 20, 2] = nan(dtype)
        q[0, 0, 21, 1] = nan(dtype, negative=True)
        k[0, 0, 25, 3] = nan(dtype)  # hidden from rows 0 … 24, allowed in 25, 26
        q[0, 0, 5] = [np.inf, 0, 0, 0]  # scores ±∞ by k's sign: ∞ − ∞ in the max's shift
        k[0, 0, :, 0] = np.where(np.arange(27) % 2 == 0, 1.0, -1.0)
        q[0, 0, 6] = [-np.inf, 0, 0, 0]
        runs = executors(schedule, [q, k, v])
        for got in runs[1:]:
            assert same(got, runs[0])
        u = UINT[dtype]
        o = runs[0][0][0, 0].view(u)
        quiet_pos = np.array(nan(dtype)).view(u)
        assert (o[20] == quiet_pos).all()  # the input's NaN, +
        assert (o[21] == (-nan(dtype)).view(u)).all()  # and −
        assert (o[25:] == quiet_pos).all() and not np.isnan(runs[0][0][0, 0, :25]).all()
        assert (o[5] == (-nan(dtype)).view(u)).all()  # invalid: the default NaN, −


def hard_rows(dtype, t, seed) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((t, t)).astype(dtype)
    x[1, 0], x[2, 5], x[6, 3] = nan(dtype), nan(dtype), nan(dtype, negative=True)
    x[3], x[4] = np.inf, -np.inf
    x[5, :4], x[5, 4:] = np.inf, -np.inf
    x[7, 2], x[7, 5] = nan(dtype), np.inf
    x[8], x[8, 10] = -np.inf, 0.0  # every allowed score −∞, a finite hidden one
    x[9, 9], x[9, 0], x[10, 10] = np.inf, -np.inf, -0.0
    return x


def test_the_row_and_elementwise_kernels_give_one_nan():
    """Softmax (causal) and its adjoint, log_softmax, a max fold, gelu and its adjoint, silu's
    adjoint, a product, over rows of ±NaN, ±∞ and −0 (T 12; the product at T 40, a GEMM)."""
    for entry, t in (("soft", 12), ("logsoft", 12), ("top", 12), ("act", 12),
                     ("act_dx", 12), ("swish_dx", 12), ("soft_dx", 12), ("prod", 40)):  # fmt: skip
        for realize, dtype in (("f64", np.float64), ("f32", np.float32)):
            schedule, args, _ = lowered(NAN_BITS, entry, (("T", t),), realize)
            args = [hard_rows(dtype, t, seed) for seed in range(len(args))]
            runs = executors(schedule, args)
            assert all(same(got, runs[0]) for got in runs[1:]), (entry, realize)
            if entry == "act":
                o = runs[0][0].view(UINT[dtype])
                assert o[1, 0] == np.array(nan(dtype)).view(UINT[dtype])  # x's own NaN
                assert o[6, 3] == (-nan(dtype)).view(UINT[dtype])


def test_the_c_export_gives_the_nans_bits(tmp_path):
    """The exported C program of f64 attend (narrowed, one thread, no OpenMP) on the NaN
    rows of the test above: the native backend's bits."""
    import subprocess

    from presk_cback.export_c import c_program
    from presk_core import data as D

    schedule, args, _ = lowered("tutorial/03_attention.psk", "attend", (("B", 1), ("T", 9)))
    q, k, v = hard_inputs(args, np.float64)
    q[0, 0, 4, 2], q[0, 0, 5, 1] = nan(np.float64), nan(np.float64, negative=True)
    k[0, 0, 7, 3] = nan(np.float64)
    q[0, 1, 6] = [np.inf, 0, 0, 0]
    k[0, 1, :, 0] = np.where(np.arange(9) % 2 == 0, 1.0, -1.0)
    laid = lay_out(narrow(fuse(schedule)[0])[0], 1)
    want = NativeEntry(laid).run([q, k, v])[0]
    text = "ℝ[1, 2, 9, 4]"
    header = tmp_path / "h.psk.d"
    D.write(str(header), text, D.type_of(text), [[np.zeros(q.shape)]])
    head = header.read_bytes()[: D.read_header(str(header)).header_size]
    program = c_program(laid, {}, "attend", head, 1)
    for name, body in program.files.items():
        (tmp_path / name).write_text(body)
    ins = f"({text}, {text}, {text})"
    D.write(str(tmp_path / "in.psk.d"), ins, D.type_of(ins), [[q, k, v]])
    sources = ["main.c", "model.c", "presk_rt.c", "presk_libm.c"]
    flags = ["-std=c11", "-ffp-contract=off", "-O2"]
    build = subprocess.run(
        ["cc", *flags, "-o", "model", *sources, "-lm"], cwd=tmp_path, capture_output=True
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run(["./model", "in.psk.d", "out.psk.d"], cwd=tmp_path, capture_output=True)
    assert run.returncode == 0, run.stderr
    got = D.read_reals(str(tmp_path / "out.psk.d")).reshape(want.shape)
    assert np.isnan(want[0, 0, 4]).all() and np.isnan(want[0, 1, 6]).all()
    assert got.view(np.uint64).tolist() == want.view(np.uint64).tolist()


def quick_rows(dtype, t, seed) -> np.ndarray:
    """Rows for a max fold's quick steps (PRESK_QUICK_VSTEP) and their check, at T 40: in
    the first 16 rows (one block of the f32 folds, two of f64's) two NaNs of other payloads
    in one row (the first wins), a NaN first (the fold's start), one last, rows of ±∞; in the
    next 16 a row whose largest is +0 between −0s (a quick step keeps the last) and one
    whose largest is −0; in the last 8 (f32's block of 8) a NaN again."""
    x = np.random.default_rng(seed).standard_normal((t, t)).astype(dtype)
    quiet = np.array(nan(dtype)).view(UINT[dtype])
    x[0, 3], x[0, 30] = (quiet + 5).view(dtype), (quiet + 9).view(dtype)
    x[1, 0] = (quiet + 7).view(dtype)
    x[7, t - 1] = -nan(dtype)
    x[4, 17], x[5] = np.inf, -np.inf
    x[18] = -np.abs(x[18])
    x[18, 11], x[18, 12], x[18, 13] = -0.0, 0.0, -0.0
    x[19] = -np.abs(x[19]) - 1
    x[19, 20] = -0.0
    x[35, 20] = (quiet + 3).view(dtype)
    return x


def test_max_folds_quick_steps_give_the_ieee_bits():
    """A max fold, a causal softmax and a log-softmax at T 40 (the folds of 16 and 8 rows in
    vectors, 8 steps a block) over quick_rows: the quick steps' result where it holds, the
    IEEE steps' where a NaN or a zero sends the block back, on every executor."""
    for entry in ("top", "soft", "logsoft"):
        for realize, dtype in (("f64", np.float64), ("f32", np.float32)):
            schedule, args, _ = lowered(NAN_BITS, entry, (("T", 40),), realize)
            args = [quick_rows(dtype, 40, seed) for seed in range(len(args))]
            runs = executors(schedule, args)
            assert all(same(got, runs[0]) for got in runs[1:]), (entry, realize)
            if entry == "top":
                o = runs[0][0].view(UINT[dtype])
                quiet = np.array(nan(dtype)).view(UINT[dtype])
                assert o[0] == quiet + 5 and o[1] == quiet + 7 and o[35] == quiet + 3
                assert o[18] == 0 and o[19] == np.array(-0.0, dtype).view(UINT[dtype])


def test_a_strided_values_products_repair_finds_its_zeros_and_infinities():
    """`merged` at T 64 (heads side by side: the banded products' rows of B and C strided
    by heads × hd, their repair's flags by column): the first 24 rows of head 0 fold only
    −0 terms in their panels (v −0 there), where the whole fold adds +0·v after them (+0);
    a v hidden from the rows before it infinite or NaN (head 1); f32 and f64, on every
    executor."""
    for realize, dtype in (("f64", np.float64), ("f32", np.float32)):
        schedule, args, _ = lowered(NAN_BITS, "merged", (("T", 64),), realize)
        rng = np.random.default_rng(5)
        q, k = (rng.standard_normal((64, 2, 16)).astype(dtype) for _ in range(2))
        v = np.abs(rng.standard_normal((64, 2, 16))).astype(dtype) + 1
        v[:24, 0, 2] = -0.0
        v[50, 1, 3], v[60, 1, 5] = np.inf, np.nan  # head 1 (in head 0 they would send
        # every panel to the whole fold, past the −0s' check)
        runs = executors(schedule, [q, k, v])
        assert all(same(got, runs[0]) for got in runs[1:]), realize
        o = runs[0][0]
        assert (o[:24, 0, 2] == 0).all() and not np.signbit(o[:24, 0, 2]).any()  # −0 + +0
        assert np.isnan(o[:50, 1, 3]).all() and np.isnan(o[:60, 1, 5]).all()
        assert np.isfinite(o[:50, 1, :3]).all() and np.isfinite(o[:, 0]).all()
