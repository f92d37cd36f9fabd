"""A structured mask read as the comparison it holds (KernelC.mask_read, issue 26): the C
of a kernel reading a mask written by the mask's kernel tests `j <= i` (or `j < i`) where
it loaded the mask's byte, and computes the kernel interpreter's bits."""

from __future__ import annotations

import re

import numpy as np
import pytest
from presk_cback.host import entry_source
from presk_cback.native import NativeEntry
from presk_kernel.interp import run_schedule
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
    Schedule,
    Store,
)
from presk_kernel.layout import lay_out
from presk_kernel.narrow import mask_inputs

N = 37  # rows of whole vectors and a tail, at 16 and at 8 lanes
SQUARE = (Axis(None, N), Axis(None, N))
ROW, COL = Affine.var("i"), Affine.var("j")


def _schedule(cmp: str, a: str, b: str, written_twice: bool = False, flat: bool = False):
    """mask[i, j] = compare cmp(a, b); out[i, j] = select(mask[i, j], x[i, j], −1.5), laid
    out as the run lays them (lanes along j); `written_twice`: a second launch writes the
    mask too (then not structured); `flat`: the reader sees the mask as one axis of N·N
    (not at its shape: then loaded)."""
    cond = Op("compare", (Index(a), Index(b)), cmp)
    mask = Kernel(
        "mask",
        "t/%1",
        (),
        (Buffer(0, "bool", SQUARE),),
        (Loop("i", None, N, (Loop("j", None, N, (Store(0, (ROW, COL), cond),)),)),),
        "f32",
        Layout(order=("i", "j")),
    )
    seen = (Axis(None, N * N),) if flat else SQUARE
    at = (Affine((("i", N), ("j", 1)), 0),) if flat else (ROW, COL)
    value = Op("select", (Load(0, at), Load(1, (ROW, COL)), Const(-1.5, "f32")))
    reader = Kernel(
        "reader",
        "t/%2",
        (Buffer(0, "bool", seen), Buffer(1, "f32", SQUARE)),
        (Buffer(2, "f32", SQUARE),),
        (Loop("i", None, N, (Loop("j", None, N, (Store(2, (ROW, COL), value),)),)),),
        "f32",
        Layout(order=("i", "j")),
    )
    buffers = (
        HostBuffer(0, "bool", SQUARE, "mask"),
        HostBuffer(1, "f32", SQUARE, "x", "input"),
        HostBuffer(2, "f32", SQUARE, "out", "output"),
    )
    launches = [Launch(mask, (Arg(0),)), Launch(reader, (Arg(0), Arg(1), Arg(2)))]
    if written_twice:
        launches.insert(1, Launch(mask, (Arg(0),)))
    return lay_out(Schedule("t", (), buffers, tuple(launches), (1,), (2,)), 1)


@pytest.mark.parametrize(
    ("cmp", "a", "b", "c"),
    [
        ("<=", "j", "i", "(v_j <= v_i)"),
        ("<", "j", "i", "(v_j < v_i)"),
        (">=", "i", "j", "(v_j <= v_i)"),
        (">", "j", "i", "(v_i < v_j)"),
    ],
)
def test_a_mask_is_read_as_its_comparison_with_the_same_bits(cmp, a, b, c):
    s = _schedule(cmp, a, b)
    assert mask_inputs(s) == [{}, {0: mask_inputs(s)[1][0]}]
    src = entry_source(s)
    reader = src[src.index("/* reader") :]
    assert c in reader and not re.search(r"\bb0\[", reader)
    x = np.arange(N * N, dtype=np.float32).reshape(N, N) - 400.0
    (got,) = NativeEntry(s).run([x])
    (want,) = run_schedule(s, [x])
    assert got.tobytes() == want.tobytes()
    allowed = {"<=": "j <= i", "<": "j < i", ">=": "i >= j", ">": "j > i"}[cmp]
    i, j = np.indices((N, N))
    assert np.array_equal(want, np.where(eval(allowed), x, np.float32(-1.5)))


@pytest.mark.parametrize("case", ["written twice", "flat"])
def test_a_mask_not_known_at_the_reader_is_loaded(case):
    s = _schedule("<=", "j", "i", written_twice=case == "written twice", flat=case == "flat")
    assert all(not m for m in mask_inputs(s))
    src = entry_source(s)
    assert re.search(r"\bb0\[", src[src.index("/* reader") :])
    x = np.arange(N * N, dtype=np.float32).reshape(N, N)
    (got,) = NativeEntry(s).run([x])
    assert got.tobytes() == run_schedule(s, [x])[0].tobytes()
    i, j = np.indices((N, N))
    assert np.array_equal(got, np.where(j <= i, x, np.float32(-1.5)))
