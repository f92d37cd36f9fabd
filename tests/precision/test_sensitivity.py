"""`presk dump --stage sensitivity` (spec L487, docs/precision.md "Sensitivities"): the
output's own site moves it by its own magnitude, a site of zeros by nothing, and a
sensitivity predicts the order of the gap a site rounded alone in bf16 measures."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest
from helpers import presk

LOSS = ("tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4")
ROW = re.compile(r"^  (\S+) +(\S+) +(\S+) +(\S+)$")


@pytest.fixture(scope="module")
def table():
    r = presk("dump", LOSS[0], "--stage", "sensitivity", *LOSS[1:])
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == (
        "sensitivity of `loss` at B = 4: 26 sites, one reverse sweep"
        " (the output's first-order move per unit relative rounding)"
    )
    rows = {m.group(1): [float(x) for x in m.groups()[1:]] for m in map(ROW.match, lines[2:])}
    assert len(rows) == 26
    return rows


def test_the_outputs_own_site(table):
    run = presk("run", *LOSS, "--json")
    loss = float(Fraction(json.loads(run.stdout)["result"]))
    s, f32, bf16 = table["loss/%7"]
    assert s == pytest.approx(loss, rel=1e-3)
    assert (f32, bf16) == pytest.approx((s * 2.0**-24, s * 2.0**-8), rel=1e-3)


def test_a_site_of_zeros_moves_nothing(table):
    assert table["Linear.apply/%4"][0] == 0.0  # θ.b, zeros from the initializer


def test_sensitivities_rank_like_the_measured_gaps(table, tmp_path):
    # two narrowable sites, rounded alone in bf16 on the kernel interpreter: the one the
    # table ranks higher moves the output more, by the order of magnitude u·S says
    def gap(site):
        path = tmp_path / "r.json"
        path.write_text(json.dumps({"presk": "realization", "version": 1, "sites": {site: "bf16"}}))
        run = ("run", *LOSS, "--digits", "17")
        got = presk(*run, "--backend", "kernel", "--realize", f"@{path}").stdout
        exact = presk(*run).stdout
        return abs(float(got.split("=")[1]) - float(exact.split("=")[1]))

    # (the norm's mean, RMSNorm.apply/%4, is fused into %7's kernel since issue 26's
    # epilogues: not a narrowable site; the first product is)
    high, low = "RMSNorm.apply/%7", "Linear.apply/%3"
    assert table[high][0] > table[low][0] and gap(high) > gap(low)
    assert 0.01 * table[high][2] <= gap(high) <= 10 * table[high][2]


def test_the_entry_is_required():
    r = presk("dump", LOSS[0], "--stage", "sensitivity")
    assert r.returncode == 1 and r.stderr.startswith("[E7001] Error: ")


# ---- the reverse sweep against the forward probes ------------------------------------------

ENTRIES = [
    ("tutorial/07_train.psk", "loss", {"B": 4}),
    ("tutorial/02_norm.psk", "RMSNorm{4}.apply", {"batch": 2}),
    ("tutorial/03_attention.psk", "attend", {"B": 2, "T": 3}),
    ("tests/examples/mlp/mlp.psk", "mse", {"D": 3, "B": 2}),
    ("tutorial/06_tower.psk", "Tower.apply", {"batch": 2}),
]


@pytest.mark.parametrize("file, name, dims", ENTRIES, ids=[e[1] for e in ENTRIES])
def test_the_sweep_agrees_with_the_probes(file, name, dims):
    # the probes estimate E[‖Δy‖∞²] from 64 draws of random signs (a relative noise of
    # about 1/√128 per site, more where few elements dominate, and biased up for a tensor
    # output, whose max over elements they take inside the mean): the sweep's exact
    # first-order S is within [0.6, 1.5] of it at every site, and both have the same sites
    from presk_ad.sensitivity import reverse_sensitivities
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_core.interp import Interpreter
    from presk_core.run import entry_inputs, parse_entry
    from presk_core.sensitivity import sensitivities
    from presk_syntax.pipeline import Context

    core = PIPELINE.run(RUN, file, Context())
    entry = parse_entry(name, core, None, dims)
    args = [v for _, _, v in entry_inputs(entry, Interpreter(core, 256), 0, 256)]
    swept, sweeps = reverse_sensitivities(core, entry, args)
    probed = dict(sensitivities(core, entry, args, probes=64))
    assert dict(swept).keys() == probed.keys()
    for site, s in swept:
        p = probed[site]
        if p == 0:
            assert s == 0, site
            continue
        assert 0.6 <= s / p <= 1.5, (site, s, p)
