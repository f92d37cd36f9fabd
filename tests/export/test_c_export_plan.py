"""`presk export --target c --plan @FILE` (L1194–L1214): the program's kernels are the plan's
(a block over the summed axis, a softmax in two passes, splits among threads), and its
outputs are `presk run --backend native --plan @FILE`'s, bit for bit; a plan for another
entry or dims, or a point outside its nest's space, is coded and writes nothing.

One build (gcc, OpenMP): tools/c_conformance.py exports every example entry under plans
drawn at random (`make c-conformance`)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT, presk, presk_ok
from presk_core import data as D

sys.path.insert(0, str(ROOT / "tools"))
from c_conformance import write_plan  # noqa: E402

ATTEND = ("tutorial/03_attention.psk", "attend")
DIMS = {"B": 2, "T": 40}  # the values ein sums over T = 40 terms: a block of 32 fits
WANT = {  # site -> the decisions its point takes
    "scores/%2": {"split": [1, 2]},
    "attend/%5": {"passes": 2, "split": [0, 2]},
    "attend/%6": {"kblock": 32, "split": [0, 2]},
}


def _choose(site, pts):
    want = WANT.get(site, {})
    return next(p for p in pts if all(p.decisions.get(k) == v for k, v in want.items()))


def _dims():
    return [x for k, v in DIMS.items() for x in ("--dim", f"{k}={v}")]


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    texts = write_plan(ROOT / ATTEND[0], ATTEND[1], DIMS, {}, "f32", 2, _choose, path)
    assert any("kblock 32" in t for t in texts) and any("passes 2" in t for t in texts)
    return path


def test_a_plan_s_layouts_compute_the_native_backend_s_bits(plan, tmp_path):
    out = tmp_path / "c"
    done = presk_ok("export", ATTEND[0], "--target", "c", "--entry", ATTEND[1], *_dims(),
                    "--plan", f"@{plan}", "-o", out)  # fmt: skip
    assert done.stdout.startswith(
        f"presk export: `attend` at B = 2, T = 40 in f32 under the plan {plan}: 5 launches"
        " (0 dead, 3 of them divided among up to 2 threads) of 5 kernels,"
    )
    kernels = (out / "kernels.c").read_text()
    assert "in i4_t + 32, resuming %2" in kernels  # the block, as the plan lays it out
    assert "_term = presk_select_f32(" in kernels  # the two-pass softmax stores each term
    check = subprocess.run(["make", "-s", "-C", str(out), "check", "CC=gcc"],
                           capture_output=True, text=True)  # fmt: skip
    assert check.stdout == "C1 holds: the outputs are the native backend's, bit for bit\n", (
        check.stdout + check.stderr
    )
    native = json.loads(presk_ok("run", ATTEND[0], "--entry", ATTEND[1], *_dims(), "--backend",
                                 "native", "--plan", f"@{plan}", "--json").stdout)  # fmt: skip
    got = D.read_reals(str(out / "out.psk.d"))
    want = np.array(native["result"], dtype=object).astype(float).reshape(-1)
    assert np.ascontiguousarray(got, np.float64).tobytes() == want.tobytes()


def test_a_plan_of_another_entry_or_point_is_coded_and_writes_nothing(plan, tmp_path):
    base = ("export", ATTEND[0], "--target", "c", "--entry", ATTEND[1])
    other = presk(*base, "--dim", "B=2", "--dim", "T=41", "--plan", f"@{plan}", "-o",
                  tmp_path / "a")  # fmt: skip
    assert other.returncode == 1 and other.stderr.startswith("[E7112] Error: the plan "), other
    doc = json.loads(plan.read_text())
    doc["nests"][-1]["decisions"]["kblock"] = 64  # no block of 64 in the space
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    outside = presk(*base, *_dims(), "--plan", f"@{bad}", "-o", tmp_path / "b")
    assert outside.returncode == 1 and outside.stderr.startswith("[E7110] Error: "), outside
    scop = presk(*base, *_dims(), "--mode", "scop", "--plan", f"@{plan}", "-o", tmp_path / "d")
    assert scop.returncode == 2 and "no --plan" in scop.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]
