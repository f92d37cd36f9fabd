"""What the checker computes about a value and a function: types, classes, lowering handles."""

from __future__ import annotations

from dataclasses import dataclass, field

from presk_syntax import ast as A
from presk_syntax.span import Span

from presk_types.elab import FileEnv, ModuleInfo
from presk_types.presburger import DimContext, Lin
from presk_types.rules import Cls
from presk_types.types import Instance, Type

Cause = tuple[str, Span] | None  # the primitive that made a dependence non-smooth, and where
Reg = dict[str, tuple[Cls, Cause]]  # argument -> (class, cause)


def join(*regs: Reg) -> Reg:
    out: Reg = {}
    for reg in regs:
        for name, (cls, cause) in reg.items():
            if name not in out or cls > out[name][0]:
                out[name] = (cls, cause)
    return out


def through(reg: Reg, cls: Cls, cause: Cause) -> Reg:
    """A dependence passed through an operation of class `cls`."""
    return {n: (cls, cause) if cls > c else (c, why) for n, (c, why) in reg.items()}


@dataclass(frozen=True, slots=True)
class Val:
    type: Type
    reg: Reg
    effects: tuple[tuple[str, Span], ...] = ()
    ref: object = None  # the lowering's handle on this value (presk-core), if it lowers
    # a tuple's elements' own dependences, where they differ (`top_k`: its values C⁰⁺ in x,
    # its indices Disc); None: each element has `reg`
    parts: tuple[Reg, ...] | None = None


class Emitter:
    """What the checker tells a lowering as it types a function, one call per operation.

    This one lowers nothing; presk-core's builds PSK-Core from the same calls, so that the
    resolution of names, calls and alignments is written once, here.
    """

    def function(self, info: FnInfo) -> Emitter:
        return self

    def param(self, name: str, t: Type) -> object:
        return None

    def literal(self, text: str, t: Type) -> object:
        return None

    def prim(self, op: str, args: list, t: Type, attrs: dict, span: Span) -> object:
        return None

    def field(self, tree: object, path: str, t: Type, span: Span | None = None) -> object:
        return None

    def call(self, fn: FnInfo, bindings: dict, args: list, t: Type, span: Span) -> object:
        return None

    def fold(
        self, fn: FnInfo, count: Lin, bindings: dict, args: list, t: Type, span: Span
    ) -> object:
        return None

    def scan(
        self, fn: FnInfo, count: Lin, bindings: dict, args: list, t: Type, span: Span, axis: str
    ) -> object:
        """`scan{count} fn(pre…, c, xs)` along `axis` (issue 29): the last operand scanned."""
        return None

    def grad(self, fn: FnInfo, args: list, t: Type, span: Span) -> object:
        return None

    def tuple(self, refs: list, t: Type) -> object:
        return None

    def get(self, ref: object, index: int, t: Type) -> object:
        return None

    def name(self, ref: object, name: str) -> object:
        return ref

    def finish(self, result: object) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Namespace:
    file: FileEnv


@dataclass(frozen=True, slots=True)
class ModuleVal:
    """A module: its instance, and whether its θ is implicit (a `use` inside a module)."""

    instance: Instance
    implicit: bool
    tree: object = None  # the lowering's handle on its subtree, when implicit


@dataclass(frozen=True, slots=True)
class FnRef:
    info: FnInfo
    instance: Instance | None = None
    implicit: bool = False
    tree: object = None


@dataclass(frozen=True, slots=True)
class LambdaVal:
    expr: A.Lambda


@dataclass(eq=False)
class FnInfo:
    """A function, checked: its signature, its lets, its classes and effects."""

    key: str  # `Linear.apply`, `loss`, `loss_grad.lambda0`
    file: FileEnv
    decl: A.Fn | None
    module: ModuleInfo | None = None
    dims: tuple[str, ...] = ()
    params: list[tuple[str, Type]] = field(default_factory=list)
    defaults: dict[str, str] = field(default_factory=dict)  # hyperparameters' texts
    declared: Type | None = None
    result: Type | None = None
    lets: list[tuple[str, Type]] = field(default_factory=list)
    classes: list[tuple[str, Cls, Cause]] = field(default_factory=list)
    effects: dict[str, Span] = field(default_factory=dict)
    state: str = "new"  # new, checking, done, failed
    grad_at: Span | None = None  # where it takes a gradient, itself or through a call
    context: DimContext = field(default_factory=DimContext)

    @property
    def ok(self) -> bool:
        return self.state == "done"
