"""Equality saturation of each function, bounded, then extraction (docs/optimizer.md).

`optimize(program)` puts each function's terms in an e-graph of its own, runs the typing
rules then one iteration of the rules at a time until nothing changes (saturated) or a
bound stops it (iterations, e-nodes, seconds: `Bounds`), extracts the cheapest term of the
returned value and writes it back as PSK-Core (`presk_opt.terms`). A function is
rewritten when its body changes. `Report` holds what `presk run --opt` prints.

The cost model is a parameter (`CostModel`): the extraction minimises it, the report
prints it. The default counts operations; the roofline of a machine profile is the next
one (issue 14).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from egglog import EGraph, Ruleset, union
from presk_core.ir import Function, Instr, Lit, Program
from presk_types.types import Real, Shape, Type

from presk_opt import records, squeeze
from presk_opt.extract import Graph
from presk_opt.rules import REWRITES, SCALAR, TYPING
from presk_opt.terms import OP_COST, Tables, from_chosen, rat_text, to_terms


@dataclass(frozen=True)
class Bounds:
    """When saturation stops short of saturating: the first bound reached, per function."""

    iterations: int = 30
    enodes: int = 200_000
    seconds: float = 3.0


Operand = Type | Lit  # a tensor operand's type, or a literal operand itself


@dataclass(frozen=True)
class CostModel:
    """What extraction minimises and the report prints: its `name` (`operation counts`,
    `roofline, profile linux x86_64 f64`), the `unit` its costs print in (`` or ` µs`), and
    `price(function, op, attrs, out, operands)`: the cost of one operation of the function
    named, its attributes (but `_align`), result type and operands (a type, or the literal).
    A function's cost is the sum over its instructions (`cost_of`)."""

    name: str
    price: Callable[[str, str, tuple, Type, list[Operand]], float]
    unit: str = ""

    def instr(self, fn: str, ins: Instr) -> float:
        operands = [a if isinstance(a, Lit) else a.type for a in ins.args]
        attrs = tuple(kv for kv in ins.attrs if kv[0] != "_align")
        return self.price(fn, ins.op, attrs, ins.out.type, operands)


NO_KERNEL = frozenset(
    {"call", "field", "record", "slice", "tuple", "get", "cast", "stop_grad", "fold",
     "fold_init", "scan", "grad", "value_grad", "reshape_like"}
)  # fmt: skip
"""Operations that compute nothing themselves: views and trees built on the host (a record,
a field, a cast, a `reshape_like`: presk_kernel.moves makes it a view of its operand's
buffer), and calls (their callee is priced on its own)."""

OPERATION_COUNTS = CostModel(
    "operation counts", lambda fn, op, *_: 0.0 if op in NO_KERNEL else float(OP_COST)
)


@dataclass
class FunctionReport:
    name: str
    lets: tuple[int, int]
    cost: tuple[float, float]
    stop: str  # saturated, or the bound that stopped it
    iterations: int
    changed: bool = False


@dataclass
class Report:
    model: str
    unit: str = ""
    functions: list[FunctionReport] = field(default_factory=list)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        """`presk-opt: R of F functions rewritten, L₀ → L₁ lets, cost C₀ → C₁ (MODEL)`, then
        a line per rewritten function."""
        fs = self.functions
        done = [f for f in fs if f.changed]
        l0, l1 = sum(f.lets[0] for f in fs), sum(f.lets[1] for f in fs)
        c0, c1 = sum(f.cost[0] for f in fs), sum(f.cost[1] for f in fs)
        u = self.unit
        out = [
            f"presk-opt: {len(done)} of {len(fs)} functions rewritten, {l0} → {l1} lets, "
            f"cost {number(c0, u)} → {number(c1, u)} ({self.model})"
        ]
        for f in done:
            how = f"saturated, {f.iterations} iterations" if f.stop == "saturated" else f.stop
            out.append(
                f"  {f.name}: {f.lets[0]} → {f.lets[1]} lets, cost {number(f.cost[0], u)} → "
                f"{number(f.cost[1], u)} ({how})"
            )
        return out


def number(c: float, unit: str = "") -> str:
    """An operation count as it is (`53`); a time to four significant digits, at least one
    decimal (`697.8 µs`, `5.714 µs`)."""
    if not unit:
        return f"{c:g}"
    digits = 1 if c == 0 else max(1, 3 - math.floor(math.log10(abs(c))))
    return f"{c:.{digits}f}{unit}"


def cost_of(fn: Function, model: CostModel) -> float:
    return sum(model.instr(fn.name, ins) for ins in fn.body)


def optimize(
    program: Program,
    bounds: Bounds = Bounds(),
    model: CostModel = OPERATION_COUNTS,
    rules: Ruleset | None = REWRITES,
) -> tuple[Program, Report]:
    """The program with its functions saturated together in one e-graph (their terms never
    meet: sites and parameters are the function's), each extracted; the report. `rules`
    None: no rule (the round trip through the terms)."""
    start = time.perf_counter()
    tables = Tables()
    assert tables.type_key(Real(Shape(False, ()))) == SCALAR
    egraph = EGraph()
    for i, fn in enumerate(program.functions):
        enc = to_terms(fn, tables)
        egraph.let(f"root{i}", enc.ret)
        for lit, num in enc.rationals:
            egraph.register(union(lit).with_(num))
    facts, extra = records.for_program(tables, program)
    for fact in [*facts, *squeeze.facts(program)]:
        egraph.register(fact)
    iterations, stop = _saturate(egraph, bounds, rules, extra if rules is not None else None)
    report = Report(model.name, model.unit)
    functions = []
    graph = Graph(egraph)
    chosen = graph.extract(_pricer(graph, tables, model))
    for i, fn in enumerate(program.functions):
        new = from_chosen(fn, graph, chosen, graph.roots[f"root{i}"], tables)
        changed = new.body != fn.body or new.ret != fn.ret
        if not changed:
            new = fn
        functions.append(new)
        report.functions.append(
            FunctionReport(
                fn.name,
                (len(fn.body), len(new.body)),
                (cost_of(fn, model), cost_of(new, model)),
                stop,
                iterations,
                changed,
            )
        )
    report.seconds = time.perf_counter() - start
    return replace(program, functions=tuple(functions)), report


def _saturate(
    egraph: EGraph, bounds: Bounds, rules: Ruleset | None, extra: Ruleset | None = None
) -> tuple[int, str]:
    """The typing rules, then one iteration of the rules at a time, until an iteration
    changes nothing or a bound is reached: the iterations run and what stopped them."""
    start = time.perf_counter()
    iterations = 0
    while True:
        egraph.run(TYPING.saturate())
        if iterations >= bounds.iterations:
            return iterations, f"stopped at {bounds.iterations} iterations"
        enodes = _enodes(egraph)
        if enodes >= bounds.enodes:
            return iterations, f"stopped at {enodes} e-nodes"
        if time.perf_counter() - start >= bounds.seconds:
            return iterations, f"stopped at {bounds.seconds:g} s"
        if rules is None:
            return iterations, "saturated"
        iterations += 1
        updated = egraph.run(rules).updated
        if extra is not None:
            updated = egraph.run(extra).updated or updated
        if not updated:
            return iterations, "saturated"


def _pricer(graph: Graph, tables: Tables, model: CostModel):
    """The cost model's price of an operation node of the e-graph (presk_opt.extract): its
    function by its site, its operands by the classes' types or the literals chosen."""

    def price(n, chosen: dict) -> float:
        op, attrs, ty = (graph.string(c) for c in n.children[:3])
        site = graph.site_of.get(n.children[3], "")
        args = n.children[4:]
        if n.kind == "nv":
            args = graph.nodes[chosen[args[0]]].children
        operands: list[Operand] = []
        for c in args:
            a = graph.nodes[chosen[c]]
            if a.kind == "lit":
                operands.append(Lit(graph.string(a.children[0]), tables.types[graph.type_of[c]]))
            elif a.kind == "num":
                q = graph.nodes[chosen[a.children[0]]].value
                operands.append(Lit(rat_text(q), tables.types[graph.type_of[c]]))
            else:
                operands.append(tables.types[graph.type_of[c]])
        fn = site.rsplit("/", 1)[0]
        return model.price(fn, op, tables.attrs[attrs], tables.types[ty], operands)

    return price


def _enodes(egraph: EGraph) -> int:
    return sum(n for _, n in egraph.all_function_sizes())
