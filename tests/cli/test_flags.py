"""Issue 16, the friction of presk's flags: `--const` malformed as usage, `PRESK_DEBUG=1`,
numpy's warnings kept off standard error, checkpoints of the tutorial ignored by git."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from presk_cli import main as main_module
from presk_cli.main import main

REPO = Path(__file__).resolve().parents[2]


def test_a_const_value_that_is_no_number_is_a_usage_error(capfd) -> None:
    code = main(["check", str(REPO / "tutorial/06_tower.psk"), "--const", "L=x"])
    err = capfd.readouterr().err
    assert code == 2
    assert "`L=x`: `x` is not a number" in err and "E1006" not in err


def test_a_const_value_that_is_a_fraction_reaches_the_checker(capfd) -> None:
    with pytest.raises(SystemExit) as e:
        main(["check", str(REPO / "tutorial/06_tower.psk"), "--const", "L=1/2"])
    assert e.value.code == 1 and "[E1005]" in capfd.readouterr().err


def _broken(*args, **kwargs):
    raise RuntimeError("a bug")


@pytest.mark.parametrize("debug", [False, True])
def test_an_internal_error_is_101_with_its_traceback_under_presk_debug(
    capfd, monkeypatch, debug: bool
) -> None:
    monkeypatch.setattr(main_module.cli, "main", _broken)
    if debug:
        monkeypatch.setenv("PRESK_DEBUG", "1")
    else:
        monkeypatch.delenv("PRESK_DEBUG", raising=False)
    assert main(["check", "x.psk"]) == 101
    err = capfd.readouterr().err
    assert err.endswith(
        "presk: internal error: RuntimeError: a bug (please report it with the command and"
        " the file that caused it)\n"
    )
    assert ("Traceback (most recent call last)" in err) == debug


OVERFLOW = """
import sys
import numpy as np
from presk_cli import main as m
m.cli.main = lambda *a, **k: int(np.exp(np.float64(1000.0)) > 0) - 1  # inf: numpy warns
sys.exit(m.main(["check", "x.psk"]))
"""


def test_numpy_runtime_warnings_do_not_reach_stderr() -> None:
    # in a process of its own: pytest records warnings, a user's terminal does not
    result = subprocess.run(
        [sys.executable, "-c", OVERFLOW], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr


def test_checkpoints_of_a_run_beside_its_file_are_ignored_by_git() -> None:
    # `presk train tutorial/07_train.psk` without --ckpt writes tutorial/ckpt/, as the block says
    result = subprocess.run(
        ["git", "check-ignore", "-q", "tutorial/ckpt/final.psk.d"], cwd=REPO, check=False
    )
    assert result.returncode == 0


@pytest.mark.parametrize(
    ("entry", "dims", "message"),
    [
        (
            "attend",
            ("B=1", "T=2", "Tt=3"),
            "`--dim Tt`: `attend` has no dimension `Tt` and no open prefix `...`"
            " (its dimensions: B, T)",
        ),
        ("scores", ("b=1", "B=1", "T=2"), None),
    ],
)
def test_a_mistyped_dim_is_e7001_not_an_extra_axis(capfd, entry, dims, message) -> None:
    args = [f"--dim={d}" for d in dims]
    try:
        code = main(["run", str(REPO / "tutorial/03_attention.psk"), "--entry", entry, *args])
    except SystemExit as e:
        code = e.code
    err = capfd.readouterr().err
    assert code == 1 and "[E7001]" in err
    assert (message or "has no dimension `b` and no open prefix") in err


def test_a_prefix_axis_by_name_is_still_an_axis(capfd) -> None:
    tower = str(REPO / "tutorial/06_tower.psk")
    assert main(["run", tower, "--entry", "Tower.apply", "--dim", "batch=2"]) == 0
    assert capfd.readouterr().out.startswith("ℝ[batch: 2, model: 4] = ")


@pytest.mark.parametrize("seed", [str(2**70), str(2**64), str(-(2**63) - 1)])
@pytest.mark.parametrize("command", ["run", "train", "bench", "export"])
def test_a_seed_outside_64_bits_is_a_usage_error_with_the_range(capfd, command, seed) -> None:
    code = main([command, str(REPO / "tutorial/01_linear.psk"), "--seed", seed])
    err = capfd.readouterr().err
    assert code == 2, err
    assert f"{seed} is not in the range -9223372036854775808<=x<=18446744073709551615" in err


def test_the_seeds_at_the_ends_of_the_range_run(capfd) -> None:
    for seed in (-(2**63), 2**64 - 1):
        code = main(["run", str(REPO / "tutorial/01_linear.psk"), "--entry", "Linear{3, 2}.apply",
                     "--dim", "batch=1", "--seed", str(seed)])  # fmt: skip
        assert code == 0, capfd.readouterr().err
