"""The arena: temporaries whose live ranges do not overlap share space, the inputs and
outputs keep their own, a shared temporary that must start at zero is zeroed at its first
launch, and every bit stays the kernel interpreter's (the arena filled with NaN bytes,
and run twice: the second call starts from the first's leftovers)."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from presk_cback.arena import ITEMSIZE, arena_layout, live_ranges, plan
from presk_cback.native import NativeEntry
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.ir import (
    Arg,
    HostBuffer,
    Launch,
    Schedule,
)
from presk_kernel.written import used

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "presk-kernel" / "tests"))
from kernel_entries import MINIGPT, laid_default, lowered, same_bits  # noqa: E402

TRAIN = ("tutorial/07_train.psk", "loss", (("B", 8),), ())
MINIGPT_STEP = ("tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 8)), MINIGPT)


def nbytes(b: HostBuffer) -> int:
    return math.prod(a.length for a in b.axes) * ITEMSIZE[b.dtype]


def check_disjoint(schedule: Schedule, offsets: dict[int, int]) -> None:
    """No two used buffers live at once overlap in bytes; inputs and outputs overlap none."""
    live = used(schedule)
    ranges = live_ranges(schedule)
    keep = set(schedule.inputs) | set(schedule.outputs)
    whole = (-1, len(schedule.launches))
    bufs = [b for b in schedule.buffers if b.id in live and nbytes(b)]
    for i, a in enumerate(bufs):
        ra = whole if a.id in keep else ranges[a.id]
        for b in bufs[i + 1 :]:
            rb = whole if b.id in keep else ranges[b.id]
            if ra[0] <= rb[1] and rb[0] <= ra[1]:
                sa, sb = offsets[a.id], offsets[b.id]
                assert sa + nbytes(a) <= sb or sb + nbytes(b) <= sa, (a.name, b.name)


def test_a_shared_temporary_is_zeroed_at_its_first_launch(acc_and_copy):
    vec, acc, copy = acc_and_copy
    buffers = tuple(HostBuffer(j, "f64", vec, n, r) for j, n, r in [
        (0, "x", "input"), (1, "a", "output"), (2, "b", "output"), (3, "t1", "temp"),
        (4, "t2", "temp"),
    ])  # fmt: skip
    launches = (
        Launch(copy, (Arg(0), Arg(3))),  # t1 written whole: no zeroing
        Launch(acc, (Arg(3), Arg(1))),  # t1's last use
        Launch(acc, (Arg(0), Arg(4))),  # t2 in t1's space, read before written: zeroed here
        Launch(acc, (Arg(4), Arg(2))),
    )
    s = Schedule("t", (), buffers, launches, (0,), (1, 2))
    arena = plan(s, share=True)
    assert arena.offsets[3] == arena.offsets[4] and arena.size == 4 * 64
    assert arena.zero_first == (1, 2) and arena.zero_at == {2: (4,)}
    assert arena_layout(s, share=False)[1] == 5 * 64
    entry = NativeEntry(s)
    src = entry.source[-1]
    assert src.index(f"memset(arena + {arena.offsets[4]}, 0, 32)") > src.index("/* launch 1 */")
    entry.arena[...] = 0xFF
    x = np.array([1.0, -0.0, 3.0, 4.0])
    want = run_schedule(s, [x])
    assert same_bits(entry.run([x]), want)
    assert same_bits(entry.run([x]), want)  # again, over the first call's leftovers


@pytest.mark.parametrize("case", [TRAIN, MINIGPT_STEP], ids=["tower", "minigpt"])
def test_training_steps_share_and_keep_their_bits(case):
    schedule, args, _ = lowered(*case[:3], "f32", True, case[3])
    fused = laid_default(fuse(schedule)[0])
    offsets, size = arena_layout(fused, share=True)
    alone = arena_layout(fused, share=False)[1]
    assert size < alone
    check_disjoint(fused, offsets)
    entry = NativeEntry(fused)
    compiled, size = arena_layout(entry.schedule, share=True)  # its row kernels fused
    assert entry.arena.size == size  # (presk_kernel.rows): its arena
    check_disjoint(entry.schedule, compiled)
    entry.arena[...] = 0xFF  # NaN bytes wherever a zeroing is missing
    want = run_schedule(fused, args)
    assert same_bits(entry.run(args), want)
    assert same_bits(entry.run(args), want)


def test_sharing_turned_off_by_the_environment(monkeypatch):
    schedule, args, _ = lowered(*TRAIN[:3], "f64", True)
    fused = laid_default(fuse(schedule)[0])
    monkeypatch.setenv("PRESK_ARENA_SHARE", "0")
    offsets, size = arena_layout(fused)
    live = used(fused)
    assert size == sum((nbytes(b) + 63) // 64 * 64 for b in fused.buffers if b.id in live)
    check_disjoint(fused, offsets)
    entry = NativeEntry(fused)  # its row kernels fused (presk_kernel.rows): fewer buffers
    live = used(entry.schedule)
    size = sum((nbytes(b) + 63) // 64 * 64 for b in entry.schedule.buffers if b.id in live)
    assert "/* launch 0 */" in entry.source[-1] and entry.arena.size == size
    entry.arena[...] = 0xFF
    assert same_bits(entry.run(args), run_schedule(fused, args))
