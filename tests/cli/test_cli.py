"""The console scripts of the front-end: `presk`, and the microtools `presk-parse` and
`presk-dump` composed with a pipe.

Most tests call the scripts' functions in this process (`presk_cli.main.main`, the stage
programs' `*_main`), their output captured at the file descriptors; a few run the installed
scripts from the repository root as a user does (the pipes of stage programs, `--help`).
These cross packages (presk-syntax's presk-parse, presk-cli's presk and presk-dump), so they
live here rather than in a package's suite.
"""

from __future__ import annotations

import io
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from presk_cli.dump import dump_main
from presk_cli.main import main
from presk_cli.pipeline import PIPELINE
from presk_syntax.cli import parse_main

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"

pytestmark = pytest.mark.skipif(
    not (BIN / "presk").exists(), reason="the console scripts are not installed in .venv"
)


def run(*args: str, stdin: bytes | None = None, **env: str) -> subprocess.CompletedProcess:
    command = [str(BIN / args[0]), *args[1:]]
    environment = {**os.environ, "NO_COLOR": "1", **env}
    return subprocess.run(
        command, cwd=REPO, input=stdin, capture_output=True, env=environment, timeout=60
    )


@dataclass
class Result:
    returncode: int
    stdout: bytes
    stderr: bytes


@pytest.fixture
def call(capfd, monkeypatch):
    """A console script's function called in this process, from the repository's root."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("NO_COLOR", "1")

    def go(fn, *args: str, stdin: bytes | None = None) -> Result:
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        capfd.readouterr()
        try:
            code = fn(list(args))
        except SystemExit as e:
            code = e.code
        out, err = capfd.readouterr()
        return Result(code, out.encode(), err.encode())

    return go


def test_parse_then_dump_equals_dump_stage_ast(call):
    parsed = run("presk-parse", "tutorial/06_tower.psk")
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout and not parsed.stderr
    dumped = run("presk-dump", stdin=parsed.stdout)
    assert dumped.returncode == 0, dumped.stderr
    direct = call(main, "dump", "--stage", "ast", "tutorial/06_tower.psk")
    assert direct.returncode == 0, direct.stderr
    assert dumped.stdout == direct.stdout
    assert direct.stdout.startswith(b'SourceFile path="tutorial/06_tower.psk" @ 0..605\n')


def test_dump_stage_tokens(call):
    result = call(main, "dump", "--stage", "tokens", "tutorial/01_linear.psk")
    assert result.returncode == 0
    lines = result.stdout.decode().splitlines()
    assert lines[:3] == ["Comment @ 0..76", "Kw(Module) @ 77..83", 'Ident("Linear") @ 84..90']


def test_help():
    result = run("presk", "--help")
    assert result.returncode == 0
    lines = result.stdout.decode().splitlines()
    assert lines[0] == (
        "Presk compiler (0.1.0: front-end, reference interpreter, native backend, e-graph"
        " optimizer, training, serving, precision budgets, layout plans, PyTorch and C exports,"
        " a compilation as a document)"
    )
    assert lines[1:3] == ["", "Usage: presk <COMMAND>"]
    assert any(line.startswith("  check ") for line in lines)
    assert "  -V, --version  Print version" in lines


def test_help_lists_the_commands_in_the_specifications_order():
    from presk_cli.main import ORDER

    lines = run("presk", "--help").stdout.decode().splitlines()
    names = [line.split()[0] for line in lines[lines.index("Commands:") + 1 : -4]]
    assert names[-1] == "help" and sorted(names[:-1], key=ORDER.index) == names[:-1]
    assert names[:4] == ["check", "run", "export", "dump"]
    pad = {len(line) - len(line[2:].split(" ", 1)[1].lstrip()) for line in lines if
           line.startswith("  ") and line[2:].split()[0] in names}  # fmt: skip
    assert pad == {2 + max(map(len, names)) + 2}  # clap's: the longest name and two spaces


def test_a_subcommands_help_reads_as_presk_help(call):
    """clap's layout: the description, `Usage:`, the options, `-h, --help  Print help`."""
    result = call(main, "data", "info", "--help")
    assert result.returncode == 0
    text = result.stdout.decode()
    assert text.startswith("The type, count, version and sample size of FILE, then its first")
    assert "\n\nUsage: presk data info [OPTIONS] FILE\n\nOptions:\n" in text
    assert text.endswith("  -h, --help             Print help\n")


def test_a_mistyped_command_gets_a_suggestion(call):
    result = call(main, "chek", "tutorial/01_linear.psk")
    assert result.returncode == 2
    assert result.stderr.decode().endswith("Error: No such command 'chek'. Did you mean 'check'?\n")
    result = call(main, "benhc")
    assert "Did you mean 'bench'?" in result.stderr.decode()


def test_version(call):
    result = call(main, "--version")
    assert result.returncode == 0
    assert result.stdout.decode() == "presk 0.1.0\n"  # clap's form: the name and the version


def test_check_is_silent_on_a_correct_program(call):
    result = call(main, "check", "tutorial/01_linear.psk")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")


def test_check_reports_e0010(call):
    result = call(main, "check", "tests/diag/bad_syntax.psk")
    assert result.returncode == 1
    assert result.stdout == b""
    assert result.stderr.decode() == (
        "[E0010] Error: expected `=`, found identifier `x`\n"
        "   ,-[ tests/diag/bad_syntax.psk:4:5 ]\n"
        "   |\n"
        " 4 |     x · w\n"
        "   |     |\n"
        "   |     `-- expected `=` here\n"
        "---'\n"
    )


def test_check_reports_a_missing_file(call):
    result = call(main, "check", "nonexist.psk")
    assert result.returncode == 1
    assert result.stderr.decode() == (
        "[E0001] Error: cannot read `nonexist.psk`: no such file or directory\n"
    )


def test_bad_flag_is_a_usage_error(call):
    result = call(main, "check", "--bogus", "tutorial/01_linear.psk")
    assert result.returncode == 2
    assert b"--bogus" in result.stderr
    assert b"Traceback" not in result.stderr


def test_presk_parse_usage_and_errors(call):
    assert call(parse_main).returncode == 2
    failed = call(parse_main, "tests/diag/bad_syntax.psk")
    assert failed.returncode == 1 and failed.stdout == b""
    assert failed.stderr.startswith(b"[E0010] Error: expected `=`")


@pytest.mark.parametrize(
    "garbage", [b"garbage\n", b"", b"\x81\xa1a\x01"], ids=["text", "empty", "a map"]
)
def test_presk_dump_refuses_garbage_in_one_line(call, garbage: bytes):
    result = call(dump_main, stdin=garbage)
    assert result.returncode == 1
    assert result.stdout == b""
    message = result.stderr.decode()
    assert message.startswith("presk-dump: ") and message.count("\n") == 1, message
    assert "Traceback" not in message


def test_the_pipeline_of_stage_programs_prints_the_elab_dump(call):
    bin_ = BIN
    pipeline = subprocess.run(
        f"{bin_}/presk-parse tutorial/06_tower.psk | {bin_}/presk-elab | {bin_}/presk-dump",
        shell=True,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    direct = call(main, "dump", "tutorial/06_tower.psk", "--stage", "elab")
    assert pipeline.returncode == 0, pipeline.stderr
    assert pipeline.stdout == direct.stdout.decode()
    assert "== instances" in pipeline.stdout


def test_presk_elab_writes_nothing_on_an_error():
    bin_ = BIN
    result = subprocess.run(
        f"{bin_}/presk-parse tutorial/03_attention.psk | {bin_}/presk-elab --const H=3 | wc -c",
        shell=True,
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.stdout.strip() == "0"
    assert "[E1005]" in result.stderr


# ---- the list of passes ------------------------------------------------------------------


def test_dump_offers_the_stages_of_the_list_of_passes(call):
    result = call(main, "dump", "--help")
    assert result.returncode == 0
    text = "".join(result.stdout.decode().split())  # as wrapped: compared without blanks
    for p in PIPELINE:
        assert "".join(f"{p.name}: {p.line}".split()) in text


def test_an_unknown_stage_is_a_usage_error_listing_the_choices(call):
    result = call(main, "dump", "tutorial/01_linear.psk", "--stage", "nowhere")
    assert result.returncode == 2
    message = result.stderr.decode()
    assert all(f"'{p.name}'" in message for p in PIPELINE), message
    with pytest.raises(KeyError, match="no stage `nowhere`; stages: tokens, ast"):
        PIPELINE.find("nowhere")


def test_the_stage_programs_and_their_order_come_from_the_list():
    chain = [p.name for p in PIPELINE.chain("core-after-ad")]
    assert chain == ["ast", "elab", "core", "core-after-ad"]
    programs = [p.program.name for p in PIPELINE if p.program is not None]
    assert programs == [
        "presk-parse",
        "presk-elab",
        "presk-lower",
        "presk-ad",
        "presk-kernel",
        "presk-c",
    ]
    assert (
        PIPELINE.usage("core")
        == "usage: presk-parse FILE | presk-elab [--const NAME=V]… | presk-lower | presk-dump"
    )


def test_the_remat_choices_are_presk_ads():
    from presk_ad.vjp import REMATS
    from presk_cli import commands

    assert commands.REMATS == REMATS


def test_dump_specialize_and_flat(call):
    args = ("dump", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4")
    special = call(main, *args, "--stage", "specialize")
    assert special.returncode == 0, special.stderr
    assert special.stdout.decode().splitlines()[0] == (
        "fn Linear.apply{In=3,Out=2}[batch: 4](θ : params Linear{3, 2}, x : ℝ[batch: 4, 3])"
        " -> ℝ[batch: 4, 2] {"
    )
    flat = call(main, *args, "--stage", "flat")
    assert flat.stdout.decode().splitlines()[0] == (
        "fn Linear.apply{In=3,Out=2}[batch: 4](θ.w : ℝ[3, 2], θ.b : ℝ[2], x : ℝ[batch: 4, 3])"
        " -> ℝ[batch: 4, 2] {"
    )
    missing = call(main, "dump", "tutorial/01_linear.psk", "--stage", "flat")
    assert missing.returncode == 1
    assert missing.stderr.decode() == (
        "[E7001] Error: the pass `specialize` needs an entry: give `--entry F`\n"
    )


HEAVY = ("numpy", "islpy", "jinja2", "torch", "cffi", "egglog", "presk_ad.vjp", "presk_export")


@pytest.mark.parametrize(
    "args", [["--help"], ["check", "tutorial/01_linear.psk"]], ids=["help", "check"]
)
def test_start_up_imports_nothing_heavy(args):
    """`presk --help` and `presk check` load no module they do not need (issue 12, item 8):
    their time is in docs/development.md, "Start-up" (tools/bench_startup.py)."""
    code = (
        "import sys\nfrom presk_cli.main import main\nmain(sys.argv[1:])\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    python = BIN / "python"
    result = subprocess.run(
        [str(python), "-c", code, *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.stderr.splitlines()[-1] == "[]", result.stderr


def test_presk_help_command_is_the_commands_help(call):
    assert call(main, "help", "data").stdout == call(main, "data", "--help").stdout
