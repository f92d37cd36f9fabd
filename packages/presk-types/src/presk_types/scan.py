"""`scan(f, c, xs, axis t)`: a function applied along the named axis t of xs (issue 29), the
carry threaded through, the outputs stacked: `jax.lax.scan` over a named axis.

f is a function of the program (or of a module, with its parameters), or a λ (lifted once,
as `grad`'s, with what it captures), taking the carry and
one element of xs along t (xs without the axis t), returning a pair (carry, output) whose
carry has the type of c. The result is the pair (the last carry, the outputs on a new first
axis t). An axis of a constant length, 1 to MAX_STEPS, as `stack{L}`'s: the checker writes
the scan as the calls it makes, in order, each step's element a slice of xs
(`sum(axis t, xs[t: i .. i + 1])`, its one element), the outputs joined by `stack_axis`. So
reverse mode goes through the calls as through `stack{L}`'s unrolled blocks (residuals or
recomputation: `--remat`), and every backend computes what the calls compute. Any other
length (a dimension `T`, `2·T + 1`, more steps or none) is the core operation `scan{n}`
(`_operation`, issue 29): the step typed once, the scan a loop in the interpreter and the
export, unrolled after specialization for the kernels, differentiated as a reverse scan
(presk_ad.scans).
"""

from __future__ import annotations

from presk_syntax import ast as A
from presk_syntax.diagnostics import Label
from presk_syntax.span import Span

from presk_types.core_rules import PRIMITIVE_SHAPE_RULES
from presk_types.operands import Operands
from presk_types.presburger import Lin
from presk_types.shapes import TypeErr, err
from presk_types.structure_rules import stack_axis, stacked
from presk_types.types import Real, TupleT, with_shape
from presk_types.values import FnRef, Val, join

SIGNATURE = "scan(f, carry, xs, axis t) with f(carry, x) -> (carry, y)"
MAX_STEPS = 4096  # each step is a call of the program, written out
_CARRY, _ELEMENT = "%scan.carry", "%scan.x"  # names no program can write


def _wrong(code: str, message: str, span: Span, label: str = f"expected {SIGNATURE}"):
    return err(code, message, Label(span, label))


def _lifted(body, lam: A.Lambda, carry: Val, x: Val):
    """A λ step as a function of what it captures, then the carry and the element; the
    dimensions its calls take are the enclosing function's, as for `grad`'s λ."""
    info = body.lift(lam, [carry.type, x.type])
    mine = set(body.info.context.names) | set(body.info.generic)
    taken = [d for d in info.generic if d not in mine]
    if taken:
        body.info.generic = (*body.info.generic, *taken)
    return info


def scan(body, args: tuple[A.Arg, ...], span: Span) -> Val:
    """The scan `scan(…)` of a function body (`check.Body`), as its calls."""
    from presk_types.rules import CheckContext

    positional = [a for a in args if not isinstance(a, A.AxisArg)]
    axes = [a for a in args if isinstance(a, A.AxisArg)]
    if (
        len(positional) != 3
        or len(axes) != 1
        or any(isinstance(a, A.KeywordArg | A.ShapeArg) for a in positional)
    ):
        raise _wrong("E2026", "wrong arguments for `scan`", span)
    f_arg, c_arg, xs_arg = positional
    f = f_arg if isinstance(f_arg, A.Lambda) else body.expr(f_arg)
    if not isinstance(f, FnRef | A.Lambda):
        raise _wrong("E2026", "`scan`'s step is a function of the program or a λ", f_arg.span,
                     "a function's name, or `λ c x. (c, y)`")  # fmt: skip
    c, xs = body.value(c_arg), body.value(xs_arg)
    body.require_real(xs, xs_arg.span)
    t = axes[0].name
    i = xs.type.shape.axis(t)
    if i is None:
        raise _wrong("E2026", f"`{xs.type}` has no axis `{t}` to scan", axes[0].span,
                     "not an axis of xs")  # fmt: skip
    n = xs.type.shape.axes[i].length
    if not n.is_const or not 1 <= n.constant <= MAX_STEPS:
        # a length of the dimensions (or of more steps than are written out, or none): the
        # core operation `scan{n}`, typed once for every value of the dimensions
        return _operation(body, f, f_arg, c, xs, c_arg, xs_arg, t, n, span)
    ctx = CheckContext(body.lengths, span, {})

    def prim(op: str, vals: list[Val], attrs: dict) -> Val:
        o = Operands(op, tuple(v.type for v in vals), axes=attrs["axes"], attrs=attrs)
        typ = PRIMITIVE_SHAPE_RULES[op](o, ctx)
        return Val(
            typ,
            join(*(v.reg for v in vals)),
            (),
            body.emit.prim(op, [v.ref for v in vals], typ, attrs, span),
        )

    carry, outputs, effects = c, [], [*c.effects, *xs.effects]
    saved = {k: body.vars.get(k) for k in (_CARRY, _ELEMENT)}
    try:
        for k in range(n.constant):
            one = {"axes": (t,), "start": Lin.const(k), "stop": Lin.const(k + 1)}
            x = prim("sum", [prim("crop", [xs], one)], {"axes": (t,)})
            if isinstance(f, A.Lambda):
                f = _lifted(body, f, carry, x)
            if isinstance(f, FnRef):
                body.vars[_CARRY], body.vars[_ELEMENT] = carry, x
                args = (A.Var(_CARRY, c_arg.span), A.Var(_ELEMENT, xs_arg.span))
                step = body.call_fn(f, args, span)
            else:  # the λ lifted once, called at each step with what it captures
                refs = [v.ref for v in f.captured_vals] + [carry.ref, x.ref]
                generic = {d: Lin.var(d) for d in f.generic}
                regs = [v.reg for v in f.captured_vals] + [carry.reg, x.reg]
                ref = body.emit.call(f, generic, refs, f.result, span)
                step = Val(f.result, join(*regs), tuple(f.effects.items()), ref)
            effects.extend(step.effects)
            tc, ty = _step_types(body, c, step, f_arg, span)
            carry = Val(tc, step.reg, (), body.emit.get(step.ref, 0, tc))
            outputs.append(Val(ty, step.reg, (), body.emit.get(step.ref, 1, ty)))
    finally:
        for k, v in saved.items():
            if v is None:
                body.vars.pop(k, None)
            else:
                body.vars[k] = v
    if not isinstance(outputs[0].type, Real):
        raise _wrong("E2027", f"`scan`'s outputs are real tensors, not `{outputs[0].type}`",
                     f_arg.span, "f(carry, x) -> (carry, y)")  # fmt: skip
    attrs = {"axes": (t,)}
    o = Operands("stack_axis", tuple(v.type for v in outputs), axes=(t,), attrs=attrs)
    try:
        ys_t = stack_axis(o, ctx)
    except TypeErr as e:
        raise _wrong("E2027", e.diagnostics[0].message, f_arg.span, "the outputs y") from None
    ys = body.emit.prim("stack_axis", [v.ref for v in outputs], ys_t, attrs, span)
    result = TupleT((carry.type, ys_t))
    reg = join(carry.reg, *(v.reg for v in outputs))
    return Val(result, reg, tuple(effects), body.emit.tuple([carry.ref, ys], result))


def _step_types(body, c: Val, step: Val, f_arg, span: Span):
    """The step's result checked (a pair whose carry is the carry's type: E2027 otherwise):
    its carry's and its output's types."""
    if not (isinstance(step.type, TupleT) and len(step.type.elements) == 2):
        raise _wrong("E2027", f"`scan`'s step returns `{step.type}`, not a pair",
                     f_arg.span, "f(carry, x) -> (carry, y)")  # fmt: skip
    tc, ty = step.type.elements
    try:
        body.same(c.type, tc, span)
    except TypeErr:
        raise _wrong("E2027", f"`scan`'s step takes a carry `{c.type}` and returns `{tc}`",
                     f_arg.span, "the carry keeps its type") from None  # fmt: skip
    return tc, ty


class _Capture:
    """The body's emitter, but for the one call of the step: the callee, its bindings and
    its operands are kept (the scan is emitted in its place)."""

    def __init__(self, inner) -> None:
        self.inner, self.made = inner, None

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def call(self, fn, bindings, args, t, span):
        self.made = (fn, bindings, args)
        return None

    def fold(self, fn, count, bindings, args, t, span):
        self.made = "fold"
        return None


_X = object()  # the element's handle while the step is typed: xs itself in the scan


def _operation(body, f, f_arg, c: Val, xs: Val, c_arg, xs_arg, t: str, n: Lin, span: Span) -> Val:
    """A scan over a symbolic number of steps n: the step typed once (carry c, the element of
    xs along t), and the core operation `scan{n} f(pre…, c, xs)` (interpreted as a loop,
    unrolled after specialization, differentiated as a reverse scan)."""
    i = xs.type.shape.axis(t)
    shape = xs.type.shape
    x_t = with_shape(xs.type, type(shape)(shape.prefix, shape.axes[:i] + shape.axes[i + 1 :]))
    x = Val(x_t, xs.reg, (), _X)
    if isinstance(f, A.Lambda):
        f = _lifted(body, f, c, x)
        refs = [v.ref for v in f.captured_vals] + [c.ref, _X]
        generic = {d: Lin.var(d) for d in f.generic}
        regs = [v.reg for v in f.captured_vals] + [c.reg, xs.reg]
        step = Val(f.result, join(*regs), tuple(f.effects.items()))
        callee = f
    else:
        saved = {k: body.vars.get(k) for k in (_CARRY, _ELEMENT)}
        capture = body.emit = _Capture(body.emit)
        try:
            body.vars[_CARRY], body.vars[_ELEMENT] = c, x
            args = (A.Var(_CARRY, c_arg.span), A.Var(_ELEMENT, xs_arg.span))
            step = body.call_fn(f, args, span)
        finally:
            body.emit = capture.inner
            for k, v in saved.items():
                if v is None:
                    body.vars.pop(k, None)
                else:
                    body.vars[k] = v
        if not isinstance(capture.made, tuple):  # a stack's blocks (E2008 above, as a rule)
            raise _wrong("E2026", "`scan`'s step is a function of the program or a λ",
                         f_arg.span, "a function's name, or `λ c x. (c, y)`")  # fmt: skip
        callee, generic, refs = capture.made
    tc, ty = _step_types(body, c, step, f_arg, span)
    if not isinstance(ty, Real):
        raise _wrong("E2027", f"`scan`'s outputs are real tensors, not `{ty}`",
                     f_arg.span, "f(carry, x) -> (carry, y)")  # fmt: skip
    from presk_types.rules import CheckContext

    try:
        ys_t = stacked(ty, t, n, CheckContext(body.lengths, span, {}))
    except TypeErr as e:
        raise _wrong("E2027", e.diagnostics[0].message, f_arg.span, "the outputs y") from None
    result = TupleT((c.type, ys_t))
    refs = [xs.ref if r is _X else r for r in refs]
    ref = body.emit.scan(callee, n, generic, refs, result, span, t)
    effects = (*c.effects, *xs.effects, *step.effects)
    return Val(result, join(c.reg, xs.reg, step.reg), effects, ref)
