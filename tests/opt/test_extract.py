"""Extraction (presk_opt.extract): deterministic across processes (ties broken by the
terms' digests, not egglog's numbering), and every string read back as it was written."""

import subprocess
from pathlib import Path

import pytest
from helpers import presk

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]


def _dump(seed: str, *args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONHASHSEED": seed, "PRESK_VERIFY": "1"}
    return presk("dump", *args, "--stage", "core-opt", "--sites", env=env)


@pytest.mark.parametrize(
    "args",
    [("tests/examples/minigpt/minigpt.psk", *TINY), ("tests/examples/mlp/mlp.psk",)],
    ids=["minigpt", "mlp"],
)
def test_two_processes_extract_the_same_program(args) -> None:
    a, b = _dump("1", *args), _dump("2", *args)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout and "core-opt" not in a.stderr


def test_strings_are_read_back_as_written() -> None:
    """Each instruction of the program, found in the e-graph by its site, has its own
    operation, attributes and type (egglog-python's lets of literals mixed them up)."""
    from egglog import EGraph
    from presk_cli.pipeline import run_pipeline
    from presk_opt.extract import Graph
    from presk_opt.terms import Tables, to_terms
    from presk_syntax.pipeline import Context

    core = run_pipeline(
        "core-after-ad", str(ROOT / "tests/examples/minigpt/minigpt.psk"),
        Context(consts={"V": "64", "D": "16", "H": "2", "L": "2"}),
    )  # fmt: skip
    tables, egraph, expected = Tables(), EGraph(), {}
    for i, fn in enumerate(core.functions):
        egraph.let(f"root{i}", to_terms(fn, tables).ret)
        for ins in fn.body:
            expected[ins.site] = (
                ins.op,
                tables.attrs_key(ins.attrs),
                tables.type_key(ins.out.type),
            )
    graph = Graph(egraph)
    seen = 0
    for n in graph.nodes.values():
        if n.kind in ("n0", "n1", "n2", "n3", "nv"):
            site = graph.site_of[n.children[3]]
            assert tuple(graph.string(c) for c in n.children[:3]) == expected[site], site
            seen += 1
    assert seen == len(expected)
