"""`presk bench … --calibrate P --space calib` (L1011–L1034): the block's lines as the
specification prints them, the second run keeping the first's samples, and the profiles it
refuses. Natively: it compiles and times every point of the space (a GEMM of N = 8 and 16, to
keep it short; the figures are the loaded machine's and are not compared)."""

from __future__ import annotations

import json
import re

from helpers import presk

SPEC_HEAD = (
    "layout                                                           group               "
    "measured µs predicted µs"
)
MACHINE = re.compile(
    r"-- gemm/%2 on cpu\d+ \(f32\): L1d \d+ KiB, L2 \d+ KiB, L3 \d+ KiB shared by \d+, "
    r"\d+ workers, \d+ vector registers"
)
ROW = re.compile(r".{65}f32\+lanes\d+\+w\d+ +\d+\.\d\d +\d+\.\d\d")


def _bench(n: int, out, *more):
    return presk("bench", "experiments/gemm.psk", "--entry", "gemm", "--dim", f"N={n}",
                 "--realize", "f32", "--calibrate", out, "--space", "calib", "--repeat", "2",
                 *more)  # fmt: skip


def test_two_runs_calibrate_one_profile(tmp_path):
    out = tmp_path / "layout.json"
    r = _bench(8, out)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert MACHINE.fullmatch(lines[0])
    assert lines[1] == "-- costed under the rules lines,overhead"
    assert lines[2] == SPEC_HEAD
    m = re.fullmatch(
        r"-- (\d+) layouts timed \((\d+) ill-formed at these shapes\), 0 samples kept from "
        rf"{re.escape(str(out))}, 2 calls each",
        lines[-4 - 2 * _groups(lines)],
    )
    assert m, r.stdout
    first = int(m.group(1))
    assert all(ROW.fullmatch(x) for x in lines[3 : 3 + first])
    assert lines[4 + first].startswith("-- fit (p-norm, q = ")
    assert lines[-1] == f"-- profile written to {out}"
    assert f"over {first} samples" in lines[-2]
    r = _bench(16, out, "--combine", "sum", "--rules", "lines")
    assert r.returncode == 0, r.stderr
    second = r.stdout.splitlines()
    assert second[1] == "-- costed under the rules lines"
    kept = next(x for x in second if " layouts timed " in x)
    timed = int(kept.split()[1])
    assert f"), {first} samples kept from {out}, 2 calls each" in kept
    assert f"over {first + timed} samples" in second[-2]
    assert "-- fit (sum, q = 1.00, load term, rules lines): " in r.stdout
    doc = json.loads(out.read_text())
    assert len(doc["samples"]) == first + timed
    assert {s["dims"]["N"] for s in doc["samples"]} == {8, 16}


def _groups(lines: list[str]) -> int:
    return sum(1 for x in lines if x.startswith("--      π["))


def test_profiles_of_the_other_kind_are_refused(tmp_path):
    roof = tmp_path / "roof.json"
    roof.write_text(json.dumps({"presk_profile": 1, "machine": {}, "samples": [], "fit": None}))
    before = roof.read_text()
    r = _bench(8, roof)
    assert r.returncode == 1 and "[E7128]" in r.stderr and roof.read_text() == before
    layout = tmp_path / "layout.json"
    layout.write_text(json.dumps({"presk": "layout-profile", "version": 1}))
    r = presk("bench", "experiments/gemm.psk", "--entry", "gemm", "--dim", "N=8", "--realize",
              "f32", "--calibrate", layout, "--repeat", "1")  # fmt: skip
    assert r.returncode == 1 and "[E9002]" in r.stderr
    assert json.loads(layout.read_text()) == {"presk": "layout-profile", "version": 1}
    r = presk("bench", "experiments/gemm.psk", "--entry", "gemm", "--dim", "N=8", "--space",
              "calib")  # fmt: skip
    assert r.returncode == 2 and "--calibrate" in r.stderr
    r = _bench(8, tmp_path / "x.json", "--rules", "pages")
    assert r.returncode == 1 and "[E7123]" in r.stderr and not (tmp_path / "x.json").exists()
