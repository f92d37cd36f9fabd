"""Views of a value in a function body (a part of `check.Body`): a member of a module, of
an import or of a parameter tree by name (`t.Tower`, `θ.l1.w`, `l1.w` inside the module:
issue 29), and an ascription (`(x : ℝ)` of a hyperparameter or a dimension, a type made
precise, an axis renamed: issue 29)."""

from __future__ import annotations

from dataclasses import replace

from presk_syntax import ast as A
from presk_syntax.diagnostics import Label
from presk_syntax.span import Span

from presk_types.calls import reported
from presk_types.elab import ConstError, ModuleInfo, instance_of, module_scope, resolve_type
from presk_types.presburger import Lin
from presk_types.rules import Cls
from presk_types.shapes import err
from presk_types.types import (
    SCALAR,
    Bool,
    Idx,
    Instance,
    Machine,
    ParamsT,
    Real,
    Shape,
    Type,
    subst,
    subst_instance,
)
from presk_types.values import FnRef, ModuleVal, Namespace, Val


class Views:
    """Members and ascriptions of a function body (a part of `check.Body`)."""

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
                    return self.constant(file, name, span)
            case ModuleVal(inst, implicit, tree):
                info = self._module_info(inst)
                if name in info.fns:
                    fn = self.checker.info(info.file, info.fns[name], info)
                    return FnRef(fn, inst, implicit, tree)
        if isinstance(obj, Val) and isinstance(obj.type, ParamsT):  # `θ.l1.w` (issue 29)
            return self.member(obj.type.instance, obj.ref, obj.reg, name, span)
        if isinstance(obj, ModuleVal) and obj.implicit:  # `l1.w` inside the module
            theta = {"θ": (Cls.SMOOTH, None)}
            return self.member(obj.instance, obj.tree, theta, name, span)
        what = {
            Namespace: "an imported file",
            ModuleVal: "a module",
            Val: f"a value of type `{getattr(obj, 'type', '')}`",
        }.get(type(obj), "this")
        raise err("E2001", f"unresolved name `{name}`", Label(span, f"not a member of {what}"))

    def member(self, inst: Instance, tree: object, reg, name: str, span: Span) -> Val:
        """A parameter of a tree (`θ.l1.w`: a tensor typed by the sub-module's declaration
        at its instance's arguments) or a sub-module's subtree (`θ.l1 : params Linear{D, H}`),
        whose regularity is the tree's."""
        if inst.stack is not None:
            raise err(
                "E2016",
                f"`params {inst}` is a stack of {inst.stack} trees of `{inst.inner}`: its"
                f" members are not reached by name",
                Label(span, f"`{name}` of each of the {inst.stack}"),
                help="a function of the stacked module reads its own parameters",
            )
        info = self._module_info(inst)
        values = dict(zip(info.dims, inst.args, strict=True))
        try:  # an error of the module's own lines: check_modules reports it, once
            scope = module_scope(info)
            for p in info.params:
                if p.name == name:
                    t = subst(resolve_type(p.type, scope), values)
                    return Val(t, reg, (), self.emit.field(tree, name, t, span))
            for u in info.uses:
                if u.name == name:
                    t = ParamsT(subst_instance(instance_of(u.module, scope), values))
                    return Val(t, reg, (), self.emit.field(tree, name, t, span))
        except ConstError:
            raise ConstError(reported()) from None
        raise err(
            "E2001",
            f"`params {inst}` has no member `{name}`",
            Label(span, f"not a parameter or `use` of `{info.decl.name}`"),
        )

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
        if _renames(target, v.type):  # axes renamed one for one, lengths equal for all values
            self.renamed(target, v.type, span)
        else:
            self.same(target, v.type, span)
        ref = v.ref if target == v.type else self.emit.prim("cast", [v.ref], target, {}, span)
        return Val(target, v.reg, v.effects, ref)

    def renamed(self, target: Type, actual: Type, span: Span) -> None:
        """`(x : ℝ[src: N])` of an `x : ℝ[dst: N]`: the same axes one for one, in order, each
        of the same length for every value of the dimensions (E2006 with the values that
        break it), their names the target's; an index's bound the same."""
        s1, s2 = target.shape, actual.shape
        if s1.prefix != s2.prefix:
            fixed = replace(target, shape=Shape(s2.prefix, s1.axes))
            raise err(
                "E2014",
                f"an ascription renames axes one for one, and `{actual}` cannot be `{target}`:"
                " an open prefix `...` is on both sides or on neither",
                Label(span, f"this is `{actual}`"),
                help=f"`{fixed}` renames its axes",
            )
        before = [a.name for a in s2.axes]
        for i, (x, y) in enumerate(zip(s1.axes, s2.axes, strict=True)):
            if x.name and x.name != y.name and x.name in before:  # it would read as a transpose
                raise err(
                    "E2015",
                    f"`{target}` calls axis {i + 1} of `{actual}` `{x.name}`, the name of another"
                    " of its axes: an ascription renames in place, it does not reorder",
                    Label(span, f"axis {i + 1} is `{y.name or y.length}`"),
                    help=f"`ein[{', '.join(s1.names())}](x)` reorders named axes",
                )
        if isinstance(target, Idx):
            self.lengths.require_equal(target.bound, actual.bound, span)
        for x, y in zip(s1.axes, s2.axes, strict=True):
            self.lengths.require_equal(x.length, y.length, span)


def _renames(target: Type, actual: Type) -> bool:
    """An ascription that renames: tensors of one kind and rank with an axis named in both,
    differently (`ℝ[dst: N]` as `ℝ[src: N]`); the others are `same`'s to decide."""
    if not (isinstance(target, Real | Idx | Bool) and type(target) is type(actual)):
        return False
    pairs = zip(target.shape.axes, actual.shape.axes, strict=False)
    same_rank = target.shape.rank == actual.shape.rank
    return same_rank and any(x.name and y.name and x.name != y.name for x, y in pairs)
