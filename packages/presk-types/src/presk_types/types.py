"""The types of elaborated Presk: shapes with symbolic lengths, and how they print.

A length is a `Lin`, an affine expression over the dimensions in scope, with the file's
constants already replaced by their values (`heads: 2`, `hd: 4`). A shape is an optional
open prefix `...` and axes, each named or positional. Within one function, every `...`
is the same prefix: the leading axes its caller passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TypeAlias

from presk_types.presburger import Lin


@dataclass(frozen=True, slots=True)
class AxisT:
    name: str | None
    length: Lin

    def __str__(self) -> str:
        return f"{self.name}: {self.length}" if self.name else str(self.length)


@dataclass(frozen=True, slots=True)
class Shape:
    prefix: bool
    axes: tuple[AxisT, ...]

    @property
    def rank(self) -> int:
        return len(self.axes)

    @property
    def is_scalar(self) -> bool:
        return not self.prefix and not self.axes

    def names(self) -> list[str]:
        return [a.name for a in self.axes if a.name]

    def axis(self, name: str) -> int | None:
        for i, a in enumerate(self.axes):
            if a.name == name:
                return i
        return None

    def __str__(self) -> str:
        parts = (["..."] if self.prefix else []) + [str(a) for a in self.axes]
        return "[" + ", ".join(parts) + "]"


SCALAR = Shape(False, ())


@dataclass(frozen=True, slots=True)
class Real:
    shape: Shape

    def __str__(self) -> str:
        return f"ℝ{self.shape}"


@dataclass(frozen=True, slots=True)
class Idx:
    bound: Lin
    shape: Shape

    def __str__(self) -> str:
        return f"idx[{self.bound}]{self.shape}"


@dataclass(frozen=True, slots=True)
class Bool:
    shape: Shape

    def __str__(self) -> str:
        return f"bool{self.shape}"


@dataclass(frozen=True, slots=True)
class Machine:
    """A machine number: `f64`, `nat` (hyperparameters and constants)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class KeyT:
    def __str__(self) -> str:
        return "key"


@dataclass(frozen=True, slots=True)
class Instance:
    """A module with its dimension arguments: `Linear{D, 1}`, `Block`, `stack{3}(Block)`."""

    module: str  # the qualified key of the module's declaration (file-unique)
    name: str  # as printed: `Linear`
    args: tuple[Lin, ...]
    stack: Lin | None = None  # `stack{L}(…)`: L copies, parameters stacked
    inner: Instance | None = None

    def __str__(self) -> str:
        if self.stack is not None and self.inner is not None:
            return f"stack{{{self.stack}}}({self.inner})"
        if not self.args:
            return self.name
        return f"{self.name}{{{', '.join(str(a) for a in self.args)}}}"


@dataclass(frozen=True, slots=True)
class ParamsT:
    instance: Instance

    def __str__(self) -> str:
        return f"params {self.instance}"


@dataclass(frozen=True, slots=True)
class ModuleT:
    """A module as a compile-time argument (`net : lin.Linear{D, 1}`)."""

    instance: Instance

    def __str__(self) -> str:
        return str(self.instance)


@dataclass(frozen=True, slots=True)
class TupleT:
    elements: tuple[Type, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(e) for e in self.elements) + ")"


@dataclass(frozen=True, slots=True)
class FnT:
    """The type of a function value (a λ, a function passed to `grad`)."""

    params: tuple[Type, ...]
    result: Type

    def __str__(self) -> str:
        return f"({', '.join(str(p) for p in self.params)}) -> {self.result}"


Type: TypeAlias = Real | Idx | Bool | Machine | KeyT | ParamsT | ModuleT | TupleT | FnT

F64 = Machine("f64")
NAT = Machine("nat")


def shape_of(t: Type) -> Shape | None:
    """The shape of a tensor type; None for anything else."""
    return t.shape if isinstance(t, Real | Idx | Bool) else None


def with_shape(t: Real | Idx | Bool, shape: Shape) -> Real | Idx | Bool:
    return replace(t, shape=shape)


def subst_lin(e: Lin, values: Mapping[str, Lin]) -> Lin:
    """`e` with each dimension named in `values` replaced by its length."""
    out = Lin.const(e.constant)
    for name, c in e.coeffs:
        out = out + (values[name] * c if name in values else Lin.var(name) * c)
    return out


def subst_shape(
    s: Shape, values: Mapping[str, Lin], prefix: tuple[AxisT, ...] | None = None
) -> Shape:
    """`s` with dimensions replaced, and its prefix replaced by `prefix` axes when given."""
    axes = tuple(AxisT(a.name, subst_lin(a.length, values)) for a in s.axes)
    if s.prefix and prefix is not None:
        return Shape(False, prefix + axes)
    return Shape(s.prefix, axes)


def subst(t: Type, values: Mapping[str, Lin], prefix: Shape | None = None) -> Type:
    """`t` with dimensions replaced; an open prefix replaced by `prefix` when given."""

    def sh(s: Shape) -> Shape:
        if prefix is None or not s.prefix:
            return subst_shape(s, values)
        inner = subst_shape(Shape(False, s.axes), values)
        return Shape(prefix.prefix, prefix.axes + inner.axes)

    match t:
        case Real(s):
            return Real(sh(s))
        case Bool(s):
            return Bool(sh(s))
        case Idx(bound, s):
            return Idx(subst_lin(bound, values), sh(s))
        case ParamsT(inst):
            return ParamsT(subst_instance(inst, values))
        case ModuleT(inst):
            return ModuleT(subst_instance(inst, values))
        case TupleT(elements):
            return TupleT(tuple(subst(e, values, prefix) for e in elements))
        case FnT(params, result):
            return FnT(
                tuple(subst(p, values, prefix) for p in params), subst(result, values, prefix)
            )
    return t


def subst_instance(inst: Instance, values: Mapping[str, Lin]) -> Instance:
    return replace(
        inst,
        args=tuple(subst_lin(a, values) for a in inst.args),
        stack=None if inst.stack is None else subst_lin(inst.stack, values),
        inner=None if inst.inner is None else subst_instance(inst.inner, values),
    )
