"""A GEMM's epilogues at emission (issue 26): a laid-out schedule whose generated GEMMs take
their elementwise consumers — the bias, the residual add, the scores' division by √hd — as
the epilogue each finished tile of C goes through (presk_cback.gemm's `presk_gemm_epi_*`).

It runs after everything that names or plans nests (`presk plan`, `presk autotune`, the
SCoP export, `presk dump --stage kernel`, the C export: they see the fused schedule of
`presk_kernel.fuse`, the spec's nests and launch counts), on the laid-out schedule a native
entry compiles (presk_cback.native.NativeEntry, untimed: a timed entry clocks the plan's
launches). The consumer's own layout is dropped: it becomes statements the GEMM runs on each
element once its sum is finished, in the producer's GEMM statement (`Gemm.epilogue`).

    compiled = gemm_epilogues(laid)   # laid: presk_kernel.layout.lay_out's schedule

Bits: the unfused schedule's (docs/native.md, "A contraction's epilogue"): C holds each
element's whole fold after the GEMM's last block of k, the value the unfused nest stored to
its temporary; the epilogue reads it back and applies the consumer's operations once, in
the same type and order.
"""

from __future__ import annotations

from dataclasses import replace

from presk_kernel.calls import fused_body, with_calls
from presk_kernel.contract import as_gemm, contraction
from presk_kernel.fuse import (
    _consumer,
    _index,
    _producer,
    fused_into,
    merge,
    merge_epilogue,
    producer_store,
)
from presk_kernel.ir import Launch, Schedule, plain
from presk_kernel.layout import PACK_AT, apply_layout

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
    for i, p in enumerate(launches):  # an elementwise producer into a GEMM's packed operand
        unlaid = _unlaid(p)
        j = _consumer(unlaid, i, keep, reads, writes)
        fused = None if j is None else with_operand(unlaid, launches[j])
        if fused is None:
            continue
        fused_into(launches, i, j, fused, reads, writes, merges)
    for j, c in enumerate(launches):
        if c is None:
            continue
        computed = with_prologue(c)
        if computed is not None:
            _index(c, j, reads, writes, add=False)
            _index(computed, j, reads, writes, add=True)
            launches[j] = c = computed
        unlaid = _unlaid(c)
        i, shared = _producer(unlaid, j, keep, reads, writes, launches), False
        if i is None:
            i, shared = _shared_producer(unlaid, j, keep, reads, writes, launches), True
        if i is None:
            continue
        fused = with_epilogue(launches[i], unlaid, keep=shared)
        if fused is None:
            continue
        fused_into(launches, i, j, fused, reads, writes, merges)
    if not merges:
        return replace(schedule, launches=tuple(launches))
    at = [i for i, lc in enumerate(launches) if lc is not None]
    out = replace(schedule, launches=tuple(launches[i] for i in at))
    if schedule.body is not None:
        out = with_calls(out, fused_body(schedule.body, merges, at))
    return out


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
    k = fused.kernel
    fused_gemm = contraction(k, prologues=True)
    if fused_gemm is None:  # a narrowed product (presk_kernel.narrow) takes no epilogue
        return None
    e = as_gemm(fused_gemm)
    same = (e.rows, e.cols, e.depth, e.batch) == (g.rows, g.cols, g.depth, g.batch)
    if not (same and e.epilogue and set(p.kernel.layout.pack) == {g.a, g.b}):
        return None
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


def _unlaid(lc: Launch) -> Launch:
    return replace(lc, kernel=replace(lc.kernel, body=plain(lc.kernel.body)))
