"""`presk solve` (spec L894–L914): the realization it writes runs with `--realize @FILE`, and
its gap to the exact reference, measured again here by `presk run --backend native`, is
inside the budget; the lines as the spec prints them; a bad budget, envelope or impossible
budget is a coded diagnostic and writes nothing."""

from __future__ import annotations

import json
import re

import pytest
from helpers import presk

LOSS = ("tutorial/07_train.psk",)
RUN = ("run", *LOSS, "--entry", "loss", "--dim", "B=4", "--digits", "17")


@pytest.fixture(scope="module")
def envelope(tmp_path_factory):
    out = tmp_path_factory.mktemp("env") / "tut_env.json"
    r = presk("calibrate", "--precision", *LOSS, "--entry", "loss", "--dim", "B=4", "--out", out)
    assert r.returncode == 0, r.stderr
    return out


def solved(envelope, tmp_path, budget):
    out = tmp_path / f"solved_{budget}.json"
    r = presk("solve", *LOSS, "--precision", envelope, "--budget", budget, "--out", out)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    return r.stdout.splitlines(), out


@pytest.mark.parametrize("budget", ["1e-3", "1e-6", "1e-9"])
def test_the_measured_gap_is_inside_the_budget(compiler_or_skip, envelope, tmp_path, budget):
    lines, out = solved(envelope, tmp_path, budget)
    doc = json.loads(out.read_text())
    assert (doc["presk"], doc["version"]) == ("realization", 1)
    exact = float(presk(*RUN).stdout.split("=")[1])
    r = presk(*RUN, "--backend", "native", "--realize", f"@{out}")
    assert r.returncode == 0, r.stderr
    gap = abs(float(r.stdout.split("=")[1]) - exact)
    assert gap <= float(budget) * abs(exact) * (1 + 1e-12)
    measured = float(re.search(r"measured +(\S+)", "\n".join(lines)).group(1))
    assert gap == pytest.approx(measured, rel=1e-3, abs=1e-16)


def test_a_looser_budget_costs_no_more(envelope, tmp_path):
    costs = []
    for budget in ("1e-9", "1e-6", "1e-3"):
        lines, _ = solved(envelope, tmp_path, budget)
        costs.append(float(re.search(r"cost +(\S+)", "\n".join(lines)).group(1)))
    assert costs[0] >= costs[1] >= costs[2]
    assert costs[2] < costs[0]


def test_the_spec_lines(envelope, tmp_path):
    lines, out = solved(envelope, tmp_path, "1e-3")
    assert re.fullmatch(
        r"presk solve: `loss` under budget 1\.00e-3 relative \(\d\.\d{3}e-3 absolute,"
        r" \|output\| 1\.707e0\)",
        lines[0],
    )
    assert re.fullmatch(r"  sites       \d+ narrowable, \d+ assigned away from f64", lines[1])
    # 76 reals of parameters: 608 bytes in f64 (spec L897)
    assert re.fullmatch(
        r"  parameters  4 offered, \d stored away from f64 \(\d f32, \d bf16\): \S+ bytes at"
        r" rest against 6\.0800e2 in f64",
        lines[2],
    )
    cost, every, floor = re.fullmatch(
        r"  cost        (\S+) against (\S+) all-f64 \(\d+\.\d\dx\), relaxation floor (\S+)",
        lines[3],
    ).groups()
    assert float(floor) == float(every) / 4 <= float(cost) <= float(every)
    assert lines[4].startswith("  proposal    ") and lines[5].startswith("  estimate    ")
    assert lines[6].endswith("— inside the budget") and lines[7].startswith("  optimal     ")
    assert lines[-1] == f"presk solve: wrote {out} — run it with `--realize @{out}`"


def test_a_small_space_is_searched(tmp_path):
    env = tmp_path / "env.json"
    entry = ("--entry", "Linear{3, 2}.apply", "--dim", "batch=4")
    assert (
        presk("calibrate", "--precision", "tutorial/01_linear.psk", *entry, "--out", env).returncode
        == 0
    )
    out = tmp_path / "r.json"
    r = presk(
        "solve", "tutorial/01_linear.psk", "--precision", env, "--budget", "1e-3", "--out", out
    )
    assert r.returncode == 0, r.stderr
    assert "  optimal     the proposal: no assignment of the 81 costs less" in r.stdout


@pytest.mark.parametrize(
    "budget, code", [("0", "E7104"), ("-1", "E7104"), ("nan", "E7104"), ("1e-30", "E7105")]
)
def test_a_budget_that_cannot_be_solved(envelope, tmp_path, budget, code):
    out = tmp_path / "r.json"
    r = presk("solve", *LOSS, "--precision", envelope, "--budget", budget, "--out", out)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.startswith(f"[{code}] Error: ") and not out.exists()


def test_an_envelope_that_does_not_fit(envelope, tmp_path):
    out = tmp_path / "r.json"
    r = presk(
        "solve", "tutorial/06_tower.psk", "--precision", envelope, "--budget", "1e-3", "--out", out
    )
    assert r.stderr.startswith("[E7101] Error: ") and not out.exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    r = presk("solve", *LOSS, "--precision", bad, "--budget", "1e-3", "--out", out)
    assert r.stderr.startswith("[E7100] Error: ") and not out.exists()


def test_native_and_kernel_measure_alike(compiler_or_skip, envelope, tmp_path):
    runs = []
    for backend in ("kernel", "native"):
        out = tmp_path / f"{backend}.json"
        r = presk(
            "solve", *LOSS, "--precision", envelope, "--budget", "1e-3", "--out", out,
            "--backend", backend,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        runs.append((r.stdout.splitlines()[:-1], out.read_text()))
    assert runs[0] == runs[1]


def test_a_solved_realization_runs_alike_on_kernel_and_native(compiler_or_skip, envelope, tmp_path):
    _, out = solved(envelope, tmp_path, "1e-4")
    runs = [presk(*RUN, "--backend", b, "--realize", f"@{out}") for b in ("kernel", "native")]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr
    assert runs[0].stdout == runs[1].stdout


# ---- --profile: the cost is predicted seconds (spec L900, L978) ------------------------------


def _profile(tmp_path, name, fit):
    from presk_opt import roofline as R

    path = tmp_path / f"{name}.json"
    s = R.Sample("kernel k (…)", "f/%1", 1, 60, 164, 0.25, 7, "a.psk:f", "0123")
    R.write(R.Profile(R.machine("f64"), [s], fit), str(path))
    return path


def test_a_profile_prices_time(envelope, tmp_path):
    # a machine bound by memory (β small): narrowing saves time as it saves bytes; one bound
    # by arithmetic (π small): a narrower type saves no time and its conversions cost some,
    # so nothing is narrowed
    from presk_opt import roofline as R

    runs = {}
    for name, fit in (
        ("memory", R.Roofline(1e12, 1e6, 1e-7)),
        ("compute", R.Roofline(1e6, 1e12, 1e-7)),
    ):
        out = tmp_path / f"{name}.json.out"
        r = presk(
            "solve", *LOSS, "--precision", envelope, "--budget", "1e-3", "--out", out,
            "--profile", _profile(tmp_path, name, fit),
        )  # fmt: skip
        assert (r.returncode, r.stderr) == (0, ""), r.stderr
        lines = r.stdout.splitlines()
        cost, every, floor = map(float, re.fullmatch(
            r"  cost        (\S+) against (\S+) all-f64 \(\d+\.\d\dx\), relaxation floor (\S+)",
            lines[3],
        ).groups())  # fmt: skip
        assert floor <= cost <= every < 1  # seconds, not bytes
        assert lines[4].endswith("(time when --profile is given, bytes otherwise)")
        runs[name] = (cost, every, json.loads(out.read_text()))
    cost, every, doc = runs["memory"]
    assert cost < every / 2 and doc["sites"]
    cost, every, doc = runs["compute"]
    assert cost == every and doc["sites"] == {} and doc["params"] == {}


def test_a_bad_profile_writes_nothing(envelope, tmp_path):
    from presk_opt import roofline as R

    bad = tmp_path / "bad.json"
    bad.write_text("{")
    unfitted = tmp_path / "unfitted.json"
    R.write(R.Profile(R.machine("f64"), [], None), str(unfitted))
    for profile in (bad, unfitted, tmp_path / "nowhere.json"):
        out = tmp_path / "r.json"
        r = presk(
            "solve", *LOSS, "--precision", envelope, "--budget", "1e-3", "--out", out,
            "--profile", profile,
        )  # fmt: skip
        assert (r.returncode, r.stdout) == (1, "")
        assert r.stderr.startswith("[E7140] Error: --profile: ") and not out.exists()
        assert "Traceback" not in r.stderr
