"""presk_cback.export_c on kernels built by hand: the program's files, each kernel a
PRESK_KERNEL function bounded by `lo` and `hi`, a launch divided among threads an OpenMP
region; built and run, it gives the native backend's bits (NativeEntry on the same
schedule), with and without OpenMP."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from kernel_entries import contraction_schedule
from presk_cback.export_c import c_program
from presk_cback.native import NativeEntry
from presk_core import data as D
from presk_kernel.ir import Layout


def _header(tmp_path, text: str, arrays: list) -> bytes:
    """The .psk.d header of one sample of `text` (what main.c writes before its outputs)."""
    path = tmp_path / "h.psk.d"
    D.write(str(path), text, D.type_of(text), [arrays])
    return path.read_bytes()[: D.read_header(str(path)).header_size]


def _build_and_run(tmp_path, schedule, threads: int, openmp: str) -> tuple[np.ndarray, str]:
    x = np.random.default_rng(1).standard_normal(tuple(a.length for a in schedule.buffers[0].axes))
    w = np.random.default_rng(2).standard_normal(tuple(a.length for a in schedule.buffers[1].axes))
    out_shape = tuple(a.length for a in schedule.buffers[2].axes)
    ins = f"(ℝ[{', '.join(map(str, x.shape))}], ℝ[{', '.join(map(str, w.shape))}])"
    outs = f"ℝ[{', '.join(map(str, out_shape))}]"
    program = c_program(schedule, {}, "e", _header(tmp_path, outs, [np.zeros(out_shape)]), threads)
    folder = tmp_path / f"prog{openmp}"
    folder.mkdir()
    for name, text in program.files.items():
        (folder / name).write_text(text)
    D.write(str(folder / "in.psk.d"), ins, D.type_of(ins), [[x, w]])
    sources = ["main.c", "model.c", "presk_rt.c", "presk_libm.c"]
    flags = ["-std=c11", "-ffp-contract=off", "-O2", "-Wall", "-Wextra", "-Werror"]
    build = subprocess.run(
        ["cc", *flags, *([openmp] if openmp else []), "-o", "model", *sources, "-lm"],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run(["./model", "in.psk.d", "out.psk.d"], cwd=folder, capture_output=True)
    assert run.returncode == 0, run.stderr
    want = NativeEntry(schedule).run([x, w])[0]
    got = D.read_reals(str(folder / "out.psk.d")).reshape(out_shape)
    assert got.tobytes() == np.asarray(want, dtype=np.float64).tobytes()
    return got, program.files["model.c"] + program.files["kernels.c"]


def test_a_kernel_is_one_function_bounded_by_lo_and_hi(tmp_path):
    schedule = contraction_schedule(3, 4, 5)
    program = c_program(schedule, {}, "e", _header(tmp_path, "ℝ[3, 5]", [np.zeros((3, 5))]))
    kernels = program.files["kernels.c"]
    head = re.search(r"^PRESK_KERNEL void k0\((.*)\) \{$", kernels, re.M)
    assert head, kernels
    assert head.group(1) == (
        "const double *restrict in0, const double *restrict in1, double *restrict out,"
        " int64_t lo, int64_t hi"
    )
    assert "// kernel ein" in kernels  # under its PSK-Kernel text
    assert re.search(r"for \(int64_t v_i = lo; v_i < hi; v_i\+\+\)", kernels)
    # `w` is an OpenMP region's thread count in model.c: the buffer `w` is `w_`
    assert "k0(x, w_, result, 0, 3);" in program.files["model.c"]
    assert (program.launches, program.kernels, program.functions, program.split) == (1, 1, 0, 0)


@pytest.mark.parametrize("openmp", ["-fopenmp", ""])
def test_the_program_gives_the_native_bits(tmp_path, openmp):
    _build_and_run(tmp_path, contraction_schedule(7, 33, 9), 1, openmp)


@pytest.mark.parametrize("openmp", ["-fopenmp", ""])
def test_a_divided_launch_is_an_openmp_region(tmp_path, openmp):
    """The batch loop of a batched contraction divided between two threads: each thread
    runs the kernel on its piece, the same bits as one thread."""
    layout = Layout(order=("b", "i", "j"), split="b", threads=2)
    schedule = contraction_schedule(16, 24, 16, batch=6, layout=layout)
    _, c = _build_and_run(tmp_path, schedule, 2, openmp)
    assert "#pragma omp parallel num_threads(presk_team(" in c
    assert "k0(x, w_, result, 6 * t / w, 6 * (t + 1) / w);" in c
