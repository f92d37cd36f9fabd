"""`presk dump --stage tokens` and `--stage ast`: the token stream and the tree, as text."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import tree_sitter as ts

from presk_syntax.span import Span

# Tokens whose names are not their spelling with a capital.
_KEYWORD_NAMES = {"ℝ": "Real", "λ": "Lambda", "\\": "Lambda"}
_LITERALS = {"identifier": "Ident", "string": "Str", "integer": "Int", "float": "Float"}


def tokens(tree: ts.Tree, data: bytes) -> Iterator[str]:
    """One line per token: `Kw(Module) @ 77..83`, `Ident("Linear") @ 84..90`."""
    stack = [tree.root_node]
    leaves = []
    while stack:
        node = stack.pop()
        if node.child_count == 0 or node.type in _LITERALS or node.type == "comment":
            leaves.append(node)
        else:
            stack.extend(reversed(node.children))
    for leaf in leaves:
        text = data[leaf.start_byte : leaf.end_byte].decode("utf-8", errors="replace")
        yield f"{_token(leaf, text)} @ {leaf.start_byte}..{leaf.end_byte}"


def _token(leaf: ts.Node, text: str) -> str:
    if leaf.is_missing:
        return f"Missing({leaf.type})"
    if leaf.is_error:
        return f"Error({text!r})"
    if leaf.type == "comment":
        return "Comment"
    if leaf.type in _LITERALS:
        kind = _LITERALS[leaf.type]
        return f'{kind}("{text}")' if kind == "Ident" else f"{kind}({text})"
    if text in _KEYWORD_NAMES:
        return f"Kw({_KEYWORD_NAMES[text]})"
    if text.isalpha():
        return f"Kw({text[0].upper()}{text[1:]})"
    if leaf.type == "prefix":
        return 'Sym("...")'
    return f'Sym("{text}")'


def format_tree(node: object) -> str:
    """An AST as indented text: a node a line, its scalars inline, its children below."""
    return "\n".join(_lines(node, "", "")) + "\n"


def _lines(node: object, indent: str, label: str) -> Iterator[str]:
    if not dataclasses.is_dataclass(node):
        yield f"{indent}{label}{node!r}"
        return
    scalars, children = [], []
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        if isinstance(value, Span):
            continue
        if isinstance(value, tuple) and value and all(dataclasses.is_dataclass(v) for v in value):
            children.extend((f"{field.name}[{i}]: ", v) for i, v in enumerate(value))
        elif dataclasses.is_dataclass(value):
            children.append((f"{field.name}: ", value))
        elif value not in (None, ()):
            scalars.append(f"{field.name}={_scalar(value)}")
    span = getattr(node, "span", None)
    where = f" @ {span.start}..{span.end}" if isinstance(span, Span) else ""
    head = " ".join([type(node).__name__, *scalars])
    yield f"{indent}{label}{head}{where}"
    for child_label, child in children:
        yield from _lines(child, indent + "  ", child_label)


def _scalar(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    return str(value)
