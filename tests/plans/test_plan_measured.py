"""Issue 23's last part: a narrowed product (the causal scores' live triangle) priced and run
as the run has it under a plan, its space unchanged; a plan that keeps the default where
the profile measured the chosen GEMM statement no faster; `presk bench --space gemm`, the
GEMM statement's points alone, its samples carrying their product. Light: captures (no
kernel run) at the tutorial's T 256, and one GEMM of 64 timed twice."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from helpers import presk

sys.path.insert(0, str(Path(__file__).resolve().parent))
from days import point, write_day  # noqa: E402

ATTENTION = "tutorial/03_attention.psk"


@pytest.fixture(scope="module")
def scores():
    """The tutorial attention's scores nest at B 1, T 256 in f32 (a GEMM statement the
    `kernel` pass narrowed to its live triangle), its schedule, and a fixed model."""
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_cli.plans import capture
    from presk_kernel.layout_model import Model, read_machine
    from presk_syntax.pipeline import Context

    core = PIPELINE.run(RUN, ATTENTION, Context())
    schedule, nests, _ = capture(core, "attend", {"B": 1, "T": 256}, "f32")
    machine = dataclasses.replace(read_machine(), workers=2)
    groups = [f"f32+lanes{n}+w{w}" for n in (1, 8, 16) for w in (1, 2)]
    groups += [f"f32+lanes16+w{w}+gemm" for w in (1, 2)]
    model = Model(
        lam=1e-6, spawn=0.0, beta_l2=4e11, beta_l3=8e11, beta_mem=1.5e12,
        pi=dict.fromkeys(groups, 1e10), rho=dict.fromkeys(groups, 6e10), q=1.0, u=0.1,
    )  # fmt: skip
    (nest,) = [n for n in nests if n.site == "scores/%2"]
    return schedule, nest, machine, model


def test_the_narrowed_scores_are_priced_on_their_live_triangle(scores):
    from presk_cli.plans import priced
    from presk_kernel.layout_space import points

    _, nest, machine, model = scores
    assert nest.narrowed is not None  # the run computes the live triangle only
    pts = points(nest.kernel, "full", 2)
    assert len(pts) == 242  # the space is the whole product's, as the tutorial's
    assert pts[0].layout.gemm is not None  # point 0: the GEMM statement
    whole = dataclasses.replace(nest, narrowed=None)
    gemms = [pt for pt in pts if pt.layout.gemm is not None]
    assert len(gemms) >= 2  # point 0, its column split (and the pack points, the same)
    for pt in gemms:  # the triangle: about half the square
        assert priced(nest, pt.layout, machine, model) < 0.8 * priced(
            whole, pt.layout, machine, model
        )
    loop_nest = next(pt for pt in pts if pt.layout.gemm is None and pt.why is None)
    assert priced(nest, loop_nest.layout, machine, model) == priced(
        whole, loop_nest.layout, machine, model
    )  # a loop-nest point computes the whole product under a plan: priced whole


def test_a_plan_s_gemm_point_runs_on_the_live_triangle(scores):
    """Point 0 in a plan lowers the scores to the run's own narrowed GEMM statement, byte
    for byte the kernel a run without a plan compiles on one thread."""
    from presk_kernel.contract import gemm_stop
    from presk_kernel.ir import GemmStmt
    from presk_kernel.layout import lay_out
    from presk_kernel.layout_space import points

    schedule, nest, _, _ = scores
    p0 = points(nest.kernel, "full", 2)[0]
    planned = lay_out(schedule, 1, {nest.site: p0.layout})
    default = lay_out(schedule, 1)
    at = next(i for i, lc in enumerate(schedule.launches) if lc.kernel.site == "scores/%2")
    k = planned.launches[at].kernel
    assert k == default.launches[at].kernel
    (g,) = k.body
    assert isinstance(g, GemmStmt) and gemm_stop(g.gemm, g.nest) is not None
    p1 = next(
        pt
        for pt in points(nest.kernel, "full", 2)
        if pt.layout.gemm is not None and pt.decisions["split"] == [0, 2]
    )
    split = lay_out(schedule, 1, {nest.site: p1.layout})
    (g2,) = split.launches[at].kernel.body
    assert isinstance(g2, GemmStmt) and g2.threads == 2 and gemm_stop(g2.gemm, g2.nest) is not None


def test_a_plan_takes_other_workers_only_where_its_profile_measured_them_faster(scores):
    """The GEMM statement of the default's product on other workers than the default's:
    taken only where the profile timed both and the choice is faster beyond the noise
    (medians apart by more than twice the larger MAD); any other layout is the model's."""
    from presk_cli.plans import departs_measured, laid_as_run, measured_gemms
    from presk_kernel.layout import apply_layout, run_layout
    from presk_kernel.layout_model import gemm_shape
    from presk_kernel.layout_space import points

    _, nest, _, _ = scores
    pts = points(nest.kernel, "full", 2)
    p0 = pts[0]  # the GEMM statement on one worker
    p1 = next(pt for pt in pts if pt.layout.gemm is not None and pt.decisions["split"] == [0, 2])
    one = gemm_shape(laid_as_run(nest, p0.layout))
    two = gemm_shape(laid_as_run(nest, p1.layout))
    default = gemm_shape(apply_layout(nest.narrowed, run_layout(nest.narrowed, 2)))
    assert one[4] is not None and one[:5] == two[:5] and (one[5], two[5]) == (1, 2)
    assert default in (one, two)
    # the departure: the statement on the workers the default does not take
    other, mine, theirs = (p1, two, one) if default == one else (p0, one, two)

    def ok(mine_us: list[float], theirs_us: list[float] | None) -> bool:
        samples = [{"gemm": mine, "times_us": mine_us}]
        samples += [] if theirs_us is None else [{"gemm": theirs, "times_us": theirs_us}]
        return departs_measured(nest, other.layout, 2, measured_gemms(samples))

    assert ok([10.0, 11.0, 10.0], [20.0, 21.0, 20.0])  # faster beyond the noise: taken
    assert not ok([20.0, 21.0, 20.0], [10.0, 11.0, 10.0])  # slower: the default
    assert not ok([10.0, 30.0, 10.0, 30.0, 16.0], [20.0, 5.0, 20.0, 21.0, 20.0])  # the noise
    assert not ok([10.0, 11.0, 10.0], None)  # the default's workers not timed: the default
    default_pt = p0 if other is p1 else p1
    assert departs_measured(nest, default_pt.layout, 2, {})  # the default itself
    loop_nest = next(pt for pt in pts if pt.layout.gemm is None and pt.why is None)
    assert departs_measured(nest, loop_nest.layout, 2, {})  # not a worker count: the model's


def test_bench_space_gemm_times_the_gemm_statement_alone(tmp_path):
    out = tmp_path / "layout.json"
    r = presk(
        "bench", "experiments/gemm.psk", "--entry", "thin", "--dim", "M=64", "--dim", "K=64",
        "--dim", "N=64", "--realize", "f32", "--calibrate", out, "--space", "gemm",
        "--repeat", "2",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    shapes = [s["gemm"] for s in doc["samples"]]
    workers = doc["machine"]["workers"]
    assert shapes[0] == ["f32", 64, 64, 64, None, 1]  # point 0: the statement on one worker
    assert [s[5] for s in shapes[1:]] == sorted({w for w in (workers // 2, workers) if w > 1})
    assert f"-- {len(shapes)} layouts timed (0 ill-formed at these shapes)" in r.stdout
    bad = json.loads(out.read_text())
    bad["samples"][0]["gemm"] = ["f32", 64, "64", 64, None, 1]
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text(json.dumps(bad))
    r = presk(
        "plan", ATTENTION, "--entry", "attend", "--dim", "B=1", "--dim", "T=8",
        "--realize", "f32", "--profile", corrupt, "--out", tmp_path / "plan.json",
    )  # fmt: skip
    assert r.returncode == 1 and "[E7120]" in r.stderr and "gemm" in r.stderr
    assert not (tmp_path / "plan.json").exists()


def test_p_reads_the_0_6_0_default_timed_beside_a_gemm_statement_s_space(tmp_path):
    """Statement P (L1090): where point 0 is the GEMM statement, the day records the 0.6.0
    default (the loop nest point 0's decisions name) and P is its time over the best."""

    def day(folder, old_us):
        pts = [point(0, {"tile": "[4, 16]"}, 1.0, [1000.0] * 7)]
        pts.append(point(1, {"tile": "[1, 4]"}, 2.0, [1500.0] * 7))
        d = write_day(folder, [("gemm/%2", "contraction", pts)], entry="gemm", dims={"N": 1024})
        doc = json.loads((d / "day.json").read_text())
        if old_us is not None:
            old = point(0, {"tile": "[4, 16]"}, 9.0, [old_us] * 7)
            doc["nests"][0]["default_060"] = {k: v for k, v in old.items() if k != "point"}
        (d / "day.json").write_text(json.dumps(doc))
        return d

    def p_row(d1, d2):
        r = presk("rank", d1, d2, "--entry", "gemm", "--out", tmp_path / "r.md")
        assert r.returncode == 0, r.stderr
        line = next(x for x in r.stdout.splitlines() if x.startswith("| P |"))
        return [c.strip() for c in line.strip("|").split(" | ")][2:]

    assert p_row(day(tmp_path / "a1", 45000.0), day(tmp_path / "a2", 45000.0)) == [
        "`gemm/%2` 45.00× (the 0.6.0 default 45000.0 µs, the best 1000.0 µs)",
        "**holds**",
    ]
    assert p_row(day(tmp_path / "b1", 2000.0), day(tmp_path / "b2", 2000.0))[1] == "**fails**"
    assert p_row(day(tmp_path / "c1", 2000.0), day(tmp_path / "c2", None)) == [
        "—",
        "not measured: one day has no 0.6.0 default",
    ]
    bad = day(tmp_path / "d1", 2000.0)
    doc = json.loads((bad / "day.json").read_text())
    doc["nests"][0]["default_060"]["times_us"] = ["fast"]
    (bad / "day.json").write_text(json.dumps(doc))
    r = presk(
        "rank", bad, day(tmp_path / "d2", 2000.0), "--entry", "gemm", "--out", tmp_path / "x.md"
    )
    assert r.returncode == 1 and "[E7124]" in r.stderr and "default_060" in r.stderr


def test_autotune_times_the_0_6_0_default_beside_a_gemm_statement(tmp_path):
    """The 0.6.0 default of a contraction whose point 0 is the GEMM statement: a loop nest
    with point 0's tile, no lanes, one worker, no pack, checked with point 0's bits."""
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_cli.plans import capture
    from presk_kernel.layout_space import default_060, describe, points
    from presk_syntax.pipeline import Context

    core = PIPELINE.run(RUN, "experiments/gemm.psk", Context())
    _, (nest,), _ = capture(core, "gemm", {"N": 64}, "f32")
    p0 = points(nest.kernel, "small", 2)[0]
    old = default_060(nest.kernel)
    assert p0.layout.gemm is not None and old is not None
    assert (old.gemm, old.pack, old.lanes, old.split) == (None, (), None, None)
    assert old.tiles == p0.layout.tiles
    assert describe(nest.kernel, old).startswith("tiled, tile [4, 16], kblock none, order IJ")
    _, (small,), _ = capture(core, "gemm", {"N": 8}, "f32")  # below PACK_AT: a loop nest
    assert default_060(small.kernel) is None


def test_autotune_records_the_0_6_0_default_and_statement_l_holds(tmp_path, monkeypatch):
    """In process, point 0 alone of a product the GEMM statement takes (the space cut to it,
    to keep the test light): the day records its 0.6.0 default beside it, with point 0's
    bits, and `presk rank` on the day says L holds."""
    from click.testing import CliRunner
    from presk_cli.planning import autotune
    from presk_kernel import layout_space
    from presk_kernel.layout_model import Model, Profile, read_machine, save_profile

    groups = [f"f32+lanes{n}+w{w}" for n in (1, 8, 16) for w in (1, 2)]
    groups += [f"f32+lanes16+w{w}+gemm" for w in (1, 2)]
    model = Model(
        lam=1e-6, spawn=0.0, beta_l2=4e11, beta_l3=8e11, beta_mem=1.5e12,
        pi=dict.fromkeys(groups, 1e10), rho=dict.fromkeys(groups, 6e10), q=1.0, u=0.1,
    )  # fmt: skip
    profile = tmp_path / "layout.json"
    save_profile(Profile(read_machine(), [], model), str(profile))
    real = layout_space.points
    monkeypatch.setattr(
        layout_space, "points", lambda k, space, workers: real(k, space, workers)[:1]
    )
    day = tmp_path / "day"
    dims = ["--dim", "M=32", "--dim", "K=32", "--dim", "N=32"]
    r = CliRunner().invoke(autotune, ["experiments/gemm.psk", "--entry", "thin", *dims,
                           "--realize", "f32", "--profile", str(profile), "--interp",
                           "--out", str(day)])  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads((day / "day.json").read_text())
    (nest,) = doc["nests"]
    old = nest["default_060"]
    assert old["text"].startswith("tiled, tile [4, 16], kblock none, order IJ, lanes 1")
    assert old["text"].endswith("split none, no pack")
    assert len(old["times_us"]) == 7 and old["same_bits"] is True
    (p0,) = [json.loads(x) for x in (day / nest["file"]).read_text().splitlines()]
    assert p0["text"].endswith("pack") and p0["same_bits"] is True
    out = tmp_path / "rank.md"
    r = presk("rank", day, day, "--entry", "thin", "--out", out)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("| L |"))
    assert line.endswith("| **holds** |")
