"""Parsing: text to tree-sitter tree to AST, and syntax errors as E0 diagnostics.

tree-sitter recovers from every error, so a tree always comes back; where it holds ERROR or
MISSING nodes, this module finds the first token the parser could not take and says what
was expected there. The expected tokens are found by asking the parser: each token valid
in the parse state before the offending one is inserted in its place, and kept if the
parse then gets past it (the repair that E0010's `expected `=`` names).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import tree_sitter as ts

from presk_syntax import ast as A
from presk_syntax._binding import language as _language
from presk_syntax.build import Builder
from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Label, Severity
from presk_syntax.span import Source, Span

# Named terminals and the text a repair probe inserts for them.
_NAMED_TOKENS = {
    "identifier": "x_",
    "integer": "1",
    "float": "1.0",
    "string": '""',
    "prefix": "...",
}
_EXPR_STARTS = {"identifier", "integer", "float", "string", "(", "-", "λ", "\\", "ein", "stream"}
_OPERATORS = {"+", "-", "*", "/", "%", "^", "·", "@", "==", "!=", "≠", "<", "<=", "≤", ">", ">="}
_OPERATORS |= {"≥", "|>", ".", "("}
_NO_STATE = (0, 65535)


@cache
def language() -> ts.Language:
    """The compiled Presk grammar."""
    return ts.Language(_language())


def parser() -> ts.Parser:
    return ts.Parser(language())


def parse_tree(text: bytes) -> ts.Tree:
    """The concrete syntax tree of `text` (always a tree: errors are ERROR/MISSING nodes)."""
    return parser().parse(text)


def parse_source(source: Source) -> A.SourceFile:
    """The AST of `source`, or DiagnosticError with the E0 diagnostics of its first error."""
    data = source.text.encode("utf-8", errors="surrogatepass")
    tree = parse_tree(data)
    if tree.root_node.has_error:
        raise DiagnosticError([syntax_error(source.path, data, tree)])
    reserved = _reserved_as_name(source.path, data, tree)
    if reserved is not None:
        raise DiagnosticError([reserved])
    deep = _too_deep(source.path, tree)
    if deep is not None:
        raise DiagnosticError([deep])
    return Builder(source.path, data).build(tree.root_node)


# How deep the syntax tree may nest: the stages after parsing walk it by recursion, and a
# program nests about 12 levels (the reference Llama); a sum of n terms nests n.
MAX_DEPTH = 200


def _too_deep(path: str, tree: ts.Tree) -> Diagnostic | None:
    """E0013 at the first node nested deeper than MAX_DEPTH (found without recursion)."""
    cursor, depth = tree.walk(), 0
    while True:
        if cursor.goto_first_child():
            depth += 1
            if depth > MAX_DEPTH:
                node = cursor.node
                while node.child_count:  # its first token: the node may span the whole line
                    node = node.children[0]
                return Diagnostic(
                    "E0013",
                    Severity.ERROR,
                    f"this program nests deeper than {MAX_DEPTH} levels",
                    (Label(Span(path, node.start_byte, node.end_byte), "nested too deeply here"),),
                    help="a long sum or chain nests one level a term: split it with `let`s,"
                    " or sum over an axis",
                )
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return None
            depth -= 1


# Symbols that are letters to the lexer (so `λθ` would be a name) but never names.
_RESERVED = ("ℝ", "λ")


def _reserved_as_name(path: str, data: bytes, tree: ts.Tree) -> Diagnostic | None:
    """E0012 where `ℝ` or `λ` stands where only a name fits (`dim ℝ`)."""
    for symbol in _RESERVED:
        word = symbol.encode("utf-8")
        at = data.find(word)
        while at >= 0:
            node = tree.root_node.descendant_for_byte_range(at, at + len(word))
            if node is not None and node.type == "identifier" and node.start_byte == at:
                name = data[node.start_byte : node.end_byte].decode("utf-8")
                return Diagnostic(
                    "E0012",
                    Severity.ERROR,
                    f"`{symbol}` is reserved, and cannot begin a name",
                    (
                        Label(
                            Span(path, node.start_byte, node.end_byte),
                            f"`{name}` is read as a name here",
                        ),
                    ),
                    help="ℝ is the reals and λ begins a function: choose another name",
                )
            at = data.find(word, at + 1)
    return None


# ---- errors ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Culprit:
    node: ts.Node | None  # the token found where the parser failed (None: end of file)
    start: int
    state: int  # the parse state before it, or 0 when unknown
    missing: str | None = None  # the kind tree-sitter inserted, when it did


def _leaves(node: ts.Node, in_error: bool = False) -> Iterator[tuple[ts.Node, bool]]:
    """The tokens under `node` in order, each with whether an ERROR node holds it: a cursor
    walk, without recursion or lists of children (a tree may nest thousands deep, and a
    node hold millions of children)."""
    cursor = node.walk()
    errors = [in_error]  # for each depth: inside an ERROR node
    while True:
        current = cursor.node
        if cursor.goto_first_child():
            errors.append(errors[-1] or current.is_error)
            continue
        yield current, errors[-1]
        while not cursor.goto_next_sibling():
            if len(errors) == 1 or not cursor.goto_parent():
                return
            errors.pop()


def _terminals(state: int) -> set[str]:
    lang = language()
    names = set()
    for sym in lang.lookahead_iterator(state).symbols():
        name = lang.node_kind_for_id(sym)
        if name in _NAMED_TOKENS or (
            name and not lang.node_kind_is_named(sym) and lang.node_kind_is_visible(sym)
        ):
            names.add(name)
    return names


def _first_culprit(tree: ts.Tree, data: bytes) -> _Culprit:
    """The first token the parser could not take.

    In order: a token tree-sitter inserted (MISSING) or could not lex; else a token inside an
    ERROR node that its parse state does not accept; else the token after the first ERROR
    node (tree-sitter wrapped acceptable tokens because of what follows them).
    """
    lang = language()
    # one pass over the tokens, none kept but the first inside an ERROR (a file may hold
    # millions of them)
    leaves = ((leaf, err) for leaf, err in _leaves(tree.root_node) if leaf.type != "comment")
    previous: ts.Node | None = None
    first_error_end: int | None = None
    wrapped: ts.Node | None = None  # the first token inside an ERROR node
    for leaf, in_error in leaves:
        state = leaf.parse_state
        if state in _NO_STATE and previous is not None:
            state = previous.next_parse_state
        state = 0 if state in _NO_STATE else state
        if leaf.is_missing:
            found = next((n for n, _ in leaves if not n.is_missing), None)
            start = found.start_byte if found is not None else len(data)
            return _Culprit(found, start, state, missing=leaf.type)
        if leaf.is_error:
            return _Culprit(leaf, leaf.start_byte, state)
        if in_error:
            if first_error_end is None:
                first_error_end = _enclosing_error(leaf).end_byte
                wrapped = leaf
            if leaf.kind_id not in set(lang.lookahead_iterator(leaf.parse_state).symbols()):
                return _Culprit(leaf, leaf.start_byte, state)
        elif (
            wrapped is not None
            and first_error_end is not None
            and leaf.start_byte >= first_error_end
        ):
            if (  # each probe parses the whole file again: not above PROBED_BYTES
                len(data) <= PROBED_BYTES
                and not _deletion_repairs(data, leaf)
                and _deletion_repairs(data, wrapped)
            ):
                return _Culprit(wrapped, wrapped.start_byte, 0)  # a stray token, alone
            after = previous.next_parse_state if previous is not None else 0
            return _Culprit(leaf, leaf.start_byte, 0 if after in _NO_STATE else after)
        previous = leaf
    if wrapped is not None:  # every token of the ERROR looked acceptable alone
        return _Culprit(wrapped, wrapped.start_byte, 0)
    # The error is at the end of the file: an unfinished construct.
    state = previous.next_parse_state if previous is not None else 0
    return _Culprit(None, len(data), 0 if state in _NO_STATE else state)


def _deletion_repairs(data: bytes, node: ts.Node) -> bool:
    """Whether the file parses once this token is deleted."""
    probe = data[: node.start_byte] + data[node.end_byte :]
    return not parse_tree(probe).root_node.has_error


def _enclosing_error(node: ts.Node) -> ts.Node:
    while node.parent is not None and not node.is_error:
        node = node.parent
    return node


def _error_position(tree: ts.Tree, data: bytes) -> int | None:
    return _first_culprit(tree, data).start if tree.root_node.has_error else None


PROBED_BYTES = 64 * 1024


def _repairs(data: bytes, culprit: _Culprit) -> list[str]:
    """The tokens whose insertion before the culprit takes the parse furthest past it (none
    in a file above PROBED_BYTES: each probe parses the whole file again)."""
    if not culprit.state or len(data) > PROBED_BYTES:
        return []
    past = culprit.node.end_byte if culprit.node is not None else len(data)
    following = parse_tree(data).root_node.descendant_for_byte_range(past, past)
    if culprit.node is not None and following is not None and following.end_byte > past:
        past = following.end_byte  # a repair must take the token after the culprit too
    reach: dict[str, float] = {}
    for name in sorted(_terminals(culprit.state)):
        text = _NAMED_TOKENS.get(name, name).encode("utf-8") + b" "
        probe = data[: culprit.start] + text + data[culprit.start :]
        at = _error_position(parse_tree(probe), probe)
        distance = float("inf") if at is None else at - len(text)
        if distance >= past:
            reach[name] = distance
    best = max(reach.values(), default=None)
    line_end = data.find(b"\n", past)
    if best is None or (best != float("inf") and 0 <= line_end and best <= line_end):
        return []  # no insertion gets the parse past the culprit's line: it is unexpected
    return [name for name, distance in reach.items() if distance == best]


def _describe_found(node: ts.Node | None, data: bytes) -> str:
    if node is None:
        return "end of file"
    text = data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")
    kinds = {"identifier": "identifier", "integer": "number", "float": "number", "string": "string"}
    if node.type in kinds:
        return f"{kinds[node.type]} `{text}`"
    return f"`{text}`"


_TOKEN_WORDS = {"identifier": "an identifier", "integer": "a number", "float": "a number"}
_TOKEN_WORDS |= {"string": "a string", "prefix": "`...`"}


def _describe_expected(names: list[str]) -> str:
    if len(names) > 3 and {"identifier", "integer"} <= set(names):
        return "an expression"
    if len(names) > 3 and set(names) <= _OPERATORS:
        return "an operator"
    words = list(dict.fromkeys(_TOKEN_WORDS.get(n, f"`{n}`") for n in names))
    if len(words) == 1:
        return words[0]
    if len(words) == 2:
        return f"{words[0]} or {words[1]}"
    return "one of " + ", ".join(words)


def syntax_error(path: str, data: bytes, tree: ts.Tree) -> Diagnostic:
    """The E0 diagnostic of the first syntax error of a tree that has one."""
    culprit = _first_culprit(tree, data)
    found = _describe_found(culprit.node, data)
    end = culprit.node.end_byte if culprit.node is not None else culprit.start
    span = Span(path, culprit.start, max(end, culprit.start))
    if culprit.node is not None and culprit.node.is_error and culprit.node.child_count == 0:
        char = data[culprit.start : culprit.node.end_byte].decode("utf-8", errors="replace")
        if char.startswith('"'):
            return Diagnostic(
                "E0003",
                Severity.ERROR,
                "unterminated string",
                (Label(span, 'this string has no closing `"` on its line'),),
            )
        return Diagnostic(
            "E0002",
            Severity.ERROR,
            f"unexpected character `{char}`",
            (Label(span, "no token of Presk starts with this character"),),
        )
    expected = _repairs(data, culprit) or ([culprit.missing] if culprit.missing else [])
    if expected:
        what = _describe_expected(expected)
        return Diagnostic(
            "E0010",
            Severity.ERROR,
            f"expected {what}, found {found}",
            (Label(span, f"expected {what} here"),),
        )
    return Diagnostic(
        "E0011",
        Severity.ERROR,
        f"unexpected {found}",
        (Label(span, "the parser cannot take this here"),),
    )


def read_source(path: str) -> Source:
    """The text of `path`, or DiagnosticError E0001 when it cannot be read as UTF-8 text."""
    try:
        data = open(path, "rb").read()
    except OSError as e:
        reason = e.strerror or str(e)
        raise DiagnosticError(
            [Diagnostic("E0001", Severity.ERROR, f"cannot read `{path}`: {reason.lower()}")]
        ) from None
    try:
        return Source(path, data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E0001",
                    Severity.ERROR,
                    f"`{path}` is not UTF-8 text (byte {e.start} is not valid)",
                )
            ]
        ) from None


def parse_file(path: str) -> tuple[Source, A.SourceFile]:
    """Read and parse `path`: its source (for diagnostics) and its AST."""
    source = read_source(path)
    return source, parse_source(source)
