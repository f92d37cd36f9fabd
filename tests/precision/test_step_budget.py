"""`presk calibrate --step` and `presk solve --step` (spec L918–L1003): the lines as the spec
prints them, the counts and byte costs they must agree on, the measured update gap of every
solved realization inside its budget (measured again by `calibrate --step --realize @FILE`),
`presk train --realize @FILE` under it; bad input a coded diagnostic that writes nothing."""

from __future__ import annotations

import json
import math
import re
import shutil

import pytest
from helpers import ROOT, presk
from presk_core.show import format_exp

TRAIN = "tutorial/07_train.psk"
DATA = "tutorial/data/pairs.psk.d"
NAMES = ("f64", "f32", "bf16", "recipe")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt")
    r = presk("train", TRAIN, "--steps", "30", "--log-every", "0", "--ckpt", folder)
    assert r.returncode == 0, r.stderr
    return folder / "final.psk.d"


def calibrate(ckpt, out, *realize, warmup=20, samples=8):
    args = [f"--realize={r}" for r in realize]
    return presk(
        "calibrate", "--step", TRAIN, "--weights", ckpt, "--warmup", warmup,
        "--samples", samples, *args, "--out", out,
    )  # fmt: skip


@pytest.fixture(scope="module")
def calibrated(compiler_or_skip, ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("step") / "tut_step.json"
    r = calibrate(ckpt, out, *NAMES)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    return r.stdout.splitlines(), out, json.loads(out.read_text())


def solve(calibration, out, budget):
    return presk(
        "solve", "--step", TRAIN, "--precision", calibration, "--budget", budget, "--out", out
    )


@pytest.fixture(scope="module")
def solved(calibrated, tmp_path_factory):
    out = tmp_path_factory.mktemp("solved") / "tut_step_solved.json"
    r = solve(calibrated[1], out, "1e-3")
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    return r.stdout.splitlines(), out


EXP = r"-?\d\.\d+e-?\d+"


def test_calibrate_prints_the_spec_s_lines(calibrated, ckpt):
    lines, out, doc = calibrated
    assert lines[0] == (
        f"presk calibrate: step 21 of 160 from {ckpt} after 20 warm-up step(s) in f64, on"
        f" samples 0..8 of {DATA} (noise: the next 8)"
    )
    m = re.fullmatch(
        r"presk calibrate: (\d+) sites in (\d+) functions of one exact step at 256 bits"
        r" \(\d+\.\d s\)",
        lines[1],
    )
    assert m, lines[1]
    assert int(m.group(1)) == sum(f["sites"] for f in doc["functions"])
    assert int(m.group(2)) == len(doc["functions"])
    assert re.fullmatch(rf"  \|θ′ − θ\|    {EXP}   \|g\| {EXP}   \|θ\| {EXP}", lines[2]), lines[2]
    assert re.fullmatch(
        rf"  noise       {EXP}   ‖g_B − g_B′‖₂ / ‖g_B‖₂ between two batches of 8 \(f64\): what a"
        r" rounding error is to be compared with",
        lines[3],
    ), lines[3]
    assert lines[4] == (
        "realization                    update gap storage floor     grad gap    predicted B"
    )
    rows = lines[5:9]
    for name, line, row in zip(NAMES, rows, doc["rows"], strict=True):
        assert line == (
            f"{name:<30}{format_exp(row['update'], 3):>11}{format_exp(row['floor'], 3):>14}"
            f"{format_exp(row['grad'], 3):>13}{format_exp(row['bytes'], 4):>15}"
        )
    assert lines[9:] == [f"presk calibrate: wrote {out}"]


def test_predicted_bytes_are_the_functions_reals_at_each_type(calibrated):
    _, _, doc = calibrated
    reals = {f["name"]: f["reals"] for f in doc["functions"]}
    total = sum(reals.values())
    opt = reals["adamw.lr"] + reals["adamw.step"]
    want = {"f64": 8 * total, "f32": 4 * total, "bf16": 2 * total,
            "recipe": 4 * opt + 2 * (total - opt)}  # fmt: skip
    assert {row["realization"]: row["bytes"] for row in doc["rows"]} == want


def test_the_rows_say_what_the_spec_says_they_say(calibrated):
    _, _, doc = calibrated
    row = {r["realization"]: r for r in doc["rows"]}
    # f64's whole gap is its floor (L943); no f32 realization goes below its floor
    assert row["f64"]["update"] < 1e-13
    assert row["f64"]["update"] == pytest.approx(row["f64"]["floor"], rel=0.5)
    assert row["f32"]["update"] >= row["f32"]["floor"] * 0.99
    # the recipe keeps θ in f32: its floor is f32's (L937)
    assert row["recipe"]["floor"] == row["f32"]["floor"]
    # AdamW amplifies the gradient's error (L944)
    assert row["f32"]["update"] > row["f32"]["grad"]
    # the recipe is small against the noise between two batches (L945)
    assert row["recipe"]["update"] < doc["norms"]["noise"]
    assert row["bf16"]["update"] > row["recipe"]["update"] > row["f32"]["update"]


def test_solve_prints_the_spec_s_table(calibrated, solved):
    lines, out = solved
    cal_lines, _, doc = calibrated
    assert lines[0] == cal_lines[0].replace("presk calibrate:", "presk solve:", 1)
    m = re.fullmatch(
        r"presk solve: the step under an update budget of 1\.00e-3 \(‖θ̂′−θ′‖₂/‖θ′−θ‖₂\),"
        r" (\d+) functions, (\d+) native steps measured",
        lines[1],
    )
    assert m, lines[1]
    n = len(doc["functions"])
    assert int(m.group(1)) == n
    assert lines[2] == (
        "function                        sites     f64 cost     gap f32    gap bf16   chosen"
    )
    table = lines[3 : 3 + n]
    names = [row.split()[0] for row in table]
    assert names == sorted(names) == sorted(f["name"] for f in doc["functions"])
    funcs = {f["name"]: f for f in doc["functions"]}
    chosen, gaps = {}, {}
    for row in table:
        name, sites, cost, g32, g16, t = row.split()
        assert len(row) == 83, row
        assert int(sites) == funcs[name]["sites"]
        assert cost == format_exp(8 * funcs[name]["reals"], 3)
        chosen[name], gaps[name] = t, {"f32": float(g32), "bf16": float(g16), "f64": 0.0}
    footer = lines[3 + n :]
    rounds = int(re.search(r"after (\d+) widening round\(s\)", footer[3]).group(1))
    assert int(m.group(2)) == 2 * n + 1 + rounds  # each function twice, then the combinations
    counts = [sum(1 for t in chosen.values() if t == x) for x in ("f64", "f32", "bf16")]
    assert footer[0] == f"  chosen      {counts[0]} f64, {counts[1]} f32, {counts[2]} bf16"
    width = {"f64": 8, "f32": 4, "bf16": 2}
    cost = sum(width[t] * funcs[f]["reals"] for f, t in chosen.items())
    every = sum(8 * f["reals"] for f in doc["functions"])
    assert footer[1] == (
        f"  cost        {format_exp(cost, 4)} against {format_exp(every, 4)} all-f64"
        f" ({every / cost:.2f}x), bytes"
    )
    est = re.fullmatch(
        rf"  estimate    ({EXP}) \(√Σ of the chosen functions' isolated gaps: it proposes, it"
        r" does not guarantee\)",
        footer[2],
    )
    assert est, footer[2]
    want = math.sqrt(sum(gaps[f][t] ** 2 for f, t in chosen.items()))
    assert float(est.group(1)) == pytest.approx(want, rel=0.05)  # the chosen types
    assert re.fullmatch(
        rf"  measured    ({EXP}) update gap \(storage floor {EXP}\), {EXP} gradient gap, after"
        r" \d+ widening round\(s\) — inside the budget",
        footer[3],
    ), footer[3]
    assert footer[4:] == [
        f"presk solve: wrote {out} — train with it with `presk train --realize @{out}`"
    ]
    doc = json.loads(out.read_text())
    assert (doc["presk"], doc["version"], doc["default"]) == ("realization", 1, "f64")
    assert doc["functions"] == {f: t for f, t in chosen.items() if t != "f64"}


@pytest.mark.parametrize("budget", ["1e-3", "1e-5"])
def test_every_solved_realization_measures_inside_its_budget(
    calibrated, solved, ckpt, tmp_path, budget
):
    if budget == "1e-3":
        out = solved[1]
    else:
        out = tmp_path / "solved.json"
        r = solve(calibrated[1], out, budget)
        assert r.returncode == 0, r.stderr
    again = calibrate(ckpt, tmp_path / "again.json", f"@{out}")
    assert again.returncode == 0, again.stderr
    row = json.loads((tmp_path / "again.json").read_text())["rows"][0]
    assert row["update"] <= float(budget)
    # the bytes solve counted are the bytes the realization stores
    lines = solved[0] if budget == "1e-3" else r.stdout.splitlines()
    cost = next(x for x in lines if x.startswith("  cost ")).split()[1]
    assert format_exp(row["bytes"], 4) == cost


def test_train_runs_the_step_under_the_solved_realization(solved, tmp_path):
    out = solved[1]
    mine = presk("train", TRAIN, "--steps", "40", "--log-every", "20", "--backend", "native",
                 "--realize", f"@{out}", "--ckpt", tmp_path / "step")  # fmt: skip
    assert mine.returncode == 0, mine.stderr
    f64 = presk("train", TRAIN, "--steps", "40", "--log-every", "20", "--backend", "native",
                "--ckpt", tmp_path / "f64")  # fmt: skip
    assert f64.returncode == 0, f64.stderr
    assert mine.stdout != f64.stdout  # the narrowed functions compute
    diff = presk(
        "data", "diff", tmp_path / "f64" / "final.psk.d", tmp_path / "step" / "final.psk.d"
    )
    relative = float(re.search(r"relative (\S+)", diff.stdout).group(1))
    assert 0 < relative < 1e-2


# ---- bad input: a coded diagnostic, nothing written ------------------------------------------


def refused(r, code, out):
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"[{code}]" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()


def test_a_checkpoint_of_another_program(compiler_or_skip, tmp_path):
    from presk_core.data import write_tree

    other = tmp_path / "other.psk.d"
    write_tree(str(other), "params Other", [[1.0, 2.0]], ["w"])
    refused(calibrate(other, tmp_path / "o.json", "f64"), "E7131", tmp_path / "o.json")


def test_a_checkpoint_of_the_right_model_with_other_shapes(compiler_or_skip, tmp_path):
    from presk_core.data import write_tree

    other = tmp_path / "other.psk.d"
    write_tree(str(other), "params Tower", [[1.0, 2.0]], ["final.γ"])
    refused(calibrate(other, tmp_path / "o.json", "f64"), "E7131", tmp_path / "o.json")


@pytest.mark.parametrize(
    "table, code",
    [
        ({"functions": {"Nowhere.apply": "f32"}}, "E7039"),
        ({"sites": {"loss.fwd/%99": "f32"}}, "E7037"),
        ({"functions": {"adamw.step": "f16"}}, "E7036"),
    ],
)
def test_a_realization_naming_what_the_step_does_not_have(ckpt, tmp_path, table, code):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"presk": "realization", "version": 1, **table}))
    refused(calibrate(ckpt, tmp_path / "o.json", "f64", f"@{bad}"), code, tmp_path / "o.json")


def test_an_unknown_realization_name(ckpt, tmp_path):
    refused(calibrate(ckpt, tmp_path / "o.json", "f16"), "E7036", tmp_path / "o.json")


@pytest.mark.parametrize("budget", ["0", "-1e-3", "nan", "inf"])
def test_a_budget_that_is_not_positive(calibrated, tmp_path, budget):
    out = tmp_path / "o.json"
    refused(solve(calibrated[1], out, budget), "E7134", out)


def test_a_budget_below_f64_s_gap(calibrated, tmp_path):
    out = tmp_path / "o.json"
    refused(solve(calibrated[1], out, "1e-20"), "E7135", out)


@pytest.mark.parametrize(
    "text",
    [
        "{",
        "[]",
        '{"presk": "envelope", "version": 1}',
        '{"presk": "step-calibration", "version": 9}',
    ],
)
def test_a_corrupt_calibration(tmp_path, text):
    bad, out = tmp_path / "bad.json", tmp_path / "o.json"
    bad.write_text(text)
    refused(solve(bad, out, "1e-3"), "E7130", out)


def test_a_calibration_with_a_damaged_state(calibrated, tmp_path):
    doc = json.loads(calibrated[1].read_text())
    first = next(iter(doc["state"]["theta"]))
    doc["state"]["theta"][first]["f64"] = "not base64!"
    bad, out = tmp_path / "bad.json", tmp_path / "o.json"
    bad.write_text(json.dumps(doc))
    refused(solve(bad, out, "1e-3"), "E7130", out)


def test_a_calibration_of_another_program(calibrated, tmp_path):
    copy = tmp_path / "tutorial"
    shutil.copytree(ROOT / "tutorial", copy)
    source = copy / "07_train.psk"
    source.write_text(source.read_text().replace("lr           : f64 = 0.01", "lr : f64 = 0.02"))
    out = tmp_path / "o.json"
    r = presk("solve", "--step", source, "--precision", calibrated[1], "--budget", "1e-3",
              "--out", out)  # fmt: skip
    refused(r, "E7133", out)


@pytest.mark.parametrize(
    "warmup, samples", [(160, 8), (-1, 8), (20, 0), (20, 65), (20, 1000), (10**6, 8)]
)
def test_warmup_or_samples_out_of_range(ckpt, tmp_path, warmup, samples):
    out = tmp_path / "o.json"
    r = calibrate(ckpt, out, "f64", warmup=warmup, samples=samples)
    if warmup < 0 or samples < 1:  # refused by the flag's range: a usage error
        assert r.returncode == 2 and not out.exists(), r.stderr
        return
    refused(r, "E7132", out)


def test_a_file_without_a_training_run(tmp_path):
    out = tmp_path / "o.json"
    r = presk("calibrate", "--step", "tutorial/06_tower.psk", "--out", out)
    refused(r, "E7138", out)


def test_an_out_that_cannot_be_written(ckpt, tmp_path):
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "o.json"
    r = calibrate(ckpt, out, "f64")
    assert r.returncode == 1 and "[E7137]" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_data_replaces_the_run_s_data_file(compiler_or_skip, tmp_path):
    # the run's own file by another path: the header names it, the step is the same
    copy = tmp_path / "pairs.psk.d"
    shutil.copy(ROOT / DATA, copy)
    out = tmp_path / "o.json"
    r = presk("calibrate", "--step", TRAIN, "--data", copy, "--samples", "4", "--out", out)
    assert r.returncode == 0, r.stderr
    assert f"on samples 0..4 of {copy} (noise: the next 4)" in r.stdout.splitlines()[0]
    assert json.loads(out.read_text())["data_flag"] == str(copy)


@pytest.mark.parametrize(
    "field, value",
    [
        ("rows", {"f64": 1}),
        ("rows", [{"realization": "f64", "update": "small"}]),
        ("samples", "eight"),
        ("samples", 0),
        ("step", 2.5),
        ("header", None),
        ("reference", {"theta_hi": 3}),
        ("state", []),
        ("seed", "0"),
        ("reference", "short"),
    ],
)
def test_a_calibration_with_a_damaged_field(calibrated, tmp_path, field, value):
    doc = json.loads(calibrated[1].read_text())
    if value == "short":  # θ′ of another length than θ
        value = {**doc["reference"], "theta_hi": {"shape": [1], "f64": "AAAAAAAA8D8="}}
    doc[field] = value
    bad, out = tmp_path / "bad.json", tmp_path / "o.json"
    bad.write_text(json.dumps(doc))
    refused(solve(bad, out, "1e-3"), "E7130", out)


def test_file_and_step_file_do_not_go_together(tmp_path):
    out = tmp_path / "o.json"
    both = presk("solve", TRAIN, "--step", TRAIN, "--precision", "x.json", "--budget", "1e-3",
                 "--out", out)  # fmt: skip
    neither = presk("solve", "--precision", "x.json", "--budget", "1e-3", "--out", out)
    entry = presk("calibrate", "--step", TRAIN, "--entry", "loss", "--out", out)
    warm = presk("calibrate", "--precision", TRAIN, "--entry", "loss", "--warmup", "3",
                 "--out", out)  # fmt: skip
    for r in (both, neither, entry, warm):
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()


def test_an_objective_that_draws_has_no_native_step(tmp_path):
    from importlib import util

    spec = util.spec_from_file_location("drop", ROOT / "tests" / "train" / "test_dropout.py")
    drop = util.module_from_spec(spec)
    spec.loader.exec_module(drop)
    drop.folder(tmp_path)
    out = tmp_path / "o.json"
    r = presk("calibrate", "--step", tmp_path / "drop.psk", "--out", out)
    refused(r, "E7138", out)


def test_a_profile_that_cannot_price_the_step(tmp_path):
    # `solve --step --profile P` prices the step by P's roofline: one that cannot be read is
    # E7140 before anything is measured (the calibration is not even read)
    out = tmp_path / "o.json"
    (tmp_path / "bad.json").write_text("{")
    for profile in (tmp_path / "bad.json", tmp_path / "nowhere.json"):
        r = presk(
            "solve", "--step", TRAIN, "--precision", tmp_path / "cal.json", "--budget", "1e-3",
            "--out", out, "--profile", profile,
        )  # fmt: skip
        refused(r, "E7140", out)
