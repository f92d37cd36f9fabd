"""`.psk.d` files as numpy for the Python API (presk.read_data, presk.write_data), over
presk_core.data: samples as arrays whose first axis counts them, a parameter checkpoint as
a nested dict of its leaves (presk_cli.convert reads it, as `presk data convert` does).
"""

from __future__ import annotations

import os

import numpy as np
from presk_core import data as D
from presk_types.types import Bool, Idx, TupleT

from presk_cli.api import PreskError


def read_data(path: str | os.PathLike):
    """The file's contents: a checkpoint (`params M`) as a nested dict of float64 arrays;
    samples as one array (a tuple of arrays for a tuple type) with the samples on axis 0:
    reals float64, indices int64, truth values bool."""
    from presk_cli.arguments import nested
    from presk_cli.convert import WeightsError, checkpoint

    path = os.fspath(path)
    try:
        header = D.read_header(path)
        if header.type_text.startswith("params "):
            return nested(checkpoint(path)[1])
        t = D.type_of(header.type_text, path)
        samples = D.read(path, t)
        spec = D.leaves(t)
    except (D.DataError, WeightsError) as e:
        raise PreskError.of(e.code, str(e)) from None
    columns = []
    for i, leaf in enumerate(spec):
        column = np.empty((len(samples), *leaf.shape), dtype=leaf.dtype)
        for j, sample in enumerate(samples):
            column[j] = sample[i]
        columns.append(column.astype(bool) if leaf.dtype == "u1" else column)
    return tuple(columns) if isinstance(t, TupleT) else columns[0]


def write_data(path: str | os.PathLike, value, type: str | None = None, model: str | None = None):
    """Write `value` atomically: a tree (a dict, nested or of dotted paths) as the checkpoint
    of `params model` that `presk train` writes and `--weights` reads; samples (an array, or
    a tuple of arrays, the samples on axis 0) as a file of samples of `type`
    (`(ℝ[model: 4], ℝ[model: 4])`), each checked against it (E7007)."""
    from presk_cli.arguments import flat

    path = os.fspath(path)
    try:
        if isinstance(value, dict):
            if not isinstance(model, str) or not model.strip():
                raise PreskError.of("E7080", "a tree is written with model=NAME (`params NAME`)")
            tree = {k: np.asarray(v, dtype=np.float64) for k, v in flat(value).items()}
            D.write_tree(path, f"params {model.strip()}", list(tree.values()), list(tree))
            return
        if not isinstance(type, str):
            raise PreskError.of("E7080", "samples are written with type=TEXT (a sample type)")
        t = D.type_of(type)
        spec = D.leaves(t)
        parts = list(value) if isinstance(t, TupleT) else [value]
        if len(parts) != len(spec):
            raise D.DataError("E7007", f"{len(parts)} arrays, and `{t}` has {len(spec)} leaves")
        columns = [_column(np.asarray(x), leaf, e) for x, leaf, e in zip(parts, spec, _types(t),
                                                                            strict=True)]  # fmt: skip
        counts = {len(c) for c in columns}
        if len(counts) != 1:
            raise D.DataError("E7007", f"arrays of {sorted(counts)} samples: one count for all")
        D.write(path, str(t), t, [[c[j] for c in columns] for j in range(counts.pop())])
    except D.DataError as e:
        raise PreskError.of(e.code, str(e)) from None
    except OSError as e:
        why = (e.strerror or str(e)).lower()
        raise PreskError.of("E7004", f"cannot write `{path}`: {why}") from None


def _types(t):
    return list(t.elements) if isinstance(t, TupleT) else [t]


def _column(x: np.ndarray, leaf: D.Leaf, t) -> np.ndarray:
    """The samples of one leaf, checked: their shape, their kind, an index below its bound."""
    if x.ndim != len(leaf.shape) + 1 or tuple(x.shape[1:]) != leaf.shape:
        raise D.DataError(
            "E7007",
            f"an array of shape {list(x.shape)}, and samples of `{t}` are {list(leaf.shape)}"
            " (the samples on axis 0)",
        )
    kinds = "iu" if isinstance(t, Idx) else "b" if isinstance(t, Bool) else "fiu"
    if x.dtype.kind not in kinds:
        raise D.DataError("E7007", f"{x.dtype} data for `{t}`")
    if isinstance(t, Idx) and x.size and (x.min() < 0 or x.max() >= leaf.bound):
        raise D.DataError("E7007", f"an index outside `idx[{leaf.bound}]` (0 to {leaf.bound - 1})")
    if not np.all(np.isfinite(x)):
        raise D.DataError("E7007", f"a value that is not a finite double for `{t}`")
    return x.astype(leaf.dtype)


__all__ = ["read_data", "write_data"]
