"""A GEMM's epilogues at emission (issue 26): a laid-out schedule whose generated GEMMs take
their elementwise consumers — the bias, the residual add, the scores' division by √hd — as
the epilogue each finished tile of C goes through (presk_cback.gemm's `presk_gemm_epi_*`).

It runs after everything that names or plans nests (`presk plan`, `presk autotune`, the
SCoP export, `presk dump --stage kernel`, the C export: they see the fused schedule of
`presk_kernel.fuse`, the spec's nests and launch counts), on the laid-out schedule a native
entry compiles (presk_kernel.passes.emitted, for presk_cback.native.NativeEntry, timed or
not; `epilogues=False` keeps the plan's launches); the PSK-Kernel verifier follows it
(`epilogues`: presk_kernel.spec.gemm_problems checks each GEMM statement's epilogue and
prologues). The consumer's own layout is dropped: it becomes statements the GEMM runs
on each element once its sum is finished, in the producer's GEMM statement
(`Gemm.epilogue`). A copy only GEMM statements read becomes their operands' strides, a copy
of a product's result the product's C at its strides (`_copies_as_strides`, b13); a fused
launch is named for what it holds (`dot+add+gelu`).

    compiled = gemm_epilogues(laid)   # laid: presk_kernel.layout.lay_out's schedule

Bits: the unfused schedule's (docs/native.md, "A contraction's epilogue"): C holds each
element's whole fold after the GEMM's last block of k, the value the unfused nest stored to
its temporary; the epilogue reads it back and applies the consumer's operations once, in
the same type and order.
"""

from __future__ import annotations

from dataclasses import replace

from presk_kernel.calls import fused_body, with_calls
from presk_kernel.contract import as_gemm, c_store, contraction, gemm_kstop
from presk_kernel.fuse import (
    _consumer,
    _index,
    _producer,
    fused_into,
    merge,
    merge_epilogue,
    producer_store,
)
from presk_kernel.ir import (
    Affine,
    Axis,
    Launch,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    Var,
    plain,
)
from presk_kernel.layout import PACK_AT, apply_layout
from presk_kernel.spec import verified

# A product of at most this many columns reads A's rows where they lie (presk_cback.gemm:
# n ≤ 4·NR, NR 32 at most on its blockings): an operand computed into A's panels would add a pass over A
# there, which measured slower than the producer's own pass (the course GPT's head at
# D 192, 86 columns: 0.43 ms against 0.29 + 0.05 ms, CPU time), so none is fused.
FEW_COLUMNS = 128


def gemm_epilogues(schedule: Schedule) -> Schedule:
    """`schedule` (laid out) with each GEMM statement's elementwise consumers as its
    epilogue, a chain of them in order (the bias, then the residual add); the host's calls
    a fusion crosses inlined, as `presk_kernel.fuse` does. Unchanged where none fuses."""
    launches: list[Launch | None] = list(schedule.launches)
    keep = set(schedule.outputs) | set(schedule.inputs)
    reads: dict[int, set[int]] = {}
    writes: dict[int, set[int]] = {}
    for i, lc in enumerate(launches):
        _index(lc, i, reads, writes, add=True)
    merges: list[tuple[int, int]] = []
    _copies_as_strides(launches, keep, reads, writes, merges)
    for i, p in enumerate(launches):  # an elementwise producer into a GEMM's packed operand
        if p is None:
            continue
        unlaid = _unlaid(p)
        j = _consumer(unlaid, i, keep, reads, writes)
        fused = None if j is None else with_operand(unlaid, launches[j])
        if fused is None:
            continue
        fused = _named(fused, p.kernel.name, launches[j].kernel.name)
        fused_into(launches, i, j, fused, reads, writes, merges)
    for j, c in enumerate(launches):
        if c is None:
            continue
        computed = with_prologue(c)
        if computed is not None:
            _index(c, j, reads, writes, add=False)
            _index(computed, j, reads, writes, add=True)
            launches[j] = computed
        _into_producer(launches, j, keep, reads, writes, merges)
    for j in _factors_forward(launches, keep, reads, writes):  # now a product: an epilogue
        _into_producer(launches, j, keep, reads, writes, merges)
    if not merges:  # PRESK_VERIFY=1: the verifier after the emission's GEMM statements
        return verified(replace(schedule, launches=tuple(launches)), "epilogues")
    at = [i for i, lc in enumerate(launches) if lc is not None]
    out = replace(schedule, launches=tuple(launches[i] for i in at))
    if schedule.body is not None:
        out = with_calls(out, fused_body(schedule.body, merges, at))
    return verified(out, "epilogues")


def _into_producer(
    launches: list, j: int, keep: set[int], reads: dict, writes: dict, merges: list
) -> None:
    """The elementwise launch at `j` as the epilogue of the GEMM statement whose result it
    reads (`_producer`; or `_shared_producer`, the result kept), where one takes it."""
    c = launches[j]
    unlaid = _unscattered(_unlaid(c))
    i, shared = _producer(unlaid, j, keep, reads, writes, launches), False
    if i is None:
        i, shared = _shared_producer(unlaid, j, keep, reads, writes, launches), True
    if i is None:
        return
    fused = with_epilogue(launches[i], unlaid, keep=shared)
    if fused is None:
        return
    fused = _named(fused, launches[i].kernel.name, c.kernel.name)
    fused_into(launches, i, j, fused, reads, writes, merges)


def _shared_producer(
    c: Launch, j: int, keep: set[int], reads: dict, writes: dict, launches: list
) -> int | None:
    """The GEMM launch whose result the elementwise `c` may take as an epilogue that stores
    that result too (`merge_epilogue(keep=True)`): the step's forward h = x·W + b, read by
    the GELU and later by the backward's `gelu_grad`. The one launch before `c` that
    writes a temporary `c` reads, as its one output, whose other readers all come after
    `c` (the fused launch stores it at `c`'s place), its inputs written by no launch in
    between, and a GEMM statement (its layout's)."""
    if producer_store(c) is None:
        return None
    for a in c.args[: len(c.kernel.inputs)]:
        if a.buf in keep:
            continue
        (i, *more) = sorted(writes.get(a.buf, set())) or (None,)
        if i is None or more or i >= j or any(r < j for r in reads.get(a.buf, ())):
            continue
        p = launches[i]
        if p.kernel.layout.gemm is None or len(p.kernel.outputs) != 1:
            continue
        if p.args[-1].buf != a.buf or p.args[-1].offset != 0:
            continue
        if any(any(i < w < j for w in writes.get(b.buf, ())) for b in p.args):
            continue
        return i
    return None


def with_epilogue(p: Launch, c: Launch, keep: bool = False) -> Launch | None:
    """The laid-out GEMM launch `p` with the elementwise `c` as its GEMM statement's
    epilogue, laid out as `p` is (its tiles, pack, threads); None when `p` is no GEMM
    statement, blocks its fold (a k-block stores partial sums, which the epilogue would
    see), or the fused nest is not the same GEMM with an epilogue. With `keep`, the
    epilogue stores `p`'s result too (later launches read it)."""
    g = p.kernel.layout.gemm
    if g is None or p.kernel.layout.kblock:
        return None
    fused = merge_epilogue(_unlaid(p), c, gemm=True, keep=keep)
    if fused is None:
        return None
    k = _forwarded(fused.kernel)  # a copy's `let e = s; C'[…] = e`: C' the GEMM's own C
    fused_gemm = contraction(k, prologues=True)
    if fused_gemm is None:  # a narrowed product (presk_kernel.narrow) takes no epilogue
        return None
    e = as_gemm(fused_gemm)
    same = (e.rows, e.cols, e.depth, e.batch) == (g.rows, g.cols, g.depth, g.batch)
    if not (same and set(p.kernel.layout.pack) == {g.a, g.b}):
        return None  # (no epilogue left: `c` only moved the product's elements, C's strides)
    layout = replace(p.kernel.layout, pack=(e.a, e.b), gemm=e)
    return replace(fused, kernel=apply_layout(replace(k, layout=layout)))


def with_operand(p: Launch, c: Launch) -> Launch | None:
    """The laid-out GEMM statement `c` computing the elementwise `p` (its nest, not laid
    out), whose result only it
    reads, into the panels of the operand that is that result (a norm's γ·x̂ + β into the
    product that reads it): its term the producer's expression at its indices
    (presk_kernel.fuse.merge), a `Gemm.prologue`. None when `c` is no GEMM statement
    (the run or the plan gave it none), blocks its fold, or the term is not one the GEMM
    computes (`presk_kernel.contract._computed`)."""
    if c is None or c.kernel.layout.gemm is None or c.kernel.layout.kblock:
        return None
    if producer_store(p) is None:
        return None
    fused = merge(p, _unlaid(c), several=False, operand=True)
    if fused is None:
        return None
    k = fused.kernel
    g = contraction(k, prologues=True)
    if g is None or not g.prologue:
        return None
    if g.prologue[0] is not None and g.n.extent <= FEW_COLUMNS:
        return None  # the GEMM reads this A where it lies: a panel would be one more pass
    e = as_gemm(g)
    layout = replace(c.kernel.layout, pack=(e.a, e.b), gemm=e)
    return replace(fused, kernel=apply_layout(replace(k, layout=layout)))


def with_prologue(lc: Launch) -> Launch | None:
    """A laid-out contraction whose fold reads a term computed from loads (a weight
    dequantised from its integers, `presk_kernel.quant`) as a GEMM statement that computes
    that term into its packed panels (`Gemm.prologue`), where the run would give a product
    of its size the generated GEMM (`PACK_AT` multiply-adds) and its layout packs nothing
    itself and blocks no fold; its threads are its layout's. None otherwise."""
    k, layout = lc.kernel, lc.kernel.layout
    if layout.gemm is not None or layout.pack or layout.kblock:
        return None
    unlaid = replace(k, body=plain(k.body))
    g = contraction(unlaid, prologues=True)
    if g is None or not g.prologue or g.m.extent * g.n.extent * g.k < PACK_AT:
        return None
    e = as_gemm(g)
    laid = replace(layout, pack=(e.a, e.b), gemm=e)
    return replace(lc, kernel=apply_layout(replace(unlaid, layout=laid)))


def _copies_as_strides(
    launches: list, keep: set[int], reads: dict, writes: dict, merges: list
) -> None:
    """Each launch that only moves elements — `t[i…] = x[f(i…)]`, f affine, the same type
    (a split into heads, its adjoint's transposition) — whose result only GEMM statements
    read, each once in a term of its fold, read by them where `x` holds it: the copy's index
    composed into each reader's load, the reader's operand strides (an operand with strides
    (D, HD, 1) over (seq, heads, hd) is packed, or read in place, as a contiguous one). The
    same values in the same fold: the same bits. Not where `x` is written between the copy
    and its last reader, or `t` is the entry's (an input or output)."""
    for i, p in enumerate(launches):
        if p is None:
            continue
        unlaid = _unlaid(p)
        src = _copy(unlaid)
        out = p.args[-1].buf
        if src is None or out in keep or writes.get(out) != {i}:
            continue
        readers = sorted(reads.get(out, ()))
        if not readers or readers[0] <= i:
            continue
        if any(i < w <= readers[-1] for w in writes.get(p.args[src].buf, ())):
            continue
        fused = [with_strides(unlaid, launches[j]) for j in readers]
        if any(f is None for f in fused):
            continue
        _index(p, i, reads, writes, add=False)
        launches[i] = None
        for j, f in zip(readers, fused, strict=True):
            _index(launches[j], j, reads, writes, add=False)
            _index(f, j, reads, writes, add=True)
            launches[j] = f
            merges.append((i, j))


def _copy(lc: Launch) -> int | None:
    """The input an elementwise launch (not laid out) only copies into its output, at affine
    indices, in the same floating type; None for any other launch."""
    found = producer_store(lc)
    if found is None:
        return None
    _, store = found
    x, k = store.expr, lc.kernel
    if not isinstance(x, Load) or not all(isinstance(i, Affine) for i in x.index):
        return None
    dtype = k.buffers[store.buf].dtype
    if dtype not in ("f32", "f64") or k.buffers[x.buf].dtype != dtype:
        return None
    return x.buf


def with_strides(p: Launch, c: Launch | None) -> Launch | None:
    """The laid-out GEMM statement `c` reading the copy `p` (not laid out: `_copy`) where
    the copy reads (its load's index composed into `c`'s), its layout `c`'s; None when `c`
    is no GEMM statement, blocks its fold, reads the copy other than once in a term, or
    the product is not the same GEMM (its rows, columns, depth and batch)."""
    if c is None or c.kernel.layout.gemm is None or c.kernel.layout.kblock:
        return None
    g = c.kernel.layout.gemm
    if set(c.kernel.layout.pack) != {g.a, g.b}:
        return None
    fused = merge(p, _unlaid(c), several=False, operand=True)
    if fused is None:
        return None
    k = fused.kernel
    found = contraction(k, prologues=True)
    if found is None or found.prologue:
        return None
    e = as_gemm(found)
    if (e.rows, e.cols, e.depth, e.batch) != (g.rows, g.cols, g.depth, g.batch):
        return None
    if bool(e.epilogue) != bool(g.epilogue):
        return None
    strided = fused.args[e.b] == p.args[_copy(p)] and e.stride(1, e.k) not in (1, e.cols)
    if strided and gemm_kstop(e, k.body) is not None:
        return None  # a prefix-folded B's rows apart: measured slower than the copy (a·v)
    layout = replace(c.kernel.layout, pack=(e.a, e.b), gemm=e)
    return replace(fused, kernel=apply_layout(replace(k, name=c.kernel.name, layout=layout)))


def _forwarded(k):
    """Kernel `k` with each `let e = v` of a variable v dropped, its uses reading v: the
    epilogue `let e0 = s; C'[…] = e0` that a copy of the product leaves (merge_epilogue) is
    then the fold's own store, C' the GEMM's C at its strides, no epilogue (the same value
    stored: the same bits)."""

    def expr(e, names: dict):
        match e:
            case Var(n) if n in names:
                return Var(names[n])
            case Load(b, index):
                return Load(b, tuple(i if isinstance(i, Affine) else expr(i, names) for i in index))
            case Op(op, args, attr):
                return Op(op, tuple(expr(a, names) for a in args), attr)
        return e

    def block(body: tuple, names: dict) -> tuple:
        names = dict(names)
        out = []
        for st in body:
            match st:
                case Let(name, Var(v)):
                    names[name] = names.get(v, v)
                    continue
                case Let(name, x):
                    st = Let(name, expr(x, names))
                case Store(b, index, x):
                    index = tuple(i if isinstance(i, Affine) else expr(i, names) for i in index)
                    st = Store(b, index, expr(x, names))
                case Loop():
                    st = replace(st, body=block(st.body, names))
                case Reduce():
                    terms = tuple(expr(t, names) for t in st.terms)
                    st = replace(st, body=block(st.body, names), terms=terms)
            out.append(st)
        return tuple(out)

    return replace(k, body=block(k.body, {}))


def _unscattered(c: Launch) -> Launch:
    """The elementwise `c` (not laid out) whose one store writes axis a of its output at a
    row-major index over some of its loops (`%1[b, s, 32*h + d]`: heads merged into the
    model axis) with that axis split into those loops' (`%1[b, s, h, d]` over a view of the
    output as [B, T, H, HD]: the same elements, the same host buffer), so that it may be
    a product's epilogue (`merge_epilogue` takes a store at its loops' indices). `c` as it
    is otherwise."""
    k = c.kernel
    if len(k.outputs) != 1 or c.args[-1].offset:
        return c
    loops, body = [], k.body
    while len(body) == 1 and isinstance(body[0], Loop) and not body[0].serial:
        loops.append(body[0])
        body = body[0].body
    if len(body) != 1 or not isinstance(body[0], Store) or body[0].buf != k.outputs[0].id:
        return c
    st, out = body[0], k.outputs[0]
    extent = {lp.var: lp.extent for lp in loops}
    named = {lp.var: lp.axis for lp in loops}
    if any(lp.start is not None or lp.stop is not None for lp in loops):
        return c
    axes, index = [], []
    for ax, i in zip(out.axes, st.index, strict=True):
        if not isinstance(i, Affine) or i.const or any(v not in extent for v, _ in i.terms):
            return c
        terms = sorted(i.terms, key=lambda t: -t[1])  # outermost (largest stride) first
        stride, ok = 1, True
        for v, coef in reversed(terms):
            ok = ok and coef == stride
            stride *= extent[v]
        if not ok or stride != ax.length:
            return c
        if len(terms) == 1:
            axes.append(ax)
        else:
            axes += [Axis(named[v], extent[v]) for v, _ in terms]
        index += [Affine.var(v) for v, _ in terms]
    if len(axes) == len(out.axes):
        return c
    view = replace(out, axes=tuple(axes))
    stored = Store(st.buf, tuple(index), st.expr)

    def rebuild(body: tuple) -> tuple:
        (s,) = body
        if isinstance(s, Loop):
            return (replace(s, body=rebuild(s.body)),)
        return (stored,)

    return replace(c, kernel=replace(k, outputs=(view,), body=rebuild(k.body)))


def _named(lc: Launch, first: str, second: str) -> Launch:
    """`lc`, a fusion of two launches, named for what it holds, in the order it computes
    them: `dot+add+gelu` (the product, its bias, the GELU), `fused 4 steps+dot` (a norm's
    scaled rows into the product's panels), `…+gelu_grad factor` (`_factors_forward`). The
    kernel's site and steps stay the product's: only the profiles (a timed entry's launch
    list, tools/bench_threads.py) and the C's comments show the name."""
    return replace(lc, kernel=replace(lc.kernel, name=f"{first}+{second}"))


def _unlaid(lc: Launch) -> Launch:
    return replace(lc, kernel=replace(lc.kernel, body=plain(lc.kernel.body)))


def _factors_forward(launches: list, keep: set[int], reads: dict, writes: dict) -> list[int]:
    """Each elementwise launch `c[idx] = x[idx] · E(h[idx])` whose factor E reads only h,
    a transcendental in it, where h is stored by a GEMM statement's epilogue (an earlier
    launch) and read by `c` alone: the epilogue stores E(h) in h's place, `c` becomes the
    product `x[idx] · h[idx]` (in place, the other launches as they are). The backward's
    `gelu_grad(ct, h) = ct · (erfc(−h/√2)·½ + h·exp(−h²/2)/√(2π))`: its erfc and exp
    computed in the up-projection's epilogue, beside the GELU's own erfc of the same
    operand (one evaluation, the C compiler's common subexpression), the backward left a
    product. E is evaluated by the same operations in the same type (stored in h's type,
    the type it had as a value of that product): the same bits. Returns the positions of
    the launches made products (each may then be its own producer's epilogue)."""
    made = []
    for j, c in enumerate(launches):
        if c is None or c.kernel.layout.gemm is not None:
            continue
        found = _factored(_unlaid(c))
        if found is None:
            continue
        stmt, other, factor, h = found
        k = c.kernel
        at = [b.id for b in k.inputs].index(h)
        buf = c.args[at]
        if buf.offset or buf.buf in keep or reads.get(buf.buf, set()) != {j}:
            continue
        (i, *more) = sorted(writes.get(buf.buf, set())) or (None,)
        if i is None or more or i >= j or launches[i] is None:
            continue
        p = _with_factor(launches[i], buf.buf, factor, h, stmt, k)
        if p is None:
            continue
        value = Op("mul", (other, Load(h, stmt.index)) if stmt.expr.args[0] is other else
                   (Load(h, stmt.index), other), stmt.expr.attr)  # fmt: skip
        body = _restore(plain(k.body), replace(stmt, expr=value))
        launches[i] = _named(p, p.kernel.name, f"{k.name} factor")
        launches[j] = replace(c, kernel=apply_layout(replace(k, body=body)))
        made.append(j)
    return made


def _factored(c: Launch):
    """(the store, the other operand, the factor, h's buffer) of an elementwise launch whose
    store is a product of an operand and a factor reading only one other input h, at the
    store's index, with presk libm's functions in it; None otherwise."""
    from presk_kernel.fuse import LIBM, _every_op, producer_store

    ps = producer_store(c)
    if ps is None:
        return None
    _, st = ps
    e = st.expr
    if not isinstance(e, Op) or e.op != "mul" or len(e.args) != 2:
        return None
    for other, factor in (e.args, e.args[::-1]):
        if not _every_op(factor) & LIBM:
            continue
        loads = _loads_of(factor)
        bufs = {ld.buf for ld in loads}
        if len(bufs) != 1 or any(ld.index != st.index for ld in loads):
            continue
        (h,) = bufs
        if any(h == ld.buf for ld in _loads_of(other)) or h >= len(c.kernel.inputs):
            continue
        if c.kernel.buffers[h].dtype != c.kernel.compute:
            continue
        return st, other, factor, h
    return None


def _loads_of(e) -> list[Load]:
    match e:
        case Load(_, index):
            return [e, *(x for i in index if not isinstance(i, Affine) for x in _loads_of(i))]
        case Op(_, args, _):
            return [x for a in args for x in _loads_of(a)]
    return []


def _with_factor(p: Launch, buf: int, factor, h: int, stmt: Store, ck) -> Launch | None:
    """The laid-out GEMM launch `p`, whose epilogue stores C (argument `buf`) with the value
    v, storing `factor` of v there instead (its loads of h the value), or None when `p` is
    no such launch or the indices do not correspond (C over c's loops, axis by axis)."""
    g = p.kernel.layout.gemm
    if g is None or not g.epilogue or p.args[g.c].buf != buf or p.args[g.c].offset:
        return None
    cstore = c_store(g)
    lengths = [a.length for a in p.kernel.buffers[g.c].axes]
    if lengths != [a.length for a in ck.buffers[h].axes]:
        return None
    if not all(_plain(i) for i in (*cstore.index, *stmt.index)):
        return None  # element [a0, a1, …] of h is C's at the same axes' indices
    unlaid = _unlaid(p).kernel
    taken = _all_names(unlaid.body)
    names = (f"d{n}" for n in range(len(taken) + 2) if f"d{n}" not in taken)
    lets = []
    v = cstore.expr
    if not isinstance(v, Var):  # the value h once, read by the factor where it loads h
        lets.append(Let(next(names), v))
        v = Var(lets[-1].name)

    def conv(e):
        match e:
            case Load(b, _) if b == h:
                return v
            case Op(op, args, attr):
                return Op(op, tuple(conv(a) for a in args), attr)
        return e

    name = next(names)
    new = (*lets, Let(name, conv(factor)), replace(cstore, expr=Var(name)))
    body = _restore(plain(unlaid.body), cstore, new)
    k = replace(unlaid, body=body)
    fused = contraction(k, prologues=True)
    if fused is None:
        return None
    e = as_gemm(fused)
    layout = replace(p.kernel.layout, pack=(e.a, e.b), gemm=e)
    return replace(p, kernel=apply_layout(replace(k, layout=layout)))


def _plain(i) -> bool:
    return isinstance(i, Affine) and not i.const and len(i.terms) == 1 and i.terms[0][1] == 1


def _restore(body: tuple, old: Store, new=None) -> tuple:
    """`body` with the store to `old`'s buffer at `old`'s index replaced by `new` (a tuple
    of statements), or by `old` itself when `new` is None (its expression changed)."""
    out = []
    for s in body:
        if isinstance(s, Loop):
            s = replace(s, body=_restore(s.body, old, new))
        elif isinstance(s, Store) and s.buf == old.buf and s.index == old.index:
            out.extend(new if new is not None else (old,))
            continue
        out.append(s)
    return tuple(out)


def _all_names(body) -> set[str]:
    out: set[str] = set()
    for s in body:
        if isinstance(s, Let):
            out.add(s.name)
        elif isinstance(s, Loop):
            out |= {s.var} | _all_names(s.body)
        elif isinstance(s, Reduce):
            out |= {s.acc} | _all_names(s.body)
    return out
