"""Realizations (presk_kernel.realization): the JSON form and its diagnostics, the
narrowable sites of an entry, and the lowering that applies one: each nest in its site's
type, a fused member in its root's, a parameter stored in its path's type, a conversion
where two types meet, and the uniform cases unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kernel_entries import ENTRIES, case
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.ir import Load, Op
from presk_kernel.lower import LowerError, _lower, argument_leaves, lower_entry
from presk_kernel.realization import (
    Realization,
    RealizationError,
    function_of,
    narrowable_sites,
    parse_realization,
)

TRAIN = ("tutorial/07_train.psk", "loss", (("B", 8),), ())


def entry(spec=TRAIN):
    file, name, dims, consts = spec
    core, fn, d, args, ref = case(file, name, dims, False, consts)
    return core, fn, d, args, ref


def mixed(core, fn, dims) -> Realization:
    """Sites in f32, bf16 and f64 in turn, the first parameter stored in bf16."""
    schedule, lw = _lower(core, fn, dims, None, "f64")
    sites = narrowable_sites(schedule).narrowable
    types = tuple((s, ("f32", "bf16", "f64")[i % 3]) for i, s in enumerate(sites))
    return Realization("f64", types, ((lw.paths[0], "bf16"),) if lw.paths else ())


# ---- the value and its JSON form -------------------------------------------------------------


def test_the_json_form_round_trips(tmp_path):
    r = Realization(
        "f32",
        (("loss/%7", "bf16"),),
        (("w", "bf16"),),
        (("adamw.step", "f64"),),
        (("w", "int8"),),
    )
    path = tmp_path / "r.json"
    r.write(str(path))
    doc = json.loads(path.read_text())
    assert doc["presk"] == "realization" and doc["version"] == 1 and doc["default"] == "f32"
    back = Realization.read(str(path))
    assert back == r and back.source == str(path) and hash(back) == hash(r)
    assert parse_realization(f"@{path}") == r and parse_realization("bf16") == Realization("bf16")


def test_a_site_takes_its_own_type_then_its_functions_then_the_default():
    r = Realization("bf16", (("Linear.apply/%3", "f64"),), (), (("Linear.apply", "f32"),))
    assert r.site_type("Linear.apply/%3") == "f64"
    assert (
        r.site_type("Linear.apply/%5") == "f32" and function_of("Linear.apply/%5") == "Linear.apply"
    )
    assert r.site_type("loss/%7") == "bf16" and r.param_type("w") == "bf16"
    assert Realization("f32").is_uniform and not r.is_uniform


@pytest.mark.parametrize(
    "text, code, words",
    [
        ("{", "E7035", "is not JSON"),
        ("[1]", "E7035", "not a realization"),
        ('{"presk": "plan", "version": 1}', "E7035", "not a realization"),
        ('{"presk": "realization", "version": 2}', "E7035", "version 2"),
        ('{"presk": "realization", "version": 1, "site": {}}', "E7035", "unknown key `site`"),
        ('{"presk": "realization", "version": 1, "sites": []}', "E7035", "`sites` is not"),
        ('{"presk": "realization", "version": 1, "default": "f16"}', "E7036", '"f16"'),
        ('{"presk": "realization", "version": 1, "params": {"w": "f8"}}', "E7036", "`w`"),
        ('{"presk": "realization", "version": 1, "sites": {"f/%1": 32}}', "E7036", "`f/%1`"),
        ('{"presk": "realization", "version": 1, "quant": {"w": "int3"}}', "E7036", "int8"),
    ],
)
def test_a_bad_file_is_a_coded_error_naming_what_is_wrong(tmp_path, text, code, words):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(RealizationError, match=words) as e:
        parse_realization(f"@{path}")
    assert e.value.code == code and str(path) in str(e.value)


def test_a_missing_file_and_an_unknown_type_name():
    with pytest.raises(RealizationError, match="cannot read") as e:
        parse_realization("@/nonexistent/r.json")
    assert e.value.code == "E7035"
    with pytest.raises(RealizationError) as e:
        parse_realization("f16")
    assert e.value.code == "E7036"


# ---- against an entry --------------------------------------------------------------------------


def test_narrowable_sites_are_the_stored_values_one_per_fusion_group():
    core, fn, dims, _, _ = entry()
    schedule = lower_entry(core, fn, dims)
    fused, groups = fuse(schedule)
    sites = narrowable_sites(schedule)
    roots = {g.site for g in groups}
    members = {s for g in groups for s in g.steps} - roots
    assert set(sites.narrowable) <= {lc.kernel.site for lc in fused.launches}
    assert not set(sites.narrowable) & set(sites.members)
    assert members <= set(sites.members) and len(sites.narrowable) == len(set(sites.narrowable))
    assert set(sites.root) == {lc.kernel.site for lc in schedule.launches}


@pytest.mark.parametrize(
    "tables, code, words",
    [
        ({"sites": {"nowhere/%1": "f32"}}, "E7037", "no narrowable site `nowhere/%1`"),
        ({"params": {"nope.w": "bf16"}}, "E7038", "`nope.w`"),
        ({"quant": {"nope.w": "int8"}}, "E7038", "`nope.w`"),
        ({"functions": {"nope": "f32"}}, "E7039", "`nope`"),
    ],
)
def test_a_realization_that_does_not_fit_the_entry(tables, code, words):
    core, fn, dims, _, _ = entry()
    doc = {"presk": "realization", "version": 1, **tables}
    with pytest.raises(LowerError, match=words) as e:
        lower_entry(core, fn, dims, None, Realization.from_json(doc))
    assert e.value.code == code


def test_a_fused_member_is_not_narrowable():
    core, fn, dims, _, _ = entry()
    sites = narrowable_sites(lower_entry(core, fn, dims))
    member, root = next(iter(sites.members.items()))
    with pytest.raises(LowerError, match=f"fused into `{root}`") as e:
        lower_entry(core, fn, dims, None, Realization("f64", ((member, "f32"),)))
    assert e.value.code == "E7037"


# ---- the lowering applies it -------------------------------------------------------------------


def _loads(e, out):
    match e:
        case Op("real", (Load() as load,), _):
            out.append(("converted", load.buf))
        case Load(buf, _):
            out.append(("plain", buf))
        case Op(_, args, _):
            for a in args:
                _loads(a, out)


def _exprs(body):
    for st in body:
        for name in ("expr",):
            if hasattr(st, name):
                yield getattr(st, name)
        yield from getattr(st, "terms", ())
        yield from _exprs(getattr(st, "body", ()))


def test_each_nest_computes_in_its_sites_type_and_converts_what_it_reads():
    core, fn, dims, _, _ = entry()
    r = mixed(core, fn, dims)
    schedule = lower_entry(core, fn, dims, None, r)
    root = narrowable_sites(lower_entry(core, fn, dims)).root
    compute = {"f64": "f64", "f32": "f32", "bf16": "f32"}
    converted = 0
    for lc in schedule.launches:
        k = lc.kernel
        want = r.site_type(root[k.site])
        assert k.compute == compute[want], k.site
        assert all(b.dtype == want for b in k.outputs if b.dtype in compute), k.site
        loads: list = []
        for e in _exprs(k.body):
            _loads(e, loads)
        for how, buf in loads:
            dtype = k.buffers[buf].dtype
            if dtype in compute:  # a real read in another type is converted, and only then
                assert (how == "converted") == (compute[dtype] != k.compute), (k.site, buf)
                converted += how == "converted"
    assert converted
    params = [b for b in schedule.buffers if b.role == "input" and b.name.endswith(r.params[0][0])]
    assert params and all(b.dtype == "bf16" for b in params)


@pytest.mark.parametrize("spec", ENTRIES, ids=[e for _, e, _, _ in ENTRIES])
def test_a_realization_changes_no_launch(spec):
    core, fn, dims, _, _ = entry(spec)
    plain = lower_entry(core, fn, dims)
    realized = lower_entry(core, fn, dims, None, mixed(core, fn, dims))
    assert len(realized.launches) == len(plain.launches)
    assert len(fuse(realized)[0].launches) == len(fuse(plain)[0].launches)


@pytest.mark.parametrize("t", ["f64", "f32", "bf16"])
def test_the_uniform_cases_are_the_type_names(tmp_path, t):
    core, fn, dims, args, _ = entry()
    by_name = lower_entry(core, fn, dims, args, t)
    sites = narrowable_sites(by_name).narrowable
    _, lw = _lower(core, fn, dims, None, t)
    spelled = Realization(t, tuple((s, t) for s in sites), tuple((p, t) for p in lw.paths))
    path = tmp_path / "r.json"
    spelled.write(str(path))
    assert lower_entry(core, fn, dims, args, f"@{path}") == by_name
    assert lower_entry(core, fn, dims, args, Realization(t)) == by_name


def test_the_kernel_interpreter_runs_a_mixed_realization_near_the_reference():
    core, fn, dims, args, ref = entry()
    r = mixed(core, fn, dims)
    outs = run_schedule(fuse(lower_entry(core, fn, dims, args, r))[0], argument_leaves(args))
    exact = run_schedule(fuse(lower_entry(core, fn, dims, args))[0], argument_leaves(args))
    for got, f64, want in zip(outs, exact, ref, strict=True):
        scale = float(np.max(np.abs(want)))
        err = float(np.max(np.abs(np.asarray(got, np.float64) - want))) / scale
        assert 2.0**-24 < err < 2.0**-6  # bf16's rounding shows, and stays bf16's
        assert float(np.max(np.abs(f64 - want))) / scale < 2.0**-40


def test_the_sched_stage_lists_the_narrowable_sites_after_the_launches():
    from presk_kernel.cli import format_groups

    core, fn, dims, _, _ = entry()
    schedule = lower_entry(core, fn, dims)
    fused, groups = fuse(schedule)
    text = format_groups(schedule, fused, groups).splitlines()
    sites = narrowable_sites(schedule)
    at = text.index(f"-- {len(sites.narrowable)} narrowable sites (a realization's `sites`)")
    assert at == 1 + len(fused.launches) + sum(len(g.steps) for g in groups)
    listed = [line.split()[0] for line in text[at + 1 :]]
    assert listed == list(sites.narrowable)
    for member, root in sites.members.items():
        line = text[at + 1 + listed.index(root)]
        assert member in line.split("(with ", 1)[1]


def test_a_site_that_stores_no_real_is_not_narrowable():
    core, fn, dims, _, _ = entry(ENTRIES[2])  # attend: its causal mask stores truth values
    schedule = lower_entry(core, fn, dims)
    sites = narrowable_sites(schedule)
    masks = [lc.kernel.site for lc in schedule.launches if lc.kernel.name == "causal_mask"]
    assert masks and not set(masks) & set(sites.narrowable)
    with pytest.raises(LowerError, match="stores no real") as e:
        lower_entry(core, fn, dims, None, Realization("f64", ((masks[0], "f32"),)))
    assert e.value.code == "E7037"
