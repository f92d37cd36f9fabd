"""`specialize`: a program at an entry's dimensions, every value of a static shape.

`specialize(program, entry, dims)` takes the name of a function of the program and the
dimension bindings as `presk run --dim` gives them: the entry's dimensions by name, and
any other name an axis of its open prefix `...`, in the order given. The result holds the
functions the entry reaches, each specialized at the bindings it is called with: its
dimensions replaced by their numbers (in the types, the literals that read a dimension,
the `count` of a fold, the lengths of `causal_mask` and `split`), its `...` replaced by
the axes its caller passes, so that no function has dimensions and no type a prefix.

Names are deterministic: a function without dimensions or prefix keeps its name; another
is `name{D=3,B=2}` after its dimensions in declaration order, then `[batch: 4]` for its
prefix's axes (`[]` when the caller passes none). The entry comes first, then the
functions in the order they are reached (depth first, in the order of their calls).

The attributes that place an operand's prefix implicitly (`_align`, `ein`'s `_names`)
are extended to the prefix's axes, which are explicit afterwards: the interpreter runs a
specialized program to the same bits as the original at the same bindings. Every
instruction is a copy: its site is its new function's (`Linear.apply{In=3,Out=2}/%5`), its
origin the site it was copied from, by the rule `specialize`.

`Program.layouts` is kept, each module's file dimensions (a leaf's dimension its `params
M` does not carry: minigpt's `pos : ℝ[seq: T, D]`) bound at the value the reached
functions that read or make its tree give them (a sub-module's at its parent's); one read
at two values stays a name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from presk_types.presburger import Lin
from presk_types.types import (
    AxisT,
    Bool,
    Idx,
    ParamsT,
    Real,
    Shape,
    TupleT,
    Type,
    shape_of,
    subst,
)

from presk_core.ir import (
    Function,
    Instr,
    Lit,
    Operand,
    Origin,
    ParamLayout,
    Program,
    Value,
    site_of,
)
from presk_core.layout import bound_layout, free_dims, init_trees

CALLS = ("call", "fold", "fold_init", "scan", "grad", "value_grad")
"""The operations that name a function of the program (attribute `fn`)."""


class SpecializeError(Exception):
    """An entry that cannot be specialized: a missing dimension, an unknown function."""


def specialize(program: Program, entry: str, dims: Mapping[str, int]) -> Program:
    """The functions `entry` reaches at `dims` (see the module's docstring); the entry is
    the first function of the result."""
    try:
        fn = program.function(entry)
    except KeyError:
        raise SpecializeError(f"no function `{entry}`") from None
    missing = [d for d in fn.dims if d not in dims]
    if missing:
        raise SpecializeError(f"no value for the dimension `{missing[0]}` of `{entry}`")
    bound = tuple((d, int(dims[d])) for d in fn.dims)
    prefix = None
    if has_prefix(fn):
        extra = [(k, int(v)) for k, v in dims.items() if k not in fn.dims]
        if not extra:
            raise SpecializeError(
                f"`{entry}` takes an open prefix `...`: give its axes as other dimensions"
            )
        prefix = tuple(AxisT(k, Lin.const(v)) for k, v in extra)
    return Specializer(program).run(fn, bound, prefix)


def specialized_name(fn: Function, bound: tuple[tuple[str, int], ...], prefix) -> str:
    """`name`, `name{D=3,B=2}`, `name{In=3,Out=2}[batch: 4]`: deterministic."""
    name = fn.name
    if bound:
        name += "{" + ",".join(f"{d}={v}" for d, v in bound) + "}"
    if prefix is not None:
        name += "[" + ", ".join(str(a) for a in prefix) + "]"
    return name


def has_prefix(fn: Function) -> bool:
    """Whether a function's parameters have an open prefix `...`."""
    return any(_prefixed(p.type) for p in fn.params)


def _prefixed(t: Type) -> bool:
    if isinstance(t, TupleT):
        return any(_prefixed(e) for e in t.elements)
    s = shape_of(t)
    return s is not None and s.prefix


class Specializer:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.functions = {f.name: f for f in program.functions}
        self.done: dict[str, Function] = {}
        self.order: list[str] = []
        self.free = {lay.module: free_dims(lay) for lay in program.layouts}
        self.read: dict[str, dict[str, set[int]]] = {}  # a module's file dimension's values

    def run(self, fn: Function, bound, prefix) -> Program:
        self.reach(fn, bound, prefix)
        functions = tuple(self.done[n] for n in self.order)
        return replace(self.program, functions=functions, layouts=self.layouts())

    def reach(self, fn: Function, bound, prefix) -> str:
        name = specialized_name(fn, bound, prefix)
        if name not in self.done:
            self.done[name] = fn  # a placeholder while its body is specialized (recursion)
            self.order.append(name)
            self.note(fn, dict(bound))
            self.done[name] = FunctionAt(self, fn, dict(bound), prefix).build(name)
        return name

    def note(self, fn: Function, values: dict[str, int]) -> None:
        """The values `fn` binds of the file dimensions of the trees it reads or makes."""
        types = [p.type for p in fn.params] + [fn.result] + [i.out.type for i in fn.body]
        for module in _modules(types):
            for d in self.free.get(module, ()):
                if d in values:
                    self.read.setdefault(module, {}).setdefault(d, set()).add(values[d])

    def layouts(self) -> tuple[ParamLayout, ...]:
        """`Program.layouts` with each module's file dimensions at the values the reached
        functions bind them to (a sub-module's at its parent's): `params MiniGPT`'s `pos`
        is `ℝ[seq: 8, 16]` at `T = 8`. A dimension read at two values stays a name."""
        children = {
            key: sorted(_modules(t for _, t in entries))
            for key, (_, entries) in init_trees(self.program).items()
        }
        work = list(self.read)
        while work:
            key = work.pop()
            for child in children.get(key, ()):
                for d in self.free.get(child, ()) & self.read[key].keys():
                    values = self.read.setdefault(child, {}).setdefault(d, set())
                    if not self.read[key][d] <= values:
                        values |= self.read[key][d]
                        work.append(child)
        return tuple(
            bound_layout(
                lay, {d: min(v) for d, v in self.read.get(lay.module, {}).items() if len(v) == 1}
            )
            for lay in self.program.layouts
        )


class FunctionAt:
    """One function at its bindings and prefix."""

    def __init__(self, sp: Specializer, fn: Function, values: dict[str, int], prefix) -> None:
        self.sp, self.fn = sp, fn
        self.values = values
        self.lins = {d: Lin.const(v) for d, v in values.items()}
        self.prefix = prefix
        self.rank = len(prefix) if prefix is not None else 0
        self.env: dict[int, Value] = {}

    def type(self, t: Type) -> Type:
        return subst(t, self.lins, Shape(False, self.prefix) if self.prefix is not None else None)

    def lin(self, e: Lin) -> Lin:
        return Lin.const(e.value(self.values))

    def value(self, v: Value) -> Value:
        out = Value(v.id, self.type(v.type), v.name)
        self.env[v.id] = out
        return out

    def operand(self, a: Operand) -> Operand:
        if isinstance(a, Lit):
            if a.text in self.values:  # a dimension's value at run time
                return Lit(str(self.values[a.text]), a.type)
            return Lit(a.text, self.type(a.type))
        return self.env[a.id]

    def build(self, name: str) -> Function:
        self.name = name
        fn = self.fn
        params = tuple(self.value(p) for p in fn.params)
        body = tuple(self.instr(i) for i in fn.body)
        return Function(
            name,
            (),
            params,
            self.type(fn.result),
            body,
            self.operand(fn.ret),
            fn.effects,
            fn.span,
            fn.defaults,
        )

    def instr(self, ins: Instr) -> Instr:
        args = tuple(self.operand(a) for a in ins.args)
        attrs = []
        for k, v in ins.attrs:
            if k == "dims":  # every dimension is bound: the callee has none
                v = ()
            elif k == "_align" and self.rank:
                v = self.align(ins, v)
            elif k == "_names" and ins.op == "ein" and self.rank:
                v = tuple(self.names(a, n) for a, n in zip(ins.args, v, strict=True))
            elif k == "axes" and ins.op == "ein" and self.rank and _prefixed(ins.out.type):
                v = self.prefix_names() + tuple(v)
            else:
                v = self.attr(v)
            attrs.append((k, v))
        if ins.op in CALLS:
            attrs = [(k, v) for k, v in attrs if k != "fn"]
            attrs.insert(0, ("fn", self.callee(ins, args)))
        out = self.value(ins.out)
        site = site_of(self.name, out)
        origin = Origin(ins.site, "specialize") if ins.site else ins.origin
        return Instr(out, ins.op, args, tuple(attrs), ins.span, site, origin)

    def attr(self, v: object) -> object:
        if isinstance(v, Lin):
            return self.lin(v)
        if isinstance(v, tuple):
            return tuple(self.attr(x) for x in v)
        return v

    def prefix_names(self) -> tuple[str, ...]:
        return tuple(a.name if a.name else f"_{i}" for i, a in enumerate(self.prefix))

    def names(self, a: Operand, names: tuple[str, ...]) -> tuple[str, ...]:
        return self.prefix_names() + tuple(names) if _prefixed(a.type) else tuple(names)

    def align(self, ins: Instr, maps: tuple) -> tuple:
        """The alignment maps with the prefix's axes placed explicitly: an operand's prefix
        is the leading axes of the result's."""
        if ins.op == "sum_to":  # one map: operand 1 on operand 0's axes
            ct, x = ins.args
            return self.extend(x, ct.type, maps)
        if ins.op in ("softmax", "log_softmax"):  # one map: the mask on the operand's axes
            x, mask = ins.args
            return self.extend(mask, x.type, maps)
        return tuple(
            self.extend(a, ins.out.type, m) if m is not None else m
            for a, m in zip(ins.args, maps, strict=False)
        )

    def extend(self, a: Operand, result: Type, pos: tuple) -> tuple:
        s = shape_of(result)
        if not isinstance(a, Value) or not _prefixed(a.type) or s is None or not s.prefix:
            return tuple(pos)
        p = self.rank
        return tuple(i - p - s.rank for i in range(p)) + tuple(pos)

    def callee(self, ins: Instr, args: tuple[Operand, ...]) -> str:
        fn = self.sp.functions.get(ins.attr("fn"))
        if fn is None:
            raise SpecializeError(f"no function `{ins.attr('fn')}`")
        given = {d: e.value(self.values) for d, e in ins.attr("dims", ())}
        missing = [d for d in fn.dims if d not in given]
        if missing:
            raise SpecializeError(f"`{ins.attr('fn')}` is called without `{missing[0]}`")
        bound = tuple((d, given[d]) for d in fn.dims)
        prefix = _callee_prefix(fn, args) if has_prefix(fn) else None
        return self.sp.reach(fn, bound, prefix)


def _modules(types: Iterable[Type]) -> set[str]:
    """The keys of the modules whose trees the types hold (a stack's block's too)."""
    out: set[str] = set()
    for t in types:
        if isinstance(t, TupleT):
            out |= _modules(t.elements)
        elif isinstance(t, ParamsT):
            inst = t.instance
            while inst is not None:
                out.add(inst.module)
                inst = inst.inner
    return out


def _callee_prefix(fn: Function, args: tuple[Operand, ...]) -> tuple[AxisT, ...]:
    """The axes a call passes as its callee's `...`: an argument's leading axes beyond the
    parameter's own (for a fold, the block's tree comes first and has none)."""
    for p, a in zip(fn.params, args, strict=False):
        found = _leading(p.type, a.type)
        if found is not None:
            return found
    return ()


def _leading(param: Type, arg: Type) -> tuple[AxisT, ...] | None:
    if isinstance(param, TupleT) and isinstance(arg, TupleT):
        for p, a in zip(param.elements, arg.elements, strict=False):
            found = _leading(p, a)
            if found is not None:
                return found
        return None
    ps, s = shape_of(param), shape_of(arg)
    if ps is None or s is None or not ps.prefix or not isinstance(arg, Real | Idx | Bool):
        return None
    return s.axes[: s.rank - ps.rank]


__all__ = ["CALLS", "SpecializeError", "has_prefix", "specialize", "specialized_name"]
