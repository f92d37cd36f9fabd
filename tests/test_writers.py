"""Every file presk writes is written whole through presk_core.data.atomic (issue 27: the
compile cache, the export, realizations, the roofline profile and the GEMM blocking table
each named their own temporaries, and a realization's was left behind by a failed write):
a write interrupted or failed at its end leaves the file before it as it was and no
temporary beside it; one that succeeds leaves the new file alone, with presk's mode."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest
from presk_core import data as D

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

OWN_TEMPORARY = re.compile(r"mkstemp|NamedTemporaryFile|os\.replace\(|os\.rename\(|\.rename\(")


def test_no_writer_names_its_own_temporary():
    """Only presk_core.data writes a temporary and renames it: the packages' sources and the
    tools go through `atomic`, `atomic_path`, `write_bytes` or `write_text`. (The exported
    train.py, a template, stands alone and keeps its own.)"""
    sources = [*ROOT.glob("packages/*/src/**/*.py"), *ROOT.glob("tools/*.py")]
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in sources
        if p != ROOT / "packages/presk-core/src/presk_core/data.py"
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if OWN_TEMPORARY.search(line)
    ]
    assert len(sources) > 100 and found == []


# ---- each writer: (what it writes at `path`, the file's mode) -----------------------------


def _bytes(path: Path) -> None:
    D.write_bytes(str(path), b"new\n")


def _realization(path: Path) -> None:
    from presk_kernel.realization import Realization

    Realization.uniform("f32").write(str(path))


def _profile(path: Path) -> None:
    from fuzz_surfaces import profile_text
    from presk_opt import roofline

    source = path.with_name("source.json")
    source.write_text(json.dumps(profile_text()))
    profile = roofline.read(str(source))
    source.unlink()
    roofline.write(profile, str(path))


def _export(path: Path) -> None:
    from presk_export.export import write_files

    write_files(str(path.parent), {path.name: "x = 1\n"})


def _blocking(path: Path) -> None:
    from presk_cback import gemm
    from presk_core.cc.toolchain import find_toolchain

    assert gemm._tuned_path() == path
    gemm.save_blocking("f64", find_toolchain(), gemm.Blocking(6, 4))


WRITERS = {  # a writer, its file's name, its mode (None: 0666 less the umask)
    "data.write_bytes": (_bytes, "x.txt", None),
    "realization": (_realization, "r.json", None),
    "roofline profile": (_profile, "p.json", None),
    "export": (_export, "train.py", None),
    "gemm blocking": (_blocking, "gemm-blocking.json", 0o600),
}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("PRESK_CACHE", str(folder))
    return folder


def _files(folder: Path) -> list[str]:
    """The files of a folder (the cache's entries are folders: an import may compile)."""
    return sorted(p.name for p in folder.iterdir() if not p.is_dir())


def _interrupt(exc):
    def fsync(fd):
        raise exc

    return fsync


@pytest.mark.parametrize("name", sorted(WRITERS))
@pytest.mark.parametrize(
    "exc", [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")]
)
def test_a_failed_write_keeps_the_file_before_and_leaves_no_temporary(
    name, exc, cache, monkeypatch
):
    write, file, _ = WRITERS[name]
    cache.mkdir(mode=0o700)  # every writer's folder: the blocking table lives in the cache
    path = cache / file
    path.write_bytes(b"before\n")
    with monkeypatch.context() as m, pytest.raises(type(exc)):
        m.setattr(os, "fsync", _interrupt(exc))  # the data written, not yet on disk
        write(path)
    assert path.read_bytes() == b"before\n"
    assert _files(cache) == [file]
    assert not D._LIVE


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_write_leaves_the_new_file_alone_with_its_mode(name, cache):
    write, file, mode = WRITERS[name]
    cache.mkdir(mode=0o700)
    path = cache / file
    path.write_bytes(b"before\n")
    write(path)
    assert path.read_bytes() != b"before\n" and path.read_bytes()
    assert _files(cache) == [file]
    expected = 0o666 & ~D._umask() if mode is None else mode
    assert stat.S_IMODE(path.stat().st_mode) == expected


def test_a_compile_that_fails_leaves_no_temporary_in_the_cache(cache, monkeypatch):
    """The compile cache's object goes through `atomic_path` (the linker writes it): a
    compile error, an empty object and an interrupt after the link leave no object, no
    temporary, and the entry compiles whole the next time."""
    from presk_core.cc import cache as C
    from presk_core.cc.toolchain import BASE_FLAGS, find_toolchain
    from presk_syntax.diagnostics import DiagnosticError

    tc = find_toolchain()

    def leftovers() -> list[str]:
        return [p.name for p in cache.rglob("*") if p.name.endswith(".tmp")]

    flags = tuple(BASE_FLAGS)
    with pytest.raises((C.CompileError, DiagnosticError)):
        C.build("presk test writers 1", tc, flags, "int presk_entry(void) { return }\n")
    assert leftovers() == [] and not D._LIVE
    source = "int presk_entry(void) { return 7; }\n"
    with monkeypatch.context() as m, pytest.raises(KeyboardInterrupt):
        m.setattr(os, "fsync", _interrupt(KeyboardInterrupt()))
        C.build("presk test writers 1", tc, flags, source)
    assert leftovers() == [] and not D._LIVE
    assert list(cache.rglob("*.so")) == []
    so = C.build("presk test writers 1", tc, flags, source)
    assert so.is_relative_to(cache)
    assert C.trusted(so) and stat.S_IMODE(so.stat().st_mode) == C.OBJECT_MODE
    assert stat.S_IMODE(C.digest_path(so).stat().st_mode) == C.FILE_MODE
    assert leftovers() == []


def test_atomic_dir_is_whole_or_nothing(tmp_path):
    """presk_core.data.atomic_dir (the C export's folder): the folder appears whole; a block
    that raises leaves the folder before as it was, and no temporary beside it."""
    out = tmp_path / "prog"
    with D.atomic_dir(str(out)) as tmp:
        D.write_text(os.path.join(tmp, "a.c"), "one\n")
    assert [p.name for p in out.iterdir()] == ["a.c"]
    with pytest.raises(RuntimeError), D.atomic_dir(str(out)) as tmp:
        D.write_text(os.path.join(tmp, "b.c"), "two\n")
        raise RuntimeError("stopped")
    assert [p.name for p in out.iterdir()] == ["a.c"]
    with D.atomic_dir(str(out)) as tmp:
        D.write_text(os.path.join(tmp, "b.c"), "two\n")
    assert [p.name for p in out.iterdir()] == ["b.c"]
    assert [p.name for p in tmp_path.iterdir()] == ["prog"]


def _drained(fifo: Path):
    """A thread reading everything written into the pipe `fifo`; its bytes in `got[0]`."""
    import threading

    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    return reader, got


@pytest.mark.parametrize("how", ["atomic", "atomic_path"])
def test_a_path_that_is_not_a_regular_file_is_written_in_place(tmp_path, how):
    """Writing to a pipe or a device (`--out /dev/null`) writes into it: a rename would have
    replaced the device with a regular file (as root, /dev/null itself)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader, got = _drained(fifo)
    if how == "atomic":
        with D.atomic(str(fifo)) as f:
            f.write(b"whole")
    else:
        with D.atomic_path(str(fifo)) as name:
            Path(name).write_bytes(b"whole")
    reader.join(timeout=10)
    assert got == [b"whole"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary left
