"""`presk calibrate --precision` (spec L868–L884): the lines as the spec prints them (their
counts and formats; the digits are our generator's), each magnitude and condition number
against one computed here from `presk run --json`'s inputs and result, and the envelope's
JSON (docs/precision.md)."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest
from helpers import presk

LOSS = ("--precision", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4")
LINE = re.compile(r"^  (\S+) +(-?\d\.\d{4}e-?\d+)$")


def calibrated(tmp_path, *args):
    out = tmp_path / "env.json"
    r = presk("calibrate", *args, "--out", out)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    return r.stdout.splitlines(), json.loads(out.read_text()), out


def test_the_spec_lines_of_the_tower_loss(tmp_path):
    lines, doc, out = calibrated(tmp_path, *LOSS, "--bits", "128")
    # spec L872–L882: 30 sites (28 bindings, the entry's 2 parameters), 3 sums
    assert lines[0] == "presk calibrate: 30 sites over 1 samples of `loss` at 128 bits"
    top = [LINE.match(x) for x in lines[1:6]]
    assert all(top) and all(len(m.group(0)) - len(m.group(2)) == 31 for m in top)
    values = [float(m.group(2)) for m in top]
    assert values == sorted(values, reverse=True)
    assert lines[6] == (
        "presk calibrate: 3 sums and contractions, worst condition numbers Σ|xᵢwᵢ| / |Σxᵢwᵢ|:"
    )
    sums = [LINE.match(x).group(1) for x in lines[7:10]]
    assert sums == ["Linear.apply/%3", "RMSNorm.apply/%4", "loss/%7"]
    assert lines[8:10] == [
        "  RMSNorm.apply/%4             1.0000e0",  # a mean of squares cancels nothing
        "  loss/%7                      1.0000e0",
    ]
    assert lines[10] == f"presk calibrate: wrote {out}" and len(lines) == 11
    # the magnitudes against `presk run`: the loss itself, and %6 = %5²
    run = presk("run", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4", "--json")
    loss = float(Fraction(json.loads(run.stdout)["result"]))
    sites = doc["sites"]
    assert sites["loss/%7"]["max"] == pytest.approx(loss, rel=1e-15)
    assert doc["output"] == pytest.approx(loss, rel=1e-15)
    assert sites["loss/%6"]["max"] == pytest.approx(sites["loss/%5"]["max"] ** 2, rel=1e-14)
    assert sites["loss/%6"]["lo"] >= 0 or abs(sites["loss/%6"]["lo"]) < 1e-30


def test_a_dot_condition_number_against_numpy(tmp_path):
    entry = ("--precision", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply")
    lines, doc, _ = calibrated(tmp_path, *entry, "--dim", "batch=4")
    run = presk("run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply")
    run = presk(
        "run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4",
        "--json",
    )  # fmt: skip
    inputs = json.loads(run.stdout)["inputs"]
    x = [[Fraction(v) for v in row] for row in inputs["x"]]
    w = [[Fraction(v) for v in row] for row in inputs["θ"]["w"]]
    conds, mags = [], []
    for row in x:
        for j in range(2):
            terms = [row[k] * w[k][j] for k in range(3)]
            total = sum(terms)
            conds.append(sum(abs(t) for t in terms) / abs(total))
            mags.append(abs(total))
    dot = doc["sites"]["Linear.apply/%3"]
    assert dot["cond"] == pytest.approx(float(max(conds)), rel=1e-12)
    assert dot["max"] == pytest.approx(float(max(mags)), rel=1e-12)
    assert lines[-2].startswith("  Linear.apply/%3 ")
    # the arguments by the names of the kernels' input buffers
    assert set(doc["inputs"]) == {"θ.w", "θ.b", "x"}
    assert doc["inputs"]["x"]["lo"] <= float(min(min(r) for r in x))


def test_more_samples_widen_the_ranges(tmp_path):
    _, one, _ = calibrated(tmp_path, *LOSS)
    lines, three, _ = calibrated(tmp_path, *LOSS, "--samples", "3")
    assert lines[0] == "presk calibrate: 30 sites over 3 samples of `loss` at 128 bits"
    assert three["sites"].keys() == one["sites"].keys()
    for k, s in one["sites"].items():
        assert three["sites"][k]["lo"] <= s["lo"] and three["sites"][k]["hi"] >= s["hi"]
    assert three["sites"]["loss/%2"]["hi"] > one["sites"]["loss/%2"]["hi"]  # other inputs
    assert three["inputs"]["θ.final.γ"] == one["inputs"]["θ.final.γ"]  # the same θ


def test_the_envelope_records_its_program(tmp_path):
    _, doc, _ = calibrated(tmp_path, *LOSS)
    assert (doc["presk"], doc["version"], doc["entry"], doc["dims"]) == (
        "envelope", 1, "loss", {"B": 4},
    )  # fmt: skip
    assert re.fullmatch(r"[0-9a-f]{64}", doc["program"])
    _, again, _ = calibrated(tmp_path, *LOSS, "--seed", "1")
    assert again["program"] == doc["program"]  # the same program: the same digest


@pytest.mark.parametrize(
    "args, code",
    [
        (("--entry", "nope", "--dim", "B=4"), "E7001"),
        (("--entry", "loss", "--dim", "B=4", "--weights", "nowhere.psk.d"), "E7103"),
    ],
)
def test_bad_calibrations_are_diagnostics_and_write_nothing(tmp_path, args, code):
    out = tmp_path / "env.json"
    r = presk("calibrate", "--precision", "tutorial/07_train.psk", *args, "--out", out)
    assert r.returncode in (1, 2) and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()
    if r.returncode == 1:
        assert r.stderr.startswith(f"[{code}] Error: "), r.stderr


def test_weights_from_a_checkpoint(tmp_path):
    r = presk("train", "tutorial/07_train.psk", "--steps", "2", "--ckpt", tmp_path / "ck")
    assert r.returncode == 0, r.stderr
    _, init, _ = calibrated(tmp_path, *LOSS)
    ckpt = tmp_path / "ck" / "final.psk.d"
    _, trained, _ = calibrated(tmp_path, *LOSS, "--weights", ckpt)
    assert (init["weights"], trained["weights"]) == (None, str(ckpt))
    assert trained["inputs"]["θ.final.γ"] != init["inputs"]["θ.final.γ"]
    assert trained["inputs"]["batch.0"] == init["inputs"]["batch.0"]  # the same inputs


def test_windows_of_data_are_the_samples(tmp_path):
    data = ("--data", "tutorial/data/pairs.psk.d")
    args = ("--precision", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=8", *data)
    lines, doc, _ = calibrated(tmp_path, *args, "--samples", "16")  # 16 windows of 8: all 128
    assert lines[0] == "presk calibrate: 30 sites over 16 samples of `loss` at 128 bits"
    assert doc["data"] == "tutorial/data/pairs.psk.d"
    run = presk("run", "tutorial/07_train.psk", "--entry", "loss", *data, "--json")
    x = [float(Fraction(v)) for row in json.loads(run.stdout)["inputs"]["batch"][0] for v in row]
    got = doc["inputs"]["batch.0"]
    assert (got["lo"], got["hi"]) == pytest.approx((min(x), max(x)), rel=1e-15)
    out = tmp_path / "more.json"
    r = presk("calibrate", *args, "--samples", "17", "--out", out)
    assert r.returncode == 1 and r.stderr.startswith("[E7103] Error: ") and not out.exists()
    assert "128 samples: 16 windows of 8, not 17" in r.stderr
