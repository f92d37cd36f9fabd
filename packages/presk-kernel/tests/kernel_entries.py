"""What the tests of the executors after the interpreter share: the entries (the tutorial's
and the examples'), lowered to kernels with the reference interpreter's result, a hand-built
contraction, and `same_bits`."""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path

import numpy as np
from presk_ad import differentiate
from presk_ad.step import STEP, training_step
from presk_core.interp import Interpreter
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize
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
    Reduce,
    Schedule,
    Store,
    Var,
)
from presk_kernel.layout import apply_layout, with_gemm
from presk_kernel.lower import argument_leaves, lower_entry
from presk_syntax.span import SourceMap
from presk_types.elab import load_program

ROOT = Path(__file__).resolve().parents[3]


def same_bits(a, b) -> bool:
    """The same bits: two arrays of one dtype and shape and the same bytes, or two sequences
    of such arrays, pair by pair (the tests of presk-kernel and presk-cback share it)."""
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b, strict=True))
    x, y = np.asarray(a), np.asarray(b)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@functools.cache
def program(file: str, train: bool = False, consts: tuple = ()):
    elab = load_program(str(ROOT / file), dict(consts), SourceMap())
    core = differentiate(lower_program(elab), "residuals")
    if train:
        core = training_step(core, "loss")
    return elab, core


def flat(value) -> list:
    match value:
        case dict():
            return [x for v in value.values() for x in flat(v)]
        case tuple() | list():
            return [x for v in value for x in flat(v)]
    return [value]


def floats(value) -> np.ndarray:
    arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
    if arr.dtype == object:
        with np.errstate(invalid="ignore"):  # NaN is a value here
            return np.vectorize(float, otypes=[np.float64])(arr)
    return arr.astype(np.float64)


@functools.cache
def case(file: str, entry: str, dims: tuple, train: bool = False, consts: tuple = ()):
    """(core, entry's function name, dims, args, the reference's result leaves as floats)."""
    elab, core = program(file, train, consts)
    name = STEP.format("loss") if train else entry
    e = parse_entry(name, core, elab, dict(dims))
    interp = Interpreter(core, 256)
    args = [v for _, _, v in synthesize(e, interp, 0)]
    ref = interp.run(e.function.name, args, e.dims)
    return (
        core,
        e.function.name,
        dict(e.dims) | dict(e.prefix),
        args,
        [floats(r) for r in flat(ref)],
    )


def lowered(
    file: str,
    entry: str,
    dims: tuple,
    realize: str = "f64",
    train: bool = False,
    consts: tuple = (),
):
    core, name, d, args, ref = case(file, entry, dims, train, consts)
    return lower_entry(core, name, d, args, realize), argument_leaves(args), ref


def laid_default(schedule, threads: int = 1):
    """`schedule` with every kernel at its default layout, applied to its body (the layout
    pass without the packing of large contractions)."""
    import dataclasses

    from presk_kernel.layout import apply_layout, default_layout

    launches = tuple(
        dataclasses.replace(lc, kernel=apply_layout(lc.kernel, default_layout(lc.kernel, threads)))
        for lc in schedule.launches
    )
    return dataclasses.replace(schedule, launches=launches)


ROWS_PROGRAM = "packages/presk-kernel/tests/programs/rows.psk"


def nan_aside(a, b) -> bool:
    """The same bits, but that a NaN may have either sign (and any payload): where a NaN of
    each sign meet in an add, which one an executor returns is its vector loop's or its
    C compiler's operand order (x86 returns the first operand's), which the executors do
    not agree on before any fusion (docs/spec-questions.md, issue 26 helper H6); every
    other bit, and where the NaNs are, the same."""
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(nan_aside(x, y) for x, y in zip(a, b, strict=True))
    x, y = np.array(a), np.array(b)
    if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(np.isnan(x), np.isnan(y)):
        return False
    x[np.isnan(x)] = y[np.isnan(y)] = 0
    return x.tobytes() == y.tobytes()


def rows_case(entry: str, d: int, realize: str, threads: int = 1):
    """The laid-out schedule of `entry` of programs/rows.psk (row fusion's tests,
    presk_kernel.rows) at D = d over 5 rows, and its inputs as doubles:
    row 1 with a NaN, row 2 with +inf, row 3 all −inf (row 0 and 4 finite)."""
    from presk_kernel.fuse import fuse
    from presk_kernel.layout import lay_out

    schedule, args, _ = lowered(ROWS_PROGRAM, entry, (("B", 5),), realize, consts=(("D", str(d)),))
    laid = lay_out(fuse(schedule)[0], threads)
    names = {b.id: b.name for b in laid.buffers}
    inputs = []
    for buf, leaf in zip(laid.inputs, args, strict=True):
        a = np.vectorize(float, otypes=[np.float64])(np.asarray(leaf, dtype=object))
        if names[buf] == "x":
            a[1, d // 2] = math.nan
            a[2, 0] = math.inf
            a[3, :] = -math.inf
        inputs.append(a)
    return laid, inputs


MINIGPT = (("V", "64"), ("D", "16"), ("H", "2"), ("L", "2"))
BERT = (("V", "32"), ("D", "8"), ("H", "2"), ("L", "2"))
LLAMA = (("D", "8"), ("H", "2"), ("F", "12"))

# (file, entry, dims, constants): the tutorial's entries and the reference examples', the
# one list the tests of every executor after the interpreter draw from (presk-kernel's,
# presk-cback's, and tests/native, tests/cli across the stages)
CASES = [
    ("tutorial/01_linear.psk", "Linear{3, 2}.apply", (("batch", 4),), ()),
    ("tutorial/02_norm.psk", "RMSNorm{4}.apply", (("batch", 2),), ()),
    ("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 3)), ()),
    ("tutorial/04_grad.psk", "loss", (("D", 3), ("B", 2)), ()),
    ("tutorial/04_grad.psk", "loss_grad", (("D", 3), ("B", 2)), ()),
    ("tutorial/06_tower.psk", "Tower.apply", (("batch", 2),), ()),
    ("tutorial/07_train.psk", "loss", (("B", 8),), ()),
    ("tests/examples/mlp/mlp.psk", "mse", (("D", 3), ("B", 2)), ()),
    ("tests/examples/mlp/mlp.psk", "mse_grad", (("D", 3), ("B", 2)), ()),
    ("tests/examples/minigpt/minigpt.psk", "MiniGPT.apply", (("B", 2), ("T", 8)), MINIGPT),
    ("tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 8)), MINIGPT),
    ("tests/examples/bert/bert.psk", "MaskedLM.apply", (("B", 1), ("T", 4)), BERT),
    ("tests/examples/llama/llama.psk", "block", (("B", 1), ("T", 3)), LLAMA),
]
CASE_IDS = [f"{Path(f).stem}:{e}" for f, e, _, _ in CASES]
# The entries whose every layout the kernel tests walk: CASES but three whose kinds of nest the
# others have (04_grad's loss is in its gradient, mse_grad's in loss_grad's, MiniGPT.apply's
# in the loss of train_minigpt)
ELSEWHERE = {
    ("tutorial/04_grad.psk", "loss"),
    ("tests/examples/mlp/mlp.psk", "mse_grad"),
    ("tests/examples/minigpt/minigpt.psk", "MiniGPT.apply"),
}
ENTRIES = [c for c in CASES if c[:2] not in ELSEWHERE]


def contraction_schedule(
    m: int,
    k: int,
    n: int,
    dtype: str = "f64",
    *,
    batch: int | None = None,
    transposed: bool = False,
    layout: Layout | None = None,
) -> Schedule:
    """`out[b, i, j] = Σ_p x[b, i, p]·w[p, j]` built by hand as PSK-Kernel data (no `b`
    without `batch`; `w[j, p]` in memory when `transposed`): one kernel, a fold of fma over
    `p`, and its host buffers x, w, out. Its layout is `layout` (the natural order if not
    given), with its GEMM statement where the layout packs the operands."""
    ax = lambda *ns: tuple(Axis(None, v) for v in ns)  # noqa: E731
    v = Affine.var
    rows = (v("b"), v("i")) if batch is not None else (v("i"),)
    lead = (batch,) if batch is not None else ()
    w_at, w_axes = ((v("j"), v("p")), ax(n, k)) if transposed else ((v("p"), v("j")), ax(k, n))
    fold = Reduce(
        "s", "fma", (("p", None, k),), (), (Load(0, (*rows, v("p"))), Load(1, w_at)), dtype
    )
    body: tuple = (Loop("j", None, n, (fold, Store(2, (*rows, v("j")), Var("s")))),)
    body = (Loop("i", None, m, body),)
    if batch is not None:
        body = (Loop("b", None, batch, body),)
    x_axes, out_axes = ax(*lead, m, k), ax(*lead, m, n)
    order = ("b", "i", "j") if batch is not None else ("i", "j")
    kern = Kernel("ein", "e/%1", (Buffer(0, dtype, x_axes), Buffer(1, dtype, w_axes)),
                  (Buffer(2, dtype, out_axes),), body, dtype, layout or Layout(order=order))  # fmt: skip
    if kern.layout.pack:
        kern = dataclasses.replace(kern, layout=with_gemm(kern, kern.layout))
    kern = apply_layout(kern)  # as the layout pass gives it: the emitter only renders
    bufs = (
        HostBuffer(0, dtype, x_axes, "x", "input"),
        HostBuffer(1, dtype, w_axes, "w", "input"),
        HostBuffer(2, dtype, out_axes, "out", "output"),
    )
    return Schedule("e", (), bufs, (Launch(kern, (Arg(0), Arg(1), Arg(2))),), (0, 1), (2,))


def read_at_zero(body: tuple, buf: int) -> tuple:
    """A plain `body` with every load of `buf` at 0 in its first index (a kernel that reads
    row 0, or batch point 0, where it read its own)."""
    import dataclasses

    from presk_kernel.ir import Affine, Let, Load, Loop, Op, Reduce, Store

    def expr(e):
        match e:
            case Load(b, index):
                index = tuple(i if isinstance(i, Affine) else expr(i) for i in index)
                return Load(b, (Affine.constant(0), *index[1:]) if b == buf else index)
            case Op(op, args, attr):
                return Op(op, tuple(expr(a) for a in args), attr)
        return e

    def stmt(s):
        match s:
            case Store(b, index, e):
                return Store(b, index, expr(e))
            case Let(name, e):
                return Let(name, expr(e))
            case Loop():
                return dataclasses.replace(s, body=tuple(stmt(x) for x in s.body))
            case Reduce():
                body = tuple(stmt(x) for x in s.body)
                return dataclasses.replace(s, body=body, terms=tuple(expr(t) for t in s.terms))
        return s

    return tuple(stmt(s) for s in body)
