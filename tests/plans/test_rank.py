"""`presk rank`: the recorded fixture's report byte for byte, each statement's verdict rule on
days built to make it hold and fail, the per-class figures on a hand-checked nest, and bad
days refused with their codes, writing nothing."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from helpers import ROOT, presk

sys.path.insert(0, str(Path(__file__).resolve().parent))
from days import point, write_day  # noqa: E402

FIXTURE = Path("tests/plans/fixtures/rank")


def _rank(tmp_path: Path, one: Path, two: Path, entry: str = "attend"):
    out = tmp_path / "report.md"
    r = presk("rank", one, two, "--entry", entry, "--out", out)
    return r, out


def _row(report: str, letter: str) -> list[str]:
    line = next(x for x in report.splitlines() if x.startswith(f"| {letter} |"))
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_the_recorded_days_give_the_recorded_report_byte_for_byte(tmp_path):
    out = tmp_path / "r.md"
    r = presk("rank", FIXTURE / "day1", FIXTURE / "day2", "--entry", "attend", "--out", out)
    assert r.returncode == 0, r.stderr
    expected = (ROOT / FIXTURE / "report.md").read_text()
    assert r.stdout == expected
    assert out.read_text() == expected
    # the spec's sections, in its order, with its headers
    heads = [x for x in expected.splitlines() if x.startswith("## ")]
    assert heads == [
        "## Statements (plan 0.7.0 §3.7; Q, plan 0.8.0 §3.6)",
        "## Statement Q, per contraction nest",
        "## Per decision class",
    ]


def _spread(t: float) -> list[float]:
    """Seven times of median t and median absolute deviation 1."""
    return [t - 2, t - 1, t - 1, t, t + 1, t + 1, t + 2]


def _tiles(preds, times, u=0.4, times2=None, kind="contraction"):
    pts = [point(i, {"tile": f"[{i}, 4]"}, p, _spread(t)) for i, (p, t) in
           enumerate(zip(preds, times, strict=True))]  # fmt: skip
    pts2 = [point(i, {"tile": f"[{i}, 4]"}, p, _spread(t)) for i, (p, t) in
            enumerate(zip(preds, times2 or times, strict=True))]  # fmt: skip
    return [("e/%1", kind, pts)], [("e/%1", kind, pts2)], u


def _days(tmp_path, made, **kw):
    one, two, u = made
    d1 = write_day(tmp_path / "d1", one, u=u, **kw)
    d2 = write_day(tmp_path / "d2", two, u=u, **kw)
    return d1, d2


def _class(report: str, cls: str) -> list[str]:
    line = next(x for x in report.splitlines() if x.startswith(f"| {cls} |"))
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_the_per_class_figures_worked_by_hand(tmp_path):
    # p2 and p3 are 0.5 apart with a MAD of 1 each: not distinguished; the five other pairs
    # are. The model orders p1 above p2 (20 > 15) where p1 is faster: one wrong of five. At
    # u = 0.4 that pair is undecided (20/15 = 1.33 ≤ 1.4), the others are not (≥ 1.5).
    d1, d2 = _days(tmp_path, _tiles([10, 20, 15, 40], [100, 200, 300, 300.5]))
    r, _ = _rank(tmp_path, d1, d2, "attend")
    assert r.returncode == 0, r.stderr
    assert _class(r.stdout, "tile") == [
        "tile", "6", "5", "80.0 %", "100.0 %", "20.0 %", "0.0 %",
    ]  # fmt: skip
    assert "`e/%1` 80.0 % of 5" in _row(r.stdout, "M")[2]


def test_a_pair_of_opposite_signs_on_the_two_days_is_not_distinguished(tmp_path):
    d1, d2 = _days(tmp_path, _tiles([1, 2], [100, 200], times2=[200, 100]))
    r, _ = _rank(tmp_path, d1, d2)
    assert _class(r.stdout, "tile") == ["tile", "1", "0", "—", "—", "—", "—"]


def test_a_pair_predicted_equal_is_tied_and_not_right(tmp_path):
    d1, d2 = _days(tmp_path, _tiles([5, 5], [100, 200]))
    r, _ = _rank(tmp_path, d1, d2)
    assert _class(r.stdout, "tile") == ["tile", "1", "1", "0.0 %", "—", "100.0 %", "100.0 %"]


def test_kblock_is_counted_with_order(tmp_path):
    pts = [point(0, {"order": "IJK", "kblock": 128}, 1, _spread(100)),
           point(1, {"order": "IJK", "kblock": 32}, 2, _spread(200)),
           point(2, {"order": "KIJ", "kblock": 32}, 3, _spread(300))]  # fmt: skip
    d1, d2 = _days(tmp_path, ([("e/%1", "contraction", pts)], [("e/%1", "contraction", pts)], 0))
    r, _ = _rank(tmp_path, d1, d2)
    assert _class(r.stdout, "order")[:4] == ["order", "2", "2", "100.0 %"]
    assert "| kblock |" not in r.stdout


def test_m_holds_on_a_thousand_pairs_ranked_right_and_fails_ranked_wrong(tmp_path):
    n = 46  # 1035 pairs, every one distinguished
    times = [100.0 + 10 * i for i in range(n)]
    d1, d2 = _days(tmp_path / "a", _tiles([float(i + 1) for i in range(n)], times, u=0.0))
    r, _ = _rank(tmp_path, d1, d2)
    assert _row(r.stdout, "M")[2:] == ["`e/%1` 100.0 % of 1035", "**holds**"]
    wrong = [float(n - i) for i in range(n)]
    d1, d2 = _days(tmp_path / "b", _tiles(wrong, times, u=0.0))
    r, _ = _rank(tmp_path, d1, d2)
    assert _row(r.stdout, "M")[2:] == ["`e/%1` 0.0 % of 1035", "**fails**"]
    few = _tiles([1.0, 2.0], [100.0, 200.0])
    d1, d2 = _days(tmp_path / "c", few)
    r, _ = _rank(tmp_path, d1, d2)
    assert _row(r.stdout, "M")[3] == "inconclusive: fewer than 10³ distinguished pairs"


def test_n_is_the_sweep_over_the_static_side(tmp_path):
    made = _tiles([1.0, 2.0], [100.0, 200.0])
    d1, d2 = _days(tmp_path / "a", made, sweep_s=20.0, costed_s=0.01, captured_s=0.01)
    r, _ = _rank(tmp_path, d1, d2)
    cells = _row(r.stdout, "N")
    assert cells[2] == (
        "B=16,T=256 f32 2000× (1000× with the entry run); B=16,T=256 f32 2000× (1000× with the "
        "entry run)"
    )
    assert cells[3] == "**holds**"
    d1, d2 = _days(tmp_path / "b", made, sweep_s=9.99, costed_s=0.01, captured_s=0.0)
    r, _ = _rank(tmp_path, d1, d2)
    assert _row(r.stdout, "N")[3] == "**fails**"


def test_o_is_the_picks_time_over_the_best(tmp_path):
    # the model picks p0 (its least prediction); p1 is the fastest measured
    d1, d2 = _days(tmp_path / "a", _tiles([1.0, 2.0], [120.0, 100.0]))
    r, _ = _rank(tmp_path, d1, d2)
    assert _row(r.stdout, "O")[2:] == ["`e/%1` 1.20", "**holds**"]
    d1, d2 = _days(tmp_path / "b", _tiles([1.0, 2.0], [130.0, 100.0]))
    r, _ = _rank(tmp_path, d1, d2)
    assert _row(r.stdout, "O")[2:] == ["`e/%1` 1.30", "**fails**"]


def test_p_is_measured_on_the_gemm_at_1024_in_f32(tmp_path):
    gemm = {"entry": "gemm", "dims": {"N": 1024}}
    d1, d2 = _days(tmp_path / "a", _tiles([3.0, 1.0], [3300.0, 1000.0]), **gemm)
    r, _ = _rank(tmp_path, d1, d2, "gemm")
    cells = _row(r.stdout, "P")
    assert cells[2].startswith("`e/%1` 3.30× (point 0 3300.0 µs, the best 1000.0 µs)")
    assert cells[3] == "**holds**"
    d1, d2 = _days(tmp_path / "b", _tiles([3.0, 1.0], [2900.0, 1000.0]), **gemm)
    r, _ = _rank(tmp_path, d1, d2, "gemm")
    assert _row(r.stdout, "P")[3] == "**fails**"
    d1, d2 = _days(tmp_path / "c", _tiles([3.0, 1.0], [3300.0, 1000.0]))
    r, _ = _rank(tmp_path, d1, d2)
    assert _row(r.stdout, "P")[2:] == ["—", "not measured"]


def _q_row(report: str) -> list[str]:
    line = next(x for x in report.splitlines() if x.startswith("| `e/%1` |"))
    return [c.strip() for c in line.strip("|").split(" | ")]


def test_q_worked_by_hand(tmp_path):
    # 10 points of 100 µs … 1000 µs, 8 launches each (1 warm-up, 7 timed); one candidate
    # (p0, predicted 1, the others ≥ 2 at u = 0.1), which is also the fastest: regret 1.00.
    # Launched: 8 × 5500 µs = 0.044 s; the sweep 0.144 s leaves 0.1 s outside, 0.01 s a
    # point. Measured: p0 0.0008 + 0.01; all 0.044 + 0.1. Cost (0.0108 + 0.001)/0.144 = 8.2 %
    # holds; the kernel share 7/70 = 10.00 %.
    times = [100.0 * (i + 1) for i in range(10)]
    preds = [1.0] + [2.0 + i for i in range(9)]
    made = _tiles(preds, times, u=0.1)
    d1, d2 = _days(tmp_path / "a", made, sweep_s=0.144, costed_s=0.001)
    r, _ = _rank(tmp_path, d1, d2)
    assert r.returncode == 0, r.stderr
    assert _q_row(r.stdout) == [
        "`e/%1`", "B=16,T=256", "f32", "10", "1", "1.00", "8.2 % / 8.2 %",
        "0.00, 0.01, 0.1 / 0.00, 0.01, 0.1", "10.00 % / 10.00 %", "**holds**",
    ]  # fmt: skip
    assert _row(r.stdout, "Q")[3] == "**holds**"
    # a costlier static side: (0.0108 + 0.01)/0.144 = 14.4 % fails
    d1, d2 = _days(tmp_path / "b", made, sweep_s=0.144, costed_s=0.01)
    r, _ = _rank(tmp_path, d1, d2)
    assert _q_row(r.stdout)[6] == "14.4 % / 14.4 %"
    assert _row(r.stdout, "Q")[3] == "**fails**"
    # the candidate 1.5× the best: the regret fails
    preds = [2.0, 1.0] + [3.0 + i for i in range(8)]
    d1, d2 = _days(tmp_path / "c", _tiles(preds, [150.0, 100.0] + times[2:], u=0.1),
                   sweep_s=0.144, costed_s=0.001)  # fmt: skip
    r, _ = _rank(tmp_path, d1, d2)
    assert _q_row(r.stdout)[5] == "1.00"
    preds = [1.0, 2.0] + [3.0 + i for i in range(8)]
    d1, d2 = _days(tmp_path / "d", _tiles(preds, [150.0, 100.0] + times[2:], u=0.1),
                   sweep_s=0.144, costed_s=0.001)  # fmt: skip
    r, _ = _rank(tmp_path, d1, d2)
    assert _q_row(r.stdout)[5] == "1.50" and _q_row(r.stdout)[-1] == "**fails**"


def test_l_fails_on_a_differing_output_and_waits_for_the_interpreter(tmp_path):
    made = _tiles([1.0, 2.0], [100.0, 200.0])
    d1, d2 = _days(tmp_path / "a", made, differing=1)
    r, _ = _rank(tmp_path, d1, d2)
    cells = _row(r.stdout, "L")
    assert cells[2].startswith("2 of 2 points of day 1 checked on the interpreter; 2 outputs")
    assert cells[3] == "**fails**"
    d1, d2 = _days(tmp_path / "b", made, checked=1)
    r, _ = _rank(tmp_path, d1, d2)
    assert _row(r.stdout, "L")[3] == "inconclusive: not every point checked on the interpreter"


@pytest.mark.parametrize(
    ("spoil", "code"),
    [
        (lambda d: (d / "day.json").write_text("{not json"), "E7124"),
        (lambda d: (d / "e__1.jsonl").write_text('{"point": 0}\n'), "E7124"),
        (lambda d: (d / "e__1.jsonl").unlink(), "E7124"),
        (lambda d: shutil.rmtree(d), "E7124"),
        (
            lambda d: (d / "day.json").write_text('{"presk": "autotune-day", "version": 9}'),
            "E7124",
        ),  # fmt: skip
    ],
)
def test_a_bad_day_is_refused_and_nothing_is_written(tmp_path, spoil, code):
    d1, d2 = _days(tmp_path, _tiles([1.0, 2.0], [100.0, 200.0]))
    spoil(d2)
    r, out = _rank(tmp_path, d1, d2)
    assert r.returncode == 1 and f"[{code}]" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == "" and not out.exists()


def test_days_of_another_entry_or_other_nests_are_refused(tmp_path):
    d1, d2 = _days(tmp_path / "a", _tiles([1.0, 2.0], [100.0, 200.0]))
    r, out = _rank(tmp_path, d1, d2, "scores")
    assert r.returncode == 1 and "[E7125]" in r.stderr and not out.exists()
    other = write_day(tmp_path / "b", [("e/%2", "contraction", [point(0, {}, 1.0, [1.0])])])
    r, out = _rank(tmp_path, d1, other)
    assert r.returncode == 1 and "[E7125]" in r.stderr and "e/%2 (1 points)" in r.stderr
    dims = write_day(tmp_path / "c", _tiles([1.0, 2.0], [100.0, 200.0])[0], dims={"B": 1})
    r, out = _rank(tmp_path, d1, dims)
    assert r.returncode == 1 and "[E7125]" in r.stderr and "`dims`" in r.stderr


def test_a_report_that_cannot_be_written_is_e7127(tmp_path):
    d1, d2 = _days(tmp_path, _tiles([1.0, 2.0], [100.0, 200.0]))
    (tmp_path / "file").write_text("")
    r = presk("rank", d1, d2, "--entry", "attend", "--out", tmp_path / "file" / "r.md")
    assert r.returncode == 1 and "[E7127]" in r.stderr and r.stdout == ""


def test_the_specifications_tile_and_order_rows(tmp_path):
    """Days built to the spec's counts (L1108–L1111): tile 112 close pairs, 67 distinguished,
    61 right (91.0 %), 30 undecided (44.8 %), 35 of the 37 decided right (94.6 %); order 36,
    7 distinguished, 3 right, every one undecided."""

    def pair(cls, a, b, distinguished, right, undecided):
        ta, tb = (100.0, 200.0) if distinguished else (100.0, 100.5)
        pa = 10.0
        pb = pa * (1.05 if undecided else 2.0)
        if not right:
            pb = pa / (1.05 if undecided else 2.0)
        return [point(0, {cls: a}, pa, _spread(ta)), point(1, {cls: b}, pb, _spread(tb))]

    nests = []
    plan = [("tile", 45, False, True, False), ("tile", 35, True, True, False),
            ("tile", 2, True, False, False), ("tile", 26, True, True, True),
            ("tile", 4, True, False, True),
            ("order", 29, False, True, False), ("order", 3, True, True, True),
            ("order", 4, True, False, True)]  # fmt: skip
    for cls, n, dist, right, und in plan:
        for _ in range(n):
            a, b = ("[1, 4]", "[4, 4]") if cls == "tile" else ("IJ", "JI")
            nests.append((f"n{len(nests)}/%1", "contraction", pair(cls, a, b, dist, right, und)))
    d1 = write_day(tmp_path / "d1", nests, u=0.1)
    d2 = write_day(tmp_path / "d2", nests, u=0.1)
    r, _ = _rank(tmp_path, d1, d2)
    assert r.returncode == 0, r.stderr
    rows = r.stdout.split("## Per decision class\n\n")[1].splitlines()
    assert rows[2:] == [
        "| order | 36 | 7 | 42.9 % | — | 100.0 % | 0.0 % |",
        "| tile | 112 | 67 | 91.0 % | 94.6 % | 44.8 % | 0.0 % |",
    ]


def test_two_sweeps_of_presk_autotune_are_ranked(tmp_path):
    """The days `presk autotune` writes (the tutorial's attention, small) are what rank
    reads: statement L holds, and the same days give the same report twice."""
    from presk_kernel.layout_fit import fit
    from presk_kernel.layout_model import Counts, Profile, read_machine, save_profile

    groups = [f"f32+lanes{ln}+w{w}" for ln in (1, 8) for w in (1, 2)]
    cs = [Counts(1e3 * (i + 1), 5e2 * (i % 3 + 1), 1e3 * (i % 2), 0.0, 1e3, g, int(g[-1]))
          for i, g in enumerate(groups * 3)]  # fmt: skip
    profile = tmp_path / "p.json"
    save_profile(Profile(read_machine(), [], fit(cs, [1e-6 * (1 + c.work / 1e3) for c in cs])),
                 str(profile))  # fmt: skip
    args = ("tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=4",
            "--realize", "f32", "--space", "small", "--profile", profile)  # fmt: skip
    one = presk("autotune", *args, "--interp", "--out", tmp_path / "day1")
    assert one.returncode == 0, one.stderr
    two = presk("autotune", *args, "--out", tmp_path / "day2")
    assert two.returncode == 0, two.stderr
    r, out = _rank(tmp_path, tmp_path / "day1", tmp_path / "day2")
    assert r.returncode == 0, r.stderr
    assert _row(r.stdout, "L")[3] == "**holds**"
    again = presk("rank", tmp_path / "day1", tmp_path / "day2", "--entry", "attend", "--out",
                  tmp_path / "again.md")  # fmt: skip
    assert again.stdout == r.stdout == out.read_text()
