"""Lowering: the checked program to PSK-Core.

The checker (presk-types) calls an `Emitter` for every operation it types; the
`Lowering` here builds one `ir.Function` per function from those calls, so that what a
name or a call resolves to, how operands align and how a callee's dimensions bind are
decided once, by the checker. Initializers (`M.init`) are written from the modules'
declarations.
"""

from __future__ import annotations

from dataclasses import replace

from presk_syntax import ast as A
from presk_syntax.diagnostics import DiagnosticError
from presk_types.check import check_program
from presk_types.elab import (
    ConstError,
    ModuleInfo,
    Program,
    instance_of,
    module_scope,
    resolve_type,
)
from presk_types.presburger import Lin
from presk_types.types import Instance, KeyT, ParamsT, Type
from presk_types.values import Emitter, FnInfo

from presk_core.build import FunctionBuilder
from presk_core.ir import Function, Instr, Lit, Operand, Value
from presk_core.ir import Program as Core
from presk_core.layout import bounds, layouts, lowers, trainings
from presk_core.optim import optimizer_functions


class Builder(Emitter):
    """The instructions of one function, as the checker types its body."""

    def __init__(self, lowering: Lowering, info: FnInfo | None, name: str = "") -> None:
        self.lowering = lowering
        self.info = info
        self.b = FunctionBuilder(info.key if info is not None else name)
        self.params: list[Value] = []

    @property
    def body(self) -> list[Instr]:
        return self.b.body

    def new(self, t: Type, name: str | None = None) -> Value:
        return self.b.fresh(t, name)

    def emit(self, op: str, args: list, t: Type, attrs: dict | None = None, span=None) -> Value:
        return self.b.emit(op, args, t, attrs or {}, span)

    def param(self, name: str, t: Type) -> Value:
        v = self.new(t, name)
        self.params.append(v)
        return v

    def literal(self, text: str, t: Type) -> Lit:
        return Lit(text, t)

    def prim(self, op: str, args: list, t: Type, attrs: dict, span) -> Value:
        return self.emit(op, args, t, attrs, span)

    def field(self, tree: Operand, path: str, t: Type, span=None) -> Value:
        return self.emit("field", [tree], t, {"path": path}, span)

    def call(self, fn: FnInfo, bindings: dict, args: list, t: Type, span) -> Value:
        return self.emit("call", args, t, {"fn": fn.key, "dims": tuple(bindings.items())}, span)

    def fold(self, fn: FnInfo, count: Lin, bindings: dict, args: list, t: Type, span) -> Value:
        attrs = {"fn": fn.key, "count": count, "dims": tuple(bindings.items())}
        return self.emit("fold", args, t, attrs, span)

    def scan(self, fn: FnInfo, count: Lin, bindings: dict, args: list, t: Type, span, axis: str):
        attrs = {"fn": fn.key, "count": count, "dims": tuple(bindings.items())}
        return self.emit("scan", args, t, {**attrs, "axes": (axis,), "scanned": 1}, span)

    def grad(self, fn: FnInfo, args: list, t: Type, span) -> Value:
        dims = tuple((d, Lin.var(d)) for d in fn.generic)
        return self.emit("grad", args, t, {"fn": fn.key, "dims": dims}, span)

    def tuple(self, refs: list, t: Type) -> Value:
        return self.emit("tuple", refs, t)

    def get(self, ref: Operand, index: int, t: Type) -> Value:
        return self.emit("get", [ref], t, {"index": index})

    def name(self, ref: Operand, name: str) -> Operand:
        """A `let` names the value just computed; a name for an older one is an alias."""
        if self.body and self.body[-1].out is ref and ref.name is None:
            last = self.body[-1]
            named = Value(ref.id, ref.type, name)
            self.body[-1] = replace(last, out=named)
            return named
        return ref

    def finish(self, result: Operand) -> None:
        info = self.info
        t = info.declared if info.declared is not None else result.type
        effects = tuple(info.decl.effects) if info.decl is not None else ()
        dims = tuple(getattr(info, "generic", info.dims))
        span = info.decl.span if info.decl is not None else getattr(info, "span", None)
        defaults = tuple(info.defaults.items())  # the checker's texts, rounded to their types
        if result.type != t:  # the body under other axis names than declared: a cast
            at = info.decl.body.result.span if isinstance(info.decl, A.Fn) else span
            result = self.emit("cast", [result], t, {}, at)
        body = tuple(self.body)
        fn = Function(info.key, dims, tuple(self.params), t, body, result, effects, span, defaults)
        self.lowering.functions[info.key] = fn


class Lowering(Emitter):
    """The checker's emitter: a `Builder` per function."""

    def __init__(self) -> None:
        self.functions: dict[str, Function] = {}

    def function(self, info: FnInfo) -> Builder:
        return Builder(self, info)


def lower_program(program: Program) -> Core:
    """PSK-Core of an elaborated program: its functions in program order (imports first),
    the modules' initializers, then the λs. DiagnosticError if the program has errors."""
    return lower_checked(program)[0]


def lower_checked(program: Program) -> tuple[Core, dict[str, FnInfo]]:
    """PSK-Core, and what the checker knew of each function it lowered (its source
    signature, module arguments included, which PSK-Core erases): for an export that
    mirrors the source."""
    lowering = Lowering()
    checker = check_program(program, lowering)
    errors = [d for d in program.diagnostics + checker.diagnostics if d.is_error]
    if errors:
        raise DiagnosticError(errors)
    rank = {f.path: i for i, f in enumerate(program.files)}
    ordered = sorted(checker.order, key=lambda i: (rank[i.file.path], i.decl.span.start))
    functions = [lowering.functions[i.key] for i in ordered if i.key in lowering.functions]
    for env in program.files:
        for info in env.modules.values():
            functions.append(lower_init(info))
    functions.extend(
        lowering.functions[i.key] for i in checker.lambdas if i.key in lowering.functions
    )
    functions.extend(optimizer_functions(program))  # a training run's `adamw.lr`, `adamw.step`
    infos = {i.key: i for i in [*checker.order, *checker.lambdas]}
    metadata = layouts(program), bounds(program), trainings(program, checker)
    return Core(tuple(functions), *metadata, lowers(program)), infos


# ---- initializers ------------------------------------------------------------------------


def _init_of(e: A.Expr | None) -> tuple[str, dict]:
    match e:
        case None:
            return "zeros", {}
        case A.Var(name):
            return name, {}
        case A.Call(A.Var(name), args):
            attrs = {}
            for a in args:
                if isinstance(a, A.KeywordArg) and isinstance(a.value, A.FloatLit | A.IntLit):
                    text = a.value.text if isinstance(a.value, A.FloatLit) else str(a.value.value)
                    attrs[a.name] = text
            return name, attrs
    raise ConstError(None)  # the checker has refused it already


def lower_init(info: ModuleInfo) -> Function:
    """`M.init{dims}(key) -> params M{dims} uses Rand`: each parameter from its initializer
    with a key folded from its name, each sub-module from its own `init`. Its dimensions
    are the module's and its file's (a parameter's shape may use `dim T` of the file)."""
    b = Builder(Lowering(), None, f"{info.decl.name}.init")  # a builder outside the checker
    scope = module_scope(info)
    dims = tuple(info.dims) + tuple(d for d in info.file.dims if d not in info.dims)
    inst = Instance(info.key, info.decl.name, tuple(Lin.var(d) for d in info.dims))
    key = b.param("key", KeyT())
    keys, leaves = [], []
    for item in info.decl.items:
        if isinstance(item, A.Param):
            k = b.emit("fold_key", [key], KeyT(), {"name": item.name}, item.span)
            kind, attrs = _init_of(item.init)
            t = resolve_type(item.type, scope)
            leaves.append(b.emit("init", [k], t, {"init": kind, **attrs}, item.span))
            keys.append(item.name)
        elif isinstance(item, A.Use):
            k = b.emit("fold_key", [key], KeyT(), {"name": item.name}, item.span)
            sub = instance_of(item.module, scope)
            inner = sub.inner if sub.stack is not None else sub
            callee = _module_info(inner, info)
            bindings = tuple(zip(callee.dims, inner.args, strict=True))
            bindings += tuple((d, Lin.var(d)) for d in callee.file.dims if d not in callee.dims)
            attrs = {"fn": f"{inner.name}.init", "dims": bindings}
            if sub.stack is not None:
                attrs["count"] = sub.stack
                leaves.append(b.emit("fold_init", [k], ParamsT(sub), attrs, item.span))
            else:
                leaves.append(b.emit("call", [k], ParamsT(sub), attrs, item.span))
            keys.append(item.name)
    tree = b.emit("record", leaves, ParamsT(inst), {"keys": tuple(keys)}, info.decl.span)
    body = tuple(b.body)
    return Function(
        f"{info.decl.name}.init", dims, (key,), ParamsT(inst), body, tree, ("Rand",), info.decl.span
    )


def _module_info(inst: Instance, near: ModuleInfo) -> ModuleInfo:
    path, name = inst.module.rsplit(":", 1)
    seen = [near.file]
    while seen:
        f = seen.pop()
        if f.key == path:
            return f.modules[name]
        seen.extend(f.imports.values())
    raise KeyError(inst.module)
