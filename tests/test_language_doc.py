"""docs/language.md lists every primitive of the registry, with its signature."""

from pathlib import Path

from presk_types.rules import PRIMITIVES

DOC = Path(__file__).resolve().parents[1] / "docs" / "language.md"


def test_every_primitive_is_documented_with_its_signature():
    text = DOC.read_text()
    for p in PRIMITIVES.values():
        assert f"| `{p.name}` | `{p.signature}` |" in text, p.name
