"""The kernel interpreter on laid-out kernels: every point of `layout_space` of every nest of
the tutorial's and the examples' entries computes point 0's bits (L1067), and so do the
run's layouts (tiles, packed operands, GEMM statements);
a GEMM statement that is not the kernel's is refused, and computes other bits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from kernel_entries import ENTRIES, lowered
from presk_kernel.contract import recognize
from presk_kernel.fuse import fuse
from presk_kernel.interp import NUMPY, run_kernel, run_schedule, to_storage
from presk_kernel.interp_laid import NotLaidOut, block_count, chunks, pieces, run_laid_kernel
from presk_kernel.ir import Layout, elements
from presk_kernel.layout import (
    apply_layout,
    check_layout,
    lay_out,
    layout_space,
    parallel_loops,
    run_layout,
    with_gemm,
)


def launches_with_views(schedule, inputs):
    """Each launch with copies of its buffers as the entry's run gives them to it."""
    memory = {b.id: np.zeros(elements(b.axes), dtype=NUMPY[b.dtype]) for b in schedule.buffers}
    for buf, value in zip(schedule.inputs, inputs, strict=True):
        memory[buf][...] = to_storage(value, schedule.buffers[buf].dtype).reshape(-1)
    for launch in schedule.launches:
        views = [
            memory[a.buf][a.offset : a.offset + b.size].reshape(b.shape)
            for b, a in zip(launch.kernel.buffers, launch.args, strict=True)
        ]
        yield launch.kernel, [v.copy() for v in views]
        run_kernel(launch.kernel, views)


def outputs(k, views, layout: Layout) -> list[bytes]:
    return laid_outputs(apply_layout(k, layout), views)


def laid_outputs(laid, views) -> list[bytes]:
    mine = [v.copy() for v in views]
    run_laid_kernel(laid, mine)
    return [mine[i].tobytes() for i in range(len(laid.inputs), len(laid.buffers))]


def variants(k, threads: int) -> list[Layout]:
    """Every point of the space; for a contraction each point with its operands packed and
    its GEMM statement; the run's layout (tiles, packing) and a tiled point."""
    space = layout_space(k, threads)
    out = list(space)
    g = recognize(k)
    if g is not None:
        out += [with_gemm(k, dataclasses.replace(p, pack=(g.a, g.b))) for p in space]
    out.append(run_layout(k, threads))
    loops = parallel_loops(k)
    if loops:
        tiles = tuple((lp.var, 3) for lp in loops)  # tiles that do not divide the extents
        out.append(dataclasses.replace(space[-1], tiles=tiles, blocks=()))
    return out


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_every_point_of_every_space_computes_point_0s_bits(realize):
    points = runs = 0
    for file, entry, dims, consts in ENTRIES:
        schedule, args, _ = lowered(file, entry, dims, realize, consts=consts)
        for k, views in launches_with_views(fuse(schedule)[0], args):
            space = layout_space(k, 1)
            reference = outputs(k, views, space[0])  # the natural order, no lanes, one thread
            seen = set()  # a layout of both thread counts (no split) runs once
            # The laid-out kernels that gave point 0's bits, their layout field aside: the
            # laid-out interpreter reads no layout field (presk_kernel.interp_laid), so two
            # layouts applied to the same statements (a GEMM statement under any tiles or
            # lanes, blocks of one tile) run the same arithmetic, and the second runs not
            # again. About half of the points: what differs is applied once.
            passed = set()
            for threads in (1, 3):
                for layout in variants(k, threads):
                    if layout in seen:
                        continue
                    seen.add(layout)
                    assert check_layout(k, layout) is None, layout
                    points += 1
                    laid = apply_layout(k, layout)
                    statements = dataclasses.replace(laid, layout=None)
                    if statements in passed:
                        continue
                    assert laid_outputs(laid, views) == reference, (entry, k.name, str(layout))
                    passed.add(statements)
                    runs += 1
    print(f"{points} layouts of {realize} nests ({runs} laid-out kernels) ran on the interpreter")
    assert points > 2500  # the small spaces (presk_kernel.layout_space) at 1 and 3 threads


def test_the_run_layouts_give_the_plain_interpreters_bits():
    for file, entry, dims, consts in ENTRIES:
        for realize in ("f64", "f32", "bf16"):
            schedule, args, _ = lowered(file, entry, dims, realize, consts=consts)
            fused = fuse(schedule)[0]
            plain = run_schedule(fused, args)
            laid = run_schedule(lay_out(fused, 2), args, laid=True)
            assert [x.tobytes() for x in plain] == [x.tobytes() for x in laid], (entry, realize)


def test_a_gemm_statement_runs_from_its_strides():
    # a large contraction: the run's layout packs it and records its GEMM statement
    schedule, args, _ = lowered("tutorial/01_linear.psk", "Linear{64, 64}.apply", (("batch", 16),))
    fused = fuse(schedule)[0]
    laid = lay_out(fused)
    gemms = [lc.kernel.layout.gemm for lc in laid.launches if lc.kernel.layout.gemm]
    assert gemms and gemms[0].rows * gemms[0].cols * gemms[0].depth >= 1 << 15
    plain = run_schedule(fused, args)
    assert [x.tobytes() for x in run_schedule(laid, args, laid=True)] == [
        x.tobytes() for x in plain
    ]
    # a near miss: a GEMM statement with one stride wrong computes other values
    k = next(lc.kernel for lc in laid.launches if lc.kernel.layout.gemm)
    g = k.layout.gemm
    wrong = dataclasses.replace(g, depth=g.depth - 1)  # one term fewer
    assert check_layout(k, dataclasses.replace(k.layout, gemm=wrong)) is not None
    (k0, views), *_ = [(kk, v) for kk, v in launches_with_views(fused, args) if kk.site == k.site]
    good = outputs(k0, views, k.layout)
    assert good != outputs(k0, views, dataclasses.replace(k.layout, gemm=wrong))


def test_the_blocks_are_the_layouts():
    assert pieces(0, 10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert pieces(0, 2, 4) == [(0, 1), (1, 2)]
    assert chunks(2, 9, 4) == [(2, 6), (6, 9)]
    schedule, _, _ = lowered("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 3)))
    k = schedule.launches[0].kernel
    loops = parallel_loops(k)
    inner = loops[-1]
    lay = Layout(order=tuple(lp.var for lp in loops), lanes=inner.var, width=2)
    # lanes of 2 over an extent of 3: two strips
    assert block_count(apply_layout(k, lay)) == 2
    split = dataclasses.replace(lay, split=loops[0].var, threads=2)
    assert block_count(apply_layout(k, split)) == 2 * min(2, loops[0].extent)
    with pytest.raises(NotLaidOut, match="not applied"):  # a layout is the layout pass's
        run_laid_kernel(dataclasses.replace(k, layout=split), [])
