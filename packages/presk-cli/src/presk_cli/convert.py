"""Weights in and out: a parameter checkpoint (`.psk.d` of `params M`) to and from
safetensors (the format the Hugging Face ecosystem reads, through the `safetensors`
package's numpy API) and numpy's `.npz` (`presk data convert`, docs/data.md).

A tensor's name is its leaf's path in the tree (`blocks.proj.w`), a stacked leaf one tensor
with the stack's axis first, as presk holds it. Reading into a tree, a leaf's path is looked
for first; then, for a stacked leaf, its blocks under PyTorch's names (`blocks.0.proj.w`,
`blocks.1.proj.w`, …: a `ModuleList` of the exported module), each block a tensor, stacked
again. Every leaf must be found with its shape and every tensor used, or the conversion is
refused with the names or shapes that do not match (E7076, E7077); reals of any width are
read as doubles, exactly.
"""

from __future__ import annotations

import io
import os
import zipfile

import numpy as np
from presk_core import data as D

FORMATS = (".safetensors", ".npz", ".psk.d")


class WeightsError(Exception):
    """Weights that cannot be converted: E7075 (a checkpoint without its leaves' paths),
    E7076 (names), E7077 (shapes or types), E7078 (a file that is not of its format)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def format_of(path: str) -> str | None:
    return next((f for f in FORMATS if path.endswith(f)), None)


# ---- reading -----------------------------------------------------------------------------


def read_tensors(path: str) -> dict[str, np.ndarray]:
    """The named tensors of a `.safetensors` or `.npz` file, or a checkpoint's leaves."""
    kind = format_of(path)
    if kind == ".psk.d":
        return checkpoint(path)[1]
    from safetensors import SafetensorError, safe_open

    try:
        if kind == ".safetensors":
            with safe_open(path, framework="numpy") as f:
                return {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118
        with np.load(path, allow_pickle=False) as z:
            return {name: z[name] for name in z.files}
    except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
        why = (e.strerror or str(e)).lower()
        raise WeightsError("E7078", f"cannot read `{path}`: {why}") from None
    except (OSError, ValueError, TypeError, zipfile.BadZipFile, SafetensorError) as e:
        # a header that is not one, a bf16 tensor numpy has no type for, a pickled array
        raise WeightsError("E7078", f"`{path}` is not a {kind[1:]} file: {e}") from None


def checkpoint(path: str) -> tuple[str, dict[str, np.ndarray]]:
    """A parameter checkpoint's type text (`params Tower`) and its leaves by path (E7075
    when its header does not record them: a file written before presk did)."""
    try:
        header = D.read_header(path)
        reals = D.read_reals(path) if header.layout is not None else None
    except D.DataError as e:
        raise WeightsError(e.code, str(e)) from None
    if not header.type_text.startswith("params ") or header.count != 1:
        raise WeightsError(
            "E7075", f"`{path}` holds `{header.type_text}`, not one parameter tree (params M)"
        )
    if header.layout is None:
        raise WeightsError(
            "E7075",
            f"`{path}` does not record its leaves' paths (written before presk did): write"
            " it again with this presk (presk train)",
        )
    tree, at = {}, 0
    for name, shape in header.layout:
        size = int(np.prod(shape, dtype=np.int64))
        tree[name] = reals[at : at + size].reshape(shape)
        at += size
    return header.type_text, tree


# ---- fitting the tensors of a file to a tree ---------------------------------------------


def fit(tensors: dict[str, np.ndarray], layout, source: str) -> dict[str, np.ndarray]:
    """The tree `layout` ([(path, shape)], in order) from the named `tensors` of `source`,
    each leaf as doubles: by its path, or a stacked leaf by its blocks' PyTorch names."""
    used: set[str] = set()
    tree = {}
    for path, shape in layout:
        value = _gather(tensors, path.split("."), tuple(shape), used, source, path)
        if value is None:
            raise WeightsError("E7076", _missing(source, path, tensors))
        if value.shape != tuple(shape):
            raise WeightsError(
                "E7077",
                f"`{source}`: `{path}` is {_shape(value.shape)}, the tree's leaf is"
                f" {_shape(shape)}",
            )
        tree[path] = value
    extra = [name for name in tensors if name not in used]
    if extra:
        raise WeightsError(
            "E7076",
            f"`{source}` has tensors that are no leaf of the tree: {_names(extra)} (its"
            f" leaves: {_names([p for p, _ in layout])})",
        )
    return tree


def _gather(tensors, parts, shape, used, source, path) -> np.ndarray | None:
    """The leaf `parts` as a tensor of the file, or stacked from its blocks' tensors (the
    index after a prefix of the path: `blocks.0.proj.w`); None when neither is there."""
    name = ".".join(parts)
    if name in tensors:
        used.add(name)
        return _reals(tensors[name], source, name)
    if not shape:
        return None
    for k in range(1, len(parts)):
        prefix = ".".join(parts[:k]) + ".0"
        if not any(n == prefix or n.startswith(prefix + ".") for n in tensors):
            continue
        blocks = []
        for i in range(shape[0]):
            block = _gather(
                tensors, [*parts[:k], str(i), *parts[k:]], shape[1:], used, source, path
            )
            if block is None:
                break
            blocks.append(block)
        if len(blocks) == shape[0]:
            if len({b.shape for b in blocks}) != 1:
                raise WeightsError(
                    "E7077",
                    f"`{source}`: the blocks of `{path}` have shapes"
                    f" {', '.join(sorted({_shape(b.shape) for b in blocks}))}, the tree's"
                    f" {_shape(shape[1:])} each",
                )
            return np.stack(blocks)
    return None


def _reals(x: np.ndarray, source: str, name: str) -> np.ndarray:
    if x.dtype.kind != "f":
        raise WeightsError(
            "E7077", f"`{source}`: `{name}` holds {x.dtype} values, a parameter holds reals"
        )
    return np.asarray(x, dtype=np.float64)  # f16, f32: exactly


def _shape(shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _names(names: list[str], limit: int = 6) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _missing(source: str, path: str, tensors: dict) -> str:
    return f"`{source}` has no tensor `{path}`; its tensors: {_names(list(tensors))}"


# ---- writing -----------------------------------------------------------------------------


def write_tensors(path: str, tree: dict[str, np.ndarray], type_text: str) -> None:
    """A tree as a `.safetensors` (its type text in the metadata) or `.npz`, atomically."""
    arrays = {name: np.ascontiguousarray(x, dtype=np.float64) for name, x in tree.items()}
    if path.endswith(".safetensors"):
        from safetensors.numpy import save

        blob = save(arrays, metadata={"presk": type_text})
    else:
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        blob = buffer.getvalue()
    D.write_bytes(path, blob)


def convert(source: str, out: str, like: str | None) -> str:
    """`source` converted to `out` (formats by their extensions); a `.psk.d` out takes its
    tree (paths, shapes, type) from the checkpoint `like`, which the tensors must fit. The
    line that says what was written."""
    if format_of(source) == ".psk.d" and like is None:
        type_text, tree = checkpoint(source)
    else:
        if like is None:  # the command asks for it first (a usage error)
            raise ValueError(f"writing `{out}` from `{source}` needs the model's tree (like)")
        type_text, reference = checkpoint(like)
        layout = [(p, x.shape) for p, x in reference.items()]
        tree = fit(read_tensors(source), layout, source)
    try:
        if format_of(out) == ".psk.d":
            D.write_tree(out, type_text, list(tree.values()), list(tree))
        else:
            write_tensors(out, tree, type_text)
    except OSError as e:
        why = (e.strerror or str(e)).lower()
        raise WeightsError("E7004", f"cannot write `{out}`: {why}") from None
    reals = sum(int(np.size(x)) for x in tree.values())
    return (
        f"presk data: wrote {out} ({len(tree)} tensors, {reals} reals of {type_text},"
        f" from {os.path.basename(source)})"
    )


__all__ = ["FORMATS", "WeightsError", "checkpoint", "convert", "fit", "read_tensors"]
