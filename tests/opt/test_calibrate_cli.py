"""`presk bench --calibrate` in the specification's form and its diagnostics (moved from
presk-opt's tests: they drive presk-cli)."""

import re
from pathlib import Path

from helpers import presk
from presk_opt import roofline as R


def _profile() -> R.Profile:
    s = R.Sample("kernel k (…)", "f/%1", 1, 60, 164, 0.25, 7, "a.psk:f", "0123")
    return R.Profile(R.machine("f64"), [s], R.Roofline(1e9, 1e10, 1e-7))


def _bench(*args: str):
    return presk("bench", *args)


LOSS = ("tutorial/07_train.psk", "--entry", "loss", "--dim", "B=8", "--repeat", "3")
ROW = r"kernel .{37}.{6}\s+\d+\s+\d+\s+\d+\.\d\d\s+\d+\.\d\d"


def test_calibrate_prints_the_table_and_writes_the_profile(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    r = _bench(*LOSS, "--calibrate", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "kernel" + " " * 47 + "work        bytes measured µs predicted µs"
    rows = lines[1:-4]
    assert rows and all(re.fullmatch(ROW, x) and len(x) == 94 for x in rows), rows
    n = len(rows)
    assert lines[-4] == f"-- {n} kernels timed (0 kept from {out}), 3 calls, f64"
    num = r"\d\.\d{3}e-?\d+"
    assert re.fullmatch(
        rf"-- roofline: π = {num} ops/s, β = {num} bytes/s, λ = \d+\.\d\d µs per launch", lines[-3]
    )
    rho = r"(-?\d\.\d{3}|nan)"
    assert re.fullmatch(
        rf"-- Spearman with the measured times: operation counts {rho}, work {rho}, roofline {rho}",
        lines[-2],
    )
    assert lines[-1] == f"-- profile written to {out}"
    profile = R.read(str(out))
    assert len(profile.samples) == n and profile.machine == R.machine("f64")
    assert all(s.source == "tutorial/07_train.psk:loss" and s.calls == 3 for s in profile.samples)
    # another entry: the first one's kernels not timed again are kept
    r2 = _bench("tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=4",
                "--repeat", "3", "--calibrate", str(out))  # fmt: skip
    assert r2.returncode == 0, r2.stderr
    m = re.search(r"-- (\d+) kernels timed \((\d+) kept from ", r2.stdout)
    assert m and int(m[2]) > 0 and len(R.read(str(out)).samples) == int(m[1]) + int(m[2])


def test_a_bad_profile_file_is_E9002(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    out.write_text("not json")
    r = _bench(*LOSS, "--calibrate", str(out))
    assert r.returncode == 1 and "[E9002] Error: " in r.stderr and "is not JSON" in r.stderr
    assert out.read_text() == "not json"


def test_a_profile_of_another_type_is_E9002(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    R.write(_profile(), str(out))
    r = _bench(*LOSS, "--realize", "f32", "--calibrate", str(out))
    assert r.returncode == 1 and "[E9002] Error: " in r.stderr
    assert "profiles another machine or type" in r.stderr


def test_an_entry_that_cannot_run_writes_no_profile(tmp_path: Path) -> None:
    # Linear.init lowers since its xavier_uniform draws natively (issue 29, H5); an entry
    # whose hyperparameter has no value cannot run at all
    src = tmp_path / "hp.psk"
    src.write_text("fn f(h : f64, x : ℝ[n: 2]) -> ℝ[n: 2] = x * real(h)\n", encoding="utf-8")
    r = _bench(str(src), "--entry", "f", "--calibrate", str(tmp_path / "p.json"))
    assert r.returncode == 1
    assert (
        "[E7001] Error: cannot synthesize `h`: a hyperparameter `f64` needs a default" in r.stderr
    )
    assert not (tmp_path / "p.json").exists()


def test_repeat_0_is_a_usage_error(tmp_path: Path) -> None:
    r = _bench(*LOSS[:-1], "0", "--calibrate", str(tmp_path / "p.json"))
    assert r.returncode == 2 and "'--repeat': 0 is not in the range x>=1" in r.stderr
