"""A core document is self-contained: the modules' layouts and the bounds travel with the
program, and module keys do not depend on how the main file's path was spelled."""

from __future__ import annotations

from pathlib import Path

from presk_core.codec import CORE_CODEC, decode_core, encode_core
from presk_core.lower import lower_program
from presk_core.run import run_entry
from presk_syntax.codec import FileTable
from presk_types.elab import load_program

ROOT = Path(__file__).resolve().parents[3]


def _lowered(path: str):
    program = load_program(path)
    return lower_program(program), [env.source for env in program.files]


def test_three_spellings_of_a_path_lower_to_equal_programs(monkeypatch):
    monkeypatch.chdir(ROOT)
    spellings = [
        "tutorial/04_grad.psk",
        "./tutorial/04_grad.psk",
        str(ROOT / "tutorial/04_grad.psk"),
    ]
    encoded = []
    for path in spellings:
        core, sources = _lowered(path)
        assert {layout.module for layout in core.layouts} == {"01_linear.psk:Linear"}
        # spans name their file by its index in the document's table: equal trees
        encoded.append(CORE_CODEC.encode(core, FileTable(sources)))
    assert encoded[0] == encoded[1] == encoded[2]


def test_layouts_and_bounds_of_the_tower(monkeypatch):
    monkeypatch.chdir(ROOT)
    core, _ = _lowered("tutorial/06_tower.psk")
    tower = core.layout("Tower")
    assert tower.module == "06_tower.psk:Tower"
    shown = [
        (leaf.path, str(leaf.type), [(p, str(n)) for p, n in leaf.stack]) for leaf in tower.leaves
    ]
    assert shown == [
        ("blocks.norm.γ", "ℝ[4]", [("blocks", "3")]),
        ("blocks.proj.w", "ℝ[4, 4]", [("blocks", "3")]),
        ("blocks.proj.b", "ℝ[4]", [("blocks", "3")]),
        ("final.γ", "ℝ[4]", []),
    ]
    assert core.layout("Linear").dims == ("In", "Out")
    assert core.layout("01_linear.psk:Linear") == core.layout("Linear")
    attention, _ = _lowered("tutorial/03_attention.psk")
    assert dict(attention.bounds).get("T") == 1024


def test_the_metadata_round_trips_through_the_core_document(monkeypatch):
    monkeypatch.chdir(ROOT)
    core, sources = _lowered("tutorial/06_tower.psk")
    back, _ = decode_core(encode_core(core, sources))
    assert back == core and back.layouts and back.layouts == core.layouts


def test_presk_run_needs_only_the_core_program(monkeypatch):
    monkeypatch.chdir(ROOT)
    elab = load_program("tutorial/01_linear.psk")
    core = lower_program(elab)
    dims = {"batch": 4}
    alone = run_entry(core, None, "Linear{3, 2}.apply", dims, digits=6)
    assert alone == run_entry(core, elab, "Linear{3, 2}.apply", dims, digits=6)
    assert alone.startswith("ℝ[batch: 4, 2] = ")


def test_the_training_run_travels_with_the_program(monkeypatch):
    monkeypatch.chdir(ROOT)
    core, sources = _lowered("tutorial/07_train.psk")
    (run,) = core.trainings
    assert (run.model, run.objective, run.optimizer) == ("Tower", "loss", "adamw")
    assert run.data.endswith(".psk.d") and dict(run.batch) and run.file_type is None
    back, _ = decode_core(encode_core(core, sources))
    assert back.trainings == core.trainings
