"""Every `presk run` of tests/run (and the specification's gradient of step 4) prints the
same text under --opt, byte for byte, a zero's sign included (the rules that remove an
addition of zeros keep the sign IEEE gives: docs/optimizer.md, "Zeros and their sign");
the report is on standard error, in the specification's form."""

import re
import subprocess
from pathlib import Path

import pytest
from helpers import presk
from presk_cli.pipeline import run_pipeline
from presk_core.run import run_entry
from presk_opt.optimize import optimize
from presk_syntax.pipeline import Context

ROOT = Path(__file__).resolve().parents[2]
TINY = {"V": "64", "D": "16", "H": "2", "L": "2"}

RUNS = [  # file, entry, dimensions, constants, seed, digits, verbose: as tests/run runs them
    ("tutorial/01_linear.psk", "Linear{3, 2}.apply", {"batch": 4}, {}, 0, 12, True),
    ("tutorial/04_grad.psk", "loss_grad", {"D": 3, "B": 2}, {}, 0, 6, False),
    ("tutorial/05_sample.psk", "pick", {"B": 5}, {}, 3, 12, False),
    ("tutorial/06_tower.psk", "Tower.apply", {"batch": 2}, {}, 1, 12, False),
    ("tests/examples/minigpt/minigpt.psk", "MiniGPT.apply", {"B": 2, "T": 8}, TINY, 0, 12, False),
    ("tests/examples/minigpt/train_minigpt.psk", "loss", {"B": 2, "T": 8}, TINY, 0, 12, False),
    ("tests/examples/mlp/mlp.psk", "mse", {"D": 3, "B": 2}, {}, 0, 12, False),
    ("tests/examples/mlp/mlp.psk", "mse_grad", {"D": 3, "B": 2}, {}, 0, 12, False),
    (
        "tests/examples/bert/bert.psk",
        "MaskedLM.apply",
        {"B": 1, "T": 4},
        {"V": "32", "D": "8", "H": "2", "L": "2"},
        0,
        12,
        False,
    ),
    (
        "tests/examples/llama/llama.psk",
        "block",
        {"B": 1, "T": 3},
        {"D": "8", "H": "2", "F": "12"},
        0,
        12,
        False,
    ),
]


@pytest.mark.parametrize("case", RUNS, ids=[f"{c[0]}:{c[1]}" for c in RUNS])
def test_the_printed_digits_are_the_same_under_opt(case) -> None:
    path, entry, dims, consts, seed, digits, verbose = case
    core = run_pipeline("core-after-ad", str(ROOT / path), Context(consts=dict(consts)))
    if entry not in {f.name for f in core.functions} and "{" not in entry and "." not in entry:
        pytest.skip(f"no entry {entry}")
    opt, _ = optimize(core)
    args = (entry, dims, seed, 256, digits, verbose)
    assert run_entry(opt, None, *args) == run_entry(core, None, *args)


def test_run_opt_reports_then_prints_the_gradient_of_step_4() -> None:
    args = ["run", "tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2"]
    plain = presk(*args, "--digits", "6", env={"PRESK_VERIFY": "1"})
    opt = presk(*args, "--digits", "6", "--opt", env={"PRESK_VERIFY": "1"})
    assert opt.returncode == 0, opt.stderr
    assert opt.stdout == plain.stdout and plain.stderr == ""
    lines = opt.stderr.splitlines()
    head = r"presk-opt: (\d+) of (\d+) functions rewritten, (\d+) → (\d+) lets, cost \S+ → \S+ \(operation counts\)"
    m = re.fullmatch(head, lines[0])
    assert m and int(m[3]) > int(m[4])
    names = [
        re.fullmatch(r"  (\S+): \d+ → \d+ lets, cost \S+ → \S+ \(saturated, \d+ iterations\)", x)[1]
        for x in lines[1:]
    ]
    assert {"Linear.apply.bwd", "loss.bwd"} <= set(names) and len(names) == int(m[1])


def test_dump_core_opt_is_a_stage() -> None:
    r = presk(
        "dump", "tutorial/04_grad.psk", "--stage", "core-opt", "--sites", env={"PRESK_VERIFY": "1"}
    )
    assert r.returncode == 0, r.stderr
    assert re.search(r"= record \{w = %\d+, b = %\d+\}  -- Linear.apply.bwd/", r.stdout)
    assert re.search(r"= add %10, 0  -- Linear.apply.bwd/%\d+ \(puts of zeros summed", r.stdout)
    assert "(puts of zeros summed = record, from Linear.apply.bwd/%12)" in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2"),
        ("tests/examples/mlp/mlp.psk", "--entry", "mse_grad", "--dim", "D=3", "--dim", "B=2"),
    ],
)
def test_the_kernels_print_the_same_digits_under_opt(args) -> None:
    def run(*extra: str) -> subprocess.CompletedProcess:
        return presk("run", *args, "--backend", "kernel", *extra, env={"PRESK_VERIFY": "1"})

    plain, opt = run(), run("--opt")
    assert plain.returncode == 0 and opt.returncode == 0, opt.stderr
    assert opt.stdout == plain.stdout
    assert opt.stderr.startswith("presk-opt: ")
