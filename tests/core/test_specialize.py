"""`specialize` (and `flatten`): the interpreter runs the transformed program to the same
bits as the original, on the entries `tests/run` runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from presk_ad import differentiate
from presk_core.flatten import FlattenError, flat_arguments, flat_value, flatten
from presk_core.interp import Interpreter
from presk_core.ir import format_program
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize, to_json
from presk_core.specialize import SpecializeError, has_prefix, specialize
from presk_types.elab import load_program
from presk_types.types import ParamsT, TupleT, shape_of

ROOT = Path(__file__).resolve().parents[2]
TINY = {"V": "64", "D": "16", "H": "2", "L": "2"}

# (file, constants, entry as --entry, dims as --dim): the entries tests/run runs.
ENTRIES = [
    ("tutorial/01_linear.psk", {}, "Linear{3, 2}.apply", {"batch": 4}),
    ("tutorial/02_norm.psk", {}, "RMSNorm{4}.apply", {"batch": 2}),
    ("tutorial/03_attention.psk", {}, "attend", {"B": 2, "T": 5}),
    ("tutorial/04_grad.psk", {}, "loss_grad", {"D": 3, "B": 2}),
    ("tutorial/05_sample.psk", {}, "pick", {"B": 5}),
    ("tutorial/06_tower.psk", {}, "Tower.apply", {"batch": 3}),
    ("tests/examples/mlp/mlp.psk", {}, "mse", {"D": 3, "B": 2}),
    ("tests/examples/minigpt/minigpt.psk", TINY, "MiniGPT.apply", {"B": 2, "T": 8}),
    ("tests/examples/minigpt/train_minigpt.psk", TINY, "loss", {"B": 2, "T": 8}),
    (
        "tests/examples/llama/llama.psk",
        {"D": "8", "H": "2", "F": "12"},
        "block",
        {"B": 1, "T": 3},
    ),
    (
        "tests/examples/bert/bert.psk",
        {"V": "32", "D": "8", "H": "2", "L": "2"},
        "MaskedLM.apply",
        {"B": 1, "T": 4},
    ),
]


def _core(path: str, consts: dict[str, str]):
    program = load_program(str(ROOT / path), consts)
    return differentiate(lower_program(program)), program


def _specialized(path: str, consts: dict[str, str], entry: str, dims: dict[str, int]):
    """The core program, the entry, its inputs and the interpreter's result, the dimensions
    given to `specialize`, and the specialized program."""
    core, elab = _core(path, consts)
    e = parse_entry(entry, core, elab, dims)
    interp = Interpreter(core, 64)
    inputs = [v for _, _, v in synthesize(e, interp, seed=0)]
    want = interp.run(e.function.name, inputs, e.dims)
    given = {**e.dims, **dict(e.prefix)} if has_prefix(e.function) else e.dims
    return core, e, inputs, want, given, specialize(core, e.function.name, given)


def _types(fn):
    yield from (p.type for p in fn.params)
    yield from (i.out.type for i in fn.body)
    yield fn.result


@pytest.mark.parametrize("path, consts, entry, dims", ENTRIES, ids=[e[2] for e in ENTRIES])
def test_specialize_runs_to_the_same_bits(path, consts, entry, dims):
    core, e, inputs, want, given, special = _specialized(path, consts, entry, dims)
    entry_fn = special.functions[0]
    assert entry_fn.dims == ()
    for fn in special.functions:
        assert fn.dims == ()
        for t in _types(fn):
            s = shape_of(t)
            assert s is None or (not s.prefix and all(a.length.is_const for a in s.axes)), (
                fn.name,
                str(t),
            )
    got = Interpreter(special, 64).run(entry_fn.name, inputs, {})
    assert repr(to_json(e, e.function.result, got)) == repr(to_json(e, e.function.result, want))
    # deterministic: the same program again, and names that say their bindings
    assert format_program(specialize(core, e.function.name, given)) == format_program(special)


def test_specialize_names_the_bindings():
    core, _ = _core("tutorial/01_linear.psk", {})
    special = specialize(core, "Linear.apply", {"In": 3, "Out": 2, "batch": 4})
    assert [f.name for f in special.functions] == ["Linear.apply{In=3,Out=2}[batch: 4]"]
    head = format_program(special).splitlines()[0]
    assert head == (
        "fn Linear.apply{In=3,Out=2}[batch: 4](θ : params Linear{3, 2}, x : ℝ[batch: 4, 3])"
        " -> ℝ[batch: 4, 2] {"
    )


def test_specialize_errors():
    core, _ = _core("tutorial/01_linear.psk", {})
    with pytest.raises(SpecializeError, match="no value for the dimension `In`"):
        specialize(core, "Linear.apply", {"Out": 2})
    with pytest.raises(SpecializeError, match="open prefix"):
        specialize(core, "Linear.apply", {"In": 3, "Out": 2})
    with pytest.raises(SpecializeError, match="no function `nope`"):
        specialize(core, "nope", {})


def _trees(t) -> bool:
    return isinstance(t, ParamsT) or (isinstance(t, TupleT) and any(map(_trees, t.elements)))


@pytest.mark.parametrize("path, consts, entry, dims", ENTRIES, ids=[e[2] for e in ENTRIES])
def test_flatten_runs_to_the_same_bits(path, consts, entry, dims):
    _, e, inputs, want, _, special = _specialized(path, consts, entry, dims)
    flat = flatten(special)
    entry_fn = flat.functions[0]
    for fn in flat.functions:  # no tree is left: the leaves only
        assert not any(_trees(p.type) for p in fn.params), fn.name
        assert not _trees(fn.result) or isinstance(fn.result, TupleT), fn.name
        assert not {"field", "record", "slice"} & {i.op for i in fn.body}, fn.name
        assert not any(isinstance(i.out.type, ParamsT) for i in fn.body), fn.name
    args = flat_arguments(special, [p.type for p in e.function.params], inputs)
    assert len(args) == len(entry_fn.params)
    got = Interpreter(flat, 64).run(entry_fn.name, args, {})
    expected = flat_value(special, e.function.result, want)
    assert repr(to_json(e, e.function.result, got)) == repr(to_json(e, e.function.result, expected))


def test_flatten_names_the_leaves_and_expands_stacks():
    core, _ = _core("tutorial/06_tower.psk", {})
    flat = flatten(specialize(core, "Tower.apply", {"batch": 3}))
    names = [str(p) for p in flat.functions[0].params]
    assert names[:3] == ["θ.blocks.0.norm.γ", "θ.blocks.1.norm.γ", "θ.blocks.2.norm.γ"]
    assert names[-2:] == ["θ.final.γ", "x"]
    assert len(names) == 3 * 3 + 2


def test_flatten_refuses_a_stacked_initializer():
    core, _ = _core("tutorial/06_tower.psk", {})
    with pytest.raises(FlattenError, match="`fold_init` in `Tower.init` has no flat form"):
        flatten(core)


@pytest.mark.parametrize(
    "path, entry, dims",
    [
        ("tutorial/01_linear.psk", "Linear.apply", {"In": 3, "Out": 2, "batch": 4}),
        ("tutorial/04_grad.psk", "loss_grad", {"D": 3, "B": 2}),
        ("tutorial/06_tower.psk", "Tower.apply", {"batch": 3}),
    ],
)
def test_flattened_programs_verify(path, entry, dims):
    from presk_core.verify import problems

    core, _ = _core(path, {})
    assert problems(flatten(specialize(core, entry, dims)), made_from=core) == []


def test_specialize_binds_a_modules_file_dimensions():
    """`params MiniGPT` does not carry the file's `T` its leaf `pos : ℝ[seq: T, D]` has:
    specialize binds it in the layouts at the value the functions that read the tree
    give it, a sub-module's at its parent's (bert's `Embeddings` in `MaskedLM`)."""
    from presk_core.layout import free_dims

    core, _ = _core("tests/examples/minigpt/minigpt.psk", TINY)
    assert free_dims(core.layout("MiniGPT")) == {"T"}
    assert free_dims(core.layout("Linear")) == frozenset()
    special = specialize(core, "MiniGPT.apply", {"B": 2, "T": 8})
    pos = {x.path: str(x.type) for x in special.layout("MiniGPT").leaves}["pos"]
    assert pos == "ℝ[seq: 8, 16]"
    assert special.layout("Linear") == core.layout("Linear")
    flat = flatten(special)
    assert "θ.pos : ℝ[seq: 8, 16]" in [f"{p} : {p.type}" for p in flat.functions[0].params]

    core, _ = _core("tests/examples/bert/bert.psk", {"V": "32", "D": "8", "H": "2", "L": "2"})
    special = specialize(core, "MaskedLM.loss", {"B": 1, "T": 4})
    for name, path in [("MaskedLM", "encoder.embeddings.positions"), ("Embeddings", "positions")]:
        leaf = {x.path: str(x.type) for x in special.layout(name).leaves}[path]
        assert leaf == "ℝ[seq: 4, 8]", name


NEST = """dim T

module Inner {
  param p : ℝ[seq: T, 2]  init = zeros
}

module Outer {
  use inner : Inner
  param s : ℝ[2]  init = ones

  fn apply(x : ℝ[seq: T, 2]) -> ℝ[seq: T, 2] =
    x * s
}

fn both(θ : params Outer, x : ℝ[seq: 3, 2], y : ℝ[seq: 5, 2]) -> ℝ[seq: 5, 2] =
  Outer.apply(θ, y) + sum(axis seq, Outer.apply(θ, x))
"""


def test_specialize_binds_a_sub_modules_file_dimensions_at_its_parents(tmp_path):
    """`Inner`'s tree is never read by itself: its `T` is its parent's. A tree read at two
    values of `T` keeps the name (its leaf has no one length)."""
    from presk_core.verify import problems

    (tmp_path / "nest.psk").write_text(NEST)
    core = lower_program(load_program(str(tmp_path / "nest.psk")))
    special = specialize(core, "Outer.apply", {"T": 3})
    assert [str(x.type) for x in special.layout("Inner").leaves] == ["ℝ[seq: 3, 2]"]
    assert [str(x.type) for x in special.layout("Outer").leaves] == ["ℝ[seq: 3, 2]", "ℝ[2]"]
    assert problems(flatten(special), made_from=core) == []
    both = specialize(core, "both", {"T": 5})
    assert [str(x.type) for x in both.layout("Outer").leaves] == ["ℝ[seq: T, 2]", "ℝ[2]"]
