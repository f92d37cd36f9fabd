"""presk_core.cc's cache trusts nothing it finds: a damaged object (code, constants, one bit)
is compiled again and gives the right result; folders and entries another user could write
are refused (E9003); a read-only cache (E9004), a full disk (E9005), a PRESK_CACHE that is a
file (E9006) or a dangling link (E9007), a compiler that writes an empty object (E9008) and
an object that never loads (E9009) are diagnostics, not internal errors. And the
interpreter's C helpers go through the same cache: PRESK_CACHE, the compiler and the flags
(`-ffp-contract=off`) in their key, the same digest check."""

import contextlib
import errno
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from presk_core.cc import cache, load
from presk_core.cc.toolchain import find_toolchain
from presk_syntax.diagnostics import DiagnosticError

GEN = "presk-core tests 1"
CDEF = "double presk_cc_test(int);"
ROOT = Path(__file__).resolve().parents[3]


def _source(tag: str) -> str:
    # a table in .rodata and code in .text; a fresh tag makes a fresh entry
    return textwrap.dedent(
        f"""\
        /* {tag} */
        static const double presk_cc_table[4] = {{1.25, 2.5, 3.75, 1234.5678}};
        double presk_cc_test(int i) {{ return presk_cc_table[i & 3] * 2.0; }}
        """
    )


@pytest.fixture
def compiler():
    try:
        return find_toolchain()
    except DiagnosticError as e:
        pytest.skip(f"no C compiler: {e.diagnostics[0].message}")


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A fresh cache folder for the test."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("PRESK_CACHE", str(folder))
    return folder


def _code(e: pytest.ExceptionInfo) -> str:
    (d,) = e.value.diagnostics
    return d.code


def _section(data: bytes, name: str) -> tuple[int, int]:
    """(file offset, size) of the ELF64 little-endian section `name`."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i):
        at = shoff + i * shentsize
        sh_name = struct.unpack_from("<I", data, at)[0]
        offset, size = struct.unpack_from("<QQ", data, at + 0x18)
        return sh_name, offset, size

    _, names, _ = header(shstrndx)
    for i in range(shnum):
        sh_name, offset, size = header(i)
        end = data.index(b"\0", names + sh_name)
        if data[names + sh_name : end].decode() == name:
            return offset, size
    raise KeyError(name)


def _damage(data: bytes, how: str) -> bytes:
    b = bytearray(data)
    if how == "text":
        at, size = _section(data, ".text")
        b[at : at + size] = b"\xcc" * size  # int3 all over the code: SIGTRAP if it ran
    elif how == "rodata":
        at = data.index(struct.pack("<d", 1234.5678))
        b[at : at + 8] = struct.pack("<d", float("nan"))
    elif how == "bit":
        at, size = _section(data, ".rodata")
        at = data.index(struct.pack("<d", 2.5))
        b[at + 3] ^= 0x10  # one bit of one constant
    elif how == "truncate":
        del b[len(b) // 2 :]
    return bytes(b)


@pytest.mark.parametrize("how", ["text", "rodata", "bit", "truncate"])
def test_a_damaged_object_is_compiled_again_and_gives_the_right_result(compiler, here, how):
    src = _source(f"damage {how} {uuid.uuid4().hex}")
    so = cache.build(GEN, compiler, compiler.flags(), src)
    good = so.read_bytes()
    so.write_bytes(_damage(good, how))
    assert so.read_bytes() != good
    assert not cache.trusted(so)
    m = load.load(GEN, src, CDEF, ("presk_cc_test",))
    assert [m.lib.presk_cc_test(i) for i in range(4)] == [2.5, 5.0, 7.5, 2469.1356]
    assert so.read_bytes() == good and cache.trusted(so)


@pytest.mark.parametrize("what", ["file", "dangling link"])
def test_a_file_or_a_link_in_place_of_an_entry_folder_is_replaced(compiler, here, what):
    src = _source(f"entry folder {what} {uuid.uuid4().hex}")
    so = cache.build(GEN, compiler, compiler.flags(), src)
    shutil.rmtree(so.parent)
    if what == "file":
        so.parent.write_text("")
    else:
        so.parent.symlink_to(here / "nowhere")
    m = load.load(GEN, src, CDEF, ("presk_cc_test",))
    assert m.lib.presk_cc_test(2) == 7.5 and cache.trusted(so)


@pytest.mark.parametrize("where", [".so", ".sha256", ".lock", ".c"])
@pytest.mark.parametrize("what", ["folder", "dangling link"])
def test_a_folder_or_a_link_in_place_of_an_entrys_file_is_replaced(compiler, here, where, what):
    src = _source(f"in place {where} {what} {uuid.uuid4().hex}")
    so = cache.build(GEN, compiler, compiler.flags(), src)
    good = so.read_bytes()
    path = so.with_suffix(where)
    path.unlink()
    if what == "folder":
        (path / "inside").mkdir(parents=True)
    else:
        path.symlink_to(here / "nowhere")
    if where in (".lock", ".c"):  # and the object to be compiled again, through them
        cache.digest_path(so).unlink()
    assert not cache.trusted(so)
    m = load.load(GEN, src, CDEF, ("presk_cc_test",))
    assert m.lib.presk_cc_test(1) == 5.0
    assert cache.trusted(so) and so.read_bytes() == good


def test_an_object_without_its_digest_is_not_trusted(compiler, here):
    src = _source(f"no digest {uuid.uuid4().hex}")
    so = cache.build(GEN, compiler, compiler.flags(), src)
    assert cache.trusted(so)
    cache.digest_path(so).unlink()
    assert not cache.trusted(so)
    assert cache.build(GEN, compiler, compiler.flags(), src) == so and cache.trusted(so)


def test_the_folder_is_created_0700_and_its_objects_are_the_users_alone(compiler, here):
    so = cache.build(GEN, compiler, compiler.flags(), _source(uuid.uuid4().hex))
    for p in (here, so.parent):
        assert p.stat().st_mode & 0o777 == 0o700
    for p in (so, cache.digest_path(so), so.with_suffix(".c")):
        assert p.stat().st_mode & 0o077 == 0, p


@pytest.mark.parametrize("what", ["root", "entry folder", "object"])
def test_what_others_can_write_is_refused(compiler, here, what):
    src = _source(f"others {what} {uuid.uuid4().hex}")
    so = cache.build(GEN, compiler, compiler.flags(), src)
    target = {"root": here, "entry folder": so.parent, "object": so}[what]
    os.chmod(target, 0o777)
    with pytest.raises(DiagnosticError) as e:
        load.load(GEN, src, CDEF, ("presk_cc_test",))
    (d,) = e.value.diagnostics
    assert d.code == "E9003" and str(target) in d.message and "mode 0777" in d.message
    assert "PRESK_CACHE" in d.help and "chmod" in d.help


def test_a_folder_of_another_user_is_refused(compiler, here, monkeypatch):
    here.mkdir(mode=0o700)
    mine = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: mine + 1)  # as another user would see it
    with pytest.raises(DiagnosticError) as e:
        cache.build(GEN, compiler, compiler.flags(), _source(uuid.uuid4().hex))
    assert _code(e) == "E9003" and f"another user (uid {mine})" in e.value.diagnostics[0].message


def test_presk_cache_naming_a_file_is_e9006(compiler, tmp_path, monkeypatch):
    f = tmp_path / "a-file"
    f.write_text("")
    monkeypatch.setenv("PRESK_CACHE", str(f))
    with pytest.raises(DiagnosticError) as e:
        cache.build(GEN, compiler, compiler.flags(), _source(uuid.uuid4().hex))
    assert _code(e) == "E9006" and "PRESK_CACHE names" in e.value.diagnostics[0].message
    monkeypatch.setenv("PRESK_CACHE", str(f / "below"))  # a file on the way
    with pytest.raises(DiagnosticError) as e:
        cache.build(GEN, compiler, compiler.flags(), _source(uuid.uuid4().hex))
    assert _code(e) == "E9006"


def test_a_dangling_link_is_e9007(compiler, tmp_path, monkeypatch):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    monkeypatch.setenv("PRESK_CACHE", str(link))
    with pytest.raises(DiagnosticError) as e:
        cache.build(GEN, compiler, compiler.flags(), _source(uuid.uuid4().hex))
    assert _code(e) == "E9007" and "gone" in e.value.diagnostics[0].message


@pytest.mark.parametrize(("code", "err"), [("E9004", errno.EROFS), ("E9005", errno.ENOSPC)])
def test_a_write_that_fails_is_its_diagnostic(compiler, here, monkeypatch, code, err):
    src = _source(f"write {code} {uuid.uuid4().hex}")
    cache.ready_dir()

    def refused(*args, **kwargs):
        raise OSError(err, os.strerror(err))

    from presk_core import data

    monkeypatch.setattr(data, "_temporary", refused)  # every file is written through it
    with pytest.raises(DiagnosticError) as e:
        cache.build(GEN, compiler, compiler.flags(), src)
    assert _code(e) == code and "PRESK_CACHE" in e.value.diagnostics[0].help


def _fake_cc(tmp_path: Path, compile_step: str) -> Path:
    """A compiler that answers `-v` and `-E` as gcc does and compiles with `compile_step`
    (a shell line; `$out` is the -o file)."""
    cc = tmp_path / "fake-cc"
    cc.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            out=""; prev=""
            for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
            case " $* " in
              *" -v "*) echo "gcc version 0.0 (a fake for presk's tests)" >&2; exit 0;;
              *" -E "*) exit 0;;
            esac
            {compile_step}
            """
        )
    )
    cc.chmod(0o755)
    return cc


def test_a_compiler_that_writes_an_empty_object_is_e9008(here, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(_fake_cc(tmp_path, ': > "$out"; exit 0')))
    tc = find_toolchain()
    with pytest.raises(DiagnosticError) as e:
        load.load(GEN, _source(uuid.uuid4().hex), CDEF, ("presk_cc_test",), toolchain=tc)
    assert _code(e) == "E9008" and "fake-cc" in e.value.diagnostics[0].message
    assert not [p for p in here.rglob("*") if p.suffix in (".so", ".tmp")]


def test_a_compiler_out_of_space_is_e9005(here, tmp_path, monkeypatch):
    step = 'echo "fake-cc: fatal error: cannot write: No space left on device" >&2; exit 1'
    monkeypatch.setenv("CC", str(_fake_cc(tmp_path, step)))
    with pytest.raises(DiagnosticError) as e:
        load.load(GEN, _source(uuid.uuid4().hex), CDEF, ("presk_cc_test",))
    assert _code(e) == "E9005"


def test_an_object_that_never_loads_is_e9009(here, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(_fake_cc(tmp_path, 'echo "not an object" > "$out"; exit 0')))
    with pytest.raises(DiagnosticError) as e:
        load.load(GEN, _source(uuid.uuid4().hex), CDEF, ("presk_cc_test",))
    assert _code(e) == "E9009" and "cannot be loaded" in e.value.diagnostics[0].message


@contextlib.contextmanager
def _tmpfs(where: Path, size: str):
    where.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True)  # fmt: skip
    if p.returncode != 0:
        pytest.skip("no tmpfs can be mounted here (not root): the monkeypatched tests stand")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_full_disk_and_a_read_only_cache_for_real(compiler, tmp_path, monkeypatch):
    with _tmpfs(tmp_path / "fs", "16k") as fs:
        monkeypatch.setenv("PRESK_CACHE", str(fs / "cache"))
        big = _source("full") + "".join(f"double f{i}(double x) {{ return x * {i}.5; }}\n"
                                        for i in range(3000))  # fmt: skip
        with pytest.raises(DiagnosticError) as e:
            cache.build(GEN, compiler, compiler.flags(), big)
        assert _code(e) == "E9005"
        assert not [p for p in fs.rglob("*") if p.name.endswith(".tmp")]
    with _tmpfs(tmp_path / "ro", "1m") as fs:
        monkeypatch.setenv("PRESK_CACHE", str(fs / "cache"))
        src = _source(f"read-only {uuid.uuid4().hex}")
        so = cache.build(GEN, compiler, compiler.flags(), src)
        subprocess.run(["mount", "-o", "remount,ro", str(fs)], check=True)
        assert cache.build(GEN, compiler, compiler.flags(), src) == so  # a hit still loads
        with pytest.raises(DiagnosticError) as e:
            cache.build(GEN, compiler, compiler.flags(), _source("another"))
        assert _code(e) == "E9004" and "cannot be written" in e.value.diagnostics[0].message


def test_the_helpers_use_the_one_cache_with_the_compiler_and_flags_in_their_key(compiler, tmp_path):
    # a fresh process: the helpers are built at most once a process
    env = {**os.environ, "PRESK_CACHE": str(tmp_path / "c"), "PRESK_INTERP_C": "1"}
    probe = textwrap.dedent(
        """\
        import presk_core.cc.load as L
        seen = []
        build = L.build
        def spy(generator, tc, flags, source, **kw):
            seen.append((generator, tc.identity, flags, kw.get("libs")))
            return build(generator, tc, flags, source, **kw)
        L.build = spy
        from presk_core import erfc_c, fold_c, normal_c, ufuncs_c
        ok = [fold_c.available(), erfc_c.available(), normal_c.available(), ufuncs_c.load()]
        assert all(ok), ok
        for generator, identity, flags, libs in seen:
            assert "-ffp-contract=off" in flags and "-march=native" in flags, flags
            assert identity and "mpfr" in " ".join(libs), libs
        print(len(seen))
        """
    )

    def run():
        return subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True
        )

    r = run()
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "4"
    objects = sorted((tmp_path / "c").rglob("*.so"))
    assert len(objects) == 4 and all(cache.trusted(p) for p in objects)
    for so in objects:  # each helper damaged: compiled again, never loaded as it is
        so.write_bytes(_damage(so.read_bytes(), "text"))
    r = run()
    assert r.returncode == 0, r.stderr
    assert all(cache.trusted(p) for p in objects)


def test_the_compilers_identity_is_its_own_version_line(tmp_path):
    """clang -v may name another version after its own (a CUDA installation): the cache's
    key must tell two clangs apart by their version, not by that line."""
    from presk_core.cc.toolchain import _identity

    fake = tmp_path / "fakecc"
    fake.write_text(
        "#!/bin/sh\necho 'Debian clang version 16.0.6 (15~deb12u1)' >&2\n"
        "echo 'Target: x86_64-pc-linux-gnu' >&2\n"
        "echo 'Found CUDA installation: /usr/local/cuda, version ' >&2\n"
    )
    fake.chmod(0o755)
    assert _identity((str(fake),)) == "Debian clang version 16.0.6 (15~deb12u1)"
    fake.write_text("#!/bin/sh\necho 'Configured with: --with-gcc-major-version-only' >&2\n"
                    "echo 'gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)' >&2\n")  # fmt: skip
    assert _identity((str(fake),)) == "gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)"
