"""The editor queries compile against the grammar and capture what they name."""

from pathlib import Path

import tree_sitter as ts
from presk_syntax.parse import language, parse_tree

QUERIES = Path(__file__).resolve().parents[1] / "grammar" / "queries"
ROOT = Path(__file__).resolve().parents[3]


def test_highlights_compile_and_capture_the_tower():
    query = ts.Query(language(), (QUERIES / "highlights.scm").read_text())
    data = (ROOT / "tutorial" / "06_tower.psk").read_bytes()
    captures = ts.QueryCursor(query).captures(parse_tree(data).root_node)
    texts = {
        name: {data[n.start_byte : n.end_byte].decode() for n in nodes}
        for name, nodes in captures.items()
    }
    assert {"module", "use", "fn", "import"} <= texts["keyword"]
    assert {"Block", "Tower"} <= texts["type"]
    assert "-- residual connection" in texts["comment"]
    assert "apply" in texts["function"]


def test_highlights_capture_a_slice():
    query = ts.Query(language(), (QUERIES / "highlights.scm").read_text())
    data = b"fn f(x : R[t: T]) -> R[t: 2] = x[t: 1 .. 3]"
    captures = ts.QueryCursor(query).captures(parse_tree(data).root_node)
    texts = {
        name: {data[n.start_byte : n.end_byte].decode() for n in nodes}
        for name, nodes in captures.items()
    }
    assert ".." in texts["operator"]
    assert "t" in texts["label"]
