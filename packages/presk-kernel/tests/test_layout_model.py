"""The layout cost model: the machine line, the counts of laid-out kernels, the fit (known
rates recovered, a useless term vanishing, q chosen), and profiles (refusals with codes)."""

from __future__ import annotations

import json
import math
import re

import pytest
from kernel_entries import contraction_schedule
from presk_kernel.ir import Layout
from presk_kernel.layout_fit import fit, fit_line, nnls, spearman
from presk_kernel.layout_model import (
    Counts,
    Machine,
    Model,
    ModelError,
    Profile,
    combine_terms,
    count_all,
    counts,
    counts_for,
    load_profile,
    parse_combine,
    parse_rules,
    read_machine,
    save_profile,
)

MACHINE = Machine("aarch64", "test", 0, 64 << 10, 512 << 10, 8 << 20, 10, 1, 20, 32, 128)
TILED = Layout(order=("i", "j"), tiles=(("i", 4), ("j", 16)), lanes="j", width=4)


def _kernel(layout: Layout, n: int = 256):
    return contraction_schedule(n, n, n, "f32", layout=layout).launches[0].kernel


def test_the_machine_line_is_the_specifications():
    line = MACHINE.line_text("gemm/%2", "f32")
    assert line == (
        "-- gemm/%2 on cpu0 (f32): L1d 64 KiB, L2 512 KiB, L3 8192 KiB shared by 10, "
        "20 workers, 32 vector registers"
    )
    here = read_machine().line_text("gemm/%2", "f32")
    assert re.fullmatch(
        r"-- gemm/%2 on cpu\d+ \(f32\): L1d \d+ KiB, L2 \d+ KiB, L3 \d+ KiB shared by \d+, "
        r"\d+ workers, \d+ vector registers",
        here,
    )


def test_a_register_tile_saves_loads_and_lanes_divide_the_work():
    plain = counts(_kernel(Layout(order=("i", "j"))), MACHINE)
    tiled = counts(_kernel(TILED), MACHINE)
    n = 256
    assert plain.group == "f32+lanes1+w1" and tiled.group == "f32+lanes4+w1"
    assert plain.loads >= 2 * n**3  # both terms of every fma
    # a 4 × 16 tile in lanes of 4: each step of k loads 4 of A and 16/4 vectors of B for 64
    assert tiled.loads < plain.loads / 4
    assert tiled.work < plain.work / 3
    assert tiled.l2 < plain.l2  # the tile reuses B's lines across its rows


def test_a_split_is_one_workers_share():
    one = counts(_kernel(TILED), MACHINE)
    split = counts(_kernel(Layout(**{**_fields(TILED), "split": "i", "threads": 20})), MACHINE)
    assert split.group == "f32+lanes4+w20" and split.workers == 20
    # 64 tiles of rows among 20 workers: the busiest runs ⌈64/20⌉ = 4 of them
    assert split.work == pytest.approx(one.work * 4 / 64, rel=0.02)


def _fields(layout: Layout) -> dict:
    return {f: getattr(layout, f) for f in Layout.__dataclass_fields__}


def test_the_rules_lines_and_overhead():
    k = _kernel(Layout(order=("j", "i")))
    every = count_all(k, MACHINE)
    assert set(every) == {"lines,overhead", "lines", "overhead", "none"}
    lines, bytes_ = counts_for(every, ("lines",)), counts_for(every, ())
    assert lines.l2 + lines.l3 + lines.mem > bytes_.l2 + bytes_.l3 + bytes_.mem
    assert counts_for(every, ("overhead",)).work > bytes_.work


def test_the_gemm_statement_is_counted():
    """Its vector FMAs, its panels' copies and, under the rule `overhead`, its tiles and
    panels per KC block (MR 4 × NR 8 on 128-bit vectors, KC 256), in its own group."""
    c = counts(_kernel(Layout(order=("i", "j"), pack=(0, 1)), 512), MACHINE)
    assert c.group == "f32+lanes4+w1+gemm"
    tiles, panels, blocks = (512 // 4) * (512 // 8), 512 // 4 + 512 // 8, 2
    assert c.work == 512**3 / 4 + 2 * 512 * 512 / 4 + blocks * (tiles + panels)
    assert c.mem >= 3 * 512 * 512 * 4
    small = counts(_kernel(Layout(order=("i", "j"), pack=(0, 1)), 10), MACHINE)
    assert small.work >= 12 * 16 * 10 / 4  # edge tiles padded to MR × NR


def _synthetic(model: Model, n: int = 60) -> tuple[list[Counts], list[float]]:
    out = []
    for i in range(n):
        g = ("f32+lanes1+w1", "f32+lanes4+w1", "f32+lanes4+w2")[i % 3]
        w = 2 if g.endswith("w2") else 1
        out.append(Counts(1e5 * (1 + i % 7), 3e4 * (1 + i % 5), 1e5 * (i % 4), 5e4 * (i % 3),
                          2e4 * (1 + i % 2), g, w))  # fmt: skip
    return out, [model.predict(c) for c in out]


def _model(q: float) -> Model:
    groups = ("f32+lanes1+w1", "f32+lanes4+w1", "f32+lanes4+w2")
    return Model(
        1e-6, 0.0, 4e10, 2e10, 1e10, dict(zip(groups, (1e10, 4e10, 3e10), strict=True)),
        dict(zip(groups, (5e9, 2e10, 1e10), strict=True)), q,
    )  # fmt: skip


def test_the_fit_recovers_known_rates_in_a_sum():
    truth = _model(1.0)
    cs, t = _synthetic(truth)
    m = fit(cs, t, "sum")
    assert m.q == 1.0 and m.u < 1e-6 and m.spearman > 0.999  # ties of rounding aside
    assert m.lam == pytest.approx(truth.lam, rel=1e-4)
    for g in truth.pi:
        assert m.pi[g] == pytest.approx(truth.pi[g], rel=1e-4)
        assert m.rho[g] == pytest.approx(truth.rho[g], rel=1e-4)


def test_the_pnorm_finds_its_exponent():
    truth = _model(2.0)
    cs, t = _synthetic(truth)
    m = fit(cs, t, "pnorm")
    assert m.q == 2.0 and m.u < 0.02
    assert fit(cs, t, "pnorm").to_dict() == m.to_dict()  # deterministic


def test_a_term_that_only_hurts_vanishes():
    truth = _model(1.0)
    truth.beta_l3 = math.inf
    cs, t = _synthetic(truth)
    m = fit(cs, t, "sum")
    assert m.beta_l3 > 1e15  # effectively ∞: it adds a billionth of the shortest time
    assert max(c.l3 for c in cs) / m.beta_l3 <= 1e-9 * min(t) * 1.0001


def test_the_fit_lines_are_the_specifications_format():
    cs, t = _synthetic(_model(1.0))
    text = fit_line(fit(cs, t, "pnorm", ("lines", "overhead")))
    lines = text.splitlines()
    assert re.fullmatch(
        r"-- fit \(p-norm, q = \d\.\d\d, load term, rules lines,overhead\): λ = \d+\.\d\d µs, "
        r"spawn = \d+\.\d\d µs, β_L2 = \d\.\d{3}e\d+, β_L3 = \d\.\d{3}e\d+, "
        r"β_mem = \d\.\d{3}e\d+ bytes/s",
        lines[0],
    )
    assert lines[1].startswith("--      π[f32+lanes1+w1] = ")
    assert [x.split("[")[1].split("]")[0] for x in lines[1:4]] == [
        "f32+lanes1+w1", "f32+lanes4+w1", "f32+lanes4+w2",
    ]  # fmt: skip
    assert re.fullmatch(
        r"-- uncertainty u = \d\.\d{3} \(median relative residual over 60 samples\), "
        r"Spearman \d\.\d{3}",
        lines[-1],
    )


def test_nnls_and_spearman():
    import numpy as np

    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    x = nnls(a, np.array([1.0, -1.0, 0.0]))
    assert (x >= 0).all() and x[1] == 0
    assert spearman([1, 2, 3], [10, 20, 30]) == 1.0
    assert combine_terms([3.0, 4.0], 2.0) == pytest.approx(5.0)
    assert combine_terms([3.0, 4.0], math.inf) == 4.0


def test_rules_and_forms_are_checked():
    assert parse_rules("lines,overhead") == ("lines", "overhead")
    assert parse_rules("overhead,lines") == ("lines", "overhead")
    assert parse_rules("none") == ()
    for bad in ("lines,lines", "bytes", ""):
        with pytest.raises(ModelError) as e:
            parse_rules(bad)
        assert e.value.code == "E7123"
    with pytest.raises(ModelError):
        parse_combine("mean")


def _sample(c: Counts) -> dict:
    return {
        "nest": "gemm/%2", "operands": [[4, 4], [4, 4]], "type": "f32", "decisions": {},
        "layout": "tiled", "counts": {"lines,overhead": c.to_dict()}, "times_us": [1.0, 2.0],
    }  # fmt: skip


def test_a_profile_round_trips_and_bad_ones_are_refused(tmp_path):
    cs, t = _synthetic(_model(1.0))
    p = Profile(MACHINE, [_sample(c) for c in cs], fit(cs, t))
    path = str(tmp_path / "p.json")
    save_profile(p, path)
    back = load_profile(path)
    assert back.to_json() == p.to_json()
    with pytest.raises(ModelError) as e:
        back.check_machine(Machine(**{**MACHINE.to_dict(), "cpu_model": "other"}), path)
    assert e.value.code == "E7122"
    cases = {
        "E7120": "{not json",
        "E7121": json.dumps({"presk": "layout-profile", "version": 99}),
        "E7128": json.dumps({"presk_profile": 1, "machine": {}}),
    }
    doc = json.loads(p.to_json())
    doc["samples"][0]["times_us"] = [-1]
    cases["E7120 "] = json.dumps(doc)
    for code, text in cases.items():
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(ModelError) as e:
            load_profile(str(bad))
        assert e.value.code == code.strip()
    with pytest.raises(ModelError) as e:
        load_profile(str(tmp_path / "absent.json"))
    assert e.value.code == "E7120"


@pytest.mark.parametrize(
    ("file", "entry", "dims"),
    [
        ("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 16))),
        ("experiments/gemm.psk", "gemm", (("N", 64),)),
    ],
)
def test_every_point_of_every_space_is_counted(file, entry, dims):
    """Each point's laid-out kernel (tiles, blocked folds, two-pass softmaxes, splits) gives
    finite counts, its group the point's lanes and workers."""
    from kernel_entries import lowered
    from presk_kernel.layout import apply_layout, with_gemm
    from presk_kernel.layout_space import points

    schedule, _, _ = lowered(file, entry, dims, "f32")
    seen = 0
    for launch in schedule.launches:
        k = launch.kernel
        for p in points(k, "full", 4):
            if p.why is not None:
                continue
            layout = p.layout if p.layout.gemm else with_gemm(k, p.layout)
            c = counts(apply_layout(k, layout), MACHINE)
            assert all(math.isfinite(x) and x >= 0 for x in c.terms()), (p.text, c)
            assert c.work > 0
            split = p.decisions.get("split")
            assert c.workers == (split[1] if split else 1), (p.text, c)
            if p.decisions.get("lanes", 1) > 1 and not p.decisions.get("pack"):
                assert f"+lanes{p.decisions['lanes']}+" in c.group, (p.text, c)
            seen += 1
    assert seen > 50
