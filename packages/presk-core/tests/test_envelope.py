"""presk_core.envelope: the observer's ranges and condition numbers on a hand-made run, the
JSON round trip, and every way a file is not an envelope (E7100)."""

from __future__ import annotations

import json

import gmpy2
import numpy as np
import pytest
from presk_core.envelope import Envelope, EnvelopeError, Observer, Stat, condition, outward


def reals(*xs):
    with gmpy2.context(precision=128):
        return np.array([gmpy2.mpfr(x) for x in xs], dtype=object)


def test_outward_ranges_contain_the_values():
    a = reals("0.1", "-0.3", "2")
    lo, hi = outward(a, 2.0**-108)
    assert lo < -0.3 and hi > 2.0
    assert lo == pytest.approx(-0.3, rel=1e-15) and hi == pytest.approx(2.0, rel=1e-15)
    assert outward(reals(), 0.0) == (float("inf"), float("-inf"))  # empty: changes nothing


def test_condition_numbers():
    value, abs_sum = reals(1, -2, 0, 0), reals(3, 2, 0, 4)
    top, worst = condition(value, abs_sum, 0.0)
    assert top >= 4 and worst == float("inf")  # a sum that cancels to 0 exactly
    top, worst = condition(reals(1, -2, 0), reals(3, 2, 0), 0.0)
    assert worst == 3.0  # 3/1; the empty sum 0/0 has condition 1


def test_the_observer_keeps_each_sites_range_over_calls():
    o = Observer(0.0)
    o("f/%1", reals(1, 2))
    o("f/%1", reals(-5))
    o("f/%2", {"w": reals(7)})
    o("f/%3", reals(3), reals(4))
    o("f/%4", np.array([1, 2]))  # indices: no reals, no site
    lo, hi = o.stats["f/%1"].lo, o.stats["f/%1"].hi
    assert lo <= -5.0 and hi >= 2.0 and (lo, hi) == pytest.approx((-5.0, 2.0), rel=1e-15)
    assert o.stats["f/%2"].kind == "tree" and o.stats["f/%2"].max == pytest.approx(7.0)
    assert o.stats["f/%3"].cond == pytest.approx(4 / 3)
    assert "f/%4" not in o.stats


def envelope() -> Envelope:
    return Envelope(
        "ab" * 32, "f.psk", "loss", {"B": 4}, 128, 2, 0, None, 1.5,
        {"loss/%1": Stat(-1.0, 2.0), "loss/%2": Stat(0.0, 3.0, "tensor", 3.5, float("inf"))},
        {"x": Stat(-1.0, 1.0)}, {"T/%7": "T/%4"},
    )  # fmt: skip


def test_the_json_round_trip(tmp_path):
    e = envelope()
    path = tmp_path / "env.json"
    e.write(str(path))
    back = Envelope.read(str(path))
    assert back.to_json() == e.to_json() and back.source == str(path)
    assert json.loads(path.read_text())["sites"]["loss/%2"]["cond"] == "inf"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(presk="realization"),
        lambda d: d.update(version=2),
        lambda d: d.pop("sites"),
        lambda d: d.update(bits="many"),
        lambda d: d["sites"]["loss/%1"].update(lo=[1]),
        lambda d: d.update(dims=[4]),
    ],
)
def test_what_is_not_an_envelope(tmp_path, mutate):
    doc = envelope().to_json()
    mutate(doc)
    with pytest.raises(EnvelopeError) as e:
        Envelope.from_json(doc, "env.json")
    assert e.value.code == "E7100"
