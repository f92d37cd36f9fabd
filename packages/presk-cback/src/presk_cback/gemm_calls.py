"""The functions a GEMM statement's call names (issue 26, presk_kernel.epilogue): its
epilogue, run on each finished MR×NR tile of C, and its packers, which write the panels of
an operand the kernel computes (a dequantised weight, a norm's rows). Each is C written by
the kernel's emitter (`emit.KernelC`, passed as `kc`) into its `pre` lines, its buffers, `err`
and the batch loops' values read from the context array the call passes (`context`)."""

from __future__ import annotations

from presk_kernel.contract import c_store, row_vars
from presk_kernel.ir import Gemm, Kernel, Loop, plain

from presk_cback.emit import CTYPE, _name  # emit imports this module when it writes a call


def packer_function(kc, g: Gemm, which: int) -> str:
    """The C function the GEMM calls to pack a panel of operand `which` (0: A, 1: B)
    that the kernel computes (`Gemm.prologue`: a dequantised weight, a norm's scaled
    rows): `w` lines (A's rows, B's columns) from line p0 of this call, `n` of them
    real, the rest zero, over kc terms of the fold from k0, at dst[k·w + line] — each
    element the term as the nest computes it (the same C expression, so the same bits).
    Written into `pre`; buffers, `err` and the batch values come through `ctx`."""
    fn = f"{kc.fname}_e{sum(1 for x in kc.pre if x.startswith('static inline void'))}"
    k, ct = kc.k, CTYPE[kc.k.compute]
    saved, kc.lines = kc.lines, []
    kc.lines.append(
        f"static inline void {fn}(void *ctx, int64_t p0, int64_t k0, int64_t n, int64_t kc,"
        f" int64_t w, {ct} *restrict dst) {{"
    )
    context(kc, g)
    extents = _extents(k)
    code, have = kc.expr(g.prologue[which])
    value = f"dst[kk * w + l] = {kc.cast(code, have, k.compute)};"
    kv = f"const int64_t {_name(g.k)} = k0 + kk;"
    if which == 0:  # A: a row's indices once, its line along k in lanes, then placed
        kc.emit(f"{ct} line[kc];", 1)
        kc.emit("for (int64_t l = 0; l < n; l++) {", 1)
        kc.emit("const int64_t r = p0 + l;", 2)
        for v, step in row_vars(g):
            kc.emit(f"const int64_t {_name(v)} = r / {step} % {extents[v]};", 2)
        if kc.lanes:
            kc.emit("#pragma omp simd", 0)
        kc.emit("for (int64_t kk = 0; kk < kc; kk++) {", 2)
        kc.emit(kv, 3)
        kc.emit(f"line[kk] = {kc.cast(code, have, k.compute)};", 3)
        kc.emit("}", 2)
        kc.emit("for (int64_t kk = 0; kk < kc; kk++) dst[kk * w + l] = line[kk];", 2)
        kc.emit("}", 1)
        kc.emit("for (int64_t kk = 0; kk < kc; kk++)", 1)
        kc.emit("for (int64_t l = n; l < w; l++) dst[kk * w + l] = 0;", 2)
    else:  # B: a line of k across the panel's columns (where B's rows lie), in lanes
        kc.emit("for (int64_t kk = 0; kk < kc; kk++) {", 1)
        kc.emit(kv, 2)
        if kc.lanes:
            kc.emit("#pragma omp simd", 0)
        kc.emit(f"for (int64_t {_name(g.n)} = p0; {_name(g.n)} < p0 + n; {_name(g.n)}++) {{", 2)
        kc.emit(f"const int64_t l = {_name(g.n)} - p0;", 3)
        kc.emit(value, 3)
        kc.emit("}", 2)
        kc.emit("for (int64_t l = n; l < w; l++) dst[kk * w + l] = 0;", 2)
        kc.emit("}", 1)
    kc.lines.append("}")
    kc.pre.extend(kc.lines)
    kc.lines = saved
    return fn


def context(kc, g: Gemm) -> None:
    """A GEMM callback's first lines: the kernel's buffers, `err` and the batch loops'
    values, from its context array."""
    k = kc.k
    kc.emit("void *const *x = ctx;", 1)
    for i, b in enumerate(k.buffers):
        const = "const " if i < len(k.inputs) else ""
        kc.emit(f"{const}{CTYPE[b.dtype]} *const b{b.id} = x[{b.id}];", 1)
        kc.emit(f"(void)b{b.id};", 1)
    n = len(k.buffers)
    kc.emit(f"int *const err = x[{n}];", 1)
    kc.emit(f"const int64_t *const bv = x[{n + 1}];", 1)
    kc.emit("(void)err;", 1)
    kc.emit("(void)bv;", 1)
    for at, (v, _) in enumerate(g.batch):
        kc.emit(f"const int64_t {_name(v)} = bv[{at}];", 1)


def epilogue_function(kc, g: Gemm) -> str:
    """The C function the GEMM calls on each MR × NR tile of C (rows i0…, columns j0…,
    in this call) once its sums are finished: each element's epilogue, as the nest runs
    it after its fold, its accumulator the finished sum C holds. Written into `pre`;
    its buffers, `err` and the batch loops' values come through `ctx`."""
    fn = f"{kc.fname}_e{sum(1 for x in kc.pre if x.startswith('static inline void'))}"
    k, ct = kc.k, CTYPE[kc.k.compute]
    saved, kc.lines = kc.lines, []
    head = f"static inline void {fn}(void *ctx, int64_t i0, int64_t j0, int64_t mr, int64_t nr) {{"
    kc.lines.append(head)
    context(kc, g)
    extents = _extents(k)
    kc.emit("for (int64_t r = i0; r < i0 + mr; r++) {", 1)
    for v, step in row_vars(g):
        kc.emit(f"const int64_t {_name(v)} = r / {step} % {extents[v]};", 2)
    nv = _name(g.n)
    store = c_store(g)
    kc.types[g.acc] = k.compute
    head = [f"const {ct} {_name(g.acc)} = b{store.buf}[{kc.offset(store.buf, store.index)}];"]
    if kc.lanes:
        kc.lane_loop(nv, "j0", "j0 + nr", g.epilogue, 2, head)
    else:
        kc.emit(f"for (int64_t {nv} = j0; {nv} < j0 + nr; {nv}++) {{", 2)
        kc.emit(head[0], 3)
        kc.block(g.epilogue, 3)
        kc.emit("}", 2)
    kc.emit("}", 1)
    kc.lines.append("}")
    kc.pre.extend(kc.lines)
    kc.lines = saved
    return fn


def _extents(k: Kernel) -> dict[str, int]:
    """Each loop variable's extent in the kernel's plain nest."""
    out: dict[str, int] = {}

    def walk(body) -> None:
        for s in body:
            if isinstance(s, Loop):
                out[s.var] = s.extent
                walk(s.body)

    walk(plain(k.body))
    return out
