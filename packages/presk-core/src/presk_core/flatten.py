"""`flatten`: parameter trees to their leaves.

`flatten(program)` rewrites every function so that no value is a parameter tree: a
parameter `θ : params Linear{3, 2}` becomes one parameter per leaf (`θ.w : ℝ[3, 2]`,
`θ.b : ℝ[2]`), a function that returns a tree returns the tuple of its leaves (a tree
inside a tuple is the tuple of its leaves too), and `field`, `record` and `slice`
disappear: they only choose leaves. What differentiation writes on trees is written leaf
by leaf (`zeros_like`, `accum`, `put`, `put_slice`); a call passes the leaves of its
trees; a tree read from a tuple (`get`) is the `get`s of its leaves.

The leaves of `params M{…}` are `Program.layouts`' (docs/ir.md, "The program's
metadata"), in their order; a stacked sub-module's leaves are its blocks' (`blocks.0.proj.w`,
`blocks.1.proj.w`, …), so the counts of stacks must be numbers: flatten a specialized
program (presk_core.specialize), whose folds are unrolled first (presk_core.unroll).
`flat_value` lays out an interpreter's value (a tree a dict of stacked leaves) as the
flattened program takes and gives it. A stacked module's initializer (`fold_init`) has
no flat form yet: `FlattenError`.
"""

from __future__ import annotations

from dataclasses import replace

from presk_types.presburger import Lin
from presk_types.types import ParamsT, TupleT, Type, subst, subst_lin

from presk_core.build import FunctionBuilder, made_from
from presk_core.ir import Function, Instr, Lit, Operand, Program, Value
from presk_core.trees import record, under
from presk_core.unroll import unroll_stack


class FlattenError(Exception):
    """A program flatten cannot rewrite (a symbolic stack count, a stacked initializer)."""


Tree = dict  # a tree's value in a flattened body: its leaves' paths to their operands


def flatten(program: Program) -> Program:
    """The program with its parameter trees as their leaves (see the module's docstring)."""
    program = unroll_stack(program)
    f = Flattener(program)
    return replace(program, functions=tuple(f.function(fn) for fn in program.functions))


class Flattener:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.cache: dict[ParamsT, list[tuple[str, Type, str, tuple[int, ...]]]] = {}

    # ---- the leaves of a tree type ------------------------------------------------------

    def leaves(self, t: ParamsT) -> list[tuple[str, Type, str, tuple[int, ...]]]:
        """Each leaf of `t`: its flat path, its type, and where its data is in the
        interpreter's tree (the path and the indices of its stacks)."""
        found = self.cache.get(t)
        if found is None:
            found = self.cache[t] = self._leaves(t)
        return found

    def _leaves(self, t: ParamsT) -> list[tuple[str, Type, str, tuple[int, ...]]]:
        inst = t.instance
        if inst.stack is not None and inst.inner is not None:
            inner = self.leaves(ParamsT(inst.inner))
            return [
                (f"{i}.{p}", lt, at, (i, *idx))
                for i in range(_count(inst.stack, inst))
                for p, lt, at, idx in inner
            ]
        layout = self.program.layout(inst.module)
        if layout is None:
            raise FlattenError(f"no layout for `{inst}` in the program")
        values = dict(zip(layout.dims, inst.args, strict=False))
        out = []
        for leaf in layout.leaves:
            lt = subst(leaf.type, values)
            paths: list[tuple[str, tuple[int, ...]]] = [(leaf.path, ())]
            for prefix, count in reversed(leaf.stack):  # innermost first: `blocks` → `blocks.0`
                n = _count(subst_lin(count, values), inst)
                paths = [
                    (f"{prefix}.{i}{p[len(prefix) :]}", (i, *idx))
                    for p, idx in paths
                    for i in range(n)
                ]
            out.extend((p, lt, leaf.path, idx) for p, idx in paths)
        return out

    def flat_type(self, t: Type) -> Type:
        """A tree as the tuple of its leaves' types; a tuple's elements flattened."""
        if isinstance(t, ParamsT):
            return TupleT(tuple(lt for _, lt, _, _ in self.leaves(t)))
        if isinstance(t, TupleT):
            return TupleT(tuple(self.flat_type(e) for e in t.elements))
        return t

    # ---- a function -----------------------------------------------------------------------

    def function(self, fn: Function) -> Function:
        return Body(self, fn).build()


class Body:
    """One function flattened: `env` maps each value of the original to its operand, or
    for a tree to its leaves' operands."""

    def __init__(self, f: Flattener, fn: Function) -> None:
        self.f, self.fn = f, fn
        self.b = FunctionBuilder(fn.name, FunctionBuilder.after(fn.params, fn.body))
        self.env: dict[int, Operand | Tree] = {}

    def build(self) -> Function:
        fn, b = self.fn, self.b
        params: list[Value] = []
        for p in fn.params:
            if isinstance(p.type, ParamsT):
                tree = {}
                for path, lt, _, _ in self.f.leaves(p.type):
                    tree[path] = v = b.fresh(lt, f"{p}.{path}")
                    params.append(v)
                self.env[p.id] = tree
            else:
                v = Value(p.id, self.f.flat_type(p.type), p.name)
                self.env[p.id] = v
                params.append(v)
        for ins in fn.body:
            b.span, b.origin = ins.span, made_from(ins, f"flatten of {ins.op}")
            self.instr(ins)
        b.span = b.origin = None
        ret = self.operand(fn.ret, fn.result)
        result = self.f.flat_type(fn.result)
        return replace(fn, params=tuple(params), result=result, body=tuple(b.body), ret=ret)

    # ---- operands -------------------------------------------------------------------------

    def rep(self, a: Operand) -> Operand | Tree:
        return a if isinstance(a, Lit) else self.env[a.id]

    def operand(self, a: Operand, t: Type) -> Operand:
        """`a` as one operand: a tree as the tuple of its leaves."""
        r = self.rep(a)
        if not isinstance(r, dict):
            return r
        leaves = [r[p] for p, _, _, _ in self.f.leaves(t)]
        return self.b.emit("tuple", leaves, self.f.flat_type(t))

    def tree(self, a: Operand) -> Tree:
        r = self.rep(a)
        if not isinstance(r, dict):
            raise FlattenError(f"`{a}` is not a parameter tree")
        return r

    # ---- instructions ------------------------------------------------------------------------

    def keep(self, ins: Instr, args: list[Operand]) -> Value:
        """The instruction as it is, its value of the flattened type, at its own site."""
        out = Value(ins.out.id, self.f.flat_type(ins.out.type), ins.out.name)
        self.b.place(replace(ins, out=out, args=tuple(args)), f"flatten of {ins.op}")
        self.env[ins.out.id] = out
        return out

    def split(self, ins: Instr, whole: Value) -> None:
        """A tree returned as the tuple of its leaves: the `get` of each."""
        leaves = self.f.leaves(ins.out.type)
        self.env[ins.out.id] = {
            p: self.b.emit("get", [whole], lt, {"index": i})
            for i, (p, lt, _, _) in enumerate(leaves)
        }

    def instr(self, ins: Instr) -> None:
        op, args = ins.op, ins.args
        match op:
            case "field":
                tree, path = self.tree(args[0]), ins.attr("path")
                self.env[ins.out.id] = tree[path] if path in tree else under(tree, path)
            case "record":
                self.env[ins.out.id] = record(ins.attr("keys"), [self.rep(a) for a in args])
            case "slice":
                self.env[ins.out.id] = under(self.tree(args[0]), str(ins.attr("index")))
            case "zeros_like" | "accum" if isinstance(self.rep(args[0]), dict):
                trees = [self.tree(a) for a in args]
                self.env[ins.out.id] = {
                    p: self.b.emit(op, [t[p] for t in trees], v.type) for p, v in trees[0].items()
                }
            case "put":
                tree, path, a = self.tree(args[0]), ins.attr("path"), self.rep(args[1])
                self.env[ins.out.id] = {k: self._placed(k, v, path, a) for k, v in tree.items()}
            case "put_slice":
                tree, a = self.tree(args[0]), self.tree(args[1])
                self.env[ins.out.id] = {
                    k: self._placed(k, v, str(ins.attr("index")), a) for k, v in tree.items()
                }
            case "call":
                callee = self.f.program.function(ins.attr("fn"))
                flat: list[Operand] = []
                for a, p in zip(args, callee.params, strict=True):
                    r = self.rep(a)
                    if isinstance(r, dict):
                        flat.extend(r[path] for path, _, _, _ in self.f.leaves(a.type))
                    else:
                        flat.append(self.operand(a, p.type))
                out_value = self.keep(ins, flat)
                if isinstance(ins.out.type, ParamsT):
                    self.split(ins, out_value)
            case "get":
                whole = self.keep(ins, [self.operand(args[0], args[0].type)])
                if isinstance(ins.out.type, ParamsT):
                    self.split(ins, whole)
            case "fold" | "fold_init" | "grad" | "value_grad":
                raise FlattenError(
                    f"`{op}` in `{self.fn.name}` has no flat form"
                    + (": flatten a specialized program" if op == "fold" else "")
                )
            case _:
                if isinstance(ins.out.type, ParamsT):
                    raise FlattenError(f"`{op}` makes a parameter tree in `{self.fn.name}`")
                self.keep(ins, [self.operand(a, a.type) for a in args])

    def _placed(self, key: str, leaf: Operand, path: str, a: Operand | Tree) -> Operand:
        """A leaf of `put`'s result: `a`'s at `path`, zeros elsewhere."""
        if not isinstance(a, dict) and key == path:
            return a
        if isinstance(a, dict) and key.startswith(path + "."):
            return a[key[len(path) + 1 :]]
        return self.b.emit("zeros_like", [leaf], leaf.type)


def _count(e: Lin, inst) -> int:
    if not e.is_const:
        raise FlattenError(f"the stack of `{inst}` has a count `{e}` that is not a number")
    return e.constant


# ---- values ----------------------------------------------------------------------------------


def flat_value(program: Program, t: Type, value: object) -> object:
    """An interpreter's value of type t as the flattened program has it: a tree (a dict of
    stacked leaves) as the tuple of its leaves, stacks split into their blocks."""
    return _flat_value(Flattener(program), t, value)


def flat_arguments(program: Program, types: list[Type], values: list[object]) -> list[object]:
    """The arguments of a function as its flattened form takes them: a tree's leaves in
    place of the tree."""
    f = Flattener(program)
    out: list[object] = []
    for t, v in zip(types, values, strict=True):
        if isinstance(t, ParamsT):
            out.extend(_leaf_data(v, at, idx) for _, _, at, idx in f.leaves(t))
        else:
            out.append(_flat_value(f, t, v))
    return out


def _flat_value(f: Flattener, t: Type, value: object) -> object:
    if isinstance(t, ParamsT):
        return tuple(_leaf_data(value, at, idx) for _, _, at, idx in f.leaves(t))
    if isinstance(t, TupleT):
        return tuple(_flat_value(f, e, v) for e, v in zip(t.elements, value, strict=True))
    return value


def _leaf_data(tree: dict, path: str, index: tuple[int, ...]) -> object:
    data = tree[path]
    return data[index] if index else data


__all__ = ["FlattenError", "flat_arguments", "flat_value", "flatten"]
