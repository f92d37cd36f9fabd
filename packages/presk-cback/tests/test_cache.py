"""The toolchain, the cache and loading: keys, atomic entries, racing processes, corrupt
entries rebuilt, and no compiler as a diagnostic."""

import dataclasses
import multiprocessing
import os
import uuid

import pytest
from presk_cback import cache, load
from presk_cback.toolchain import BASE_FLAGS, find_toolchain
from presk_syntax.diagnostics import DiagnosticError

CDEF = "double presk_test_f(double);"


def _source(tag: str) -> str:
    # a fresh constant makes a fresh entry
    return f"/* {tag} */\ndouble presk_test_f(double x) {{ return x * 2.0 + {len(tag)}.0; }}\n"


def test_toolchain_resolves_native_and_has_the_contract_flags():
    tc = find_toolchain()
    assert tc.identity and "version" in tc.identity
    assert "-march=" in tc.target and "-march=native" not in tc.target.split()
    flags = tc.flags(threads=True)
    for f in ("-O2", "-march=native", "-ffp-contract=off", "-fno-fast-math", "-std=c11"):
        assert f in flags
    assert ("-fopenmp" in flags) == tc.openmp
    assert "-fopenmp" not in tc.flags(threads=False)
    assert tc.vector_bytes in (16, 32, 64)
    # the vectorizer's loops in the target's full registers (AVX-512: 512 bits; issue 26)
    assert ("-mprefer-vector-width=512" in flags) == (tc.vector_bytes == 64)


def test_no_compiler_is_e9001_with_what_to_install(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/presk-cc")
    with pytest.raises(DiagnosticError) as e:
        find_toolchain()
    (d,) = e.value.diagnostics
    assert d.code == "E9001" and "presk-cc" in d.message and "apt-get install gcc" in d.help


def test_sanitize_flags_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("PRESK_SANITIZE", "address,undefined")
    assert "-fsanitize=address,undefined" in find_toolchain().flags()


def test_cache_folder_overrides(monkeypatch, tmp_path):
    monkeypatch.delenv("PRESK_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "presk"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == cache.Path.home() / ".cache" / "presk"
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path / "x"))
    assert cache.cache_dir() == tmp_path / "x"


def test_key_changes_with_each_of_its_parts():
    tc = find_toolchain()
    base = cache.entry_key(tc, BASE_FLAGS, "int x;")
    others = {
        cache.entry_key(tc, BASE_FLAGS, "int y;"),
        cache.entry_key(tc, (*BASE_FLAGS, "-fopenmp"), "int x;"),
        cache.entry_key(dataclasses.replace(tc, identity="gcc version 99"), BASE_FLAGS, "int x;"),
        cache.entry_key(dataclasses.replace(tc, target="-march=znver4"), BASE_FLAGS, "int x;"),
    }
    assert base not in others and len(others) == 4
    assert cache.entry_key(tc, BASE_FLAGS, "int x;") == base


def test_a_hit_does_not_compile_again():
    tag = "hit " + uuid.uuid4().hex
    src = _source(tag)
    m = load.load(src, CDEF, ("presk_test_f",))
    stamp = os.stat(m.path).st_mtime_ns
    assert m.lib.presk_test_f(1.5) == 3.0 + len(tag)
    assert cache.build(find_toolchain(), find_toolchain().flags(), src) == cache.Path(m.path)
    assert os.stat(m.path).st_mtime_ns == stamp
    assert os.path.exists(m.path[:-3] + ".c")


def _race(src, barrier, out):
    barrier.wait()
    m = load.load(src, CDEF, ("presk_test_f",))
    out.put((m.path, m.lib.presk_test_f(1.0)))


def test_processes_racing_on_one_new_entry_all_load_it():
    src = _source("race " + uuid.uuid4().hex)
    ctx = multiprocessing.get_context("fork")
    n = 4
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(src, barrier, out)) for _ in range(n)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in range(n)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(set(results)) == 1
    folder = os.path.dirname(results[0][0])
    assert not [f for f in os.listdir(folder) if f.endswith(".tmp")]


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage", "other_object"])
def test_a_corrupt_entry_is_rebuilt(damage):
    tc = find_toolchain()
    tag = f"corrupt {damage} " + uuid.uuid4().hex
    src = _source(tag)
    so = cache.build(tc, tc.flags(), src)
    good = so.read_bytes()
    if damage == "truncate":
        so.write_bytes(good[: len(good) // 2])
    elif damage == "empty":
        so.write_bytes(b"")
    elif damage == "garbage":
        so.write_bytes(b"\x7fELF" + b"\x02\x01" + bytes(len(good) - 6))
    else:  # a whole object that lacks the function: it opens, then fails the symbol check
        other = cache.build(tc, tc.flags(), "int presk_unrelated(void) { return 1; }\n")
        so.write_bytes(other.read_bytes())
    if damage != "other_object":
        assert not cache.looks_complete(so)
    m = load.load(src, CDEF, ("presk_test_f",))
    assert m.lib.presk_test_f(0.0) == float(len(tag))
    assert cache.looks_complete(so) and so.read_bytes() == good


def test_compile_error_is_reported_with_the_compilers_words():
    from presk_cback.toolchain import CompileError

    with pytest.raises(CompileError, match="error"):
        load.load("this is not C", CDEF, ("presk_test_f",))


def test_e9001_renders_as_the_chapter_shows(monkeypatch):
    from pathlib import Path

    from presk_syntax.diagnostics import render

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(DiagnosticError) as e:
        find_toolchain()
    text = render(e.value.diagnostics[0], {}, False)
    doc = (Path(__file__).resolve().parents[3] / "docs" / "diagnostics.md").read_text()
    assert f"```text\n{text}```" in doc
