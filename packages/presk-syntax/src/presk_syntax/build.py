"""From a tree-sitter tree without errors to the AST (presk_syntax.ast).

One builder per node kind, in a table keyed by the grammar's node names, as every stage
keeps its rules; the grammar (grammar/grammar.js) is the reference for the fields read
here.
"""

from __future__ import annotations

from collections.abc import Callable

from tree_sitter import Node

from presk_syntax import ast as A
from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Label, Severity
from presk_syntax.literals import MAX_DIGITS, MAX_EXPONENT, float_too_long
from presk_syntax.span import Span


def _too_long(text: str, span: Span, what: str) -> Diagnostic:
    shown = text if len(text) <= 24 else f"{text[:10]}…{text[-10:]}"
    limit = f"{MAX_DIGITS} digits" if what == "digits" else f"an exponent of ±{MAX_EXPONENT}"
    return Diagnostic(
        "E0014",
        Severity.ERROR,
        f"the number `{shown}` is too long to be read",
        (Label(span, f"over {limit}"),),
        note="no type of Presk holds a number of this size: f64's reach 1.8e308, nat's 2^63 - 1",
    )


def _unnamed_slice(span: Span, text: str) -> Diagnostic:
    return Diagnostic(
        "E0015",
        Severity.ERROR,
        "a slice names the axis it cuts",
        (Label(span, "which axis?"),),
        help=f"name one of the tensor's axes: `[seq: {text}]` cuts the axis `seq`",
    )


# The ASCII synonyms, folded into the spelling that diagnostics print.
OPERATORS = {"@": "·", "≤": "<=", "≥": ">=", "≠": "!="}


class Builder:
    """Builds the AST of one file; `text` is its UTF-8 source."""

    def __init__(self, path: str, text: bytes) -> None:
        self.path = path
        self.text = text

    # ---- helpers -------------------------------------------------------------------------

    def span(self, node: Node) -> Span:
        return Span(self.path, node.start_byte, node.end_byte)

    def source(self, node: Node) -> str:
        return self.text[node.start_byte : node.end_byte].decode("utf-8")

    def name(self, node: Node, field: str = "name") -> str:
        return self.source(node.child_by_field_name(field))

    def opt(self, node: Node, field: str) -> object | None:
        child = node.child_by_field_name(field)
        return None if child is None else self.build(child)

    def many(self, node: Node, field: str) -> tuple:
        return tuple(self.build(c) for c in node.children_by_field_name(field))

    def named(self, node: Node) -> tuple:
        """The node's named children that are not comments, built."""
        return tuple(self.build(c) for c in node.named_children if c.type != "comment")

    def build(self, node: Node):
        rule = _BY_KIND.get(node.kind_id)
        if rule is None:
            rule = BUILDERS.get(node.type)
            if rule is None:
                raise ValueError(f"no AST builder for the node `{node.type}`")
            _BY_KIND[node.kind_id] = rule  # aliases share a name, not always a kind id
        return rule(self, node)

    # ---- declarations --------------------------------------------------------------------

    def source_file(self, node: Node) -> A.SourceFile:
        return A.SourceFile(self.path, self.named(node), self.span(node))

    def import_decl(self, node: Node) -> A.Import:
        path = self.string_value(node.child_by_field_name("path"))
        return A.Import(path, self.name(node, "alias"), self.span(node))

    def const_decl(self, node: Node) -> A.Const:
        name = node.child_by_field_name("name")
        return A.Const(
            self.source(name),
            self.opt(node, "type"),
            self.opt(node, "value"),
            self.span(node),
            self.span(name),
        )

    def static_assert(self, node: Node) -> A.StaticAssert:
        return A.StaticAssert(self.opt(node, "condition"), self.span(node))

    def dim_decl(self, node: Node) -> A.DimDecl:
        return A.DimDecl(
            self.name(node), self.opt(node, "bound"), self.span(node), self.opt(node, "lower")
        )

    def type_decl(self, node: Node) -> A.TypeAliasDecl:
        return A.TypeAliasDecl(self.name(node), self.opt(node, "type"), self.span(node))

    def type_params(self, node: Node | None) -> tuple[A.TypeParam, ...]:
        if node is None:
            return ()
        params = []
        for group in node.named_children:
            if group.type != "type_param_group":
                continue
            kind = self.name(group, "kind")
            for n in group.children_by_field_name("name"):
                params.append(A.TypeParam(self.source(n), kind, self.span(n)))
        return tuple(params)

    def module_decl(self, node: Node) -> A.Module:
        name = node.child_by_field_name("name")
        return A.Module(
            self.source(name),
            self.type_params(node.child_by_field_name("type_params")),
            self.many(node, "item"),
            self.span(node),
            self.span(name),
        )

    def param_decl(self, node: Node) -> A.Param:
        return A.Param(
            self.name(node), self.opt(node, "type"), self.opt(node, "init"), self.span(node)
        )

    def use_decl(self, node: Node) -> A.Use:
        return A.Use(self.name(node), self.opt(node, "module"), self.span(node))

    def stack_ref(self, node: Node) -> A.StackRef:
        return A.StackRef(self.opt(node, "count"), self.opt(node, "module"), self.span(node))

    def module_ref(self, node: Node) -> A.ModuleRef:
        return A.ModuleRef(self.opt(node, "name"), self.type_args(node), self.span(node))

    def type_args(self, node: Node) -> tuple | None:
        args = node.child_by_field_name("args")
        return None if args is None else self.named(args)

    def fn_decl(self, node: Node) -> A.Fn:
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        effects = node.child_by_field_name("effects")
        equals = body.prev_sibling  # the `=` before the body
        return A.Fn(
            name=self.source(name),
            type_params=self.type_params(node.child_by_field_name("type_params")),
            params=self.named(node.child_by_field_name("params")),
            return_type=self.opt(node, "return_type"),
            effects=()
            if effects is None
            else tuple(self.source(e) for e in effects.children_by_field_name("effect")),
            body=self.build(body),
            span=self.span(node),
            name_span=self.span(name),
            header_span=Span(self.path, node.start_byte, equals.end_byte),
        )

    def parameter(self, node: Node) -> A.Parameter:
        return A.Parameter(
            self.name(node), self.opt(node, "type"), self.opt(node, "default"), self.span(node)
        )

    def block(self, node: Node) -> A.Block:
        return A.Block(self.many(node, "let"), self.opt(node, "result"), self.span(node))

    def let_binding(self, node: Node) -> A.Let:
        value = node.child_by_field_name("value")
        span = Span(self.path, node.start_byte, value.end_byte)  # without the line break
        return A.Let(self.pattern(node.child_by_field_name("pattern")), self.build(value), span)

    def pattern(self, node: Node) -> A.PVar | A.PTuple:
        if node.type == "identifier":
            return A.PVar(self.source(node), self.span(node))
        elements = tuple(self.pattern(c) for c in node.named_children if c.type != "comment")
        return A.PTuple(elements, self.span(node))

    def optimizer_decl(self, node: Node) -> A.Optimizer:
        return A.Optimizer(self.name(node), self.many(node, "field"), self.span(node))

    def training_decl(self, node: Node) -> A.Training:
        return A.Training(self.many(node, "field"), self.span(node))

    def serve_decl(self, node: Node) -> A.Serve:
        return A.Serve(self.many(node, "field"), self.span(node))

    def block_field(self, node: Node) -> A.Field:
        last = node.child_by_field_name("value") or node.child_by_field_name("type")
        span = Span(self.path, node.start_byte, last.end_byte)
        return A.Field(self.name(node), self.opt(node, "type"), self.opt(node, "value"), span)

    def checkpoint_field(self, node: Node) -> A.Checkpoint:
        last = node.child_by_field_name("dir")
        return A.Checkpoint(
            int(self.name(node, "every")),
            self.string_value(last),
            Span(self.path, node.start_byte, last.end_byte),
        )

    # ---- types ---------------------------------------------------------------------------

    def tensor_type(self, node: Node) -> A.TensorType:
        element = node.child_by_field_name("element")
        shape = node.child_by_field_name("shape")
        kind = "bool" if element.type == "bool" else "ℝ"
        return A.TensorType(kind, None if shape is None else self.named(shape), self.span(node))

    def idx_type(self, node: Node) -> A.IdxType:
        shape = self.named(node.child_by_field_name("shape"))
        return A.IdxType(self.opt(node, "bound"), shape, self.span(node))

    def prefix(self, node: Node) -> A.Prefix:
        return A.Prefix(self.span(node))

    def axis(self, node: Node) -> A.Axis:
        name = node.child_by_field_name("name")
        return A.Axis(
            None if name is None else self.source(name), self.opt(node, "length"), self.span(node)
        )

    def params_type(self, node: Node) -> A.ParamsType:
        return A.ParamsType(self.opt(node, "module"), self.span(node))

    def tuple_type(self, node: Node) -> A.TupleType:
        return A.TupleType(self.named(node), self.span(node))

    def named_type(self, node: Node) -> A.NamedType:
        return A.NamedType(self.opt(node, "name"), self.type_args(node), self.span(node))

    def qualified_name(self, node: Node) -> A.QualName:
        parts = tuple(self.source(c) for c in node.named_children if c.type == "identifier")
        return A.QualName(parts, self.span(node))

    # ---- expressions ---------------------------------------------------------------------

    def identifier(self, node: Node) -> A.Var:
        start, end = node.start_byte, node.end_byte
        return A.Var(self.text[start:end].decode("utf-8"), Span(self.path, start, end))

    def integer(self, node: Node) -> A.IntLit:
        text = self.source(node)
        if len(text) > MAX_DIGITS:
            raise DiagnosticError([_too_long(text, self.span(node), "digits")])
        return A.IntLit(int(text), self.span(node))

    def float(self, node: Node) -> A.FloatLit:
        text = self.source(node)
        if what := float_too_long(text):
            raise DiagnosticError([_too_long(text, self.span(node), what)])
        return A.FloatLit(text, self.span(node))

    def string(self, node: Node) -> A.StrLit:
        return A.StrLit(self.string_value(node), self.span(node))

    def string_value(self, node: Node) -> str:
        return _unescape(self.source(node)[1:-1])

    def binary(self, node: Node) -> A.Binary:
        op = self.source(node.child_by_field_name("op"))
        return A.Binary(
            OPERATORS.get(op, op), self.opt(node, "left"), self.opt(node, "right"), self.span(node)
        )

    def unary(self, node: Node) -> A.Unary:
        return A.Unary(self.name(node, "op"), self.opt(node, "operand"), self.span(node))

    def call(self, node: Node) -> A.Call:
        args = self.named(node.child_by_field_name("args"))
        return A.Call(self.opt(node, "function"), args, self.span(node))

    def axis_argument(self, node: Node) -> A.AxisArg:
        return A.AxisArg(self.name(node), self.span(node))

    def keyword_argument(self, node: Node) -> A.KeywordArg:
        return A.KeywordArg(self.name(node), self.opt(node, "value"), self.span(node))

    def shape_argument(self, node: Node) -> A.ShapeArg | A.Ascription:
        name = node.child_by_field_name("name")
        length = node.child_by_field_name("length")
        if length.type in ("tensor_type", "idx_type"):  # `sqrt(HD : ℝ)`
            return A.Ascription(self.build(name), self.build(length), self.span(node))
        return A.ShapeArg(self.source(name), self.build(length), self.span(node))

    def field(self, node: Node) -> A.FieldAccess:
        return A.FieldAccess(self.opt(node, "object"), self.name(node), self.span(node))

    def slice(self, node: Node) -> A.Slice:
        ranges = self.many(node, "range")
        return A.Slice(self.opt(node, "object"), ranges, self.span(node))

    def slice_range(self, node: Node) -> A.SliceRange:
        name = node.child_by_field_name("name")
        if name is None:  # `x[0 .. 2]`: an axis is named, never placed (issue 29)
            raise DiagnosticError([_unnamed_slice(self.span(node), self.source(node))])
        start, stop = self.opt(node, "start"), self.opt(node, "stop")
        return A.SliceRange(self.source(name), start, stop, self.span(node))

    def ein(self, node: Node) -> A.Ein:
        axes = tuple(self.source(a) for a in node.children_by_field_name("axis"))
        return A.Ein(axes, self.opt(node, "operand"), self.span(node))

    def stream(self, node: Node) -> A.Stream:
        return A.Stream(self.string_value(node.child_by_field_name("path")), self.span(node))

    def paren(self, node: Node):
        return self.opt(node, "expr")

    def ascription(self, node: Node) -> A.Ascription:
        return A.Ascription(self.opt(node, "expr"), self.opt(node, "type"), self.span(node))

    def tuple(self, node: Node) -> A.TupleExpr:
        return A.TupleExpr(self.many(node, "element"), self.span(node))

    def lambda_(self, node: Node) -> A.Lambda:
        params = tuple(self.source(p) for p in node.children_by_field_name("param"))
        return A.Lambda(params, self.opt(node, "body"), self.span(node))


_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def _unescape(raw: str) -> str:
    """The value of a string literal's body: `\\n`, `\\t`, `\\"` and `\\\\` are escapes."""
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw):
            out.append(_ESCAPES.get(raw[i + 1], raw[i + 1]))
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)


BUILDERS: dict[str, Callable[[Builder, Node], object]] = {
    name: getattr(Builder, name)
    for name in (
        "source_file import_decl const_decl static_assert dim_decl type_decl module_decl"
        " param_decl use_decl stack_ref module_ref fn_decl parameter block let_binding"
        " optimizer_decl training_decl serve_decl block_field checkpoint_field"
        " tensor_type idx_type prefix axis params_type tuple_type named_type qualified_name"
        " identifier integer float string binary unary call axis_argument keyword_argument"
        " shape_argument field slice slice_range ein stream paren ascription tuple"
    ).split()
}
BUILDERS["lambda"] = Builder.lambda_
_BY_KIND: dict[int, Callable[[Builder, Node], object]] = {}
