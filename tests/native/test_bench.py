"""`presk bench`: the specification's table, its rows and columns (not its times); `--realize`
keeps the native rows of one type, without the speedup column; the diagnostics of what it
cannot time."""

import re
from pathlib import Path

from helpers import presk
from presk_cli.bench import ROWS, format_table, row_name

ROOT = Path(__file__).resolve().parents[2]
LOSS = ("tutorial/04_grad.psk", "--entry", "loss", "--dim", "D=3", "--dim", "B=2")
HEAD = "backend               median ms      best ms   speedup"
ROW = re.compile(r"(.{18})( {0,12}\d+\.\d{3})( {0,12}\d+\.\d{3})( {0,8}\d+\.\dx)?")


def test_the_table_has_the_specifications_rows_and_columns(compiler):
    r = presk("bench", *LOSS, "--repeat", "3")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == HEAD
    names = [
        "interp 64 bits",
        "kernel f64",
        "native f64",
        "native f64 +lanes",
        "native f32",
        "native f32 +lanes",
        "native bf16",
    ]
    assert [line[:18].rstrip() for line in lines[1:]] == names
    for line in lines[1:]:
        m = ROW.fullmatch(line)
        assert m and m.group(4), line
        assert len(m.group(2)) == len(m.group(3)) == 13 and len(m.group(4)) == 10
        assert float(m.group(3)) <= float(m.group(2))  # best ≤ median
    assert lines[1].endswith("      1.0x")


def test_realize_keeps_the_native_rows_of_one_type(compiler):
    r = presk("bench", *LOSS, "--repeat", "2", "--realize", "f32", "--threads", "2", "--bits", "53")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == HEAD[: 18 + 26]
    assert [line[:18].rstrip() for line in lines[1:]] == ["native f32", "native f32 +lanes"]
    assert all(ROW.fullmatch(line) and not ROW.fullmatch(line).group(4) for line in lines[1:])


def test_bits_names_the_reference_row():
    assert row_name("interp", "f64", False, 53) == "interp 53 bits"
    assert [row_name(*r, 64) for r in ROWS][3] == "native f64 +lanes"


def test_the_speedup_is_over_the_first_rows_median():
    table = format_table([("interp 64 bits", 2.0, 1.0), ("native f64", 0.5, 0.25)], True)
    assert table.splitlines()[1:] == [
        "interp 64 bits            2.000        1.000      1.0x",
        "native f64                0.500        0.250      4.0x",
    ]


def test_an_entry_that_draws_is_benched():
    """Issue 29: `sample` is a kernel, and so is a drawing initializer (it was E7002)."""
    r = presk("bench", "tutorial/05_sample.psk", "--entry", "pick", "--dim", "B=5", "--repeat", "1")
    assert r.returncode == 0, r.stderr
    assert "native f64" in r.stdout
    r = presk("bench", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.init", "--repeat", "1")
    assert r.returncode == 0 and "native f64" in r.stdout, r.stderr


def test_an_unknown_entry_is_e7001():
    r = presk("bench", "tutorial/04_grad.psk", "--entry", "nope", "--realize", "f64")
    assert r.returncode in (1, 2) and r.stdout == "" and "nope" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_terminal_is_told_each_phase():
    """`presk bench` on a terminal (issue 28): lowering, compiling and each row's timing, each
    line completed with its time; the rows are the same."""
    from presk_cli.bench import bench_rows
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_cli.progress import Progress
    from presk_core.run import parse_entry
    from presk_syntax.pipeline import Context

    core = PIPELINE.run(RUN, "tutorial/07_train.psk", Context())
    entry = parse_entry("loss", core, None, {"B": 2})
    from presk_cli.bench import arguments

    args = arguments(core, entry, 0, 64, None)
    shown: list[str] = []
    rows = [("kernel", "f64", False), ("native", "f32", True)]
    table = bench_rows(core, entry, args, rows, 64, 1, 1, Progress(shown.append, "bench"))
    assert [r[0].strip() for r in table] == ["kernel f64", "native f32 +lanes"]
    started = [s for s in shown if not s.startswith("\r")]
    assert started == [
        "presk bench: lowering `loss` to kernels in f64…",
        "presk bench: timing kernel f64 (1 calls)…",
        "presk bench: lowering `loss` to kernels in f32…",
        f"presk bench: compiling {started[3].split()[3]} launches (f32)…",
        "presk bench: timing native f32 +lanes (1 calls)…",
    ]
    done = [s for s in shown if s.startswith("\r")]
    assert len(done) == 5 and all(s.endswith(("ms\n", " s\n")) for s in done)
