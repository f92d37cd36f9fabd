"""Mutated programs never crash the checker: a result or diagnostics, never an exception."""

import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from presk_syntax.diagnostics import DiagnosticError, render
from presk_syntax.parse import parse_tree
from presk_syntax.span import SourceMap
from presk_types.driver import check_file
from presk_types.summary import summary

ROOT = Path(__file__).resolve().parents[3]
PROGRAMS = sorted((ROOT / "tutorial").glob("0*.psk")) + sorted(
    (ROOT / "tests" / "examples").glob("*/*.psk")
)


def _tokens(data: bytes) -> list[tuple[int, int]]:
    out, stack = [], [parse_tree(data).root_node]
    while stack:
        node = stack.pop()
        if node.child_count == 0:
            out.append((node.start_byte, node.end_byte))
        else:
            stack.extend(reversed(node.children))
    return out


def _mutate(data: bytes, rng: random.Random) -> bytes:
    tokens = _tokens(data)
    for _ in range(rng.randint(1, 3)):
        start, end = tokens[rng.randrange(len(tokens))]
        other_start, other_end = tokens[rng.randrange(len(tokens))]
        piece = data[other_start:other_end]
        match rng.randrange(4):
            case 0:  # delete a token
                data = data[:start] + data[end:]
            case 1:  # duplicate one
                data = data[:end] + b" " + data[start:end] + data[end:]
            case 2:  # put another token in its place
                data = data[:start] + piece + data[end:]
            case _:  # change a number
                data = data[:start] + str(rng.randint(0, 9)).encode() + data[end:]
        tokens = _tokens(data)
    return data


@settings(
    max_examples=150,
    deadline=5000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=st.sampled_from(PROGRAMS), seed=st.integers(0, 2**32 - 1))
def test_mutated_programs_get_diagnostics_not_exceptions(tmp_path_factory, program, seed):
    root = tmp_path_factory.mktemp("m")
    # the imported files beside it, unmutated
    for sibling in program.parent.glob("*.psk"):
        (root / sibling.name).write_bytes(sibling.read_bytes())
    target = root / program.name
    target.write_bytes(_mutate(program.read_bytes(), random.Random(seed)))
    sources = SourceMap()
    try:
        checked = check_file(str(target), None, sources)
    except DiagnosticError as e:
        diags = e.diagnostics
        assert all(d.code[:2] in ("E0", "E1") for d in diags)
    else:
        diags = checked.diagnostics
        summary(checked.checker, checked.runs)
    for d in diags:
        render(d, sources, color=False)
