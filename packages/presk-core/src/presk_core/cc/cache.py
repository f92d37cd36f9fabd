"""Compiled objects cached by content (DESIGN §11), trusted only when they prove themselves.

An entry's key is a sha256 over the code generator's version (each user of the cache names
its own: `presk-cback 2`, `presk-core fold 1`, …), the compiler's identity, the resolved
target flags, the flags (linked libraries included) and the source; the object is
`<dir>/<key[:2]>/<key>.so` with its `.c` beside it and its digest in `<key>.sha256`. The
folder is `$PRESK_CACHE`, else `$XDG_CACHE_HOME/presk`, else `~/.cache/presk`.

Nothing found in the folder is trusted on its word (ccache's and pip's rules):

- the folder is created 0700; a folder or an entry not owned by the user, or writable by
  its group or by others, is refused (E9003): another user could have put any object there;
- an object is loaded only if its sha256 is the digest written when it was compiled: a
  damaged object (a byte of `.text` or `.rodata` overwritten, one bit flipped, cut short)
  is compiled again, silently, under the same name;
- a folder that cannot be written (E9004), a full disk (E9005), a `PRESK_CACHE` that names
  a file (E9006) or a dangling link (E9007), and a compiler that writes an empty object
  (E9008) are diagnostics that say what to do.

A compile writes to a temporary name in the entry's folder and renames it: a reader never
sees a partial object, and processes that compile the same entry at once each rename
identical bytes (a per-entry `flock` saves the duplicate work; the rename alone keeps it
safe). The digest is written (atomically) before the object is renamed into place, so an
object in place always has the digest of its bytes beside it. An entry never changes in
place — a loaded object stays mapped, and `dlopen` of a path already loaded returns the old
handle — so a damaged one is removed and compiled again under the same name.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import shutil
import stat
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

from presk_syntax.diagnostics import DiagnosticError, error

from presk_core.cc.toolchain import (
    CompileError,
    Toolchain,
    check_compiled,
    compile_shared,
    empty_object,
    no_space,
)
from presk_core.data import atomic_path, write_text

FOLDER_MODE = 0o700
OBJECT_MODE = 0o700  # what the linker gives an object, less the group's and others' bits
FILE_MODE = 0o600  # a source and a digest: the user's alone, whatever the umask
UNTRUSTED = stat.S_IWGRP | stat.S_IWOTH


def cache_dir() -> Path:
    """The cache folder (neither created nor checked here: `ready_dir` does both)."""
    if os.environ.get("PRESK_CACHE"):
        return Path(os.environ["PRESK_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "presk"


# ---- diagnostics ------------------------------------------------------------------------


def _untrusted(path: Path, why: str) -> DiagnosticError:
    return DiagnosticError(
        error(
            "E9003",
            f"the compile cache `{path}` {why}: presk does not load what others can write",
            help=f"remove it (`rm -r {path}`) or make it yours alone (`chown -R $USER {path}`"
            f" and `chmod -R go-w {path}`), or set PRESK_CACHE to a folder of your own",
        )
    )


def _read_only(path: Path, e: OSError) -> DiagnosticError:
    return DiagnosticError(
        error(
            "E9004",
            f"the compile cache `{path}` cannot be written: {e.strerror or e}",
            help="make it writable, or set PRESK_CACHE to a folder you can write",
        )
    )


def _os_error(path: Path, e: OSError) -> DiagnosticError | None:
    """The diagnostic of a failed write into the cache, where there is one."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return no_space(str(path))
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return _read_only(path, e)
    return None


def _not_a_folder(path: Path, blocking: Path | None = None) -> DiagnosticError:
    named = "PRESK_CACHE names" if os.environ.get("PRESK_CACHE") else "the cache folder is"
    what = "which is not a folder" if blocking in (None, path) else f"but `{blocking}` is a file"
    return DiagnosticError(
        error(
            "E9006",
            f"{named} `{path}`, {what}",
            help="set PRESK_CACHE to a folder (presk creates it if it does not exist)",
        )
    )


def _dangling(path: Path) -> DiagnosticError:
    return DiagnosticError(
        error(
            "E9007",
            f"the compile cache `{path}` is a symbolic link to `{os.readlink(path)}`, which"
            " does not exist",
            help=f"create the folder it names, remove the link (`rm {path}`), or set"
            " PRESK_CACHE to another folder",
        )
    )


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Report a failed write under `path` as its diagnostic (E9004, E9005, E9006)."""
    try:
        yield
    except OSError as e:
        d = _os_error(path, e)
        if d is None:
            raise
        raise d from e


# ---- trust ------------------------------------------------------------------------------


def check_owned(path: Path, st: os.stat_result | None = None) -> None:
    """E9003 unless `path` belongs to this user and is writable by no one else."""
    st = st or os.stat(path)
    if st.st_uid != os.getuid():
        raise _untrusted(path, f"belongs to another user (uid {st.st_uid})")
    if st.st_mode & UNTRUSTED:
        raise _untrusted(path, f"is writable by others (mode {stat.S_IMODE(st.st_mode):04o})")


def _folder(path: Path, *, root: bool) -> Path:
    """`path` as a checked folder of the cache, created 0700 if it does not exist."""
    if path.is_symlink() and not path.exists():
        raise _dangling(path)
    if path.exists() and not path.is_dir():
        raise _not_a_folder(path)
    if not path.exists():
        try:
            with writing(path):
                if root:
                    path.parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(path, FOLDER_MODE)
        except (FileExistsError, NotADirectoryError):
            pass
        if not path.is_dir():  # a file on the way: name it
            blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), path)
            raise _not_a_folder(path, blocking)
    check_owned(path)
    return path


def ready_dir() -> Path:
    """The cache folder, created (0700) if need be and checked (E9003, E9004, E9006, E9007)."""
    return _folder(cache_dir(), root=True)


def digest_path(so: Path) -> Path:
    return so.with_suffix(".sha256")


def _digest(so: Path) -> str:
    h = hashlib.sha256()
    with open(so, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def trusted(so: Path) -> bool:
    """The object `so` is there, ours in a folder of ours (E9003 if not), and has the digest
    written with it."""
    try:
        st = os.stat(so)
    except FileNotFoundError:
        return False
    check_owned(so.parent)
    check_owned(so, st)
    sidecar = digest_path(so)
    try:
        check_owned(sidecar)
        recorded = sidecar.read_text().strip()
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return False
    return looks_complete(so) and recorded == _digest(so)


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


# ---- entries ----------------------------------------------------------------------------


def entry_key(
    generator: str, tc: Toolchain, flags: tuple[str, ...], source: str | tuple[str, ...]
) -> str:
    """The content key of one compiled object (of one source, or of several units linked)."""
    h = hashlib.sha256()
    units = (source,) if isinstance(source, str) else source
    for part in (generator, tc.identity, tc.target, " ".join(flags), *units):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def entry_path(key: str) -> Path:
    """Where the object of `key` lives."""
    return cache_dir() / key[:2] / f"{key}.so"


def _clear(path: Path) -> None:
    """Whatever is where an entry's file should be, removed: a damaged object, or a folder
    or a link in its place (inside the user's own, checked folder)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


@contextlib.contextmanager
def _entry_lock(folder: Path, key: str):
    lock = folder / f"{key}.lock"
    if lock.is_symlink() or (lock.exists() and not lock.is_file()):
        with writing(folder):
            _clear(lock)
    with writing(folder), open(lock, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def compile_units(
    tc: Toolchain,
    c_paths: list[str],
    so_path: str,
    flags: tuple[str, ...],
    libs: tuple[str, ...] = (),
) -> None:
    """Compile several translation units at once (one compiler process each, in parallel),
    then link them into the shared object `so_path`."""
    objs = [c[: -len(".c")] + ".o" for c in c_paths]
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    procs = [
        subprocess.Popen(
            [*tc.cc, *flags, "-c", c, "-o", o],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for c, o in zip(c_paths, objs, strict=True)
    ]
    try:
        errors = [p.communicate()[1] for p in procs]
        for c, e, p in zip(c_paths, errors, procs, strict=True):
            check_compiled(tc, p.returncode, e, c[: -len(".c")] + ".o", f"failed on {c}")
        p = subprocess.run(
            [*tc.cc, *flags, *objs, "-o", so_path, *libs, "-lm"],
            capture_output=True,
            text=True,
            env=env,
        )
        check_compiled(tc, p.returncode, p.stderr, so_path, f"failed to link {so_path}")
    finally:
        for o in objs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(o)


def build(
    generator: str,
    tc: Toolchain,
    flags: tuple[str, ...],
    source: str | tuple[str, ...],
    *,
    libs: tuple[str, ...] = (),
    rebuild: bool = False,
) -> Path:
    """The object of `source` compiled with `flags` and linked with `libs`: from the cache
    if it is there and proves itself (owner, mode, digest), else compiled into it. Several
    sources are translation units compiled in parallel and linked into one object (their C
    beside it as `<key>.<i>.c`).

    `rebuild` says the entry on disk was found broken by its user (it failed to load):
    it is removed and compiled again."""
    ready_dir()
    key = entry_key(generator, tc, (*flags, *libs), source)
    so = entry_path(key)
    if not rebuild and so.parent.is_dir() and trusted(so):
        return so
    if (so.parent.is_symlink() and not so.parent.exists()) or so.parent.is_file():
        with writing(so.parent.parent):
            _clear(so.parent)  # a file or a dangling link where an entry's folder should be
    folder = _folder(so.parent, root=False)
    with _entry_lock(folder, key):
        if not rebuild and trusted(so):  # another process built it while we waited
            return so
        with writing(folder):
            _compile(tc, flags, source, libs, so)
    return so


compiled_count = 0
"""How many objects this process compiled rather than found in the cache (`presk train`
says which the step's was)."""


def _compile(tc, flags, source, libs, so: Path) -> None:
    global compiled_count
    compiled_count += 1
    for path in (so, digest_path(so)):
        _clear(path)
    if isinstance(source, str):
        c_paths = [so.with_suffix(".c")]
        _clear(c_paths[0])
        write_text(str(c_paths[0]), source, FILE_MODE)
    else:
        c_paths = [so.with_suffix(f".{i}.c") for i in range(len(source))]
        for c_path, text in zip(c_paths, source, strict=True):
            _clear(c_path)
            write_text(str(c_path), text, FILE_MODE)
    # OBJECT_MODE whatever the umask gave the linker's file; the digest written before the
    # object is renamed into place
    with atomic_path(str(so), OBJECT_MODE) as tmp:
        if len(c_paths) == 1:
            compile_shared(tc, str(c_paths[0]), tmp, flags, libs)
        else:
            compile_units(tc, [str(c) for c in c_paths], tmp, flags, libs)
        if not looks_complete(Path(tmp)):
            raise empty_object(tc)
        write_text(str(digest_path(so)), _digest(Path(tmp)) + "\n", FILE_MODE)


__all__ = [
    "CompileError",
    "build",
    "cache_dir",
    "check_owned",
    "entry_key",
    "entry_path",
    "looks_complete",
    "ready_dir",
    "trusted",
]
