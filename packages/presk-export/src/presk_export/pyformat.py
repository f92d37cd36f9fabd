"""Python text laid out as `ruff format` lays it out, for the code the export writes.

The templates are written in ruff's format and the rules write ruff's spacing (`x**2`,
double quotes); what is left is a statement longer than a line, which `lay_out` breaks as
ruff does: a document of groups, soft line breaks and indents built from the statement's
syntax tree (ruff's own model, after Prettier), then printed at 88 columns, a group flat
when it and what follows it up to the next possible break fit. Only the constructs the
export writes are covered; a statement of any other kind is left as it is (the export's
tests run `ruff format --check` on every file they export, so a drift is caught there).
"""

from __future__ import annotations

import ast
import io
import itertools
import tokenize
from dataclasses import dataclass

from presk_export.pyprint import (
    LINE,
    LINE_BREAK,
    SOFT,
    WIDTH,
    BestFit,
    FitsExpanded,
    Group,
    GroupIf,
    IfBreaks,
    Indent,
    Printer,
    Suffix,
    width,
)


def py_literal(value: object) -> str:
    """`repr` of a constant (str, number, bool, None, and lists, tuples and dicts of them)
    with strings quoted as ruff quotes them: double quotes unless that needs more escapes."""
    match value:
        case str():
            return _string(value)
        case bool() | None | int() | float():
            return repr(value)
        case list():
            return "[" + ", ".join(py_literal(v) for v in value) + "]"
        case tuple() if len(value) == 1:
            return f"({py_literal(value[0])},)"
        case tuple():
            return "(" + ", ".join(py_literal(v) for v in value) + ")"
        case dict():
            return (
                "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
            )
    raise TypeError(f"no Python literal for {type(value).__name__}")


def _string(s: str) -> str:
    text = repr(s)
    if text[0] == '"' or s.count('"') > s.count("'"):
        return text  # repr chose double quotes, or single quotes need fewer escapes
    return '"' + text[1:-1].replace("\\'", "'").replace('"', '\\"') + '"'


# ---- expressions ---------------------------------------------------------------------------

# Where an expression is formatted: at the top of a statement, inside optional parentheses
# (group `Opt.id`, which adds them if the expression breaks), or inside brackets.
TOP = None


@dataclass(frozen=True, slots=True)
class Opt:
    id: int


PAREN = "paren"

# Binding, loosest first (ruff's OperatorPrecedence, reversed).
PRECEDENCE = {
    ast.Or: 1, ast.And: 2, "cmp": 4, ast.BitOr: 5, ast.BitXor: 6, ast.BitAnd: 7,
    ast.LShift: 8, ast.RShift: 8, ast.Add: 9, ast.Sub: 9, ast.Mult: 10, ast.Div: 10,
    ast.FloorDiv: 10, ast.Mod: 10, ast.MatMult: 10, ast.Pow: 12,
}  # fmt: skip
OPERATORS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.MatMult: "@", ast.Pow: "**", ast.BitOr: "|", ast.BitXor: "^",
    ast.BitAnd: "&", ast.LShift: "<<", ast.RShift: ">>", ast.And: "and", ast.Or: "or",
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}  # fmt: skip
UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not "}


class Unsupported(Exception):
    """A construct `lay_out` does not know: the statement is left as written."""


class Statement:
    """One statement on one line: its syntax tree, and its document as ruff builds it (a
    leaf is written as the source writes it)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.bytes = source.encode("utf-8")
        self.ids = itertools.count()
        (self.stmt,) = ast.parse(source).body
        self.parens = self._parenthesized()

    def text(self, node: ast.AST) -> str:
        return self.bytes[node.col_offset : node.end_col_offset].decode("utf-8")

    def _parenthesized(self) -> set[int]:
        """The ids of the nodes the source wraps in parentheses of their own: `(` before,
        `)` after, and the `(` not a call's own around its only argument."""
        own = {}  # id of a call's only argument -> the offset of the call's `(`
        for n in ast.walk(self.stmt):
            if isinstance(n, ast.Call) and len(n.args) == 1 and not n.keywords:
                own[id(n.args[0])] = self.bytes.index(b"(", n.func.end_col_offset)
        out = set()
        for n in ast.walk(self.stmt):
            if not isinstance(n, ast.expr):
                continue
            before = self.bytes[: n.col_offset].rstrip()
            after = self.bytes[n.end_col_offset :].lstrip()
            if before.endswith(b"(") and after.startswith(b")"):
                if own.get(id(n)) != len(before) - 1:
                    out.add(id(n))
        return out

    def parenthesized(self, node: ast.AST) -> bool:
        return id(node) in self.parens

    def document(self, comment: str) -> object:
        suffix = [Suffix("  " + comment)] if comment else []
        match self.stmt:
            case ast.Assign(targets=targets, value=value):
                head = "".join(f"{self.text(t)} = " for t in targets)
                return [head, *self.maybe_parenthesize(value, suffix)]
            case ast.Return(value=value) if value is not None:
                return ["return ", *self.maybe_parenthesize(value, suffix)]
            case ast.Assert(test=test, msg=None):
                return ["assert ", *self.maybe_parenthesize(test, suffix)]
            case ast.Expr(value=ast.Call() as value):
                return self.maybe_parenthesize(value, suffix)
        raise Unsupported(type(self.stmt).__name__)

    def maybe_parenthesize(self, node: ast.expr, suffix: list) -> list:
        """ruff's `maybe_parenthesize_expression(…, Parenthesize::IfBreaks)`, then the
        statement's trailing comment."""
        match self.needs_parentheses(node):
            case "never":
                return [self.expr(node, TOP), *suffix]
            case "best_fit":
                return [self.best_fit(node, suffix)]
        return [self.optional_parentheses(node), *suffix]

    def best_fit(self, node: ast.expr, suffix: list) -> object:
        """ruff's `best_fit_parenthesize`: on one line; else alone in parentheses, if it fits
        there; else on one line all the same. A name or a literal keeps the comment inside
        the parentheses."""
        flat = self.expr(node, TOP)
        inline = isinstance(node, ast.Name | ast.Constant | ast.JoinedStr)
        inside, after = (suffix, []) if inline else ([], suffix)
        return BestFit(
            [
                [flat, *suffix],
                ["(", Indent([LINE_BREAK, flat, *inside]), LINE_BREAK, ")", *after],
                [flat, *suffix],
            ]
        )

    def optional_parentheses(self, node: ast.expr) -> object:
        gid = next(self.ids)
        if can_omit_optional_parentheses(node, self):
            inner = self.expr(node, Opt(gid))
            body = IfBreaks(gid, Indent([SOFT, inner]), inner)
            return Group([IfBreaks(gid, "("), body, IfBreaks(gid, [SOFT, ")"])], gid)
        return Group(["(", Indent([SOFT, self.expr(node, PAREN)]), SOFT, ")"], gid)

    def needs_parentheses(self, node: ast.expr) -> str:
        if self.parenthesized(node):
            return "never"
        match node:
            case ast.Call() | ast.Attribute() | ast.Subscript() if fluent(node, self):
                return "multiline"
            case ast.Call(func=func, args=[], keywords=[]):
                return self.needs_parentheses(func)  # `f()` cannot break
            case ast.Call() | ast.Subscript():
                return "never"
            case ast.Attribute(value=ast.Name()):
                return "best_fit"
            case ast.Attribute(value=value):
                return "never" if self.parenthesized(value) else self.needs_parentheses(value)
            case ast.Name() | ast.Constant() | ast.JoinedStr():
                return "best_fit"
            case ast.List() | ast.Tuple() | ast.Dict() | ast.ListComp() | ast.Set():
                return "never"
        return "multiline"

    # ---- the expression, at `level` (TOP, Opt(id) or PAREN) -----------------------------

    def expr(self, node: ast.expr, level, chain: bool = False) -> object:
        if self.parenthesized(node):
            return self.brackets("(", self.expr(_Bare(node), PAREN), ")", level)
        if isinstance(node, _Bare):
            node = node.node
        match node:
            case ast.Name() | ast.Constant() | ast.JoinedStr() | ast.Slice():
                return self.text(node)
            case ast.Attribute() | ast.Call() | ast.Subscript() if not chain:
                links = self.link(node, level, level != TOP and fluent(node, self))
                return Group(links) if level != TOP and fluent(node, self) else links
            case ast.BinOp() | ast.Compare() | ast.BoolOp():
                operands, operators = self.flatten(node)
                return _group_if(level, self.split(operands, operators, level))
            case ast.UnaryOp(op=op, operand=operand):
                return [UNARY[type(op)], self.expr(operand, level)]
            case ast.Tuple(elts=elts) if self.text(node).startswith("("):
                items = [self.expr(x, PAREN) for x in elts]
                return self.sequence("(", items, ")", level, single=len(elts) == 1)
            case ast.List(elts=elts):
                return self.sequence("[", [self.expr(x, PAREN) for x in elts], "]", level)
            case ast.Dict(keys=keys, values=values) if None not in keys:
                pairs = zip(keys, values, strict=True)
                items = [[self.expr(k, PAREN), ": ", self.expr(v, PAREN)] for k, v in pairs]
                return self.sequence("{", items, "}", level)
            case ast.ListComp(elt=elt, generators=[ast.comprehension(is_async=0) as gen]):
                parts = [self.expr(elt, PAREN), LINE, "for ", self.text(gen.target), " in "]
                parts.append(self.expr(gen.iter, PAREN))
                for cond in gen.ifs:
                    parts += [LINE, "if ", self.expr(cond, PAREN)]
                return self.brackets("[", Group(parts), "]", level)
            case ast.Lambda(args=args, body=body) if not args.kwonlyargs and not args.defaults:
                names = ", ".join(a.arg for a in args.args)
                return [f"lambda {names}: " if names else "lambda: ", self.expr(body, level)]
            case ast.IfExp(body=body, test=test, orelse=orelse):
                line = _line(level)
                parts = [self.expr(body, level), line, "if ", self.expr(test, level), line]
                return _group_if(level, [*parts, "else ", self.expr(orelse, level)])
            case ast.Starred(value=value):
                return ["*", self.expr(value, level)]
        raise Unsupported(type(node).__name__)

    def link(self, node: ast.expr, level, broken: bool) -> object:
        """A link of a call chain (`a.b(c)[d].e`): its value, then what it adds; in a fluent
        chain, a break before each dot that follows brackets."""
        match node:
            case ast.Attribute(value=value, attr=attr):
                dot = [_soft(level)] if broken and self.ends_in_brackets(value) else []
                return [self.link(value, level, broken), *dot, "." + attr]
            case ast.Call(func=func, args=args, keywords=keywords):
                items = [self.expr(a, PAREN) for a in args]
                items += [
                    [f"{k.arg}=" if k.arg else "**", self.expr(k.value, PAREN)] for k in keywords
                ]
                after = self.brackets("(", self.commas(items), ")", level) if items else "()"
                return [self.link(func, level, broken), after]
            case ast.Subscript(value=value, slice=index):
                items = index.elts if isinstance(index, ast.Tuple) else [index]
                inner = self.commas([self.expr(x, PAREN) for x in items])
                return [self.link(value, level, broken), self.brackets("[", inner, "]", level)]
        return self.expr(node, level, chain=True)

    def ends_in_brackets(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Call | ast.Subscript) or self.parenthesized(node)

    def brackets(self, left: str, inner: object, right: str, level) -> object:
        """ruff's `parenthesized`: a group that breaks its brackets, around the contents'
        own group (so that they may stay on one line of their own)."""
        group = Group([left, Indent([SOFT, inner]), SOFT, right])
        return FitsExpanded(level.id, group) if isinstance(level, Opt) else group

    def commas(self, items: list) -> object:
        """A call's arguments or a subscript's items: a group of their own inside the
        brackets' group, with a trailing comma when it breaks."""
        gid = next(self.ids)
        return Group(_separated(items, IfBreaks(gid, ",") if len(items) > 1 else ""), gid)

    def sequence(self, left: str, items: list, right: str, level, single=False) -> object:
        """A tuple, list or dict: one group with its brackets, one item a line when it
        breaks (a single-element tuple's comma always there)."""
        gid = next(self.ids)
        inner = _separated(items, "," if single else IfBreaks(gid, ",") if len(items) > 1 else "")
        group = Group([left, Indent([SOFT, inner]), SOFT, right], gid)
        return FitsExpanded(level.id, group) if isinstance(level, Opt) else group

    def flatten(self, node: ast.expr) -> tuple[list, list]:
        """The operands and operators of a chain of unparenthesized binary operators,
        comparisons and boolean operators."""
        match node:
            case ast.BinOp(left=left, op=op, right=right):
                lo, lops = self._operand(left)
                ro, rops = self._operand(right)
                return lo + ro, [*lops, op, *rops]
            case ast.Compare(left=left, ops=ops, comparators=rest):
                operands, operators = self._operand(left)
                for op, x in zip(ops, rest, strict=True):
                    xo, xops = self._operand(x)
                    operands, operators = operands + xo, [*operators, op, *xops]
                return operands, operators
            case ast.BoolOp(op=op, values=values):
                operands, operators = [], []
                for i, x in enumerate(values):
                    xo, xops = self._operand(x)
                    operands, operators = operands + xo, operators + [op] * (i > 0) + xops
                return operands, operators
        return [node], []

    def _operand(self, node: ast.expr) -> tuple[list, list]:
        chained = isinstance(node, ast.BinOp | ast.Compare | ast.BoolOp)
        return self.flatten(node) if chained and not self.parenthesized(node) else ([node], [])

    def split(self, operands: list, operators: list, level) -> object:
        """Break before the loosest operators; each run of tighter ones a group of its own."""
        if not operators:
            return self.expr(operands[0], level)
        loosest = min(_precedence(op) for op in operators)
        if loosest == PRECEDENCE[ast.Pow] and all(map(self.simple_power, operands)):
            parts: list = [self.expr(operands[0], level)]
            for x in operands[1:]:
                parts += ["**", self.expr(x, level)]
            return parts
        runs, joins, start = [], [], 0
        for i, op in enumerate(operators):
            if _precedence(op) == loosest:
                runs.append((operands[start : i + 1], operators[start:i]))
                joins.append(op)
                start = i + 1
        runs.append((operands[start:], operators[start:]))
        parts = []
        for i, (xs, xops) in enumerate(runs):
            run = self.split(xs, xops, level)
            if i:
                parts += [_line(level), OPERATORS[type(joins[i - 1])], " "]
            parts.append(_group_if(level, run) if xops else run)
        return parts

    def simple_power(self, node: ast.expr) -> bool:
        """ruff writes `x**2`, without spaces, when both operands are this simple."""
        if self.parenthesized(node):
            return False
        match node:
            case ast.Name() | ast.Constant(value=int() | float() | complex() | None | bool()):
                return True
            case ast.UnaryOp(op=op, operand=x) if not isinstance(op, ast.Not):
                return self.simple_power(x)
            case ast.Attribute(value=x):
                return self.simple_power(x)
        return False


@dataclass(frozen=True, slots=True)
class _Bare:
    """A parenthesized node, once its parentheses are written."""

    node: ast.expr


def _separated(items: list, trailing: object) -> list:
    parts: list = []
    for i, item in enumerate(items):
        if i:
            parts += [",", LINE]
        parts.append(item)
    return [*parts, trailing]


def _precedence(op) -> int:
    return PRECEDENCE["cmp"] if isinstance(op, ast.cmpop) else PRECEDENCE[type(op)]


def _line(level) -> object:
    """A break between operands: inside brackets, or once optional parentheses are added."""
    if level == PAREN:
        return LINE
    return IfBreaks(level.id, LINE, " ") if isinstance(level, Opt) else " "


def _soft(level) -> object:
    if level == PAREN:
        return SOFT
    return IfBreaks(level.id, SOFT) if isinstance(level, Opt) else ""


def _group_if(level, contents) -> object:
    if level == PAREN:
        return Group(contents)
    return GroupIf(level.id, contents) if isinstance(level, Opt) else contents


def fluent(node: ast.expr, stmt: Statement) -> bool:
    """ruff's fluent call chain: two attributes or more whose value ends in brackets (a
    parenthesized root counts as one), walking in from the right."""
    count = 0
    while True:
        match node:
            case ast.Attribute(value=value):
                if stmt.parenthesized(value):
                    count += 1
                    break
                count += isinstance(value, ast.Call | ast.Subscript)
                node = value
            case ast.Call(func=inner) | ast.Subscript(value=inner):
                if stmt.parenthesized(inner):
                    break
                node = inner
            case _:
                break
    return count >= 2


# ruff's OperatorPrecedence, tightest first, for `can_omit_optional_parentheses`.
_ATTRIBUTE, _INVERT, _CONDITIONAL = 1, 3, 15
_OMIT_RANK = {
    ast.Pow: 2, ast.Mult: 4, ast.Div: 4, ast.FloorDiv: 4, ast.Mod: 4, ast.MatMult: 4,
    ast.Add: 5, ast.Sub: 5, ast.LShift: 6, ast.RShift: 6, ast.BitAnd: 7, ast.BitXor: 8,
    ast.BitOr: 9, "cmp": 10, "bool": 13,
}  # fmt: skip


def can_omit_optional_parentheses(node: ast.expr, stmt: Statement) -> bool:
    """ruff's rule (after Black's `_maybe_split_omitting_optional_parens`): no parentheses
    when one operator of the loosest kind is there at most and the expression starts or
    ends with non-empty brackets, which can break instead."""
    v = _OmitVisitor(stmt)
    v.visit(node)
    if not v.any_brackets or v.count > 1:
        return False
    if v.rank in (0, _ATTRIBUTE):
        return True

    def bracketed(x: ast.expr | None) -> bool:
        if x is None or isinstance(x, ast.Subscript):
            return False
        if stmt.parenthesized(x):
            return True
        match x:
            case ast.Call(args=a, keywords=k):
                return bool(a or k)
            case ast.List(elts=e) | ast.Tuple(elts=e) | ast.Set(elts=e):
                return bool(e)
            case ast.Dict(keys=k):
                return bool(k)
            case ast.ListComp() | ast.SetComp() | ast.DictComp() | ast.GeneratorExp():
                return True
        return False

    return bracketed(v.last) or (v.first not in (None, "token") and bracketed(v.first))


class _OmitVisitor:
    def __init__(self, stmt: Statement) -> None:
        self.stmt = stmt
        self.rank, self.count = 0, 0
        self.any_brackets = False
        self.first: object = None
        self.last: ast.expr | None = None

    def update(self, rank: int, count: int = 1) -> None:
        if rank > self.rank:
            self.rank, self.count = rank, count
        elif rank == self.rank:
            self.count += count

    def visit(self, node: ast.expr) -> None:
        self.last = node
        if self.stmt.parenthesized(node):
            self.any_brackets = True
        else:
            self.sub(node)
        if self.first is None:
            self.first = node

    def sub(self, node: ast.expr) -> None:
        match node:
            case ast.Dict() | ast.List() | ast.Set() | ast.ListComp() | ast.SetComp():
                self.any_brackets = True
                return
            case ast.DictComp() | ast.Tuple() | ast.GeneratorExp():
                self.any_brackets = True  # the export writes them in parentheses
                return
            case ast.BoolOp(values=values):
                self.update(_OMIT_RANK["bool"], len(values) - 1)
            case ast.BinOp(op=op):
                self.update(_OMIT_RANK[type(op)])
            case ast.IfExp():
                self.update(_CONDITIONAL, 2)
            case ast.Compare(ops=ops):
                self.update(_OMIT_RANK["cmp"], len(ops))
            case ast.Call(func=func):
                self.any_brackets = True
                self.visit(func)
                self.last = node
                return
            case ast.Subscript(value=value):
                self.any_brackets = True
                self.visit(value)
                self.last = node
                return
            case ast.Attribute(value=value):
                self.visit(value)
                if self.stmt.parenthesized(value) or _own_brackets(value):
                    self.update(_ATTRIBUTE)
                self.last = node
                return
            case ast.UnaryOp(op=op):
                if isinstance(op, ast.Invert):
                    self.update(_INVERT)
                if self.first is None:
                    self.first = "token"
            case ast.Lambda() | ast.Starred():
                if self.first is None:
                    self.first = "token"
            case _:
                return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.visit(child)


def _own_brackets(node: ast.expr) -> bool:
    return isinstance(
        node, ast.Call | ast.Subscript | ast.List | ast.Tuple | ast.Dict | ast.Set | ast.ListComp
    )


# ---- the driver ----------------------------------------------------------------------------


def lay_out(text: str) -> str:
    """`text` with each statement longer than a line broken as ruff breaks it; the rest as
    it is. A statement is laid out when it is one line of its own; one of a kind this does
    not know is left as written."""
    lines = text.split("\n")
    if not any(width(line) > WIDTH for line in lines):
        return text
    single = _one_line_statements(text)
    for row, comment in single.items():
        line = lines[row]
        if width(line) <= WIDTH:
            continue
        indent = len(line) - len(line.lstrip(" "))
        code = line[indent:]
        if comment:
            code = code[: code.rindex(comment)].rstrip()
        try:
            doc = Statement(code).document(comment)
        except (Unsupported, SyntaxError, ValueError):
            continue
        lines[row] = " " * indent + Printer().print(doc, indent)
    return "\n".join(lines)


def _one_line_statements(text: str) -> dict[int, str]:
    """Row (from 0) -> its trailing comment ("" if none), for each statement that starts and
    ends on one row."""
    out: dict[int, str] = {}
    start, comment = None, ""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    for tok in tokens:
        if tok.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
            if tok.type == tokenize.NL and start is None:
                comment = ""
            continue
        if tok.type == tokenize.COMMENT:
            comment = tok.string
            continue
        if tok.type == tokenize.NEWLINE:
            if start is not None and start == tok.start[0]:
                out[start - 1] = comment
            start, comment = None, ""
            continue
        if start is None:
            start = tok.start[0]
    return out


__all__ = ["WIDTH", "lay_out", "py_literal", "width"]
