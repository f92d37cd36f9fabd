"""`presk reprice` and `presk refit`: nothing measured, the same bytes from the same files;
their bad inputs refused with codes, writing nothing."""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from pathlib import Path

from helpers import ROOT, presk
from presk_kernel.layout_fit import fit
from presk_kernel.layout_model import Counts, Machine, Model, Profile, save_profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from days import point, write_day  # noqa: E402

FIXTURE = ROOT / "tests/plans/fixtures/rank"
MACHINE = Machine("x86_64", "test", 0, 48 << 10, 2 << 20, 32 << 20, 2, 1, 2, 32, 512)


def _profile(path: Path, q: float = 1.0) -> Path:
    """A profile whose samples were timed under a known model (so its fit is exact)."""
    groups = ("f32+lanes1+w1", "f32+lanes4+w1")
    truth = Model(2e-6, 0.0, 4e10, 2e10, 1e10, dict(zip(groups, (1e9, 4e9), strict=True)),
                  dict(zip(groups, (5e8, 2e9), strict=True)), q)  # fmt: skip
    samples, cs, ts = [], [], []
    for i in range(24):
        g = groups[i % 2]
        c = Counts(1e4 * (1 + i % 5), 3e3 * (1 + i % 3), 1e4 * (i % 4), 5e3 * (i % 3),
                   2e3 * (1 + i % 2), g, 1)  # fmt: skip
        t = truth.predict(c)
        every = {r: c.to_dict() for r in ("lines,overhead", "lines", "overhead", "none")}
        samples.append({"nest": "gemm/%2", "operands": [[8, 8], [8, 8]], "type": "f32",
                        "decisions": {"tile": [1, i]}, "layout": f"p{i}", "counts": every,
                        "times_us": [t * 1e6] * 3, "dims": {"N": 8}})  # fmt: skip
        cs.append(c)
        ts.append(t)
    save_profile(Profile(MACHINE, samples, fit(cs, ts, "pnorm", ("lines", "overhead"))), str(path))
    return path


def test_refit_fits_the_samples_again_in_another_form(tmp_path):
    p = _profile(tmp_path / "p.json", q=2.0)
    out = tmp_path / "sum.json"
    r = presk("refit", p, "--combine", "sum", "--rules", "lines", "--out", out)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"-- refit of {p}: 24 samples, combine sum, rules lines; nothing measured"
    assert lines[1].startswith("-- fit (sum, q = 1.00, load term, rules lines): λ = ")
    assert re.fullmatch(r"-- uncertainty u = \d\.\d{3} \(median relative residual over 24 "
                        r"samples\), Spearman -?\d\.\d{3}", lines[-2])  # fmt: skip
    assert lines[-1] == f"-- profile written to {out}"
    doc = json.loads(out.read_text())
    assert doc["model"]["combine"] == "sum" and doc["model"]["rules"] == ["lines"]
    assert doc["samples"] == json.loads(p.read_text())["samples"]
    again = tmp_path / "again.json"
    presk("refit", p, "--combine", "sum", "--rules", "lines", "--out", again)
    assert again.read_bytes() == out.read_bytes()  # deterministic
    r = presk("refit", p, "--combine", "pnorm", "--out", tmp_path / "back.json")
    assert "q = 2.00" in r.stdout  # the form it was timed in
    assert float(re.search(r"u = (\S+)", r.stdout).group(1)) < 0.01
    r = presk("refit", p, "--combine", "max", "--out", tmp_path / "max.json")
    assert "-- fit (max, q = ∞," in r.stdout


def test_refit_refuses_bad_forms_and_profiles(tmp_path):
    p = _profile(tmp_path / "p.json")
    out = tmp_path / "o.json"
    for args, code in (
        (("--combine", "mean"), "E7123"),
        (("--rules", "lines,bytes"), "E7123"),
    ):
        r = presk("refit", p, *args, "--out", out)
        assert r.returncode == 1 and f"[{code}]" in r.stderr and not out.exists()
    (tmp_path / "roof.json").write_text(json.dumps({"presk_profile": 1}))
    r = presk("refit", tmp_path / "roof.json", "--out", out)
    assert r.returncode == 1 and "[E7128]" in r.stderr and not out.exists()
    (tmp_path / "bad.json").write_text("[1, 2")
    r = presk("refit", tmp_path / "bad.json", "--out", out)
    assert r.returncode == 1 and "[E7120]" in r.stderr and not out.exists()
    doc = json.loads(p.read_text())
    doc["samples"] = []
    (tmp_path / "empty.json").write_text(json.dumps(doc))
    r = presk("refit", tmp_path / "empty.json", "--out", out)
    assert r.returncode == 1 and "[E7126]" in r.stderr and not out.exists()


def test_reprice_prices_the_recorded_points_again_and_copies_the_rest(tmp_path):
    p = _profile(tmp_path / "p.json")
    out = tmp_path / "re"
    r = presk("reprice", FIXTURE / "day1", "--profile", p, "--out", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-2] == (
        f"-- 57 points of 4 nests priced again under {p} (u = 0.000), their times copied "
        f"from {FIXTURE / 'day1'}: nothing measured"
    )
    model = Model.from_dict(json.loads(p.read_text())["model"])
    for name in ("scores__2.jsonl", "attend__5.jsonl"):
        old = [json.loads(x) for x in (FIXTURE / "day1" / name).read_text().splitlines()]
        new = [json.loads(x) for x in (out / name).read_text().splitlines()]
        for a, b in zip(old, new, strict=True):
            want = model.predict(Counts.from_dict(a["counts"]["lines,overhead"])) * 1e6
            assert math.isclose(b["predicted_us"], want, rel_tol=1e-12)
            assert {k: v for k, v in a.items() if k != "predicted_us"} == {
                k: v for k, v in b.items() if k != "predicted_us"
            }
    day = json.loads((out / "day.json").read_text())
    assert day["profile"]["path"] == str(p) and day["profile"]["u"] == model.u
    # rank reads it as any day, and the same files give the same bytes
    again = tmp_path / "again"
    presk("reprice", FIXTURE / "day1", "--profile", p, "--out", again)
    for f in out.iterdir():
        assert (again / f.name).read_bytes() == f.read_bytes()
    r = presk("rank", out, FIXTURE / "day2", "--entry", "attend", "--out", tmp_path / "r.md")
    assert r.returncode == 0, r.stderr


def test_reprice_refuses_what_it_cannot_price(tmp_path):
    p = _profile(tmp_path / "p.json")
    out = tmp_path / "re"
    day = tmp_path / "day"
    shutil.copytree(FIXTURE / "day1", day)
    other = dict(MACHINE.to_dict(), cpu_model="another")
    doc = json.loads((day / "day.json").read_text())
    doc["profile"]["machine"] = other
    (day / "day.json").write_text(json.dumps(doc))
    r = presk("reprice", day, "--profile", p, "--out", out)
    assert r.returncode == 1 and "[E7122]" in r.stderr and not out.exists()
    doc["profile"]["machine"] = "x86_64 another"  # the kind, as presk autotune records it
    (day / "day.json").write_text(json.dumps(doc))
    r = presk("reprice", day, "--profile", p, "--out", out)
    assert r.returncode == 1 and "[E7122]" in r.stderr and not out.exists()
    doc["profile"]["machine"] = MACHINE.kind
    (day / "day.json").write_text(json.dumps(doc))
    assert presk("reprice", day, "--profile", p, "--out", out).returncode == 0
    shutil.rmtree(out)
    doc["profile"]["machine"] = {}
    (day / "day.json").write_text(json.dumps(doc))
    r = presk("reprice", day, "--profile", p, "--out", day)
    assert r.returncode == 1 and "[E7127]" in r.stderr
    bare = json.loads(p.read_text())
    bare["model"] = None
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    r = presk("reprice", day, "--profile", tmp_path / "bare.json", "--out", out)
    assert r.returncode == 1 and "[E7126]" in r.stderr and not out.exists()
    one = write_day(tmp_path / "one", [("e/%1", "contraction", [point(0, {}, 1.0, [1.0])])])
    line = json.loads((one / "e__1.jsonl").read_text())
    line["counts"] = {"lines": line["counts"]["lines"]}
    (one / "e__1.jsonl").write_text(json.dumps(line) + "\n")
    r = presk("reprice", one, "--profile", p, "--out", out)
    assert r.returncode == 1 and "[E7129]" in r.stderr and not out.exists()
    (day / "day.json").write_text("{")
    r = presk("reprice", day, "--profile", p, "--out", out)
    assert r.returncode == 1 and "[E7124]" in r.stderr and not out.exists()
