"""Contractions among kernels: a kernel that is a (batched) GEMM, recognised from its data
by the `layout` pass (presk_kernel.layout.lay_out), which records it on the kernel's layout
as a `Gemm` statement when it packs the operands; the emitter renders that statement as a
call of the generated GEMM and never looks for one itself. The fold is the same (fma in
increasing k from the first product), so the bits are the same as the loops'."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from presk_kernel.ir import (
    Affine,
    Buffer,
    Gemm,
    Kernel,
    Layout,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Stmt,
    Store,
    Var,
    plain,
)


def perfect_nest(k: Kernel) -> list[Loop]:
    """The outer perfect nest's parallel loops (a serial loop and what it holds keep their
    order: they are body, not layout; so does a triangular loop, whose bounds read the loops
    around it), of the nest a laid-out body lays out."""
    out: list[Loop] = []
    body = plain(k.body)
    while len(body) == 1 and isinstance(body[0], Loop) and not body[0].serial:
        if body[0].start is not None or body[0].stop is not None:
            break
        out.append(body[0])
        body = body[0].body
    return out


def linear(b: Buffer, index: tuple) -> tuple[dict[str, int], int] | None:
    """An affine index as one offset into the row-major buffer: (coefficient per loop
    variable, constant), or None for a gather."""
    if len(index) != len(b.axes) or not all(isinstance(i, Affine) for i in index):
        return None
    coefs: dict[str, int] = {}
    const, stride = 0, 1
    for ax in reversed(range(len(b.axes))):
        for v, c in index[ax].terms:
            coefs[v] = coefs.get(v, 0) + c * stride
        const += index[ax].const * stride
        stride *= b.axes[ax].length
    return {v: c for v, c in coefs.items() if c}, const


@dataclass(frozen=True)
class Contraction:
    """A kernel that is a (batched) GEMM: C[m, n] = fold fma over k of A[m, k]·B[k, n]."""

    a: int
    b: int
    c: int
    m: Loop
    n: Loop
    k: int
    kvar: str
    batch: tuple[Loop, ...]
    coefs: tuple[dict[str, int], dict[str, int], dict[str, int]]  # of A, B, C
    consts: tuple[int, int, int]
    acc: str = ""  # the fold's accumulator, which an epilogue reads
    epilogue: tuple[Stmt, ...] = ()  # the statements after the fold (an epilogue), or none
    prologue: tuple = ()  # A's and B's terms where computed (`contraction(prologues=True)`)


def flatten(coefs: dict[str, int], fold: tuple) -> dict[str, int] | None:
    """An operand's coefficients with the fold's variables (row-major, outermost first) as
    one, the innermost's, running over all their points in the fold's order: when each
    variable's stride is the next one's times its extent (`x[b, s, i]` summed over b then s
    is one run of stride I over B·S terms). None when they do not chain so."""
    step = coefs.get(fold[-1][0], 0)
    expect = step
    for v, _, n in reversed(fold):
        if not step or coefs.get(v, 0) != expect:
            return None
        expect *= n
    out = {v: c for v, c in coefs.items() if v not in {f[0] for f in fold}}
    out[fold[-1][0]] = step
    return out


def _merge_rows(m: Loop, batch: tuple, ca: dict, cb: dict, cc: dict) -> tuple[Loop, tuple]:
    """Batch loops whose strides continue m's in A and C (and that B does not see) made part
    of m: `x[b, s, i]·W[i, o]` is one GEMM of B·S rows, not B of S. Rows are independent
    outputs, so the bits are the same."""
    extent, merged = m.extent, set()
    for lp in reversed(batch):
        if cb.get(lp.var, 0) or ca.get(lp.var) != ca[m.var] * extent:
            break
        if cc.get(lp.var) != cc[m.var] * extent:
            break
        extent *= lp.extent
        merged.add(lp.var)
    if not merged:
        return m, batch
    return dataclasses.replace(m, extent=extent), tuple(lp for lp in batch if lp.var not in merged)


def contraction(k: Kernel, prologues: bool = False) -> Contraction | None:
    """The kernel as a GEMM call, when it is one: a perfect nest whose body folds fma over
    one variable — or several that chain into one run in both operands (`flatten`) — of two
    affine loads and stores the fold, C contiguous along n. The GEMM's k runs over the
    fold's points in its order, so the fold is the same. With `prologues` (the emission's,
    presk_kernel.epilogue), a fold over one variable may have a term computed from affine
    loads in the compute type (`_computed`: a dequantised weight, a norm's scaled row),
    which the GEMM computes into its packed panel (`Contraction.prologue`), and an epilogue
    may store more than C (`_epilogue`)."""
    loops = perfect_nest(k)
    body = loops[-1].body if len(loops) >= 2 else ()
    band = triangle_loop(body, {lp.var for lp in loops})
    if band is not None:  # a narrowed product (issue 26): n bounded by m, its last loop
        loops, body = [*loops, dataclasses.replace(band, stop=None)], band.body
    if len(body) < 2 or not isinstance(body[0], Reduce) or not isinstance(body[-1], Store):
        return None
    r = body[0]
    st = next(s for s in body[1:] if isinstance(s, Store))  # C: the first store after the fold
    epilogue = body[1:] if len(body) > 2 or st.expr != Var(r.acc) else ()
    if r.op != "fma" or not r.vars or r.body:
        return None
    if epilogue and not _epilogue(k, r, epilogue):
        return None
    if not prologues and sum(isinstance(s, Store) for s in epilogue) > 1:
        return None  # several stores: the emission's epilogue only (presk_kernel.epilogue)
    computed = [not isinstance(t, Load) for t in r.terms]
    if any(computed) and not (
        prologues and len(r.vars) == 1 and all(_computed(k, t) for t in r.terms)
    ):
        return None
    kv, kn = r.vars[-1][0], math.prod(n for _, _, n in r.vars)
    folded = {v for v, _, _ in r.vars}
    dt = k.compute
    bufs = k.buffers
    if dt not in ("f64", "f32") or r.dtype != dt or bufs[st.buf].dtype != dt:
        return None
    lin_c = linear(bufs[st.buf], st.index)
    par = {lp.var: lp for lp in loops}
    for ta, tb in (r.terms, reversed(r.terms)):
        lin_a, lin_b = _operand(k, ta, loops, r), _operand(k, tb, loops, r)
        if None in (lin_a, lin_b, lin_c):
            return None
        ca, cb, cc = flatten(lin_a[0], r.vars), flatten(lin_b[0], r.vars), lin_c[0]
        if ca is None or cb is None or folded & set(cc):
            continue
        if (set(ca) | set(cb) | set(cc)) - set(par) - {kv}:
            continue
        ns = [v for v in par if cc.get(v) == 1 and not ca.get(v) and cb.get(v)]
        ms = [v for v in par if ca.get(v) and not cb.get(v) and cc.get(v) and v not in ns]
        if ns and ms:
            n, m = par[ns[-1]], par[ms[-1]]  # the innermost: unit or smallest strides
            batch = tuple(lp for lp in loops if lp.var not in (n.var, m.var))
            if band is not None:  # its columns end at its row's bound: rows kept apart
                if n.var != band.var or m.var != band.stop.terms[0][0]:
                    return None
                if epilogue or any(computed):  # a narrowed GEMM takes neither (yet)
                    return None
            elif r.zeros is not None and r.zeros.terms == ((m.var, 1),) and len(r.vars) == 1:
                pass  # a·v folding each row's prefix (Reduce.zeros, `gemm_kstop`): rows apart
            else:
                m, batch = _merge_rows(m, batch, ca, cb, cc)
            prologue = tuple(None if isinstance(t, Load) else t for t in (ta, tb))
            return Contraction(
                _first_load(ta).buf, _first_load(tb).buf, st.buf, m, n, kn, kv, batch,
                (ca, cb, cc), (lin_a[1], lin_b[1], lin_c[1]), r.acc if epilogue else "",
                epilogue, prologue if any(computed) else (),
            )  # fmt: skip
    return None


def triangle_loop(body: tuple, outer: set[str]) -> Loop | None:
    """The body's one loop when it is a narrowed product's column loop (presk_kernel.narrow's
    dead positions): `for n in 0 .. m + c` around the fold and its store, m an enclosing
    loop's variable, c ≥ 0."""
    if len(body) != 1 or not isinstance(body[0], Loop):
        return None
    lp = body[0]
    stop = lp.stop
    if lp.serial or lp.start is not None or stop is None or len(stop.terms) != 1:
        return None
    ((v, c),) = stop.terms
    return lp if c == 1 and v in outer and stop.const >= 0 else None


def unbanded(k: Kernel) -> Kernel:
    """`k` with a narrowed product's column loop (`triangle_loop`, presk_kernel.narrow's dead
    positions) whole again, at its natural layout: the nest a layout plan's points lay out
    (step 17 plans the products the spec's nests are, and a point other than the run's own
    computes the dead positions too, which nothing reads: the same bits), and a values
    product's fold over its rows' prefixes (`Reduce.zeros`) whole, the fold it stands for.
    `k` itself when it has neither."""
    loops = perfect_nest(k)
    body = loops[-1].body if loops else ()
    band = triangle_loop(body, {lp.var for lp in loops})
    if band is None:
        zeros = [s for s in body if isinstance(s, Reduce) and s.zeros is not None]
        if not zeros:
            return k
        # a·v folding its rows' prefixes (`gemm_kstop`): planned as the whole product
        out = dataclasses.replace(k, body=whole_folds(plain(k.body)))
        return dataclasses.replace(out, layout=Layout(order=tuple(lp.var for lp in loops)))

    def whole(b: tuple) -> tuple:
        (lp,) = b
        if lp == band:
            return (dataclasses.replace(lp, stop=None),)
        return (dataclasses.replace(lp, body=whole(lp.body)),)

    out = dataclasses.replace(k, body=whole(plain(k.body)))
    order = tuple(lp.var for lp in perfect_nest(out))
    return dataclasses.replace(out, layout=Layout(order=order))


def gemm_stop(g: Gemm, nest: tuple) -> int | None:
    """A GEMM statement's column bound, from the nest it computes: row r of a narrowed
    product (`triangle_loop`) has its columns in [0, min(cols, r + c)), the others not
    computed (nothing reads them); None for a whole product."""
    body = plain(nest)
    while len(body) == 1 and isinstance(body[0], Loop):
        lp = body[0]
        if lp.var == g.n:
            if lp.stop is None or lp.stop.terms != ((g.m, 1),):
                return None
            return lp.stop.const
        body = lp.body
    return None


def whole_folds(body: tuple) -> tuple:
    """`body` with every contraction's zero terms (`Reduce.zeros`) folded as the others."""
    out = []
    for s in body:
        if isinstance(s, Loop):
            s = dataclasses.replace(s, body=whole_folds(s.body))
        elif isinstance(s, Reduce) and s.zeros is not None:
            s = dataclasses.replace(s, zeros=None, zeros_first=False, zeros_finite=False)
        out.append(s)
    return tuple(out)


def gemm_kstop(g: Gemm, nest: tuple) -> tuple[int, bool, bool] | None:
    """A GEMM statement's fold bound, from the nest it computes: (c, False, …) when row r of a
    product whose A is ±0 past its row's prefix (`Reduce.zeros` = r + c, presk_kernel
    .narrow's zero operands) may fold k over [0, min(depth, r + c)) only, then the rest
    where C is −0 or a term past it is not finite; (c, True, …) when A is ±0 before r + c
    (`zeros_first`); the last, whether A is known finite there (`zeros_finite`); None for a whole fold (rows merged, an epilogue, a prologue, a
    narrowed column loop)."""
    if g.epilogue or any(t is not None for t in g.prologue):
        return None
    body, rows = plain(nest), None
    while len(body) == 1 and isinstance(body[0], Loop):
        lp = body[0]
        if lp.start is not None or lp.stop is not None:
            return None
        if lp.var == g.m:
            rows = lp.extent
        body = lp.body
    if rows != g.rows or not body or not isinstance(body[0], Reduce):
        return None
    r = body[0]
    if r.zeros is None or r.zeros.terms != ((g.m, 1),) or len(r.vars) != 1:
        return None
    if r.vars[0][0] != g.k or r.vars[0][2] != g.depth:
        return None
    return r.zeros.const, r.zeros_first, r.zeros_finite


def _operand(k: Kernel, t, loops: list[Loop], r: Reduce) -> tuple[dict[str, int], int] | None:
    """An operand's strides and offset: its load's, or, for a computed term, those of a
    row-major array over the variables it reads (the parallel loops', in their order, then
    the fold's), which say which of m, n, k and the batch it varies with."""
    if isinstance(t, Load):
        b = k.buffers[t.buf]
        return linear(b, t.index) if b.dtype == k.compute else None
    used = _vars(t)
    order = [lp.var for lp in loops if lp.var in used] + [v for v, _, _ in r.vars if v in used]
    extent = {lp.var: lp.extent for lp in loops} | {v: n for v, _, n in r.vars}
    coefs, stride = {}, 1
    for v in reversed(order):
        coefs[v] = stride
        stride *= extent[v]
    return coefs, 0


def _vars(e) -> set[str]:
    match e:
        case Load(_, index):
            return set().union(
                *(
                    {v for v, c in i.terms if c} if isinstance(i, Affine) else _vars(i)
                    for i in index
                )
            )
        case Op(_, args, _):
            return set().union(*(_vars(a) for a in args))
    return set()


def _first_load(t) -> Load:
    if isinstance(t, Load):
        return t
    return next(x for a in t.args if (x := _first_load_or_none(a)) is not None)


def _first_load_or_none(t) -> Load | None:
    if isinstance(t, Load):
        return t
    if isinstance(t, Op):
        return next((x for a in t.args if (x := _first_load_or_none(a)) is not None), None)
    return None


# the operations a computed term may have: exact IEEE arithmetic in its type, and dequant
COMPUTED = frozenset({"add", "sub", "mul", "div", "neg", "sqrt", "max", "min", "dequant"})


def _computed(k: Kernel, t) -> bool:
    """Whether a fold's term is one the GEMM may compute into its panel: a load, or an
    operation of COMPUTED on loads with affine indices (no gather) and constants, of the
    kernel's compute type throughout (a dequant's integer and scale aside: its result)."""
    return _type(k, t) == k.compute and _first_load_or_none(t) is not None


def _type(k: Kernel, e) -> str | None:
    from presk_kernel.ir import Const

    match e:
        case Load(buf, index):
            ok = all(isinstance(i, Affine) for i in index)
            return k.buffers[buf].dtype if ok else None
        case Const(_, dtype):
            return dtype
        case Op("dequant", (Load(q, qi), Load(s, si)), dtype):
            ok = all(isinstance(i, Affine) for i in (*qi, *si))
            ints = k.buffers[q].dtype == "i8" and k.buffers[s].dtype == "f32"
            return dtype if ok and ints else None
        case Op(op, args, None) if op in COMPUTED and op != "dequant":
            types = {_type(k, a) for a in args}
            return types.pop() if len(types) == 1 else None
    return None


def _epilogue(k: Kernel, r: Reduce, body: tuple) -> bool:
    """Whether the statements after a contraction's fold are an epilogue the generated GEMM
    runs on each finished element (presk_kernel.fuse.merge_epilogue writes them): lets and
    stores, the last a store, the first store to an output of the compute type (C: it holds
    the partial sums between the GEMM's blocks of k), the others (the GELU beside the
    product it reads, `merge_epilogue(keep=True)`) each to another output at affine
    indices, none reading any output (what C holds there before the end is a partial sum),
    none a loop or a fold."""
    if not all(isinstance(s, (Let, Store)) for s in body) or not isinstance(body[-1], Store):
        return False
    stores = [s for s in body if isinstance(s, Store)]
    st = stores[0]
    if k.buffers[st.buf].dtype != k.compute or any(s.buf < len(k.inputs) for s in stores):
        return False
    if len({s.buf for s in stores}) != len(stores):
        return False
    if any(not all(isinstance(i, Affine) for i in s.index) for s in stores[1:]):
        return False
    outs = {b.id for b in k.outputs}
    exprs = [s.expr for s in body] + [i for i in st.index if not isinstance(i, Affine)]
    return not any(_loads(e) & outs for e in exprs) and _uses(exprs, r.acc)


def _loads(e) -> set[int]:
    match e:
        case Load(buf, index):
            return {buf}.union(*(_loads(i) for i in index if not isinstance(i, Affine)))
        case Op(_, args, _):
            return set().union(*(_loads(a) for a in args))
    return set()


def _uses(exprs, name: str) -> bool:
    def walk(e) -> bool:
        match e:
            case Var(n):
                return n == name
            case Load(_, index):
                return any(walk(i) for i in index if not isinstance(i, Affine))
            case Op(_, args, _):
                return any(walk(a) for a in args)
        return False

    return any(walk(e) for e in exprs)


def as_gemm(g: Contraction) -> Gemm:
    """The contraction as the IR's GEMM statement (plain data: the kernel document holds it)."""
    strides = tuple(tuple(c.items()) for c in g.coefs)  # the C offsets keep their order
    return Gemm(
        g.a, g.b, g.c, g.m.var, g.n.var, g.kvar, g.m.extent, g.n.extent, g.k,
        tuple((lp.var, lp.extent) for lp in g.batch), strides, g.consts, g.acc, g.epilogue,
        g.prologue,
    )  # fmt: skip


def row_vars(g: Gemm) -> list[tuple[str, int]]:
    """The loop variables a GEMM's row index stands for (its m and the batch loops merged
    into it, `_merge_rows`), each with the row index's step per unit of it, outermost first:
    row r is the point where each variable v is r // step(v) % extent(v). An epilogue reads
    them (the rows of C: each variable's stride in C over m's)."""
    batch = {v for v, _ in g.batch} | {g.n, g.k}
    unit = g.stride(2, g.m)
    steps = [(v, s // unit) for v, s in g.strides[2] if v not in batch]
    return sorted(steps, key=lambda vs: -vs[1])


def epilogue_nest(nest: tuple, g: Gemm) -> tuple:
    """A GEMM statement's nest as its epilogue runs: the fold replaced by its finished sum,
    read from C where the epilogue stores the element (the generated GEMM put it there)."""
    store = c_store(g)

    def walk(body: tuple) -> tuple:
        out = []
        for s in body:
            if isinstance(s, Loop):
                out.append(dataclasses.replace(s, body=walk(s.body)))
            elif isinstance(s, Reduce) and s.acc == g.acc:
                out.append(Let(s.acc, Load(store.buf, store.index)))
            else:
                out.append(s)
        return tuple(out)

    return walk(nest)


def c_store(g: Gemm) -> Store:
    """A GEMM statement's epilogue's store to C (its first: the element the GEMM finished,
    which the epilogue reads back as its accumulator)."""
    return next(s for s in g.epilogue if isinstance(s, Store) and s.buf == g.c)


def recognize(k: Kernel, prologues: bool = False) -> Gemm | None:
    """The kernel's GEMM statement, when the kernel is a (batched) GEMM; with `prologues`,
    also in the forms the emission writes (presk_kernel.epilogue: a term computed into a
    packed panel, an epilogue of several stores)."""
    g = contraction(k, prologues)
    return None if g is None else as_gemm(g)
