"""Calls: of primitives, of functions (their dimensions inferred), of `grad`; λs lifted."""

from __future__ import annotations

from presk_syntax import ast as A
from presk_syntax.diagnostics import Diagnostic, Label, Severity
from presk_syntax.span import Span

from presk_types.conv import conv
from presk_types.core_rules import PRIMITIVE_SHAPE_RULES
from presk_types.elab import ConstError
from presk_types.operands import Operands, Signature
from presk_types.presburger import Lin
from presk_types.rules import (
    CALL_NAMES,
    CONSTANT_NAMES,
    PRIMITIVES,
    Args,
    CheckContext,
    Cls,
    type_rules,
)
from presk_types.scan import scan
from presk_types.shapes import TypeErr, err
from presk_types.topk import top_k
from presk_types.types import (
    Bool,
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
from presk_types.values import FnInfo, FnRef, ModuleVal, Reg, Val, join, through


class Calls:
    """The calls of a function body (a part of `check.Body`)."""

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
            if not local and name == "conv":  # the checker's form of pad, crops and eins
                return conv(self, args, span)
            if not local and name == "scan":  # the checker's form of its calls
                return scan(self, args, span)
            if not local and name == "top_k":  # the indices' primitive, the values a `take`
                return top_k(self, args, span)
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
        if isinstance(function, A.Var) and self._is_pi(function.name):
            raise err(
                "E2008",
                f"`{function.name}` is the constant π, not a function",
                Label(function.span, "a real scalar"),
                help=f"write `{function.name}` without `(…)`",
            )
        raise err("E2008", "this is not a function", Label(function.span, ""))

    def _is_pi(self, name: str) -> bool:
        """`name` is the constant π here: no name of the program hides it (check.Body.name)."""
        module = self.info.module
        hidden = set(self.vars) | set(self.env.consts)
        if module is not None:
            hidden |= {p.name for p in module.params} | {u.name for u in module.uses}
        return name in CONSTANT_NAMES and name not in hidden

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
                        through(v.reg, Cls.DISC, (name, kspan)) if key == "where" else v.reg
                    )
                    effects.extend(v.effects)
                case A.ShapeArg(axis, length, sspan):
                    a.shapes.append((axis, self.length(length), sspan))
                case _:
                    v = self.value(arg)
                    cls = PRIMITIVES[name].cls(len(a.positional))
                    a.positional.append((v.type, arg.span))
                    refs.append(v.ref)
                    regs.append(through(v.reg, cls, (name, span)))
                    effects.extend(v.effects)
        if name in ("max", "min") and len(a.positional) == 2:
            regs = [through(r, Cls.KINK, (name, span)) for r in regs]
        if name == "stop_grad":  # a constant for `grad` (adjoint 0), whatever its operand's class
            regs = []
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
        return Val(t, join(*regs), tuple(effects), ref)

    def length(self, e: A.Expr) -> Lin:
        from presk_types.elab import scope_length

        return scope_length(e, self.scope)

    def call_fn(self, ref: FnRef, args: tuple[A.Arg, ...], span: Span) -> Val:
        callee = self.checker.check(ref.info)
        if not callee.ok:
            raise ConstError(reported())
        if callee.grad_at is not None and self.info.grad_at is None:
            self.info.grad_at = span  # the call takes a gradient
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
                regs.append(through(v.reg, cls, why))
                effects.extend(v.effects)
        if theta_reg is not None:
            cls, why = classes.get("θ", (Cls.SMOOTH, None))
            regs.append(through(theta_reg, cls, why))
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
            refs.append(self.emit.literal(callee.defaults[pname], ptype))
        # a dimension the call does not infer is the caller's of that name; an imported
        # file's that the caller does not have becomes the caller's too (LayerNorm.apply's B
        # and T from another file: bound to nothing, it crashed the run); presk run asks
        # for it only if the value needs it (presk_core.reach)
        mine = set(self.info.context.names) | set(self.info.generic)
        taken = [d for d in callee.generic if d not in bindings and d not in mine]
        if taken:
            self.info.generic = (*self.info.generic, *taken)
        generic = {d: bindings.get(d, Lin.var(d)) for d in callee.generic}
        if ref.instance is not None and ref.instance.stack is not None:
            out = self.emit.fold(callee, ref.instance.stack, generic, refs, result, span)
        else:
            out = self.emit.call(callee, generic, refs, result, span)
        return Val(result, join(*regs), tuple(effects), out)

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
            # a dimension the λ's calls took (no argument fixes it) is this function's too,
            # as a plain call makes it (call_fn): `grad` passes it on by name
            mine = set(self.info.context.names) | set(self.info.generic)
            taken = [d for d in lam.generic if d not in mine]
            if taken:
                self.info.generic = (*self.info.generic, *taken)
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
                Label(f.body.span, f"returns `{lam.result}`, not `ℝ[]`"),
            )
        if lam.grad_at is not None:
            raise err(
                "E3002",
                "`grad` of a function that takes a gradient: derivatives of order two are"
                " not supported",
                Label(grad_span, "`grad` here"),
                Label(lam.grad_at, "takes a gradient"),
                note=f"in `{self.info.decl.name}`",
            )
        wrt = f.params[0]
        wrt_type = dict(lam.params).get(wrt)
        if isinstance(wrt_type, Idx | Bool | KeyT | Machine):
            raise err(
                "E3001",
                f"cannot differentiate with respect to `{wrt}`: `{wrt_type}` is not real",
                Label(grad_span, f"`grad` here, with respect to `{wrt}`"),
                help="differentiate with respect to a real argument (ℝ, or params)",
                note=f"in `{self.info.decl.name}`; the gradient in a discrete argument would"
                " be a silent zero",
            )
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
            regs.append(through(v.reg, Cls.DISC if c == Cls.KINK else c, why))
        for name, v in zip(f.params, vals, strict=False):
            c, why = lam_classes.get(name, (Cls.SMOOTH, None))
            regs.append(through(v.reg, Cls.DISC if c == Cls.KINK else c, why))
        effects = tuple(e for v in vals for e in v.effects) + tuple(lam.effects.items())
        refs = [v.ref for v in lam.captured_vals] + [v.ref for v in vals]
        t = self.grad_type(lam, [v.type for v in lam.captured_vals] + [v.type for v in vals], span)
        out = self.emit.grad(lam, refs, t, span)
        if self.info.grad_at is None:
            self.info.grad_at = grad_span
        return Val(t, join(*regs), effects, out)

    def grad_type(self, lam: FnInfo, types: list[Type], span: Span) -> Type:
        """The type of `grad F(args)` by its shape rule (core_rules): F's last parameter's."""
        sig = Signature(tuple(lam.generic), tuple(t for _, t in lam.params), lam.result)
        ctx = CheckContext(self.lengths, span, functions={lam.key: sig})
        dims = tuple((d, Lin.var(d)) for d in lam.generic)
        return PRIMITIVE_SHAPE_RULES["grad"](
            Operands("grad", tuple(types), attrs={"fn": lam.key, "dims": dims}), ctx
        )

    def lift(self, lam: A.Lambda, types: list[Type]) -> FnInfo:
        """Check a λ as a function of its captured variables, then its parameters."""
        key = f"{self.info.key}.lambda{self.lambda_count}"
        self.lambda_count += 1
        free = _free_names(lam.body, set(lam.params))
        captured = [n for n in free if n in self.vars]
        module = self.info.module
        if (
            module is not None
            and "θ" in self.vars
            and "θ" not in captured
            and "θ" not in lam.params
        ):
            members = (
                {p.name for p in module.params} | {u.name for u in module.uses} | set(module.fns)
            )
            if any(n in members and n not in self.vars for n in free):
                captured.append("θ")  # the λ reads the module's parameters: it captures θ
        info = FnInfo(key, self.env, None, self.info.module, context=self.info.context)
        info.dims, info.generic = self.info.dims, self.info.generic
        info.span = lam.span  # a λ's function is where the λ is written
        inner = type(self)(self.checker, info)
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


def reported() -> Diagnostic:
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
            case A.Slice(obj):
                walk(obj, bound)

    walk(e, bound)
    return out


class Unify:
    """Instantiates a callee's dimensions and prefix from the arguments of a call."""

    def __init__(self, body: Calls, callee: FnInfo, bindings: dict[str, Lin]) -> None:
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
            if a.rank < p.rank:  # `ℝ[...]` for `ℝ[..., model: 4]`: no `model` is known
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

    def solve(self) -> None:
        """Bind a dimension that the pending equations fix alone: `N + 1` against `T + 1` is
        N = T, `2*N` against 8 is N = 4 (a natural length, or it stays unbound)."""
        progress = True
        while progress:
            progress = False
            for p, a, _ in self.pending:
                unbound = [(n, c) for n, c in p.coeffs if n in self.generic - set(self.bindings)]
                if len(unbound) != 1:
                    continue
                name, c = unbound[0]
                rest = subst_lin(p - Lin(((name, c),)), self.bindings)
                diff = a - rest
                terms = [*(k for _, k in diff.coeffs), diff.constant]
                if all(k % c == 0 and k // c >= 0 for k in terms):
                    coeffs = tuple((n, k // c) for n, k in diff.coeffs)
                    self.bindings[name] = Lin(coeffs, diff.constant // c)
                    progress = True

    def finish(self) -> None:
        self.solve()
        for p, a, span in self.pending:
            unbound = p.names - set(self.bindings)
            if unbound & self.generic:
                raise err(
                    "E2008",
                    f"cannot infer `{sorted(unbound)[0]}` in a call of `{self.callee.key}`",
                    Label(span, "give it as a plain dimension in some argument"),
                )
            self.body.lengths.require_equal(subst_lin(p, self.bindings), a, span)
