"""Robustness: a day whose day.json or point lines are mutated at random is read, checked
and reported, or refused with a ModelError (E7124, E7125): never another exception."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from presk_kernel.layout_day import check_days, read_day
from presk_kernel.layout_model import ModelError
from presk_kernel.layout_rank import report

FIXTURE = ROOT / "tests/plans/fixtures/rank"
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**20) | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),  # fmt: skip
    max_leaves=6,
)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _set(doc, path, value):
    if not path:
        return value
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


def _mutate(tmp: Path, which: str, name: str, pick: int, value) -> Path:
    day = tmp / which
    if day.exists():
        shutil.rmtree(day)
    shutil.copytree(FIXTURE / which, day)
    target = day / name
    lines = target.read_text().splitlines()
    doc = json.loads(lines[0]) if name.endswith(".jsonl") else json.loads(target.read_text())
    paths = list(_paths(doc))
    doc = _set(doc, paths[pick % len(paths)], value)
    text = json.dumps(doc, allow_nan=True)
    target.write_text("\n".join([text, *lines[1:]]) + "\n" if name.endswith(".jsonl") else text)
    return day


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    which=st.sampled_from(["day1", "day2"]),
    name=st.sampled_from(["day.json", "scores__2.jsonl", "attend__5.jsonl"]),
    pick=st.integers(0, 10_000),
    value=VALUES,
)
def test_a_mutated_day_is_reported_or_refused(tmp_path, which, name, pick, value):
    bad = _mutate(tmp_path, which, name, pick, value)
    days = {"day1": str(FIXTURE / "day1"), "day2": str(FIXTURE / "day2"), which: str(bad)}
    try:
        one, other = read_day(days["day1"]), read_day(days["day2"])
        check_days(one, other, "attend")
        text = report(one, other, "attend")
    except ModelError as e:
        assert e.code in ("E7124", "E7125")
    else:
        assert text.count("## ") >= 3
