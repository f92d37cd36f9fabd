"""The roofline as a cost model of the optimizer: `--opt --profile FILE` (docs/optimizer.md,
"The roofline as a cost model").

A candidate operation is priced at the sizes of the run: the program is specialized at the
entry's dimensions (`presk_core.specialize`), which says, for every function the entry
reaches, what each of its types is at each binding it is called with (`Sizes`), and how
many times each binding is called. The operation, at those types, is lowered to the
kernels it launches alone (`presk_kernel.lower.Lowering.instruction`, before fusion), and
each kernel costs λ + max(W/π, Q/β) with W and Q from its nest (presk_opt.roofline). A
function's operation costs the sum over its bindings, each times its calls: the sum over a
program is the entry's predicted time, in µs.

What launches no kernel (a field, a record, a call: its callee is priced on its own) costs
nothing. An operation of a function the entry does not reach, or one whose types the run
does not fix, or that does not lower alone, costs one launch (λ): the model then counts
launches, as operation counts do.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from presk_core.ir import Instr, Lit, Program, Value
from presk_types.types import Type

from presk_opt.optimize import NO_KERNEL, CostModel
from presk_opt.roofline import Profile, Roofline, traffic, work


class Sizes:
    """For each function the entries reach, its bindings: (the concrete type of each of its
    types, the calls of that binding in one call of the entries)."""

    def __init__(self, program: Program, entries: Iterable[tuple[str, dict[str, int]]]) -> None:
        from presk_core.specialize import SpecializeError, specialize

        generic = {ins.site: ins for fn in program.functions for ins in fn.body}
        by_name = {fn.name: fn for fn in program.functions}
        self.bindings: dict[str, list[tuple[dict[Type, Type], int]]] = defaultdict(list)
        for entry, dims in entries:
            try:
                spec = specialize(program, entry, dims)
            except SpecializeError:
                continue
            calls = _calls(spec)
            for s in spec.functions:
                name, types = _binding(s, generic, by_name)
                if name is not None:
                    self.bindings[name].append((types, calls.get(s.name, 1)))


def _binding(s, generic: dict, by_name: dict) -> tuple[str | None, dict[Type, Type]]:
    """The generic function a specialized one copies, and its types' concrete ones."""
    types: dict[Type, Type] = {}
    name = None
    for ins in s.body:
        g = generic.get(ins.origin.site) if ins.origin is not None else None
        if g is None:
            continue
        name = g.site.rsplit("/", 1)[0]
        types.setdefault(g.out.type, ins.out.type)
        for a, b in zip(g.args, ins.args, strict=False):
            if isinstance(a, Value) and isinstance(b, Value):
                types.setdefault(a.type, b.type)
    if name is None:
        return None, types
    for p, q in zip(by_name[name].params, s.params, strict=False):
        types.setdefault(p.type, q.type)
    return name, types


def _calls(spec: Program) -> dict[str, int]:
    """How many times each function of a specialized program is called in one call of its
    entry (the first): `call`s counted along the call tree."""
    fns = {f.name: f for f in spec.functions}
    count: dict[str, int] = defaultdict(int)
    count[spec.functions[0].name] = 1
    for f in spec.functions:  # the order specialize reaches them: callers first
        for ins in f.body:
            callee = ins.attr("fn")
            if ins.op == "call" and callee in fns:
                count[callee] += count[f.name]
    return count


class RooflinePrices:
    """`price(function, op, attrs, out, operands)` in µs (the module's docstring)."""

    def __init__(self, profile: Profile, sizes: Sizes) -> None:
        assert profile.fit is not None
        self.roof: Roofline = profile.fit
        self.realize = profile.machine["type"]
        self.sizes = sizes
        self.cache: dict[tuple, float | None] = {}

    def launch(self) -> float:
        return self.roof.lam * 1e6

    def __call__(self, fn: str, op: str, attrs: tuple, out: Type, operands: list) -> float:
        if op in NO_KERNEL:
            return 0.0
        bindings = self.sizes.bindings.get(fn)
        if not bindings:
            return self.launch()
        total = 0.0
        for types, calls in bindings:
            one = self.kernels(op, attrs, types.get(out, out), [
                a if isinstance(a, Lit) else types.get(a, a) for a in operands
            ])  # fmt: skip
            total += calls * (self.launch() if one is None else one)
        return total

    def kernels(self, op: str, attrs: tuple, out: Type, operands: list) -> float | None:
        """µs of the kernels `op` launches alone at these types; None if it does not lower."""
        key = (op, attrs, out, tuple(operands))
        if key not in self.cache:
            self.cache[key] = self._lowered(op, attrs, out, operands)
        return self.cache[key]

    def _lowered(self, op: str, attrs: tuple, out: Type, operands: list) -> float | None:
        from presk_core.build import placement
        from presk_kernel.lower import Known, Lowering, axes_of

        lw = Lowering(Program(()), self.realize)
        try:
            values, args = [], []
            for i, a in enumerate(operands):
                if isinstance(a, Lit):
                    values.append(Known(a.text))
                    args.append(a)
                else:
                    values.append(lw.alloc(axes_of(a), lw.dtype_of(a), f"%{i}", "input"))
                    args.append(Value(i, a))
            args = tuple(args)
            attrs = attrs + placement(op, args, out, attrs)
            ins = Instr(Value(len(args), out), op, args, attrs, site="price/%0")
            lw.instruction(ins, values, "price/%0")
        except Exception:  # noqa: BLE001  (a shape the lowering does not take alone)
            return None
        if not lw.launches:
            return 0.0
        w = [work(launch.kernel) for launch in lw.launches]
        q = [traffic(launch.kernel) for launch in lw.launches]
        return float(self.roof.seconds(w, q).sum()) * 1e6


def predicted(program: Program, model: CostModel) -> float:
    """The entries' predicted time in µs: the cost of the functions they reach (each
    operation at its bindings, times their calls)."""
    from presk_opt.optimize import cost_of

    reached = model.price.sizes.bindings
    return sum(cost_of(fn, model) for fn in program.functions if fn.name in reached)


def roofline_model(profile: Profile, program: Program, entries) -> CostModel:
    """The cost model `roofline, profile OS ARCH TYPE` at the sizes of `entries` ((name,
    dims) each), in µs."""
    prices = RooflinePrices(profile, Sizes(program, entries))
    return CostModel(f"roofline, {profile.label()}", prices, " µs")


__all__ = ["RooflinePrices", "Sizes", "predicted", "roofline_model"]
