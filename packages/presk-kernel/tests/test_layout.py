"""Layouts: the default one, its space, and what a layout may not do."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kernel_entries import ENTRIES, contraction_schedule, lowered
from presk_kernel.contract import recognize
from presk_kernel.fuse import fuse
from presk_kernel.ir import Kernel, Layout, Reduce, format_kernel, plain
from presk_kernel.layout import (
    PACK_AT,
    ROW_KBLOCK,
    LayoutError,
    applies,
    apply_layout,
    check_layout,
    default_layout,
    lay_out,
    layout_space,
    natural_layout,
    parallel_loops,
    run_layout,
    with_gemm,
)


def kernels():
    for file, entry, dims, consts in ENTRIES:
        for realize in ("f64", "f32"):
            schedule, _, _ = lowered(file, entry, dims, realize, consts=consts)
            yield from (lc.kernel for lc in schedule.launches)


def _reduce_vars(body) -> set[str]:
    out = set()
    for s in body:
        if isinstance(s, Reduce):
            out |= {v for v, _, _ in s.vars} | _reduce_vars(s.body)
        elif hasattr(s, "body"):
            out |= _reduce_vars(s.body)
    return out


def test_every_kernel_gets_a_valid_default_layout():
    for k in kernels():  # lowered: its loops' order; the layout pass gives the default
        assert k.layout == natural_layout(k) and not applies(k.layout)
        laid = apply_layout(k, default_layout(k))
        assert check_layout(laid, laid.layout) is None, k.name
        assert laid.layout.lanes not in _reduce_vars(k.body)
        assert plain(laid.body) == k.body or laid.layout.order != k.layout.order


def test_lanes_take_the_innermost_parallel_loop_when_it_fills_a_vector():
    schedule, _, _ = lowered("tutorial/07_train.psk", "loss", (("B", 8),), "f32")
    schedule = lay_out(schedule)
    k = next(lc.kernel for lc in schedule.launches if lc.kernel.name == "mean axis model")
    # f32 lanes are 8 wide: batch (8) is the parallel loop, model (4) the fold's
    assert k.layout.lanes == parallel_loops(k)[-1].var and k.layout.width == 8
    dot = next(lc.kernel for lc in schedule.launches if lc.kernel.name == "dot")
    assert dot.layout.tiles and dot.layout.lanes is None  # 4 columns: no full f32 vector


def test_threads_split_a_large_nest_only():
    for k in kernels():
        layout = default_layout(k, threads=2)
        assert layout.split is None  # the tutorial's nests are small
    schedule, _, _ = lowered("tutorial/03_attention.psk", "attend", (("B", 16), ("T", 32)))
    big = schedule.launches[0].kernel
    assert default_layout(big, threads=2).split == parallel_loops(big)[0].var


def test_a_layout_that_would_change_bits_is_refused():
    schedule, _, _ = lowered("tutorial/07_train.psk", "loss", (("B", 8),))
    k = next(lc.kernel for lc in schedule.launches if lc.kernel.name == "dot")
    fold = next(iter(_reduce_vars(k.body)))
    assert "reduction keeps its order" in check_layout(k, replace(k.layout, lanes=fold))
    assert "permutation" in check_layout(k, replace(k.layout, order=(fold,)))
    assert "only inputs" in check_layout(k, replace(k.layout, pack=(2,)))


@pytest.mark.parametrize("threads", [1, 2])
def test_every_point_of_the_space_is_valid(threads):
    for k in kernels():
        space = layout_space(k, threads)
        assert space and all(check_layout(k, p) is None for p in space)
        assert len(set(space)) == len(space)


def test_the_layout_prints_as_the_kernel_shows_it():
    assert str(Layout(("i0", "i1"), (("i1", 16),), "i1", 4, "i0", 2, (1,))) == (
        "order i0 i1, tile [i1: 16], lanes i1 x4, split (i0, 2), pack %1"
    )


# ---- the layout pass -----------------------------------------------------------------------


def _linear(batch: int):
    schedule, _, _ = lowered("tutorial/01_linear.psk", "Linear{64, 64}.apply", (("batch", batch),))
    return fuse(schedule)[0]


def test_the_layout_pass_packs_a_large_contraction_and_records_its_gemm():
    small, big = lay_out(_linear(7)), lay_out(_linear(8))  # 7·64·64 < 2^15 <= 8·64·64
    (k_small,) = [lc.kernel for lc in small.launches if recognize(lc.kernel)]
    (k_big,) = [lc.kernel for lc in big.launches if recognize(lc.kernel)]
    assert k_small.layout == default_layout(k_small) and k_small.layout.gemm is None
    g = k_big.layout.gemm
    assert g == recognize(k_big) and (g.rows, g.cols, g.depth) == (8, 64, 64)
    assert k_big.layout.pack == (g.a, g.b) and g.rows * g.cols * g.depth >= PACK_AT
    assert check_layout(k_big, k_big.layout) is None
    assert "pack %0, %1, gemm 8x64x64" in format_kernel(k_big)
    # every other kernel keeps the default layout at the threads of the run
    two = lay_out(_linear(8), threads=2)
    for lc in two.launches:
        if lc.kernel.layout.gemm is None:
            assert lc.kernel.layout == default_layout(lc.kernel, 2)


def test_a_product_of_one_row_reads_its_matrix_in_strips_not_through_the_gemm():
    import numpy as np
    from presk_kernel.interp import run_schedule
    from presk_kernel.strips import WIDTH

    rng = np.random.default_rng(0)
    args = [rng.normal(size=(1, 200)), rng.normal(size=(200, 170))]  # 34000 >= PACK_AT
    for dtype in ("f64", "f32"):
        k = contraction_schedule(1, 200, 170, dtype).launches[0].kernel
        g = recognize(k)
        assert g.rows * g.cols * g.depth >= PACK_AT
        one, two = run_layout(k, 1), run_layout(k, 2)
        assert one.gemm is None and one.pack == () and (g.n, 170) in one.tiles  # n whole
        assert one.lanes == g.n and one.split is None and check_layout(k, one) is None
        assert one.kblock == ROW_KBLOCK and one.blocks[:2] == (g.n, g.k)  # B by 16 rows
        assert (two.split, two.threads, two.depth) == (g.n, 2, 0)  # the strips among threads:
        assert (g.n, 2 * WIDTH[dtype] if dtype == "f32" else 3 * WIDTH[dtype]) in two.tiles
        assert two.kblock == ROW_KBLOCK  # a run of whole strips a thread, 16 rows at a time
    plain = run_schedule(contraction_schedule(1, 200, 170, "f32"), args)[0].tobytes()
    laid = contraction_schedule(1, 200, 170, "f32", layout=two)  # natively: tests/native
    assert run_schedule(laid, args, laid=True)[0].tobytes() == plain
    # two rows, or a matrix read across its rows (B transposed), keep the GEMM
    assert run_layout(contraction_schedule(2, 200, 170).launches[0].kernel).gemm is not None
    across = contraction_schedule(1, 200, 170, transposed=True).launches[0].kernel
    assert run_layout(across).gemm is not None


def test_a_gemm_statement_must_be_the_kernels_and_read_packed_operands():
    k = next(lc.kernel for lc in lay_out(_linear(8)).launches if lc.kernel.layout.gemm)
    g = k.layout.gemm
    assert "packed" in check_layout(k, replace(k.layout, pack=()))
    assert "not the kernel's" in check_layout(k, replace(k.layout, gemm=replace(g, depth=3)))
    assert "packed once" in check_layout(k, replace(k.layout, pack=(0, 0, 1)))
    assert with_gemm(k, replace(k.layout, gemm=None)) == k.layout
    assert with_gemm(k, replace(k.layout, pack=(), gemm=None)).gemm is None


def test_a_plan_lays_out_its_sites_and_refuses_an_illegal_layout():
    fused = _linear(8)
    k = next(lc.kernel for lc in fused.launches if recognize(lc.kernel))
    loops = [lp.var for lp in parallel_loops(k)]
    turned = Layout(order=tuple(reversed(loops)), pack=(0, 1))
    laid = lay_out(fused, plan={k.site: turned})
    got = next(lc.kernel for lc in laid.launches if lc.kernel.site == k.site)
    assert got.layout == replace(turned, gemm=recognize(k))  # a planned pack gets its GEMM
    with pytest.raises(LayoutError, match="reduction keeps its order") as e:
        fold = next(iter(_reduce_vars(k.body)))
        lay_out(fused, plan={k.site: replace(default_layout(k), lanes=fold)})
    assert e.value.code == "E7040"
    with pytest.raises(LayoutError, match="nowhere/%9") as e:
        lay_out(fused, plan={"nowhere/%9": Layout()})
    assert e.value.code == "E7041"


def test_only_a_gemm_statement_packs():
    fused = _linear(8)
    k = next(lc.kernel for lc in fused.launches if recognize(lc.kernel))
    other = next(lc.kernel for lc in fused.launches if recognize(lc.kernel) is None)
    one = replace(default_layout(k), pack=(0,))  # one operand: no GEMM statement reads it
    assert "only a GEMM statement packs" in check_layout(k, with_gemm(k, one))
    with pytest.raises(LayoutError, match="only a GEMM statement packs") as e:
        lay_out(fused, plan={k.site: one})
    assert e.value.code == "E7040"
    with pytest.raises(LayoutError, match="only a GEMM statement packs"):
        lay_out(fused, plan={other.site: replace(default_layout(other), pack=(0,))})
    # applied directly, a pack without a GEMM statement is dropped: it changes no statement
    laid = apply_layout(k, one)
    assert laid.layout == replace(one, pack=()) and laid == apply_layout(k, laid.layout)
    assert check_layout(k, laid.layout) is None


def test_a_serial_loop_keeps_its_order():
    from presk_kernel.ir import Affine, Axis, Buffer, Kernel, Load, Loop, Op, Store

    i = Affine.var("i")
    add = Store(1, (Load(0, (i,)),), Op("add", (Load(1, (Load(0, (i,)),)), Load(0, (i,)))))
    k = Kernel("scatter", "s/%1", (Buffer(0, "i64", (Axis(None, 8),)),),
               (Buffer(1, "i64", (Axis(None, 8),)),), (Loop("i", None, 8, (add,), True),))  # fmt: skip
    assert check_layout(k, default_layout(k, 2)) is None
    assert "serial loop" in check_layout(k, Layout(order=("i",), lanes="i", width=4))
    assert "serial loop" in check_layout(k, Layout(order=("i",), split="i", threads=2))


def test_strips_split_among_threads_share_their_lanes_evenly():
    """A strip loop split among threads (a `sum_to`'s columns) in strips that give each
    thread an even share: 192 columns at two threads in 4 strips of 48 (3 of 64 gave one
    thread 128), no narrower than half the strip; one thread, or an even count, keeps the
    width. The same bits as one thread's strips."""
    import numpy as np
    from presk_kernel.interp import run_schedule
    from presk_kernel.ir import (
        Affine,
        Arg,
        Axis,
        Buffer,
        For,
        HostBuffer,
        Launch,
        Load,
        Loop,
        Schedule,
        Store,
        Var,
    )
    from presk_kernel.strips import WIDTH, shared

    assert shared(64, 192, 2, 8) == 48 and shared(64, 192, 1, 8) == 64
    assert shared(64, 768, 2, 8) == 64 and shared(64, 170, 2, 8) == 48
    assert shared(64, 40, 2, 8) == 32 and shared(32, 192, 2, 4) == 32

    def strips(body):
        for s in body:
            if isinstance(s, For) and s.strip:
                yield s.strip, s.threads
            yield from strips(getattr(s, "body", ()))

    rows, cols = 2048, 192  # each column's sum down 2048 rows: a nest split among threads
    i, j = Affine.var("i"), Affine.var("j")
    fold = Reduce("s", "add", (("i", None, rows),), (), (Load(0, (i, j)),), "f32")
    body = (Loop("j", "model", cols, (fold, Store(1, (j,), Var("s")))),)
    x, out = (Axis(None, rows), Axis("model", cols)), (Axis("model", cols),)
    k = Kernel("sum_to", "s/%1", (Buffer(0, "f32", x),), (Buffer(1, "f32", out),), body, "f32")
    host = (HostBuffer(0, "f32", x, "x", "input"), HostBuffer(1, "f32", out, "out", "output"))

    def schedule(kernel):
        return Schedule("s", (), host, (Launch(kernel, (Arg(0), Arg(1))),), (0,), (1,))

    args = [np.random.default_rng(1).normal(size=(rows, cols)).astype(np.float32)]
    plain_bits = run_schedule(schedule(k), args)[0].tobytes()
    for threads, strip in ((1, (WIDTH["f32"], 1)), (2, (48, 2))):
        laid = apply_layout(replace(k, layout=run_layout(k, threads)))
        assert list(strips(laid.body)) == [strip]
        assert run_schedule(schedule(laid), args, laid=True)[0].tobytes() == plain_bits
