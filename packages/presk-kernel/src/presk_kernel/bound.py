"""A sound bound on the error of a realization (spec L886–L892), docs/precision.md "The
bound": an interval argument over the entry's kernels before fusion (fusion changes no bit).

Each host buffer carries an abstract value `A(lo, hi, err)`: every exact value of its reals
(the reference's, on the envelope's inputs) lies in [lo, hi], and every computed one within
`err` of it, element by element. The inputs start from the envelope's ranges and the
rounding of their storage; each kernel is evaluated once, abstractly, statement by
statement — a loop's body once for all its iterations, a fold's term once for all its
terms — with one rule per scalar operation (`SCALAR_RULES`, presk_kernel.error_rules): the exact interval by interval
arithmetic, the error as what the operands' errors can do (the operation's modulus of
continuity over the computed operands' range, not a first-order estimate) plus the
operation's own rounding in the kernel's compute type (IEEE's ½ ulp, u = 2⁻⁵³, 2⁻²⁴;
presk libm's measured ulps; a bf16 store's 2⁻⁸; an fma'd fold's γₙ·Σ|terms|, with Σ|terms|
the envelope's measured one at a sum under `--model cond`). Whatever a buffer holds that is
a site's value has its exact interval narrowed to the envelope's range of that site: that
is the scale static intervals cannot give (L868). A softmax and a log_softmax, whose
passes subtract a row's maximum from the same row, have their own rules (a row is not an
interval), and so do gelu, silu and relu (their rounding from the kernel at the computed
input, their propagation from the function's Lipschitz constant).

Where no finite bound follows (a division by a range that holds 0, a log or a square root
of a range that reaches below 0, an overflow, a serial loop, an operation without a rule),
the bound is refused (`BoundError`, E7102), naming the site: never a number that is not
one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from presk_kernel.error_rules import (
    ETA,
    SCALAR_RULES,
    UNIT,
    A,
    BoundError,
    Ctx,
    as_real,
    gamma,
    join,
    libm,
    mul_interval,
    product,
    rounded,
    tight,
    up,
)
from presk_kernel.ir import (
    REAL_DTYPES,
    Affine,
    Const,
    Index,
    Kernel,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    Var,
)

LIPSCHITZ = {"gelu": 1.13, "silu": 1.1, "relu": 1.0}
"""sup |f′| of the elementwise functions whose kernels the bound takes whole: gelu′ = Φ + xφ
peaks at 1.1289 (x = √2), silu′ = σ(1 + x(1 − σ)) at 1.0998 (x ≈ 2.40), relu′ ≤ 1."""

SUMS = frozenset({"sum", "mean", "dot", "ein", "dot_left", "dot_right", "sum_to"})
"""The core operations whose envelope records Σ|terms| (presk_core.interp.ABS_SUMS)."""

MODELS = ("cond", "interval")


# ---- expressions and statements ------------------------------------------------------------


def expr(ctx: Ctx, e) -> A:
    match e:
        case Const(value, dtype):
            return _const(ctx, value, dtype)
        case Var(name):
            return ctx.env[name]
        case Index(var):
            return ctx.env[var]
        case Load(buf, index):
            return _load(ctx, buf, index)
        case Op(op, args, attr):
            rule = SCALAR_RULES.get(op)
            if rule is None:
                raise ctx.fail(f"no bound rule for the scalar operation `{op}`")
            return ctx.checked(rule(ctx, *(expr(ctx, a) for a in args), attr))
    raise ctx.fail(f"not an expression: {e!r}")


def _const(ctx: Ctx, value, dtype: str) -> A:
    if dtype == "bool" or isinstance(value, bool):
        return A(int(value), int(value), kind="bool")
    if dtype == "i64":
        return A(value, value, kind="int")
    v = float(value)
    if not math.isfinite(v):
        raise ctx.fail(f"a constant {v} (only a softmax's mask may hold one)")
    # the exact constant was rounded once to the compute type; an integer below 2^24 is
    # taken as exact (the lowering's counts: a mean's n, gelu's 2)
    if v == int(v) and abs(v) < 2**24:
        return A(v, v, 0.0, tri=(0.0, 0.0, 0.0), floor=v)
    u, eta = UNIT[dtype], ETA[dtype]
    return A(v, v, up(u * abs(v) + eta), tri=(u, 0.0, eta), floor=v)  # computed: v itself


def _load(ctx: Ctx, buf: int, index: tuple) -> A:
    if buf in ctx.stores and buf not in ctx.loads:
        raise ctx.fail("a kernel that reads what it writes has no bound rule")
    a = ctx.loads.get(buf)
    if a is None:
        raise ctx.fail(f"reads `{ctx.host.get(buf)}` before anything wrote it")
    for i in index:
        if isinstance(i, Affine):
            continue
        at = expr(ctx, i)
        if at.flip:  # a gathered element the computed index may choose otherwise
            if a.kind != "real":
                return replace(a, flip=True)
            a = A(a.lo, a.hi, up(a.err + (a.hi - a.lo)))
    return a


def statements(ctx: Ctx, body: tuple) -> None:
    for st in body:
        match st:
            case Let(name, e):
                ctx.env[name] = expr(ctx, e)
            case Store(buf, index, e):
                _store(ctx, buf, index, expr(ctx, e))
            case Loop(var, _, extent, inner, serial):
                if serial:
                    raise ctx.fail("a serial loop (a scatter that adds) has no bound rule")
                if extent == 0:
                    continue
                ctx.env[var] = A(0, extent - 1, kind="int")
                statements(ctx, inner)
            case Reduce():
                ctx.env[st.acc] = _fold(ctx, st)
            case _:
                raise ctx.fail(f"not a statement: {st!r}")


def _store(ctx: Ctx, buf: int, index: tuple, a: A) -> None:
    for i in index:
        if not isinstance(i, Affine) and expr(ctx, i).flip:
            raise ctx.fail("a store at an index the computation may choose otherwise")
    dtype = ctx.dtypes[buf]
    if dtype in REAL_DTYPES:
        a = as_real(a)
        if UNIT[dtype] > ctx.u:  # a bf16 store rounds the f32 value (nearest even)
            a = rounded(ctx, a.lo, a.hi, a.err, UNIT[dtype], ETA[dtype], a.mixed, a.computed[0])
        site = ctx.ranges.get(ctx.host[buf])
        if site is not None:  # the envelope's range of the site whose value this is
            lo, hi = max(a.lo, site[0]), min(a.hi, site[1])
            if lo <= hi:  # the mixed error at the site's own magnitude: where it pays
                a = tight(replace(a, lo=lo, hi=hi))
    ctx.stores[buf] = join(ctx.stores.get(buf), a)


def _fold(ctx: Ctx, r: Reduce) -> A:
    n = math.prod(extent for _, _, extent in r.vars)
    for var, _, extent in r.vars:
        ctx.env[var] = A(0, max(extent - 1, 0), kind="int")
    if n == 0:
        if r.op not in ("add", "fma"):
            raise ctx.fail(f"a `{r.op}` fold over no term (±inf)")
        return A(0.0, 0.0, tri=(0.0, 0.0, 0.0))
    statements(ctx, r.body)
    terms = [expr(ctx, t) for t in r.terms]
    if r.dtype not in REAL_DTYPES:
        raise ctx.fail(f"a fold of `{r.dtype}` has no bound rule")
    match r.op:
        case "max" | "min":
            t = terms[0]
            tri = t.mixed if r.op == "max" and t.nonneg else None  # |max| ≥ every term's
            return tight(A(t.lo, t.hi, t.err, tri=tri))
        case "add":
            t = as_real(terms[0])
            lo, hi = n * t.lo, n * t.hi
            prop, tri = n * t.err, t.mixed
            total, extra = n * t.mag, 0.0
            floor = 0.0 if t.computed[0] >= 0 else -math.inf  # terms ≥ 0: a sum ≥ 0
        case "fma":
            a, b = (as_real(x) for x in terms)
            plo, phi = mul_interval(a, b)
            lo, hi = n * plo, n * phi
            p, tri = product(a, b)
            prop, total = n * p, n * a.mag * b.mag
            extra = n * ctx.eta  # each product's or fma's rounding below the normal range
            floor = -math.inf
        case _:
            raise ctx.fail(f"no bound rule for a `{r.op}` fold")
    if ctx.sums is not None:  # --model cond: the envelope's measured Σ|terms|
        total = min(total, ctx.sums[0])
    g = gamma(n if r.op == "fma" else n - 1, ctx.u)
    err = prop + g * (total + prop) + extra
    mixed = None
    if ctx.sums is not None and math.isfinite(ctx.sums[1]):
        # Σ|δtᵢ| ≤ ρΣ|tᵢ| + σΣ√|tᵢ| + nβ, with Σ|tᵢ| ≤ c·|S| and Σ√|tᵢ| ≤ √(n·c·|S|)
        c = ctx.sums[1]
        rho, sig, beta = tri
        rho, sig, beta = rho * c, sig * math.sqrt(n * c), n * beta
        mixed = (rho + g * (c + rho), sig * (1 + g), beta * (1 + g) + extra)
    return ctx.checked(tight(A(lo, hi, up(err), tri=mixed, floor=floor)))


# ---- whole kernels ---------------------------------------------------------------------------


def core_op(kernel: Kernel) -> str:
    """The core operation a kernel before fusion computes: `softmax` of `softmax axis seq2`."""
    return kernel.name.split(" ")[0].split("[")[0]


def kernel(ctx: Ctx) -> dict[int, A]:
    """What `ctx.kernel` stores in each of its output buffers."""
    op = core_op(ctx.kernel)
    if op in ("softmax", "log_softmax"):
        return _softmax(ctx, op)
    if op in LIPSCHITZ:
        return _elementwise(ctx, LIPSCHITZ[op])
    statements(ctx, ctx.kernel.body)
    return ctx.stores


def _elementwise(ctx: Ctx, slope: float) -> dict[int, A]:
    """|f̂(x̂) − f(x)| ≤ |f̂(x̂) − f(x̂)| + |f(x̂) − f(x)|: the kernel's own rounding at the
    computed input (its body evaluated on the computed range, no error), then sup|f′|·err."""
    reals = [k for k, a in ctx.loads.items() if a.kind == "real"]
    if len(reals) != 1:
        statements(ctx, ctx.kernel.body)
        return ctx.stores
    (x,) = reals
    given = ctx.loads[x]
    ctx.loads[x] = A(*given.computed, tri=(0.0, 0.0, 0.0))
    statements(ctx, ctx.kernel.body)
    ctx.loads[x] = given
    return {
        b: ctx.checked(replace(a, err=up(a.err + slope * given.err), tri=None))
        for b, a in ctx.stores.items()
    }


def _softmax(ctx: Ctx, op: str) -> dict[int, A]:
    """A row's softmax (or log_softmax) over n positions (docs/precision.md): the
    propagation ‖J‖∞ ≤ ½ (log_softmax: 2) times the input's error, and the rounding of the
    three passes at the computed input, whatever it is (a row's maximum is exact, so each
    exponential is at most 1 and their sum at least 1)."""
    xid = ctx.kernel.inputs[0].id
    x = ctx.loads[xid]
    if ctx.compute == "f32" and ctx.dtypes[xid] == "f64":  # converted at its load: rounds
        x = rounded(ctx, x.lo, x.hi, x.err, ctx.u, ctx.eta)
    if len(ctx.kernel.inputs) > 1 and ctx.loads[ctx.kernel.inputs[1].id].flip:
        raise ctx.fail("a mask the computation may choose otherwise")
    folds = [st for st in _walk(ctx.kernel.body) if isinstance(st, Reduce)]
    if len(folds) != 2 or x.kind != "real":
        raise ctx.fail(f"a `{op}` kernel of an unexpected form")
    n = math.prod(e for _, _, e in folds[0].vars)
    u, eta = ctx.u, ctx.eta
    k_exp = libm(ctx, "exp")
    # each exponential of d = x − max ≤ 0 (d rounded first) is within c of e^d, plus 2k·u·e^d
    c = u / (math.e * (1 - u)) * (1 + 2 * k_exp * u) + 2 * k_exp * eta
    g = gamma(n - 1, u)
    rel_s = n * c + 2 * k_exp * u + g * (1 + n * c + 2 * k_exp * u)  # |s̃ − S| / S, S ≥ 1
    if rel_s >= 0.5:
        raise ctx.fail(f"a row of {n} terms is too long for a bound in {ctx.compute}")
    out = ctx.kernel.outputs[0].id
    if op == "softmax":
        rounding = (c + 2 * k_exp * u + rel_s) / (1 - rel_s)
        rounding = rounding + u * (1 + rounding) + eta
        a = A(0.0, 1.0, up(0.5 * x.err + rounding))
    else:
        lo, hi = x.computed
        width = hi - lo  # |x − max| over the row
        log_err = rel_s / (1 - rel_s)  # |log s̃ − log S|
        log_s = math.log(n) + log_err
        rounding = u * width + log_err + 2 * libm(ctx, "log") * (u * log_s + eta)
        rounding += u * (width * (1 + u) + log_s + rounding)
        a = A(-(x.hi - x.lo) - math.log(n), 0.0, up(2 * x.err + rounding))
    _store(ctx, out, (), ctx.checked(a))
    return ctx.stores


def _walk(body: tuple):
    for st in body:
        yield st
        if isinstance(st, Loop | Reduce):
            yield from _walk(st.body)


# ---- the entry --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bound:
    """The bound of an entry's result: `absolute`, the largest error of any element of any
    output (the max-norm over the result's leaves), and each output buffer's own."""

    absolute: float
    outputs: tuple[tuple[str, float], ...]


def input_error(dtype: str) -> tuple[float, float]:
    """An input's storage, (relative, absolute): the exact value to a double (f64's rounding,
    none for the doubles presk synthesizes, counted all the same), then to f32 and to bf16
    as presk_kernel.interp.to_storage rounds it (f64 → f32 → bf16)."""
    rho, beta = UNIT["f64"], 0.0
    for t in ("f32", "bf16")[: ("f64", "f32", "bf16").index(dtype)]:
        rho, beta = rho * (1 + UNIT[t]) + UNIT[t], beta * (1 + UNIT[t]) + ETA[t]
    return up(rho), up(beta)


Sites = Mapping[str, tuple[float, float, float | None, float | None]]


def bound(
    schedule: Schedule,
    sites: Sites,
    inputs: Mapping[str, tuple[float, float]],
    model: str = "cond",
) -> Bound:
    """The bound of `schedule` (before fusion): `sites` each site's exact range, and at sums
    its measured Σ|terms| and condition number (else None), `inputs` each input buffer's
    range, by name (the envelope's `sites` and `inputs`)."""
    if model not in MODELS:
        raise ValueError(f"no bound model `{model}` (the models: {', '.join(MODELS)})")
    state: dict[int, A] = {}
    buffers = schedule.buffers
    for b in schedule.inputs:
        hb = buffers[b]
        if hb.dtype not in REAL_DTYPES:  # an index: any int64; a truth value: 0 or 1
            big = 2.0**63
            state[b] = A(-big, big, kind="int") if hb.dtype == "i64" else A(0, 1, kind="bool")
            continue
        r = inputs.get(hb.name)
        if r is None:
            raise BoundError(f"the envelope has no range for the input `{hb.name}`")
        lo, hi = r
        if lo > hi:  # an empty tensor
            lo = hi = 0.0
        rho, beta = input_error(hb.dtype)
        mag = max(abs(lo), abs(hi))
        state[b] = A(lo, hi, up(rho * mag + beta), tri=(rho, 0.0, beta))
    ranges = {k: (v[0], v[1]) for k, v in sites.items()}
    for launch in schedule.launches:
        k = launch.kernel
        host = {kb.id: arg.buf for kb, arg in zip(k.buffers, launch.args, strict=True)}
        loads = {}
        for kb in k.inputs:
            a = state.get(host[kb.id])
            if a is None:
                name = buffers[host[kb.id]].name
                raise BoundError(f"`{k.name}` at {k.site} reads `{name}` before anything wrote it")
            loads[kb.id] = a
        ctx = Ctx(
            k,
            loads,
            {},
            {i: buffers[h].name for i, h in host.items()},
            {kb.id: kb.dtype for kb in k.buffers},
            ranges,
            _sums(k, sites, model),
            {},
        )
        for i, a in kernel(ctx).items():
            state[host[i]] = join(state.get(host[i]), a)
    outs = []
    for b in schedule.outputs:
        if buffers[b].dtype in REAL_DTYPES:
            a = state.get(b)
            if a is None:
                raise BoundError(f"no kernel writes the output `{buffers[b].name}`")
            outs.append((buffers[b].name, a.err))
    return Bound(max((e for _, e in outs), default=0.0), tuple(outs))


def _sums(k: Kernel, sites: Sites, model: str) -> tuple[float, float] | None:
    """Under `cond`, the envelope's (Σ|terms|, condition number) of a sum's one fold (a
    mean's terms are xᵢ/n in the envelope and xᵢ in its kernel, which divides after)."""
    op = core_op(k)
    if model != "cond" or op not in SUMS:
        return None
    entry = sites.get(k.site)
    if entry is None or entry[2] is None or entry[3] is None:
        return None
    folds = [st for st in _walk(k.body) if isinstance(st, Reduce)]
    if len(folds) != 1 or folds[0].op not in ("add", "fma"):
        return None
    n = math.prod(e for _, _, e in folds[0].vars)
    total = up(entry[2] * n * (1 + 2.0**-50)) if op == "mean" else entry[2]
    return total, entry[3]


__all__ = ["A", "Bound", "BoundError", "MODELS", "SCALAR_RULES", "bound"]
