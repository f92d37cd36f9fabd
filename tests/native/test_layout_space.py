"""Every point of a nest's layout space computes point 0's bits natively too (L1067): the
tutorial's and the examples' entries compiled with their kernels at sampled points of their
spaces (orders, lanes, splits over threads, tiles, packed operands through the GEMM), each
compared bit for bit with point 0 (the natural order, no lanes, one thread) on the kernel
interpreter. The kernel interpreter's half walks every point (packages/presk-kernel/tests/
test_laid.py); compiling a schedule per point would take minutes, so each compiled schedule
here puts every one of its kernels at a random point, runs it natively and on the kernel
backend (`--backend kernel`: the laid-out interpreter), and says how many points it ran."""

from __future__ import annotations

import dataclasses
import random

import pytest
from kernel_entries import ENTRIES, contraction_schedule, lowered
from presk_cli.native import executor
from presk_kernel.contract import recognize
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.layout import (
    ROW_KBLOCK,
    apply_layout,
    check_layout,
    layout_space,
    parallel_loops,
    run_layout,
    with_gemm,
)

SAMPLES = 2  # compiled schedules per entry besides point 0's


def relaid(schedule, choose):
    launches = []
    for launch in schedule.launches:
        layout = choose(launch.kernel)
        assert check_layout(launch.kernel, layout) is None, layout
        k = apply_layout(launch.kernel, layout)  # what the layout pass writes for it
        launches.append(dataclasses.replace(launch, kernel=k))
    return dataclasses.replace(schedule, launches=tuple(launches))


def candidates(k):
    """The space at two threads, each point packed through the GEMM for a contraction, a
    tiled point, and the run's layout."""
    space = layout_space(k, 2)
    out = list(space)
    g = recognize(k)
    if g is not None:
        out += [with_gemm(k, dataclasses.replace(p, pack=(g.a, g.b))) for p in space]
    loops = parallel_loops(k)
    if loops:
        out.append(
            dataclasses.replace(space[-1], tiles=tuple((lp.var, 3) for lp in loops), blocks=())
        )
    out.append(run_layout(k, 2))
    return out


@pytest.mark.parametrize("case", ENTRIES, ids=lambda c: c[1])
def test_sampled_points_compute_point_0s_bits_natively(compiler, case):
    from presk_cback.native import NativeEntry

    file, entry, dims, consts = case
    schedule, args, _ = lowered(file, entry, dims, "f64", consts=consts)
    fused = fuse(schedule)[0]
    point0 = relaid(fused, lambda k: layout_space(k, 1)[0])
    reference = [x.tobytes() for x in run_schedule(point0, args)]
    assert [x.tobytes() for x in NativeEntry(point0).run(args)] == reference
    rng = random.Random(f"{file}:{entry}")
    points = 0
    for _ in range(SAMPLES):
        sample = relaid(fused, lambda k: rng.choice(candidates(k)))
        points += len(sample.launches)
        got = [x.tobytes() for x in NativeEntry(sample).run(args)]
        assert got == reference, [str(lc.kernel.layout) for lc in sample.launches]
        kernel = executor(sample, "kernel")(args)  # `--backend kernel`: the same layouts
        assert [x.tobytes() for x in kernel] == reference
    print(f"{entry}: {points} kernels at sampled points, natively, of {len(fused.launches)}")


def test_a_contraction_over_no_term_is_zeros_packed_or_not(compiler):
    import numpy as np
    from presk_cback.native import NativeEntry
    from presk_kernel.ir import Layout

    args = [np.zeros((3, 0)), np.zeros((0, 4))]
    outs = []
    for pack in ((), (0, 1)):  # x[i, p]·w[p, j] summed over no p, in loops or packed
        s = contraction_schedule(3, 0, 4, layout=Layout(order=("i", "j"), pack=pack))
        outs += [NativeEntry(s).run(args)[0], run_schedule(s, args, laid=True)[0]]
    assert recognize(s.launches[0].kernel) is None  # no row has a stride in an empty A
    assert s.launches[0].kernel.layout.pack == ()  # so no GEMM statement: the pack dropped
    assert all(o.tobytes() == np.zeros((3, 4)).tobytes() for o in outs)


def test_dump_shows_the_layouts_a_native_run_compiles():
    from helpers import presk_ok

    entry = ("tutorial/01_linear.psk", "--entry", "Linear{64, 64}.apply", "--dim", "batch=8")
    out = presk_ok("dump", entry[0], "--stage", "kernel", *entry[1:]).stdout
    sites = [line for line in out.splitlines() if line.startswith("  // site")]
    assert len(sites) == 2 and "pack %0, %1, gemm 8x64x64" in sites[0], sites
    assert "gemm" not in sites[1]


def test_points_of_the_spaces_compute_point_0s_bits_natively(compiler):
    """presk_kernel.layout_space's points (k-blocks, block orders, splits at a depth, packs,
    two-pass softmaxes among them), each kernel of an entry at a random point of its full
    space, compiled and compared with point 0's bits on the kernel interpreter."""
    from presk_cback.native import NativeEntry
    from presk_kernel.layout_space import points

    ran = 0
    for file, entry, dims, consts in [
        ("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 40)), ()),
        *ENTRIES[:4],
    ]:
        for realize in ("f64", "f32"):
            schedule, args, _ = lowered(file, entry, dims, realize, consts=consts)
            fused = fuse(schedule)[0]
            point0 = relaid(fused, lambda k: points(k, "full", 2)[0].layout)
            reference = [x.tobytes() for x in run_schedule(point0, args, laid=True)]
            rng = random.Random(f"{file}:{entry}:{realize}")

            def pick(k, rng=rng):
                good = [p for p in points(k, "full", 2) if p.why is None]
                rare = [p for p in good if p.layout.kblock or p.layout.passes == 2]
                return rng.choice(rare if rare and rng.random() < 0.5 else good).layout

            sample = relaid(fused, pick)
            got = [x.tobytes() for x in NativeEntry(sample).run(args)]
            assert got == reference, [str(lc.kernel.layout) for lc in sample.launches]
            ran += len(sample.launches)
    print(f"{ran} kernels at sampled points of their spaces, natively")


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_a_product_of_one_row_in_strips_computes_the_gemms_bits_natively(compiler, dtype):
    """One row by a matrix (presk serve's step): the run's layout reads the matrix in strips
    of lanes, in blocks of ROW_KBLOCK rows each across every strip (the partial sums
    resumed from C; 200 rows: a last block of 8), split among threads
    (presk_kernel.layout.row_layout), not through the GEMM; the bits are the GEMM's, at one
    thread and at two, and the kernel interpreter's, laid out as the run lays it."""
    import numpy as np
    from presk_cback.native import NativeEntry
    from presk_kernel.layout import default_layout

    rng = np.random.default_rng(1)
    args = [rng.normal(size=(1, 200)), rng.normal(size=(200, 170))]
    k = contraction_schedule(1, 200, 170, dtype).launches[0].kernel
    g = recognize(k)
    packed = with_gemm(k, dataclasses.replace(default_layout(k), pack=(g.a, g.b)))
    gemm = NativeEntry(contraction_schedule(1, 200, 170, dtype, layout=packed)).run(args)[0]
    assert (
        gemm.tobytes() == run_schedule(contraction_schedule(1, 200, 170, dtype), args)[0].tobytes()
    )
    for threads in (1, 2):
        layout = run_layout(k, threads)
        assert layout.gemm is None and layout.kblock == ROW_KBLOCK
        s = contraction_schedule(1, 200, 170, dtype, layout=layout)
        assert NativeEntry(s).run(args)[0].tobytes() == gemm.tobytes(), (threads, str(layout))
        assert run_schedule(s, args, laid=True)[0].tobytes() == gemm.tobytes()
