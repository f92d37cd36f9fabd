"""The residual form of reverse mode (`--remat residuals`, the default): `F.fwd`, `F.bwd`.

A `.vjp` of the recomputing form (presk_ad.vjp) is F's forward pass followed by its
reverse sweep, and the sweep of a caller calls the callee's `.vjp`, which computes the
callee's forward pass again. Here each function F the gradient reaches is split in two:

- `F.fwd{dims}(params…) -> (value, residuals)` runs F's forward pass once and returns, as
  a tuple, F's value when a caller's forward pass reads it (else only the residuals), then
  the tuple of F's *residuals*: the values of its forward pass its sweep reads, in the
  order they are computed. A callee's residuals are one residual of its caller, a tuple.
- `F.bwd{dims}(read params…, residuals, ct) -> (adjoints…)` is the sweep: it takes the
  parameters of F its sweep reads (in F's order), then `residuals` (omitted when there are
  none), then the cotangent, and returns the adjoints its callers read, as `.vjp` does.
- In F's forward pass a differentiated call of G is a call of `G.fwd` when G has
  residuals (G's value, when read, is the first element of its result), and of G itself
  when G's sweep reads only its parameters: G then has no `.fwd`, and the sweep calls
  `G.bwd` with G's arguments.
- `F.vjp` is `F.bwd` after `F.fwd` (`F.bwd` alone without residuals); `F.grad` calls it
  with ct = 1, as in the recomputing form.
- `F.value_vjp` is `F.vjp` that also returns F's value: the one `F.fwd` computed (F's
  `.fwd` always returns its value then), or, without residuals, F's own call, its sweep
  reading only the parameters. Either way F's forward pass runs once. `F.value_grad` calls
  it with ct = 1.

Views of the parameters (`field`, `slice`, `get`, `cast` of parameters, or of views) are not
residuals: `F.bwd` takes the parameters and reads its views again, which copies nothing
(`Linear.apply` reads `θ.b` in its sweep, and has no residuals). Every other forward value
the sweep reads is computed once, in `F.fwd`, by the same operation on the same operands as
in the recomputing form, and the sweep is the same instructions: the gradients of the two
forms are the same bits.

The generated functions follow the `.vjp`s and `.grad`s: for each function, callees before
callers, its `.bwd` then its `.fwd`. Dead code is removed in each.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk_core.build import FunctionBuilder
from presk_core.ir import Function, Instr, Lit, Operand, Origin, Value
from presk_types.types import TupleT, subst

from presk_ad.dataflow import call_prefix, dead_code
from presk_ad.vjp import AD, Sweep, _var

VIEWS = frozenset({"field", "slice", "get", "cast"})
"""Operations whose result is a part of their operand or the operand itself: free to read
again in a `.bwd` from the parameters, so never residuals."""

RESIDUALS_OP = "_residuals"
"""A pseudo-operation of the analysis: `RES = _residuals G(args)` stands, right after a
differentiated `call G(args)`, for the residuals `G.fwd(args)` returns; `F.fwd` replaces
the pair by a call of `G.fwd` and `get`s. It never reaches a generated function."""


@dataclass(frozen=True)
class Split:
    """The split of one function F: what its `.fwd` computes and its `.bwd` reads."""

    fn: Function
    needed: tuple[int, ...]  # the parameters whose adjoints `F.bwd` returns
    forward: tuple[Instr, ...]  # F's body, a `_residuals` after each call of a `.fwd`
    sweep: tuple[Instr, ...]  # the reverse sweep, dead code removed
    ret: Value  # the tuple of adjoints
    ct: Value
    residuals: tuple[Value, ...]  # forward values the sweep reads, in the forward's order
    views: tuple[Instr, ...]  # views of the parameters the sweep reads, read again
    reads: tuple[int, ...]  # the parameters `F.bwd` takes
    count: int  # the first free value id

    @property
    def residual_type(self) -> TupleT:
        return TupleT(tuple(r.type for r in self.residuals))


class ResidualSweep(Sweep):
    """A sweep whose calls' adjoints are calls of the callees' `.bwd`s."""

    def __init__(self, ad: ResidualAD, fn: Function, needed: list[int]) -> None:
        super().__init__(ad, fn, needed, f"{fn.name}.bwd")
        self.pending: dict[int, Instr] = {}  # a call's result id → its `_residuals`

    def call(self, ins: Instr, ct: Operand) -> None:
        name = ins.attr("fn")
        plan = self.ad.split(name)
        dims = ins.attr("dims", ())
        values = dict(dims)
        args: list[Operand] = [ins.args[j] for j in plan.reads]
        if plan.residuals:
            res = self.new(subst(plan.residual_type, values, call_prefix(plan.fn, ins)))
            attrs = (("fn", name), ("dims", dims), ("call", ins.out))
            self.pending[ins.out.id] = Instr(res, RESIDUALS_OP, ins.args, attrs, ins.span, ins.site)
            args.append(res)
        attrs = {"fn": f"{name}.bwd", "dims": dims}
        r = self.emit(
            "call", [*args, ct], subst(plan.ret.type, values, call_prefix(plan.fn, ins)), attrs
        )
        self.read_adjoints(ins, r, plan.needed)


class ResidualAD(AD):
    """The `.vjp`s, `.grad`s, `.bwd`s and `.fwd`s of the residual form.

    `split` analyses each function the gradient reaches once, callees first (a call's
    adjoint needs the callee's `.bwd` signature); `finish` then decides, callers first,
    which `.fwd`s return their value (a caller's forward pass reads it), and writes the
    functions.
    """

    def __init__(self, program) -> None:
        super().__init__(program)
        self.plans: dict[str, Split | None] = {}
        self.order: list[str] = []  # the splits in the order they are complete
        self.valued: set[str] = set()  # the functions with a `.value_vjp`: F.fwd returns F

    def split(self, name: str) -> Split:
        """F's sweep (its calls' adjoints call the callees' `.bwd`s, planned first), dead
        code removed, and what it reads of F's forward pass and parameters."""
        if name in self.plans:
            return self.plans[name]  # None while it is analysed (a recursive call)
        self.plans[name] = None
        self.made.setdefault(f"{name}.vjp", None)  # a placeholder: the order of first use
        fn = self.program.function(name)
        needed = sorted(self.needed.get(name, set()))
        sweep = ResidualSweep(self, fn, needed)
        ct = sweep.new(fn.result, "ct")
        ret = sweep.run(ct)
        forward: list[Instr] = []
        for ins in fn.body:
            forward.append(ins)
            if ins.out.id in sweep.pending:
                forward.append(sweep.pending[ins.out.id])
        backward = sweep.body[len(fn.body) :]
        live = dead_code((*forward, *backward), ret)
        own = {i.out.id for i in forward}
        swept = tuple(i for i in live if i.out.id not in own)
        residuals, views, reads = _reads(fn, forward, swept)
        plan = Split(
            fn, tuple(needed), tuple(forward), swept, ret, ct, residuals, views, reads, sweep.count
        )
        self.plans[name] = plan
        self.order.append(name)
        return plan

    def vjp(self, name: str) -> Function:
        return self.signature(name, with_value=False)

    def value_vjp(self, name: str) -> Function:
        self.valued.add(name)
        return self.signature(name, with_value=True)

    def signature(self, name: str, with_value: bool) -> Function:
        """The `.vjp`'s or `.value_vjp`'s signature (`.grad`, `.value_grad` call them);
        `finish` writes the body, once it knows what each `.fwd` returns."""
        key = f"{name}.value_vjp" if with_value else f"{name}.vjp"
        if self.made.get(key) is None:
            plan = self.split(name)
            fn = plan.fn
            params = (*fn.params, plan.ct)
            result = TupleT((fn.result, plan.ret.type)) if with_value else plan.ret.type
            self.made[key] = Function(key, fn.dims, params, result, (), plan.ret)
        return self.made[key]

    # ---- writing the functions -------------------------------------------------------------

    def finish(self) -> list[Function]:
        valued = {name: name in self.valued for name in self.order}  # does F.fwd return F
        for name in reversed(self.order):  # callers before callees
            plan = self.plans[name]
            if not plan.residuals:
                continue
            live = self.forward(plan, valued[name])
            ids = {i.out.id for i in live}
            for ins in live:
                if ins.op == RESIDUALS_OP and ins.attr("call").id in ids:
                    valued[ins.attr("fn")] = True
        for key in self.made:
            if key.endswith(".vjp"):
                name = key[: -len(".vjp")]
                self.made[key] = self.vjp_function(self.plans[name], valued[name])
            elif key.endswith(".value_vjp"):
                name = key[: -len(".value_vjp")]
                self.made[key] = self.vjp_function(self.plans[name], True, with_value=True)
        out = []
        for name in self.order:
            plan = self.plans[name]
            out.append(self.bwd(plan))
            if plan.residuals:
                out.append(self.fwd(plan, valued))
        return out

    def forward(self, plan: Split, valued: bool) -> tuple[Instr, ...]:
        """F's forward instructions that its residuals (and its value) need."""
        roots: list[Operand] = list(plan.residuals)
        if valued:
            roots.append(plan.fn.ret)
        out = Value(plan.count, TupleT(tuple(r.type for r in roots)))
        return dead_code((*plan.forward, Instr(out, "tuple", tuple(roots))), out)[:-1]

    def fwd_type(self, plan: Split, valued: bool) -> TupleT:
        if valued:
            return TupleT((plan.fn.result, plan.residual_type))
        return TupleT((plan.residual_type,))

    def fwd(self, plan: Split, valued: dict[str, bool]) -> Function:
        fn = plan.fn
        name = f"{fn.name}.fwd"
        b = FunctionBuilder(name, plan.count)
        live = self.forward(plan, valued[fn.name])
        pending = {i.attr("call").id for i in live if i.op == RESIDUALS_OP}
        read: set[int] = set()  # the calls of a `.fwd` whose value is read
        for ins in live:
            if ins.op == "call" and ins.out.id in pending:
                read.add(ins.out.id)
                continue
            if ins.op != RESIDUALS_OP:
                b.place(ins, f"forward of {fn.name}")
                continue
            callee, call = self.plans[ins.attr("fn")], ins.attr("call")
            with_value = valued[callee.fn.name]
            parts = (call.type, ins.out.type) if with_value else (ins.out.type,)
            b.origin, b.span = Origin(ins.site, f"residuals of {callee.fn.name}"), ins.span
            attrs = {"fn": f"{callee.fn.name}.fwd", "dims": ins.attr("dims")}
            r = b.emit("call", ins.args, TupleT(parts), attrs)
            if call.id in read:
                assert with_value, f"{fn.name} reads the value of {callee.fn.name}.fwd"
                b.bind(call, "get", [r], {"index": 0})
            b.bind(ins.out, "get", [r], {"index": 1 if with_value else 0})
        b.origin, b.span = Origin(fn.name, f"residuals of {fn.name}"), fn.span
        res = b.emit("tuple", plan.residuals, plan.residual_type)
        parts: tuple[Operand, ...] = (fn.ret, res) if valued[fn.name] else (res,)
        out = b.emit("tuple", parts, self.fwd_type(plan, valued[fn.name]))
        return Function(name, fn.dims, fn.params, out.type, dead_code(tuple(b.body), out), out)

    def bwd(self, plan: Split) -> Function:
        fn = plan.fn
        name = f"{fn.name}.bwd"
        b = FunctionBuilder(name, plan.count + 1)
        params = [fn.params[i] for i in plan.reads]
        if plan.residuals:
            given = Value(plan.count, plan.residual_type, "residuals")
            params.append(given)
            made = {i.out.id: i for i in plan.forward}
            for i, r in enumerate(plan.residuals):
                at = made[r.id]
                b.bind(r, "get", [given], {"index": i}, at.span, Origin(at.site, "residual"))
        for ins in plan.views:
            b.place(ins, "view read again")
        for ins in plan.sweep:
            b.place(ins, f"sweep of {fn.name}")
        params.append(plan.ct)
        body = dead_code(tuple(b.body), plan.ret)
        return Function(name, fn.dims, tuple(params), plan.ret.type, body, plan.ret, (), fn.span)

    def vjp_function(self, plan: Split, valued: bool, with_value: bool = False) -> Function:
        """`F.bwd` after `F.fwd`: `F.vjp`'s signature, as in the recomputing form; or, with
        the value (`F.value_vjp`), F's value beside the adjoints, from the same `F.fwd`."""
        assert valued or not with_value, f"{plan.fn.name}.fwd does not return its value"
        fn = plan.fn
        name = f"{fn.name}.value_vjp" if with_value else f"{fn.name}.vjp"
        b = FunctionBuilder(name, FunctionBuilder.after(fn.params))
        b.origin, b.span = Origin(fn.name, f"{name[len(fn.name) + 1 :]} of {fn.name}"), fn.span
        ct = b.fresh(fn.result, "ct")
        dims = {"dims": tuple((d, _var(d)) for d in fn.dims)}
        args: list[Operand] = [fn.params[i] for i in plan.reads]
        r = b.fresh(self.fwd_type(plan, valued))
        if plan.residuals:
            b.bind(r, "call", fn.params, {"fn": f"{fn.name}.fwd", **dims})
            res = b.emit("get", [r], plan.residual_type, {"index": 1 if valued else 0})
            args.append(res)
        b.count = ct.id + 3
        out = b.emit("call", [*args, ct], plan.ret.type, {"fn": f"{fn.name}.bwd", **dims})
        if with_value:
            if plan.residuals:  # the value F.fwd computed beside the residuals
                value = b.emit("get", [r], fn.result, {"index": 0})
            else:  # no `.fwd`: F itself is the forward pass, which F.bwd does not read
                value = b.emit("call", fn.params, fn.result, {"fn": fn.name, **dims})
            out = b.emit("tuple", [value, out], TupleT((fn.result, out.type)))
        params = (*fn.params, ct)
        return Function(name, fn.dims, params, out.type, tuple(b.body), out, (), fn.span)


def _reads(
    fn: Function, forward: list[Instr], sweep: tuple[Instr, ...]
) -> tuple[tuple[Value, ...], tuple[Instr, ...], tuple[int, ...]]:
    """What the sweep reads of the forward pass: the residuals, the views of the parameters
    (read again) and the parameters (directly or through a view)."""
    index = {p.id: k for k, p in enumerate(fn.params)}
    by_id = {i.out.id: i for i in forward}
    views: set[int] = set()
    for ins in forward:
        if ins.op in VIEWS and all(
            isinstance(a, Lit) or a.id in index or a.id in views for a in ins.args
        ):
            views.add(ins.out.id)
    params: set[int] = set()
    seen: set[int] = set()
    residual: set[int] = set()
    todo = [a.id for i in sweep for a in i.args if isinstance(a, Value)]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in index:
            params.add(index[v])
        elif v in views:
            todo += [a.id for a in by_id[v].args if isinstance(a, Value)]
        elif v in by_id:
            residual.add(v)
    residuals = tuple(i.out for i in forward if i.out.id in residual)
    read_views = tuple(i for i in forward if i.out.id in views and i.out.id in seen)
    return residuals, read_views, tuple(sorted(params))
