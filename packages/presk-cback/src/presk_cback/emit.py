"""C for PSK-Kernel: each kernel a C function (`KernelC`).

A kernel's C follows its data (presk_kernel.ir) statement for statement: the `layout` pass
wrote its layout into its body (tile loops, loops with their threads — `#pragma omp
parallel for` —, lanes — `#pragma omp simd` — or strips of lanes, GEMM statements), and
the emitter renders those statements as they are, deciding nothing. None changes a bit
(DESIGN §11): the arithmetic is the kernel interpreter's, operation for
operation — numpy's type promotion written as explicit casts, folds from their first term
in increasing index, `fma` where the kernel has one, IEEE maximum and minimum, presk libm
for the transcendentals, bf16 rounded to nearest even at each store.

The entry's host function, which launches these kernels over one arena, and the translation
units that hold them are presk_cback.host's.
"""

from __future__ import annotations

import math
import re

from presk_kernel.contract import gemm_kstop, gemm_stop
from presk_kernel.ir import (
    Affine,
    Const,
    For,
    Gemm,
    GemmStmt,
    Index,
    Kernel,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Store,
    Tile,
    TwoPass,
    Var,
    subexpressions,
)
from presk_kernel.layout import applies, is_laid

from presk_cback.scalar_c import C_RULES, SUFFIX
from presk_cback.scalar_c import promote as _promote
from presk_cback.strip import Strip

PARALLEL = "#pragma omp parallel for{simd} num_threads({threads}) schedule(static)"
# A kernel written in strips along its lanes (presk_cback.strip: a `sum_to`'s columns) is
# compiled by GCC with -fpeel-loops, which -O2 leaves out: its loops over a strip's lanes run
# a few vectors each, and peeled whole they keep the strip's accumulators in registers (a
# sum_to of 16×256×192 floats: 88 → 57–67 µs; the course GPT's step 2.9–3.2 % faster at
# one thread, the same bits, its cold compile unchanged). Strips of rows (a softmax's) gain
# too, but their code grows: the forward pass compiled 30 % longer; not them (most of their
# gain is PRESK_T8's unrolled loops, b21). Clang has no such pragma. docs/native.md, "Lanes
# across folds".
PEEL = (
    "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC push_options\n"
    '#pragma GCC optimize ("peel-loops")\n#endif',
    "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC pop_options\n#endif",
)
# A cut product's repair scans the signs of a row's −0s this many columns at a time
# (`KernelC.sign_scan`: two flag arrays of this many words on the stack)
SCAN = 64
# A cut product's repair checks B's values and a panel's rows of C into flags, one word a
# column, or'ed once at the end (no reduction at every row), up to this many columns
# (`KernelC.flag_scan`)
LANE_FLAGS = 256
# A loop in threads inside serial tile loops (a softmax's rows split by batch within each
# tile of rows: 32 regions a launch): one region around the outermost tile loop, every
# thread running the tile loops and sharing the split loop's iterations in each, without a
# barrier between them (`KernelC.region`)
REGION = "#pragma omp parallel num_threads({threads})"
SHARED = "#pragma omp for{simd} schedule(static) nowait"
CTYPE = {
    "f64": "double",
    "f32": "float",
    "bf16": "uint16_t",
    "i64": "int64_t",
    "bool": "uint8_t",
    "i8": "int8_t",
}

PRELUDE = r"""
/* a hint that the line at p is read soon (a fold in blocks of a matrix's rows, each block
 * across all of its columns: the next block's lines, presk_cback.strip); no effect on a value */
#if defined(__GNUC__)
#define PRESK_PREFETCH(p) __builtin_prefetch(p)
#else
#define PRESK_PREFETCH(p) ((void)(p))
#endif
static inline float presk_bf16_load(uint16_t h) {
    uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t presk_bf16_store(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    uint16_t r = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    return f != f ? (uint16_t)0x7FC0 : r;
}
static inline float presk_bf16_round(float f) { return presk_bf16_load(presk_bf16_store(f)); }
/* IEEE maximum and minimum: NaN wins, then the larger (smaller); of equal values the bits
 * ANDed (ORed): +0 over -0 (-0 under +0), without a branch on the sign */
#define PRESK_IEEE_MINMAX(name, T, U, GT, BITOP) \
static inline T name(T a, T b) { \
    U ua, ub; memcpy(&ua, &a, sizeof a); memcpy(&ub, &b, sizeof b); ua = ua BITOP ub; \
    T eq; memcpy(&eq, &ua, sizeof eq); T out = b != b ? b : eq; out = a != a ? a : out; \
    out = GT(b, a) ? b : out; return GT(a, b) ? a : out; }
#define PRESK_GT(x, y) ((x) > (y))
#define PRESK_LT(x, y) ((x) < (y))
PRESK_IEEE_MINMAX(presk_max, double, uint64_t, PRESK_GT, &)
PRESK_IEEE_MINMAX(presk_min, double, uint64_t, PRESK_LT, |)
PRESK_IEEE_MINMAX(presk_maxf, float, uint32_t, PRESK_GT, &)
PRESK_IEEE_MINMAX(presk_minf, float, uint32_t, PRESK_LT, |)
/* the same over 8 lanes (GCC vector types: the folds of 8 rows at once, presk_cback.strip),
 * as statements `acc = max(acc, x)`: a vector wider than the target's passed to or returned
 * from a function would change the ABI (GCC's -Wpsabi) */
typedef float presk_f32x8 __attribute__((vector_size(32)));
typedef int32_t presk_i32x8 __attribute__((vector_size(32)));
typedef double presk_f64x8 __attribute__((vector_size(64)));
typedef int64_t presk_i64x8 __attribute__((vector_size(64)));
/* the same at their elements' alignment: PRESK_T8's loads of a row's next 8 terms (a memcpy
 * there became `rep movsl` for f64 on AVX2, a third of a log-softmax's time) */
typedef float presk_f32x8_u __attribute__((vector_size(32), aligned(4)));
typedef double presk_f64x8_u __attribute__((vector_size(64), aligned(8)));
#define PRESK_VSEL(m, x, y) (((m) & (x)) | (~(m) & (y)))
#define PRESK_IEEE_VSTEP(V, I, GT, BITOP, acc, x) do { \
    const V a_ = (acc), b_ = (x); I ia_ = (I)a_, ib_ = (I)b_, o_ = ia_ BITOP ib_; \
    o_ = PRESK_VSEL((I)(b_ != b_), ib_, o_); o_ = PRESK_VSEL((I)(a_ != a_), ia_, o_); \
    o_ = PRESK_VSEL((I)GT(b_, a_), ib_, o_); (acc) = (V)PRESK_VSEL((I)GT(a_, b_), ia_, o_); \
    } while (0)
#define presk_max_x8(acc, x) PRESK_IEEE_VSTEP(presk_f64x8, presk_i64x8, PRESK_GT, &, acc, x)
#define presk_min_x8(acc, x) PRESK_IEEE_VSTEP(presk_f64x8, presk_i64x8, PRESK_LT, |, acc, x)
#define presk_maxf_x8(acc, x) PRESK_IEEE_VSTEP(presk_f32x8, presk_i32x8, PRESK_GT, &, acc, x)
#define presk_minf_x8(acc, x) PRESK_IEEE_VSTEP(presk_f32x8, presk_i32x8, PRESK_LT, |, acc, x)
/* A max (min) fold's quick step: x where it is larger (smaller) than acc or they are
 * unordered or equal (MAXPS's rule: one instruction, no NaN carried), and beside it in `mag`
 * the largest |x| by its bits, above an infinity's only if a term was NaN. Where no term is
 * NaN and the result is not zero, the result is the IEEE fold's bit for bit (terms equal to
 * it have its bits), so a fold takes the quick steps, checks both after, and folds again by
 * PRESK_IEEE_VSTEP where one fails (presk_cback.strip) */
#define PRESK_QUICK_VSTEP(V, I, GT, ABS, acc, mag, x) do { \
    const V b_ = (x); const I m_ = (I)b_ & ABS; (mag) = PRESK_VSEL((I)(m_ > (mag)), m_, (mag)); \
    (acc) = (V)PRESK_VSEL((I)GT((acc), b_), (I)(acc), (I)b_); } while (0)
#define PRESK_ABS64 0x7fffffffffffffffLL
#define PRESK_INF64 0x7ff0000000000000LL
#define PRESK_ABS32 0x7fffffff
#define PRESK_INF32 0x7f800000
/* the same by the instructions themselves where the target has them (GCC writes the
 * generic form as compares and blends): MAXPS(a, b) is a > b ? a : b, MINPS a < b ? a : b */
#define PRESK_QUICK_X86(V, I, IV, FV, IMAX, FOP, ABS, acc, mag, x) do { const V b_ = (x); \
    (mag) = (I)IMAX((IV)(mag), (IV)((I)b_ & ABS)); (acc) = (V)FOP((FV)(acc), (FV)b_); } while (0)
#if defined(__AVX2__)
#include <immintrin.h>
#define PRESK_QUICK32(FOP, acc, mag, x) \
    PRESK_QUICK_X86(presk_f32x8, presk_i32x8, __m256i, __m256, _mm256_max_epi32, FOP, PRESK_ABS32, acc, mag, x)
#define presk_maxf_q8(acc, mag, x) PRESK_QUICK32(_mm256_max_ps, acc, mag, x)
#define presk_minf_q8(acc, mag, x) PRESK_QUICK32(_mm256_min_ps, acc, mag, x)
#else
#define presk_maxf_q8(acc, mag, x) PRESK_QUICK_VSTEP(presk_f32x8, presk_i32x8, PRESK_GT, PRESK_ABS32, acc, mag, x)
#define presk_minf_q8(acc, mag, x) PRESK_QUICK_VSTEP(presk_f32x8, presk_i32x8, PRESK_LT, PRESK_ABS32, acc, mag, x)
#endif
#if defined(__AVX512F__)
#define PRESK_QUICK64(FOP, acc, mag, x) \
    PRESK_QUICK_X86(presk_f64x8, presk_i64x8, __m512i, __m512d, _mm512_max_epi64, FOP, PRESK_ABS64, acc, mag, x)
#define presk_max_q8(acc, mag, x) PRESK_QUICK64(_mm512_max_pd, acc, mag, x)
#define presk_min_q8(acc, mag, x) PRESK_QUICK64(_mm512_min_pd, acc, mag, x)
#else
#define presk_max_q8(acc, mag, x) PRESK_QUICK_VSTEP(presk_f64x8, presk_i64x8, PRESK_GT, PRESK_ABS64, acc, mag, x)
#define presk_min_q8(acc, mag, x) PRESK_QUICK_VSTEP(presk_f64x8, presk_i64x8, PRESK_LT, PRESK_ABS64, acc, mag, x)
#endif
/* The 8×8 block a[0..7][v..v+7] transposed into c[0..7] (c[q] the 8 rows' terms v + q), by
 * three rounds of shuffles: a strip's folds read their next 8 steps so, not element by
 * element (presk_cback.strip); nothing is computed, the terms are only moved. Each loop is
 * unrolled whole (`-O2` does not, and its arrays r_, t_, u_ then go through memory) */
#ifdef __clang__
#define PRESK_SHUF(I, x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
#else
#define PRESK_SHUF(I, x, y, ...) __builtin_shuffle(x, y, (I){__VA_ARGS__})
#endif
#define PRESK_T8(V, I, a, v, c) do { \
    V r_[8], t_[8], u_[8]; \
    _Pragma("GCC unroll 8") for (int q_ = 0; q_ < 8; q_++) r_[q_] = *(const V##_u *)&(a)[q_][v]; \
    _Pragma("GCC unroll 4") for (int q_ = 0; q_ < 8; q_ += 2) { \
        t_[q_] = PRESK_SHUF(I, r_[q_], r_[q_ + 1], 0, 8, 1, 9, 4, 12, 5, 13); \
        t_[q_ + 1] = PRESK_SHUF(I, r_[q_], r_[q_ + 1], 2, 10, 3, 11, 6, 14, 7, 15); } \
    _Pragma("GCC unroll 2") for (int q_ = 0; q_ < 8; q_ += 4) \
    _Pragma("GCC unroll 2") for (int h_ = 0; h_ < 2; h_++) { \
        u_[q_ + 2 * h_] = PRESK_SHUF(I, t_[q_ + h_], t_[q_ + h_ + 2], 0, 1, 8, 9, 4, 5, 12, 13); \
        u_[q_ + 2 * h_ + 1] = PRESK_SHUF(I, t_[q_ + h_], t_[q_ + h_ + 2], 2, 3, 10, 11, 6, 7, 14, 15); } \
    _Pragma("GCC unroll 4") for (int q_ = 0; q_ < 4; q_++) { \
        (c)[q_] = PRESK_SHUF(I, u_[q_], u_[q_ + 4], 0, 1, 2, 3, 8, 9, 10, 11); \
        (c)[q_ + 4] = PRESK_SHUF(I, u_[q_], u_[q_ + 4], 4, 5, 6, 7, 12, 13, 14, 15); } \
    } while (0)
#define PRESK_SELECT(T, name) static inline T name(int c, T a, T b) { return c ? a : b; }
PRESK_SELECT(double, presk_select_f64)
PRESK_SELECT(float, presk_select_f32)
PRESK_SELECT(int64_t, presk_select_i64)
PRESK_SELECT(uint8_t, presk_select_bool)
static inline int64_t presk_maxi(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t presk_mini(int64_t a, int64_t b) { return a < b ? a : b; }
#define PRESK_POWI(name, T) \
static inline T name(T x, int64_t k) { \
    uint64_t n = k < 0 ? (uint64_t)(-k) : (uint64_t)k; \
    if (n == 0) return (T)1; \
    T r = x; \
    for (int b = 62 - __builtin_clzll(n); b >= 0; b--) { r = r * r; if ((n >> b) & 1u) r = r * x; } \
    return k < 0 ? (T)1 / r : r; }
PRESK_POWI(presk_powi, double)
PRESK_POWI(presk_powif, float)
/* Threefry-2x32-20 (docs/randomness.md): draw c of the key (k0, k1), y0 high */
static inline uint64_t presk_threefry(int64_t k0, int64_t k1, int64_t c) {
    static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
    const uint32_t ks[3] = {(uint32_t)k0, (uint32_t)k1, (uint32_t)k0 ^ (uint32_t)k1 ^ 0x1BD11BDAu};
    uint32_t x0 = (uint32_t)((uint64_t)c >> 32) + ks[0], x1 = (uint32_t)c + ks[1];
    for (int g = 0; g < 5; g++) {
        for (int q = 0; q < 4; q++) {
            x0 += x1;
            x1 = ((x1 << rot[g % 2][q]) | (x1 >> (32 - rot[g % 2][q]))) ^ x0;
        }
        x0 += ks[(g + 1) % 3];
        x1 += ks[(g + 2) % 3] + (uint32_t)(g + 1);
    }
    return ((uint64_t)x0 << 32) | x1;
}
static inline int64_t presk_key_word(int64_t k0, int64_t k1, int64_t c, int64_t w) {
    uint64_t y = presk_threefry(k0, k1, c);
    return (int64_t)(w == 0 ? y >> 32 : y & 0xFFFFFFFFu);
}
static inline double presk_uniform(int64_t k0, int64_t k1, int64_t c) {
    return (double)(presk_threefry(k0, k1, c) >> 11) * 0x1p-53;
}
static inline uint8_t presk_bernoulli(int64_t k0, int64_t k1, int64_t c, double p) {
    return presk_uniform(k0, k1, c) < p;
}
static inline int64_t presk_checked(int64_t i, int64_t n, int *err) {
    if (i < 0 || i >= n) { __atomic_store_n(err, 1, __ATOMIC_RELAXED); return 0; }
    return i;
}
"""


def _name(s: str) -> str:
    return "v_" + re.sub(r"[^A-Za-z0-9_]", "_", s)


def affine_c(a: Affine) -> str:
    """An affine map of loop variables as C (`v_i2 + 1`)."""
    terms = [f"{c}*{_name(v)}" if c != 1 else _name(v) for v, c in a.terms if c]
    if a.const or not terms:
        terms.append(str(a.const))
    return " + ".join(terms)


def loop_range(extent: int, start: Affine | None, stop: Affine | None) -> tuple[str, str]:
    """A loop's first and end index in C: [0, extent), or a triangular nest's
    [max(0, start), min(extent, stop))."""
    lo = "0" if start is None else f"presk_maxi(0, {affine_c(start)})"
    hi = str(extent) if stop is None else f"presk_mini({extent}, {affine_c(stop)})"
    return lo, hi


def fold_identity(op: str, t: str) -> str:
    """The C of a fold's value over no term (or its start before a narrowed prefix): its
    operation's identity in its type."""
    if t == "i64":
        return _const((1 << 63) - 1 if op == "min" else 0, t)
    return _const({"add": 0, "fma": 0, "max": -math.inf, "min": math.inf}[op], t)


def _const(value, dtype: str) -> str:
    if dtype == "bool":
        return "1" if value else "0"
    if dtype == "i64":
        return f"INT64_C({int(value)})"
    v = float(value)
    ct = CTYPE[dtype]
    if math.isnan(v):
        return f"(({ct})NAN)"
    if math.isinf(v):
        return f"(({ct})INFINITY)" if v > 0 else f"(-({ct})INFINITY)"
    text = f"{v.hex()}{SUFFIX.get(dtype, '')}"
    return f"({text})" if text.startswith("-") else text


def one_region(k: Kernel, s: Tile):
    """The loop in threads under the serial tile loop `s` of `k` when one region opens
    around `s` instead of one around each of its iterations (REGION, SHARED): every
    statement from `s` down to it a tile loop or a plain loop (no lanes, no strips) whose
    body is that one statement, so each thread runs the same loops (the same worksharing
    loops, in the same order) and nothing else; its iterations, and those of the loops
    outside it, independent (no fold in k-blocks resumes what another tile stored), so no
    barrier is needed between two of its runs. None otherwise."""
    if s.threads > 1 or k.layout.kblock:
        return None
    node = s
    while len(node.body) == 1:
        node = node.body[0]
        if isinstance(node, Tile | For) and node.threads > 1:
            return node
        if not isinstance(node, Tile | For) or (
            isinstance(node, For) and (node.lanes or node.strip)
        ):
            return None
    return None


class EmitError(Exception):
    """A kernel the emitter cannot write (a bug of the lowering or of the emitter: the
    caller reports it as internal)."""


def _erfc_blocks(body) -> tuple[list, list] | None:
    """Where a loop in lanes computes erfc (a GELU's epilogue: presk libm's costliest
    function, whose large branch a vector computes for every lane): the Lets its arguments
    need and the erfc operations, for `KernelC.lane_loop` to compute them apart, over
    blocks, through presk_erfcf_n; None where the body is not Lets and Stores, holds no
    erfc, or an argument could not be computed before the body's statements run (it reads
    a buffer the body stores, a value a Let defines after the first erfc, another erfc)."""
    if not all(isinstance(s, (Let, Store)) for s in body):
        return None
    ops: list = []
    first = None
    for n, s in enumerate(body):
        for e in subexpressions(s.expr):
            if isinstance(e, Op) and e.op == "erfc" and e not in ops:
                ops.append(e)
                first = n if first is None else first
    if not ops:
        return None
    stored = {s.buf for s in body if isinstance(s, Store)}
    later = {s.name for s in body[first:] if isinstance(s, Let)}  # (a Let's name is its own)
    need: set = set()
    for op in ops:
        for e in subexpressions(op.args[0]):
            if (isinstance(e, Op) and e.op == "erfc") or (isinstance(e, Load) and e.buf in stored):
                return None
            if isinstance(e, Var):
                need.add(e.name)
    kept: list = []
    for s in reversed(body[:first]):  # the Lets the arguments need, transitively
        if isinstance(s, Let) and s.name in need:
            kept.append(s)
            for e in subexpressions(s.expr):
                if isinstance(e, Load) and e.buf in stored:
                    return None
                if isinstance(e, Var):
                    need.add(e.name)
    if need & later:
        return None
    return kept[::-1], ops


def _gathers(nodes):
    """(buffer, axis, index expression) of each gather index that `nodes` (statements and
    expressions) compute whenever they run, outermost first: not in a loop or fold that may
    run no step, a select's branch or the right of `and` and `or` (scalar_c takes a branch
    with a gather's check only where it is taken)."""
    for n in nodes:
        match n:
            case Load(buf, index) | Store(buf, index, _):
                for ax, i in enumerate(index):
                    if not isinstance(i, Affine):
                        yield buf, ax, i
                        yield from _gathers((i,))
                if isinstance(n, Store):
                    yield from _gathers((n.expr,))
            case Op(op, args, _):
                yield from _gathers(args[:1] if op in ("select", "and", "or") else args)
            case Let(_, expr):
                yield from _gathers((expr,))
            case Loop(extent=extent, body=body, start=None, stop=None) if extent > 0:
                yield from _gathers(body)
            case Reduce(body=body, terms=terms) if _whole(n):
                yield from _gathers(body)
                yield from _gathers(terms)


def _whole(r: Reduce) -> bool:
    """A fold that runs every one of its steps, at least one."""
    plain = r.block is None and r.stop is None and r.zeros is None
    return plain and math.prod(n for _, _, n in r.vars) > 0


def _bound_and_stored(nodes) -> tuple[set, set] | None:
    """The variables `nodes` bind (loops', folds', lets') and the buffers they store to;
    None where they hold a statement of another kind (a laid-out one: nothing is hoisted)."""
    bound, stored = set(), set()
    for n in nodes:
        match n:
            case Let(name, _):
                bound.add(name)
            case Store(buf, _, _):
                stored.add(buf)
            case Loop(var, body=body) | Reduce(acc=var, body=body):
                inner = _bound_and_stored(body)
                if inner is None:
                    return None
                bound |= {var, *(v for v, _, _ in getattr(n, "vars", ())), *inner[0]}
                stored |= inner[1]
            case Load() | Op() | Const() | Var() | Index():  # an expression binds nothing
                pass
            case _:
                return None
    return bound, stored


def _invariant(e, inner: set, stored: set) -> bool:
    """An index expression that no variable of `inner` moves and no store of `stored`
    changes: constants, outer indices and loads of such indices from unwritten buffers."""
    match e:
        case Const():
            return True
        case Index(var):
            return var not in inner
        case Affine(terms):
            return not any(v in inner for v, _ in terms)
        case Load(buf, index):
            return buf not in stored and all(_invariant(i, inner, stored) for i in index)
        case Op(_, args, _):
            return all(_invariant(a, inner, stored) for a in args)
    return False  # a let's value (it may be a lane's)


def _strips(body) -> bool:
    """Whether a laid-out body holds a loop written in strips of lanes along it
    (`For.strip`, not across rows: a `sum_to`'s columns)."""
    for st in body:
        if isinstance(st, For) and st.strip and not st.rows:
            return True
        if _strips(getattr(st, "body", ())):
            return True
    return False


class KernelC:
    """The C of one kernel, written into `lines`."""

    def __init__(self, k: Kernel, fname: str, lanes: bool, masks=None) -> None:
        self.k, self.fname, self.lanes = k, fname, lanes
        self.masks = masks or {}  # input -> the structured mask it holds (`mask_read`)
        self.types: dict[str, str] = {}
        self.lines: list[str] = []
        self.gemm: str | None = None  # the GEMM's type tag, when the kernel calls one
        self.gemm_cols: set[int] = set()  # the columns of its calls (not banded)
        self.laned: set[str] = set()  # scalars held per lane in a strip (`v_x[lj]`)
        self.kept: dict = {}  # expressions already computed: expression -> (C, type)
        self.pre: list[str] = []  # functions the kernel's calls name (a GEMM's epilogues)
        self.shared = None  # the loop in threads whose region `region` opened around it
        self.gathers: dict = {}  # (index expression, length) -> its checked value's C name
        self.hoisted = 0  # the gathers' values written so far (`hoist`)

    # ---- expressions ---------------------------------------------------------------------

    def cast(self, code: str, have: str, want: str) -> str:
        if have == want:
            return code
        if want == "bool":
            return f"({code} != 0)"
        return f"(({CTYPE[want]})({code}))"

    def offset(self, buf: int, index: tuple) -> str:
        b = self.k.buffers[buf]
        if len(index) != len(b.axes):
            raise EmitError(
                f"`{self.k.name}` at {self.k.site}: %{buf} has {len(b.axes)} axes, indexed "
                f"by {len(index)}: C reads one element"
            )
        parts, stride = [], 1
        for ax in reversed(range(len(b.axes))):
            i = index[ax]
            if isinstance(i, Affine):
                code = affine_c(i)
            elif (i, b.axes[ax].length) in self.gathers:  # checked before the loop (`hoist`)
                code = self.gathers[i, b.axes[ax].length]
            else:
                c, t = self.expr(i)
                code = f"presk_checked({self.cast(c, t, 'i64')}, {b.axes[ax].length}, err)"
            parts.append(f"({code})" if stride == 1 else f"{stride}*({code})")
            stride *= b.axes[ax].length
        return " + ".join(reversed(parts)) or "0"

    def expr(self, e) -> tuple[str, str]:
        if self.kept and e in self.kept:  # a strip's kept value (presk_cback.strip)
            return self.kept[e]
        match e:
            case Const(value, dtype):
                return _const(value, dtype), dtype
            case Load(buf, index) if buf in self.masks:
                return self.mask_read(buf, index)
            case Load(buf, index):
                dt = self.k.buffers[buf].dtype
                code = f"b{buf}[{self.offset(buf, index)}]"
                if dt == "bf16":
                    return f"presk_bf16_load({code})", "f32"
                return code, dt
            case Var(name):
                lane = "[lj]" if name in self.laned else ""
                return _name(name) + lane, self.types[name]
            case Index(var):
                return _name(var), "i64"
            case Op(op, args, attr):
                return self.op(op, [self.expr(a) for a in args], attr)
        raise TypeError(f"not a kernel expression: {e!r}")

    def mask_read(self, buf: int, index: tuple) -> tuple[str, str]:
        """A structured mask's element (presk_kernel.narrow.mask_inputs) as the comparison
        it holds, `j < i + plus` (plus 0 or 1: `j < i` or `j <= i`): the same truth value.
        A loop's selects on the mask then vectorize at their values' width (16 f32 lanes
        on AVX-512), where its bytes' load made 64, whose row tails narrower vectors and
        scalar steps finished."""
        m = self.masks[buf]
        j, i = index[m.along], index[m.by]
        if not (isinstance(j, Affine) and isinstance(i, Affine)):
            return f"b{buf}[{self.offset(buf, index)}]", "bool"
        return f"({affine_c(j)} {'<=' if m.plus else '<'} {affine_c(i)})", "bool"

    def op(self, op: str, a: list[tuple[str, str]], attr) -> tuple[str, str]:
        rule = C_RULES.get(op)
        if rule is None:
            raise TypeError(f"no C for the scalar operation `{op}`")
        return rule(self, op, a, attr)

    def hoist(self, nodes, var: str, depth: int) -> dict:
        """Before a loop over `var` of at least one iteration (plain, in lanes, a strip's
        row or fold): each gather index of `nodes` (statements and expressions) that does
        not move with the loop, checked once into a const; the `gathers` to set while the
        loop is written (and put back after). GCC vectorizes no loop whose body may store to
        `err`: an embedding's row read in a log-softmax's lanes ran its exponentials one at a
        time (the corpus bigram's step, 47.5 ms before, 20.3 after). The caller's loop runs,
        so no index is checked that was not checked before, and a bad one sets `err` as
        before."""
        found = dict(self.gathers)
        seen = _bound_and_stored(nodes)
        if seen is None:
            return found
        inner, stored = seen[0] | {var}, seen[1]
        for b, ax, i in _gathers(nodes):
            length = self.k.buffers[b].axes[ax].length
            if (i, length) in found or not _invariant(i, inner, stored):
                continue
            c, t = self.expr(i)
            name = f"v_g{self.hoisted}"  # (a kernel's every name its own: no shadowing)
            self.hoisted += 1
            self.emit(
                f"const int64_t {name} = presk_checked({self.cast(c, t, 'i64')}, {length}, err);",
                depth,
            )
            found[i, length] = name
        return found

    # ---- statements ----------------------------------------------------------------------

    def emit(self, line: str, depth: int) -> None:
        self.lines.append("    " * depth + line)

    def block(self, body, depth: int) -> None:
        for s in body:
            self.stmt(s, depth)

    def stmt(self, s, depth: int) -> None:
        match s:
            case Let(name, expr):
                code, t = self.expr(expr)
                self.types[name] = t
                self.emit(f"const {CTYPE[t]} {_name(name)} = {code};", depth)
            case Store(buf, index, expr):
                code, t = self.expr(expr)
                dt = self.k.buffers[buf].dtype
                if dt == "bf16":
                    value = f"presk_bf16_store({self.cast(code, t, 'f32')})"
                else:
                    value = self.cast(code, t, dt)
                self.emit(f"b{buf}[{self.offset(buf, index)}] = {value};", depth)
            case Loop(var, _, extent, body, _, start, stop):
                v = _name(var)
                lo, hi = loop_range(extent, start, stop)
                outer = self.gathers
                if start is None and stop is None and extent > 0:
                    self.gathers = self.hoist(body, var, depth)
                self.emit(f"for (int64_t {v} = {lo}; {v} < {hi}; {v}++) {{", depth)
                self.block(body, depth + 1)
                self.emit("}", depth)
                self.gathers = outer
            case Reduce():
                self.reduce(s, depth)
            case Tile() | For() | GemmStmt() | TwoPass():
                self.laid(s, depth)
            case _:
                raise TypeError(f"not a kernel statement: {s!r}")

    def reduce(self, r: Reduce, depth: int) -> None:
        acc, t = _name(r.acc), r.dtype
        self.types[r.acc] = t
        count = math.prod(n for _, _, n in r.vars)
        if count == 0:
            self.emit(f"{CTYPE[t]} {acc} = {fold_identity(r.op, t)};", depth)
            return
        self.emit(f"{CTYPE[t]} {acc};", depth)
        if r.block is not None:  # one block of the fold, resumed from the partial sum stored
            ((v, _, n),) = r.vars
            lo, v = _name(r.block), _name(v)
            hi = f"({lo} + {r.size} < {n} ? {lo} + {r.size} : {n})"
            self.emit(f"if ({lo} == 0) {{", depth)
            self.emit(f"const int64_t {v} = 0;", depth + 1)
            self.fold_step(r, depth + 1, first=True)
            self.emit("} else {", depth)
            code, have = self.expr(r.resume)
            self.emit(f"{acc} = {self.cast(code, have, t)};", depth + 1)
            self.emit("}", depth)
            self.emit(f"for (int64_t {v} = {lo} == 0 ? 1 : {lo}; {v} < {hi}; {v}++) {{", depth)
            self.fold_step(r, depth + 1, first=False)
            self.emit("}", depth)
            return
        if r.stop is not None:  # a narrowed fold: its prefix [0, min(n, stop)), peeled
            ((v, _, n),) = r.vars
            v, hi = _name(v), f"{acc}_n"
            self.emit(f"const int64_t {hi} = {loop_range(n, None, r.stop)[1]};", depth)
            self.emit(f"{acc} = {fold_identity(r.op, t)};", depth)
            self.emit(f"if ({hi} > 0) {{ const int64_t {v} = 0;", depth)
            self.fold_step(r, depth + 1, first=True)
            self.emit("}", depth)
            self.emit(f"for (int64_t {v} = 1; {v} < {hi}; {v}++) {{", depth)
            self.fold_step(r, depth + 1, first=False)
            self.emit("}", depth)
            return
        if len(r.vars) == 1:  # the first term peeled: no flag in the loop
            (v, _, n) = r.vars[0]
            self.emit(f"{{ const int64_t {_name(v)} = 0;", depth)
            self.fold_step(r, depth + 1, first=True)
            self.emit("}", depth)
            self.emit(f"for (int64_t {_name(v)} = 1; {_name(v)} < {n}; {_name(v)}++) {{", depth)
            self.fold_step(r, depth + 1, first=False)
            self.emit("}", depth)
            return
        self.emit(f"int {acc}_started = 0;", depth)
        for i, (v, _, n) in enumerate(r.vars):
            self.emit(f"for (int64_t {_name(v)} = 0; {_name(v)} < {n}; {_name(v)}++) {{", depth + i)
        inner = depth + len(r.vars)
        self.emit(f"if ({acc}_started) {{", inner)
        self.fold_step(r, inner + 1, first=False)
        self.emit("} else {", inner)
        self.fold_step(r, inner + 1, first=True)
        self.emit(f"{acc}_started = 1;", inner + 1)
        self.emit("}", inner)
        for i in reversed(range(len(r.vars))):
            self.emit("}", depth + i)

    def fold_step(self, r: Reduce, depth: int, first: bool, acc: str | None = None) -> None:
        acc, t = acc or _name(r.acc), r.dtype
        self.block(r.body, depth)
        terms = [self.expr(x) for x in r.terms]
        if r.op == "fma":
            (x, tx), (y, ty) = terms
            if first:
                p = _promote(tx, ty)
                value = self.cast(f"({self.cast(x, tx, p)} * {self.cast(y, ty, p)})", p, t)
            else:
                f = "fma" + SUFFIX.get(t, "")
                value = f"{f}({self.cast(x, tx, t)}, {self.cast(y, ty, t)}, {acc})"
        else:
            ((x, tx),) = terms
            x = self.cast(x, tx, t)
            if first:
                value = x
            elif r.op == "add":
                value = f"{acc} + {x}"
            else:
                fn = f"presk_{r.op}" + {"f64": "", "f32": "f", "i64": "i"}[t]
                value = f"{fn}({acc}, {x})"
        self.emit(f"{acc} = {value};", depth)

    # ---- the laid-out statements (the `layout` pass's) -------------------------------------

    def laid(self, s, depth: int) -> None:
        """A statement of a laid-out nest, as the layout pass wrote it: a tile loop, a loop
        with its threads, lanes or strips, or a GEMM statement."""
        match s:
            case Tile(var, _, extent, size, body, threads):
                inner = self.region(s) if self.shared is None else None
                if inner is not None:
                    self.emit(REGION.format(threads=inner.threads), 0)
                    self.emit("{", depth)
                    self.shared = inner
                elif threads > 1:
                    self.emit(self.threaded(s, threads, ""), 0)
                v = _name(var)
                self.emit(f"for (int64_t {v} = 0; {v} < {extent}; {v} += {size}) {{", depth)
                self.block(body, depth + 1)
                self.emit("}", depth)
                if inner is not None:
                    self.emit("}", depth)
                    self.shared = None
            case For(var, _, extent, body, tile, size, threads, lanes, strip, rows):
                v = _name(var)
                lo, hi = "0", str(extent)
                if tile is not None:
                    lo = _name(tile)
                    hi = f"({lo} + {size} < {extent} ? {lo} + {size} : {extent})"
                if strip and self.lanes:  # strips of lanes across the folds of its body
                    par = self.threaded(s, threads, "") if threads > 1 else None
                    Strip(self, v, strip, rows, var).emit(lo, hi, depth, body, par)
                    return
                simd = self.lanes and lanes > 0
                outer = self.gathers
                if simd and extent > 0 and threads == 1:  # (a region's pragma must come first)
                    self.gathers = self.hoist(body, var, depth)
                if threads > 1:  # one loop in threads and in lanes
                    self.emit(self.threaded(s, threads, " simd" if simd else ""), 0)
                elif simd:
                    self.lane_loop(v, lo, hi, body, depth)
                    self.gathers = outer
                    return
                self.emit(f"for (int64_t {v} = {lo}; {v} < {hi}; {v}++) {{", depth)
                self.block(body, depth + 1)
                self.emit("}", depth)
                self.gathers = outer
            case GemmStmt(gemm, threads, nest, batched, bound):
                kstop = gemm_kstop(gemm, nest)
                stop = gemm_stop(gemm, nest)
                self.gemm_call(gemm, threads, depth, stop, batched, kstop, bound)
            case TwoPass(body, _):
                self.block(body, depth)

    def lane_loop(self, v: str, lo: str, hi: str, body, depth: int, head=()) -> None:
        """A loop in lanes over `v` in [lo, hi): each iteration the `head` lines, then
        `body`. A body that computes erfc in f32 (`_erfc_blocks`) runs over blocks of
        PRESK_ERFCF_BLOCK: a first loop stores each erfc's argument (and the Lets it needs),
        presk_erfcf_n computes the block's erfc, the body then reads them. The same
        expressions for each element (the Lets computed twice: the same bits), the same
        function for each argument (presk_erfcf_n is presk_erfcf's bits): only what a
        vector's lanes compute together changes."""

        def loop(start: str, stop: str, d: int, stmts, after=lambda: ()) -> None:
            self.emit("#pragma omp simd", 0)
            self.emit(f"for (int64_t {v} = {start}; {v} < {stop}; {v}++) {{", d)
            for line in head:
                self.emit(line, d + 1)
            self.block(stmts, d + 1)
            for line in after():  # (rendered once the statements have typed their names)
                self.emit(line, d + 1)
            self.emit("}", d)

        found = _erfc_blocks(body) if self.k.compute == "f32" else None
        if found is None:
            loop(lo, hi, depth, body)
            return
        lets, ops = found
        n = self.hoisted  # (a kernel's every name its own)
        self.hoisted += 1
        c, m, d = f"v_c{n}", f"v_m{n}", depth + 1
        block = "PRESK_ERFCF_BLOCK"
        self.emit(f"for (int64_t {c} = {lo}; {c} < {hi}; {c} += {block}) {{", depth)
        self.emit(f"const int64_t {m} = {hi} - {c} < {block} ? {hi} - {c} : {block};", d)
        arrays = [(f"v_eu{n}_{k}", f"v_ey{n}_{k}") for k in range(len(ops))]
        for u, y in arrays:
            self.emit(f"_Alignas(64) float {u}[{block}], {y}[{block}];", d)

        def arguments():
            for op, (u, _) in zip(ops, arrays, strict=True):
                code, t = self.expr(op.args[0])
                yield f"{u}[{v} - {c}] = {self.cast(code, t, 'f32')};"

        loop(c, f"{c} + {m}", d, lets, arguments)
        for u, y in arrays:
            self.emit(f"presk_erfcf_n({u}, {y}, {m});", d)
        saved = self.kept
        results = {op: (f"{y}[{v} - {c}]", "f32") for op, (_, y) in zip(ops, arrays, strict=True)}
        self.kept = {**saved, **results}
        loop(c, f"{c} + {m}", d, body)
        self.kept = saved
        self.emit("}", depth)

    def threaded(self, s, threads: int, simd: str) -> str:
        """The pragma of a loop in threads: its own region, or its share of the one `region`
        opened around the tile loops outside it."""
        if s is self.shared:
            return SHARED.format(simd=simd)
        return PARALLEL.format(threads=threads, simd=simd)

    def region(self, s: Tile):
        return one_region(self.k, s)

    def gemm_call(
        self,
        g: Gemm,
        threads,
        depth: int,
        stop: int | None = None,
        batched: bool = False,
        kstop: tuple[int, bool, bool] | None = None,
        bound: int = 0,
    ) -> None:
        """A GEMM statement (over the operands it packs) as calls of the generated GEMM, one
        per point of its batch loops; the same fold, so the same bits. A narrowed product
        (`stop`: row r's columns end at r + stop), or a product whose A is ±0 past row r's
        r + kstop terms, as one call of the banded driver (`band_call`). `batched`: the batch loops' points shared among the threads (one
        parallel region, collapsed), each call on one thread. `bound`: the first batch loops
        are the loops around the statement (a slice group's, presk_kernel.slices)."""
        self.gemm = self.k.compute
        if bound and (g.epilogue or g.prologue):  # its callbacks read the batch it runs
            raise EmitError(f"`{self.k.name}`: a GEMM with an epilogue inside a slice group")
        own = g.batch[bound:]
        if batched and own:
            collapse = f" collapse({len(own)})" if len(own) > 1 else ""
            self.emit(PARALLEL.format(threads=threads, simd="") + collapse, 0)
            threads = 1
        for v, extent in own:
            self.emit(
                f"for (int64_t {_name(v)} = 0; {_name(v)} < {extent}; {_name(v)}++) {{", depth
            )
            depth += 1
        batch = {v for v, _ in g.batch}

        def at(which: int) -> str:
            terms = [str(g.offsets[which])]
            terms += [f"{c}*{_name(v)}" for v, c in g.strides[which] if v in batch]
            return " + ".join(terms)

        def st(which: int, v: str) -> int:
            return g.stride(which, v)

        if stop is not None or kstop is not None:  # one banded call (and a repair)
            if g.epilogue or g.prologue:  # presk_kernel.contract gives a narrowed one neither
                raise EmitError(f"`{self.k.name}`: a narrowed GEMM with an epilogue or prologue")
            self.band_call(g, threads, depth, at(0), at(1), at(2), stop, kstop)
        else:
            self.gemm_cols.add(g.cols)
            pro = g.prologue or (None, None)
            t = CTYPE[self.gemm]
            a = f"(const {t} *)0, 0, 0" if pro[0] is not None else (
                f"b{g.a} + {at(0)}, {st(0, g.m)}, {st(0, g.k)}"
            )  # fmt: skip
            b = f"(const {t} *)0, 0, 0" if pro[1] is not None else (
                f"b{g.b} + {at(1)}, {st(1, g.k)}, {st(1, g.n)}"
            )  # fmt: skip
            call = f"({g.rows}, {g.cols}, {g.depth}, {a}, {b}, b{g.c} + {at(2)}, {st(2, g.m)}, {threads}"
            from presk_cback.gemm_calls import epilogue_function, packer_function

            if not g.epilogue and not g.prologue:
                self.emit(f"presk_gemm_{self.gemm}{call});", depth)
            else:  # the epilogue on each block of C as its sums are finished (presk_cback.gemm)
                fn = epilogue_function(self, g) if g.epilogue else "0"
                packers = [
                    packer_function(self, g, w) if pro[w] is not None else "0" for w in (0, 1)
                ]
                fn = ", ".join([fn, "(void *)ctx", *packers])
                ptrs = [f"(void *)b{b.id}" for b in self.k.buffers]
                batch_vals = [_name(v) for v, _ in g.batch] or ["0"]
                self.emit("{", depth)
                self.emit(f"const int64_t bv[] = {{{', '.join(batch_vals)}}};", depth + 1)
                self.emit(
                    f"void *const ctx[] = {{{', '.join([*ptrs, '(void *)err', '(void *)bv'])}}};",
                    depth + 1,
                )
                self.emit(f"presk_gemm_epi_{self.gemm}{call}, {fn});", depth + 1)
                self.emit("}", depth)
        for _ in own:
            depth -= 1
            self.emit("}", depth)

    def band_call(
        self,
        g: Gemm,
        threads,
        depth: int,
        a: str,
        b: str,
        c: str,
        stop: int | None,
        kstop: tuple[int, bool, bool] | None,
    ) -> None:
        """A product narrowed by rows (issue 26) as one call of the generated GEMM's banded
        driver (`presk_gemm_band_*`, presk_cback.gemm), which takes the call's rows by panels
        of its MR, each over what its rows need; then, for a fold cut short, the repair.

        `stop` (a narrowed product, `gemm_stop`: row r's columns end at r + stop): each
        panel over the columns its last row needs (BAND_COLS). Each element computed is the
        same fold as in the whole product (its row and column are the GEMM's, k in order);
        the others are dead (presk_kernel.narrow).

        `kstop` (`gemm_kstop`: A is ±0, or not finite, past row r's first r + stop terms:
        `Reduce.zeros`, the values product a·v, the softmax's weights stored +0 where the
        mask hides): each panel folds k over the prefix its last row needs, [0, band_kend)
        (BAND_KEND) — the fold of each element up to there, k in order — then, element by
        element, the rest of the fold where C is −0 there or A or B holds a value that is not
        finite past it (elsewhere the rest adds ±0 = +0·b, and x + ±0 = x for x not zero,
        +0 + ±0 = +0). `t_bad`, the last row of B holding such a value, is found once for the
        batch point; A's rows past the prefix are scanned for one (the adjoint's a·(g − Σ)
        may be NaN), unless A is known finite there (`Reduce.zeros_finite`: the softmax's
        weights). With the zeros first (`zeros_first`: aᵀ·g, A ±0 before row r's r + stop),
        each panel folds from its first row's start, [band_kstart, depth) (BAND_KSTART), and
        an element is folded whole again where A or B holds a value that is not finite
        before that start; where C is −0 (a fold over the skipped ±0 terms is ±0: it changes
        a result only where the rest folds to −0), it is +0 if a skipped product is +0 and
        every product the panel folded an exact zero, else −0. Where A is known finite, a
        −0's case is decided by scans of signs (`sign_scan`), not by a fold. The whole
        product's bits."""
        t = CTYPE[self.gemm]
        sam, sak, sbk, sbn = (
            g.stride(0, g.m),
            g.stride(0, g.k),
            g.stride(1, g.k),
            g.stride(1, g.n),
        )
        scm, scn = g.stride(2, g.m), g.stride(2, g.n)
        M, K, N = g.rows, g.depth, g.cols
        pa, pb, pc = f"(b{g.a} + {a})", f"(b{g.b} + {b})", f"(b{g.c} + {c})"
        band = "BAND_COLS" if stop is not None else "BAND_KSTART" if kstop[1] else "BAND_KEND"
        call = (
            f"presk_gemm_band_{self.gemm}({M}, {N}, {K}, {pa}, {sam}, {sak}, {pb}, {sbk}, "
            f"{sbn}, {pc}, {scm}, {threads}, {band}_{self.gemm}, {{stop}});"
        )
        if stop is not None:
            self.emit(call.format(stop=stop), depth)
            return
        stop, first, finite = kstop
        fma = "fma" + SUFFIX.get(self.gemm, "")
        mr = f"MR_{self.gemm}"  # the GEMM's panels: rows [t_r0, t_r1) share their bounds
        u, exp, sign = ("uint32_t", "0x7f800000u", "0x80000000u") if self.gemm == "f32" else (
            "uint64_t", "0x7ff0000000000000ull", "0x8000000000000000ull"
        )  # fmt: skip
        self.emit("{", depth)
        d = depth + 1
        self.emit(f"int64_t t_bad = {K if first else -1};", d)
        if N <= LANE_FLAGS:  # whether any value of B is not finite, first: a pass with no exit
            self.emit(f"{u} t_any = 0;", d)
            at_b = f"((const {u} *){pb})[t_r*{sbk} + t_n*{sbn}]"
            self.flag_scan("t_any", u, "0", str(K), N, f"({at_b} & {exp}) == {exp}", d)
            self.emit("if (t_any)", d)
        if first:  # the first row of B holding a value not finite (K: none)
            self.emit(f"for (int64_t t_k = 0; t_k < {K} && t_bad == {K}; t_k++) {{", d)
        else:  # the last row of B holding a value not finite (−1: none)
            self.emit(f"for (int64_t t_k = {K} - 1; t_k >= 0 && t_bad < 0; t_k--) {{", d)
        self.emit(f"{u} t_y = 0;", d + 1)  # a row's exponents all ones, or'ed: vectorised
        self.emit("#pragma omp simd reduction(|:t_y)", 0)
        self.emit(f"for (int64_t t_n = 0; t_n < {N}; t_n++) {{", d + 1)
        self.emit(f"{u} t_u = ((const {u} *){pb})[t_k*{sbk} + t_n*{sbn}];", d + 2)
        self.emit(f"t_y |= (t_u & {exp}) == {exp};", d + 2)
        self.emit("}", d + 1)
        self.emit("if (t_y) t_bad = t_k;", d + 1)
        self.emit("}", d)
        self.emit(call.format(stop=stop), d)
        self.emit(f"for (int64_t t_r0 = 0; t_r0 < {M}; t_r0 += {mr}) {{", d)
        self.emit(f"int64_t t_r1 = t_r0 + {mr} < {M} ? t_r0 + {mr} : {M};", d + 1)
        if first:  # the panel folded [t_k0, K): skipped [0, t_k0)
            self.emit(f"int64_t t_k0 = band_kstart_{self.gemm}(t_r0, {K}, {stop});", d + 1)
            lo, hi, bad, skip = "0", "t_k0", "t_bad < t_k0", "t_k0 > 0"
        else:  # the panel folded [0, t_kc): skipped [t_kc, K)
            self.emit(f"int64_t t_kc = band_kend_{self.gemm}(t_r0, {M}, {K}, {stop});", d + 1)
            lo, hi, bad, skip = "t_kc", str(K), "t_bad >= t_kc", f"t_kc < {K}"
        if finite:  # A's skipped terms ±0: the panel's rows repaired only for a −0 or B's
            self.emit(f"if ({skip} && !({bad})) {{  /* a −0 in the panel's C? */", d + 1)
            self.emit(f"{u} t_zp = 0;", d + 2)
            if scn == 1 and scm == N:  # the panel's rows of C one run of memory
                self.emit("#pragma omp simd reduction(|:t_zp)", 0)
                self.emit(f"for (int64_t t_i = t_r0*{N}; t_i < t_r1*{N}; t_i++)", d + 2)
                self.emit(f"t_zp |= ((const {u} *){pc})[t_i] == {sign};", d + 3)
            else:
                at_c = f"((const {u} *){pc})[t_r*{scm} + t_n*{scn}]"
                self.flag_scan("t_zp", u, "t_r0", "t_r1", N, f"{at_c} == {sign}", d + 2)
            self.emit("if (!t_zp) continue;", d + 2)
            self.emit("}", d + 1)
        self.emit(f"if ({skip}) {{", d + 1)
        across = not finite and sam < sak  # A's skipped part read along its rows' stride
        if across:  # by columns of A, its rows' flags side by side: the loads contiguous
            self.emit(f"{u} t_xr[{mr}] = {{0}};  /* a row of A skipped not finite */", d + 2)
            self.emit(f"for (int64_t t_k = {lo}; t_k < {hi}; t_k++) {{", d + 2)
            self.emit("#pragma omp simd", 0)
            self.emit("for (int64_t t_r = t_r0; t_r < t_r1; t_r++) {", d + 3)
            self.emit(f"{u} t_u = ((const {u} *){pa})[t_r*{sam} + t_k*{sak}];", d + 4)
            self.emit(f"t_xr[t_r - t_r0] |= (t_u & {exp}) == {exp};", d + 4)
            self.emit("}", d + 3)
            self.emit("}", d + 2)
        self.emit("for (int64_t t_r = t_r0; t_r < t_r1; t_r++) {", d + 2)
        self.emit(f"{u} t_x = 0;  /* A skipped not finite: an exponent all ones */", d + 3)
        if across:
            self.emit("t_x = t_xr[t_r - t_r0];", d + 3)
        elif not finite:  # A may be NaN where it is skipped (a product of its zeros)
            self.emit("#pragma omp simd reduction(max:t_x)", 0)  # the largest exponent
            self.emit(f"for (int64_t t_k = {lo}; t_k < {hi}; t_k++) {{", d + 3)
            self.emit(f"{u} t_u = ((const {u} *){pa})[t_r*{sam} + t_k*{sak}];", d + 4)
            self.emit(f"t_u &= {exp};", d + 4)
            self.emit("t_x = t_u > t_x ? t_u : t_x;", d + 4)
            self.emit("}", d + 3)
            self.emit(f"t_x = t_x == {exp};", d + 3)
        self.emit(f"const int t_all = t_x || {bad};", d + 3)
        self.emit(f"{u} t_z = 0;  /* a −0 in C's row */", d + 3)
        self.emit("#pragma omp simd reduction(|:t_z)", 0)
        self.emit(f"for (int64_t t_n = 0; t_n < {N}; t_n++) {{", d + 3)
        self.emit(f"{u} t_u = ((const {u} *){pc})[t_r*{scm} + t_n*{scn}];", d + 4)
        self.emit(f"t_z |= t_u == {sign};", d + 4)
        self.emit("}", d + 3)
        if finite:  # the row's −0s (B finite where skipped, A ±0 there): `sign_scan`
            self.sign_scan(pa, pb, pc, (sam, sak, sbk, sbn, scm, scn), K, N, first, u, sign, d + 3)
        self.emit("if (t_all || t_z)", d + 3)
        self.emit(f"for (int64_t t_n = 0; t_n < {N}; t_n++) {{", d + 3)
        self.emit(f"{t} t_c = {pc}[t_r*{scm} + t_n*{scn}];", d + 4)
        self.emit("if (t_all || (t_c == 0 && signbit(t_c))) {", d + 4)
        at_a, at_b = f"{pa}[t_r*{sam} + t_k*{sak}]", f"{pb}[t_k*{sbk} + t_n*{sbn}]"
        if first:  # the whole fold again, from its first term
            self.emit("{ const int64_t t_k = 0;", d + 5)
            self.emit(f"t_c = {at_a} * {at_b}; }}", d + 6)
            self.emit(f"for (int64_t t_k = 1; t_k < {K}; t_k++) {{", d + 5)
        else:  # the rest of the fold
            self.emit(f"for (int64_t t_k = t_kc; t_k < {K}; t_k++) {{", d + 5)
        self.emit(f"t_c = {fma}({at_a}, {at_b}, t_c);", d + 6)
        self.emit("}", d + 5)
        self.emit(f"{pc}[t_r*{scm} + t_n*{scn}] = t_c;", d + 5)
        self.emit("}", d + 4)
        self.emit("}", d + 3)
        self.emit("}", d + 2)
        self.emit("}", d + 1)
        self.emit("}", d)
        self.emit("}", depth)

    def flag_scan(self, var: str, u: str, lo: str, hi: str, n: int, cond: str, d: int) -> None:
        """`var |= cond` over rows t_r in [lo, hi) and columns t_n < n: into one flag a
        column, OR'ed once at the end, up to LANE_FLAGS columns (a reduction at every row
        cost about the row's loads again); one reduction a row beyond."""
        if n > LANE_FLAGS:
            self.emit(f"for (int64_t t_r = {lo}; t_r < {hi}; t_r++) {{", d)
            self.emit(f"#pragma omp simd reduction(|:{var})", 0)
            self.emit(f"for (int64_t t_n = 0; t_n < {n}; t_n++) {var} |= {cond};", d + 1)
            self.emit("}", d)
            return
        self.emit("{", d)
        self.emit(f"{u} t_f[{n}] = {{0}};", d + 1)
        self.emit(f"for (int64_t t_r = {lo}; t_r < {hi}; t_r++) {{", d + 1)
        self.emit("#pragma omp simd", 0)
        self.emit(f"for (int64_t t_n = 0; t_n < {n}; t_n++) t_f[t_n] |= {cond};", d + 2)
        self.emit("}", d + 1)
        self.emit(f"#pragma omp simd reduction(|:{var})", 0)
        self.emit(f"for (int64_t t_n = 0; t_n < {n}; t_n++) {var} |= t_f[t_n];", d + 1)
        self.emit("}", d)

    def sign_scan(self, pa, pb, pc, strides, K, N, first: bool, u: str, sign: str, d: int):
        """In a cut product's repair (`band_call`), a row of C holding a −0 where A is ±0
        over the terms skipped and B finite there: which −0s are +0 in the whole fold.
        Past a prefix (`first` false), the rest adds ±0 products to a zero: +0 if one is +0
        (their signs equal), else −0. Zeros first, the skipped fold is −0 if every product
        is −0, else +0, and folds from −0 and from +0 differ only while the sum is a zero:
        where every product folded is an exact zero (a ±0 operand; a product of nonzero
        floats that rounds to −0 is not one, and gives −0 from either start). So +0 where a
        skipped product is +0 and every product folded a zero. The signs and zeros are
        scanned k by k across the row's columns, SCAN of them at a time (B's row in lanes),
        not element by element along k, nor by a chain of fmas."""
        sam, sak, sbk, sbn, scm, scn = strides
        at_b = f"((const {u} *){pb})[t_k*{sbk} + t_n*{sbn}]"
        lane = "t_n - t_n0"
        self.emit("if (!t_all && t_z) {", d)
        self.emit(f"for (int64_t t_n0 = 0; t_n0 < {N}; t_n0 += {SCAN}) {{", d + 1)
        self.emit(f"const int64_t t_n1 = t_n0 + {SCAN} < {N} ? t_n0 + {SCAN} : {N};", d + 2)
        self.emit(f"{u} t_q[{SCAN}] = {{0}}, t_nz[{SCAN}] = {{0}};", d + 2)
        lo, hi = ("0", "t_k0") if first else ("t_kc", str(K))  # the terms skipped
        self.emit(f"for (int64_t t_k = {lo}; t_k < {hi}; t_k++) {{", d + 2)
        self.emit(f"const {u} t_ua = ((const {u} *){pa})[t_r*{sam} + t_k*{sak}];", d + 3)
        self.emit("#pragma omp simd", 0)
        self.emit("for (int64_t t_n = t_n0; t_n < t_n1; t_n++)", d + 3)
        self.emit(f"t_q[{lane}] |= ~(t_ua ^ {at_b}) & {sign};", d + 4)
        self.emit("}", d + 2)
        if first:  # a product folded that is not an exact zero
            self.emit(f"for (int64_t t_k = t_k0; t_k < {K}; t_k++) {{", d + 2)
            self.emit(f"const {u} t_ua = ((const {u} *){pa})[t_r*{sam} + t_k*{sak}];", d + 3)
            self.emit("if (t_ua << 1 == 0) continue;", d + 3)
            self.emit("#pragma omp simd", 0)
            self.emit("for (int64_t t_n = t_n0; t_n < t_n1; t_n++)", d + 3)
            self.emit(f"t_nz[{lane}] |= {at_b} << 1 != 0;", d + 4)
            self.emit("}", d + 2)
        self.emit("for (int64_t t_n = t_n0; t_n < t_n1; t_n++)", d + 2)
        at_c = f"((const {u} *){pc})[t_r*{scm} + t_n*{scn}]"
        self.emit(f"if ({at_c} == {sign} && t_q[{lane}] && !t_nz[{lane}])", d + 3)
        self.emit(f"{pc}[t_r*{scm} + t_n*{scn}] = 0;", d + 4)
        self.emit("}", d + 1)
        self.emit("continue;", d + 1)
        self.emit("}", d)

    def function(self) -> list[str]:
        k = self.k
        params = [
            f"{'const ' if i < len(k.inputs) else ''}{CTYPE[b.dtype]} *b{b.id}"
            for i, b in enumerate(k.buffers)
        ]
        peel = self.lanes and _strips(k.body)  # written in strips: GCC peels them (PEEL)
        self.lines = [PEEL[0]] if peel else []
        self.lines.append(f"static void {self.fname}({', '.join([*params, 'int *err'])}) {{")
        self.emit("(void)err;", 1)
        for b in self.masks:  # (read as comparisons: `mask_read`)
            self.emit(f"(void)b{b};", 1)
        if applies(k.layout) and not is_laid(k):
            raise EmitError(
                f"`{k.name}` at {k.site}: its layout ({k.layout}) is not applied to its body"
                " (presk_kernel.layout.apply_layout, the `layout` pass)"
            )
        self.block(k.body, 1)
        self.lines.append("}")
        if peel:
            self.lines.append(PEEL[1])
        return self.pre + self.lines
