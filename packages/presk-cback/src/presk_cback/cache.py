"""Compiled objects cached by content (DESIGN §11).

An entry's key is a sha256 over the code generator's version, the compiler's identity, the
resolved target flags, the flags and the source; the object is `<dir>/<key[:2]>/<key>.so`
with its `.c` beside it. The folder is `$PRESK_CACHE`, else `$XDG_CACHE_HOME/presk`, else
`~/.cache/presk`.

A compile writes to a temporary name in the entry's folder and renames it: a reader never
sees a partial object, and processes that compile the same entry at once each rename
identical bytes (a per-entry `flock` saves the duplicate work; the rename alone keeps it
safe). An entry never changes in place — a loaded object stays mapped, and `dlopen` of a
path already loaded returns the old handle — so a corrupt one (truncated, or failing
`dlopen`) is removed and compiled again under the same name.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import struct
import subprocess
import tempfile
from pathlib import Path

from presk_cback.toolchain import CompileError, Toolchain, compile_shared

# Bump when the generated C or its calling convention changes meaning.
CODEGEN_VERSION = "presk-cback 1"


def cache_dir() -> Path:
    """The cache folder (not created here)."""
    if os.environ.get("PRESK_CACHE"):
        return Path(os.environ["PRESK_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "presk"


def entry_key(tc: Toolchain, flags: tuple[str, ...], source: str | tuple[str, ...]) -> str:
    """The content key of one compiled object (of one source, or of several units linked)."""
    h = hashlib.sha256()
    units = (source,) if isinstance(source, str) else source
    for part in (CODEGEN_VERSION, tc.identity, tc.target, " ".join(flags), *units):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def entry_path(key: str) -> Path:
    """Where the object of `key` lives."""
    return cache_dir() / key[:2] / f"{key}.so"


def looks_complete(so: Path) -> bool:
    """A cheap check that `so` is a whole ELF object: the section headers, written last by
    the linker, lie inside the file. (Non-ELF platforms: only that the file is not empty.)"""
    try:
        with open(so, "rb") as f:
            head = f.read(64)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    if head[:4] != b"\x7fELF":
        return size > 0
    if len(head) < 64 or head[4] != 2:  # ELFCLASS64 only
        return False
    order = "<" if head[5] == 1 else ">"
    (shoff,) = struct.unpack_from(order + "Q", head, 0x28)
    shentsize, shnum = struct.unpack_from(order + "HH", head, 0x3A)
    return shoff > 0 and shoff + shentsize * shnum <= size


@contextlib.contextmanager
def _entry_lock(folder: Path, key: str):
    with open(folder / f"{key}.lock", "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _write_atomic(path: Path, data: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def compile_units(tc: Toolchain, c_paths: list[str], so_path: str, flags: tuple[str, ...]) -> None:
    """Compile several translation units at once (one compiler process each, in parallel),
    then link them into the shared object `so_path`."""
    objs = [c[: -len(".c")] + ".o" for c in c_paths]
    procs = [
        subprocess.Popen(
            [*tc.cc, *flags, "-c", c, "-o", o],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for c, o in zip(c_paths, objs, strict=True)
    ]
    try:
        errors = [p.communicate()[1] for p in procs]
        failed = [(c, e) for c, e, p in zip(c_paths, errors, procs, strict=True) if p.returncode]
        if failed:
            c, e = failed[0]
            raise CompileError(f"{' '.join(tc.cc)} failed on {c}:\n{e.strip()}")
        p = subprocess.run(
            [*tc.cc, *flags, *objs, "-o", so_path, "-lm"], capture_output=True, text=True
        )
        if p.returncode != 0:
            raise CompileError(f"{' '.join(tc.cc)} failed to link {so_path}:\n{p.stderr.strip()}")
    finally:
        for o in objs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(o)


def build(
    tc: Toolchain, flags: tuple[str, ...], source: str | tuple[str, ...], *, rebuild: bool = False
) -> Path:
    """The object of `source` compiled with `flags`: from the cache, or compiled into it.
    Several sources are translation units compiled in parallel and linked into one object
    (their C beside it as `<key>.<i>.c`).

    `rebuild` says the entry on disk was found corrupt by its user (it failed to load):
    it is removed and compiled again."""
    key = entry_key(tc, flags, source)
    so = entry_path(key)
    if not rebuild and looks_complete(so):
        return so
    so.parent.mkdir(parents=True, exist_ok=True)
    with _entry_lock(so.parent, key):
        if rebuild:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(so)
        elif looks_complete(so):  # another process built it while we waited
            return so
        if isinstance(source, str):
            c_paths = [so.with_suffix(".c")]
            _write_atomic(c_paths[0], source)
        else:
            c_paths = [so.with_suffix(f".{i}.c") for i in range(len(source))]
            for c_path, text in zip(c_paths, source, strict=True):
                _write_atomic(c_path, text)
        fd, tmp = tempfile.mkstemp(dir=so.parent, prefix=f".{key}.", suffix=".so.tmp")
        os.close(fd)
        try:
            if len(c_paths) == 1:
                compile_shared(tc, str(c_paths[0]), tmp, flags)
            else:
                compile_units(tc, [str(c) for c in c_paths], tmp, flags)
            os.replace(tmp, so)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return so
