"""An entry's host side in C: `presk_entry_io(arena, io)` launching the kernels that
presk_cback.emit writes, in order, over one arena, and the translation units that hold them.

The entry's inputs and outputs are at the addresses `io` gives (`io_buffers`: the caller's
own arrays, read and written where they lie), its temporaries at fixed offsets of one arena
(presk_cback.arena: every buffer 64-byte aligned, temporaries whose lifetimes do not overlap
in the same space). It zeroes the buffers that could show the kernel interpreter's memory
starting at zero (at the start, or a shared temporary just before its first launch), and
returns 1 when a gather's index was out of range. `presk_entry(arena)` calls it with the
inputs' and outputs' own spaces in the arena. Two signatures for every entry: a process
declares them once. `presk_entry_timed` (`entry_units(timed=…)`) clocks each launch; the
host helpers are a training step's finite check and the gradient norm's exact square sum.
"""

from __future__ import annotations

import math
import re

from presk_kernel import libm
from presk_kernel.ir import Schedule
from presk_kernel.narrow import mask_inputs
from presk_kernel.written import used

from presk_cback import gemm
from presk_cback.arena import ITEMSIZE, plan
from presk_cback.emit import CTYPE, PRELUDE, KernelC
from presk_cback.toolchain import Toolchain, find_toolchain

ENTRY_CDEF = """int presk_entry(char *arena);
int presk_entry_io(char *arena, char *const *io);
int64_t presk_nonfinite(const char *p, int64_t n, int f64);
void presk_square_sum(const char *p, int64_t n, int f64, int64_t *limbs);"""
SQUARE_LIMBS = 68  # 32-bit limbs of presk_square_sum's fixed point: 2⁻¹⁰⁷⁴ to past 2¹⁰²⁴
HOST_HELPERS = r"""
/* the first position of p[0..n) (doubles, or floats when f64 is 0) that is not finite
 * (a NaN or an infinity), or -1: a training step's check of its loss and gradient */
int64_t presk_nonfinite(const char *p, int64_t n, int f64) {
    /* an exponent of all ones, read as integers: a loop the compiler vectorizes */
    for (int64_t i = 0; i < n; i += 8192) {
        int64_t e = i + 8192 < n ? i + 8192 : n, bad = 0;
        if (f64) {
            const uint64_t *x = (const uint64_t *)p, top = UINT64_C(0x7FF) << 52;
#pragma omp simd reduction(+ : bad)
            for (int64_t j = i; j < e; j++) bad += (x[j] & top) == top;
        } else {
            const uint32_t *x = (const uint32_t *)p, top = UINT32_C(0xFF) << 23;
#pragma omp simd reduction(+ : bad)
            for (int64_t j = i; j < e; j++) bad += (x[j] & top) == top;
        }
        if (bad)
            for (int64_t j = i; j < e; j++) {
                int hit = f64 ? (((const uint64_t *)p)[j] >> 52 & 0x7FF) == 0x7FF
                              : (((const uint32_t *)p)[j] >> 23 & 0xFF) == 0xFF;
                if (hit) return j;
            }
    }
    return -1;
}

/* the exact sum of the squares of p[0..n) (each square rounded to a double, as numpy's
 * np.square(x, dtype=float64)), added into limbs[0..67): limb i counts units of
 * 2^(32i - 1074); limbs[67] counts the squares that overflowed to infinity; the values
 * finite (presk_nonfinite), n below 2^31 a call. A square m * 2^(at - 1074) (m < 2^53) is
 * added into bin `at` of one of 4 sets (element j's: j mod 4, so that consecutive terms of
 * one exponent do not wait on each other's store), whole chunks of 4096 terms at a time
 * (a bin then holds 1024 terms at most: below 2^63), then the bins a chunk touched are
 * folded into the limbs (their sum below 2^65, shifted by at mod 32: below 2^96, three
 * limbs); each limb takes less than 2^39 a chunk, 2^57 a call */
void presk_square_sum(const char *p, int64_t n, int f64, int64_t *limbs) {
    static const uint64_t mask = (UINT64_C(1) << 52) - 1;
    uint64_t bins[4][2048];
    memset(bins, 0, sizeof bins);
    for (int64_t i = 0; i < n; i += 4096) {
        const int64_t end = i + 4096 < n ? i + 4096 : n;
        uint64_t lo = 2048, hi = 0;
#define PRESK_SQUARES(T) \
        for (int64_t j = i; j < end; j++) { \
            const double x = (double)((const T *)p)[j], s = x * x; \
            uint64_t u; \
            memcpy(&u, &s, 8); \
            const uint64_t e = (u >> 52) & 0x7FF; \
            if (e == 0x7FF) { /* a square past the doubles: counted in the last limb */ \
                limbs[67] += 1; \
                continue; \
            } \
            const uint64_t at = e ? e - 1 : 0; /* s = m * 2^(at - 1074) */ \
            bins[j & 3][at] += (u & mask) | ((uint64_t)(e != 0) << 52); \
            lo = at < lo ? at : lo; \
            hi = at > hi ? at : hi; \
        }
        if (f64) {
            PRESK_SQUARES(double)
        } else {
            PRESK_SQUARES(float)
        }
#undef PRESK_SQUARES
        for (uint64_t b = lo; b <= hi; b++) { /* none when the chunk had no finite square */
            unsigned __int128 v = (unsigned __int128)bins[0][b] + bins[1][b];
            v += (unsigned __int128)bins[2][b] + bins[3][b];
            if (!v) continue;
            bins[0][b] = bins[1][b] = bins[2][b] = bins[3][b] = 0;
            v <<= b % 32;
            int64_t *l = limbs + b / 32;
            l[0] += (int64_t)(uint64_t)(v & 0xFFFFFFFFu);
            l[1] += (int64_t)(uint64_t)((v >> 32) & 0xFFFFFFFFu);
            l[2] += (int64_t)(uint64_t)(v >> 64);
        }
    }
}
"""
TIMED_CDEF = (
    "int presk_entry_timed(char *arena, double *ns);\n"
    "int presk_entry_timed_io(char *arena, char *const *io, double *ns);"
)
TIMED_PRELUDE = r"""
static double presk_clock(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}
"""
THREADS_PRELUDE = r"""
/* three clocks (ns): the monotonic one, the calling thread's CPU time, the process's (every
 * thread's) CPU time: a launch's CPU time off the calling thread is its other threads' */
static void presk_clocks(double *c) {
    static const clockid_t id[3] = {CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID,
                                    CLOCK_PROCESS_CPUTIME_ID};
    for (int i = 0; i < 3; i++) {
        struct timespec ts; clock_gettime(id[i], &ts);
        c[i] = (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
    }
}
static void presk_clocks_add(double *ns, const double *t0) {
    double t1[3]; presk_clocks(t1);
    for (int i = 0; i < 3; i++) ns[i] += t1[i] - t0[i];
}
"""


def _timed_host(calls: list[str], zero: list[str], zero_at: dict, own: str, timed) -> list[str]:
    """`presk_entry_timed[_io]`: the launches and zeroing of `presk_entry_io`, each between a
    clock's start and its add. `timed="threads"`: three clocks a launch (THREADS_PRELUDE),
    ns[3i], ns[3i + 1], ns[3i + 2] the launch's wall time, its calling thread's CPU time and
    the process's CPU time (all its threads'), the zeroing's at 3·launches; else one clock
    (TIMED_PRELUDE: the monotonic one, or `timed="cpu"` the calling thread's CPU clock),
    ns[i] the launch's, ns[launches] the zeroing's."""
    if timed == "threads":
        prelude, decl, start = THREADS_PRELUDE, "double t[3];", "presk_clocks(t);"

        def add(slot: int) -> str:
            return f"presk_clocks_add(ns + {3 * slot}, t);"
    else:
        clock = "CLOCK_THREAD_CPUTIME_ID" if timed == "cpu" else "CLOCK_MONOTONIC"
        prelude = TIMED_PRELUDE.replace("CLOCK_MONOTONIC", clock)
        decl, start = "double t;", "t = presk_clock();"

        def add(slot: int) -> str:
            return f"ns[{slot}] += presk_clock() - t;"

    z = len(calls)  # the zeroing's slot, after the launches'
    host = prelude.splitlines()
    host.append("int presk_entry_timed_io(char *arena, char *const *io, double *ns);")
    host.append("int presk_entry_timed(char *arena, double *ns) {")
    host.append(own)
    host.append("    return presk_entry_timed_io(arena, io, ns);\n}\n")
    host.append("int presk_entry_timed_io(char *arena, char *const *io, double *ns) {")
    host.append(f"    int err = 0;\n    {decl}")
    host.append(f"    {start}")
    host += [f"    {line}" for line in zero]
    host.append(f"    {add(z)}")
    for i, c in enumerate(calls):
        if zero_at.get(i):
            host.append(f"    {start} {' '.join(zero_at[i])} {add(z)}")
        host.append(f"    {start} {c} {add(i)}")
    host.append("    return err;\n}\n")
    return host


# The C size a GEMM's embedded source counts for when kernels are spread over units.
GEMM_WEIGHT = 40_000


def io_buffers(schedule: Schedule) -> tuple[int, ...]:
    """The buffers `presk_entry_io` takes from its caller, `io[j]` the address of the j-th:
    the entry's inputs then its outputs (each once, in the schedule's order), those it uses.
    `presk_entry(arena)` passes their own spaces in the arena (presk_cback.arena)."""
    live = used(schedule)
    seen: dict[int, None] = {}
    for buf in (*schedule.inputs, *schedule.outputs):
        if buf in live:
            seen.setdefault(buf)
    return tuple(seen)


def entry_source(schedule: Schedule, lanes: bool = True, toolchain: Toolchain | None = None) -> str:
    """The C of an entry as one translation unit: presk libm, the kernels, and
    `presk_entry` launching them."""
    return entry_units(schedule, lanes, toolchain, units=1)[0]


def entry_units(
    schedule: Schedule,
    lanes: bool = True,
    toolchain: Toolchain | None = None,
    units: int = 1,
    timed: bool | str = False,
) -> tuple[str, ...]:
    """The C of an entry in at most `units` translation units, compiled apart (in parallel)
    and linked into one object: the kernels spread over them by the size of their C, the
    GEMMs and the kernels that call them in the first, `presk_entry` in the last. Each unit
    has its own copy of presk libm and the prelude (static inline: only what it uses is
    compiled). `timed` adds `presk_entry_timed(arena, ns)`, which also adds each launch's
    nanoseconds (a monotonic clock around its call; `timed="cpu"`: the calling thread's CPU
    clock, which a loaded machine's other jobs do not stop) into `ns[launch]` and the
    zeroing's into `ns[launches]` (TIMED_CDEF)."""
    tc = toolchain or find_toolchain()
    arena = plan(schedule)
    offsets = arena.offsets
    byid = {b.id: b for b in schedule.buffers}
    io = io_buffers(schedule)
    slot = {buf: j for j, buf in enumerate(io)}

    def base(buf: int) -> str:  # a persistent buffer's address is the caller's (io[j])
        return f"io[{slot[buf]}]" if buf in slot else f"arena + {offsets[buf]}"

    seen: dict[str, str] = {}
    bodies: list[tuple[str, str | None, str]] = []  # (function text, gemm tag, its prototype)
    calls = []
    cols: dict[str, set[int]] = {}  # a GEMM's calls' columns, by its type
    masks = mask_inputs(schedule)
    for i, launch in enumerate(schedule.launches):
        kc = KernelC(launch.kernel, "KERNEL", lanes, masks[i])
        text = "\n".join(kc.function())
        if kc.gemm:
            cols.setdefault(kc.gemm, set()).update(kc.gemm_cols)
        if text not in seen:  # identical kernels share one function
            fname = f"presk_kernel_{len(seen)}"
            seen[text] = fname
            body = re.sub(r"\bKERNEL\b", fname, text).replace("KERNEL_e", f"{fname}_e")
            head = f"/* {launch.kernel.name} at {launch.kernel.site} */\n"
            fn = body[body.index(f"static void {fname}(") :]
            bodies.append((head + body, kc.gemm, fn[: fn.index("{")].rstrip() + ";"))
        args = []
        for buf, arg in zip(launch.kernel.buffers, launch.args, strict=True):
            ct = CTYPE[byid[arg.buf].dtype]
            assert byid[arg.buf].dtype == buf.dtype, (launch.kernel.name, arg, buf)
            args.append(f"({ct} *)({base(arg.buf)}) + {arg.offset}")
        calls.append(f"{seen[text]}({', '.join([*args, '&err'])}); /* launch {i} */")

    def memsets(bufs) -> list[str]:  # those written whole first need none
        sizes = (
            (b, math.prod(a.length for a in byid[b].axes) * ITEMSIZE[byid[b].dtype]) for b in bufs
        )
        return [f"memset({base(b)}, 0, {n});" for b, n in sizes if n]

    zero = memsets(arena.zero_first)
    zero_at = {i: memsets(bufs) for i, bufs in arena.zero_at.items()}
    n = max(1, min(units, len(bodies)))
    tags = sorted({tag for _, tag, _ in bodies if tag})
    blocks: list[list[str]] = [[] for _ in range(n)]
    weight = [0] * n
    for tag in tags:  # before the kernels that call them
        blocks[0].append(gemm.embedded_source(tag, gemm.host_blocking(tag, tc), tc, cols[tag]))
        weight[0] += GEMM_WEIGHT
    spread = bodies if n == 1 else sorted(bodies, key=lambda b: (b[1] is None, -len(b[0])))
    for text, tag, _ in spread:
        u = 0 if tag else min(range(n), key=weight.__getitem__)
        blocks[u].append(
            text if n == 1 else re.sub(r"static void (presk_kernel_\d+\()", r"void \1", text)
        )
        weight[u] += len(text)
    common = "\n".join(
        ["#include <math.h>\n#include <stdint.h>\n#include <string.h>\n", libm.header(), PRELUDE]
    )
    from presk_core.normal_c import calls_mpfr, entry_source

    if any(calls_mpfr(text) for text, _, _ in bodies):  # MPFR's Box–Muller, initializers
        common = "#include <gmp.h>\n#include <mpfr.h>\n" + common + entry_source()
    if timed:  # clock_gettime under -std=c11
        common = "#define _POSIX_C_SOURCE 199309L\n#include <time.h>\n" + common
    table = ", ".join(f"arena + {offsets[b]}" for b in io) or "arena"
    own = f"    char *const io[{max(1, len(io))}] = {{{table}}};"  # the arena's own spaces
    host = [
        "int presk_entry_io(char *arena, char *const *io);",
        "int presk_entry(char *arena) {",
        own,
        "    return presk_entry_io(arena, io);\n}\n",
        "int presk_entry_io(char *arena, char *const *io) {\n    int err = 0;",
    ]
    host += [f"    {z}" for z in zero]
    for i, c in enumerate(calls):  # a shared temporary zeroed at its first launch
        host += [f"    {z}" for z in zero_at.get(i, ())] + [f"    {c}"]
    host.append("    return err;\n}\n")
    if timed:
        host += _timed_host(calls, zero, zero_at, own, timed)
    if n > 1:
        host = [proto for _, _, proto in bodies] + host
        host = [p.replace("static void ", "void ", 1) for p in host]
    blocks[-1] += [HOST_HELPERS, *host]
    return tuple("\n".join([common, *b]) for b in blocks)
