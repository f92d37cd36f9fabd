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

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from egglog import EGraph, Ruleset, union
from egglog.egraph import to_runtime_expr
from presk_core.ir import Function, Instr, Program
from presk_types.types import Real, Shape, Type

from presk_opt import records
from presk_opt.rules import REWRITES, SCALAR, TYPING
from presk_opt.terms import OP_COST, Tables, Term, to_terms
from presk_opt.terms import from_term as _from_term


@dataclass(frozen=True)
class Bounds:
    """When saturation stops short of saturating: the first bound reached, per function."""

    iterations: int = 30
    enodes: int = 200_000
    seconds: float = 3.0


@dataclass(frozen=True)
class CostModel:
    """What extraction minimises and the report prints: `name` (`operation counts`) and
    the cost of one operation of result type `ty` (`op_cost(op, ty)`). A program's cost is
    the sum over its instructions. `extract` chooses the term (`native_extract`, by the
    constructors' costs, when None: operation counts, a value read twice counted twice)."""

    name: str
    op_cost: Callable[[str, Type], float]
    extract: Callable | None = None  # (egraph, root) -> (term DAG, id): None, by counts

    def instr(self, ins: Instr) -> float:
        return self.op_cost(ins.op, ins.out.type)


OPERATION_COUNTS = CostModel("operation counts", lambda op, ty: float(OP_COST))


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
    functions: list[FunctionReport] = field(default_factory=list)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        """`presk-opt: R of F functions rewritten, L₀ → L₁ lets, cost C₀ → C₁ (MODEL)`, then
        a line per rewritten function."""
        fs = self.functions
        done = [f for f in fs if f.changed]
        l0, l1 = sum(f.lets[0] for f in fs), sum(f.lets[1] for f in fs)
        c0, c1 = sum(f.cost[0] for f in fs), sum(f.cost[1] for f in fs)
        out = [
            f"presk-opt: {len(done)} of {len(fs)} functions rewritten, {l0} → {l1} lets, "
            f"cost {_num(c0)} → {_num(c1)} ({self.model})"
        ]
        for f in done:
            how = f"saturated, {f.iterations} iterations" if f.stop == "saturated" else f.stop
            out.append(
                f"  {f.name}: {f.lets[0]} → {f.lets[1]} lets, cost {_num(f.cost[0])} → "
                f"{_num(f.cost[1])} ({how})"
            )
        return out


def _num(c: float) -> str:
    return f"{c:g}"


def cost_of(fn: Function, model: CostModel) -> float:
    return sum(model.instr(ins) for ins in fn.body)


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
    roots = []
    for i, fn in enumerate(program.functions):
        enc = to_terms(fn, tables)
        roots.append(egraph.let(f"root{i}", enc.ret))
        for lit, num in enc.rationals:
            egraph.register(union(lit).with_(num))
    facts, extra = records.for_program(tables, program)
    for fact in facts:
        egraph.register(fact)
    iterations, stop = _saturate(egraph, bounds, rules, extra if rules is not None else None)
    report = Report(model.name)
    functions = []
    extract = model.extract or native_extract
    for fn, root in zip(program.functions, roots, strict=True):
        dag, term = extract(egraph, root)
        new = _from_term(fn, dag, term, tables)
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


def native_extract(egraph: EGraph, root: Term) -> tuple:
    """The cheapest term of `root`'s e-class by the constructors' costs (an operation
    1000, a rule's `Made.by` 1 more: on a tie the program's own), as egglog's term DAG
    and the root's id in it. egglog-python 13.2.0's decoding of the DAG into expressions,
    and its Python cost models, mix up the strings they share (values of different sorts
    compared as numbers), so `presk_opt.terms` reads the DAG itself."""
    best = egraph._run_extract(to_runtime_expr(root), 0)
    return best.termdag, best.term


def _enodes(egraph: EGraph) -> int:
    return sum(n for _, n in egraph.all_function_sizes())


def opt_pass(program: Program, ctx) -> Program:
    """The pass `core-opt`: the program after `optimize`; the report in
    `ctx.options["opt_report"]`."""
    out, report = optimize(program)
    ctx.options["opt_report"] = report
    return out
