"""Zero-copy calls (issue 26): `NativeEntry.run` reads inputs of their storage type where
they lie and writes its outputs where it returns them, with the bits of the copying call
(`presk_entry` over the arena) and of the kernel interpreter; and the training step's
helpers compiled into every entry, `presk_nonfinite` and `presk_square_sum` (|g|'s exact
sum of squares, math.fsum's value)."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from presk_cback.load import pointer
from presk_cback.native import NativeEntry
from presk_kernel.interp import from_storage, run_schedule
from presk_kernel.ir import Layout

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "presk-kernel" / "tests"))
from kernel_entries import (  # noqa: E402
    ENTRIES,
    contraction_schedule,
    laid_default,
    lowered,
    same_bits,
)


def gemm(tag: str, m: int = 33, k: int = 17, n: int = 40) -> NativeEntry:
    layout = Layout(order=("i", "j"), pack=(0, 1), split=None, threads=1)
    return NativeEntry(contraction_schedule(m, k, n, tag, layout=layout))


def copying(entry: NativeEntry, inputs: list) -> list:
    """The call as it was before zero-copy: inputs converted into the arena, `presk_entry`,
    the outputs copied out."""
    from presk_kernel.interp import to_storage

    for buf, value in zip(entry.schedule.inputs, inputs, strict=True):
        b = entry.buffers[buf]
        entry.view(buf).reshape(-1)[...] = to_storage(value, b.dtype).reshape(-1)
    assert entry.module.lib.presk_entry(pointer(entry.arena, "char")) == 0
    return [
        np.array(from_storage(entry.view(b), entry.buffers[b].dtype))
        for b in entry.schedule.outputs
    ]


@pytest.mark.parametrize("tag,dtype", [("f32", np.float32), ("f64", np.float64)])
def test_inputs_read_where_they_lie_outputs_written_where_returned(tag, dtype):
    entry = gemm(tag)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((33, 17)), rng.standard_normal((17, 40))
    a[0, 0], b[1, 1] = -0.0, 2.0**-140  # a signed zero, a subnormal of f32
    x, y = a.astype(dtype), b.astype(dtype)
    want = copying(entry, [a, b])
    assert same_bits(want, run_schedule(entry.schedule, [a, b]))
    assert entry.direct == set(entry.schedule.inputs)  # neither input is written
    x0, y0 = x.copy(), y.copy()
    got = entry.run([x, y])
    assert same_bits(got, want) and same_bits([x, y], [x0, y0])  # read, never written
    # doubles (a conversion), a transposed array and a slice (copies into the arena)
    assert same_bits(entry.run([a, b]), want)
    assert same_bits(entry.run([np.asfortranarray(x), y]), want)
    wide = np.zeros((33, 34), dtype)
    wide[:, :17] = x
    assert same_bits(entry.run([wide[:, :17], y]), want)
    out = np.full((33, 40), np.nan, dtype)
    (result,) = entry.run([x, y], out=[out])
    assert result is out and same_bits([out], want)
    with pytest.raises(ValueError, match="out"):
        entry.run([x, y], out=[np.empty((33, 40), np.float16)])


def test_a_returned_array_is_reused_only_when_nothing_holds_it():
    entry = gemm("f64", 8, 8, 8)
    a, b = np.eye(8), np.arange(64.0).reshape(8, 8)
    kept = entry.run([a, b])[0]
    again = entry.run([2 * a, b])[0]
    assert again is not kept and np.array_equal(kept, b) and np.array_equal(again, 2 * b)
    view = again[1:]
    del again
    third = entry.run([3 * a, b])[0]
    assert np.array_equal(view, 2 * b[1:]) and np.array_equal(third, 3 * b)  # a view holds it
    address = third.ctypes.data
    del third
    assert entry.run([a, b])[0].ctypes.data == address  # dropped: its pages serve again


@pytest.mark.parametrize("case", ENTRIES[:8], ids=[c[1] for c in ENTRIES[:8]])
def test_entries_keep_their_bits_through_the_io_table(case):
    """Every input and output through `presk_entry_io`: the same bits as the copying call,
    in f32 and f64, with the inputs in their storage types and as doubles."""
    file, entry_name, dims, consts = case
    for realize in ("f64", "f32"):
        schedule, args, _ = lowered(file, entry_name, dims, realize, consts=consts)
        entry = NativeEntry(laid_default(schedule))
        doubles = [np.asarray(v, np.float64) if np.asarray(v).dtype == object else v for v in args]
        want = copying(entry, doubles)
        types = {b.id: b.dtype for b in schedule.buffers}
        from presk_kernel.interp import to_storage

        stored = [to_storage(v, types[b]) for b, v in zip(schedule.inputs, doubles, strict=True)]
        assert same_bits(entry.run(stored), want), (entry_name, realize)
        assert same_bits(entry.run(doubles), want), (entry_name, realize)


def exact_norm2(arrays) -> float:
    with np.errstate(over="ignore"):
        squares = [np.square(np.ravel(a), dtype=np.float64).tolist() for a in arrays]
    return math.fsum(x for part in squares for x in part)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_square_sum_is_fsum_of_the_squares(dtype):
    entry = gemm("f64", 4, 4, 4)
    rng = np.random.default_rng(5)
    info = np.finfo(dtype)
    scales = [1.0, 1e-20, 1e20] + ([1e-150, 1e150] if dtype == np.float64 else [])
    for scale in scales:
        a = (rng.standard_normal(10_001) * scale).astype(dtype)
        a[3], a[4], a[5] = info.tiny / 8, -info.tiny, 0.0  # subnormal, normal edge, zero
        b = (rng.standard_normal((9, 7)) * scale).astype(dtype)
        want = exact_norm2([a, b])
        assert entry.square_sum([a, b]) == want, scale
        assert entry.square_sum([a[::2], a[1::2], b]) == want, scale  # strided: in Python
    big = np.array([info.max, 1.0], dtype)
    assert entry.square_sum([big]) == exact_norm2([big])  # f32: exact; f64: inf
    assert entry.square_sum([big[::2]]) == exact_norm2([big[::2]])
    if dtype == np.float64:  # finite squares whose sum is not: fsum raises, |g| is inf
        assert entry.square_sum([np.array([1e154, 1.3e154])]) == math.inf
    # 1 + many tiny squares: the naive double sum drops them all, the exact one does not
    c = np.concatenate([[1.0], np.full(4096, 2.0**-30)]).astype(dtype)
    assert entry.square_sum([c]) == exact_norm2([c]) == 1.0 + 4096 * 2.0**-60
    # many squares of one exponent, each mantissa all ones, over several chunks of 4096
    # (their bins near 2^63 before each fold into the limbs), a few past the doubles
    d = np.full(3 * 4096 + 5, np.nextafter(dtype(1.5), dtype(2)), dtype)
    d[7::997] = -np.nextafter(dtype(2**20), dtype(0))
    assert entry.square_sum([d]) == exact_norm2([d])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nonfinite_finds_the_first_bad_value(dtype):
    entry = gemm("f64", 4, 4, 4)
    x = np.ones(20_000, dtype)
    assert entry.nonfinite(x) == -1
    x[19_000], x[17_000] = np.nan, -np.inf
    assert entry.nonfinite(x) == 17_000
    assert entry.nonfinite(x[::-1].copy()) == 999
    x[17_000] = np.finfo(dtype).max
    assert entry.nonfinite(x) == 19_000
    assert entry.nonfinite(x[::2]) == 9_500  # strided: numpy's isfinite


def test_an_output_listed_twice_is_read_from_the_arena():
    import dataclasses

    layout = Layout(order=("i", "j"), pack=(0, 1), split=None, threads=1)
    s = contraction_schedule(5, 4, 3, "f64", layout=layout)
    s = dataclasses.replace(s, outputs=(s.outputs[0], s.outputs[0]))
    entry = NativeEntry(s)
    a, b = np.arange(20.0).reshape(5, 4), np.arange(12.0).reshape(4, 3)
    first, second = entry.run([a, b])
    assert np.array_equal(first, a @ b) and np.array_equal(second, a @ b)


@pytest.mark.parametrize("tag,dtype", [("f32", np.float32), ("f64", np.float64)])
def test_two_threads_through_the_io_table_keep_one_threads_bits(tag, dtype):
    """A product split over two threads (OpenMP's pool asleep between launches,
    presk_cback.load.quiet_pool), inputs read where they lie: one thread's bits."""
    import os

    before = os.environ.get("GOMP_SPINCOUNT")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((300, 70)).astype(dtype)
    b = rng.standard_normal((70, 90)).astype(dtype)
    outs = []
    for threads in (1, 2):
        split = "i" if threads > 1 else None
        layout = Layout(order=("i", "j"), pack=(0, 1), split=split, threads=threads)
        entry = NativeEntry(contraction_schedule(300, 70, 90, tag, layout=layout))
        outs.append(entry.run([a, b])[0])
        outs.append(copying(entry, [a, b])[0])
    assert all(same_bits([o], [outs[0]]) for o in outs[1:])
    assert os.environ.get("GOMP_SPINCOUNT") == before  # set only while libgomp loads


def test_the_quiet_pool_is_set_while_libgomp_loads_and_not_inherited(monkeypatch):
    """GOMP_SPINCOUNT = `spin_count()` inside `quiet_pool` (libgomp reads it as it loads), the
    environment as it was after it (child processes, e.g. a PyTorch side, inherit nothing),
    and a value the user set is theirs."""
    import os

    from presk_cback import load

    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(load, "spin_count", lambda: "17")
    with load.quiet_pool():
        assert os.environ["GOMP_SPINCOUNT"] == "17"
    assert "GOMP_SPINCOUNT" not in os.environ
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    with load.quiet_pool():
        assert os.environ["GOMP_SPINCOUNT"] == "1000"
    assert os.environ["GOMP_SPINCOUNT"] == "1000"


@pytest.mark.parametrize(
    "cores,load_average,spin",
    [(2, 0.4, "3000"), (2, 1.49, "3000"), (2, 1.5, "0"), (2, 2.1, "0"), (8, 6.0, "3000"),
     (8, 7.6, "0"), (1, 0.2, "3000"), (1, 0.6, "0"), (2, None, "0")],
)  # fmt: skip
def test_the_pool_spins_only_where_a_core_is_idle(monkeypatch, cores, load_average, spin):
    """SPIN_IDLE below a 1-minute load of cores − ½, SPIN_BUSY from there and where the load
    cannot be read."""
    import os

    from presk_cback import load

    def getloadavg():
        if load_average is None:
            raise OSError("no load average here")
        return (load_average, 0.0, 0.0)

    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(os, "getloadavg", getloadavg)
    assert load.spin_count() == spin
    assert {load.SPIN_IDLE, load.SPIN_BUSY} == {"3000", "0"}
