"""The roofline model: work and traffic from a loop nest, the fit, rank correlations, the
profile file (`presk bench --calibrate` itself: tests/opt/test_calibrate_cli.py)."""

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from presk_kernel.ir import Affine, Axis, Buffer, Const, Kernel, Load, Loop, Op, Reduce, Store
from presk_opt import roofline as R

ROOT = Path(__file__).resolve().parents[3]


def _kernel() -> Kernel:
    """out[i] = exp(Σ_j fma x[i, j]·y[j]) + 1, i < 3, j < 5."""
    x = Buffer(0, "f64", (Axis("b", 3), Axis("m", 5)))
    y = Buffer(1, "f32", (Axis("m", 5),))
    out = Buffer(2, "f64", (Axis("b", 3),))
    i, j = Affine.var("i"), Affine.var("j")
    dot = Reduce("acc", "fma", (("j", "m", 5),), (), (Load(0, (i, j)), Load(1, (j,))))
    store = Store(2, (i,), Op("add", (Op("exp", (Op("neg", (Const(0.0, "f64"),)),)),
                                     Const(1.0, "f64"))))  # fmt: skip
    return Kernel("k", "f/%1", (x, y), (out,), (Loop("i", "b", 3, (dot, store)),))


def test_work_counts_each_operation_once_an_iteration() -> None:
    # a row: 5 fma (2 each); add 1, exp 8, neg 1 → 3 × (10 + 10) = 60
    assert R.work(_kernel()) == 3 * (5 * 2 + 1 + R.TRANSCENDENTAL_WORK + 1)


def test_traffic_is_every_buffer_once() -> None:
    assert R.traffic(_kernel()) == 15 * 8 + 5 * 4 + 3 * 8


def test_the_fit_finds_the_constants_of_exact_times() -> None:
    rng = np.random.default_rng(0)
    w = 10 ** rng.uniform(1, 6, 60)
    q = 10 ** rng.uniform(2, 7, 60)
    truth = R.Roofline(2e9, 3e10, 0.2e-6)
    f = R.fit(w, q, truth.seconds(w, q))
    assert abs(math.log10(f.pi / truth.pi)) < 0.02
    assert abs(math.log10(f.beta / truth.beta)) < 0.02
    assert abs(f.lam - truth.lam) < 0.01e-6


def test_spearman() -> None:
    assert R.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert R.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert R.spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(math.sqrt(3) / 2)
    assert math.isnan(R.spearman([1, 1, 1], [1, 2, 3]))
    assert list(R.ranks([5, 1, 5, 2])) == [3.5, 1.0, 3.5, 2.0]


def test_sci_and_the_column() -> None:
    assert R.sci(8.321e8) == "8.321e8" and R.sci(9.1624e-3) == "9.162e-3"
    assert R.kernel_name("kernel pow 2 (%0 : f64[batch: 8, model: 4]) -> %1 : f64[]") == (
        "kernel pow 2 (%0 : f64[batch: 8, model: 4])…"
    )


def _profile() -> R.Profile:
    s = R.Sample("kernel k (…)", "f/%1", 1, 60, 164, 0.25, 7, "a.psk:f", "0123")
    return R.Profile(R.machine("f64"), [s], R.Roofline(1e9, 1e10, 1e-7))


def test_a_profile_is_created_as_presk_creates_files(tmp_path: Path) -> None:
    """0666 less the umask (issue 27: mkstemp's 0600 where presk's files are 0644)."""
    old = os.umask(0o027)
    try:
        R.write(_profile(), str(tmp_path / "p.json"))
    finally:
        os.umask(old)
    assert (tmp_path / "p.json").stat().st_mode & 0o777 == 0o640


def test_a_profile_is_read_back_as_written(tmp_path: Path) -> None:
    p = _profile()
    R.write(p, str(tmp_path / "p.json"))
    assert R.read(str(tmp_path / "p.json")) == p
    assert [f.name for f in tmp_path.iterdir()] == ["p.json"]  # no temporary left
    assert p.label() == f"profile {p.machine['os']} {p.machine['arch']} f64"


@pytest.mark.parametrize(
    "text, why",
    [
        ("{", "is not JSON"),
        ('{"presk_profile": 7}', "is not a presk machine profile"),
        ('{"presk_profile": 1, "machine": {}}', "malformed profile: no field 'os'"),
        ("PATCH_US", "a sample's time is not positive"),
    ],
)
def test_a_bad_profile_says_why(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "p.json"
    if text == "PATCH_US":
        doc = json.loads(_profile().to_json())
        doc["samples"][0]["us"] = 0
        text = json.dumps(doc)
    path.write_text(text)
    with pytest.raises(R.ProfileError, match=re.escape(why)):
        R.read(str(path))


def _patched(where: str, key: str, value) -> str:
    doc = json.loads(_profile().to_json())
    (doc["samples"][0] if where == "sample" else doc[where])[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    "text, why",
    [
        (_patched("sample", "operations", 1e309), "`operations` is not a natural number"),
        (_patched("sample", "work", 1.5), "`work` is not a natural number"),
        (_patched("sample", "bytes", -8), "`bytes` is not a natural number"),
        (_patched("sample", "calls", True), "`calls` is not a natural number"),
        (_patched("sample", "us", 1e309), "`us` is not a finite number"),
        (_patched("sample", "us", 10**400), "`us` is out of the double range"),
        (_patched("sample", "kernel", 5), "`kernel` is not a string"),
        (_patched("fit", "pi", 1e309), "`pi` is not a finite number"),
        (_patched("fit", "beta", float("nan")), "`beta` is not a finite number"),
        (_patched("fit", "lambda", "0"), "`lambda` is not a number"),
        (_patched("fit", "pi", 5e-324), "π and β are rates from 1 to 1e+30 a second"),
        (_patched("fit", "beta", 1e300), "π and β are rates from 1 to 1e+30 a second"),
        (_patched("fit", "lambda", 1e300), "λ is a latency from 0 to 1000 s"),
        (_patched("machine", "type", "x"), "the type timed, `x`, is not one of"),
        (
            '{"presk_profile": 1, "machine": {"os": "", "arch": "", "cpu": "", "type": "f64"},'
            ' "samples": [1], "fit": null}',
            "a sample is not a map",
        ),
        (
            '{"presk_profile": 1, "machine": {"os": "", "arch": "", "cpu": "", "type": "f64"},'
            ' "samples": {}, "fit": null}',
            "`samples` is not a list",
        ),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_a_profile_of_unusable_numbers_says_why(tmp_path: Path, text: str, why: str) -> None:
    """Issue 27: reals of 1e309 were an OverflowError; every field is checked for its kind."""
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(R.ProfileError, match=re.escape(why)):
        R.read(str(path))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(("sample", "fit", "machine", "top")), st.text(max_size=10), JSON)
def test_a_profile_with_any_field_replaced_is_read_or_refused(where, key, value) -> None:
    """Any field of a profile given any JSON value: read, or a ProfileError, never another
    exception."""
    import tempfile

    doc = json.loads(_profile().to_json())
    keys = {"sample": doc["samples"][0], "fit": doc["fit"], "machine": doc["machine"], "top": doc}
    target = keys[where]
    target[key if key else next(iter(target))] = value
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.json"
        path.write_text(json.dumps(doc))
        try:
            R.read(str(path))
        except R.ProfileError:
            pass
