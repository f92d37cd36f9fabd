"""Fusion: an elementwise kernel computed inside the one kernel that reads its result.

A producer is fused into its consumer when it is elementwise (a perfect nest storing one
value per element, at its own loop indices), its result is a temporary that exactly one
later launch reads, no launch in between writes what the producer reads, and the consumer
reads each of its elements once (one load whose index runs over distinct loop variables:
then the pass over memory that stored and loaded the temporary is saved, and nothing is
computed twice). A 0-d producer may be read any number of times. Chains of elementwise
operations become one kernel (`fused 3 steps`); an elementwise producer moves into the
reduction or contraction that reads it.

Fusion changes no bit: the producer's value is computed by the same operations in the
same type and, where it was stored in bf16, rounded to bf16 where it was loaded (the
scalar operation `bf16`); a product read by a sum stays a product then a sum, never an fma.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from presk_kernel.calls import fused_body, with_calls
from presk_kernel.contract import Contraction, contraction
from presk_kernel.ir import TRANSCENDENTAL as LIBM  # presk libm's (not sqrt: IEEE's)
from presk_kernel.ir import (
    Affine,
    Arg,
    Buffer,
    Const,
    Index,
    Kernel,
    Launch,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    Var,
)
from presk_kernel.layout import natural_layout
from presk_kernel.spec import verified

CHEAP = 8  # operations a 0-d producer may have to be recomputed at every read
DEEPEST = 64  # the deepest expression a fusion may write (`_depth`): a chain of hundreds of
# adds (an unrolled scan's adjoint summing θ's cotangents a step at a time) is cut into kernels
# of at most this depth, which the compiler and every recursive pass over expressions take
PASSES = 3  # passes over a cheap producer's result a consumer may make (`_recomputable`)
TRANSCENDENTAL = frozenset(
    {"exp", "log", "tanh", "erf", "erfc", "sin", "cos", "powf", "sqrt"}
)  # never computed again at each pass (a constant's sqrt is a constant: not an operation)


@dataclass(frozen=True, slots=True)
class Group:
    """One fused kernel: the site that launches it and the sites it computes, in order."""

    site: str
    steps: tuple[str, ...]
    names: tuple[str, ...]


def fuse(schedule: Schedule) -> tuple[Schedule, list[Group]]:
    """The schedule with its elementwise producers fused, and the fusion groups."""
    launches: list[Launch | None] = list(schedule.launches)
    names: list[tuple[str, ...]] = [(lc.kernel.name,) for lc in schedule.launches]
    keep = set(schedule.outputs) | set(schedule.inputs)
    reads: dict[int, set[int]] = {}
    writes: dict[int, set[int]] = {}
    for i, lc in enumerate(launches):
        _index(lc, i, reads, writes, add=True)
    merges: list[tuple[int, int]] = []  # (producer, consumer): positions before fusion
    changed = True
    while changed:  # a second pass catches the producers a fusion left with one reader
        changed = False
        for i, p in enumerate(launches):
            if p is None:
                continue
            j = _consumer(p, i, keep, reads, writes)
            if j is None:
                continue
            fused = merge(p, launches[j], several=_same_function(p, launches[j]))
            if fused is None:
                continue
            fused_into(launches, i, j, fused, reads, writes, merges)
            names[j] = names[i] + names[j]
            changed = True
        for j, c in enumerate(launches):  # an elementwise consumer into its producer's store
            if c is None:
                continue
            i = _producer(c, j, keep, reads, writes, launches)
            if i is None or not _same_function(launches[i], c):
                continue
            fused = merge_epilogue(launches[i], c)
            if fused is None:
                continue
            fused_into(launches, i, j, fused, reads, writes, merges)
            names[j] = names[i] + names[j]
            changed = True
    kept = [(lc, n) for lc, n in zip(launches, names, strict=True) if lc is not None]
    groups = [Group(lc.kernel.site, lc.kernel.steps, n) for lc, n in kept if lc.kernel.steps]
    fused = replace(schedule, launches=tuple(lc for lc, _ in kept))
    if schedule.body is not None:  # a call fused across is inlined (presk_kernel.calls)
        at = [i for i, lc in enumerate(launches) if lc is not None]
        fused = with_calls(fused, fused_body(schedule.body, merges, at))
    return verified(fused, "fusion"), groups  # PRESK_VERIFY=1: the verifier after fusion


def _same_function(p: Launch, c: Launch) -> bool:
    """Whether two launches compute bindings of one function (their sites, `fn/%n`): the
    fusions that make a kernel of another kind than its consumer's (a pass computed again,
    an epilogue) stay inside a function, whose nests `presk tune` plans by their sites."""
    return p.kernel.site.rsplit("/", 1)[0] == c.kernel.site.rsplit("/", 1)[0]


def fused_into(
    launches: list, i: int, j: int, fused: Launch, reads: dict, writes: dict, merges: list
) -> None:
    """Launch j becomes `fused` (launch i's work and its own) and launch i none, the read
    and write indices and the list of merges (producer, consumer) kept up to date."""
    _index(launches[i], i, reads, writes, add=False)
    _index(launches[j], j, reads, writes, add=False)
    _index(fused, j, reads, writes, add=True)
    launches[i], launches[j] = None, fused
    merges.append((i, j))


def _index(lc: Launch, i: int, reads: dict, writes: dict, add: bool) -> None:
    n = len(lc.kernel.inputs)
    for k, a in enumerate(lc.args):
        table = reads if k < n else writes
        if add:
            table.setdefault(a.buf, set()).add(i)
        else:
            table.get(a.buf, set()).discard(i)


def _consumer(p: Launch, i: int, keep: set[int], reads: dict, writes: dict) -> int | None:
    if producer_store(p) is None:
        return None
    out = p.args[-1].buf
    if out in keep:
        return None
    readers = reads.get(out, set()) - {i}
    if len(readers) != 1 or writes.get(out, set()) - {i}:
        return None
    (j,) = readers
    if j < i:
        return None
    for a in p.args[: len(p.kernel.inputs)]:
        if any(i < w < j for w in writes.get(a.buf, ())):
            return None
    return j


def _producer(
    c: Launch, j: int, keep: set[int], reads: dict, writes: dict, launches: list
) -> int | None:
    """The launch whose result the elementwise `c` may take as its epilogue: the one
    launch before `c` that writes a temporary `c` reads, which no other launch reads or
    writes, its inputs written by no launch in between."""
    if producer_store(c) is None:
        return None
    for a in c.args[: len(c.kernel.inputs)]:
        if a.buf in keep or reads.get(a.buf, set()) != {j}:
            continue
        (i, *more) = sorted(writes.get(a.buf, set())) or (None,)
        if i is None or more or i >= j:
            continue
        p = launches[i]
        if len(p.kernel.outputs) != 1 or p.args[-1].buf != a.buf or p.args[-1].offset != 0:
            continue
        if any(any(i < w < j for w in writes.get(b.buf, ())) for b in p.args):
            continue
        return i
    return None


def producer_store(launch: Launch) -> tuple[list[Loop], Store] | None:
    """The loops and the one store of an elementwise kernel writing all of its output."""
    if launch.args[-1].offset != 0:
        return None
    return whole_store(launch.kernel)


def whole_store(k: Kernel) -> tuple[list[Loop], Store] | None:
    """The loops and the one store of a kernel that is a nest of parallel loops storing its
    one output at its loop variables, in order (presk_kernel.stacks reads it too)."""
    if len(k.outputs) != 1:
        return None
    loops, body = [], k.body
    while len(body) == 1 and isinstance(body[0], Loop) and not body[0].serial:
        loops.append(body[0])
        body = body[0].body
    if len(body) != 1 or not isinstance(body[0], Store):
        return None
    store = body[0]
    want = tuple(Affine.var(lp.var) for lp in loops)
    if store.buf != k.outputs[0].id or store.index != want:
        return None
    return loops, store


# ---- merging two kernels -----------------------------------------------------------------


def merge(p: Launch, c: Launch, several: bool = True, operand: bool = False) -> Launch | None:
    """The elementwise `p` computed inside `c`, the one kernel that reads its result: at
    its one read, or — `several` allowing it, and `p` cheap enough (`_recomputable`) — at
    each of a few passes (a softmax's three). With `operand` (the emission's prologues,
    presk_kernel.epilogue): at its one read in a fold's term, however many times the nest
    reads each element there (the GEMM computes it once a packed panel); the fused kernel
    keeps `c`'s name."""
    loops, store = producer_store(p)
    out = p.args[-1].buf
    pk, ck = p.kernel, c.kernel
    n_in = len(ck.inputs)
    targets = {
        b.id
        for b, a in zip(ck.inputs, c.args[:n_in], strict=True)
        if a.buf == out and b.shape == pk.outputs[0].shape
    }
    if len(targets) != sum(1 for a in c.args[:n_in] if a.buf == out):
        return None  # read under another shape
    scalar = pk.outputs[0].size == 1 and not loops
    sites: list[tuple[tuple[Affine, ...], tuple[str, ...]]] = []
    _find(ck.body, targets, (), sites)
    if operand and len(sites) != 1:
        return None
    if not scalar and not operand:
        if not sites or not all(_injective(*site) for site in sites):
            return None
        if len(sites) > 1 and not (several and _recomputable(store.expr, len(sites))):
            return None
    elif _size(store.expr) > CHEAP:
        return None
    # new buffers: the consumer's inputs but the temporary, then the producer's, outputs
    args: list[Arg] = []
    bufs: list[Buffer] = []

    def add(b: Buffer, a: Arg) -> int:
        for nb, na in zip(bufs, args, strict=True):
            if na == a and nb.axes == b.axes and nb.dtype == b.dtype:
                return nb.id
        bufs.append(Buffer(len(bufs), b.dtype, b.axes))
        args.append(a)
        return len(bufs) - 1

    cmap = {
        b.id: add(b, a)
        for b, a in zip(ck.inputs, c.args[:n_in], strict=True)
        if b.id not in targets
    }
    pmap = {b.id: add(b, a) for b, a in zip(pk.inputs, p.args[: len(pk.inputs)], strict=True)}
    n_new = len(bufs)
    for b, a in zip(ck.outputs, c.args[n_in:], strict=True):
        bufs.append(Buffer(len(bufs), b.dtype, b.axes))
        args.append(a)
        cmap[b.id] = len(bufs) - 1
    value = _renumber(store.expr, pmap)
    if pk.outputs[0].dtype == "bf16":
        value = Op("bf16", (value,))
    vars_ = [lp.var for lp in loops]
    try:
        body = tuple(_replace(s, cmap, targets, value, vars_) for s in ck.body)
    except _NoFusion:
        return None
    if _body_depth(body) > DEEPEST:
        return None
    steps = (pk.steps or (pk.site,)) + (ck.steps or (ck.site,))
    k = Kernel(
        ck.name if operand else f"fused {len(steps)} steps",
        ck.site,
        tuple(bufs[:n_new]),
        tuple(bufs[n_new:]),
        body,
        ck.compute,
        steps=steps,
    )
    return Launch(replace(k, layout=natural_layout(k)), tuple(args))


def epilogue_site(k: Kernel) -> tuple[tuple[int, ...], Store] | None:
    """Where a kernel stores its one output, when it stores each element once there: the
    path to the one `Store` of the output (indices into nested bodies), inside loops only —
    no fold — whose variables are the store's index, one per axis over its whole length,
    the output never loaded. None otherwise (a scatter, a partial write)."""
    out = k.outputs[0]
    found: list[tuple[tuple[int, ...], Store, tuple[Loop, ...]]] = []

    def walk(body, path, loops) -> bool:
        for n, st in enumerate(body):
            match st:
                case Store(buf, _, e):
                    if buf == out.id:
                        found.append(((*path, n), st, loops))
                    if _reads(e, out.id):
                        return False
                case Let(_, e):
                    if _reads(e, out.id):
                        return False
                case Loop(_, _, _, b, serial):
                    if serial or not walk(b, (*path, n), (*loops, st)):
                        return False
                case Reduce(_, _, _, b, terms, _):
                    if _stores(b, out.id) or _reads_any(b, out.id):
                        return False
                    if any(_reads(t, out.id) for t in terms):
                        return False
                case _:
                    return False
        return True

    if not walk(k.body, (), ()) or len(found) != 1:
        return None
    path, store, loops = found[0]
    vars_ = [i.terms[0][0] if _plain_var(i) else None for i in store.index]
    extents = {lp.var: lp.extent for lp in loops}
    if None in vars_ or len(set(vars_)) != len(vars_) or set(vars_) != set(extents):
        return None
    if any(extents[v] != ax.length for v, ax in zip(vars_, out.axes, strict=True)):
        return None
    return path, store


def _plain_var(i) -> bool:
    return isinstance(i, Affine) and not i.const and len(i.terms) == 1 and i.terms[0][1] == 1


def _reads(e, buf: int) -> bool:
    match e:
        case Load(b, index):
            return b == buf or any(_reads(i, buf) for i in index if not isinstance(i, Affine))
        case Op(_, args, _):
            return any(_reads(a, buf) for a in args)
    return False


def _reads_any(body, buf: int) -> bool:
    found: list = []
    _find(body, {buf}, (), found)
    return bool(found)


def _statements(body):
    """Every statement of `body`, each loop's and reduction's own after it, depth first."""
    for st in body:
        yield st
        if isinstance(st, Loop | Reduce):
            yield from _statements(st.body)


def _stores(body, buf: int) -> bool:
    return any(isinstance(st, Store) and st.buf == buf for st in _statements(body))


def _names(body) -> set[str]:
    out: set[str] = set()
    for st in _statements(body):
        match st:
            case Let(name, _):
                out.add(name)
            case Loop(var, _, _, _, _):
                out.add(var)
            case Reduce(acc, _, vs, _, _, _):
                out |= {acc} | {v for v, _, _ in vs}
    return out


def merge_epilogue(p: Launch, c: Launch, gemm: bool = False, keep: bool = False) -> Launch | None:
    """The elementwise kernel `c` computed where `p` stores the result `c` reads (its
    epilogue): `p`'s store `%t[idx] = e` becomes `let t = e` and `c`'s store at `idx`, its
    loads of %t the value t. The same operations in the same type, each once: the same
    bits. None when `p` does not store each element once (`epilogue_site`), `c` reads the
    result at other indices than its own loops' (or under another shape), or `p` is a
    contraction (whose store the generated GEMM makes) — but with `gemm` (the emission's
    `presk_kernel.epilogue`, after plans): a contraction the generated GEMM computes takes
    `c` as its GEMM statement's epilogue, the fused kernel keeping its name and site, when
    the fused nest is still the GEMM's (`_gemm_epilogue`). With `keep` (a GEMM's, whose
    result later launches read too: the step's h = x·W + b, which `gelu_grad` reads), `p`'s
    store stays, the value's `let` stored to it before `c`'s store: two outputs, `p`'s
    first (the GEMM's C)."""
    pk, ck = p.kernel, c.kernel
    gemm = gemm and contraction(pk, prologues=True) is not None
    if keep and not gemm:
        return None
    if _folds_fma(pk.body) and not gemm:
        return None  # a contraction keeps its store plain: the generated GEMM's
    site = epilogue_site(pk)
    loops_store = producer_store(c)
    if site is None or loops_store is None:
        return None
    path, pstore = site
    cloops, cstore = loops_store
    out = p.args[-1].buf
    n_in = len(ck.inputs)
    targets = {b.id for b, a in zip(ck.inputs, c.args[:n_in], strict=True) if a.buf == out}
    if any(ck.buffers[t].shape != pk.outputs[0].shape for t in targets):
        return None
    sites: list[tuple[tuple[Affine, ...], tuple[str, ...]]] = []
    _find(ck.body, targets, (), sites)
    if not sites or any(idx != sites[0][0] or not _injective(idx, enc) for idx, enc in sites):
        return None
    # c's loop variables in terms of p's: c reads %t[v0, v1, …] where p stores %t[idx]
    sub = {ci.terms[0][0]: pi for ci, pi in zip(sites[0][0], pstore.index, strict=True)}
    if set(sub) != {lp.var for lp in cloops}:
        return None
    extent = {lp.var: lp.extent for lp in cloops}
    if any(
        extent[i.terms[0][0]] != ax.length
        for i, ax in zip(sites[0][0], pk.outputs[0].axes, strict=True)
    ):
        return None  # c reads a part of the result
    if {a.buf for a in c.args[n_in:]} & {a.buf for a in p.args[: len(pk.inputs)]}:
        return None  # c writes what p reads
    args: list[Arg] = []
    bufs: list[Buffer] = []

    def add(b: Buffer, a: Arg) -> int:
        for nb, na in zip(bufs, args, strict=True):
            if na == a and nb.axes == b.axes and nb.dtype == b.dtype:
                return nb.id
        bufs.append(Buffer(len(bufs), b.dtype, b.axes))
        args.append(a)
        return len(bufs) - 1

    pmap = {b.id: add(b, a) for b, a in zip(pk.inputs, p.args[: len(pk.inputs)], strict=True)}
    cmap = {
        b.id: add(b, a)
        for b, a in zip(ck.inputs, c.args[:n_in], strict=True)
        if b.id not in targets
    }
    n_new = len(bufs)
    if keep:  # p's result stays an output, stored first (the GEMM's C)
        bufs.append(Buffer(len(bufs), pk.outputs[0].dtype, pk.outputs[0].axes))
        args.append(p.args[-1])
    for b, a in zip(ck.outputs, c.args[n_in:], strict=True):
        bufs.append(Buffer(len(bufs), b.dtype, b.axes))
        args.append(a)
        cmap[b.id] = len(bufs) - 1
    taken = _names(pk.body)
    name = next(f"e{n}" for n in range(len(taken) + 1) if f"e{n}" not in taken)
    value = _renumber(pstore.expr, pmap)
    if pk.outputs[0].dtype == "bf16":
        value = Op("bf16", (value,))

    def conv(e):
        match e:
            case Load(buf, index):
                if buf in targets:
                    return Var(name)
                return Load(
                    cmap[buf],
                    tuple(_compose(i, sub) if isinstance(i, Affine) else conv(i) for i in index),
                )
            case Op(op, a, attr):
                return Op(op, tuple(conv(x) for x in a), attr)
        return _substitute(e, sub)

    try:
        index = tuple(_compose(i, sub) if isinstance(i, Affine) else conv(i) for i in cstore.index)
        tail = (Let(name, value), Store(cmap[cstore.buf], index, conv(cstore.expr)))
    except _NoFusion:
        return None
    if keep:
        pidx = tuple(i if isinstance(i, Affine) else _renumber(i, pmap) for i in pstore.index)
        tail = (tail[0], Store(n_new, pidx, Var(name)), tail[1])
    ident = {b.id: b.id for b in pk.buffers}  # p's statements with p's inputs renumbered
    body = tuple(_replace(st, {**ident, **pmap}, set(), None, []) for st in pk.body)
    body = _splice(body, path, tail)
    steps = (pk.steps or (pk.site,)) + (ck.steps or (ck.site,))
    name, site = (pk.name, pk.site) if gemm else (f"fused {len(steps)} steps", ck.site)
    k = Kernel(name, site, tuple(bufs[:n_new]), tuple(bufs[n_new:]), body, pk.compute, steps=steps)
    if gemm and not _gemm_epilogue(k, tuple(args)):
        return None
    return Launch(replace(k, layout=natural_layout(k)), tuple(args))


def _gemm_epilogue(k: Kernel, args: tuple[Arg, ...]) -> bool:
    """Whether a contraction with an epilogue fused in is still the generated GEMM's, with
    that epilogue (presk_kernel.contract: its output of the compute type, which holds the
    partial sums between the GEMM's blocks of k), and its output no buffer it reads (the
    partial sums would overwrite what the epilogue reads). An epilogue with a
    transcendental is fused only where it reads no array along the product's rows
    (`_reads_rows`): the GELU after the bias is (its tile is in L1, its row of the bias
    too: the pass over the product the fusion saves), `gelu_grad`, which reads the forward's
    product at each element of the tile, is not — the tile loop reads that array a few
    lines a row, out of the order the prefetchers follow, behind a transcendental's hundred
    vector operations, and measured slower than its own kernel (docs/native.md, "A GEMM's
    epilogues and prologues")."""
    g = contraction(k, prologues=True)
    if g is None or not g.epilogue:
        return False
    if any(_every_op(s.expr) & LIBM for s in g.epilogue) and _reads_rows(g):
        return False
    n_in = len(k.inputs)
    return not {a.buf for a in args[n_in:]} & {a.buf for a in args[:n_in]}


def _reads_rows(g: Contraction) -> bool:
    """Whether a GEMM's epilogue loads an array at an index that varies with anything but
    the product's column (its row, a batch): a residual, another product, not the bias."""
    found: list[tuple] = []

    def loads(e) -> None:
        match e:
            case Load(_, index):
                found.append(index)
                for i in index:
                    if not isinstance(i, Affine):
                        loads(i)
            case Op(_, args, _):
                for a in args:
                    loads(a)

    for st in g.epilogue:
        loads(st.expr)
        if isinstance(st, Store):
            for i in st.index:
                if not isinstance(i, Affine):
                    loads(i)
    col = g.n.var
    return any(
        not isinstance(i, Affine) or any(v != col for v, _ in i.terms)
        for index in found
        for i in index
    )


def _folds_fma(body) -> bool:
    for st in body:
        match st:
            case Reduce(_, op, _, b, _, _):
                if op == "fma" or _folds_fma(b):
                    return True
            case Loop(_, _, _, b, _):
                if _folds_fma(b):
                    return True
    return False


def _splice(body: tuple, path: tuple[int, ...], stmts: tuple) -> tuple:
    """`body` with the statement at `path` replaced by `stmts`."""
    n, *rest = path
    if not rest:
        return body[:n] + stmts + body[n + 1 :]
    lp = body[n]
    return body[:n] + (replace(lp, body=_splice(lp.body, tuple(rest), stmts)),) + body[n + 1 :]


class _NoFusion(Exception):
    pass


def _recomputable(e, reads: int) -> bool:
    """A producer cheap enough to compute again at each of the consumer's `reads` passes
    over its result (a softmax reads its scores in three): at most CHEAP operations, none a
    transcendental, one load of an element, and at most PASSES passes — an operation or two again per
    element costs less than storing the temporary and loading it back."""
    return reads <= PASSES and _size(e) <= CHEAP and _loads(e) <= 1 and not _ops(e) & TRANSCENDENTAL


def _loads(e) -> int:
    """The loads of elements of `e` (a 0-d buffer's one value, a register, not counted)."""
    match e:
        case Load(_, index):
            return bool(index) + sum(_loads(i) for i in index if not isinstance(i, Affine))
        case Op(_, args, _):
            return sum(_loads(a) for a in args)
    return 0


def _ops(e) -> set[str]:
    """The operations of `e` on a loaded value or an index (one of constants is a constant)."""
    if not isinstance(e, Op) or not _varies(e):
        return set()
    return {e.op}.union(*(_ops(a) for a in e.args))


def _every_op(e) -> set[str]:
    """Every operation of `e` (on the accumulator's value too, which `_ops` leaves out)."""
    if isinstance(e, Load):
        return set().union(*(_every_op(i) for i in e.index if not isinstance(i, Affine)))
    if not isinstance(e, Op):
        return set()
    return {e.op}.union(*(_every_op(a) for a in e.args))


def _varies(e) -> bool:
    if isinstance(e, (Index, Load)):
        return True
    return isinstance(e, Op) and any(_varies(a) for a in e.args)


def _depth(e) -> int:
    """How deeply `e`'s operations nest (a load's computed index counted in)."""
    match e:
        case Op(_, args, _):
            return 1 + max((_depth(a) for a in args), default=0)
        case Load(_, index):
            return max((_depth(i) for i in index if not isinstance(i, Affine)), default=0)
    return 0


def _body_depth(body) -> int:
    """The deepest expression of a kernel's body."""
    deepest = 0
    for st in _statements(body):
        match st:
            case Let(_, e) | Store(_, _, e):
                deepest = max(deepest, _depth(e))
            case Reduce(terms=terms):
                deepest = max((deepest, *(_depth(t) for t in terms)))
    return deepest


def _size(e) -> int:
    return 1 + sum(_size(a) for a in e.args) if isinstance(e, Op) else 1


def _find(body, targets: set[int], enclosing: tuple[str, ...], out: list) -> None:
    def expr(e):
        match e:
            case Load(buf, index):
                if buf in targets:
                    out.append((index, enclosing))
                for i in index:
                    if not isinstance(i, Affine):
                        expr(i)
            case Op(_, args, _):
                for a in args:
                    expr(a)

    for s in body:
        match s:
            case Let(_, e):
                expr(e)
            case Store(_, index, e):
                expr(e)
                for i in index:
                    if not isinstance(i, Affine):
                        expr(i)
            case Loop(var, _, _, b, _):
                _find(b, targets, (*enclosing, var), out)
            case Reduce(_, _, vs, b, terms, _):
                inner = (*enclosing, *(v for v, _, _ in vs))
                _find(b, targets, inner, out)
                for t in terms:
                    _find((Let("", t),), targets, inner, out)


def _injective(index, enclosing) -> bool:
    """Each element loaded once: distinct loop variables, one per enclosing loop."""
    used = []
    for i in index:
        if not isinstance(i, Affine) or i.const or len(i.terms) != 1 or i.terms[0][1] != 1:
            return False
        used.append(i.terms[0][0])
    return len(set(used)) == len(used) and set(used) == set(enclosing)


def _renumber(e, mapping: dict[int, int]):
    match e:
        case Load(buf, index):
            return Load(mapping[buf], tuple(_renumber(i, mapping) for i in index))
        case Op(name, args, attr):
            return Op(name, tuple(_renumber(a, mapping) for a in args), attr)
    return e


def _compose(a: Affine, sub: dict[str, Affine]) -> Affine:
    terms: dict[str, int] = {}
    const = a.const
    for v, c in a.terms:
        s = sub[v]
        const += c * s.const
        for w, d in s.terms:
            terms[w] = terms.get(w, 0) + c * d
    return Affine(tuple((w, d) for w, d in terms.items() if d), const)


def _substitute(e, sub: dict[str, Affine]):
    match e:
        case Load(buf, index):
            return Load(
                buf,
                tuple(
                    _compose(i, sub) if isinstance(i, Affine) else _substitute(i, sub)
                    for i in index
                ),
            )
        case Op(name, args, attr):
            return Op(name, tuple(_substitute(a, sub) for a in args), attr)
        case Index(var):
            s = sub[var]
            if s.const or len(s.terms) != 1 or s.terms[0][1] != 1:
                raise _NoFusion
            return Index(s.terms[0][0])
        case Var():
            raise _NoFusion
    return e


def _replace(s, cmap, targets, value, vars_):
    def expr(e):
        match e:
            case Load(buf, index):
                if buf in targets:
                    sub = dict(zip(vars_, index, strict=True))
                    return _substitute(value, sub)
                return Load(
                    cmap[buf], tuple(i if isinstance(i, Affine) else expr(i) for i in index)
                )
            case Op(name, args, attr):
                return Op(name, tuple(expr(a) for a in args), attr)
        return e

    match s:
        case Let(name, e):
            return Let(name, expr(e))
        case Store(buf, index, e):
            idx = tuple(i if isinstance(i, Affine) else expr(i) for i in index)
            return Store(cmap[buf], idx, expr(e))
        case Loop(_, _, _, body):  # its other fields kept: a narrowed nest's bounds (issue
            body = tuple(_replace(b, cmap, targets, value, vars_) for b in body)  # 26), which
            return replace(s, body=body)  # an emission's fusion sees (presk_kernel.epilogue)
        case Reduce(_, _, _, body, terms):  # a fold's zeros and stop (presk_kernel.narrow)
            body = tuple(_replace(b, cmap, targets, value, vars_) for b in body)
            return replace(s, body=body, terms=tuple(expr(t) for t in terms))
    raise TypeError(f"not a kernel statement: {s!r}")


def launch_counts(schedule: Schedule) -> tuple[int, int]:
    """(launches with fusion, launches without)."""
    return len(fuse(schedule)[0].launches), len(schedule.launches)


def unfused_launches(fused: Schedule) -> int:
    """The launches a fused schedule makes without fusion: a fused kernel's steps, one each."""
    return sum(len(lc.kernel.steps) or 1 for lc in fused.launches)


__all__ = ["Const", "Group", "fuse", "launch_counts", "merge", "unfused_launches"]
