"""Row fusion at emission (issue 26): the kernels that sweep the same rows — a row's folds
and the elementwise steps before, between and after them — become one kernel whose row
loop holds every fold and statement in order, each row read once while it is in cache.

A LayerNorm was five launches (mean; x − μ; the variance's fold and its square root; the
quotient; γ·x̂ + β), each streaming the whole activation through memory; its adjoint as
many. A group here is a run of laid-out launches (`row_groups`):

- each a nest whose outer parallel loops are the group's row loops — the same extents,
  r of them, where r is the depth of the parallel nest of a member that folds below it
  (a fold over the row's inner axis) — with the rest of its nest, its folds, lets, stores
  and inner loops, as its row body; no GEMM statement, two-pass softmax, serial loop or
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
own left fold.

    compiled = fuse_rows(laid)   # laid: a laid-out schedule (presk_kernel.layout.lay_out)
"""

from __future__ import annotations

from dataclasses import replace

from presk_kernel.calls import fused_body, with_calls
from presk_kernel.fuse import _folds_fma
from presk_kernel.ir import (
    Affine,
    Arg,
    Buffer,
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
    plain,
)
from presk_kernel.layout import apply_layout, default_layout

ROW_BYTES = 1 << 16  # the most of one buffer a fused row touches (64 KiB: L2 keeps a strip)
AHEAD = 4  # launches a member may be moved past to the seed (ones it does not touch)


def fuse_rows(schedule: Schedule) -> Schedule:
    """`schedule` (laid out) with each group of row kernels (`row_groups`) one kernel at
    its seed's place; the host's calls a fusion crosses inlined, as
    `presk_kernel.fuse` does. Unchanged where no group forms."""
    groups = row_groups(schedule)
    if not groups:
        return schedule
    launches: list[Launch | None] = list(schedule.launches)
    merges: list[tuple[int, int]] = []
    for seed, group in groups:
        for i in group:
            launches[i] = None
            if i != seed:
                merges.append((i, seed))
        launches[seed] = fuse_group([schedule.launches[i] for i in group])
    at = [i for i, lc in enumerate(launches) if lc is not None]
    out = replace(schedule, launches=tuple(launches[i] for i in at))
    if schedule.body is not None:
        out = with_calls(out, fused_body(schedule.body, merges, at))
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
    return loops, body


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


class _Member:
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
        for buf, index, store in _accesses(plain(k.body)):
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
    from presk_kernel.ir import elements

    size = {"f64": 8, "i64": 8, "f32": 4, "bf16": 2, "bool": 1, "i8": 1}[b.dtype]
    return elements(b.axes[r:]) * size


def _accesses(body):
    """(buffer, index, is a store) of every load and store under `body`."""

    def expr(e):
        match e:
            case Load(buf, index):
                yield buf, index, False
                for i in index:
                    if not isinstance(i, Affine):
                        yield from expr(i)
            case Op(_, args, _):
                for a in args:
                    yield from expr(a)

    for s in body:
        match s:
            case Let(_, e):
                yield from expr(e)
            case Store(buf, index, e):
                yield buf, index, True
                for i in index:
                    if not isinstance(i, Affine):
                        yield from expr(i)
                yield from expr(e)
            case Loop():
                yield from _accesses(s.body)
            case Reduce():
                yield from _accesses(s.body)
                for t in s.terms:
                    yield from expr(t)
                if s.resume is not None:
                    yield from expr(s.resume)


def _member(lc: Launch, extents: tuple[int, ...]) -> _Member | None:
    nest = _row_nest(lc)
    if nest is None:
        return None
    loops, _ = nest
    r = len(extents)
    if tuple(lp.extent for lp in loops[:r]) != extents or len(loops) < r:
        return None
    m = _Member(lc, loops, r)
    return m if m.row_bytes <= ROW_BYTES else None


def _compatible(group: list[_Member], m: _Member) -> bool:
    """Whether `m` joins `group`: every buffer shared with a write, row-local on both
    sides, under one view."""
    for g in group:
        for buf in g.touched & m.touched:
            if buf in g.written or buf in m.written:
                if not (g.local.get(buf) and m.local.get(buf)):
                    return False
                if g.views[buf] != m.views[buf]:
                    return False
    return True


def _independent(a: Launch, m: _Member) -> bool:
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
            while 0 <= j < len(launches) and len(skipped) <= AHEAD:
                m = None if j in taken else _member(launches[j], extents)
                if m is not None and _compatible(members, m):
                    if all(_independent(a, m) for a in skipped):
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


def fuse_group(group: list[Launch]) -> Launch:
    """The launches of a group (`row_groups`) as one: the row loops of the first around
    each one's row body in order, its names renamed apart, its buffers renumbered (each
    host buffer once: an input where no member writes it, else an output)."""
    nests = [_row_nest(lc) for lc in group]
    r = min(len(loops) for (loops, body) in nests if _folds(body))  # the folding members' depth
    written: set[int] = set()
    for lc in group:
        n_in = len(lc.kernel.inputs)
        written.update(a.buf for a in lc.args[n_in:])
    ins: list[tuple[Arg, Buffer]] = []
    outs: list[tuple[Arg, Buffer]] = []
    for lc in group:
        for b, a in zip(lc.kernel.buffers, lc.args, strict=True):
            side = outs if a.buf in written else ins
            if not any(x == a and y.dtype == b.dtype and y.axes == b.axes for x, y in side):
                side.append((a, b))
    args = [a for a, _ in ins + outs]
    bufs = [Buffer(n, b.dtype, b.axes) for n, (_, b) in enumerate(ins + outs)]
    key = {(a, b.dtype, b.axes): n for n, (a, b) in enumerate(ins + outs)}
    outer = nests[0][0][:r]
    used = {lp.var for lp in outer}
    body: list = []
    for lc, (loops, inner) in zip(group, nests, strict=True):
        k = lc.kernel
        numbers = {b.id: key[(a, b.dtype, b.axes)] for b, a in zip(k.buffers, lc.args, strict=True)}
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
        body.extend(_stmt(s, names, numbers) for s in rest)
    nest = tuple(body)
    for lp in reversed(outer):
        nest = (replace(lp, body=nest),)
    steps = tuple(s for lc in group for s in (lc.kernel.steps or (lc.kernel.site,)))
    last = group[-1].kernel
    k = Kernel(
        f"rows of {len(group)} kernels",
        last.site,
        tuple(bufs[: len(ins)]),
        tuple(bufs[len(ins) :]),
        nest,
        last.compute,
        steps=steps,
    )
    threads = max(lc.kernel.layout.threads for lc in group)
    return Launch(apply_layout(k, default_layout(k, threads)), tuple(args))


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
