"""Row fusion in the compiled entry (presk_kernel.rows, docs/native.md "A row's folds with
their producers and consumers"): the entry compiles the kernels that sweep one row loop as
one, and gives the bits of the same entry compiled without it (`rows=False`) — a LayerNorm
and its adjoint, an RMS norm, a row's variance, a row divided by its largest magnitude, at
odd row lengths, rows holding NaN and infinities, f32 and f64, one and two threads — and the
kernel interpreter's, a NaN's sign aside where the executors already differ (the unfused
entry too)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_entries import nan_aside
from kernel_entries import rows_case as _case
from presk_cback.native import NativeEntry
from presk_kernel import written
from presk_kernel.interp import run_schedule
from presk_kernel.rows import fuse_rows
from presk_kernel.written import zeroed


@pytest.mark.parametrize(
    "entry, d, realize, threads",
    [
        ("layer_norm_dx", 13, "f32", 1),
        ("layer_norm_dx", 192, "f32", 2),
        ("layer_norm_dx", 7, "f64", 2),
        ("rms_norm", 1000, "f32", 1),
        ("row_variance", 13, "f64", 1),
        ("by_row_max", 7, "f32", 2),
    ],
)
def test_the_row_fused_entry_gives_the_unfused_entrys_bits(compiler, entry, d, realize, threads):
    laid, inputs = _case(entry, d, realize, threads)
    unfused = NativeEntry(laid, rows=False)
    fused = NativeEntry(laid)
    assert len(fused.schedule.launches) == 1 < len(unfused.schedule.launches)
    want = unfused.run(inputs)
    got = fused.run(inputs)
    assert [x.tobytes() for x in got] == [x.tobytes() for x in want], (entry, d, threads)
    assert nan_aside(got, run_schedule(laid, inputs))
    assert np.isnan(got[0]).any() and not np.isnan(got[0][0]).any()  # NaN rows, a finite one


def test_a_row_fused_kernels_own_temporaries_need_no_zeros(monkeypatch):
    # a temporary the row fusion still stores (an element read by several of the adjoint's
    # passes) and reads back in the same row: written whole before it is read
    laid, _ = _case("layer_norm_dx", 13, "f32")
    fused = fuse_rows(laid)
    assert zeroed(fused) == [] == zeroed(laid)
    (k,) = [lc.kernel for lc in fused.launches]
    assert written.stored_first(k)
    monkeypatch.setattr(written, "stored_first", lambda k: set())
    assert zeroed(fused)  # the reads after the store, seen as reads: zeroed first


def test_the_c_export_writes_a_row_fused_kernel(compiler, tmp_path):
    # the C export compiles the schedule it is given (the plan's: it fuses no rows itself,
    # the spec's launches); given a row-fused one, its program gives the native bits
    import subprocess

    from presk_cback.export_c import c_program
    from presk_core import data as D

    laid, inputs = _case("rms_norm", 13, "f64")
    fused = fuse_rows(laid)
    assert len(fused.launches) == 1
    shapes = [tuple(a.length for a in fused.buffers[b].axes) for b in fused.inputs]
    ins = "(" + ", ".join(f"ℝ[{', '.join(map(str, s))}]" for s in shapes) + ")"
    (out,) = fused.outputs
    shape = tuple(a.length for a in fused.buffers[out].axes)
    outs = f"ℝ[{', '.join(map(str, shape))}]"
    head = tmp_path / "h.psk.d"
    D.write(str(head), outs, D.type_of(outs), [[np.zeros(shape)]])
    header = head.read_bytes()[: D.read_header(str(head)).header_size]
    program = c_program(fused, {}, "e", header, 1)
    assert program.launches == 1
    for name, text in program.files.items():
        (tmp_path / name).write_text(text)
    D.write(str(tmp_path / "in.psk.d"), ins, D.type_of(ins), [inputs])
    flags = ["-std=c11", "-ffp-contract=off", "-O2"]
    sources = ["main.c", "model.c", "presk_rt.c", "presk_libm.c"]
    build = subprocess.run(
        ["cc", *flags, "-o", "model", *sources, "-lm"], cwd=tmp_path, capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run(["./model", "in.psk.d", "out.psk.d"], cwd=tmp_path, capture_output=True)
    assert run.returncode == 0, run.stderr
    got = D.read_reals(str(tmp_path / "out.psk.d")).reshape(shape)
    want = NativeEntry(laid, rows=False).run(inputs)[0]
    assert got.tobytes() == want.tobytes() and np.isnan(got).any()


@pytest.mark.parametrize("function", ["RMSNorm.apply.fwd", "RMSNorm.apply.bwd", "loss.fwd"])
def test_a_mixed_realizations_rows_keep_their_types(compiler, function):
    # the tutorial's gradient with one function in f32, the rest in f64 (what `presk solve
    # --step` measures): a row group holds kernels of one arithmetic, or the fused kernel's
    # C computes one member's statements in the other's type
    from kernel_entries import floats, lowered
    from presk_kernel.fuse import fuse
    from presk_kernel.layout import lay_out
    from presk_kernel.realization import Realization

    r = Realization("f64", functions=((function, "f32"),))
    schedule, args, _ = lowered("tutorial/07_train.psk", "loss", (("B", 8),), r, True)
    laid = lay_out(fuse(schedule)[0], 1)
    inputs = [floats(a) for a in args]
    fused = NativeEntry(laid)
    assert len(fused.schedule.launches) < len(laid.launches)
    want = NativeEntry(laid, rows=False).run(inputs)
    assert [x.tobytes() for x in fused.run(inputs)] == [x.tobytes() for x in want]
