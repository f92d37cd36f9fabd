"""`--opt --profile FILE`: the roofline of a machine profile prices the extraction at the
sizes of the run (presk_opt.price); run, train and bench take it; `bench --opt`."""

import re
import subprocess
from pathlib import Path

import pytest
from helpers import presk
from presk_cli.pipeline import run_pipeline
from presk_core.ir import Lit
from presk_opt import roofline as R
from presk_opt.optimize import optimize
from presk_opt.price import RooflinePrices, Sizes, predicted, roofline_model
from presk_syntax.pipeline import Context

ROOT = Path(__file__).resolve().parents[2]
ROOF = R.Roofline(1e9, 1e10, 0.1e-6)


def _profile(path: Path | None = None) -> R.Profile:
    p = R.Profile(R.machine("f64"), [], ROOF)
    if path is not None:
        R.write(p, str(path))
    return p


@pytest.fixture(scope="module")
def train07():
    return run_pipeline("core-after-ad", str(ROOT / "tutorial/07_train.psk"), Context())


def test_sizes_bind_each_reached_function_with_its_calls(train07) -> None:
    sizes = Sizes(train07, [("loss", {"B": 8})])
    assert {"loss", "Tower.apply", "Block.apply", "RMSNorm.apply", "Linear.apply"} <= set(
        sizes.bindings
    )
    assert [calls for _, calls in sizes.bindings["Block.apply"]] == [3]
    assert sorted(calls for _, calls in sizes.bindings["RMSNorm.apply"]) == [4]  # 3 blocks, final
    assert "adamw.step" not in sizes.bindings


def test_a_dot_costs_its_roofline_at_the_run_s_sizes(train07) -> None:
    prices = RooflinePrices(_profile(), Sizes(train07, [("loss", {"B": 8})]))
    fn = train07.function("Linear.apply")
    dot = next(i for i in fn.body if i.op == "dot")
    x, w = (a.type for a in dot.args)
    # [8, 4] · [4, 4]: 128 fma (256 operations), 8·(32 + 16 + 32) = 640 bytes; 3 calls
    one = ROOF.lam + max(256 / ROOF.pi, 640 / ROOF.beta)
    calls = sum(c for _, c in prices.sizes.bindings["Linear.apply"])
    assert prices("Linear.apply", "dot", (), dot.out.type, [x, w]) == pytest.approx(
        calls * one * 1e6
    )
    assert prices("Linear.apply", "field", (("path", "w"),), w, [fn.params[0].type]) == 0.0
    # a function the entry does not reach: one launch
    assert prices("adamw.step", "mul", (), x, [x, Lit("2", x)]) == pytest.approx(0.1)


def test_the_report_is_in_microseconds_and_the_program_verifies(train07) -> None:
    from presk_core.verify import problems

    model = roofline_model(_profile(), train07, [("loss", {"B": 8})])
    out, report = optimize(train07, model=model)
    line = report.lines()[0]
    assert re.fullmatch(
        r"presk-opt: \d+ of \d+ functions rewritten, \d+ → \d+ lets, cost [\d.]+ µs → [\d.]+ µs "
        r"\(roofline, profile \S+ \S+ f64\)", line
    ), line  # fmt: skip
    assert not problems(out)
    assert predicted(out, model) <= predicted(train07, model)


def _presk(*args: str) -> subprocess.CompletedProcess:
    return presk(*args, env={"PRESK_VERIFY": "1"})


GRAD = ("tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2")


def test_run_opt_profile_prints_the_same_result(tmp_path: Path) -> None:
    _profile(tmp_path / "p.json")
    plain = _presk("run", *GRAD)
    opt = _presk("run", *GRAD, "--opt", "--profile", str(tmp_path / "p.json"))
    assert opt.returncode == 0, opt.stderr
    assert opt.stdout == plain.stdout
    first = opt.stderr.splitlines()[0]
    assert first.startswith("presk-opt: ") and first.endswith(
        f" µs (roofline, {_profile().label()})"
    )
    assert "  Linear.apply.bwd: " in opt.stderr


def test_profile_without_opt_is_a_usage_error(tmp_path: Path) -> None:
    r = _presk("run", *GRAD, "--profile", str(tmp_path / "p.json"))
    assert r.returncode == 2
    assert r.stderr == "presk run: --profile prices --opt's rewriting: give --opt\n"


def test_a_profile_that_cannot_be_read_is_E9002(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('{"presk_profile": 1}')
    r = _presk("run", *GRAD, "--opt", "--profile", str(tmp_path / "p.json"))
    assert r.returncode == 1 and r.stdout == ""
    assert "[E9002] Error: " in r.stderr and "malformed profile: no field 'machine'" in r.stderr


def test_bench_opt_times_both_programs(tmp_path: Path) -> None:
    _profile(tmp_path / "p.json")
    r = _presk("bench", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=8", "--repeat",
               "3", "--opt", "--profile", str(tmp_path / "p.json"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("backend") and lines[0].endswith("speedup")
    assert lines[1].startswith("native f64   ") and lines[2].startswith("native f64 --opt  ")
    assert re.fullmatch(
        r"-- predicted by the roofline \(profile \S+ \S+ f64\), the kernels alone: "
        r"[\d.]+ µs, [\d.]+ µs with --opt", lines[3]
    )  # fmt: skip
    assert re.fullmatch(
        r"-- measured, the kernels alone: [\d.]+ µs, [\d.]+ µs with --opt", lines[4]
    )
    assert r.stderr.startswith("presk-opt: ")


def test_train_opt_profile_logs_and_writes_the_same(tmp_path: Path) -> None:
    _profile(tmp_path / "p.json")
    common = ("train", "tutorial/07_train.psk", "--steps", "4", "--log-every", "2")
    plain = _presk(*common, "--ckpt", str(tmp_path / "a"))
    opt = _presk(*common, "--ckpt", str(tmp_path / "b"), "--opt", "--profile",
                 str(tmp_path / "p.json"))  # fmt: skip
    assert opt.returncode == 0, opt.stderr
    assert plain.stdout.splitlines()[:2] == opt.stdout.splitlines()[:2]
    assert (tmp_path / "a/final.psk.d").read_bytes() == (tmp_path / "b/final.psk.d").read_bytes()
    assert opt.stderr.splitlines()[0].endswith(f"(roofline, {_profile().label()})")


@pytest.mark.parametrize("backend", ["interp", "native"])
def test_train_opt_with_an_unusable_profile_is_E9002(tmp_path: Path, backend: str) -> None:
    """Issue 27: the step's rewriting read the profile inside the training, and E9002
    escaped as an internal error (exit 0 after `presk: internal error`)."""
    (tmp_path / "p.json").write_text("{}")
    r = _presk("train", "tutorial/07_train.psk", "--steps", "1", "--ckpt", str(tmp_path / "c"),
               "--opt", "--profile", str(tmp_path / "p.json"), "--backend", backend)  # fmt: skip
    assert r.returncode == 1 and "[E9002] Error: " in r.stderr, r.stderr
    assert "internal error" not in r.stderr and not (tmp_path / "c" / "final.psk.d").exists()
