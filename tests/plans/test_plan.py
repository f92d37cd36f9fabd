"""`presk plan`, `--plan @FILE` and `presk autotune` (step 17, L1040–L1078): the table and
footer in the spec's formats (R17.12–R17.15, R17.24–R17.25), the plan file, the same output
under a plan as without it (L1058's `cmp`), a plan stating the default layouts giving the
same kernels byte for byte (L851), the day directory autotune writes, and every bad input
coded with nothing written (E7110–E7118, and the profile's E7120–E7129)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from pathlib import Path

import pytest
from helpers import ROOT, presk

ATTENTION = "tutorial/03_attention.psk"
SMALL = ("--entry", "attend", "--dim", "B=2", "--dim", "T=16", "--realize", "f32")


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> Path:
    """A layout profile of this machine's kind with a fixed model and twenty workers (so
    the spaces are the spec's machine's, whatever the machine)."""
    from presk_kernel.layout_model import Model, Profile, read_machine, save_profile

    machine = dataclasses.replace(read_machine(), workers=20)
    groups = [f"{t}+lanes{n}+w{w}" for t in ("f32", "f64") for n in (1, 4, 8) for w in (1, 10, 20)]
    model = Model(
        lam=0.88e-6, spawn=0.0, beta_l2=4e11, beta_l3=8e11, beta_mem=1.5e12,
        pi={g: 1e10 * int(g.split("lanes")[1].split("+")[0]) for g in groups},
        rho={g: 6e10 for g in groups}, q=1.0, u=0.101,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("profile") / "layout.json"
    save_profile(Profile(machine, [], model), str(path))
    return path


def plan(profile, out, *more):
    return presk("plan", ATTENTION, *SMALL, "--profile", profile, "--out", out, *more)


ROW = re.compile(
    r"^(?P<nest>\S+) +(?P<ops>(\[[\d, ]*\] ?)+) *(?P<points>\d+) points +(?P<us>\d+\.\d\d) µs"
    r" +(?P<und>\d+) within 1 \+ u  (?P<layout>.+)$"
)


def test_plan_prints_the_spec_s_table_and_writes_the_plan(profile, tmp_path):
    out = tmp_path / "plan.json"
    r = plan(profile, out)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == (
        "nest                         operands                        space     predicted"
        "          undecided  layout"
    )
    rows = lines[1:-3]
    assert [ROW.match(x)["nest"] for x in rows] == [
        "scores/%2",
        "scores/%5",
        "attend/%5",
        "attend/%6",
    ]
    for x in rows:  # R17.12's columns, byte for byte
        m = ROW.match(x)
        assert x.startswith(f"{m['nest']:<28} {m['ops'].rstrip():<24}")
    assert rows[0].startswith("scores/%2                    [2, 2, 16, 4] [2, 2, 16, 4]")
    assert re.fullmatch(
        r"-- 4 nests, \d+ points costed in \d+\.\d{3} s, the entry captured in \d+\.\d{3} s;"
        r" u = 0\.101",
        lines[-3],
    )
    assert re.fullmatch(r"-- wall time \d+\.\d{3} s", lines[-2])
    assert lines[-1] == f"-- plan written to {out}"
    total = sum(int(ROW.match(x)["points"]) for x in rows)
    assert f"-- 4 nests, {total} points" in lines[-3]
    doc = json.loads(out.read_text())
    assert (doc["presk"], doc["version"], doc["entry"], doc["realize"]) == (
        "plan", 1, "attend", "f32"
    )  # fmt: skip
    assert doc["dims"] == {"B": 2, "T": 16} and doc["workers"] == 20
    # a nest whose default layout (not a point) is priced below every point stays default:
    # its row says so, and the plan leaves it out (a run lays it out by default)
    planned = [x for x in rows if not x.endswith(" (the default)")]
    assert [n["nest"] for n in doc["nests"]] == [ROW.match(x)["nest"] for x in planned]
    for x, n in zip(planned, doc["nests"], strict=True):
        assert x.endswith("  " + n["layout"]) and set(n["fields"]) >= {"order", "kblock", "passes"}
    again = plan(profile, tmp_path / "again.json")
    mask = lambda s: re.sub(r"\d+\.\d{3} s", "T s", s).replace(str(out), "")  # noqa: E731
    assert mask(again.stdout).replace(str(tmp_path / "again.json"), "") == mask(r.stdout)


def test_a_plan_never_takes_a_point_priced_above_the_default():
    """`choose` with the default's (point, price): the best point only when its price times
    1 + u is below the default's; else the default's point; None (the default itself)
    whenever no point is the default."""
    from presk_cli.plans import choose

    seconds = [3.0, 2.0, 5.0, 2.1]
    assert choose(seconds, 0.1) == (1, 2)
    assert choose(seconds, 0.1, (0, 2.5)) == (1, 2)  # 2.0 · 1.1 below the default: taken
    assert choose(seconds, 0.1, (0, 2.15)) == (0, 3)  # within 1 + u: the default's point
    assert choose(seconds, 0.1, (0, 1.5)) == (0, 3)  # the default's point, 3.0 · 1.1 ≥ 2.1
    assert choose(seconds, 0.1, (None, 2.0)) == (None, 2)  # the default, no point: kept
    assert choose(seconds, 0.1, (None, 9.0)) == (None, 4)  # even priced above every point
    assert choose([math.inf, 1.0], 0.1, (None, 1.0)) == (None, 1)


def test_run_under_the_plan_prints_the_same_output(profile, tmp_path):
    """L1056–L1061 at the tutorial's shapes: `cmp` of the two runs."""
    out = tmp_path / "plan.json"
    r = presk("plan", ATTENTION, "--entry", "attend", "--dim", "B=16", "--dim", "T=256",
              "--realize", "f32", "--profile", profile, "--out", out)  # fmt: skip
    assert r.returncode == 0, r.stderr
    base = ("run", ATTENTION, "--entry", "attend", "--dim", "B=16", "--dim", "T=256")
    without = presk(*base, "--backend", "native", "--realize", "f32")
    under = presk(*base, "--backend", "native", "--plan", f"@{out}")
    assert without.returncode == under.returncode == 0, under.stderr
    assert under.stdout == without.stdout and len(under.stdout) > 1000
    bench = presk("bench", ATTENTION, "--entry", "attend", "--dim", "B=16", "--dim", "T=256",
                  "--realize", "f32", "--plan", f"@{out}", "--repeat", "2")  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    assert bench.stdout.splitlines()[-1].startswith("native f32 --plan ")


def test_a_plan_of_the_default_layouts_gives_the_same_kernels():
    """`make plan-check` (L851) on two entries here; tools/plan_check.py walks them all."""
    sys.path.insert(0, str(ROOT / "packages" / "presk-kernel" / "tests"))
    from kernel_entries import case
    from presk_cli.plans import default_plan, fused_schedule, plan_check
    from presk_kernel.codec import encode_kernel
    from presk_kernel.layout import lay_out, run_layout

    for file, entry, dims in [
        (ATTENTION, "attend", (("B", 2), ("T", 3))),
        ("tests/examples/mlp/mlp.psk", "mse_grad", (("D", 3), ("B", 2))),
    ]:
        core, name, d, args, _ = case(file, entry, dims)
        for threads in (1, 2):
            n, same = plan_check(core, name, d, "f32", threads, args)
            assert same and n > 0
        # and the check can fail: a plan of another layout gives other kernels
        fused = fused_schedule(core, name, d, "f32", args)
        other = {
            site: dataclasses.replace(layout, lanes=None, width=1, tiles=())
            for site, layout in default_plan(fused).items()
        }
        assert any(
            other[s] != run_layout(k.kernel)
            for s in other
            for k in fused.launches
            if k.kernel.site == s
        )
        assert encode_kernel(lay_out(fused, 1, other)) != encode_kernel(lay_out(fused, 1))


def _diag(r, code: str):
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"[{code}]" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_bad_plans_and_profiles_are_coded_and_write_nothing(profile, tmp_path):
    out = tmp_path / "plan.json"
    assert plan(profile, out).returncode == 0
    base = ("run", ATTENTION, "--dim", "B=2", "--dim", "T=16", "--backend", "native")
    kernel = ("run", ATTENTION, "--entry", "attend", "--dim", "B=2", "--dim", "T=16")
    under = presk(*kernel, "--backend", "kernel", "--plan", f"@{out}")
    assert under.returncode == 0 and under.stdout == presk(*kernel, "--backend", "kernel",
                                                           "--realize", "f32").stdout  # fmt: skip
    # a plan for another entry, for other dims
    _diag(presk("run", ATTENTION, "--entry", "scores", "--dim", "B=2", "--dim", "T=16",
                "--backend", "native", "--plan", f"@{out}"), "E7112")  # fmt: skip
    _diag(presk("run", ATTENTION, "--entry", "attend", "--dim", "B=2", "--dim", "T=8",
                "--backend", "native", "--plan", f"@{out}"), "E7112")  # fmt: skip
    # corrupt JSON, another kind of document, another version, no such file
    bad = tmp_path / "bad.json"
    for text in ("{", '{"presk": "realization"}', '{"presk": "plan", "version": 0}', "[]"):
        bad.write_text(text)
        _diag(presk(*base, "--entry", "attend", "--plan", f"@{bad}"), "E7111")
    _diag(presk(*base, "--entry", "attend", "--plan", f"@{tmp_path / 'none.json'}"), "E7111")
    doc = json.loads(out.read_text())
    broken = json.loads(json.dumps(doc))
    broken["nests"][0]["fields"]["tiles"] = "wide"
    bad.write_text(json.dumps(broken))
    _diag(presk(*base, "--entry", "attend", "--plan", f"@{bad}"), "E7111")
    # a point outside its space: a tile the space does not have, fields not the decisions'
    outside = json.loads(json.dumps(doc))
    outside["nests"][0]["decisions"]["tile"] = [3, 3]
    bad.write_text(json.dumps(outside))
    _diag(presk(*base, "--entry", "attend", "--plan", f"@{bad}"), "E7110")
    mismatch = json.loads(json.dumps(doc))
    mismatch["nests"][0]["fields"]["threads"] = 7
    bad.write_text(json.dumps(mismatch))
    _diag(presk(*base, "--entry", "attend", "--plan", f"@{bad}"), "E7110")
    # --realize naming another type than the plan's; --plan on the reference interpreter
    _diag(presk(*base, "--entry", "attend", "--plan", f"@{out}", "--realize", "f64"), "E7113")
    r = presk("run", ATTENTION, "--entry", "attend", "--dim", "B=2", "--dim", "T=16",
              "--plan", f"@{out}")  # fmt: skip
    assert r.returncode == 2 and "--plan is for --backend" in r.stderr
    # a profile of another machine kind, one without a model, none: nothing written
    from presk_kernel.layout_model import Profile, load_profile, save_profile

    p = load_profile(str(profile))
    other = tmp_path / "other.json"
    save_profile(Profile(dataclasses.replace(p.machine, cpu_model="another CPU"), [], p.model),
                 str(other))  # fmt: skip
    fresh = tmp_path / "fresh.json"
    _diag(plan(other, fresh), "E7122")
    save_profile(Profile(p.machine, [], None), str(other))
    _diag(plan(other, fresh), "E7118")
    _diag(plan(tmp_path / "nowhere.json", fresh), "E7120")
    assert not fresh.exists()
    missing_dir = tmp_path / "file"
    missing_dir.write_text("")
    _diag(plan(profile, missing_dir / "plan.json"), "E7114")


def test_autotune_measures_every_point_and_writes_the_day(profile, tmp_path):
    day = tmp_path / "day1"
    r = presk("autotune", ATTENTION, "--entry", "attend", "--dim", "B=1", "--dim", "T=8",
              "--realize", "f32", "--space", "small", "--profile", profile, "--interp",
              "--out", day)  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    doc = json.loads((day / "day.json").read_text())
    assert doc["presk"] == "autotune-day" and doc["version"] == 1
    assert (doc["entry"], doc["dims"], doc["realize"], doc["space"]) == (
        "attend", {"B": 1, "T": 8}, "f32", "small"
    )  # fmt: skip
    assert doc["interp"] is True and doc["differing"] == 0
    assert doc["profile"]["u"] == pytest.approx(0.101)
    assert [n["nest"] for n in doc["nests"]] == ["scores/%2", "scores/%5", "attend/%5", "attend/%6"]
    assert [n["kind"] for n in doc["nests"]] == [
        "contraction",
        "elementwise",
        "softmax",
        "contraction",
    ]
    total = 0
    for n, line in zip(doc["nests"], lines, strict=False):
        points = [json.loads(x) for x in (day / n["file"]).read_text().splitlines()]
        total += len(points)
        ops = " ".join("[" + ", ".join(map(str, s)) + "]" for s in n["operands"])
        path = day / n["file"]
        assert (
            line == f"{n['nest']:<28} {ops:<24}{len(points):>6} of {n['points']:>5} points  {path}"
        )
        assert points[0]["point"] == 0 and points[0]["decisions"]["lanes"] == 1
        for p in points:
            assert set(p) == {"point", "decisions", "text", "layout", "predicted_us", "counts",
                              "times_us", "warmup", "launches", "same_bits"}  # fmt: skip
            assert len(p["times_us"]) == 7 and p["warmup"] == 1 and p["same_bits"] is True
            assert p["counts"]["lines,overhead"]["group"].startswith("f32+lanes")
    assert doc["checked_interp"] == total
    assert n["file"] == "attend__6.jsonl"
    assert re.fullmatch(
        rf"-- {total} points of 4 nests measured in \d+\.\d s, costed in \d+\.\d{{3}} s; every"
        r" output bit-identical to point 0, natively and on the kernel interpreter: yes",
        lines[-1],
    )
    # statement L on the sweep: every point checked on the interpreter, none differing
    r = presk("rank", day, day, "--entry", "attend", "--out", tmp_path / "rank.md")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("| L |"))
    assert f"| {total} of {total} points of day 1 checked on the interpreter" in line
    assert "; 0 outputs differing" in line and line.endswith("| **holds** |")


def test_a_point_that_differs_stops_the_sweep(profile, tmp_path, monkeypatch):
    """E7115, in process: the compiled entry of the second point made to return other bits."""
    import numpy as np
    from click.testing import CliRunner
    from presk_cback import native
    from presk_cli.planning import autotune

    real = native.NativeEntry.run_timed
    seen = []

    def flipped(self, inputs, ns):
        out = real(self, inputs, ns)
        if id(self) not in seen:
            seen.append(id(self))
        if seen.index(id(self)) == 1:
            out = [np.nextafter(x, np.inf).astype(x.dtype) for x in out]
        return out

    monkeypatch.setattr(native.NativeEntry, "run_timed", flipped)
    day = tmp_path / "day"
    r = CliRunner().invoke(autotune, [ATTENTION, "--entry", "attend", "--dim", "B=1", "--dim",
                           "T=8", "--realize", "f32", "--profile", str(profile), "--out", str(day)])  # fmt: skip
    assert r.exit_code == 1
    assert "[E7115]" in r.output and "point 1 of `scores/%2`" in r.output
    assert not day.exists()


def test_train_under_a_plan_logs_the_same(tmp_path):
    """`presk train --plan`: the training step's nests at points of their spaces other than
    the run's, the same log (its time line aside) as without the plan."""
    from presk_cli.plans import (
        PLAN_KIND,
        PLAN_VERSION,
        fused_schedule,
        layout_fields,
        nests_of,
        step_entry,
    )
    from presk_kernel.layout_space import points

    program, name, dims, args = step_entry("tutorial/07_train.psk", {}, "f32")
    nests = nests_of(fused_schedule(program, name, dims, "f32", args))
    planned = []
    for n in nests:
        pt = points(n.kernel, "small", 2)[-1]
        planned.append({"nest": n.site, "operands": [list(s) for s in n.operands],
                        "layout": pt.text, "decisions": pt.decisions,
                        "fields": layout_fields(pt.layout)})  # fmt: skip
    doc = {"presk": PLAN_KIND, "version": PLAN_VERSION, "entry": name, "dims": dims,
           "realize": "f32", "space": "small", "workers": 2, "nests": planned}  # fmt: skip
    out = tmp_path / "plan.json"
    out.write_text(json.dumps(doc))
    base = ("train", "tutorial/07_train.psk", "--steps", "3", "--backend", "native")
    without = presk(*base, "--realize", "f32", "--ckpt", tmp_path / "a")
    under = presk(*base, "--plan", f"@{out}", "--ckpt", tmp_path / "b")
    assert without.returncode == under.returncode == 0, under.stderr

    def keep(text: str) -> list[str]:
        return [re.sub(r"weights in .*", "", x) for x in text.splitlines() if " ms a step" not in x]

    assert keep(under.stdout) == keep(without.stdout) and "final loss" in under.stdout
    weights = [(tmp_path / d / "final.psk.d").read_bytes() for d in ("a", "b")]
    assert weights[0] == weights[1]
    assert len(planned) > 20
    r = presk("plan", "tutorial/01_linear.psk", "--train", "--profile", out, "--out", out)
    assert r.returncode == 1 and ("[E7120]" in r.stderr or "[E7117]" in r.stderr)


def test_plan_train_costs_the_step_and_train_runs_it(profile, tmp_path):
    """`presk plan --train` on the tutorial's run: every nest of the step costed (a fold over
    no variable, `Block.apply.bwd/%9`'s sum of one term, among them), and `presk train --plan`
    logs what the run logs without it."""
    out = tmp_path / "step.json"
    r = presk("plan", "tutorial/07_train.psk", "--train", "--realize", "f32", "--profile",
              profile, "--out", out)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert re.search(r"^-- \d+ nests, \d+ points costed in ", r.stdout, re.M)
    base = ("train", "tutorial/07_train.psk", "--steps", "2", "--backend", "native")
    without = presk(*base, "--realize", "f32", "--ckpt", tmp_path / "a")
    under = presk(*base, "--plan", f"@{out}", "--ckpt", tmp_path / "b")
    assert without.returncode == under.returncode == 0, under.stderr
    weights = [(tmp_path / d / "final.psk.d").read_bytes() for d in ("a", "b")]
    assert weights[0] == weights[1]
