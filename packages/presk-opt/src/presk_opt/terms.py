"""PSK-Core functions as egglog terms, and back (docs/optimizer.md, "Terms").

A function's body becomes one term per instruction, an operand the term of the value it
reads. The constructors of `Term` are one per arity (`n0` … `n3`, `nv` for more), each
holding the operation's name, its attributes and its result type as data (an attribute
key, `path=b`, and a type key into the `Tables`, `t5`) and where it was made (`Made.at(site)`
for an instruction of the program, `Made.by(m, rule)` for what a rule made). A parameter is
`param("F/id", type)`; a literal is `lit(text, type)`, and a rational literal is also
`num(q, type)`, the same e-class, which the folding rules compute with exactly.

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

from egglog import (
    BigRat,
    BigRatLike,
    Expr,
    Map,
    String,
    StringLike,
    Vec,
    function,
    method,
    relation,
)
from presk_core.build import FunctionBuilder, placement
from presk_core.ir import Function, Instr, Lit, Operand, Origin, Value
from presk_types.types import Type

SCALAR = "t0"  # the type key of ℝ[], a literal's type (Tables registers it first)
OP_COST = 1  # each operation; a parameter or a literal costs nothing (docs/optimizer.md)


def _no_lets_of_literals() -> None:
    """egglog-python 13.2.0 binds a subexpression with several parents to a global `let`
    (`$__expr_N`, "only for performance reasons"); for a string or a rational literal
    such a global's value is read back as another string, now and then (a `div`'s
    attributes read as `call`, an `add` as `field`: once in three runs of the tiny
    MiniGPT, in egglog's own extraction and in its serialization alike). Literals are sent
    as themselves: in thirty runs, no string read wrong (docs/optimizer.md, "Extraction")."""
    from egglog import egraph_state
    from egglog.declarations import LitDecl

    state = egraph_state.EGraphState
    if getattr(state, "_presk_literals", False):
        return
    transform = state._transform_let

    def _transform_let(self, typed_expr):
        if isinstance(typed_expr.expr, LitDecl):
            return typed_expr  # not bound: sent as a literal wherever it occurs
        return transform(self, typed_expr)

    state._transform_let = _transform_let
    state._presk_literals = True


_no_lets_of_literals()


class Made(Expr):
    """Where a term was made: `at(site)`, an instruction of the program, or `by(m, rule)`,
    by a rule from the term made at m (costing a little more: on a tie, the extraction
    keeps the program's own)."""

    @method(cost=0)
    @classmethod
    def at(cls, site: StringLike) -> Made: ...

    @method(cost=1)
    @classmethod
    def by(cls, made: Made, rule: StringLike) -> Made: ...


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

    @method(unextractable=True)
    @classmethod
    def part(cls, ty: StringLike, entries: Map[String, Term]) -> Term:
        """A sum of `put`s of a tree of type `ty`: the entries they set, by name (the rule
        `puts of zeros summed = record`, presk_opt.records); never extracted."""

    @method(cost=OP_COST * 1000)
    @classmethod
    def n0(cls, op: StringLike, attrs: StringLike, ty: StringLike, made: Made) -> Term: ...

    @method(cost=OP_COST * 1000)
    @classmethod
    def n1(
        cls,
        op: StringLike,
        attrs: StringLike,
        ty: StringLike,
        made: Made,
        a: Term,
    ) -> Term: ...

    @method(cost=OP_COST * 1000)
    @classmethod
    def n2(
        cls,
        op: StringLike,
        attrs: StringLike,
        ty: StringLike,
        made: Made,
        a: Term,
        b: Term,
    ) -> Term: ...

    @method(cost=OP_COST * 1000)
    @classmethod
    def n3(
        cls,
        op: StringLike,
        attrs: StringLike,
        ty: StringLike,
        made: Made,
        a: Term,
        b: Term,
        c: Term,
    ) -> Term: ...

    @method(cost=OP_COST * 1000)
    @classmethod
    def nv(
        cls,
        op: StringLike,
        attrs: StringLike,
        ty: StringLike,
        made: Made,
        args: Vec[Term],
    ) -> Term: ...


@function
def type_of(x: Term) -> String: ...


no_minus_zero = relation("presk_no_minus_zero", Term)
"""x is never −0 (presk_opt.rules.SIGNS): adding +0 to it, or zeros, changes no bit."""


@dataclass
class Tables:
    """The data the terms of a program name: types by key (`t3`), both ways, and attribute
    tuples by a readable key (`path=b`), so that a rule can name the one it needs."""

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
        if q is not None and not (q == 0 and a.text.lstrip().startswith("-")):  # −0 is no 0
            rationals.append((term, Term.num(rat(q), t)))
        return term

    for p in fn.params:
        terms[p.id] = Term.param(f"{fn.name}/{p.id}", tables.type_key(p.type))
    for ins in fn.body:
        args = [operand(a) for a in ins.args]
        made = Made.at(ins.site)
        head = (ins.op, tables.attrs_key(ins.attrs), tables.type_key(ins.out.type), made)
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


def _decode(dag, i: int, params: dict[str, Value], tables: Tables, memo: dict) -> object:
    """The operand or `_Node` of term `i` of an extraction's term DAG (egglog's own terms:
    `presk_opt_terms_Term_n2`, string literals, `bigrat` of two `from-string`s)."""
    if i in memo:
        return memo[i]
    term = dag.get(i)
    kind = term.name.rsplit("_", 1)[-1]
    args = term.args

    def text(j: int) -> str:
        return dag.get(j).value.value

    if kind == "param":
        out: object = params[text(args[0])]
    elif kind == "lit":
        out = Lit(text(args[0]), tables.types[text(args[1])])
    elif kind == "num":
        num, den = (text(dag.get(j).args[0]) for j in dag.get(args[0]).args)
        out = Lit(rat_text(Fraction(int(num), int(den))), tables.types[text(args[1])])
    else:
        site, rule = _made(dag, args[3])
        head = [text(j) for j in args[:3]] + [site, rule]
        rest = list(args[4:])
        if kind == "nv":
            rest = list(dag.get(rest[0]).args)
        out = _Node(*head, [_decode(dag, j, params, tables, memo) for j in rest])
    memo[i] = out
    return out


def _made(dag, i: int) -> tuple[str, str]:
    """The site and the rule (the last one; "" for the program's) of a `Made` term."""
    term = dag.get(i)
    if term.name.endswith("_at"):
        return dag.get(term.args[0]).value.value, ""
    site, _ = _made(dag, term.args[0])
    return site, dag.get(term.args[1]).value.value


def from_term(fn: Function, dag, ret: int, tables: Tables) -> Function:
    """The function whose body computes `ret`, a term of an extraction's DAG `dag` (module
    docstring)."""
    params = {f"{fn.name}/{p.id}": p for p in fn.params}
    return from_root(fn, _decode(dag, ret, params, tables, {}), tables)


def from_chosen(fn: Function, graph, chosen: dict[str, str], root: str, tables: Tables):
    """The function whose body computes e-class `root` of `graph` (presk_opt.extract), each
    class by its `chosen` node."""
    params = {f"{fn.name}/{p.id}": p for p in fn.params}
    memo: dict[str, object] = {}
    nodes = graph.nodes

    def made(c: str) -> tuple[str, str]:
        n = nodes[chosen[c]]
        if n.kind == "at":
            return graph.string(n.children[0]), ""
        return made(n.children[0])[0], graph.string(n.children[1])

    stack = [(root, False)]
    while stack:  # operands before the node: no recursion on long chains
        c, ready = stack.pop()
        if c in memo:
            continue
        n = nodes[chosen[c]]
        if n.kind == "param":
            memo[c] = params[graph.string(n.children[0])]
            continue
        if n.kind == "lit":
            memo[c] = Lit(graph.string(n.children[0]), tables.types[graph.string(n.children[1])])
            continue
        if n.kind == "num":
            q = nodes[chosen[n.children[0]]].value
            memo[c] = Lit(rat_text(q), tables.types[graph.string(n.children[1])])
            continue
        operands = list(n.children[4:])
        if n.kind == "nv":
            operands = list(nodes[chosen[operands[0]]].children)
        if not ready:
            stack.append((c, True))
            stack.extend((a, False) for a in operands if a not in memo)
            continue
        head = [graph.string(k) for k in n.children[:3]]
        memo[c] = _Node(*head, *made(n.children[3]), [memo[a] for a in operands])
    return from_root(fn, memo[root], tables)


def from_root(fn: Function, root: object, tables: Tables) -> Function:
    """The function whose body computes `root`, a decoded term (`_Node` or operand)."""
    original = {ins.site: (i, ins) for i, ins in enumerate(fn.body)}
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
    placed: set[str] = set()

    def operand(a: object) -> Operand:
        return value[id(a)] if isinstance(a, _Node) else a

    while ready:
        _, n = heapq.heappop(ready)
        args = tuple(operand(a) for a in n.args)
        _, ins = original[n.site]
        if not n.rule and n.site not in placed:  # the program's, its operands as extracted
            kept = ins if args == ins.args else replace(ins, args=args)
            builder.place(kept, "")
            placed.add(n.site)
            value[id(n)] = ins.out
        else:  # what a rule made; or, rarely, an instruction extracted a second time with
            # other operands (equivalent ones): a copy at a new value
            attrs = tables.attrs[n.attrs] if n.rule else ins.attrs
            attrs = tuple(kv for kv in attrs if kv[0] != "_align")
            t = tables.types[n.ty]
            attrs = attrs + placement(n.op, args, t, attrs)
            origin = Origin(n.site, n.rule or "extracted again")
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
