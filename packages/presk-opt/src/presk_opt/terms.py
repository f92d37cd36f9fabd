"""PSK-Core functions as egglog terms, and back (docs/optimizer.md, "Terms").

A function's body becomes one term per instruction, an operand the term of the value it
reads. The constructors of `Term` are one per arity (`n0` … `n3`, `nv` for more), each
holding the operation's name, its attributes and its result type as data (keys into the
`Tables` of the function: `a3`, `t5`), the site it was made at and the rule that made it
(`""` for an instruction of the program). A parameter is `param(id, type)`; a literal is
`lit(text, type)`, and a rational literal is also `num(q, type)`, the same e-class, which
the folding rules compute with exactly.

Every term carries its type: a rule writes only terms whose types the shape rules give, so
every extracted instruction verifies. Back, an instruction of the program keeps its value,
site, span and origin (with the operands the extraction chose); a term a rule made is a
new value of the function, at a fresh id, its origin the site it was made at and the
rule's name (`x ^ 1 = x`, from `loss.bwd/%9`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from fractions import Fraction

from egglog import BigRat, BigRatLike, Expr, String, StringLike, Vec, function, method
from egglog.deconstruct import get_callable_args, get_callable_fn, get_literal_value
from presk_core.build import FunctionBuilder, placement
from presk_core.ir import Function, Instr, Lit, Operand, Origin, Value
from presk_types.types import Type

OP_COST = 1  # each operation; a parameter or a literal costs nothing (docs/optimizer.md)


class Term(Expr):
    """A value of a PSK-Core function: a parameter, a literal, or an operation."""

    @method(cost=0)
    @classmethod
    def param(cls, id: StringLike, ty: StringLike) -> Term: ...

    @method(cost=0)
    @classmethod
    def lit(cls, text: StringLike, ty: StringLike) -> Term: ...

    @method(cost=2)
    @classmethod
    def num(cls, q: BigRatLike, ty: StringLike) -> Term: ...

    @method(cost=OP_COST)
    @classmethod
    def n0(
        cls, op: StringLike, attrs: StringLike, ty: StringLike, site: StringLike, rule: StringLike
    ) -> Term: ...

    @method(cost=OP_COST)
    @classmethod
    def n1(
        cls,
        op: StringLike,
        attrs: StringLike,
        ty: StringLike,
        site: StringLike,
        rule: StringLike,
        a: Term,
    ) -> Term: ...

    @method(cost=OP_COST)
    @classmethod
    def n2(
        cls,
        op: StringLike,
        attrs: StringLike,
        ty: StringLike,
        site: StringLike,
        rule: StringLike,
        a: Term,
        b: Term,
    ) -> Term: ...

    @method(cost=OP_COST)
    @classmethod
    def n3(
        cls,
        op: StringLike,
        attrs: StringLike,
        ty: StringLike,
        site: StringLike,
        rule: StringLike,
        a: Term,
        b: Term,
        c: Term,
    ) -> Term: ...

    @method(cost=OP_COST)
    @classmethod
    def nv(
        cls,
        op: StringLike,
        attrs: StringLike,
        ty: StringLike,
        site: StringLike,
        rule: StringLike,
        args: Vec[Term],
    ) -> Term: ...


@function
def type_of(x: Term) -> String: ...


@dataclass
class Tables:
    """The data the terms of one function name: types and attribute tuples by key, both
    ways. An attribute key is readable (`a3:path=b`) so that a rule can name the one it
    needs (`Tables.attrs_key`)."""

    types: dict[str, Type] = field(default_factory=dict)
    type_keys: dict[Type, str] = field(default_factory=dict)
    attrs: dict[str, tuple] = field(default_factory=dict)

    def type_key(self, t: Type) -> str:
        k = self.type_keys.get(t)
        if k is None:
            k = f"t{len(self.types)}"
            self.types[k] = t
            self.type_keys[t] = k
        return k

    def attrs_key(self, attrs: tuple) -> str:
        """`path=b`: the attributes but the layout's, which the builder computes again for
        what a rule makes (an instruction of the program keeps its own)."""
        key = ";".join(f"{n}={v}" for n, v in attrs if n != "_align")
        self.attrs.setdefault(key, tuple(kv for kv in attrs if kv[0] != "_align"))
        return key


def rational(text: str) -> Fraction | None:
    """The exact value of a literal's text, or None (a dimension's name, π)."""
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def rat(q: Fraction) -> BigRat:
    return BigRat(q.numerator, q.denominator)


def rat_text(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


@dataclass
class Encoded:
    """A function as terms: the term of each value (by id), the returned one, and the
    pairs (literal, its rational) to union."""

    tables: Tables
    terms: dict[int, Term]
    ret: Term
    rationals: list[tuple[Term, Term]]


def to_terms(fn: Function, tables: Tables) -> Encoded:
    terms: dict[int, Term] = {}
    rationals: list[tuple[Term, Term]] = []

    def operand(a: Operand) -> Term:
        if isinstance(a, Value):
            return terms[a.id]
        t = tables.type_key(a.type)
        term = Term.lit(a.text, t)
        q = rational(a.text)
        if q is not None:
            rationals.append((term, Term.num(rat(q), t)))
        return term

    for p in fn.params:
        terms[p.id] = Term.param(f"{fn.name}/{p.id}", tables.type_key(p.type))
    for ins in fn.body:
        args = [operand(a) for a in ins.args]
        head = (ins.op, tables.attrs_key(ins.attrs), tables.type_key(ins.out.type), ins.site, "")
        terms[ins.out.id] = make(head, args)
    return Encoded(tables, terms, operand(fn.ret), rationals)


def make(head: tuple, args: list[Term]) -> Term:
    if len(args) == 0:
        return Term.n0(*head)
    if len(args) == 1:
        return Term.n1(*head, *args)
    if len(args) == 2:
        return Term.n2(*head, *args)
    if len(args) == 3:
        return Term.n3(*head, *args)
    return Term.nv(*head, Vec[Term](*args))


# ---- back to PSK-Core ----------------------------------------------------------------------


@dataclass
class _Node:
    op: str
    attrs: str
    ty: str
    site: str
    rule: str
    args: list  # _Node | Value | Lit


def _decode(term: Term, params: dict[str, Value], tables: Tables, memo: dict) -> object:
    key = term.__egg_typed_expr__
    if key in memo:
        return memo[key]
    fn = get_callable_fn(term)
    args = get_callable_args(term)
    if fn == Term.param:
        out: object = params[get_literal_value(args[0])]
    elif fn == Term.lit:
        out = Lit(get_literal_value(args[0]), tables.types[get_literal_value(args[1])])
    elif fn == Term.num:
        q = args[0].value
        out = Lit(rat_text(Fraction(q)), tables.types[get_literal_value(args[1])])
    else:
        head = [get_literal_value(a) for a in args[:5]]
        rest = args[5:]
        if fn == Term.nv:
            rest = list(get_callable_args(rest[0]))
        out = _Node(*head, [_decode(a, params, tables, memo) for a in rest])
    memo[key] = out
    return out


def from_term(fn: Function, ret: Term, tables: Tables) -> Function:
    """The function whose body computes `ret`, an extracted term (module docstring)."""
    params = {f"{fn.name}/{p.id}": p for p in fn.params}
    original = {ins.site: (i, ins) for i, ins in enumerate(fn.body)}
    root = _decode(ret, params, tables, {})
    nodes: list[_Node] = []  # every operation the result reads, each once
    seen: set[int] = set()
    stack = [root]
    while stack:
        n = stack.pop()
        if not isinstance(n, _Node) or id(n) in seen:
            continue
        seen.add(id(n))
        nodes.append(n)
        stack.extend(n.args)
    # a topological order that is the body's own where it can be: ready nodes by the
    # position of the instruction they stand for (a rule's node just before its site's)
    position = {id(n): (original[n.site][0], 0 if n.rule else 1, k) for k, n in enumerate(nodes)}
    users: dict[int, list[_Node]] = {id(n): [] for n in nodes}
    waiting = {}
    for n in nodes:
        deps = {id(a) for a in n.args if isinstance(a, _Node)}
        waiting[id(n)] = len(deps)
        for d in deps:
            users[d].append(n)
    ready = [(position[id(n)], n) for n in nodes if waiting[id(n)] == 0]
    heapq.heapify(ready)
    builder = FunctionBuilder(fn.name, FunctionBuilder.after(fn.params, fn.body))
    value: dict[int, Value] = {}

    def operand(a: object) -> Operand:
        return value[id(a)] if isinstance(a, _Node) else a

    while ready:
        _, n = heapq.heappop(ready)
        args = tuple(operand(a) for a in n.args)
        _, ins = original[n.site]
        if not n.rule:  # the program's instruction, its operands as extracted
            kept = ins if args == ins.args else replace(ins, args=args)
            builder.place(kept, "")
            value[id(n)] = ins.out
        else:
            attrs = tables.attrs[n.attrs]
            t = tables.types[n.ty]
            attrs = attrs + placement(n.op, args, t, attrs)
            origin = Origin(n.site, n.rule)
            value[id(n)] = builder.emit(n.op, args, t, attrs, ins.span, origin)
        for u in users[id(n)]:
            waiting[id(u)] -= 1
            if waiting[id(u)] == 0:
                heapq.heappush(ready, (position[id(u)], u))
    ret = operand(root)
    return replace(fn, body=tuple(builder.body), ret=ret)


def lets(fn: Function) -> int:
    return len(fn.body)


def instr_cost(ins: Instr) -> float:
    """The default cost model: one an operation (docs/optimizer.md, "Cost models")."""
    return float(OP_COST)
