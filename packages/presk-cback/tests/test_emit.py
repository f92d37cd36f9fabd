"""Kernels as C: the native entry gives the kernel interpreter's bits on the tutorial's
entries and its training step, in f64, f32 and bf16, fused or not, whatever the layout
(orders, tiles, lanes, threads); gathers out of range are caught; the C is -Wall -Wextra
clean."""

import dataclasses
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from presk_cback.arena import arena_layout
from presk_cback.contract import contraction, perfect_nest
from presk_cback.host import entry_source
from presk_cback.native import NativeEntry
from presk_cback.toolchain import find_toolchain
from presk_kernel.fuse import fuse
from presk_kernel.interp import KernelError, run_schedule
from presk_kernel.ir import (
    Affine,
    Arg,
    Axis,
    Buffer,
    Const,
    HostBuffer,
    Index,
    Kernel,
    Launch,
    Layout,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    Var,
)
from presk_kernel.layout import apply_layout, check_layout, parallel_loops, with_gemm
from presk_kernel.written import zeroed

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "presk-kernel" / "tests"))
from kernel_entries import (  # noqa: E402
    ENTRIES,
    MINIGPT,
    contraction_schedule,
    laid_default,
    lowered,
    same_bits,
)

TRAIN = ("tutorial/07_train.psk", "loss", (("B", 8),))


def relayout(schedule: Schedule, fn) -> Schedule:
    launches = []
    for launch in schedule.launches:
        layout = fn(launch.kernel)
        assert check_layout(launch.kernel, layout) is None, layout
        launches.append(dataclasses.replace(launch, kernel=apply_layout(launch.kernel, layout)))
    return dataclasses.replace(schedule, launches=tuple(launches))


def turned(k: Kernel) -> Layout:
    """Loops reversed, tiles of 3 everywhere, lanes on the (new) innermost, the outermost
    split over two threads."""
    order = tuple(reversed([lp.var for lp in parallel_loops(k)]))
    if not order:
        return k.layout
    return Layout(
        order=order,
        tiles=tuple((v, 3) for v in order),
        lanes=order[-1],
        width=4,
        split=order[0],
        threads=2,
    )


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("case", ENTRIES, ids=lambda c: c[1])
def test_native_entries_give_the_kernel_interpreters_bits(case, realize):
    file, entry, dims, *consts = case  # (file, entry, dims[, constants])
    schedule, args, _ = lowered(file, entry, dims, realize, False, *consts)
    fused = laid_default(fuse(schedule)[0])
    for s in (schedule, fused) if realize == "f64" else (fused,):  # unfused once: time
        assert same_bits(NativeEntry(s).run(args), run_schedule(s, args))


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
def test_the_tutorial_training_step(realize):
    schedule, args, _ = lowered(*TRAIN, realize, True)
    fused = laid_default(fuse(schedule)[0])
    expected = run_schedule(fused, args)
    entry = NativeEntry(fused)
    assert same_bits(entry.run(args), expected)
    assert same_bits(entry.run(args), expected)  # a second call over the same arena


def test_layouts_lanes_and_threads_change_no_bit():
    schedule, args, _ = lowered(*TRAIN, "f32", True)
    fused = laid_default(fuse(schedule)[0])
    base = NativeEntry(fused).run(args)
    other = relayout(fused, turned)
    assert entry_source(other) != entry_source(fused)
    assert "num_threads(2)" in entry_source(other) and "#pragma omp simd" in entry_source(other)
    assert same_bits(NativeEntry(other).run(args), base)
    assert same_bits(NativeEntry(fused, lanes=False).run(args), base)


MINIGPT_STEP = ("tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 8)))


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_lanes_across_folds_keep_the_bits(realize):
    # a fold in the lane loop's body: strips of lanes where the lanes run contiguously (a
    # sum down the rows of each column); where they would be strided (a softmax's passes
    # over its rows), strips of rows, each fold's terms in lanes along its variable
    schedule, args, _ = lowered(*MINIGPT_STEP, realize, True, MINIGPT)
    fused = laid_default(fuse(schedule)[0])
    c = entry_source(fused)
    assert "_s += " in c and "lj < v_" in c  # strips
    assert re.search(r"v_s\d+_t\[lj\]\[v_i\d+\] = ", c)  # rows' terms in lanes
    assert "presk_select_f" in c  # both sides of a select computed: no conditional load
    # a softmax's exponentials kept from its sum's terms for its quotients, in a loop of
    # their own; a whole strip's folds in vectors of 8 lanes (two at once for 16 f32 rows)
    assert re.search(r"\{\n *v_s\d+_k0\[lj\]\[v_i\d+\] = presk_exp[^;]*;\n *\}", c)
    # (the causal mask read as the comparison it holds, KernelC.mask_read: no byte load)
    quotient = r"= presk_select_f\d+\(\((v_i\d+) <= (v_i\d+)\), \(v_s\d+_k0\[lj\]\[\1\] / "
    assert re.search(quotient, c)
    # the attention's scaled scores s/√d divided once: kept by its max's terms for its
    # sum's exponentials (which read them, not the scores)
    kept = re.search(r"(v_s\d+_k0)\[lj\]\[(v_i\d+)\] = \(b\d+\[[^;]*\] / b\d+\[0\]\);", c)
    assert kept and f"presk_exp{'f' if realize == 'f32' else ''}(({kept[1]}[lj][{kept[2]}] - " in c
    assert re.search(r"presk_maxf?_x8\(", c) and re.search(r"_v0 = v_s\d+_v0 \+ x0;", c)
    assert bool(re.search(r"if \(v_\w+_n >= 16\) \{", c)) == (realize == "f32")
    # GCC peels the lane loops of a kernel in strips along its lanes (a sum_to's), not of one
    # in strips of rows (a softmax's, much longer code)
    peeled = re.findall(r'optimize \("peel-loops"\)\n#endif\n(.*?)#pragma GCC pop_options', c, re.S)
    assert peeled and all("lj < v_" in f and "PRESK_T8(" not in f for f in peeled)
    assert len(peeled) < c.count("static void presk_kernel_") and "PRESK_T8(" in c
    expected = run_schedule(fused, args)
    assert same_bits(NativeEntry(fused).run(args), expected)
    assert same_bits(NativeEntry(fused, lanes=False).run(args), expected)
    assert same_bits(NativeEntry(relayout(fused, turned)).run(args), expected)


def test_units_and_the_timed_entry_change_no_bit():
    schedule, args, _ = lowered(*TRAIN, "f32", True)
    fused = laid_default(fuse(schedule)[0])
    one = NativeEntry(fused, units=1)
    three = NativeEntry(fused, units=3, timed=True)
    assert len(one.source) == 1 and len(three.source) == 3
    assert one.module.path != three.module.path
    ns = np.zeros(len(three.schedule.launches) + 1)  # the launches compiled, fused ones one
    assert len(three.schedule.launches) < len(fused.launches)
    base = one.run(args)
    assert same_bits(NativeEntry(fused, epilogues=False, rows=False).run(args), base)
    assert same_bits(three.run(args), base)
    assert same_bits(three.run_timed(args, ns), base)
    assert (ns > 0).all()  # every launch and the zeroing timed
    cpu = NativeEntry(fused, units=1, timed="cpu")  # the thread's CPU clock
    assert "CLOCK_THREAD_CPUTIME_ID" in cpu.source[0] and "CLOCK_MONOTONIC" not in cpu.source[0]
    ns = np.zeros(len(cpu.schedule.launches) + 1)
    assert same_bits(cpu.run_timed(args, ns), base)
    assert (ns >= 0).all() and ns.sum() > 0


@pytest.mark.parametrize("case", [(*TRAIN, ()), ENTRIES[7]])
def test_buffers_written_whole_need_no_zeroing(case):
    # the arena filled with NaN bytes: a buffer whose zeroing was wrongly skipped shows
    schedule, args, _ = lowered(*case[:3], "f32", True, case[3])
    fused = laid_default(fuse(schedule)[0])
    entry = NativeEntry(fused)
    src = "".join(entry.source)
    zeroed = src.count("memset(arena")
    assert zeroed < len(fused.buffers) - len(fused.inputs)  # not every temporary
    entry.arena[...] = 0xFF
    assert same_bits(entry.run(args), run_schedule(fused, args))


def test_only_buffers_read_before_written_whole_are_zeroed(acc_and_copy):
    vec, acc, copy = acc_and_copy
    buffers = tuple(HostBuffer(j, "f64", vec, n, r) for j, n, r in [
        (0, "x", "input"), (1, "sum", "output"), (2, "y", "output"), (3, "gone", "temporary")
    ])  # fmt: skip
    s = Schedule(
        "t",
        (),
        buffers,
        (Launch(acc, (Arg(0), Arg(1))), Launch(copy, (Arg(0), Arg(2)))),
        (0,),
        (1, 2),
    )
    assert zeroed(s) == [1]  # read by `acc` before written; `y` written whole; `gone` unused
    offsets, size = arena_layout(s)
    assert size == 3 * 64 and offsets[3] == 0
    entry = NativeEntry(s)
    entry.arena[...] = 0xFF  # NaN bytes wherever a zeroing is missing
    x = np.array([1.0, -0.0, 3.0, 4.0])
    assert same_bits(entry.run([x]), run_schedule(s, [x]))


def test_a_near_miss_is_seen():
    # the same entry at another realization differs: the comparison can fail
    s64, args, _ = lowered(*TRAIN, "f64", True)
    s32, _, _ = lowered(*TRAIN, "f32", True)
    a, b = NativeEntry(s64).run(args), NativeEntry(s32).run(args)
    assert not same_bits(a, [x.astype(np.float64) for x in b])


def packed(schedule: Schedule) -> Schedule:
    """Every contraction's operands packed: the kernels become calls of the GEMM."""

    def pack(k: Kernel) -> Layout:
        g = contraction(k)
        layout = k.layout if g is None else dataclasses.replace(k.layout, pack=(g.a, g.b))
        return with_gemm(k, layout)

    return relayout(schedule, pack)


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_contractions_through_the_gemm_keep_the_bits(realize):
    gpt = ENTRIES[7]  # MiniGPT's training step: weights' gradients fold over batch and seq
    cases = [(*ENTRIES[2], False), (*ENTRIES[-1], False), (*TRAIN, (), True), (*gpt, True)]
    for file, entry, dims, consts, train in cases:
        schedule, args, _ = lowered(file, entry, dims, realize, train, consts)
        fused = laid_default(fuse(schedule)[0])
        source = entry_source(packed(fused))
        assert f"presk_gemm_{realize}(" in source, entry
        assert same_bits(NativeEntry(packed(fused)).run(args), run_schedule(fused, args))
        # a weight's gradient folding over batch and seq is one run of k for the GEMM
        multi = [
            k
            for k in (launch.kernel for launch in fused.launches)
            if contraction(k) is not None and len(perfect_nest(k)[-1].body[0].vars) > 1
        ]
        assert multi or file != gpt[0], entry


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_a_batched_contraction_with_a_transposed_operand(dtype):
    # out[b, i, j] = fold fma over p of x[b, i, p]·w[j, p] (w transposed in memory)
    layout = Layout(order=("b", "i", "j"), pack=(0, 1), split="b", threads=2)
    s = contraction_schedule(37, 401, 29, dtype, batch=3, transposed=True, layout=layout)
    g = contraction(s.launches[0].kernel)
    assert g is not None and g.m.var == "i" and g.n.var == "j"
    # b's strides continue i's in A and C, and B does not see b: one GEMM of 3·37 rows
    assert g.m.extent == 3 * 37 and g.batch == ()
    rng = np.random.default_rng(5)
    args = [rng.standard_normal((3, 37, 401)), rng.standard_normal((29, 401))]
    loops = relayout(s, lambda k: dataclasses.replace(k.layout, pack=(), gemm=None))
    assert "presk_gemm" in entry_source(s) and "presk_gemm" not in entry_source(loops)
    got = NativeEntry(s).run(args)
    assert same_bits(got, NativeEntry(loops).run(args))
    assert same_bits(got, run_schedule(s, args))


def test_one_loop_in_threads_and_in_lanes():
    s = _gather()
    k = s.launches[0].kernel
    both = relayout(s, lambda k: Layout(order=("i0",), lanes="i0", width=4, split="i0", threads=2))
    assert "#pragma omp parallel for simd num_threads(2)" in entry_source(both)
    x, idx = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2, 1])
    assert same_bits(NativeEntry(both).run([x, idx]), run_schedule(s, [x, idx]))
    assert k.layout == Layout(order=("i0",))  # the original as it was


def _taking(name: str, table: tuple, idx: tuple, out: tuple, body: tuple, order=("i0",)):
    """A schedule of one kernel `name` over x (f64, axes `table`), idx (i64, `idx`) and out
    (f64, `out`), its body as given, its parallel loops `order`."""
    k = Kernel(
        name=name,
        site="t/%1",
        inputs=(Buffer(0, "f64", table), Buffer(1, "i64", idx)),
        outputs=(Buffer(2, "f64", out),),
        body=body,
        layout=Layout(order=order),
    )
    buffers = (
        HostBuffer(0, "f64", table, "x", "input"),
        HostBuffer(1, "i64", idx, "idx", "input"),
        HostBuffer(2, "f64", out, "out", "output"),
    )
    return Schedule("t", (), buffers, (Launch(k, (Arg(0), Arg(1), Arg(2))),), (0, 1), (2,))


def _gather() -> Schedule:
    i = Affine.var("i0")
    body = (Loop("i0", None, 2, (Store(2, (i,), Load(0, (Load(1, (i,)),))),)),)
    return _taking("take", (Axis(None, 4),), (Axis(None, 2),), (Axis(None, 2),), body)


def test_a_gather_out_of_range_is_caught():
    s = _gather()
    entry = NativeEntry(s)
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert entry.run([x, np.array([3, 0])])[0].tolist() == [4.0, 1.0]
    for bad in ([1, 4], [-1, 0]):
        with pytest.raises(KernelError):
            entry.run([x, np.array(bad)])
        with pytest.raises(KernelError):
            run_schedule(s, [x, np.array(bad)])


def _rows_gathered() -> Schedule:
    """out[i, j] = x[idx[i], j] · x[idx[j], j]: a gather fixed in the loop over j (its
    check before that loop) and one that moves with it (checked in it)."""
    i, j = Affine.var("i0"), Affine.var("i1")
    row, col = Load(0, (Load(1, (i,)), j)), Load(0, (Load(1, (j,)), j))
    inner = Loop("i1", None, 3, (Store(2, (i, j), Op("mul", (row, col))),))
    three = (Axis(None, 3),)
    body = (Loop("i0", None, 3, (inner,)),)
    return _taking("rows", (Axis(None, 4), *three), three, three * 2, body, ("i0", "i1"))


@pytest.mark.parametrize("lanes", [False, True])
def test_a_gather_fixed_in_a_loop_is_checked_once_before_it(lanes):
    """KernelC.hoist: the row's index checked before the loop over j (GCC vectorizes no loop
    whose body may store to `err`), the moving one in it; the same values and errors."""
    s = _rows_gathered()
    if lanes:
        s = relayout(s, lambda k: Layout(order=("i0", "i1"), lanes="i1", width=4))
    c = entry_source(s)
    body = c[c.index("void presk_kernel_0(") :]
    fixed = body.index("const int64_t v_g0 = presk_checked(b1[(v_i0)], 4, err);")
    assert fixed < body.index("for (int64_t v_i1 = 0;")
    assert "presk_checked(b1[(v_i1)], 4, err)" in body[fixed:]  # j's own, in the loop
    x = np.arange(12.0).reshape(4, 3)
    for idx in ([3, 0, 2], [1, 1, 0]):
        got = NativeEntry(s).run([x, np.array(idx)])[0]
        assert same_bits([got], run_schedule(s, [x, np.array(idx)]))
    for bad in ([0, 4, 1], [-1, 0, 0]):
        with pytest.raises(KernelError):
            NativeEntry(s).run([x, np.array(bad)])


def test_a_gather_in_a_selects_branch_is_checked_where_it_is_taken():
    """x[idx[i], j] where i > 0, else 0: row 0's index is never read, so a bad one there is
    no error, and the check stays in the branch (not hoisted before the loop over j)."""
    s = _rows_gathered()
    k = s.launches[0].kernel
    i, j = Affine.var("i0"), Affine.var("i1")
    taken = Op("compare", (Index("i0"), Const(0, "i64")), ">")
    value = Op("select", (taken, Load(0, (Load(1, (i,)), j)), Const(0.0, "f64")))
    body = (Loop("i0", None, 3, (Loop("i1", None, 3, (Store(2, (i, j), value),)),)),)
    s = dataclasses.replace(
        s, launches=(Launch(dataclasses.replace(k, body=body), s.launches[0].args),)
    )
    assert "v_g0" not in entry_source(s)
    x = np.arange(12.0).reshape(4, 3)
    got = NativeEntry(s).run([x, np.array([9, 3, 0])])[0]
    assert got.tolist() == [[0.0] * 3, [9.0, 10.0, 11.0], [0.0, 1.0, 2.0]]


def test_a_gathered_row_folded_in_strips_is_checked_once_a_row():
    """The strips' fold of each row's terms (strip.py `terms`): exp(x[idx[i], j]) summed
    over j, 8 rows a strip, the row's index checked before its vector loop."""
    rows = (Axis(None, 10),)
    i, j = Affine.var("i0"), Affine.var("i1")
    term = Op("exp", (Load(0, (Load(1, (i,)), j)),))
    fold = (Reduce("s", "add", (("i1", None, 16),), (), (term,)), Store(2, (i,), Var("s")))
    s = _taking("sums", (Axis(None, 12), Axis(None, 16)), rows, rows, (Loop("i0", None, 10, fold),))
    laid = relayout(s, lambda k: Layout(order=("i0",), lanes="i0", width=8))
    c = entry_source(laid)
    body = c[c.index("void presk_kernel_0(") :]
    fixed = body.index("const int64_t v_g0 = presk_checked(b1[(v_i0)], 12, err);")
    assert fixed < body.index("#pragma omp simd") and "v_i0_s += 8" in body
    x = np.random.default_rng(3).standard_normal((12, 16))
    idx = np.array([11, 0, 3, 3, 7, 1, 2, 9, 10, 4])
    assert same_bits(NativeEntry(laid).run([x, idx]), run_schedule(s, [x, idx]))
    with pytest.raises(KernelError):
        NativeEntry(laid).run([x, np.where(idx == 7, 12, idx)])


def test_the_c_is_warning_free(tmp_path, strict_cc):
    schedule, _, _ = lowered(*TRAIN, "bf16", True)
    fused = laid_default(fuse(schedule)[0])
    tc = find_toolchain()
    c = tmp_path / "entry.c"
    c.write_text(entry_source(relayout(fused, turned)))
    p = strict_cc(tc, c, tmp_path / "entry.so", tc.flags(threads=True))
    assert p.returncode == 0, p.stderr[:3000]
