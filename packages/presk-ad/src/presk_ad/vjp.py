"""Reverse-mode differentiation of PSK-Core: `F.vjp` and `F.grad` for every `grad F(…)`,
`F.value_vjp` and `F.value_grad` for every `value_grad F(…)`.

`F.vjp{dims}(params…, ct : R) -> (adjoints…)` runs F's forward pass, then its reverse
sweep from the cotangent `ct` of its result: each instruction's adjoint rule
(`vjp_rules`, one per operation, as JAX's `primitive_transposes`) adds to the adjoints of
its operands. It returns the adjoints of the parameters that can have one (reals,
parameter trees, tuples of them), in order; a call's adjoint is a call of the callee's
`.vjp`. `F.grad` calls `F.vjp` with ct = 1 and keeps the adjoint of F's last parameter
(the one `grad(λ θ. …)(θ)` differentiates). Stacks are unrolled first (their count is a
constant of the program).

`F.value_vjp(params…, ct) -> (value, (adjoints…))` is `F.vjp` that also returns F's value,
from the same forward pass, and `F.value_grad(params…) -> (value, gradient)` calls it with
ct = 1 as `F.grad` calls `F.vjp`: a training step's loss and gradient in one call, the
forward pass run once. PSK-Core asks for them with `value_grad F(args)`, which no source
program writes (presk train does), and which differentiation replaces as it does `grad`.

That is the form `--remat recompute` keeps: each `.vjp` computes its forward pass again.
By default (`--remat residuals`, presk_ad.residuals) the sweep is a function of its own,
`F.bwd`, that reads the values of F's forward pass `F.fwd` returned once (its residuals),
and a call's adjoint is a call of the callee's `.bwd`; `F.vjp` is `F.bwd` after `F.fwd`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction

from presk_core.build import FunctionBuilder, made_from
from presk_core.ir import Function, Instr, Lit, Operand, Origin, Program, Value
from presk_core.unroll import unroll_stack
from presk_types.ops import ADJOINT_OPS
from presk_types.presburger import Lin
from presk_types.types import SCALAR, AxisT, Bool, Idx, ParamsT, Real, Shape, TupleT, Type, subst

from presk_ad import contractions, scans
from presk_ad.dataflow import active_values, call_prefix, dead_code


class ADError(Exception):
    """A program this differentiation cannot handle (yet): the operation is named."""


def differentiable(t: Type) -> bool:
    match t:
        case Real() | ParamsT():
            return True
        case TupleT(elements):
            return any(differentiable(e) for e in elements)
    return False


class Sweep:
    """The body of one `.vjp` (the function `target`): the forward instructions, then the
    reverse sweep, each instruction of the sweep made from the forward one it is the
    adjoint of (`vjp of mul`)."""

    def __init__(self, ad: AD, fn: Function, needed: list[int], target: str) -> None:
        self.ad = ad
        self.fn = fn
        self.needed = needed
        self.active = active_values(fn, set(needed))
        self.b = FunctionBuilder(target, FunctionBuilder.after(fn.params, fn.body))
        for ins in fn.body:
            self.b.place(ins, f"forward of {fn.name}")
        self.b.origin, self.b.span = Origin(fn.name, f"adjoints of {fn.name}"), fn.span
        self.adj: dict[int, Operand] = {}

    @property
    def body(self) -> list[Instr]:
        return self.b.body

    @property
    def count(self) -> int:
        return self.b.count

    def new(self, t: Type, name: str | None = None) -> Value:
        return self.b.fresh(t, name)

    def emit(self, op: str, args: list, t: Type, attrs: dict | None = None) -> Value:
        return self.b.emit(op, args, t, attrs or {})

    def add(self, v: Operand, a: Operand) -> None:
        """Add `a` to the adjoint of `v` (nothing for literals or discrete values)."""
        if not isinstance(v, Value) or not differentiable(v.type) or v.id not in self.active:
            return
        old = self.adj.get(v.id)
        self.adj[v.id] = a if old is None else self.emit("accum", [old, a], v.type)

    def to_operand(self, ins: Instr, i: int, contrib: Operand) -> None:
        """A contribution of the result's shape, summed back to operand i's shape."""
        arg = ins.args[i]
        if not isinstance(arg, Value) or not differentiable(arg.type) or arg.id not in self.active:
            return
        if arg.type == ins.out.type:
            self.add(arg, contrib)
            return
        aligns = ins.attr("_align")
        attrs = {"_align": aligns[i]} if aligns is not None else {}
        self.add(arg, self.emit("sum_to", [contrib, arg], arg.type, attrs))

    def elementwise(self, op: str, ins: Instr, a: Operand, b: Operand, i_b: int | None) -> Value:
        """`a op b` where a has the result's type and b is operand i_b (or a scalar)."""
        k = ins.out.type.shape.rank if hasattr(ins.out.type, "shape") else 0
        own = tuple(range(-k, 0))
        aligns = ins.attr("_align")
        other = aligns[i_b] if aligns is not None and i_b is not None else None
        attrs = {"_align": (own, other)} if other is not None else {}
        return self.emit(op, [a, b], ins.out.type, attrs)

    def call(self, ins: Instr, ct: Operand) -> None:
        """A call's adjoint: a call of the callee's `.vjp`, which computes its forward pass
        again (`--remat recompute`; `residuals.ResidualSweep` calls its `.bwd`)."""
        name = ins.attr("fn")
        vjp = self.ad.vjp(name)
        dims = ins.attr("dims", ())
        t = subst(vjp.result, dict(dims), call_prefix(self.ad.program.function(name), ins))
        r = self.emit("call", [*ins.args, ct], t, {"fn": vjp.name, "dims": dims})
        self.read_adjoints(ins, r, sorted(self.ad.needed[name]))

    def read_adjoints(self, ins: Instr, r: Value, needed) -> None:
        """The adjoints `r` of a call's `.vjp` or `.bwd` returns, read as the callee types
        them and added to its arguments', cast where an argument names its axes otherwise."""
        for k, j in enumerate(needed):
            x = ins.args[j]
            if isinstance(x, Value):
                t = r.type.elements[k]
                a = self.emit("get", [r], t, {"index": k})
                self.add(x, a if t == x.type else self.emit("cast", [a], x.type))

    def run(self, ct: Value) -> Operand:
        fn = self.fn
        self.add(fn.ret, ct)
        for ins in reversed(fn.body):
            a = self.adj.get(ins.out.id)
            if a is None:
                continue
            rule = vjp_rules.get(ins.op)
            if rule is None:
                if any(isinstance(x, Value) and differentiable(x.type) for x in ins.args):
                    raise ADError(f"no adjoint rule for `{ins.op}` (in `{fn.name}`)")
                continue
            self.b.origin, self.b.span = made_from(ins, f"vjp of {ins.op}"), ins.span
            rule(self, ins, a)
        self.b.origin, self.b.span = Origin(fn.name, f"adjoints of {fn.name}"), fn.span
        outs = []
        for i in self.needed:
            p = fn.params[i]
            outs.append(self.adj.get(p.id) or self.emit("zeros_like", [p], p.type))
        types = tuple(o.type for o in outs)
        return self.emit("tuple", outs, TupleT(types))


class AD:
    """The `.vjp`s and `.grad`s a program needs, generated once each.

    A `.vjp` returns the adjoints its callers read, and only those: `needed` holds, for each
    function, the parameters some caller differentiates in (the `grad`'s λ parameter, then,
    through calls, the arguments that depend on a needed parameter: the active ones).
    """

    def __init__(self, program: Program) -> None:
        self.program = unroll_stack(program)
        self.made: dict[str, Function | None] = {}
        self.needed: dict[str, set[int]] = {}

    def need(self, name: str, indices: set[int]) -> None:
        known = self.needed.setdefault(name, set())
        if indices <= known:
            return
        known |= indices
        fn = self.program.function(name)
        active = active_values(fn, known)
        for ins in fn.body:
            if ins.op == "scan" and any(
                isinstance(a, Value) and a.id in active for a in ins.args
            ):  # the step's carry, and what of its operands is active (presk_ad.scans)
                self.need(
                    ins.attr("fn"), scans.wanted(self.program.function(ins.attr("fn")), ins, active)
                )
            if ins.op == "call":
                callee = self.program.function(ins.attr("fn"))
                wanted = {
                    j
                    for j, (p, a) in enumerate(zip(callee.params, ins.args, strict=True))
                    if differentiable(p.type) and isinstance(a, Value) and a.id in active
                }
                if wanted:
                    self.need(callee.name, wanted)

    def vjp(self, name: str) -> Function:
        return self.swept(name, with_value=False)

    def scan_helper(self, key: str, make: Callable[[], Function]) -> Function:
        """A function a scan's adjoint calls (presk_ad.scans), made once."""
        if self.made.get(key) is None:
            self.made[key] = make()
        return self.made[key]

    def value_vjp(self, name: str) -> Function:
        return self.swept(name, with_value=True)

    def swept(self, name: str, with_value: bool) -> Function:
        """`F.vjp`, or `F.value_vjp`: the same body, which also returns F's value from the
        forward pass it holds (keeping what the value needs there, which `F.vjp` drops when
        its sweep does not read it: a callee's `.vjp` computes the callee's again)."""
        key = f"{name}.value_vjp" if with_value else f"{name}.vjp"
        if key not in self.made:
            fn = self.program.function(name)
            self.made[key] = None  # a placeholder keeps the order of first use
            needed = sorted(self.needed.get(name, set()))
            sweep = Sweep(self, fn, needed, key)
            ct = sweep.new(fn.result, "ct")
            ret = sweep.run(ct)
            if with_value:
                ret = sweep.emit("tuple", [fn.ret, ret], TupleT((fn.result, ret.type)))
            params = (*fn.params, ct)
            body = dead_code(tuple(sweep.body), ret)
            self.made[key] = Function(key, fn.dims, params, ret.type, body, ret, (), fn.span)
        return self.made[key]

    def finish(self) -> list[Function]:
        """What comes after the `.vjp`s and `.grad`s: nothing in this form."""
        return []

    def grad(self, name: str) -> Function:
        return self.at_one(name, with_value=False)

    def value_grad(self, name: str) -> Function:
        return self.at_one(name, with_value=True)

    def at_one(self, name: str, with_value: bool) -> Function:
        """`F.grad`: `F.vjp` at ct = 1, the adjoint of F's last parameter kept; or
        `F.value_grad`: `F.value_vjp` at ct = 1, F's value and that adjoint."""
        key = f"{name}.value_grad" if with_value else f"{name}.grad"
        if key not in self.made:
            fn = self.program.function(name)
            last = len(fn.params) - 1
            self.need(name, {last})
            vjp = self.value_vjp(name) if with_value else self.vjp(name)
            b = FunctionBuilder(key, FunctionBuilder.after(fn.params))
            b.origin, b.span = Origin(name, f"{key[len(name) + 1 :]} of {name}"), fn.span
            one = Lit("1", Real(SCALAR))
            dims = tuple((d, _var(d)) for d in fn.dims)
            r = b.emit("call", [*fn.params, one], vjp.result, {"fn": vjp.name, "dims": dims})
            theta = fn.params[last].type
            index = sorted(self.needed[name]).index(last)
            if with_value:
                value = b.emit("get", [r], fn.result, {"index": 0})
                adjoints = b.emit("get", [r], vjp.result.elements[1], {"index": 1})
                grad = b.emit("get", [adjoints], theta, {"index": index})
                out = b.emit("tuple", [value, grad], TupleT((fn.result, theta)))
            else:
                out = b.emit("get", [r], theta, {"index": index})
            self.made[key] = Function(key, fn.dims, fn.params, out.type, tuple(b.body), out)
        return self.made[key]


def _var(d: str):
    from presk_types.presburger import Lin

    return Lin.var(d)


REMATS = ("residuals", "recompute")
"""`--remat`: `residuals` (the default) splits each `.vjp` into a `.fwd` that returns the
residuals and a `.bwd` that reads them (presk_ad.residuals); `recompute` keeps the `.vjp`s
that compute their forward pass again."""


DIFFERENTIATED = ("grad", "value_grad")
"""The instructions differentiation replaces: `grad F(args)`, F's gradient in its last
parameter, and `value_grad F(args)`, the pair of F's value and that gradient."""


def differentiate(program: Program, remat: str = "residuals") -> Program:
    """The program with every `grad F(args)` a call of a generated `F.grad` and every
    `value_grad F(args)` one of `F.value_grad`, followed by the generated functions: the
    `.vjp`s, `.value_vjp`s, `.grad`s and `.value_grad`s in the order of their first use,
    then, with `remat="residuals"`, the `.bwd`s and `.fwd`s, each callee's before its
    callers'."""
    if remat not in REMATS:
        raise ValueError(f"remat must be one of {', '.join(REMATS)}, not {remat!r}")
    if remat == "residuals":
        from presk_ad.residuals import ResidualAD

        ad: AD = ResidualAD(program)
    else:
        ad = AD(program)
    wanted = [i.attr("fn") for f in ad.program.functions for i in f.body if i.op in DIFFERENTIATED]
    for name in wanted:  # what every caller needs, before anything is generated
        ad.need(name, {len(ad.program.function(name).params) - 1})
    functions = []
    for fn in ad.program.functions:
        body = []
        for ins in fn.body:
            if ins.op in DIFFERENTIATED:
                name = ins.attr("fn")
                g = ad.grad(name) if ins.op == "grad" else ad.value_grad(name)
                attrs = (("fn", g.name), ("dims", ins.attr("dims")))
                rule = f"{ins.op} as a call of {g.name}"
                ins = replace(ins, op="call", attrs=attrs, origin=made_from(ins, rule))
            body.append(ins)
        functions.append(replace(fn, body=tuple(body)))
    split = ad.finish()  # the `.bwd`s and `.fwd`s (residuals), which fills in the `.vjp`s
    made = tuple(f for f in ad.made.values() if f is not None)
    return replace(program, functions=tuple(functions) + made + tuple(split))


# ---- the adjoint of each operation ---------------------------------------------------------

Rule = Callable[[Sweep, Instr, Operand], None]


def _add(s: Sweep, ins: Instr, ct: Operand) -> None:
    s.to_operand(ins, 0, ct)
    s.to_operand(ins, 1, ct)


def _sub(s: Sweep, ins: Instr, ct: Operand) -> None:
    s.to_operand(ins, 0, ct)
    s.to_operand(ins, 1, s.emit("neg", [ct], ins.out.type))


def _mul(s: Sweep, ins: Instr, ct: Operand) -> None:
    a, b = ins.args
    s.to_operand(ins, 0, s.elementwise("mul", ins, ct, b, 1))
    s.to_operand(ins, 1, s.elementwise("mul", ins, ct, a, 0))


def _div(s: Sweep, ins: Instr, ct: Operand) -> None:
    a, b = ins.args
    s.to_operand(ins, 0, s.elementwise("div", ins, ct, b, 1))
    q = s.elementwise("div", ins, ins.out, b, 1)  # a / b² · ct = (a/b) / b · ct
    s.to_operand(ins, 1, s.emit("neg", [s.emit("mul", [ct, q], ins.out.type)], ins.out.type))


def _pow(s: Sweep, ins: Instr, ct: Operand) -> None:
    x, y = ins.args
    if isinstance(y, Lit):  # x^c: c·x^(c−1), the exponent exact
        c = Fraction(y.text)
        lower = s.emit("pow", [x, Lit(str(c - 1), y.type)], x.type)
        scaled = s.emit("mul", [lower, Lit(str(c), y.type)], x.type)
        s.add(x, s.emit("mul", [ct, scaled], x.type))
        return
    # x^y with y a real scalar: y·x^(y−1) in x, x^y·log x in y (summed back to a scalar)
    ym1 = s.emit("sub", [y, Lit("1", y.type)], y.type)
    scaled = s.emit("mul", [s.emit("pow", [x, ym1], x.type), y], x.type)
    s.add(x, s.emit("mul", [ct, scaled], x.type))
    if isinstance(y, Value) and y.id in s.active:
        dy = s.emit("mul", [ins.out, s.emit("log", [x], x.type)], x.type)
        s.to_operand(ins, 1, s.emit("mul", [ct, dy], x.type))


def _neg(s: Sweep, ins: Instr, ct: Operand) -> None:
    s.add(ins.args[0], s.emit("neg", [ct], ins.out.type))


def _unary(derivative: Callable[[Sweep, Instr], Operand]) -> Rule:
    """ct · f'(x), with f'(x) written from the forward's values."""

    def rule(s: Sweep, ins: Instr, ct: Operand) -> None:
        s.add(ins.args[0], s.emit("mul", [ct, derivative(s, ins)], ins.out.type))

    return rule


def _one(t: Type) -> Lit:
    return Lit("1", Real(SCALAR))


def _exp_d(s: Sweep, ins: Instr) -> Operand:
    return ins.out


def _log_d(s: Sweep, ins: Instr) -> Operand:
    return s.emit("div", [_one(ins.out.type), ins.args[0]], ins.out.type)


def _sqrt_d(s: Sweep, ins: Instr) -> Operand:  # 1 / (2 √x)
    twice = s.emit("mul", [ins.out, Lit("2", Real(SCALAR))], ins.out.type)
    return s.emit("div", [_one(ins.out.type), twice], ins.out.type)


def _tanh_d(s: Sweep, ins: Instr) -> Operand:  # 1 − tanh²
    sq = s.emit("mul", [ins.out, ins.out], ins.out.type)
    return s.emit("sub", [_one(ins.out.type), sq], ins.out.type)


def _sigmoid_d(s: Sweep, ins: Instr) -> Operand:  # σ (1 − σ)
    rest = s.emit("sub", [_one(ins.out.type), ins.out], ins.out.type)
    return s.emit("mul", [ins.out, rest], ins.out.type)


def _sin_d(s: Sweep, ins: Instr) -> Operand:
    return s.emit("cos", [ins.args[0]], ins.out.type)


def _cos_d(s: Sweep, ins: Instr) -> Operand:
    return s.emit("neg", [s.emit("sin", [ins.args[0]], ins.out.type)], ins.out.type)


def _with_x(op: str) -> Rule:
    """An adjoint operation of (ct, x): gelu_grad, silu_grad, relu_grad, abs_grad."""

    def rule(s: Sweep, ins: Instr, ct: Operand) -> None:
        s.add(ins.args[0], s.emit(op, [ct, ins.args[0]], ins.out.type))

    return rule


def _reduce(mean: bool) -> Rule:
    def rule(s: Sweep, ins: Instr, ct: Operand) -> None:
        x = ins.args[0]
        attrs = {"axes": ins.attr("axes", ()), "mean": mean}
        s.add(x, s.emit("expand", [ct, x], x.type, attrs))

    return rule


def _softmax(op: str) -> Rule:
    def rule(s: Sweep, ins: Instr, ct: Operand) -> None:
        t = ins.out.type
        grad = s.emit(op, [ct, ins.out], t, {"axes": ins.attr("axes")})
        if op == "softmax_grad" and ins.attr("where"):
            # softmax(x, where = m) is +0 where m hides, whatever x: x's adjoint is +0
            # there, not y·(ct − Σ) = +0·(…), ±0 or NaN by the cotangent. So the products
            # that read it (attention's dS·K, dSᵀ·Q) may skip it (presk_kernel.narrow).
            grad = s.emit("select", [ins.args[-1], grad, Lit("0", Real(SCALAR))], t)
        s.add(ins.args[0], grad)

    return rule


def _select(s: Sweep, ins: Instr, ct: Operand) -> None:
    c, a, b = ins.args
    zero = Lit("0", Real(SCALAR))
    k = ins.out.type.shape.rank
    own = tuple(range(-k, 0))
    aligns = ins.attr("_align")
    for i, branch, where in ((1, (ct, zero), (own, ())), (2, (zero, ct), ((), own))):
        attrs = {"_align": (aligns[0], *where)} if aligns is not None else {}
        s.to_operand(ins, i, s.emit("select", [c, *branch], ins.out.type, attrs))


def _embed(s: Sweep, ins: Instr, ct: Operand) -> None:
    table, ids = ins.args
    s.add(table, s.emit("embed_grad", [ct, table, ids], table.type))


def _take(s: Sweep, ins: Instr, ct: Operand) -> None:
    x, ids = ins.args
    s.add(x, s.emit("take_grad", [ct, x, ids], x.type, {"axes": ins.attr("axes")}))


def _reshape(s: Sweep, ins: Instr, ct: Operand) -> None:
    x = ins.args[0]
    s.add(x, s.emit("reshape_like", [ct, x], x.type))


def _crop(s: Sweep, ins: Instr, ct: Operand) -> None:
    """A slice's adjoint: the cotangent scattered into the slice, zeros around it (`pad`)."""
    x = ins.args[0]
    (name,) = ins.attr("axes")
    n = x.type.shape.axes[x.type.shape.axis(name)].length
    start, stop = ins.attr("start"), ins.attr("stop")
    attrs = {"axes": (name,), "shapes": (("before", start), ("after", n - stop))}
    s.add(x, s.emit("pad", [ct], x.type, attrs))


def _pad(s: Sweep, ins: Instr, ct: Operand) -> None:
    """Padding's adjoint: the cotangent's window of x to x; to the fill c, the sum of the
    padded elements (those before, then those after, each in increasing index order)."""
    x = ins.args[0]
    (name,) = ins.attr("axes")
    shape = x.type.shape
    n = shape.axes[shape.axis(name)].length
    sides = dict(ins.attr("shapes", ()))
    before, after = sides.get("before", Lin.const(0)), sides.get("after", Lin.const(0))

    def window(a: Lin, b: Lin) -> Value:
        t = _with_length(x.type, name, b - a)
        return s.emit("crop", [ct], t, {"axes": (name,), "start": a, "stop": b})

    s.add(x, window(before, before + n))
    if len(ins.args) == 2 and isinstance(c := ins.args[1], Value) and c.id in s.active:
        scalar = Real(SCALAR)
        total = before + n + after
        parts = [
            s.emit("sum", [window(a, b)], scalar)
            for a, b in ((Lin.const(0), before), (before + n, total))
        ]
        s.add(c, s.emit("add", parts, scalar, {"_align": ((), ())}))


def _with_length(t: Real, name: str, length: Lin) -> Real:
    i = t.shape.axis(name)
    axes = t.shape.axes[:i] + (AxisT(name, length),) + t.shape.axes[i + 1 :]
    return Real(Shape(t.shape.prefix, axes))


def _stack_axis(s: Sweep, ins: Instr, ct: Operand) -> None:
    """`stack_axis`'s adjoint: operand i gets the cotangent's element i of the new axis (a
    slice of length 1, summed: the element itself)."""
    (name,) = ins.attr("axes")
    for i, y in enumerate(ins.args):
        if not isinstance(y, Value) or not differentiable(y.type) or y.id not in s.active:
            continue
        t = _with_length(ins.out.type, name, Lin.const(1))
        one = s.emit(
            "crop", [ct], t, {"axes": (name,), "start": Lin.const(i), "stop": Lin.const(i + 1)}
        )
        s.add(y, s.emit("sum", [one], y.type, {"axes": (name,)}))


def _identity(s: Sweep, ins: Instr, ct: Operand) -> None:
    s.add(ins.args[0], ct)


def _cast(s: Sweep, ins: Instr, ct: Operand) -> None:
    """The same data under the operand's type: an ascription's renamed axes named back."""
    x = ins.args[0]
    s.add(x, ct if ct.type == x.type else s.emit("cast", [ct], x.type))


def _field(s: Sweep, ins: Instr, ct: Operand) -> None:
    tree = ins.args[0]
    s.add(tree, s.emit("put", [tree, ct], tree.type, {"path": ins.attr("path")}))


def _slice(s: Sweep, ins: Instr, ct: Operand) -> None:
    tree = ins.args[0]
    s.add(tree, s.emit("put_slice", [tree, ct], tree.type, {"index": ins.attr("index")}))


def _get(s: Sweep, ins: Instr, ct: Operand) -> None:
    t = ins.args[0]
    s.add(t, s.emit("put_item", [t, ct], t.type, {"index": ins.attr("index")}))


def _tuple(s: Sweep, ins: Instr, ct: Operand) -> None:
    for i, x in enumerate(ins.args):
        if isinstance(x, Value) and differentiable(x.type):
            s.add(x, s.emit("get", [ct], x.type, {"index": i}))


def _record(s: Sweep, ins: Instr, ct: Operand) -> None:
    for key, x in zip(ins.attr("keys"), ins.args, strict=True):
        s.add(x, s.emit("field", [ct], x.type, {"path": key}))


def _call(s: Sweep, ins: Instr, ct: Operand) -> None:
    if not s.ad.needed.get(ins.attr("fn")):
        return  # no argument of this call depends on what is differentiated
    s.call(ins, ct)


def _reduce_pick(kind: str) -> Rule:
    """`max`/`min` over an axis: the cotangent to the first extremum."""

    def rule(s: Sweep, ins: Instr, ct: Operand) -> None:
        x = ins.args[0]
        attrs = {"axes": ins.attr("axes", ()), "kind": kind}
        s.add(x, s.emit("reduce_pick", [ct, x], x.type, attrs))

    return rule


def _pick2(kind: str) -> Rule:
    """`maximum(a, b)`/`minimum`: the cotangent to the winner, half to each at a tie."""

    def rule(s: Sweep, ins: Instr, ct: Operand) -> None:
        a, b = ins.args
        k = ins.out.type.shape.rank
        aligns = ins.attr("_align")
        for which in (0, 1):
            attrs = {"which": which, "kind": kind}
            if aligns is not None:
                attrs["_align"] = (tuple(range(-k, 0)), *aligns)
            s.to_operand(ins, which, s.emit("pick2", [ct, a, b], ins.out.type, attrs))

    return rule


def _none(s: Sweep, ins: Instr, ct: Operand) -> None:
    """No adjoint flows back: discrete results (indices, masks), draws, keys."""


vjp_rules: dict[str, Rule] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "neg": _neg,
    "dot": contractions.dot,
    "ein": contractions.ein,
    "sqrt": _unary(_sqrt_d),
    "exp": _unary(_exp_d),
    "log": _unary(_log_d),
    "tanh": _unary(_tanh_d),
    "sigmoid": _unary(_sigmoid_d),
    "sin": _unary(_sin_d),
    "cos": _unary(_cos_d),
    "gelu": _with_x("gelu_grad"),
    "silu": _with_x("silu_grad"),
    "relu": _with_x("relu_grad"),
    "abs": _with_x("abs_grad"),
    "sum": _reduce(mean=False),
    "mean": _reduce(mean=True),
    "softmax": _softmax("softmax_grad"),
    "log_softmax": _softmax("log_softmax_grad"),
    "select": _select,
    "max": _reduce_pick("max"),
    "min": _reduce_pick("min"),
    "maximum": _pick2("max"),
    "minimum": _pick2("min"),
    "embed": _embed,
    "take": _take,
    "crop": _crop,
    "pad": _pad,
    "merge": _reshape,
    "split": _reshape,
    "real": _none,  # of indices, masks or hyperparameters: nothing to differentiate
    "one_hot": _none,
    "causal_mask": _none,
    "compare": _none,
    "argmax": _none,
    "top_k": _none,  # the indices (issue 29); the values are a `take`, whose adjoint scatters
    "sample": _none,
    "split_key": _none,
    "uniform": _none,
    "normal": _none,  # a draw: a function of its key alone
    "bernoulli": _none,  # a draw: constant in its probability almost everywhere
    "stop_grad": _none,  # the identity whose adjoint is zero (issue 16)
    "zeros": _none,
    "ones": _none,
    "pi": _none,  # a constant
    "iota": _none,  # indices
    "cast": _cast,
    "stack_axis": _stack_axis,
    "scan": scans.scan_adjoint,  # issue 29: a reverse scan of the step's `.vjp`
    "call": _call,
    "field": _field,
    "slice": _slice,
    "get": _get,
    "tuple": _tuple,
    "record": _record,
    "fold_key": _none,
    "init": _none,
}
"""The adjoint of each operation (`fold` is unrolled before differentiation)."""

NO_ADJOINT = frozenset({"fold", "fold_init", "grad", "value_grad"}) | ADJOINT_OPS
"""The operations with no rule in `vjp_rules`: a stack of a constant length is unrolled and
`grad`/`value_grad` replaced before the sweep, an initializer's stack draws (no adjoint
flows into a key), and what differentiation writes is not differentiated again (no second
order yet). With `vjp_rules`, they cover the operation set (test_rules.py)."""

__all__ = [
    "DIFFERENTIATED",
    "NO_ADJOINT",
    "REMATS",
    "ADError",
    "Bool",
    "Idx",
    "differentiate",
    "vjp_rules",
]
