"""Kernels as C: the native entry gives the kernel interpreter's bits on the tutorial's
entries and its training step, in f64, f32 and bf16, fused or not, whatever the layout
(orders, tiles, lanes, threads); gathers out of range are caught; the C is -Wall -Wextra
clean."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import presk_kernel.interp as KI
import pytest
from presk_cback import libm
from presk_cback.emit import entry_source
from presk_cback.native import NativeEntry
from presk_cback.toolchain import find_toolchain
from presk_kernel.fuse import fuse
from presk_kernel.interp import KernelError, run_schedule
from presk_kernel.ir import (
    Affine,
    Arg,
    Axis,
    Buffer,
    HostBuffer,
    Kernel,
    Launch,
    Layout,
    Load,
    Loop,
    Schedule,
    Store,
)
from presk_kernel.layout import check_layout, parallel_loops

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "presk-kernel" / "tests"))
from kernel_entries import ENTRIES, lowered  # noqa: E402

TRAIN = ("tutorial/07_train.psk", "loss", (("B", 8),))


@pytest.fixture(autouse=True)
def presk_libm_in_the_interpreter(monkeypatch):
    # the kernel interpreter's transcendentals through presk libm, as the native code has
    # them (until presk-kernel calls it itself)
    monkeypatch.setattr(KI, "_libm", lambda name, x, dt: libm.apply(name, np.asarray(x, dt)))


def same_bits(a, b) -> bool:
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        for x, y in zip(a, b, strict=True)
    )


def relayout(schedule: Schedule, fn) -> Schedule:
    launches = []
    for launch in schedule.launches:
        layout = fn(launch.kernel)
        assert check_layout(launch.kernel, layout) is None, layout
        launches.append(
            dataclasses.replace(launch, kernel=dataclasses.replace(launch.kernel, layout=layout))
        )
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
@pytest.mark.parametrize(("file", "entry", "dims"), ENTRIES)
def test_native_entries_give_the_kernel_interpreters_bits(file, entry, dims, realize):
    schedule, args, _ = lowered(file, entry, dims, realize)
    fused, _ = fuse(schedule)
    for s in (schedule, fused):
        assert same_bits(NativeEntry(s).run(args), run_schedule(s, args))


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
def test_the_tutorial_training_step(realize):
    schedule, args, _ = lowered(*TRAIN, realize, True)
    fused, _ = fuse(schedule)
    expected = run_schedule(fused, args)
    entry = NativeEntry(fused)
    assert same_bits(entry.run(args), expected)
    assert same_bits(entry.run(args), expected)  # a second call over the same arena


def test_layouts_lanes_and_threads_change_no_bit():
    schedule, args, _ = lowered(*TRAIN, "f32", True)
    fused, _ = fuse(schedule)
    base = NativeEntry(fused).run(args)
    other = relayout(fused, turned)
    assert entry_source(other) != entry_source(fused)
    assert "num_threads(2)" in entry_source(other) and "#pragma omp simd" in entry_source(other)
    assert same_bits(NativeEntry(other).run(args), base)
    assert same_bits(NativeEntry(fused, lanes=False).run(args), base)


def test_a_near_miss_is_seen():
    # the same entry at another realization differs: the comparison can fail
    s64, args, _ = lowered(*TRAIN, "f64", True)
    s32, _, _ = lowered(*TRAIN, "f32", True)
    a, b = NativeEntry(s64).run(args), NativeEntry(s32).run(args)
    assert not same_bits(a, [x.astype(np.float64) for x in b])


def _gather() -> Schedule:
    vec = (Axis(None, 4),)
    two = (Axis(None, 2),)
    i = Affine.var("i0")
    k = Kernel(
        name="take",
        site="t/%1",
        inputs=(Buffer(0, "f64", vec), Buffer(1, "i64", two)),
        outputs=(Buffer(2, "f64", two),),
        body=(Loop("i0", None, 2, (Store(2, (i,), Load(0, (Load(1, (i,)),))),)),),
    )
    buffers = (
        HostBuffer(0, "f64", vec, "x", "input"),
        HostBuffer(1, "i64", two, "idx", "input"),
        HostBuffer(2, "f64", two, "out", "output"),
    )
    launch = Launch(k, (Arg(0), Arg(1), Arg(2)))
    return Schedule("t", (), buffers, (launch,), (0, 1), (2,))


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


def test_the_c_is_warning_free(tmp_path):
    schedule, _, _ = lowered(*TRAIN, "bf16", True)
    fused, _ = fuse(schedule)
    tc = find_toolchain()
    c = tmp_path / "entry.c"
    c.write_text(entry_source(relayout(fused, turned)))
    p = subprocess.run(
        [
            *tc.cc,
            *tc.flags(threads=True),
            "-Wall",
            "-Wextra",
            "-Werror",
            str(c),
            "-o",
            str(tmp_path / "entry.so"),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr[:3000]
