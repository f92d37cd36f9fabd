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
32+T    …     zero padding up to H, a multiple of 8; in a parameter tree's file (`params M`),
              first its layout: a u32 length L and L bytes of JSON, `[[path, [lengths]], …]`,
              each leaf's path and shape in order (so a reader checks the tree it expects)
H       N·S   the samples: sample i at H + i·S, its leaves in the type's order, each
              row-major: reals as f64, indices as i64, truth values as u8
```

A reader in any language seeks sample i without parsing the type. Writes are atomic (a
temporary file in the same folder, then a rename): a reader never sees half a file. The
temporary's name holds the writer's pid (`.psk-<pid>-<random>.tmp`): the process removes its
own on the way out (`remove_temporaries`, however it stops short of SIGKILL), and a later
run removes those of writers that are dead (`remove_stale`).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import stat
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
from presk_types.types import Bool, Idx, Real, Shape, TupleT, Type

I64_MAX = 2**63 - 1

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
    """One tensor of a sample: its kind (`f8`, `i8`, `u1`), its lengths and, for indices,
    their bound (`idx[3]`: 0, 1 or 2)."""

    dtype: str
    shape: tuple[int, ...]
    bound: int | None = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


def leaves(t: Type) -> list[Leaf]:
    """The leaves of a sample type, in order; DataError for a type a file cannot hold."""
    match t:
        case TupleT(elements):
            return [leaf for e in elements for leaf in leaves(e)]
        case Idx(bound, shape):
            if not bound.is_const:
                raise DataError("E7007", f"a sample type has constant bounds, and `{t}` does not")
            return [Leaf("<i8", _closed(shape, t), bound.constant)]
        case Real(shape) | Bool(shape):
            return [Leaf({Real: "<f8", Bool: "u1"}[type(t)], _closed(shape, t))]
    raise DataError("E7007", f"a .psk.d sample cannot be of type `{t}`")


def _closed(shape: Shape, t: Type) -> tuple[int, ...]:
    if shape.prefix or any(not a.length.is_const for a in shape.axes):
        raise DataError("E7007", f"a sample type has constant lengths, and `{t}` does not")
    return tuple(a.length.constant for a in shape.axes)


def type_of(text: str, where: str | None = None) -> Type:
    """The type a `--type` or a file's header names; DataError E7007 when it is not one (with
    a hint for a scalar index written `idx[3]`), and for a checkpoint's `params M`."""
    from presk_syntax.diagnostics import DiagnosticError
    from presk_types.elab import ConstError, type_from_text

    origin = f"`{where}` holds `{text}`, which" if where else f"`{text}`"
    if text.startswith("params "):
        raise DataError(
            "E7007",
            f"{origin} is a checkpoint (a parameter tree), not samples"
            if where
            else f"`{text}` is a checkpoint's type, not a sample type",
        )
    try:
        return type_from_text(text)
    except DiagnosticError as e:
        message = e.diagnostics[0].message
    except ConstError as e:
        message = e.diagnostic.message if e.diagnostic is not None else "not a type"
    except RecursionError:
        message = "nested too deeply"
    hint = ""
    if re.fullmatch(r"\s*(idx\[[^\]]*\]|ℝ|bool)\s*", text) and text.strip().startswith("idx"):
        hint = f" (a scalar index is `{text.strip()}[]`: an index type takes its shape)"
    raise DataError("E7007", f"{origin} is not a type: {message}{hint}")


def parse_samples(numbers: list[str], t: Type, name: str) -> list[list[np.ndarray]]:
    """The samples of type `t` that numbers written in decimal make (`presk data pack`):
    reals finite doubles, indices integers below their bound, truth values 0 or 1."""
    spec = leaves(t)
    per = sum(int(np.prod(leaf.shape, dtype=np.int64)) for leaf in spec)
    if per == 0 or len(numbers) % per:
        raise DataError(
            "E7007",
            f"`{name}` holds {len(numbers)} numbers, not a multiple of the {per} of a sample"
            f" of `{t}`",
        )
    samples, at = [], 0
    for _ in range(len(numbers) // per):
        sample = []
        for leaf in spec:
            n = int(np.prod(leaf.shape, dtype=np.int64))
            values = [_number(numbers[at + i], leaf, at + i, name) for i in range(n)]
            sample.append(np.array(values, dtype=leaf.dtype).reshape(leaf.shape))
            at += n
        samples.append(sample)
    return samples


def _number(word: str, leaf: Leaf, i: int, name: str) -> float | int:
    where = f"`{name}`: number {i}, `{word[:40]}`,"
    if leaf.dtype == "<f8":
        try:
            x = float(word)
        except ValueError:
            raise DataError("E7007", f"{where} is not a real") from None
        if not np.isfinite(x):
            raise DataError("E7007", f"{where} is not a finite double")
        return x
    try:
        k = int(word)
    except ValueError:
        kind = "an index" if leaf.bound is not None else "a truth value (0 or 1)"
        raise DataError("E7007", f"{where} is not {kind}") from None
    top = 2 if leaf.bound is None else leaf.bound
    if not 0 <= k < top:
        kind = (
            f"`idx[{leaf.bound}]` (0 to {top - 1})" if leaf.bound is not None else "bool (0 or 1)"
        )
        raise DataError("E7007", f"{where} is outside {kind}")
    return k


@dataclass
class Header:
    version: int
    header_size: int
    count: int
    sample_size: int
    type_text: str
    layout: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    """A parameter tree's leaves (path, shape) in order, when the file records them."""


def write(path: str, type_text: str, t: Type, samples: list[list[np.ndarray]]) -> None:
    """Write samples (each a list of arrays, one per leaf) atomically."""
    _write(path, type_text, leaves(t), samples)


def write_tree(
    path: str, type_text: str, arrays: list[np.ndarray], paths: list[str] | None = None
) -> None:
    """A parameter tree as one sample of reals (`params Tower`: its leaves in order), its
    layout (each leaf's path, from `paths`, and shape) recorded in the header."""
    spec = [Leaf("<f8", np.shape(a)) for a in arrays]
    layout = None
    if paths is not None:
        layout = [[p, list(leaf.shape)] for p, leaf in zip(paths, spec, strict=True)]
    _write(path, type_text, spec, [arrays], layout)


def read_reals(path: str) -> np.ndarray:
    """Every real of a file whose samples are all reals (a parameter tree's), in order."""
    header = read_header(path)
    if header.sample_size % 8:
        raise DataError(
            "E7010",
            f"`{path}` has a malformed header: samples of {header.sample_size} bytes are not"
            f" reals of 8 bytes each (its type `{header.type_text}` holds reals only)",
        )
    try:
        with open(path, "rb") as f:
            f.seek(header.header_size)
            blob = f.read(header.count * header.sample_size)
    except OSError as e:
        raise DataError(
            "E7004", f"cannot read `{path}`: {(e.strerror or str(e)).lower()}"
        ) from None
    return np.frombuffer(blob, dtype="<f8")


def write_rows(path: str, type_text: str, t: Type, rows: np.ndarray) -> None:
    """Samples whose leaves all have the dtype of `rows`, one a row (a sample's leaves side
    by side, row-major), written atomically at once: a million n-grams without a million
    small writes."""
    spec = leaves(t)
    size = sum(leaf.size for leaf in spec)
    rows = np.ascontiguousarray(rows, dtype=spec[0].dtype).reshape(len(rows), -1)
    if any(leaf.dtype != spec[0].dtype for leaf in spec) or rows.nbytes != len(rows) * size:
        raise ValueError(f"rows of {rows.shape[1]} elements are not samples of `{type_text}`")
    with atomic(path) as f:
        f.write(_head(type_text, len(rows), size))
        f.write(rows.tobytes())


def _head(type_text: str, count: int, size: int, layout: list | None = None) -> bytes:
    text = type_text.encode("utf-8")
    if layout is not None:  # after the type, in what a reader skips: the tree's leaves
        blob = json.dumps(layout, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        text += struct.pack("<I", len(blob)) + blob
    header_size = (_FIXED.size + len(text) + 7) // 8 * 8
    head = _FIXED.pack(MAGIC, VERSION, header_size, count, size, len(type_text.encode())) + text
    return head + b"\0" * (header_size - len(head))


def _write(
    path: str,
    type_text: str,
    spec: list[Leaf],
    samples: list[list[np.ndarray]],
    layout: list | None = None,
) -> None:
    size = sum(leaf.size for leaf in spec)
    with atomic(path) as f:
        f.write(_head(type_text, len(samples), size, layout))
        for sample in samples:
            for leaf, value in zip(spec, sample, strict=True):
                f.write(np.ascontiguousarray(value, dtype=leaf.dtype).reshape(leaf.shape).tobytes())


_LIVE: set[str] = set()
"""The temporaries this process is writing: removed by `remove_temporaries` on the way out."""

TEMPORARY = re.compile(r"^\.psk-(\d+)-[0-9a-f]+\.tmp$")


def _temporary(folder: str) -> tuple[int, str]:
    """A new temporary in `folder`, created (O_EXCL) after its name is registered: a signal
    between the two leaves a name to remove, never a file nobody knows."""
    while True:
        tmp = os.path.join(folder, f".psk-{os.getpid()}-{secrets.token_hex(6)}.tmp")
        _LIVE.add(tmp)
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), tmp
        except FileExistsError:  # another writer's name (an interrupt keeps it registered)
            _LIVE.discard(tmp)


def _unlink(tmp: str) -> None:
    try:
        if os.path.isdir(tmp) and not os.path.islink(tmp):  # an atomic_dir's
            shutil.rmtree(tmp)
        else:
            os.unlink(tmp)
    except FileNotFoundError:
        pass
    _LIVE.discard(tmp)


@contextmanager
def atomic_dir(path: str) -> Iterator[str]:
    """A folder that appears at `path` whole when the block ends, or not at all if it
    raises: the name of an empty temporary folder beside `path`, which the block fills,
    renamed to `path` at the end. A folder already at `path` is replaced whole (moved aside,
    then removed); the caller decides whether it may be (the C export's E8010)."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".psk-{os.getpid()}-{secrets.token_hex(6)}.tmp")
    _LIVE.add(tmp)
    old = None
    try:
        os.mkdir(tmp)
        yield tmp
        if os.path.lexists(path):
            old = os.path.join(parent, f".psk-{os.getpid()}-{secrets.token_hex(6)}.tmp")
            _LIVE.add(old)
            os.rename(path, old)
        os.rename(tmp, path)
        _LIVE.discard(tmp)
    except BaseException:
        _unlink(tmp)
        if old is not None and not os.path.lexists(path):  # the folder before, put back
            os.rename(old, path)
            _LIVE.discard(old)
            old = None
        raise
    finally:
        if old is not None:
            _unlink(old)


@contextmanager
def atomic(path: str, mode: int | None = None) -> Iterator[BinaryIO]:
    """A file opened for writing that appears at `path` whole when the block ends, or not at
    all if it raises (a full disk, an interrupt): a temporary file in the same folder, then a
    rename; the file at `path` before stays as it was until the rename. Created `mode`
    (default 0666 less the umask, as `open` creates a file: presk's one mode). Presk's one
    way to write a file whole: every writer goes through it or `atomic_path`. A `path` that
    is not a regular file (/dev/null, a pipe, a terminal) is written in place: a rename would
    replace the device itself."""
    if _special(path):
        with open(path, "wb") as f:
            yield f
        return
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = _temporary(folder)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # the data on disk before the name: a crash leaves the old file
        _publish(tmp, path, mode)
    except BaseException:
        _unlink(tmp)
        raise


@contextmanager
def atomic_path(path: str, mode: int | None = None) -> Iterator[str]:
    """`atomic` for a writer that takes a file name (the C compiler and its linker): the name
    of an empty temporary in `path`'s folder, renamed to `path` when the block ends (the
    writer may replace the file under that name), removed if the block raises. A `path` that
    is not a regular file gets the temporary's bytes copied into it, not renamed over it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = _temporary(folder)
    os.close(fd)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if _special(path):
            with open(tmp, "rb") as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
            _unlink(tmp)
        else:
            _publish(tmp, path, mode)
    except BaseException:
        _unlink(tmp)
        raise


def _special(path: str) -> bool:
    """`path` names something that is there and is not a regular file or a folder (a device,
    a pipe): what a rename must not replace."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))


def _publish(tmp: str, path: str, mode: int | None) -> None:
    """The complete temporary `tmp` renamed to `path`, given its mode first."""
    if os.environ.get(HOLD):
        _hold(os.environ[HOLD], tmp)
    os.chmod(tmp, 0o666 & ~_umask() if mode is None else mode)  # not mkstemp's 0600
    os.replace(tmp, path)
    _LIVE.discard(tmp)


HOLD = "PRESK_TEST_HOLD_WRITE"
"""For the tests of signals (tests/cli/test_signals.py): a file path; each write, its
temporary complete, names the temporary in that file and waits until the file is removed.
A write while SIGINT is blocked (a run's way out saving its last step, a native step) is not
held: no signal could land in it."""


def _hold(path: str, tmp: str) -> None:
    if (
        threading.current_thread() is threading.main_thread()
        and signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    ):
        return
    with open(path, "w") as f:
        f.write(tmp)
    while os.path.exists(path):
        time.sleep(0.005)


def remove_temporaries() -> None:
    """Remove the temporaries this process left (it stops in the middle of a write)."""
    for tmp in list(_LIVE):
        try:
            _unlink(tmp)
        except OSError:
            _LIVE.discard(tmp)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def remove_stale(folder: str) -> list[str]:
    """Remove the temporaries in `folder` of writers that are dead (their pid in the name);
    the names removed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    removed = []
    for name in names:
        m = TEMPORARY.match(name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            try:
                os.unlink(os.path.join(folder, name))
                removed.append(name)
            except OSError:
                pass
    return removed


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bytes(path: str, blob: bytes, mode: int | None = None) -> None:
    """Write `blob` to `path` atomically (a vocabulary, a token file: docs/data.md)."""
    with atomic(path, mode) as f:
        f.write(blob)


def write_text(path: str, text: str, mode: int | None = None) -> None:
    """Write `text` to `path` atomically, in UTF-8 (a realization, a profile, an export)."""
    write_bytes(path, text.encode("utf-8"), mode)


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
            if _FIXED.size + tlen > os.fstat(f.fileno()).st_size:  # not read: up to 4 GB
                raise DataError("E7005", f"`{path}` is truncated: its header is cut short")
            text = f.read(tlen)
    except OSError as e:
        raise DataError(
            "E7004", f"cannot read `{path}`: {(e.strerror or str(e)).lower()}"
        ) from None
    if len(text) < tlen:
        raise DataError("E7005", f"`{path}` is truncated: its header is cut short")
    if header_size < _FIXED.size + tlen or header_size % 8:
        raise DataError(
            "E7010",
            f"`{path}` has a malformed header: its size is {header_size} bytes, and its fields"
            f" take {_FIXED.size + tlen} (the samples start after them, at a multiple of 8)",
        )
    if size == 0 and count:
        raise DataError(
            "E7010",
            f"`{path}` has a malformed header: {count} samples of 0 bytes (a sample type of"
            " no reals, indices or truth values holds nothing)",
        )
    header = Header(version, header_size, count, size, text.decode("utf-8", errors="replace"))
    if header.type_text.startswith("params "):
        header.layout = _layout(path, header_size - _FIXED.size - tlen)
    expected = header_size + count * size
    actual = os.path.getsize(path)
    if actual != expected:
        raise DataError(
            "E7005",
            f"`{path}` is truncated: it holds {actual} bytes, and its header says {expected}",
        )
    return header


def _layout(path: str, room: int) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    """A parameter tree's recorded leaves, from the header's room after the type; None for a
    file that records none (written before presk recorded them) or one it cannot read."""
    if room < 4:
        return None
    try:
        with open(path, "rb") as f:
            f.seek(_FIXED.size + struct.unpack_from("<I", _peek(f, 28, 4))[0])
            blob = f.read(room)
    except OSError:
        return None
    (n,) = struct.unpack_from("<I", blob)
    if n == 0 or n > len(blob) - 4:
        return None
    try:
        leaves = tuple((p, tuple(shape)) for p, shape in json.loads(blob[4 : 4 + n]))
    except (ValueError, TypeError):
        return None
    good = all(
        isinstance(p, str) and all(type(x) is int and x >= 0 for x in shape) for p, shape in leaves
    )
    return leaves if good else None


def _peek(f: BinaryIO, at: int, n: int) -> bytes:
    f.seek(at)
    return f.read(n)


def read(path: str, t: Type) -> list[list[np.ndarray]]:
    """The samples of `path`, whose header must name the type `t` (checked by the caller
    against the text; here the sizes are checked): `read_columns`' rows."""
    return samples(read_columns(path, t))


def read_columns(path: str, t: Type) -> list[np.ndarray]:
    """The leaves of `path`'s samples as columns, one array a leaf of the samples' leaves
    stacked on a first axis: views into one packed record array (a training run's batch is
    then one `np.take` a leaf, presk_core.run.take_samples)."""
    header = read_header(path)
    spec = leaves(t)
    if sum(leaf.size for leaf in spec) != header.sample_size:
        raise DataError("E7007", f"`{path}` holds samples of type `{header.type_text}`, not `{t}`")
    with open(path, "rb") as f:
        f.seek(header.header_size)
        blob = f.read(header.count * header.sample_size)
    record = np.dtype([(f"l{i}", leaf.dtype, leaf.shape) for i, leaf in enumerate(spec)])
    return [np.frombuffer(blob, dtype=record, count=header.count)[n] for n in record.names]


def samples(columns: list[np.ndarray]) -> list[list[np.ndarray]]:
    """Each sample's leaves (`[j, ...]` of each column, a 0-d array for a scalar): views,
    without a call per leaf and sample."""
    count = len(columns[0]) if columns else 0
    return [[c[j, ...] for c in columns] for j in range(count)]
