"""`presk quantize` (spec L67, L1266; docs/precision.md, "Quantised weights"): the scheme's
properties, the gap in its two parts (the weights' rounding, measured again by running the
written weights on the exact interpreter; the arithmetic), and its diagnostics."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import numpy as np
import pytest
from helpers import presk
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from presk_kernel.quant import QMAX, quantise

LOSS = ("tutorial/07_train.psk",)
RUN = ("run", *LOSS, "--entry", "loss", "--dim", "B=4", "--json")

weights = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=0, max_dims=3, max_side=5),
    elements=st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False),
)


@settings(max_examples=200, deadline=None)
@given(w=weights, scheme=st.sampled_from(sorted(QMAX)))
def test_the_scheme(w, scheme):
    x = quantise(w, scheme)
    qmax = QMAX[scheme]
    assert x.q.shape == w.shape and np.all(np.abs(x.q.astype(int)) <= qmax)
    assert x.scales.dtype == np.float32 and np.all(x.scales > 0)
    # one scale per channel: every axis but the summed one (second to last), or one
    want = (*w.shape[:-2], 1, w.shape[-1]) if w.ndim >= 2 else (1,) * w.ndim
    assert x.scales.shape == want
    s = np.broadcast_to(x.scales.astype(np.float64), w.shape)
    assert np.all(np.abs(x.dequantised - w) <= s / 2 * (1 + 2.0**-50))
    for q, sc, d in zip(x.q.ravel(), s.ravel(), x.dequantised.ravel(), strict=True):
        assert Fraction(int(q)) * Fraction(float(sc)) == Fraction(float(d))  # exact in f64


def test_a_channel_of_zeros():
    x = quantise(np.zeros((3, 2)), "int4")
    assert np.all(x.scales == 1) and np.all(x.dequantised == 0)


@pytest.fixture(scope="module")
def envelope(tmp_path_factory):
    out = tmp_path_factory.mktemp("env") / "tut_env.json"
    r = presk("calibrate", "--precision", *LOSS, "--entry", "loss", "--dim", "B=4", "--out", out)
    assert r.returncode == 0, r.stderr
    return out


def realization(tmp_path, quant, default="f32"):
    path = tmp_path / "q.json"
    doc = {"presk": "realization", "version": 1, "default": default, "quant": quant}
    path.write_text(json.dumps(doc, ensure_ascii=False))
    return f"@{path}"


def _exact(*extra):
    r = presk(*RUN, *extra)
    assert r.returncode == 0, r.stderr
    return Fraction(json.loads(r.stdout)["result"])


@pytest.mark.parametrize("scheme", ["int8", "int4"])
def test_the_two_parts(envelope, tmp_path, scheme):
    out = tmp_path / "q.psk.d"
    r = presk(
        "quantize", *LOSS, "--precision", envelope, "--out", out,
        "--realize", realization(tmp_path, {"blocks.proj.w": scheme}),
    )  # fmt: skip
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(
        rf"presk quantize: `loss` under @\S+: 1 path\(s\) quantised \({int(scheme == 'int8')}"
        rf" int8, {int(scheme == 'int4')} int4\), 12 per-channel scales",
        lines[0],
    )
    # 48 weights in 8 or 4 bits and 12 binary32 scales, the other 28 reals in f32
    at_rest = 48 * (1 if scheme == "int8" else 0.5) + 12 * 4 + 28 * 4
    assert lines[1] == f"  weights     {at_rest:.4e} bytes at rest against 6.0800e2 in f64".replace(
        "e+02", "e2"
    )
    part = {
        k: float(re.search(rf"^  {k} +(\S+)", r.stdout, re.M).group(1))
        for k in ("rounding", "arithmetic", "total")
    }
    assert part["total"] <= part["rounding"] + part["arithmetic"] + 1e-15
    assert part["total"] >= abs(part["rounding"] - part["arithmetic"]) - 1e-15
    assert 0 < part["arithmetic"] < 1e-5 < part["rounding"]  # f32's against int8's or int4's
    # the weights written run on the exact interpreter to the rounding part
    moved = abs(_exact("--weights", str(out)) - _exact())
    assert float(moved) == pytest.approx(part["rounding"], rel=1e-3)
    assert lines[-1] == f"presk quantize: wrote {out} — the dequantised weights (--weights {out})"


def test_int4_rounds_more_than_int8(envelope, tmp_path):
    gaps = {}
    for scheme in ("int8", "int4"):
        r = presk(
            "quantize", *LOSS, "--precision", envelope,
            "--realize", realization(tmp_path, {"blocks.proj.w": scheme}, "f64"),
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        gaps[scheme] = float(re.search(r"^  rounding +(\S+)", r.stdout, re.M).group(1))
    assert gaps["int4"] > gaps["int8"] > 0


@pytest.mark.parametrize(
    "quant, code",
    [
        ({"blocks.proj.w": "int3"}, "E7036"),
        ({"nowhere.w": "int8"}, "E7038"),
        ({}, "E7141"),
    ],
)
def test_a_bad_quant_map_writes_nothing(envelope, tmp_path, quant, code):
    out = tmp_path / "q.psk.d"
    r = presk(
        "quantize", *LOSS, "--precision", envelope, "--out", out,
        "--realize", realization(tmp_path, quant),
    )  # fmt: skip
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.startswith(f"[{code}] Error: ") and "Traceback" not in r.stderr
    assert not out.exists()


def test_a_bad_envelope_writes_nothing(envelope, tmp_path):
    out = tmp_path / "q.psk.d"
    q = realization(tmp_path, {"blocks.proj.w": "int8"})
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    for file, env, code in ((LOSS[0], bad, "E7100"), ("tutorial/06_tower.psk", envelope, "E7101")):
        r = presk("quantize", file, "--precision", env, "--out", out, "--realize", q)
        assert (r.returncode, r.stdout) == (1, "")
        assert r.stderr.startswith(f"[{code}] Error: ") and not out.exists()
    (tmp_path / "file").write_text("")  # a path under a regular file cannot be written
    under = tmp_path / "file" / "q"
    r = presk("quantize", *LOSS, "--precision", envelope, "--realize", q, "--out", under)
    assert (r.returncode, r.stdout) == (1, "") and r.stderr.startswith("[E7142] Error: ")
