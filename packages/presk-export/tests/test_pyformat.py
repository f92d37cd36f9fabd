"""presk_export.pyformat without ruff: literals quoted as ruff quotes them, and statements
longer than a line broken as ruff 0.17 broke them (each expected text is ruff's output; the
comparison with ruff itself, on every exported statement, is tests/export/test_export_format.py)."""

from __future__ import annotations

import pytest
from presk_export.pyformat import lay_out, py_literal, width

C = "  # ℝ[batch: B, heads: 2, seq: T, seq2: T]"

# (one statement at 8 columns, as the rules write it; ruff's layout of it)
LAYOUTS = [
    (  # a call: its brackets break, the arguments on one line of their own
        'o = torch.einsum("bhst,bhtd->bhsd", a, split_heads(self.wv(x)))' + C,
        'o = torch.einsum(\n    "bhst,bhtd->bhsd", a, split_heads(self.wv(x))\n)' + C,
    ),
    (  # and one argument a line, with a trailing comma, when that line is too long
        "a = torch.softmax(scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(),"
        " -math.inf), dim=3)" + C,
        "a = torch.softmax(\n    scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(),"
        " -math.inf),\n    dim=3,\n)" + C,
    ),
    (  # an operator whose last operand is a call: that call's brackets break, no parentheses
        's = torch.einsum("bhsd,bhtd->bhst", q, split_heads(self.wk(x))) / math.sqrt(4)' + C,
        's = torch.einsum("bhsd,bhtd->bhst", q, split_heads(self.wk(x))) / math.sqrt(\n    4\n)'
        + C,
    ),
    (  # a parenthesized first operand breaks inside, before its operator
        'scores = (torch.einsum("bhsf,bhtf->bhst", q1, k1) + torch.einsum("bhsf,bhtf->bhst", q2,'
        " k2)) / math.sqrt(4)" + C,
        'scores = (\n    torch.einsum("bhsf,bhtf->bhst", q1, k1)\n    + torch.einsum("bhsf,bhtf->bhst",'
        " q2, k2)\n) / math.sqrt(4)" + C,
    ),
    (  # a fluent chain in added parentheses: one link a line
        "f = torch.ones(2, 2, dtype=torch.bool).tril().to(torch.get_default_dtype()).sum(dim=1)"
        " - 1  # ℝ[freq: 2]",
        "f = (\n    torch.ones(2, 2, dtype=torch.bool)\n    .tril()\n    .to(torch.get_default_dtype())"
        "\n    .sum(dim=1)\n    - 1\n)  # ℝ[freq: 2]",
    ),
    (  # two operators of the loosest kind: parentheses, one operand a line
        "return (x.max(dim=1).values * 3).mean() + x.min(dim=1).values.mean() +"
        " x.flatten().max(dim=0).values",
        "return (\n    (x.max(dim=1).values * 3).mean()\n    + x.min(dim=1).values.mean()\n"
        "    + x.flatten().max(dim=0).values\n)",
    ),
    (  # a tuple: one item a line, with a trailing comma
        "return (torch.tensor(1.0, dtype=torch.get_default_dtype()), torch.tensor(2.0,"
        " dtype=torch.get_default_dtype()))",
        "return (\n    torch.tensor(1.0, dtype=torch.get_default_dtype()),\n    torch.tensor(2.0,"
        " dtype=torch.get_default_dtype()),\n)",
    ),
    (  # a name alone: in parentheses, the comment with it
        "xxxxxxxxxxxxxxxxxxxxxxxxxxx, yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy = batch" + C,
        "xxxxxxxxxxxxxxxxxxxxxxxxxxx, yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy = (\n    batch" + C + "\n)",
    ),
    (  # a call without arguments cannot break: in parentheses, the comment after them
        "self.mlpzzzzzzzzzzzzzzzzzzzzzz = MLPzzzzzzzzzzzzzzzzzzzzzz()" + C,
        "self.mlpzzzzzzzzzzzzzzzzzzzzzz = (\n    MLPzzzzzzzzzzzzzzzzzzzzzz()\n)" + C,
    ),
    (  # a single argument that breaks gets no trailing comma
        "self.wzzzzzzzzzzzzzzzzzz = nn.Parameter(nn.init.xavier_uniform_(torch.empty(Inzzzzzzzzzzzzzzzzzzzz,"
        " Outzzzzzzzzzzzzzzzzz)))",
        "self.wzzzzzzzzzzzzzzzzzz = nn.Parameter(\n    nn.init.xavier_uniform_(\n        torch.empty("
        "Inzzzzzzzzzzzzzzzzzzzz, Outzzzzzzzzzzzzzzzzz)\n    )\n)",
    ),
]


@pytest.mark.parametrize(("line", "expected"), LAYOUTS)
def test_a_long_statement_is_broken_as_ruff_breaks_it(line, expected):
    indent = " " * 8
    text = f"def f():\n    if x:\n{indent}{line}\n"
    laid = "\n".join(indent + row if row else row for row in expected.split("\n"))
    assert lay_out(text) == f"def f():\n    if x:\n{laid}\n"
    assert lay_out(lay_out(text)) == lay_out(text)  # what is laid out stays so


def test_short_lines_and_statements_of_several_lines_are_left_as_they_are():
    text = "x = f(\n    a, b\n)\ny = (x**2).mean(dim=-1)  # ℝ[...]\n"
    assert lay_out(text) == text
    long_header = "for i in range(" + ", ".join(["aaaaaaaaaa"] * 9) + "):\n    pass\n"
    assert lay_out(long_header) == long_header  # a compound statement: not laid out


def test_literals_are_quoted_as_ruff_quotes_them():
    assert py_literal([("blocks.ln1.γ", True), ("head", False)]) == (
        '[("blocks.ln1.γ", True), ("head", False)]'
    )
    assert py_literal({"B": 8}) == '{"B": 8}'
    assert py_literal((4,)) == "(4,)"
    assert py_literal("it's") == '"it\'s"'
    assert py_literal('say "hi"') == "'say \"hi\"'"  # double quotes would need escapes
    assert py_literal("a \"b\" 'c'") == '"a \\"b\\" \'c\'"'
    assert py_literal(None) == "None" and py_literal(0.01) == "0.01"
    with pytest.raises(TypeError):
        py_literal(object())


def test_width_counts_wide_characters_twice():
    assert width("ℝ[batch: B]") == 11
    assert width("漢字") == 4
