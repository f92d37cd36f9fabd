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

import os
from dataclasses import dataclass, field

from presk_syntax import ast as A
from presk_syntax.diagnostics import Diagnostic, Label, Severity
from presk_syntax.span import Span

from presk_types.calls import Calls, reported
from presk_types.core_rules import PRIMITIVE_SHAPE_RULES
from presk_types.elab import (
    ConstError,
    FileEnv,
    ModuleInfo,
    Program,
    TypeScope,
    file_dim,
    format_q,
    instance_of,
    module_scope,
    resolve_type,
)
from presk_types.modules import check_modules
from presk_types.numbers import (
    check_double,
    check_natural,
    check_real_literal,
    default_text,
    literal_value,
)
from presk_types.operands import Operands
from presk_types.presburger import Dim, DimContext, Lin
from presk_types.rules import (
    COMPARISONS,
    CONSTANT_NAMES,
    OPERATORS,
    CheckContext,
    Cls,
)
from presk_types.shapes import (
    Lengths,
    TypeErr,
    alignment,
    err,
    relabeled,
)
from presk_types.types import (
    SCALAR,
    Bool,
    Idx,
    Instance,
    Machine,
    ModuleT,
    ParamsT,
    Real,
    Shape,
    TupleT,
    Type,
)
from presk_types.values import (
    Emitter,
    FnInfo,
    FnRef,
    LambdaVal,
    ModuleVal,
    Namespace,
    Val,
    join,
    through,
)
from presk_types.views import Views


@dataclass
class Checker:
    program: Program
    emitter: Emitter = field(default_factory=Emitter)
    fns: dict[tuple[str, str], FnInfo] = field(default_factory=dict)  # (file, key) -> info
    order: list[FnInfo] = field(default_factory=list)
    lambdas: list[FnInfo] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def run(self) -> None:
        self.diagnostics.extend(check_modules(self.program))
        for env in self.program.files:
            for decl in env.ast.decls:
                if isinstance(decl, A.Module):
                    for item in decl.items:
                        if isinstance(item, A.Fn):
                            self.check(self.info(env, item, env.modules[decl.name]))
                elif isinstance(decl, A.Fn):
                    self.check(self.info(env, decl, None))

    def info(self, env: FileEnv, decl: A.Fn, module: ModuleInfo | None) -> FnInfo:
        plain = f"{module.decl.name}.{decl.name}" if module else decl.name
        if (env.path, plain) not in self.fns:
            key = plain
            if env is not self.program.main and plain in self._names_elsewhere(env):
                # two files define it: the main file's keeps the name, the others their stem's
                key = f"{os.path.splitext(os.path.basename(env.path))[0]}.{plain}"
            self.fns[(env.path, plain)] = FnInfo(key, env, decl, module)
        return self.fns[(env.path, plain)]

    def _names_elsewhere(self, env: FileEnv) -> set[str]:
        names: set[str] = set()
        for other in self.program.files:
            if other is env:
                continue
            names |= set(other.fns)
            names |= {f"{m}.{f}" for m, info in other.modules.items() for f in info.fns}
        return names

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
                if not isinstance(t, Machine):
                    raise err(
                        "E2008",
                        f"`{p.name}` of type `{t}` cannot have a default",
                        Label(p.default.span, "a default is a hyperparameter's"),
                        help="only a hyperparameter (`f64`, `nat`) has a default",
                    )
                info.defaults[p.name] = default_text(p.default, t.name, env, p.name)
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
        file_dims = tuple(file_dim(env, n) for n in env.dim_bounds)
        extra = tuple(Dim(n) for n in dict.fromkeys(info.dims) if n not in env.dim_bounds)
        info.context = DimContext(file_dims + extra)
        info.generic = tuple(dict.fromkeys((*info.dims, *env.dims)))  # instantiated at calls


class Body(Calls, Views):
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
        for effect in decl.effects:  # declared and not used: still the function's effect
            info.effects.setdefault(effect, decl.name_span)
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
                    reg = v.parts[i] if v.parts is not None else v.reg
                    self.bind(p, Val(t, reg, (), self.emit.get(v.ref, i, t)), record)

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
                check_real_literal(e)
                return Val(Real(SCALAR), {}, (), self.emit.literal(str(value), Real(SCALAR)))
            case A.FloatLit(text):
                check_real_literal(e)
                return Val(Real(SCALAR), {}, (), self.emit.literal(text, Real(SCALAR)))
            case A.StrLit(_, span) | A.Stream(_, span):
                raise err("E2008", "a string is not a value of a function", Label(span, ""))
            case A.Ascription(inner, t, span):
                return self.ascription(inner, t, span)
            case A.Unary(_, operand, span):
                v = self.value(operand)
                self.require_real(v, operand.span)
                t = self.rule("neg", (v.type,), {}, span, operand.span)
                return Val(t, v.reg, v.effects, self.emit.prim("neg", [v.ref], t, {}, span))
            case A.Binary(op, left, right, span):
                return self.binary(op, left, right, span)
            case A.TupleExpr(elements):
                vals = [self.value(x) for x in elements]
                t = TupleT(tuple(v.type for v in vals))
                return Val(
                    t,
                    join(*(v.reg for v in vals)),
                    tuple(x for v in vals for x in v.effects),
                    self.emit.tuple([v.ref for v in vals], t),
                )
            case A.Ein(axes, operand, span):
                return self.ein(axes, operand, span)
            case A.Slice(obj, ranges, span):
                return self.slice(obj, ranges, span)
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
            try:  # an error of the module's own lines: check_modules reports it, once
                for p in module.params:
                    if p.name == name:
                        t = resolve_type(p.type, scope)
                        field = self.emit.field(theta, name, t, span)
                        return Val(t, {"θ": (Cls.SMOOTH, None)}, (), field)
                for u in module.uses:
                    if u.name == name:
                        inst = instance_of(u.module, scope)
                        field = self.emit.field(theta, name, ParamsT(inst), span)
                        return ModuleVal(inst, True, field)
            except ConstError:
                raise ConstError(reported()) from None
            if name in module.fns:
                fn = self.checker.info(module.file, module.fns[name], module)
                return FnRef(fn, implicit=True, tree=theta)
        env = self.env
        if name in env.consts:
            return self.constant(env, name, span)
        if name in env.const_decls:
            raise ConstError(reported())
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
        if name in CONSTANT_NAMES:  # π, unless a name of the program hides it
            t = Real(SCALAR)
            return Val(t, {}, (), self.emit.prim(CONSTANT_NAMES[name], [], t, {}, span))
        raise err(
            "E2001",
            f"unresolved name `{name}`",
            Label(span, "not a variable, parameter, module member or constant in scope"),
        )

    def constant(self, env: FileEnv, name: str, span: Span) -> Val:
        """The constant `name` of `env` as a value: a machine number of its declared type
        (`f64` unless `nat`), which must hold it (E1013: `const C : ℝ = 10^400` has no double)."""
        decl, q = env.const_decls[name], env.consts[name]
        kind = decl.type.name.parts[-1] if isinstance(decl.type, A.NamedType) else "f64"
        kind = kind if kind == "nat" else "f64"
        if kind == "f64":
            check_double(q, span, "f64", name)
        return Val(Machine(kind), {}, (), self.emit.literal(format_q(q), Machine(kind)))

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
        if op == "^" and isinstance(right, A.IntLit):  # natively a power by an int64
            check_natural(literal_value(right), right.span, "the exponent", kind="int64")
        a, b = self.value(left), self.value(right)
        reg = join(a.reg, b.reg)
        effects = a.effects + b.effects
        if op in COMPARISONS:
            if isinstance(a.type, Idx) and isinstance(b.type, Idx):  # indices: of any bounds
                ta, tb = a.type, b.type
            else:
                ta, tb = self.require_real(a, left.span), self.require_real(b, right.span)
            t = self.rule("compare", (ta, tb), {"op": op}, span, left.span, right.span)
            shape = t.shape
            attrs = {"op": op, "_align": (alignment(ta.shape, shape), alignment(tb.shape, shape))}
            ref = self.emit.prim("compare", [a.ref, b.ref], t, attrs, span)
            return Val(t, through(reg, Cls.DISC, ("compare", span)), effects, ref)
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
        if op == "|>":
            raise err("E2008", "`|>` belongs to a training run's data", Label(span, ""))
        if op not in OPERATORS:
            raise err(
                "E2008",
                f"`{op}` is an operator of lengths and constants, not of `{ta}` and `{tb}`",
                Label(span, "real tensors have `+ - * / ^ ·`"),
            )
        name = OPERATORS[op]
        t = self.rule(name, (ta, tb), {}, span, left.span, right.span)
        if name == "dot":
            return Val(t, reg, effects, self.emit.prim("dot", [a.ref, b.ref], t, {}, span))
        attrs = {"_align": (alignment(ta.shape, t.shape), alignment(tb.shape, t.shape))}
        ref = self.emit.prim(name, [a.ref, b.ref], t, attrs, span)
        return Val(t, reg, effects, ref)

    def rule(self, op: str, types: tuple, attrs: dict, span: Span, *spans: Span) -> Type:
        """The type of `op` by its shape rule (core_rules), errors at these spans."""
        where = {("operand", i): s for i, s in enumerate(spans)}
        ctx = CheckContext(self.lengths, span, where)
        return PRIMITIVE_SHAPE_RULES[op](Operands(op, types, attrs=attrs), ctx)

    def ein(self, axes: tuple[str, ...], operand: A.Expr, span: Span) -> Val:
        if isinstance(operand, A.Binary) and operand.op == "*":
            a, b = self.value(operand.left), self.value(operand.right)
            ta, tb = (
                self.require_real(a, operand.left.span),
                self.require_real(b, operand.right.span),
            )
            t = self.rule("ein", (ta, tb), {"axes": axes}, span)
            names = (tuple(ta.shape.names()), tuple(relabeled(axes, ta.shape, tb.shape).names()))
            attrs = {"axes": axes, "_names": names}
            ref = self.emit.prim("ein", [a.ref, b.ref], t, attrs, span)
            return Val(t, join(a.reg, b.reg), a.effects + b.effects, ref)
        a = self.value(operand)
        ta = self.require_real(a, operand.span)
        t = self.rule("ein", (ta,), {"axes": axes}, span)
        attrs = {"axes": axes, "_names": (tuple(ta.shape.names()),)}
        return Val(t, a.reg, a.effects, self.emit.prim("ein", [a.ref], t, attrs, span))

    def slice(self, obj: A.Expr, ranges: tuple[A.SliceRange, ...], span: Span) -> Val:
        """`x[a: i .. j, …]`: one `crop` per range, in order, bounds proved (core_rules)."""
        v = self.value(obj)
        for r in ranges:
            start, stop = self.length(r.start), self.length(r.stop)
            where = {
                ("operand", 0): obj.span,
                ("axis", 0): r.span,
                ("start", 0): r.start.span,
                ("stop", 0): r.stop.span,
            }
            attrs = {"axes": (r.name,), "start": start, "stop": stop}
            ctx = CheckContext(self.lengths, span, where)
            t = PRIMITIVE_SHAPE_RULES["crop"](
                Operands("crop", (v.type,), (r.name,), attrs=attrs), ctx
            )
            v = Val(t, v.reg, v.effects, self.emit.prim("crop", [v.ref], t, attrs, span))
        return v

    # ---- calls -----------------------------------------------------------------------------


def check_program(program: Program, emitter: Emitter | None = None) -> Checker:
    """Check every function of every file of the program, telling `emitter` (a lowering)
    what each function computes."""
    checker = Checker(program, emitter if emitter is not None else Emitter())
    checker.run()
    return checker
