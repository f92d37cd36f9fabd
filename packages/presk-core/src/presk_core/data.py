"""`.psk.d` files: samples of one type, fixed-size and little-endian (docs/data.md).

```
offset  size  field
0       4     magic "PSKD"
4       4     version (u32), 1
8       4     header size H in bytes (u32): the samples start at H
12      8     count N (u64)
20      8     sample size S in bytes (u64)
28      4     length T of the type's text (u32)
32      T     the sample type, as presk prints it, UTF-8: `(ℝ[model: 4], ℝ[model: 4])`
32+T    …     zero padding up to H, a multiple of 8
H       N·S   the samples: sample i at H + i·S, its leaves in the type's order, each
              row-major: reals as f64, indices as i64, truth values as u8
```

A reader in any language seeks sample i without parsing the type. Writes are atomic (a
temporary file in the same folder, then a rename): a reader never sees half a file.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
from presk_types.types import Bool, Idx, Real, Shape, TupleT, Type

MAGIC = b"PSKD"
VERSION = 1
_FIXED = struct.Struct("<4sIIQQI")  # magic, version, header size, count, sample size, type len


class DataError(Exception):
    """A `.psk.d` file that cannot be read or written as asked; `code` is its diagnostic."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Leaf:
    """One tensor of a sample: its kind (`f8`, `i8`, `u1`) and its lengths."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


def leaves(t: Type) -> list[Leaf]:
    """The leaves of a sample type, in order; DataError for a type a file cannot hold."""
    match t:
        case TupleT(elements):
            return [leaf for e in elements for leaf in leaves(e)]
        case Real(shape) | Idx(_, shape) | Bool(shape):
            return [Leaf({Real: "<f8", Idx: "<i8", Bool: "u1"}[type(t)], _closed(shape, t))]
    raise DataError("E7007", f"a .psk.d sample cannot be of type `{t}`")


def _closed(shape: Shape, t: Type) -> tuple[int, ...]:
    if shape.prefix or any(not a.length.is_const for a in shape.axes):
        raise DataError("E7007", f"a sample type has constant lengths, and `{t}` does not")
    return tuple(a.length.constant for a in shape.axes)


@dataclass
class Header:
    version: int
    header_size: int
    count: int
    sample_size: int
    type_text: str


def write(path: str, type_text: str, t: Type, samples: list[list[np.ndarray]]) -> None:
    """Write samples (each a list of arrays, one per leaf) atomically."""
    _write(path, type_text, leaves(t), samples)


def write_tree(path: str, type_text: str, arrays: list[np.ndarray]) -> None:
    """A parameter tree as one sample of reals (`params Tower`: its leaves in order)."""
    _write(path, type_text, [Leaf("<f8", np.shape(a)) for a in arrays], [arrays])


def read_reals(path: str) -> np.ndarray:
    """Every real of a file whose samples are all reals (a parameter tree's), in order."""
    header = read_header(path)
    with open(path, "rb") as f:
        f.seek(header.header_size)
        blob = f.read(header.count * header.sample_size)
    return np.frombuffer(blob, dtype="<f8")


def _write(path: str, type_text: str, spec: list[Leaf], samples: list[list[np.ndarray]]) -> None:
    size = sum(leaf.size for leaf in spec)
    text = type_text.encode("utf-8")
    header_size = (_FIXED.size + len(text) + 7) // 8 * 8
    head = _FIXED.pack(MAGIC, VERSION, header_size, len(samples), size, len(text)) + text
    head += b"\0" * (header_size - len(head))
    with atomic(path) as f:
        f.write(head)
        for sample in samples:
            for leaf, value in zip(spec, sample, strict=True):
                f.write(np.ascontiguousarray(value, dtype=leaf.dtype).reshape(leaf.shape).tobytes())


@contextmanager
def atomic(path: str) -> Iterator[BinaryIO]:
    """A file opened for writing that appears at `path` whole when the block ends, or not at
    all if it raises: a temporary file in the same folder, then a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".psk-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())  # as `open` would create it, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bytes(path: str, blob: bytes) -> None:
    """Write `blob` to `path` atomically (a vocabulary, a token file: docs/data.md)."""
    with atomic(path) as f:
        f.write(blob)


def read_header(path: str) -> Header:
    try:
        with open(path, "rb") as f:
            fixed = f.read(_FIXED.size)
            if len(fixed) < _FIXED.size or fixed[:4] != MAGIC:
                raise DataError("E7004", f"`{path}` is not a .psk.d file")
            magic, version, header_size, count, size, tlen = _FIXED.unpack(fixed)
            if version != VERSION:
                raise DataError(
                    "E7006",
                    f"`{path}` is a .psk.d file of version {version}; this presk reads {VERSION}",
                )
            text = f.read(tlen)
    except OSError as e:
        raise DataError(
            "E7004", f"cannot read `{path}`: {(e.strerror or str(e)).lower()}"
        ) from None
    if len(text) < tlen:
        raise DataError("E7005", f"`{path}` is truncated: its header is cut short")
    header = Header(version, header_size, count, size, text.decode("utf-8", errors="replace"))
    expected = header_size + count * size
    actual = os.path.getsize(path)
    if actual != expected:
        raise DataError(
            "E7005",
            f"`{path}` is truncated: it holds {actual} bytes, and its header says {expected}",
        )
    return header


def read(path: str, t: Type) -> list[list[np.ndarray]]:
    """The samples of `path`, whose header must name the type `t` (checked by the caller
    against the text; here the sizes are checked)."""
    header = read_header(path)
    spec = leaves(t)
    if sum(leaf.size for leaf in spec) != header.sample_size:
        raise DataError("E7007", f"`{path}` holds samples of type `{header.type_text}`, not `{t}`")
    with open(path, "rb") as f:
        f.seek(header.header_size)
        blob = f.read(header.count * header.sample_size)
    out, at = [], 0
    for _ in range(header.count):
        sample = []
        for leaf in spec:
            sample.append(
                np.frombuffer(
                    blob,
                    dtype=leaf.dtype,
                    count=int(np.prod(leaf.shape, dtype=np.int64)),
                    offset=at,
                ).reshape(leaf.shape)
            )
            at += leaf.size
        out.append(sample)
    return out
