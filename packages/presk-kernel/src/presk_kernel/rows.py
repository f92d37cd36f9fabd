"""Row fusion at emission (issue 26): the kernels that sweep the same rows — a row's folds
and the elementwise steps before, between and after them — become one kernel whose row
loop holds every fold and statement in order, each row read once while it is in cache.

A LayerNorm was five launches (mean; x − μ; the variance's fold and its square root; the
quotient; γ·x̂ + β), each streaming the whole activation through memory; its adjoint as
many. A group here is a run of laid-out launches (`row_groups`):

- each a nest whose outer parallel loops are the group's row loops — the same extents,
  r of them, where r is the depth of the parallel nest of a member that folds below it
  (a fold over the row's inner axis) — with the rest of its nest, its folds, lets, stores
  and inner loops, as its row body; each fold along its buffers' rows (its variable in
  their last index, stride 1: a `sum_to` down the columns is another axis, and stays
  apart, measured slower fused); no GEMM statement, two-pass softmax, serial loop or
  triangular row loop, nor a contraction (an fma fold: the generated GEMM's, or its
  register tiles'); those keep their own forms;
- every buffer that two members touch, one of them writing it, accessed at its own row
  only (its first r indices the row loops' variables, its shape the same in both), so
  that a row's statements depend only on the same row's: the fused row loop runs member
  after member inside one row, which is the order of each row's values before;
- a launch between members that the members it separates from the seed (the first
  launch found that folds a row) do not touch (they neither read what it writes nor
  write what it touches) stays where it was; the fused kernel runs at the seed's place;
- a row of at most ROW_BYTES per buffer touched (a row that would not stay in cache
  through the members is left to its own launches: the same bits either way).

The fused kernel's body is the row loops around each member's row body in order, its
names kept apart, its buffers the members' (a temporary stored by one member and loaded
by the next in the same row is still stored: the backward reads the forward's x − μ).
Each statement computes what it computed, with the same operations in the same type;
every fold is the same left fold over the same terms in the same order: the same bits
(DESIGN §11). The fused kernel is laid out by `default_layout` at its members' threads:
lanes across rows written as strips (presk_kernel.strips), each fold still its row's
own left fold. It runs at emission, after the GEMMs' epilogues (presk_kernel.passes
.emitted), followed by the PSK-Kernel verifier (`row fusion`).

    compiled = fuse_rows(laid)   # laid: a laid-out schedule (presk_kernel.layout.lay_out)
"""

from __future__ import annotations

from dataclasses import replace

from presk_kernel.calls import fused_body, with_calls
from presk_kernel.fuse import CHEAP, PASSES, TRANSCENDENTAL, _every_op, _folds_fma, _size
from presk_kernel.ir import (
    SCALAR_TABLE,
    Affine,
    Arg,
    Buffer,
    Const,
    For,
    GemmStmt,
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
    Tile,
    TwoPass,
    Var,
    accesses,
    elements,
    plain,
)
from presk_kernel.layout import apply_layout, default_layout
from presk_kernel.spec import verified

ROW_BYTES = 1 << 16  # the most of one buffer a fused row touches (64 KiB: L2 keeps a strip)
AHEAD = 4  # launches a member may be moved past to the seed (ones it does not touch)


def fuse_rows(schedule: Schedule) -> Schedule:
    """`schedule` (laid out) with each group of row kernels (`row_groups`) one kernel at
    its seed's place; the host's calls a fusion crosses inlined, as
    `presk_kernel.fuse` does. Unchanged where no group forms."""
    groups = row_groups(schedule)
    if not groups:  # PRESK_VERIFY=1: the verifier after row fusion
        return verified(schedule, "row fusion")
    merges = [(i, seed) for seed, group in groups for i in group if i != seed]
    gone = {i for i, _ in merges}
    at = [i for i in range(len(schedule.launches)) if i not in gone]
    body = None if schedule.body is None else fused_body(schedule.body, merges, at)
    bound: dict[int, set[int]] = {}  # host buffer -> the launches that bind it
    for i, lc in enumerate(schedule.launches):
        for a in lc.args:
            bound.setdefault(a.buf, set()).add(i)
    # the entry's buffers and those a call still passes (a frame holds them) stay
    held = set(schedule.inputs) | set(schedule.outputs) | _call_buffers(body)
    fused = []
    for seed, group in groups:
        inside = {b for b, on in bound.items() if on <= set(group) and b not in held}
        fused.append((seed, group, fuse_group([schedule.launches[i] for i in group], inside)))
    return verified(fused_schedule(schedule, fused), "row fusion")


def fused_schedule(schedule: Schedule, fused: list[tuple[int, list[int], Launch]]) -> Schedule:
    """`schedule` with each group of launches (`fused`: the position it runs at, its
    launches' positions, the launch that runs them) one launch at that position; the
    host's calls a fusion crosses inlined, as `presk_kernel.fuse` does."""
    merges = [(i, at) for at, group, _ in fused for i in group if i != at]
    gone = {i for i, _ in merges}
    kept = [i for i in range(len(schedule.launches)) if i not in gone]
    body = None if schedule.body is None else fused_body(schedule.body, merges, kept)
    launches = list(schedule.launches)
    for at, _, launch in fused:
        launches[at] = launch
    out = replace(schedule, launches=tuple(launches[i] for i in kept))
    return out if body is None else with_calls(out, body)


def _call_buffers(call) -> set[int]:
    """The host buffers the calls under the entry's pass or return (a frame holds them)."""
    if call is None:
        return set()
    out: set[int] = set()
    for item in call.body:
        if not isinstance(item, int):
            out |= {a.buf for a in item.args + item.results} | _call_buffers(item)
    return out


# ---- which launches form a group -----------------------------------------------------


def _row_nest(lc: Launch) -> tuple[list[Loop], tuple] | None:
    """The outer parallel loops of a launch's nest and the body below them, or None when
    the launch keeps its own form (a GEMM statement, a two-pass softmax, a serial loop)."""
    k = lc.kernel
    if k.layout.gemm is not None or k.layout.passes or k.layout.kblock:
        return None
    if _laid_special(k.body):
        return None
    loops: list[Loop] = []
    body = plain(k.body)
    while len(body) == 1 and isinstance(body[0], Loop):
        lp = body[0]
        if lp.serial or lp.start is not None or lp.stop is not None:
            return None
        loops.append(lp)
        body = lp.body
    if not loops or _serial_inside(body) or _folds_fma(body):
        return None  # a contraction is the generated GEMM's (or its register tiles')
    if not _along_rows(body):
        return None  # a fold down the columns (a sum_to over rows): another axis
    return loops, body


def _along_rows(body) -> bool:
    """Whether each fold of `body` runs along its buffers' rows: every load in its terms
    whose index reads the fold's variable reads it in the last index alone, with stride 1
    (the contiguous elements of a row), never in another."""
    for s in body:
        if isinstance(s, Loop) and not _along_rows(s.body):
            return False
        if not isinstance(s, Reduce):
            continue
        fold = {v for v, _, _ in s.vars}
        for _, index, _ in accesses((*s.body, *(Let("", t) for t in s.terms))):
            for n, i in enumerate(index):
                if not isinstance(i, Affine):
                    continue
                got = {v: c for v, c in i.terms if v in fold}
                if got and (n != len(index) - 1 or list(got.values()) != [1] or len(fold) > 1):
                    return False
        if not _along_rows(s.body):
            return False
    return True


def _laid_special(body) -> bool:
    for s in body:
        match s:
            case GemmStmt() | TwoPass():
                return True
            case Tile() | For() | Loop():
                if _laid_special(s.body):
                    return True
    return False


def _serial_inside(body) -> bool:
    for s in body:
        if isinstance(s, Loop) and (s.serial or _serial_inside(s.body)):
            return True
        if isinstance(s, Reduce) and _serial_inside(s.body):
            return True
    return False


def _folds(body) -> bool:
    return any(isinstance(s, Reduce) or (isinstance(s, Loop) and _folds(s.body)) for s in body)


class Member:
    """A launch seen as a row kernel at `r` row loops: each host buffer it touches, its
    accesses (row-local or not) and whether it writes it."""

    def __init__(self, lc: Launch, loops: list[Loop], r: int) -> None:
        self.lc, self.loops, self.r = lc, loops, r
        k = lc.kernel
        row = tuple(Affine.var(lp.var) for lp in loops[:r])
        self.local: dict[int, bool] = {}  # host buffer -> every access at its own row
        self.written: set[int] = set()
        self.read: set[int] = set()
        self.views: dict[int, tuple] = {}  # host buffer -> (offset, dtype, shape)
        extents = tuple(lp.extent for lp in loops[:r])
        for b, a in zip(k.buffers, lc.args, strict=True):
            view = (a.offset, b.dtype, b.shape)
            if self.views.setdefault(a.buf, view) != view:
                self.local[a.buf] = False  # read under two shapes: never shared
            if b.shape[:r] != extents:
                self.local[a.buf] = False
        n_in = len(k.inputs)
        for buf, index, store in accesses(plain(k.body)):
            host = lc.args[buf].buf
            (self.written if store else self.read).add(host)
            ok = tuple(index[:r]) == row
            self.local[host] = self.local.get(host, True) and ok
        self.written.update(a.buf for a in lc.args[n_in:])
        self.touched = self.read | self.written
        self.row_bytes = max(
            (_row_bytes(b, r) for b in k.buffers if b.shape[:r] == extents), default=0
        )


def _row_bytes(b: Buffer, r: int) -> int:
    """The bytes of one row of `b` (its axes past the first r)."""
    size = {"f64": 8, "i64": 8, "f32": 4, "bf16": 2, "bool": 1, "i8": 1}[b.dtype]
    return elements(b.axes[r:]) * size


def _member(lc: Launch, extents: tuple[int, ...]) -> Member | None:
    nest = _row_nest(lc)
    if nest is None:
        return None
    loops, _ = nest
    r = len(extents)
    if tuple(lp.extent for lp in loops[:r]) != extents or len(loops) < r:
        return None
    m = Member(lc, loops, r)
    return m if m.row_bytes <= ROW_BYTES else None


def compatible(group: list[Member], m: Member) -> bool:
    """Whether `m` joins `group`: its arithmetic the group's (a mixed realization's f32
    kernel beside an f64 one keeps its own: the fused kernel computes in one type), every
    buffer shared with a write row-local on both sides, under one view."""
    if any(g.lc.kernel.compute != m.lc.kernel.compute for g in group):
        return False
    for g in group:
        for buf in g.touched & m.touched:
            if buf in g.written or buf in m.written:
                if not (g.local.get(buf) and m.local.get(buf)):
                    return False
                if g.views[buf] != m.views[buf]:
                    return False
    return True


def independent(a: Launch, m: Member) -> bool:
    """Whether `m` may move up past the launch `a`: it neither reads what `a` writes nor
    writes what `a` touches."""
    n_in = len(a.kernel.inputs)
    reads = {x.buf for x in a.args[:n_in]}
    writes = {x.buf for x in a.args[n_in:]}
    return not (m.read & writes or m.written & (reads | writes))


def row_groups(schedule: Schedule) -> list[tuple[int, list[int]]]:
    """The groups of launches that `fuse_rows` fuses, each (its seed, its positions in
    order): around each launch that folds below its parallel nest (a row's fold, the
    seed), the launches before it and after it that sweep the same rows (the module's
    rules), each moved to the seed's place past at most AHEAD launches it does not touch
    (they stay where they were); groups of one are none."""
    launches = schedule.launches
    taken: set[int] = set()
    groups: list[tuple[int, list[int]]] = []
    for i, lc in enumerate(launches):
        if i in taken:
            continue
        nest = _row_nest(lc)
        if nest is None or not _folds(nest[1]):
            continue
        extents = tuple(lp.extent for lp in nest[0])
        first = _member(lc, extents)
        if first is None:
            continue
        members = [first]
        at = [i]
        for step in (-1, 1):  # the producers before it, then the consumers after it
            skipped: list[Launch] = []
            j = i + step
            while 0 <= j < len(launches) and len(skipped) <= AHEAD and j not in taken:
                m = _member(launches[j], extents)  # (a group's launch has moved: stop)
                if m is not None and compatible(members, m):
                    if all(independent(a, m) for a in skipped):
                        members.insert(0 if step < 0 else len(members), m)
                        at.insert(0 if step < 0 else len(at), j)
                        j += step
                        continue
                skipped.append(launches[j])
                j += step
        if len(at) > 1:
            groups.append((i, at))
            taken.update(at)
    return groups


# ---- one kernel of a group ------------------------------------------------------------


def merge_members(group: list[Launch], nests: list, r: int):
    """The launches of a group over the same `r` outer loops (`nests`: each one's plain
    loops and the body inside them) merged: (inputs, outputs, the first's r loops, each
    one's statements below its r loops, the names used), the inputs and outputs (Arg,
    Buffer) pairs, each host buffer once under each view (an input where no member writes
    it, else an output); in the statements, the r loops' variables are the first's, every
    other name renamed apart, every buffer numbered by its place in inputs + outputs."""
    written: set[int] = set()
    for lc in group:
        n_in = len(lc.kernel.inputs)
        written.update(a.buf for a in lc.args[n_in:])
    ins: list[tuple[Arg, Buffer]] = []
    outs: list[tuple[Arg, Buffer]] = []
    for lc in group:
        for b, a in zip(lc.kernel.buffers, lc.args, strict=True):
            side = outs if a.buf in written else ins
            if not any(x == a and y.dtype == b.dtype and y.shape == b.shape for x, y in side):
                side.append((a, b))  # one buffer whatever its axes' names
    key = {(a, b.dtype, b.shape): n for n, (a, b) in enumerate(ins + outs)}
    outer = nests[0][0][:r]
    used = {lp.var for lp in outer}
    bodies: list[tuple] = []
    for lc, (loops, inner) in zip(group, nests, strict=True):
        k = lc.kernel
        numbers = {
            b.id: key[(a, b.dtype, b.shape)] for b, a in zip(k.buffers, lc.args, strict=True)
        }
        names = {lp.var: o.var for lp, o in zip(loops[:r], outer, strict=True)}
        for n in sorted(_names(loops[r:]) | _names(inner)):
            fresh, c = n, 1
            while fresh in used:
                fresh, c = f"{n}_{c}", c + 1
            names[n] = fresh
            used.add(fresh)
        rest = inner
        for lp in reversed(loops[r:]):
            rest = (replace(lp, body=rest),)
        bodies.append(tuple(_stmt(s, names, numbers) for s in rest))
    return ins, outs, outer, bodies, used


def fuse_group(group: list[Launch], inside: set[int] = frozenset()) -> Launch:
    """The launches of a group (`row_groups`) as one: the row loops of the first around
    each one's row body in order, its names renamed apart, its buffers renumbered (each
    host buffer once: an input where no member writes it, else an output). A temporary
    of `inside` (host buffers no launch but the group's binds, nor the entry or a call
    holds) is no buffer of it where the row body can keep it (`_kept_in_rows`)."""
    nests = [_row_nest(lc) for lc in group]
    r = min(len(loops) for (loops, body) in nests if _folds(body))  # the folding members' depth
    ins, outs, outer, bodies, used = merge_members(group, nests, r)
    args = [a for a, _ in ins + outs]
    bufs = [Buffer(n, b.dtype, b.axes) for n, (_, b) in enumerate(ins + outs)]
    key = {(a, b.dtype, b.shape): n for n, (a, b) in enumerate(ins + outs)}
    body = [s for rest in bodies for s in rest]
    last = group[-1].kernel
    alone = {a.buf for a, _ in outs if sum(x.buf == a.buf for x, _ in ins + outs) == 1}
    temps = {  # a temporary bound once, under one view (no other buffer of it to miss)
        key[(a, b.dtype, b.shape)] for a, b in outs if a.buf in inside & alone and a.offset == 0
    }
    row = tuple(Affine.var(lp.var) for lp in outer)
    body, gone = _kept_in_rows(tuple(body), temps, bufs, row, last.compute, used)
    keep = [n for n in range(len(bufs)) if n not in gone]
    numbers = {n: m for m, n in enumerate(keep)}
    nest = tuple(_stmt(st, {}, numbers) for st in body)
    for lp in reversed(outer):
        nest = (replace(lp, body=nest),)
    steps = tuple(s for lc in group for s in (lc.kernel.steps or (lc.kernel.site,)))
    bufs = [replace(bufs[n], id=numbers[n]) for n in keep]
    args = [args[n] for n in keep]
    n_in = sum(1 for n in keep if n < len(ins))
    k = Kernel(
        f"rows of {len(group)} kernels",
        last.site,
        tuple(bufs[:n_in]),
        tuple(bufs[n_in:]),
        nest,
        last.compute,
        steps=steps,
    )
    threads = max(lc.kernel.layout.threads for lc in group)
    return Launch(apply_layout(k, default_layout(k, threads)), tuple(args))


def _kept_in_rows(
    body: tuple, temps: set[int], bufs: list[Buffer], row: tuple, compute: str, used: set[str]
) -> tuple[tuple, set[int]]:
    """The row body with each temporary of `temps` (kernel buffers read and written by its
    statements only) no longer stored where its value can stay in the row: a row's value
    (`%t[row] = e`, a real of the compute type) a `let` its loads read; an element of the
    row stored by a loop of its own (`for j { %t[row, j] = e }`, e cheap: CHEAP operations,
    none a transcendental, its loads of buffers no later statement stores) computed again
    where it is loaded, at that index. The same operations on the same values, in the
    same type: the same bits. Returns the body and the buffers no longer in it."""
    gone: set[int] = set()
    for t in sorted(temps):
        b = bufs[t]
        if b.dtype != compute or compute not in ("f32", "f64"):
            continue
        stores = [n for n, st in enumerate(body) if t in _stored(st)]
        if len(stores) != 1:
            continue
        (at,) = stores
        st = body[at]
        if any(t in _loaded(x) for x in body[: at + 1]):
            continue
        later = body[at + 1 :]
        sites = [idx for idx, _ in _load_sites(later, t)]
        if any(tuple(i[: len(row)]) != row for i in sites):
            continue
        if isinstance(st, Store) and st.index == row and _real(st.expr, bufs, body[:at]):
            name = _fresh(f"t{t}", used)
            value = Var(name)
            new = _with_loads(later, t, lambda idx, value=value: value)
            body = (*body[:at], Let(name, st.expr), *new)
            gone.add(t)
            continue
        if not (isinstance(st, Loop) and len(st.body) == 1 and isinstance(st.body[0], Store)):
            continue
        inner = st.body[0]
        if st.start is not None or st.stop is not None or inner.index != (*row, Affine.var(st.var)):
            continue
        e = inner.expr
        if _size(e) > CHEAP or _every_op(e) & TRANSCENDENTAL or len(sites) > PASSES:
            continue
        if any(len(i) != len(row) + 1 or not isinstance(i[-1], Affine) for i in sites):
            continue
        if _loaded_bufs(e) & set().union(set(), *(_stored(x) for x in later)):
            continue

        def again(idx, e=e, v=st.var):
            return _at(e, v, idx[-1])

        try:
            new = _with_loads(later, t, again)
        except _NoKeep:
            continue
        body = (*body[:at], *new)
        gone.add(t)
    return body, gone


def _fresh(name: str, used: set[str]) -> str:
    fresh, c = name, 1
    while fresh in used:
        fresh, c = f"{name}_{c}", c + 1
    used.add(fresh)
    return fresh


def _stored(st) -> set[int]:
    return {buf for buf, _, store in accesses((st,)) if store}


def _loaded(st) -> set[int]:
    return {buf for buf, _, store in accesses((st,)) if not store}


def _loaded_bufs(e) -> set[int]:
    return _loaded(Let("", e))


def _load_sites(body, buf: int) -> list:
    return [(index, None) for b, index, store in accesses(body) if b == buf and not store]


def _real(e, bufs: list[Buffer], before) -> bool:
    """Whether `e` is a real (of the compute type, as its store would have held it): its
    operation's result a real (SCALAR_TABLE), or of its operands' kind with a real
    operand; a real constant, a load of a real buffer, a real fold's accumulator or a
    real `let` of `before`."""
    match e:
        case Const(_, dtype):
            return dtype in ("f32", "f64")
        case Load(buf, _):
            return bufs[buf].dtype in ("f32", "f64", "bf16")
        case Var(name):
            for st in reversed(before):
                if isinstance(st, Reduce) and st.acc == name:
                    return st.dtype in ("f32", "f64")
                if isinstance(st, Let) and st.name == name:
                    return _real(st.expr, bufs, before)
            return False
        case Op(op, args, _):
            kind = SCALAR_TABLE[op].result
            if kind == "real":
                return True
            return kind == "same" and any(_real(a, bufs, before) for a in args)
    return False


def _put(a: Affine, var: str, index: Affine) -> Affine:
    """The affine map `a` with `var` replaced by `index`."""
    terms: dict[str, int] = {}
    const = a.const
    for v, c in a.terms:
        if v != var:
            terms[v] = terms.get(v, 0) + c
            continue
        const += c * index.const
        for w, d in index.terms:
            terms[w] = terms.get(w, 0) + c * d
    return Affine(tuple((w, d) for w, d in terms.items() if d), const)


class _NoKeep(Exception):
    pass


def _at(e, var: str, index: Affine):
    """`e` at the point where `var` is `index` (its loads' indices and its `index var`)."""
    match e:
        case Load(buf, idx):
            return Load(
                buf,
                tuple(
                    _put(i, var, index) if isinstance(i, Affine) else _at(i, var, index)
                    for i in idx
                ),
            )
        case Op(op, args, attr):
            return Op(op, tuple(_at(a, var, index) for a in args), attr)
        case Index(v) if v == var:
            if index.const or len(index.terms) != 1 or index.terms[0][1] != 1:
                raise _NoKeep  # an index that is no loop variable
            return Index(index.terms[0][0])
    return e


def _with_loads(body, buf: int, value) -> tuple:
    """`body` with each load of `buf` the expression `value(index)`."""

    def expr(e):
        match e:
            case Load(b, index):
                if b == buf:
                    return value(index)
                return Load(b, tuple(i if isinstance(i, Affine) else expr(i) for i in index))
            case Op(op, args, attr):
                return Op(op, tuple(expr(a) for a in args), attr)
        return e

    def stmt(s):
        match s:
            case Let(name, e):
                return Let(name, expr(e))
            case Store(b, index, e):
                return Store(
                    b, tuple(i if isinstance(i, Affine) else expr(i) for i in index), expr(e)
                )
            case Loop():
                return replace(s, body=tuple(stmt(x) for x in s.body))
            case Reduce():
                return replace(
                    s,
                    body=tuple(stmt(x) for x in s.body),
                    terms=tuple(expr(t) for t in s.terms),
                    resume=None if s.resume is None else expr(s.resume),
                )
        raise TypeError(f"not a kernel statement: {s!r}")

    return tuple(stmt(s) for s in body)


def _names(body) -> set[str]:
    out: set[str] = set()
    for s in body:
        match s:
            case Let(name, _):
                out.add(name)
            case Loop():
                out.add(s.var)
                out |= _names(s.body)
            case Reduce():
                out.add(s.acc)
                out |= {v for v, _, _ in s.vars}
                out |= _names(s.body)
    return out


def _affine(a: Affine | None, names: dict[str, str]) -> Affine | None:
    if a is None:
        return None
    return Affine(tuple((names.get(v, v), c) for v, c in a.terms), a.const)


def _expr(e, names: dict[str, str], numbers: dict[int, int]):
    match e:
        case Load(buf, index):
            return Load(numbers[buf], _index(index, names, numbers))
        case Op(op, args, attr):
            return Op(op, tuple(_expr(a, names, numbers) for a in args), attr)
        case Var(name):
            return Var(names.get(name, name))
        case Index(var):
            return Index(names.get(var, var))
    return e


def _index(index: tuple, names: dict[str, str], numbers: dict[int, int]) -> tuple:
    return tuple(
        _affine(i, names) if isinstance(i, Affine) else _expr(i, names, numbers) for i in index
    )


def renumbered(s, numbers: dict[int, int]):
    """A plain statement with its buffers renumbered (`numbers`: old -> new)."""
    return _stmt(s, {}, numbers)


def _stmt(s, names: dict[str, str], numbers: dict[int, int]):
    match s:
        case Let(name, e):
            return Let(names.get(name, name), _expr(e, names, numbers))
        case Store(buf, index, e):
            return Store(numbers[buf], _index(index, names, numbers), _expr(e, names, numbers))
        case Loop():
            return replace(
                s,
                var=names.get(s.var, s.var),
                body=tuple(_stmt(b, names, numbers) for b in s.body),
                start=_affine(s.start, names),
                stop=_affine(s.stop, names),
            )
        case Reduce():
            return replace(
                s,
                acc=names.get(s.acc, s.acc),
                vars=tuple((names.get(v, v), a, n) for v, a, n in s.vars),
                body=tuple(_stmt(b, names, numbers) for b in s.body),
                terms=tuple(_expr(t, names, numbers) for t in s.terms),
                stop=_affine(s.stop, names),
                zeros=_affine(s.zeros, names),
                resume=None if s.resume is None else _expr(s.resume, names, numbers),
            )
    raise TypeError(f"not a kernel statement: {s!r}")


__all__ = ["ROW_BYTES", "fuse_group", "fuse_rows", "row_groups"]
