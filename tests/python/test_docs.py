"""docs/python.md's examples run (issue 28): every ```python block of the page, in order, in
one namespace, from the root of the checkout; their assertions are the test. The README's
example of the API runs too."""

import re

from helpers import ROOT

PAGE = ROOT / "docs" / "python.md"


def blocks(page=PAGE) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", page.read_text(encoding="utf-8"), re.M | re.S)


def test_the_page_has_examples_of_each_part() -> None:
    code = "\n".join(blocks())
    for call in ("presk.load(", ".entry(", ".init(", ".train(", "read_data(", "write_data("):
        assert call in code, call


def test_every_python_block_of_docs_python_md_runs(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": "docs_python_md"}
    for i, block in enumerate(blocks()):
        exec(compile(block, f"docs/python.md, block {i + 1}", "exec"), namespace)  # noqa: S102


def test_the_readmes_python_example_runs(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    (block,) = blocks(ROOT / "README.md")
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    assert namespace["value"].shape == () and float(namespace["value"]) > 0
