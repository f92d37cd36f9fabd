"""Entries of the tutorial lowered to kernels, with the reference interpreter's result."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
from presk_ad import differentiate
from presk_ad.step import STEP, training_step
from presk_core.interp import Interpreter
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize
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


MINIGPT = (("V", "64"), ("D", "16"), ("H", "2"), ("L", "2"))
BERT = (("V", "32"), ("D", "8"), ("H", "2"), ("L", "2"))
LLAMA = (("D", "8"), ("H", "2"), ("F", "12"))

ENTRIES = [  # (file, entry, dims, constants), the tutorial's and the reference examples'
    ("tutorial/01_linear.psk", "Linear{3, 2}.apply", (("batch", 4),), ()),
    ("tutorial/02_norm.psk", "RMSNorm{4}.apply", (("batch", 2),), ()),
    ("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 3)), ()),
    ("tutorial/04_grad.psk", "loss_grad", (("D", 3), ("B", 2)), ()),
    ("tutorial/06_tower.psk", "Tower.apply", (("batch", 2),), ()),
    ("tutorial/07_train.psk", "loss", (("B", 8),), ()),
    ("tests/examples/mlp/mlp.psk", "mse", (("D", 3), ("B", 2)), ()),
    ("tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 8)), MINIGPT),
    ("tests/examples/bert/bert.psk", "MaskedLM.apply", (("B", 1), ("T", 4)), BERT),
    ("tests/examples/llama/llama.psk", "block", (("B", 1), ("T", 3)), LLAMA),
]
