"""The pipeline assembled from the stage packages' passes (presk_cli.pipeline), and the stage
programs of the native half: `presk-kernel` (core document -> kernel document) and
`presk-c` (kernel document -> C), piped as a user pipes them."""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kernel_entries import ENTRIES
from presk_ad.cli import ad_main
from presk_cback.cli import c_main
from presk_cli.dump import dump_main
from presk_cli.main import main
from presk_cli.pipeline import PIPELINE
from presk_core.cli import lower_main
from presk_kernel.cli import kernel_main
from presk_syntax.cli import parse_main
from presk_syntax.pipeline import Context, Pass, Pipeline, Text
from presk_types.cli import elab_main

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"


@pytest.fixture
def stage(capfdbinary, monkeypatch):
    """A stage program's function called in this process: (exit code, stdout, stderr)."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("NO_COLOR", "1")

    def go(fn, *args: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        capfdbinary.readouterr()
        try:
            code = fn(list(args))
        except SystemExit as e:
            code = e.code
        sys.stdout.flush()
        out, err = capfdbinary.readouterr()
        return code, out, err

    return go


def _pipe(stage, file: str, entry: str, dims, consts) -> bytes:
    """The kernel document of `presk-parse F | presk-elab | presk-lower | presk-ad |
    presk-kernel --entry E --dim …`."""
    steps = [
        (parse_main, [file]),
        (elab_main, [a for k, v in consts for a in ("--const", f"{k}={v}")]),
        (lower_main, []),
        (ad_main, []),
        (kernel_main, ["--entry", entry, *(a for k, v in dims for a in ("--dim", f"{k}={v}"))]),
    ]
    data = None
    for fn, args in steps:
        code, data, err = stage(fn, *args, stdin=data)
        assert code == 0, (fn.__name__, err.decode())
    return data


@pytest.mark.parametrize("file,entry,dims,consts", ENTRIES, ids=[e[1] for e in ENTRIES])
def test_the_stage_programs_give_the_kernel_dump(stage, file, entry, dims, consts):
    document = _pipe(stage, file, entry, dims, consts)
    code, piped, err = stage(dump_main, stdin=document)
    assert code == 0, err.decode()
    args = ["dump", file, "--stage", "kernel", "--entry", entry]
    args += [a for k, v in dims for a in ("--dim", f"{k}={v}")]
    args += [a for k, v in consts for a in ("--const", f"{k}={v}")]
    code, direct, err = stage(main, *args)
    assert code in (0, None), err.decode()
    assert piped == direct
    assert piped.startswith(b"entry ") and b" launches\nkernel " in piped


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_c_stage_program_writes_c_that_compiles(stage, tmp_path):
    document = _pipe(stage, "tutorial/07_train.psk", "loss", (("B", 8),), ())
    code, c, err = stage(c_main, stdin=document)
    assert code == 0, err.decode()
    assert b"int presk_entry(char *arena)" in c
    (tmp_path / "loss.c").write_bytes(c)
    built = subprocess.run(
        ["cc", "-c", "-ffp-contract=off", "-o", str(tmp_path / "loss.o"), str(tmp_path / "loss.c")],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "loss.o").stat().st_size > 0


@pytest.mark.skipif(not (BIN / "presk-parse").exists(), reason="no console scripts in .venv")
def test_a_shell_pipe_of_the_stage_programs(tmp_path):
    """As a user types it (presk-kernel and presk-c run as modules until the workspace is
    synced with their console scripts)."""
    py = f"{sys.executable} -m"
    kernel = BIN / "presk-kernel"
    kernel_cmd = str(kernel) if kernel.exists() else f"{py} presk_kernel.cli"
    c = BIN / "presk-c"
    c_cmd = str(c) if c.exists() else f"{py} presk_cback.cli"
    front = f"{BIN}/presk-parse tutorial/03_attention.psk | {BIN}/presk-elab | {BIN}/presk-lower"
    entry = "--entry attend --dim B=1 --dim T=3"
    env = {**os.environ, "NO_COLOR": "1"}

    def sh(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, shell=True, cwd=REPO, capture_output=True, env=env, timeout=300
        )

    piped = sh(f"{front} | {kernel_cmd} {entry} | {BIN}/presk-dump")
    direct = sh(f"{BIN}/presk dump tutorial/03_attention.psk --stage kernel {entry}")
    assert piped.returncode == 0, piped.stderr.decode()
    assert piped.stdout == direct.stdout
    source = sh(f"{front} | {kernel_cmd} {entry} | {c_cmd}")
    assert source.returncode == 0, source.stderr.decode()
    assert source.stdout.startswith(b"#include <math.h>")


def test_presk_kernel_needs_an_entry_and_refuses_a_terminal(stage):
    code, out, err = stage(kernel_main, "--dim", "B=1", stdin=b"")
    assert code == 2 and out == b""
    assert err.decode().startswith("usage: presk-parse FILE | presk-elab [--const NAME=V]…")
    assert "presk-kernel --entry E [--dim N=V]… [--realize T|@FILE] | presk-dump" in err.decode()
    code, _, err = stage(kernel_main, "--entry", "f", "--realize", "f16", stdin=b"")
    assert code == 2
    code, _, err = stage(kernel_main, "--entry", "f", "--dim", "B", stdin=b"")
    assert code == 2


def test_presk_kernel_reports_a_bad_entry_and_a_bad_document(stage):
    document = _pipe(stage, "tutorial/03_attention.psk", "attend", (("B", 1), ("T", 3)), ())
    code, out, err = stage(lower_main, stdin=b"\x81\xa5presk\xa4nope")
    assert code == 1 and out == b"" and err.decode().startswith("presk-lower: ")
    code, out, err = stage(c_main, stdin=b"not a document")
    assert code == 1 and out == b"" and "Traceback" not in err.decode()
    core = _core(stage, "tutorial/03_attention.psk")
    code, out, err = stage(kernel_main, "--entry", "nope", stdin=core)
    assert code == 1 and out == b"" and "[E7001]" in err.decode()
    code, out, err = stage(kernel_main, "--entry", "attend", stdin=document)  # not a core one
    assert code == 1 and out == b"" and err.decode().startswith("presk-kernel: ")


@pytest.mark.parametrize("fn", [elab_main, lower_main, ad_main, kernel_main, c_main])
def test_a_stage_program_says_when_the_one_before_it_wrote_nothing(stage, fn):
    args = ["--entry", "f"] if fn is kernel_main else []
    code, out, err = stage(fn, *args, stdin=b"")
    assert code == 1 and out == b""
    assert err.decode().endswith(
        ": no document on standard input (did the stage before it fail?)\n"
    ), err.decode()


def _core(stage, file: str) -> bytes:
    data = None
    for fn, args in ((parse_main, [file]), (elab_main, []), (lower_main, [])):
        code, data, err = stage(fn, *args, stdin=data)
        assert code == 0, err.decode()
    return data


# ---- the list ---------------------------------------------------------------------------


def test_each_pass_takes_what_the_pass_before_gives():
    for p in PIPELINE:
        if p.after is not None:
            assert issubclass(PIPELINE.find(p.after).gives, p.takes), p.name
    assert [p.name for p in PIPELINE.chain("c")] == [
        "ast",
        "elab",
        "core",
        "core-after-ad",
        "kernel",
        "layout",
        "c",
    ]


def test_a_pipeline_that_does_not_fit_is_refused_when_it_is_assembled():
    parse, elab = PIPELINE.find("ast"), PIPELINE.find("elab")
    tokens = PIPELINE.find("tokens")
    with pytest.raises(TypeError, match="the pass `elab` takes Parsed; `tokens` gives Text"):
        Pipeline((tokens, dataclasses.replace(elab, after="tokens")))
    with pytest.raises(TypeError, match="comes after `ast`, which is not before it"):
        Pipeline((elab, parse))
    with pytest.raises(TypeError, match="two passes named `ast`"):
        Pipeline((parse, parse))


def test_passes_hand_each_other_values_not_an_options_bag():
    assert not hasattr(Context(), "options")
    assert all(callable(p.run) and isinstance(p, Pass) for p in PIPELINE)
    out = PIPELINE.run("tokens", str(REPO / "tutorial/01_linear.psk"), Context())
    assert isinstance(out, Text)
    elaborated = PIPELINE.run("elab", str(REPO / "tutorial/07_train.psk"), Context(check=True))
    assert len(elaborated.runs) == 1 and elaborated.serves == ()


def test_each_stage_programs_usage_is_the_pipelines(stage):
    """A stage program assembles the passes up to its own; its usage line is the one the
    whole pipeline gives for its pass."""
    mains = {
        "presk-parse": parse_main,
        "presk-elab": elab_main,
        "presk-lower": lower_main,
        "presk-ad": ad_main,
        "presk-kernel": kernel_main,
        "presk-c": c_main,
    }
    programs = [p for p in PIPELINE if p.program is not None]
    assert [p.program.name for p in programs] == list(mains)
    for p in programs:
        code, out, _ = stage(mains[p.program.name], "--help")
        assert code == 0 and out.decode() == PIPELINE.usage(p.name) + "\n"
    last = "| presk-kernel --entry E [--dim N=V]… [--realize T|@FILE] | presk-c"
    assert PIPELINE.usage("c").endswith(last)  # the C is text: no presk-dump after it


def test_no_stage_program_imports_a_later_stage():
    """Each stage program's module loads its own package and those before it, never a
    later one (issue 21: presk-parse alone must not need presk-core)."""
    order = ["presk_syntax", "presk_types", "presk_core", "presk_ad", "presk_kernel", "presk_cback"]
    programs = {
        "presk_syntax.cli": "presk_syntax",
        "presk_types.cli": "presk_types",
        "presk_core.cli": "presk_core",
        "presk_ad.cli": "presk_ad",
        "presk_kernel.cli": "presk_kernel",
        "presk_cback.cli": "presk_cback",
    }
    for module, package in programs.items():
        later = order[order.index(package) + 1 :] + ["presk_opt", "presk_export", "presk_cli"]
        code = (
            f"import sys, {module} as m\nm.{_main(module)}(['--help'])\n"
            f"print(sorted(p for p in {later!r} if p in sys.modules))"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines()[-1] == "[]", (module, result.stdout)


def _main(module: str) -> str:
    names = {"presk_syntax": "parse", "presk_types": "elab", "presk_core": "lower"}
    package = module.split(".")[0]
    return names.get(package, package.removeprefix("presk_").replace("cback", "c")) + "_main"


def test_kernel_and_layout_are_two_passes_and_dump_kernel_prints_the_laid_out_one(stage):
    from presk_cli.pipeline import SHOWN, native_schedule, show
    from presk_kernel.layout import lay_out
    from presk_syntax.pipeline import EntryOptions

    entry = EntryOptions("Linear{64, 64}.apply", (("batch", 8),), threads=2)
    ctx = Context(entry=entry)
    core = PIPELINE.run("core-after-ad", str(REPO / "tutorial/01_linear.psk"), ctx)
    fused = PIPELINE.run("kernel", "", ctx, core, first="core-after-ad")
    laid = PIPELINE.run("layout", "", ctx, fused, first="kernel")
    assert laid == lay_out(fused, 2) == native_schedule(core, entry)
    assert [lc.kernel.layout.gemm is not None for lc in laid.launches] == [True, False]
    assert all(lc.kernel.layout.gemm is None for lc in fused.launches)
    assert SHOWN == {"kernel": "layout"}
    args = ["tutorial/01_linear.psk", "--entry", "Linear{64, 64}.apply", "--dim", "batch=8"]
    code, kernel, err = stage(main, "dump", *args, "--stage", "kernel")
    assert code in (0, None), err.decode()
    assert kernel.decode() == show(lay_out(fused, 1))
    assert stage(main, "dump", *args, "--stage", "layout")[1] == kernel
