"""What the export writes as files (issue 27): their mode is presk's own (0666 less the
umask, where mkstemp gave 0600), and the exported serve.py reads a damaged weights file or
a temperature it cannot use as an error, never a traceback."""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess

import pytest
from helpers import PRESK, ROOT, python_run

MINIGPT = "tests/examples/minigpt/minigpt.psk"
TINY = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")


@pytest.fixture(scope="module")
def serve_export(tmp_path_factory):
    """minigpt's serve.py, exported under the umask 027."""
    out = tmp_path_factory.mktemp("serve") / "export"
    r = subprocess.run(
        [*PRESK, "export", MINIGPT, "--target", "pytorch", *TINY, "--serve", "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True, preexec_fn=lambda: os.umask(0o027),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return out


def test_exported_files_have_presk_s_mode(serve_export):
    modes = {
        str(p.relative_to(serve_export)): stat.S_IMODE(p.stat().st_mode)
        for p in serve_export.rglob("*")
        if p.is_file()
    }
    assert "serve.py" in modes
    assert set(modes.values()) == {0o640}, modes


def _weights(text: bytes) -> bytes:
    start = (32 + len(text) + 7) // 8 * 8
    head = struct.pack("<4sIIQQI", b"PSKD", 1, start, 1, 8, len(text)) + text
    return head.ljust(start, b"\0") + bytes(8)


RUNS = """
import contextlib, io, json, sys
import serve
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = serve.main(argv)
        except SystemExit as e:
            code = e.code
    out.append([code, err.getvalue()])
print(json.dumps(out))
"""


def test_serve_py_refuses_what_it_cannot_use(serve_export):
    pytest.importorskip("torch")
    (serve_export / "latin.psk.d").write_bytes(_weights("params Mini\xefGPT".encode("latin-1")))
    cases = [
        ["--prompt", "ab", "--weights", "latin.psk.d"],
        ["--prompt", "ab", "--temperature", "nan"],
        ["--prompt", "ab", "--temperature", "inf"],
    ]
    r = python_run("-c", RUNS, json.dumps(cases), cwd=serve_export, timeout=300)
    assert r.returncode == 0, r.stderr
    (latin, nan, inf) = json.loads(r.stdout)
    assert latin == [1, "serve.py: latin.psk.d: the sample type's text is not UTF-8\n"]
    for code, err in (nan, inf):
        assert code == 2 and "--temperature is a finite number, 0 or above" in err
        assert "Traceback" not in err


def test_serve_py_has_the_step_and_the_fill_when_the_heads_are_as_many_as_a_probed_window():
    """The step is derived at two windows (5 and 6 positions) and kept when its code is the
    same: a cached value of 6 heads at the window of 6 is still `T` along its rows alone
    (the course GPT's 6 heads once lost its step that way). serve.py then fills the
    prompt's positions in one call (`serve_fill`, its causal masks as arguments)."""
    from presk_cli.pipeline import PIPELINE
    from presk_core.lower import lower_checked
    from presk_export.pytorch import Export, Options
    from presk_export.serve_export import cached_step, serve_of
    from presk_syntax.pipeline import Context

    ctx = Context(consts={"V": "64", "D": "12", "H": "6", "L": "1"}, check=True)
    program = PIPELINE.run("elab", str(ROOT / MINIGPT), ctx).program
    export = Export(program, *lower_checked(program), Options())
    export.files()
    step = cached_step(export, serve_of(export), "T")
    assert step is not None and '(1, 6, "T", 2, 2)' in step["caches"]
    assert step["fill"] is not None and '("tril", "T")' in step["fill"]["inputs"]
    assert "torch.ones(" not in "\n".join(step["fill"]["lines"])  # no window's length
