"""The abstract syntax tree of a Presk file: frozen dataclasses, each with its source span.

The tree is what the programmer wrote, with the ASCII synonyms folded into one spelling
(`@` is `·`, `Real` is `ℝ`, `\\` is `λ`, `≤` is `<=`, `≥` is `>=`, `≠` is `!=`) and the
parentheses dropped (a node's span still covers what it was parsed from). Names that
diagnostics point at keep a span of their own (`name_span`).

Lengths in types (`4*D`, `D / H`) are expressions of the same classes as the rest
(`IntLit`, `Var`, `Binary`, `FieldAccess`): the elaborator evaluates them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from presk_syntax.span import Span

# ---- expressions -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Var:
    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class IntLit:
    value: int
    span: Span


@dataclass(frozen=True, slots=True)
class FloatLit:
    text: str  # as written (`1e-6`), so that no digit is lost before elaboration
    span: Span


@dataclass(frozen=True, slots=True)
class StrLit:
    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # + - * / % ^ · == != < <= > >= |>
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # -
    operand: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class AxisArg:
    """`axis model`: the axis a reduction or a softmax acts on."""

    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class KeywordArg:
    """`where = m`, `std = 0.02`."""

    name: str
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class ShapeArg:
    """`seq: T`: an axis given by its name and length (`causal_mask(seq: T)`)."""

    name: str
    length: Expr
    span: Span


Arg: TypeAlias = "Expr | AxisArg | KeywordArg | ShapeArg"


@dataclass(frozen=True, slots=True)
class Call:
    function: Expr
    args: tuple[Arg, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class FieldAccess:
    """`net.apply`, `lin.Linear`, `t.Tower.apply`: resolved by the elaborator."""

    object: Expr
    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class Ein:
    """`ein[batch, seq](a * b)`: a contraction whose output axes are named."""

    axes: tuple[str, ...]
    operand: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class SliceRange:
    """`seq: a .. b` in a slice: the elements a to b - 1 of the axis `seq` (lengths)."""

    name: str
    start: Expr
    stop: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Slice:
    """`x[seq: a .. b, …]`: a window of named axes, its bounds lengths (issue 29)."""

    object: Expr
    ranges: tuple[SliceRange, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Lambda:
    params: tuple[str, ...]
    body: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Ascription:
    """`(HD : ℝ)`."""

    expr: Expr
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class TupleExpr:
    elements: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Stream:
    """`stream "data/pairs.psk.d"`: the samples of a data file, in a training run."""

    path: str
    span: Span


Expr: TypeAlias = (
    "Var | IntLit | FloatLit | StrLit | Binary | Unary | Call | FieldAccess | Ein | Lambda"
    " | Ascription | TupleExpr | Stream | Slice"
)

# ---- types -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prefix:
    """`...`: the open prefix of a shape."""

    span: Span


@dataclass(frozen=True, slots=True)
class Axis:
    name: str | None  # `batch: B` is named, `B` is positional
    length: Expr
    span: Span


Dim: TypeAlias = "Prefix | Axis"


@dataclass(frozen=True, slots=True)
class TensorType:
    """`ℝ[batch: B, D]`, `ℝ[]`, `ℝ` (a scalar), `bool[seq: T, seq2: T]`."""

    element: str  # "ℝ" or "bool"
    shape: tuple[Dim, ...] | None  # None when no brackets were written
    span: Span


@dataclass(frozen=True, slots=True)
class IdxType:
    """`idx[8][batch: B]`: indices in [0, 8)."""

    bound: Expr
    shape: tuple[Dim, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class QualName:
    parts: tuple[str, ...]
    span: Span

    def __str__(self) -> str:
        return ".".join(self.parts)


@dataclass(frozen=True, slots=True)
class ModuleRef:
    """`lin.Linear{D, 1}`, `Block`."""

    name: QualName
    args: tuple[Expr, ...] | None
    span: Span


@dataclass(frozen=True, slots=True)
class StackRef:
    """`stack{L}(Block)`."""

    count: Expr
    module: ModuleRef
    span: Span


@dataclass(frozen=True, slots=True)
class ParamsType:
    """`params net`, `params t.Tower`."""

    module: ModuleRef
    span: Span


@dataclass(frozen=True, slots=True)
class TupleType:
    elements: tuple[Type, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class NamedType:
    """`f64`, `nat`, `key`, `Q`, `lin.Linear{D, 1}`: resolved by the elaborator."""

    name: QualName
    args: tuple[Expr, ...] | None
    span: Span


Type: TypeAlias = "TensorType | IdxType | ParamsType | TupleType | NamedType"

# ---- function bodies ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PVar:
    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class PTuple:
    elements: tuple[Pattern, ...]
    span: Span


Pattern: TypeAlias = "PVar | PTuple"


@dataclass(frozen=True, slots=True)
class Let:
    pattern: Pattern
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Block:
    lets: tuple[Let, ...]
    result: Expr
    span: Span


# ---- declarations ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TypeParam:
    """One name of `{D B : dim}`."""

    name: str
    kind: str
    span: Span


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    type: Type
    default: Expr | None
    span: Span


@dataclass(frozen=True, slots=True)
class Fn:
    name: str
    type_params: tuple[TypeParam, ...]
    params: tuple[Parameter, ...]
    return_type: Type | None
    effects: tuple[str, ...]
    body: Block
    span: Span
    name_span: Span
    header_span: Span  # from `fn` to the `=` before the body


@dataclass(frozen=True, slots=True)
class Import:
    path: str
    alias: str
    span: Span


@dataclass(frozen=True, slots=True)
class Const:
    name: str
    type: Type
    value: Expr
    span: Span
    name_span: Span


@dataclass(frozen=True, slots=True)
class StaticAssert:
    condition: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class DimDecl:
    name: str
    bound: Expr | None  # `dim T <= 1024`
    span: Span
    lower: Expr | None = None  # `dim T >= 2`, `dim 2 <= T <= 1024`


@dataclass(frozen=True, slots=True)
class TypeAliasDecl:
    name: str
    type: Type
    span: Span


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: Type
    init: Expr | None  # `xavier_uniform`, `normal(std = 0.02)`; None starts at zero
    span: Span


@dataclass(frozen=True, slots=True)
class Use:
    name: str
    module: ModuleRef | StackRef
    span: Span


@dataclass(frozen=True, slots=True)
class Module:
    name: str
    type_params: tuple[TypeParam, ...]
    items: tuple[Param | Use | Fn, ...]
    span: Span
    name_span: Span


@dataclass(frozen=True, slots=True)
class Field:
    """A line of an optimizer, training or serving block: `lr : f64 = 0.01`, `model = t.Tower`."""

    name: str
    type: Expr | None
    value: Expr | None
    span: Span


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """`checkpoint every 50 steps to "ckpt/"`."""

    every: int
    dir: str
    span: Span


@dataclass(frozen=True, slots=True)
class Optimizer:
    name: str
    fields: tuple[Field | Checkpoint, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Training:
    fields: tuple[Field | Checkpoint, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Serve:
    fields: tuple[Field | Checkpoint, ...]
    span: Span


Decl: TypeAlias = (
    "Import | Const | StaticAssert | DimDecl | TypeAliasDecl | Module | Fn | Optimizer"
    " | Training | Serve"
)


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: str
    decls: tuple[Decl, ...]
    span: Span


NODE_TYPES: tuple[type, ...] = (
    Var, IntLit, FloatLit, StrLit, Binary, Unary, AxisArg, KeywordArg, ShapeArg, Call,
    FieldAccess, Ein, SliceRange, Slice, Lambda, Ascription, TupleExpr, Stream, Prefix, Axis, TensorType, IdxType,
    QualName, ModuleRef, StackRef, ParamsType, TupleType, NamedType, PVar, PTuple, Let, Block,
    TypeParam, Parameter, Fn, Import, Const, StaticAssert, DimDecl, TypeAliasDecl, Param, Use,
    Module, Field, Checkpoint, Optimizer, Training, Serve, SourceFile,
)  # fmt: skip
"""Every node class, for the codec and its round-trip test."""
