"""The checker: the type of every expression, the class of every function in each argument,
and its effects.

Each function is checked once, on demand (a call checks its callee first), in the
dimension context of its signature: the file's dimensions with their bounds, the
module's or the function's dimension parameters, and the dimensions it uses without
declaring them (W0001). A value carries its type and its regularity: for each argument
of the function being checked that it depends on, the class of that dependence and the
primitive that caused it (E3001 names it, even through calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from presk_syntax import ast as A
from presk_syntax.diagnostics import Diagnostic, Label, Severity
from presk_syntax.span import Span

from presk_types.elab import (
    ConstError,
    FileEnv,
    ModuleInfo,
    Program,
    TypeScope,
    file_context,
    format_q,
    instance_of,
    lookup_module,
    module_scope,
    resolve_type,
)
from presk_types.presburger import Dim, DimContext, Lin
from presk_types.rules import (
    CALL_NAMES,
    COMPARISONS,
    OPERATORS,
    PRIMITIVES,
    Args,
    Cls,
    type_rules,
)
from presk_types.shapes import (
    Lengths,
    TypeErr,
    alignment,
    broadcast,
    contract,
    ein,
    err,
    relabeled,
)
from presk_types.types import (
    SCALAR,
    AxisT,
    Bool,
    FnT,
    Idx,
    Instance,
    KeyT,
    Machine,
    ModuleT,
    ParamsT,
    Real,
    Shape,
    TupleT,
    Type,
    subst,
    subst_lin,
)

Cause = tuple[str, Span] | None  # the primitive that made a dependence non-smooth, and where
Reg = dict[str, tuple[Cls, Cause]]  # argument -> (class, cause)


def _join(*regs: Reg) -> Reg:
    out: Reg = {}
    for reg in regs:
        for name, (cls, cause) in reg.items():
            if name not in out or cls > out[name][0]:
                out[name] = (cls, cause)
    return out


def _through(reg: Reg, cls: Cls, cause: Cause) -> Reg:
    """A dependence passed through an operation of class `cls`."""
    return {n: (cls, cause) if cls > c else (c, why) for n, (c, why) in reg.items()}


@dataclass(frozen=True, slots=True)
class Val:
    type: Type
    reg: Reg
    effects: tuple[tuple[str, Span], ...] = ()
    ref: object = None  # the lowering's handle on this value (presk-core), if it lowers


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

    def field(self, tree: object, path: str, t: Type) -> object:
        return None

    def call(self, fn: FnInfo, bindings: dict, args: list, t: Type, span: Span) -> object:
        return None

    def fold(
        self, fn: FnInfo, count: Lin, bindings: dict, args: list, t: Type, span: Span
    ) -> object:
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
    defaults: dict[str, A.Expr] = field(default_factory=dict)
    declared: Type | None = None
    result: Type | None = None
    lets: list[tuple[str, Type]] = field(default_factory=list)
    classes: list[tuple[str, Cls, Cause]] = field(default_factory=list)
    effects: dict[str, Span] = field(default_factory=dict)
    state: str = "new"  # new, checking, done, failed
    context: DimContext = field(default_factory=DimContext)

    @property
    def ok(self) -> bool:
        return self.state == "done"


@dataclass
class Checker:
    program: Program
    emitter: Emitter = field(default_factory=Emitter)
    fns: dict[tuple[str, str], FnInfo] = field(default_factory=dict)  # (file, key) -> info
    order: list[FnInfo] = field(default_factory=list)
    lambdas: list[FnInfo] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def run(self) -> None:
        for env in self.program.files:
            for decl in env.ast.decls:
                if isinstance(decl, A.Module):
                    for item in decl.items:
                        if isinstance(item, A.Fn):
                            self.check(self.info(env, item, env.modules[decl.name]))
                elif isinstance(decl, A.Fn):
                    self.check(self.info(env, decl, None))

    def info(self, env: FileEnv, decl: A.Fn, module: ModuleInfo | None) -> FnInfo:
        key = f"{module.decl.name}.{decl.name}" if module else decl.name
        if (env.path, key) not in self.fns:
            self.fns[(env.path, key)] = FnInfo(key, env, decl, module)
        return self.fns[(env.path, key)]

    def check(self, info: FnInfo) -> FnInfo:
        if info.state == "checking":
            raise err(
                "E2012",
                f"`{info.key}` calls itself: recursion is not part of Presk",
                Label(info.decl.name_span, "recursive"),
            )
        if info.state != "new":
            return info
        info.state = "checking"
        try:
            self._signature(info)
            body = Body(self, info)
            body.run()
            info.state = "done"
        except TypeErr as e:
            self.diagnostics.extend(e.diagnostics)
            info.state = "failed"
        except ConstError as e:
            if e.diagnostic.code != "E1000":
                self.diagnostics.append(e.diagnostic)
            info.state = "failed"
        if info.decl is not None:
            self.order.append(info)
        return info

    def _signature(self, info: FnInfo) -> None:
        env, decl, module = info.file, info.decl, info.module
        dims = set(env.dims)
        generic = [p.name for p in decl.type_params]
        if module is not None:
            generic = list(module.dims) + generic
        scope = TypeScope(env, dims | set(generic), allow_implicit=True)
        params: list[tuple[str, Type]] = []
        if module is not None:
            inst = Instance(module.key, module.decl.name, tuple(Lin.var(d) for d in module.dims))
            params.append(("θ", ParamsT(inst)))
        for p in decl.params:
            t = resolve_type(p.type, scope)
            if isinstance(t, ModuleT):
                scope.modules[p.name] = t.instance
            params.append((p.name, t))
            if p.default is not None:
                info.defaults[p.name] = p.default
        info.declared = None if decl.return_type is None else resolve_type(decl.return_type, scope)
        seen: set[str] = set()
        for name, span in scope.implicit:
            if name not in seen:
                seen.add(name)
                self.diagnostics.append(
                    Diagnostic(
                        "W0001",
                        Severity.WARNING,
                        f"implicit dimension `{name}`",
                        (Label(span, "not declared; taken as a dimension of this function"),),
                        f"declare it with `dim {name}` at file level or as a type parameter"
                        f" `{{{name} : dim}}`",
                    )
                )
        info.params = params
        info.dims = tuple(generic) + tuple(n for n, _ in scope.implicit if n not in generic)
        file_dims = tuple(Dim(n, b) for n, b in env.dim_bounds.items())
        extra = tuple(Dim(n) for n in dict.fromkeys(info.dims) if n not in env.dim_bounds)
        info.context = DimContext(file_dims + extra)
        info.generic = tuple(dict.fromkeys((*info.dims, *env.dims)))  # instantiated at calls


class Body:
    """The checking of one function's body."""

    def __init__(self, checker: Checker, info: FnInfo) -> None:
        self.checker = checker
        self.info = info
        self.env = info.file
        self.lengths = Lengths(info.context)
        self.scope = TypeScope(info.file, set(info.context.names))
        self.vars: dict[str, object] = {}
        self.emit = checker.emitter.function(info)
        for name, t in info.params:
            if isinstance(t, ModuleT):
                self.vars[name] = ModuleVal(t.instance, implicit=False)
                self.scope.modules[name] = t.instance
            else:  # a function of indices or truth values is discrete in them
                cls = Cls.DISC if isinstance(t, Idx | Bool) else Cls.SMOOTH
                self.vars[name] = Val(t, {name: (cls, None)}, (), self.emit.param(name, t))
        self.lambda_count = 0

    # ---- the function ----------------------------------------------------------------------

    def run(self) -> None:
        decl, info = self.info.decl, self.info
        result = self.block(decl.body)
        self.emit.finish(result.ref)
        info.result = result.type
        info.effects = dict(result.effects)
        reg = result.reg
        info.classes = [
            (n, reg.get(n, (Cls.SMOOTH, None))[0], reg.get(n, (Cls.SMOOTH, None))[1])
            for n, t in info.params
            if not isinstance(t, ModuleT)
        ]
        if info.declared is not None:
            self.expect_return(info.declared, result.type, decl)
        undeclared = [e for e in info.effects if e not in decl.effects]
        if undeclared:
            effect = undeclared[0]
            raise err(
                "E4001",
                f"`{decl.name}` uses the effect `{effect}` without declaring it",
                Label(info.effects[effect], f"this uses `{effect}`"),
                Label(decl.span, "declared without `uses`"),
                help=f"add `uses {effect}` to the signature of `{decl.name}`",
            )

    def expect_return(self, declared: Type, actual: Type, decl: A.Fn) -> None:
        body = decl.body.result.span
        try:
            self.same(declared, actual, body)
        except TypeErr as e:
            mismatch = [d for d in e.diagnostics if d.code == "E2006"]
            raise TypeErr(
                *mismatch,
                Diagnostic(
                    "E2011",
                    Severity.ERROR,
                    f"`{decl.name}` returns `{actual}` but is declared `-> {declared}`",
                    (
                        Label(body, f"this body has type `{actual}`"),
                        Label(decl.span, f"declared `{declared}`"),
                    ),
                ),
            ) from None

    def same(self, expected: Type, actual: Type, span: Span) -> None:
        """`actual` is `expected` (a positional axis matches a named one of equal length)."""
        match expected, actual:
            case (Real(s1), Real(s2)) | (Bool(s1), Bool(s2)):
                self.same_shape(s1, s2, span, expected, actual)
                return
            case Idx(b1, s1), Idx(b2, s2):
                self.lengths.require_equal(b1, b2, span)
                self.same_shape(s1, s2, span, expected, actual)
                return
            case TupleT(e1), TupleT(e2) if len(e1) == len(e2):
                for x, y in zip(e1, e2, strict=True):
                    self.same(x, y, span)
                return
            case ParamsT(i1), ParamsT(i2) if i1.module == i2.module:
                for x, y in zip(i1.args, i2.args, strict=True):
                    self.lengths.require_equal(x, y, span)
                return
        if expected != actual:
            raise err(
                "E2008",
                f"expected `{expected}`, found `{actual}`",
                Label(span, f"this is `{actual}`"),
            )

    def same_shape(self, s1: Shape, s2: Shape, span: Span, t1: Type, t2: Type) -> None:
        if s1.prefix != s2.prefix or s1.rank != s2.rank:
            raise err("E2008", f"expected `{t1}`, found `{t2}`", Label(span, f"this is `{t2}`"))
        for x, y in zip(s1.axes, s2.axes, strict=True):
            if x.name and y.name and x.name != y.name:
                raise err(
                    "E2008",
                    f"expected `{t1}`, found `{t2}`",
                    Label(span, f"axis `{y.name}` is not `{x.name}`"),
                )
            self.lengths.require_equal(x.length, y.length, span)

    # ---- bodies and expressions ------------------------------------------------------------

    def block(self, block: A.Block) -> Val:
        effects: list[tuple[str, Span]] = []
        for let in block.lets:
            v = self.value(let.value)
            effects.extend(v.effects)
            self.bind(let.pattern, v, record=True)
        result = self.value(block.result)
        return Val(result.type, result.reg, tuple(effects) + result.effects, result.ref)

    def bind(self, pattern: A.Pattern, v: Val, record: bool) -> None:
        match pattern:
            case A.PVar(name):
                v = Val(v.type, v.reg, v.effects, self.emit.name(v.ref, name))
                self.vars[name] = v
                if record:
                    self.info.lets.append((name, v.type))
            case A.PTuple(elements):
                if not isinstance(v.type, TupleT) or len(v.type.elements) != len(elements):
                    raise err(
                        "E2008",
                        f"cannot take `{v.type}` apart into {len(elements)} names",
                        Label(pattern.span, "a tuple pattern"),
                    )
                for i, (p, t) in enumerate(zip(elements, v.type.elements, strict=True)):
                    self.bind(p, Val(t, v.reg, (), self.emit.get(v.ref, i, t)), record)

    def value(self, e: A.Expr) -> Val:
        """An expression that must be a value (a tensor, a tree, a number, a tuple)."""
        r = self.expr(e)
        if not isinstance(r, Val):
            what = {
                ModuleVal: "a module",
                FnRef: "a function",
                Namespace: "an import",
                LambdaVal: "a λ",
            }
            raise err(
                "E2008",
                f"{what.get(type(r), 'this')} is not a value here",
                Label(e.span, "expected a tensor, a parameter tree or a number"),
            )
        return r

    def expr(self, e: A.Expr) -> object:
        match e:
            case A.Var(name, span):
                return self.name(name, span)
            case A.IntLit(value):
                return Val(Real(SCALAR), {}, (), self.emit.literal(str(value), Real(SCALAR)))
            case A.FloatLit(text):
                return Val(Real(SCALAR), {}, (), self.emit.literal(text, Real(SCALAR)))
            case A.StrLit(_, span) | A.Stream(_, span):
                raise err("E2008", "a string is not a value of a function", Label(span, ""))
            case A.Ascription(inner, t, span):
                return self.ascription(inner, t, span)
            case A.Unary(_, operand, span):
                v = self.value(operand)
                self.require_real(v, operand.span)
                ref = self.emit.prim("neg", [v.ref], v.type, {}, span)
                return Val(v.type, v.reg, v.effects, ref)
            case A.Binary(op, left, right, span):
                return self.binary(op, left, right, span)
            case A.TupleExpr(elements):
                vals = [self.value(x) for x in elements]
                t = TupleT(tuple(v.type for v in vals))
                return Val(
                    t,
                    _join(*(v.reg for v in vals)),
                    tuple(x for v in vals for x in v.effects),
                    self.emit.tuple([v.ref for v in vals], t),
                )
            case A.Ein(axes, operand, span):
                return self.ein(axes, operand, span)
            case A.Lambda():
                return LambdaVal(e)
            case A.FieldAccess(obj, name, span):
                return self.field(self.expr(obj), name, span)
            case A.Call(function, args, span):
                return self.call(function, args, span)
        raise err("E2008", "this expression is not supported here", Label(e.span, ""))

    def name(self, name: str, span: Span) -> object:
        if name in self.vars:
            return self.vars[name]
        module = self.info.module
        if module is not None:
            scope = module_scope(module)
            theta = self.vars["θ"].ref if isinstance(self.vars.get("θ"), Val) else None
            for p in module.params:
                if p.name == name:
                    t = resolve_type(p.type, scope)
                    return Val(t, {"θ": (Cls.SMOOTH, None)}, (), self.emit.field(theta, name, t))
            for u in module.uses:
                if u.name == name:
                    inst = instance_of(u.module, scope)
                    return ModuleVal(inst, True, self.emit.field(theta, name, ParamsT(inst)))
            if name in module.fns:
                return FnRef(
                    self.checker.info(module.file, module.fns[name], module), implicit=True
                )
        env = self.env
        if name in env.consts:
            decl = env.const_decls[name]
            kind = decl.type.name.parts[-1] if isinstance(decl.type, A.NamedType) else "f64"
            return Val(
                Machine(kind), {}, (), self.emit.literal(format_q(env.consts[name]), Machine(kind))
            )
        if name in env.const_decls:
            raise ConstError(_reported())
        if name in env.fns:
            return FnRef(self.checker.info(env, env.fns[name], None))
        if name in env.imports:
            return Namespace(env.imports[name])
        if name in env.modules:
            info = env.modules[name]
            return ModuleVal(Instance(info.key, name, tuple(Lin.var(d) for d in info.dims)), False)
        if name in self.scope.dims:
            raise err(
                "E2009",
                f"the dimension `{name}` is not a value",
                Label(span, "a length"),
                help=f"`({name} : ℝ)` injects it into ℝ",
            )
        raise err(
            "E2001",
            f"unresolved name `{name}`",
            Label(span, "not a variable, parameter, module member or constant in scope"),
        )

    def field(self, obj: object, name: str, span: Span) -> object:
        match obj:
            case Namespace(file):
                if name in file.fns:
                    return FnRef(self.checker.info(file, file.fns[name], None))
                if name in file.modules:
                    info = file.modules[name]
                    return ModuleVal(
                        Instance(info.key, name, tuple(Lin.var(d) for d in info.dims)), False
                    )
                if name in file.consts:
                    text = format_q(file.consts[name])
                    return Val(Machine("nat"), {}, (), self.emit.literal(text, Machine("nat")))
            case ModuleVal(inst, implicit, tree):
                info = self._module_info(inst)
                if name in info.fns:
                    fn = self.checker.info(info.file, info.fns[name], info)
                    return FnRef(fn, inst, implicit, tree)
        raise err("E2001", f"unresolved name `{name}`", Label(span, "not a member of this"))

    def _module_info(self, inst: Instance) -> ModuleInfo:
        from presk_types.elab import module_info

        return module_info(inst.inner if inst.inner is not None else inst, self.checker.program)

    def ascription(self, inner: A.Expr, t: A.Type, span: Span) -> Val:
        target = resolve_type(t, self.scope)
        if isinstance(inner, A.Var) and inner.name in self.scope.dims and target == Real(SCALAR):
            dim = self.emit.literal(inner.name, Machine("nat"))  # a dimension's value at run time
            return Val(target, {}, (), self.emit.prim("real", [dim], target, {}, span))
        v = self.value(inner)
        if isinstance(v.type, Machine) and target == Real(SCALAR):
            return Val(target, v.reg, v.effects, self.emit.prim("real", [v.ref], target, {}, span))
        self.same(target, v.type, span)
        return Val(target, v.reg, v.effects, v.ref)

    def require_real(self, v: Val, span: Span) -> Real:
        if not isinstance(v.type, Real):
            raise err(
                "E2009",
                f"`{v.type}` is not a real tensor",
                Label(span, f"this is `{v.type}`"),
                help="`real(…)` injects indices and hyperparameters into ℝ",
            )
        return v.type

    def binary(self, op: str, left: A.Expr, right: A.Expr, span: Span) -> Val:
        a, b = self.value(left), self.value(right)
        reg = _join(a.reg, b.reg)
        effects = a.effects + b.effects
        if op in COMPARISONS:
            ta, tb = self.require_real(a, left.span), self.require_real(b, right.span)
            shape = broadcast(ta.shape, tb.shape, self.lengths, span)
            if shape is None:
                raise self.no_broadcast(ta, tb, span)
            attrs = {"op": op, "_align": (alignment(ta.shape, shape), alignment(tb.shape, shape))}
            ref = self.emit.prim("compare", [a.ref, b.ref], Bool(shape), attrs, span)
            return Val(Bool(shape), _through(reg, Cls.DISC, ("compare", span)), effects, ref)
        for v, side in ((a, left), (b, right)):
            if not isinstance(v.type, Real):
                other = b if v is a else a
                raise err(
                    "E2009",
                    f"cannot mix `{v.type}` and `{other.type}` without `real(…)`",
                    Label(side.span, f"this is `{v.type}`"),
                    help="`real(…)` injects indices and hyperparameters into ℝ",
                )
        ta, tb = a.type, b.type
        if op == "·":
            t = Real(contract(ta.shape, tb.shape, self.lengths, span))
            return Val(t, reg, effects, self.emit.prim("dot", [a.ref, b.ref], t, {}, span))
        if op == "^" and not tb.shape.is_scalar:
            raise err(
                "E2008", "a power takes a scalar exponent", Label(right.span, f"this is `{tb}`")
            )
        if op == "|>":
            raise err("E2008", "`|>` belongs to a training run's data", Label(span, ""))
        shape = broadcast(ta.shape, tb.shape, self.lengths, span)
        if shape is None:
            raise self.no_broadcast(ta, tb, span)
        t = Real(shape)
        attrs = {"_align": (alignment(ta.shape, shape), alignment(tb.shape, shape))}
        ref = self.emit.prim(OPERATORS[op], [a.ref, b.ref], t, attrs, span)
        return Val(t, reg, effects, ref)

    def no_broadcast(self, a: Type, b: Type, span: Span) -> TypeErr:
        return err(
            "E2003",
            f"cannot broadcast `{a}` with `{b}`",
            Label(span, "no alignment by position or by name"),
            note="axes align from the last one, or by name when every axis of the smaller"
            " operand is named",
        )

    def ein(self, axes: tuple[str, ...], operand: A.Expr, span: Span) -> Val:
        if isinstance(operand, A.Binary) and operand.op == "*":
            a, b = self.value(operand.left), self.value(operand.right)
            ta, tb = (
                self.require_real(a, operand.left.span),
                self.require_real(b, operand.right.span),
            )
            t = Real(ein(axes, ta.shape, tb.shape, self.lengths, span))
            names = (tuple(ta.shape.names()), tuple(relabeled(axes, ta.shape, tb.shape).names()))
            attrs = {"axes": axes, "_names": names}
            ref = self.emit.prim("ein", [a.ref, b.ref], t, attrs, span)
            return Val(t, _join(a.reg, b.reg), a.effects + b.effects, ref)
        a = self.value(operand)
        ta = self.require_real(a, operand.span)
        t = Real(ein(axes, ta.shape, None, self.lengths, span))
        attrs = {"axes": axes, "_names": (tuple(ta.shape.names()),)}
        return Val(t, a.reg, a.effects, self.emit.prim("ein", [a.ref], t, attrs, span))

    # ---- calls -----------------------------------------------------------------------------

    def call(self, function: A.Expr, args: tuple[A.Arg, ...], span: Span) -> object:
        if (
            isinstance(function, A.Call)
            and _is_name(function.function, "grad")
            and "grad" not in self.vars
        ):
            return self.grad(function, args, span)
        if isinstance(function, A.Var) and function.name not in self.vars:
            name = function.name
            if name == "grad" and name not in self.env.fns:
                raise err(
                    "E2010",
                    "`grad(f)` is a function: apply it, `grad(λ θ. f(θ, x))(θ)`",
                    Label(span, "`grad` of a λ, then its arguments"),
                )
            local = name in self.env.fns or (
                self.info.module is not None and name in self.info.module.fns
            )
            if not local and name in CALL_NAMES:
                return self.primitive(CALL_NAMES[name], args, span)
        callee = self.expr(function)
        if isinstance(callee, FnRef):
            return self.call_fn(callee, args, span)
        if isinstance(callee, ModuleVal):
            raise err(
                "E2008",
                "a module is not a function: call one of its functions",
                Label(function.span, "e.g. `.apply(…)`"),
            )
        raise err("E2008", "this is not a function", Label(function.span, ""))

    def primitive(self, name: str, args: tuple[A.Arg, ...], span: Span) -> Val:
        a = Args(name, span, self.lengths)
        regs: list[Reg] = []
        effects: list[tuple[str, Span]] = []
        refs: list[object] = []
        where = None
        for arg in args:
            match arg:
                case A.AxisArg(axis, aspan):
                    a.axes.append((axis, aspan))
                case A.KeywordArg(key, value, kspan):
                    v = self.value(value)
                    a.keywords[key] = (v.type, value.span)
                    where = v.ref
                    regs.append(
                        _through(v.reg, Cls.DISC, (name, kspan)) if key == "where" else v.reg
                    )
                    effects.extend(v.effects)
                case A.ShapeArg(axis, length, sspan):
                    a.shapes.append((axis, self.length(length), sspan))
                case _:
                    v = self.value(arg)
                    cls = PRIMITIVES[name].cls(len(a.positional))
                    a.positional.append((v.type, arg.span))
                    refs.append(v.ref)
                    regs.append(_through(v.reg, cls, (name, span)))
                    effects.extend(v.effects)
        if name in ("max", "min") and len(a.positional) == 2:
            regs = [_through(r, Cls.KINK, (name, span)) for r in regs]
        t = type_rules[name](a)
        effect = PRIMITIVES[name].effect
        if effect is not None:
            effects.append((effect, span))
        op = (
            {"max": "maximum", "min": "minimum"}[name]
            if name in ("max", "min") and len(refs) == 2
            else name
        )
        attrs = {
            "axes": tuple(n for n, _ in a.axes),
            "shapes": tuple((n, length) for n, length, _ in a.shapes),
        }
        if "where" in a.keywords:
            refs.append(where)
            attrs["where"] = True
        ref = self.emit.prim(op, refs, t, {k: v for k, v in attrs.items() if v}, span)
        return Val(t, _join(*regs), tuple(effects), ref)

    def length(self, e: A.Expr) -> Lin:
        from presk_types.elab import scope_length

        return scope_length(e, self.scope)

    def call_fn(self, ref: FnRef, args: tuple[A.Arg, ...], span: Span) -> Val:
        callee = self.checker.check(ref.info)
        if not callee.ok:
            raise ConstError(_reported())
        params = list(callee.params)
        bindings: dict[str, Lin] = {}
        inst = ref.instance
        if inst is not None and inst.stack is not None:
            inst = inst.inner
        if inst is not None and callee.module is not None:
            # `Lin.apply` by the module's name leaves its dimensions to the arguments
            bindings.update(
                (d, a)
                for d, a in zip(callee.module.dims, inst.args, strict=True)
                if a != Lin.var(d)
            )
        regs: list[Reg] = []
        effects: list[tuple[str, Span]] = []
        theta_reg: Reg | None = None
        if ref.implicit and callee.module is not None:
            params = params[1:]
            theta_reg = {"θ": (Cls.SMOOTH, None)}
        positional = [a for a in args if not isinstance(a, A.AxisArg | A.ShapeArg)]
        values: list[tuple[str, object, Span]] = []
        if len(positional) > len(params) or any(
            n not in callee.defaults for n, _ in params[len(positional) :]
        ):
            raise err(
                "E2004",
                f"`{callee.key}` takes {len(params)} argument(s), given {len(positional)}",
                Label(span, f"`{callee.key}({', '.join(n for n, _ in params)})`"),
            )
        for (pname, _), arg in zip(params, positional, strict=False):
            values.append(
                (pname, self.expr(arg.value if isinstance(arg, A.KeywordArg) else arg), arg.span)
            )
        unify = Unify(self, callee, bindings)
        for (pname, ptype), (_, v, aspan) in zip(params, values, strict=False):
            unify.arg(pname, ptype, v, aspan)
        unify.finish()
        classes = {n: (c, why) for n, c, why in callee.classes}
        for pname, v, _ in values:
            if isinstance(v, Val):
                cls, why = classes.get(pname, (Cls.SMOOTH, None))
                regs.append(_through(v.reg, cls, why))
                effects.extend(v.effects)
        if theta_reg is not None:
            cls, why = classes.get("θ", (Cls.SMOOTH, None))
            regs.append(_through(theta_reg, cls, why))
        effects.extend((effect, span) for effect in callee.effects)
        declared = callee.declared if callee.declared is not None else callee.result
        result = subst(declared, bindings, unify.prefix)
        if ref.instance is not None and ref.instance.stack is not None and values:
            first = values[0][1]
            if isinstance(first, Val):
                try:
                    self.same(first.type, result, span)
                except TypeErr:
                    raise err(
                        "E2008",
                        f"the blocks of `{ref.instance}` take `{first.type}` and return `{result}`",
                        Label(span, "each block's result is the next block's argument"),
                        note="a stack applies its blocks in sequence: a block must return what"
                        " it takes",
                    ) from None
        refs = [ref.tree] if ref.implicit and callee.module is not None else []
        refs += [v.ref for _, v, _ in values if isinstance(v, Val)]
        for pname, ptype in params[len(values) :]:  # hyperparameters at their defaults
            default = callee.defaults[pname]
            text = (
                default.text
                if isinstance(default, A.FloatLit)
                else str(getattr(default, "value", 0))
            )
            refs.append(self.emit.literal(text, ptype))
        generic = {d: bindings.get(d, Lin.var(d)) for d in callee.generic}
        if ref.instance is not None and ref.instance.stack is not None:
            out = self.emit.fold(callee, ref.instance.stack, generic, refs, result, span)
        else:
            out = self.emit.call(callee, generic, refs, result, span)
        return Val(result, _join(*regs), tuple(effects), out)

    def grad(self, inner: A.Call, args: tuple[A.Arg, ...], span: Span) -> Val:
        grad_span = inner.span
        if len(inner.args) != 1 or not args:
            raise err(
                "E2004", "`grad(f)(x, …)` takes one function, then its arguments", Label(span, "")
            )
        f = inner.args[0]
        vals = [self.value(a) for a in args]
        if isinstance(f, A.Lambda):
            lam = self.lift(f, [v.type for v in vals])
        else:
            raise err(
                "E2010",
                "`grad` takes a λ: `grad(λ θ. f(θ, x))(θ)`",
                Label(f.span, "write the function to differentiate as a λ"),
            )
        if not isinstance(lam.result, Real) or not lam.result.shape.is_scalar:
            raise err(
                "E2008",
                f"`grad` needs a scalar function, and this one returns `{lam.result}`",
                Label(f.span, ""),
            )
        wrt = f.params[0]
        cls, cause = next(((c, why) for n, c, why in lam.classes if n == wrt), (Cls.SMOOTH, None))
        if cls > Cls.KINK and cause is not None:
            prim, where = cause
            raise err(
                "E3001",
                f"cannot differentiate through `{prim}`: the function is discontinuous (Disc) in `{wrt}`",
                Label(grad_span, f"`grad` here, with respect to `{wrt}`"),
                Label(where, f"`{prim}` makes the result discontinuous in `{wrt}`"),
                help=_GRAD_HELP.get(
                    prim, "differentiate with respect to an argument the function is continuous in"
                ),
                note=f"in `{self.info.decl.name}`; `grad` requires the class C⁰⁺ or better",
            )
        # The gradient of a C⁰⁺ function is discontinuous; of a C∞ one, smooth.
        regs = []
        lam_classes = {n: (c, why) for n, c, why in lam.classes}
        for name, v in zip(lam.captured, lam.captured_vals, strict=True):
            c, why = lam_classes.get(name, (Cls.SMOOTH, None))
            regs.append(_through(v.reg, Cls.DISC if c == Cls.KINK else c, why))
        for name, v in zip(f.params, vals, strict=False):
            c, why = lam_classes.get(name, (Cls.SMOOTH, None))
            regs.append(_through(v.reg, Cls.DISC if c == Cls.KINK else c, why))
        effects = tuple(e for v in vals for e in v.effects) + tuple(lam.effects.items())
        refs = [v.ref for v in lam.captured_vals] + [v.ref for v in vals]
        out = self.emit.grad(lam, refs, vals[0].type, span)
        return Val(vals[0].type, _join(*regs), effects, out)

    def lift(self, lam: A.Lambda, types: list[Type]) -> FnInfo:
        """Check a λ as a function of its captured variables, then its parameters."""
        key = f"{self.info.key}.lambda{self.lambda_count}"
        self.lambda_count += 1
        captured = [n for n in _free_names(lam.body, set(lam.params)) if n in self.vars]
        info = FnInfo(key, self.env, None, self.info.module, context=self.info.context)
        info.dims, info.generic = self.info.dims, self.info.generic
        inner = Body(self.checker, info)
        inner.vars = {}
        inner.scope = self.scope
        captured_vals = []
        for n in captured:
            v = self.vars[n]
            if isinstance(v, Val):
                inner.vars[n] = Val(
                    v.type, {n: (Cls.SMOOTH, None)}, (), inner.emit.param(n, v.type)
                )
                captured_vals.append((n, v))
            else:
                inner.vars[n] = v
        if len(types) != len(lam.params):
            raise err(
                "E2004",
                f"this λ takes {len(lam.params)} argument(s), given {len(types)}",
                Label(lam.span, ""),
            )
        for n, t in zip(lam.params, types, strict=True):
            inner.vars[n] = Val(t, {n: (Cls.SMOOTH, None)}, (), inner.emit.param(n, t))
        inner.lambda_count = 0
        result = inner.value(lam.body)
        inner.emit.finish(result.ref)
        info.params = [(n, v.type) for n, v in captured_vals] + list(
            zip(lam.params, types, strict=True)
        )
        info.result = result.type
        info.effects = dict(result.effects)
        info.classes = [
            (n, result.reg.get(n, (Cls.SMOOTH, None))[0], result.reg.get(n, (Cls.SMOOTH, None))[1])
            for n, _ in info.params
        ]
        info.captured = [n for n, _ in captured_vals]
        info.captured_vals = [v for _, v in captured_vals]
        info.state = "done"
        self.checker.lambdas.append(info)
        return info


_GRAD_HELP = {
    "argmax": "use `softmax` for a smooth surrogate, or an explicit straight-through relaxation",
    "sample": "differentiate the log-probabilities, not the samples",
}


def _reported() -> Diagnostic:
    return Diagnostic("E1000", Severity.ERROR, "(reported)")


def _is_name(e: A.Expr, name: str) -> bool:
    return isinstance(e, A.Var) and e.name == name


def _free_names(e: object, bound: set[str]) -> list[str]:
    """The variables an expression reads that it does not bind, in order of first use."""
    out: list[str] = []

    def walk(node: object, bound: set[str]) -> None:
        match node:
            case A.Var(name):
                if name not in bound and name not in out:
                    out.append(name)
            case A.Lambda(params, body):
                walk(body, bound | set(params))
            case A.FieldAccess(obj):
                walk(obj, bound)
            case A.Call(function, args):
                walk(function, bound)
                for a in args:
                    walk(a, bound)
            case A.KeywordArg(_, value):
                walk(value, bound)
            case A.Binary(_, left, right):
                walk(left, bound)
                walk(right, bound)
            case A.Unary(_, operand) | A.Ein(_, operand) | A.Ascription(operand, _):
                walk(operand, bound)
            case A.TupleExpr(elements):
                for x in elements:
                    walk(x, bound)

    walk(e, bound)
    return out


class Unify:
    """Instantiates a callee's dimensions and prefix from the arguments of a call."""

    def __init__(self, body: Body, callee: FnInfo, bindings: dict[str, Lin]) -> None:
        self.body = body
        self.callee = callee
        self.bindings = bindings
        self.generic = set(getattr(callee, "generic", callee.dims))
        self.prefix: Shape | None = None
        self.pending: list[tuple[Lin, Lin, Span]] = []

    def length(self, p: Lin, a: Lin, span: Span) -> None:
        if len(p.coeffs) == 1 and p.constant == 0 and p.coeffs[0][1] == 1:
            name = p.coeffs[0][0]
            if name in self.generic and name not in self.bindings:
                self.bindings[name] = a
                return
        self.pending.append((p, a, span))

    def arg(self, pname: str, ptype: Type, v: object, span: Span) -> None:
        match ptype, v:
            case ModuleT(pi), ModuleVal(ai):
                self.instance(pi, ai, span)
                return
            case ParamsT(pi), Val(ParamsT(ai)):
                self.instance(pi, ai, span)
                return
            case (Real(ps), Val(Real(s))) | (Bool(ps), Val(Bool(s))):
                self.shape(ps, s, ptype, v.type, span)
                return
            case Idx(pb, ps), Val(Idx(b, s)):
                self.length(pb, b, span)
                self.shape(ps, s, ptype, v.type, span)
                return
            case Machine(), Val(Machine() | Real(Shape(False, ()))):
                return
            case KeyT(), Val(KeyT()):
                return
            case TupleT(pe), Val(TupleT(ae)) if len(pe) == len(ae):
                for x, y in zip(pe, ae, strict=True):
                    self.arg(pname, x, Val(y, {}), span)
                return
        shown = v.type if isinstance(v, Val) else v.instance if isinstance(v, ModuleVal) else "this"
        raise err(
            "E2008",
            f"argument `{pname}` of `{self.callee.key}` is `{ptype}`, and this is `{shown}`",
            Label(span, f"expected `{ptype}`"),
        )

    def instance(self, p: Instance, a: Instance, span: Span) -> None:
        if p.module != a.module or len(p.args) != len(a.args):
            raise err(
                "E2008",
                f"expected a `{p.name}`, found `{a}`",
                Label(span, f"expected `{p}`"),
            )
        for x, y in zip(p.args, a.args, strict=True):
            self.length(x, y, span)

    def shape(self, p: Shape, a: Shape, pt: Type, at: Type, span: Span) -> None:
        if p.prefix:
            if a.rank < p.rank and not a.prefix:
                raise self.mismatch(pt, at, span)
            lead = a.axes[: a.rank - p.rank] if a.rank >= p.rank else ()
            prefix = Shape(a.prefix, lead)
            if self.prefix is None:
                self.prefix = prefix
            elif self.prefix != prefix:
                raise self.mismatch(pt, at, span)
            pairs = zip(p.axes, a.axes[a.rank - p.rank :], strict=True)
        else:
            if a.prefix or a.rank != p.rank:
                raise self.mismatch(pt, at, span)
            pairs = zip(p.axes, a.axes, strict=True)
        for x, y in pairs:
            if x.name and y.name and x.name != y.name:
                raise self.mismatch(pt, at, span)
            self.length(x.length, y.length, span)

    def mismatch(self, pt: Type, at: Type, span: Span) -> TypeErr:
        return err(
            "E2008",
            f"an argument of `{self.callee.key}` must be `{pt}`, and this is `{at}`",
            Label(span, f"this is `{at}`"),
        )

    def finish(self) -> None:
        for p, a, span in self.pending:
            unbound = p.names - set(self.bindings)
            if unbound & self.generic:
                raise err(
                    "E2008",
                    f"cannot infer `{sorted(unbound)[0]}` in a call of `{self.callee.key}`",
                    Label(span, "give it as a plain dimension in some argument"),
                )
            self.body.lengths.require_equal(subst_lin(p, self.bindings), a, span)


def check_program(program: Program) -> Checker:
    """Check every function of every file of the program."""
    checker = Checker(program)
    checker.run()
    return checker


__all__ = ["AxisT", "Checker", "FnInfo", "FnT", "check_program", "lookup_module", "file_context"]
