"""GEMM in generated C: C[m, n] = Σ_k A[m, k]·B[k, n] in f64 or f32, BLIS's way.

The loop nest is Goto's: jc over NC columns, pc over KC of the sum (B's block packed into
NR-wide panels), ic over MC rows (A's block packed into MR-high panels), then the MR×NR
tiles, each computed by a register-blocked micro-kernel over vector registers (MR × NV
accumulators of VL lanes, NR = NV·VL) with an explicit FMA. A tile of fewer than NR
columns runs on a zero-padded copy (padding in n only, never in k); a panel of fewer than
MR rows, 4 rows at a time and then 1 (the micro-kernel inlined for those). A sum of at most
2·KC terms is one block. A full panel is
packed along the operand's contiguous axis (a transposed A by whole rows of its block; on
AVX-512 a transposing copy by VL×VL blocks through the registers); when n has fewer than
eight panels (A's rows contiguous) or at most four (its columns), A's full panels are read
where they lie, prefetched a few lines ahead (with four panels or fewer, each panel once
for all of n's). The micro-kernel's loop over k is unrolled by four.

The bits (DESIGN §11). Each output element is the left fold of its products in increasing k,
fused: c = a₀b₀, then c = fma(a_k, b_k, c). The micro-kernel loads C's partial sums into its
accumulators for every KC block after the first, and starts the first from −0.0 (the
identity of IEEE addition: fma(a₀, b₀, −0) is a₀b₀ rounded, its sign included), so the result
is that fold whatever MR, NV, KC, MC, NC. Threads (OpenMP) take contiguous ranges of the NR
panels of n (or m), never k: each element is computed by one thread, in one order.

A banded product (`presk_gemm_band_*`, issue 26: the causal attention's) runs the same nest
with one test a tile: its rows by panels of MR, each over the columns (`BAND_COLS`) or the
terms (`BAND_KEND`, `BAND_KSTART`) its rows need, by the bound functions the emitted repair
calls too (docs/native.md, "The banded driver"). A term range is a contiguous part of the
fold, in increasing k, started from −0 at its first term: the same bits for what it
computes; which terms may be skipped is the caller's proof.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from presk_core.cc.cache import FILE_MODE
from presk_core.data import write_text

from presk_cback.cache import cache_dir
from presk_cback.load import load, pointer
from presk_cback.toolchain import Toolchain, find_toolchain

CTYPE = {"f64": "double", "f32": "float"}
TAGS = {np.dtype(np.float64): "f64", np.dtype(np.float32): "f32"}
SIGNATURE = (
    "void presk_gemm_{t}(int64_t m, int64_t n, int64_t k, const {c} *A, int64_t rsa, "
    "int64_t csa, const {c} *B, int64_t rsb, int64_t csb, {c} *C, int64_t ldc, int threads);"
)
BAND_SIGNATURE = (
    "void presk_gemm_band_{t}(int64_t m, int64_t n, int64_t k, const {c} *A, int64_t rsa, "
    "int64_t csa, const {c} *B, int64_t rsb, int64_t csb, {c} *C, int64_t ldc, int threads, "
    "int band, int64_t stop);"
)
CDEF = "\n".join(SIGNATURE.format(t=t, c=c) for t, c in CTYPE.items())
BAND_CDEF = "\n".join(BAND_SIGNATURE.format(t=t, c=c) for t, c in CTYPE.items())
BANDS = {"cols": 1, "kend": 2, "kstart": 3}
"""`presk_gemm_band_*`'s bands (its C's BAND_COLS, BAND_KEND, BAND_KSTART)."""


@dataclass(frozen=True, slots=True)
class Blocking:
    """A register and cache blocking: MR rows × NV vectors per tile; KC, MC, NC blocks."""

    mr: int
    nv: int
    kc: int = 384
    mc: int = 192
    nc: int = 4096


def lanes(tag: str, tc: Toolchain) -> int:
    """Lanes of one vector register for `tag` on the toolchain's target."""
    return tc.vector_bytes // (8 if tag == "f64" else 4)


def default_blocking(tag: str, tc: Toolchain) -> Blocking:
    """The start points measured on this kind of machine (24 accumulators on AVX-512)."""
    match tc.vector_bytes, tag:
        case 64, "f64":
            return Blocking(6, 4, 384, 192)  # 6 × 32
        case 64, "f32":
            return Blocking(12, 2, 384, 96)  # 12 × 32
        case 32, "f32":
            # 12 accumulators of 16 ymm registers; KC 384 (b30, Zen 3): a product of 768
            # terms (the course GPT's down-projection) in two blocks, not three, 13 % faster,
            # the others the same (tools/bench_gemm.py's step shapes)
            return Blocking(6, 2, 384, 96)
        case 32, _:
            return Blocking(6, 2, 256, 96)  # 12 accumulators of 16 ymm registers
        case _:
            return Blocking(4, 2, 256, 64)


def wide_blocking(tag: str, main: Blocking, tc: Toolchain) -> Blocking | None:
    """Wider tiles than `main`'s for the products they pad no more (`embedded_source`), or
    None. f32 on AVX-512: 6 × 64 (4 vectors) loads 10 registers for 24 FMAs a term where
    12 × 32 loads 14. On an Ice Lake server core 8 × 48 (11 loads) ran the course GPT's
    dense products 6–16 % faster than 12 × 32 (`tools/bench_gemm.py --shapes step`, b21);
    on a Sapphire Rapids-class core 6 × 64 ran them 3–15 % faster than 8 × 48 (a C
    harness, operands evicted) and the course GPT's full-width step and forward pass 4 %
    faster (b31). The attention's products of 32 columns keep 12 × 32."""
    if tc.vector_bytes == 64 and tag == "f32" and main.nv < 4:
        return Blocking(6, 4, 384, 96)
    return None


def direct_panels(tag: str, tc: Toolchain) -> int:
    """Below this many panels of C's columns, a row-major A's full panels are read where they
    lie rather than packed (the GEMM's `DIRECT`), measured at the course GPT's products: 8 on
    AVX-512 (f32: 192 columns direct, 768 packed), 16 for f32 on AVX2 (192 columns are 12
    panels there: 7–8 % faster direct; 768 packed), 8 for f64 there (192 columns are 24
    panels: packed faster). The same bits either way: the same products in the same order."""
    return 16 if tc.vector_bytes == 32 and tag == "f32" else 8


def _tuned_path() -> Path:
    return cache_dir() / "gemm-blocking.json"


def _host(tc: Toolchain) -> str:
    return hashlib.sha256(f"{tc.identity}\0{tc.target}".encode()).hexdigest()[:16]


def host_blocking(tag: str, tc: Toolchain) -> Blocking:
    """The blocking tuned on this host (`tools/bench_gemm.py --tune --save`), else the
    default. Any blocking gives the same bits: this is speed only."""
    path = _tuned_path()
    try:
        st = path.stat()
        saved = _tuned(str(path), (st.st_ino, st.st_size, st.st_mtime_ns))[_host(tc)][tag]
        return Blocking(*(int(v) for v in saved))
    except (OSError, ValueError, KeyError, TypeError):
        return default_blocking(tag, tc)


@functools.lru_cache(maxsize=4)
def _tuned(path: str, stamp: tuple[int, int, int]) -> dict:
    """The tuned table of `path` as its inode, size and modification time `stamp` find it
    (read once a change, the time's coarse ticks aside: `gemm` asks at every call)."""
    return json.loads(Path(path).read_text())


def save_blocking(tag: str, tc: Toolchain, blocking: Blocking) -> Path:
    """Keep `blocking` as this host's for `tag` (in the cache folder, written atomically)."""
    path = _tuned_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        table = {}
    b = blocking
    table.setdefault(_host(tc), {})[tag] = [b.mr, b.nv, b.kc, b.mc, b.nc]
    write_text(str(path), json.dumps(table, indent=1, sort_keys=True), FILE_MODE)
    return path


# A VL×VL block of registers transposed in place (AVX-512): lanes exchanged by unpacks,
# then 128-bit lanes by shuffles; the packers' copies of a transposed operand (no arithmetic:
# the bits are the operand's).
TRANSPOSE = {
    "f32": """#define HAVE_AVX512 1
#define VMASKSTOREU(p, n, v) _mm512_mask_storeu_ps(p, (__mmask16)((1u << (n)) - 1), v)
#define VPARTSTOREU VMASKSTOREU
#define VMASKLOADU(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1), p)
static inline __attribute__((always_inline)) void transpose(vec r[16]) {
    __m512 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {
        __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 2]);
        __m512d c = _mm512_castps_pd(t[i + 1]), d = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 8)
#pragma GCC unroll 16
        for (int j = 0; j < 4; j++) {
            t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
            t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
        }
#pragma GCC unroll 16
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    }
}
""",
    "f64": """#define HAVE_AVX512 1
#define VMASKSTOREU(p, n, v) _mm512_mask_storeu_pd(p, (__mmask8)((1u << (n)) - 1), v)
#define VPARTSTOREU VMASKSTOREU
#define VMASKLOADU(p, n) _mm512_maskz_loadu_pd((__mmask8)((1u << (n)) - 1), p)
static inline __attribute__((always_inline)) void transpose(vec r[8]) {
    __m512d t[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 8; i += 4)
#pragma GCC unroll 16
        for (int j = 0; j < 2; j++) {
            r[i + j] = _mm512_shuffle_f64x2(t[i + j], t[i + j + 2], 0x88);
            r[i + j + 2] = _mm512_shuffle_f64x2(t[i + j], t[i + j + 2], 0xdd);
        }
#pragma GCC unroll 16
    for (int j = 0; j < 4; j++) {
        t[j] = _mm512_shuffle_f64x2(r[j], r[j + 4], 0x88);
        t[j + 4] = _mm512_shuffle_f64x2(r[j], r[j + 4], 0xdd);
    }
#pragma GCC unroll 16
    for (int j = 0; j < 8; j++) r[j] = t[j];
}
""",
}


# The same on AVX2 (b30: the packers of a transposed B and of a row-major A): 8×8 f32, 4×4
# f64; a panel's first n values stored through a vector in memory (AVX2's masked stores are
# slow on AMD's cores), n constant in the packers (MR), so the copy is a few moves.
TRANSPOSE_AVX2 = {
    "f32": """static inline __attribute__((always_inline)) void transpose(vec r[8]) {
    __m256 t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
#pragma GCC unroll 8
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
        r[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
}
""",
    "f64": """static inline __attribute__((always_inline)) void transpose(vec r[4]) {
    __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
    __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
    r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}
""",
}


def _vector_ops(tag: str, tc: Toolchain) -> str:
    c = CTYPE[tag]
    sfx = "pd" if tag == "f64" else "ps"
    if tc.vector_bytes == 64:
        return (
            f"#include <immintrin.h>\ntypedef __m512{'d' if tag == 'f64' else ''} vec;\n"
            f"#define VFMA(a, b, c) _mm512_fmadd_{sfx}(a, b, c)\n"
            f"#define VSET1(x) _mm512_set1_{sfx}(x)\n"
            f"#define VLOAD(p) _mm512_load_{sfx}(p)\n"
            f"#define VSTORE(p, v) _mm512_store_{sfx}(p, v)\n"
            f"#define VLOADU(p) _mm512_loadu_{sfx}(p)\n"
            f"#define VSTOREU(p, v) _mm512_storeu_{sfx}(p, v)\n"
        ) + TRANSPOSE[tag]
    if tc.vector_bytes == 32 and "fma" in tc.features:
        return (
            f"#include <immintrin.h>\ntypedef __m256{'d' if tag == 'f64' else ''} vec;\n"
            f"#define VFMA(a, b, c) _mm256_fmadd_{sfx}(a, b, c)\n"
            f"#define VSET1(x) _mm256_set1_{sfx}(x)\n"
            f"#define VLOAD(p) _mm256_load_{sfx}(p)\n"
            f"#define VSTORE(p, v) _mm256_store_{sfx}(p, v)\n"
            f"#define VLOADU(p) _mm256_loadu_{sfx}(p)\n"
            f"#define VSTOREU(p, v) _mm256_storeu_{sfx}(p, v)\n"
            "#define HAVE_TRANSPOSE 1\n"
            f"#define VPARTSTOREU(p, n, v) do {{ _Alignas(32) {c} part_[VL]; "
            f"_mm256_store_{sfx}(part_, v); memcpy(p, part_, (size_t)(n) * sizeof({c})); }} "
            "while (0)\n"
        ) + TRANSPOSE_AVX2[tag]
    fma = "fma" if tag == "f64" else "fmaf"
    return (
        f"typedef {c} vec __attribute__((vector_size({tc.vector_bytes})));\n"
        f"static inline vec VFMA(vec a, vec b, vec c) {{\n"
        f"    for (int l = 0; l < VL; l++) c[l] = {fma}(a[l], b[l], c[l]);\n    return c;\n}}\n"
        f"static inline vec VSET1({c} x) {{ vec v; for (int l = 0; l < VL; l++) v[l] = x; "
        f"return v; }}\n"
        f"static inline vec VLOADU(const {c} *p) {{ vec v; memcpy(&v, p, sizeof v); return v; }}\n"
        f"#define VLOAD(p) VLOADU(p)\n"
        f"#define VSTORE(p, v) VSTOREU(p, v)\n"
        f"static inline void VSTOREU({c} *p, vec v) {{ memcpy(p, &v, sizeof v); }}\n"
    )


TEMPLATE = r"""/* presk GEMM, {tag}: MR {mr} × NR {nr} ({nv} vectors of {vl}), KC {kc}, MC {mc}, NC {nc} */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef {c} T;
#define MR {mr}
#define NV {nv}
#define VL {vl}
#define NR {nr}
#define KC {kc}
#define MC {mc}
#define NC {nc}
#define PFD 32 /* A's rows prefetched this many elements ahead */
#define PFC 32 /* A's columns this many k ahead */
#define BK 32 /* the k block of B read where it lies (a few rows' product) */
#define BDIRECT (256 << 10) /* … where its packed block would have more bytes than this */
#define DIRECT {direct} /* A's rows are read where they lie when n has fewer panels */
{vector_ops}
#ifndef HAVE_TRANSPOSE
#define HAVE_TRANSPOSE HAVE_AVX512
#endif
#ifndef HAVE_AVX512
#define HAVE_AVX512 0
#endif
static inline int64_t min64(int64_t a, int64_t b) {{ return a < b ? a : b; }}

/* C[rows×NR] (row stride ldc; rows ≤ MR, a constant where it is inlined) = the fold continued over kc terms of A's MR rows (element
 * [i, k] at Ap[i * ars + k * acs]: a packed panel, ars = 1 and acs = MR) and a panel of B
 * (row k at Bp + k * brs: packed, brs = NR; or NR columns of B where it lies, brs its row
 * stride, the next panel's lines of each row prefetched: the next tile's) */
static inline __attribute__((always_inline)) void ukernel(
    int64_t kc, const T *restrict Ap, int64_t ars, int64_t acs, const T *restrict Bp,
    int64_t brs, T *restrict C, int64_t ldc, int first, int pf, int rows) {{
    vec acc[MR][NV];
    if (first) {{
#pragma GCC unroll 32
        for (int i = 0; i < rows; i++)
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[i][v] = VSET1(-0.0);
    }} else {{
#pragma GCC unroll 32
        for (int i = 0; i < rows; i++)
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[i][v] = VLOADU(C + i * ldc + v * VL);
    }}
    /* k in steps of 16 when A's rows are read where they lie (each row's next lines
     * prefetched once a step), else in one; the steps unrolled by 4 */
    int64_t step = pf == 1 ? 16 : kc;
    for (int64_t k0 = 0; k0 < kc; k0 += step) {{
        int64_t k1 = min64(kc, k0 + step);
        if (pf == 1) /* A's rows, read where they lie */
#pragma GCC unroll 32
            for (int i = 0; i < rows; i++) __builtin_prefetch(Ap + i * ars + (k0 + PFD));
#pragma GCC unroll 4
        for (int64_t k = k0; k < k1; k++) {{
            if (pf == 2) {{ /* A's columns */
                __builtin_prefetch(Ap + (k + PFC) * acs);
                __builtin_prefetch(Ap + (k + PFC) * acs + MR - 1);
            }}
            vec b[NV];
            if (brs != NR) /* B where it lies: its rows a stride apart, each a new page */
#pragma GCC unroll 8
                for (int v = 0; v < NV; v++) __builtin_prefetch(Bp + k * brs + NR + v * VL);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++)
                b[v] = brs == NR ? VLOAD(Bp + k * NR + v * VL) : VLOADU(Bp + k * brs + v * VL);
#pragma GCC unroll 32
            for (int i = 0; i < rows; i++) {{
                vec a = VSET1(Ap[i * ars + k * acs]);
#pragma GCC unroll 8
                for (int v = 0; v < NV; v++) acc[i][v] = VFMA(a, b[v], acc[i][v]);
            }}
        }}
    }}
#pragma GCC unroll 32
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) VSTOREU(C + i * ldc + v * VL, acc[i][v]);
}}

/* B[pc.., jc..] → kc × NR panels, zero columns past n. A full panel is copied along
 * whichever of B's axes is contiguous (a row of NR values, or a column of kc), in blocks of
 * 16 k that stay in L1: the strided side is the packed one, which is. */
static void pack_b(int64_t jp, int64_t kc, int64_t nc, const T *B, int64_t rsb, int64_t csb,
                   T *restrict Bp) {{
    T *restrict dst = Bp + jp * NR * kc;
    int64_t j0 = jp * NR, nr = min64(NR, nc - j0);
    const T *src = B + j0 * csb;
    if (nr == NR && csb == 1) {{
        for (int64_t k = 0; k < kc; k++)
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) VSTORE(dst + k * NR + v * VL, VLOADU(src + k * rsb + v * VL));
        return;
    }}
    if (nr == NR && rsb == 1) {{
        int64_t k0 = 0;
#if HAVE_TRANSPOSE /* VL columns × VL k at a time, transposed in registers */
        for (; k0 + VL <= kc; k0 += VL)
            for (int v = 0; v < NV; v++) {{
                vec r[VL];
#pragma GCC unroll 16
                for (int j = 0; j < VL; j++) r[j] = VLOADU(src + (v * VL + j) * csb + k0);
                transpose(r);
#pragma GCC unroll 16
                for (int j = 0; j < VL; j++) VSTORE(dst + (k0 + j) * NR + v * VL, r[j]);
            }}
#endif
        for (; k0 < kc; k0 += 16) {{
            int64_t k1 = min64(kc, k0 + 16);
            for (int64_t j = 0; j < NR; j++)
                for (int64_t k = k0; k < k1; k++) dst[k * NR + j] = src[j * csb + k];
        }}
        return;
    }}
    for (int64_t k = 0; k < kc; k++)
        for (int64_t j = 0; j < NR; j++)
            dst[k * NR + j] = j < nr ? src[k * rsb + j * csb] : 0;
}}

/* B[pc.., jc..] with its rows contiguous (csb = 1) → its full NR panels, row k of the block
 * read whole for all of them: one stream, where a panel at a time reads NR values of every
 * row, rows a stride apart that the hardware's prefetcher does not follow past a page
 * (dY of 768 columns in a weight's gradient: 6 % faster) */
static void pack_b_rows(int64_t kc, int64_t nc, const T *B, int64_t rsb, T *restrict Bp) {{
    int64_t full = nc / NR;
    for (int64_t k = 0; k < kc; k++) {{
        const T *src = B + k * rsb;
        for (int64_t jp = 0; jp < full; jp++)
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++)
                VSTORE(Bp + jp * NR * kc + k * NR + v * VL, VLOADU(src + jp * NR + v * VL));
    }}
}}

/* A[ic.., pc..] → MR × kc panels, zero rows past m; a full panel copied along A's
 * contiguous axis, as B's */
static void pack_a(int64_t ip, int64_t kc, int64_t mc, const T *A, int64_t rsa, int64_t csa,
                   T *restrict Ap) {{
    T *restrict dst = Ap + ip * MR * kc;
    int64_t i0 = ip * MR, mr = min64(MR, mc - i0);
    const T *src = A + i0 * rsa;
    if (mr == MR && csa == 1) {{
        int64_t k0 = 0;
#if HAVE_TRANSPOSE /* MR rows × VL k at a time, transposed in registers (MR ≤ VL) */
        if (MR <= VL)
            for (; k0 + VL <= kc; k0 += VL) {{
                vec r[VL];
#pragma GCC unroll 16
                for (int i = 0; i < VL; i++) r[i] = i < MR ? VLOADU(src + i * rsa + k0) : VSET1(0);
                transpose(r);
#pragma GCC unroll 16
                for (int j = 0; j < VL; j++) VPARTSTOREU(dst + (k0 + j) * MR, MR, r[j]);
            }}
#endif
        for (; k0 < kc; k0 += 16) {{
            int64_t k1 = min64(kc, k0 + 16);
#pragma GCC unroll 32
            for (int64_t i = 0; i < MR; i++)
                for (int64_t k = k0; k < k1; k++) dst[k * MR + i] = src[i * rsa + k];
        }}
        return;
    }}
    for (int64_t k = 0; k < kc; k++)
        for (int64_t i = 0; i < MR; i++)
            dst[k * MR + i] = i < mr ? src[i * rsa + k * csa] : 0;
}}

/* A[ic.., pc..] with its columns contiguous (rsa = 1: a transposed operand) → its full
 * MR panels, row k of the block read whole (as a row of memory) for all of them */
static void pack_a_rows(int64_t kc, int64_t mc, const T *A, int64_t csa, T *restrict Ap) {{
    int64_t full = mc / MR;
    for (int64_t k = 0; k < kc; k++) {{
        const T *src = A + k * csa;
        __builtin_prefetch(src + 4 * csa);
        __builtin_prefetch(src + 4 * csa + mc - 1);
#if HAVE_AVX512 /* a panel's MR values as one masked vector (MR ≤ VL) */
        if (MR <= VL) {{
            for (int64_t ip = 0; ip < full; ip++)
                VMASKSTOREU(Ap + ip * MR * kc + k * MR, MR, VMASKLOADU(src + ip * MR, MR));
            continue;
        }}
#endif
        for (int64_t ip = 0; ip < full; ip++)
#pragma GCC unroll 32
            for (int64_t i = 0; i < MR; i++) Ap[ip * MR * kc + k * MR + i] = src[ip * MR + i];
    }}
}}

/* A tile's mr <= MR rows into C: the micro-kernel for MR rows, else for 4 at a time and then
 * 1 (inlined: a constant brs, NR, keeps the packed panel's code) */
static inline __attribute__((always_inline)) void tile_rows(
    int64_t kc, const T *Ap, int64_t ars, int64_t acs, const T *Bp, int64_t brs, T *C,
    int64_t ldc, int64_t mr, int first) {{
    if (mr == MR) {{
        ukernel(kc, Ap, ars, acs, Bp, brs, C, ldc, first, 0, MR);
        return;
    }}
    int64_t i = 0;
    if (MR > 4)
        for (; i + 4 <= mr; i += 4)
            ukernel(kc, Ap + i * ars, ars, acs, Bp, brs, C + i * ldc, ldc, first, 0, MR > 4 ? 4 : 1);
    for (; i < mr; i++) ukernel(kc, Ap + i * ars, ars, acs, Bp, brs, C + i * ldc, ldc, first, 0, 1);
}}

static void tile(int64_t kc, const T *Ap, int64_t ars, int64_t acs, const T *Bp, int64_t brs,
                 T *C, int64_t ldc, int64_t mr, int64_t nr, int first) {{
    if (brs != NR) {{ /* B where it lies (a full panel: nr = NR), A packed */
        tile_rows(kc, Ap, 1, MR, Bp, brs, C, ldc, mr, first);
        return;
    }}
    if (mr == MR && nr == NR) {{
        if (ars == 1 && acs == MR)
            ukernel(kc, Ap, 1, MR, Bp, NR, C, ldc, first, 0, MR);
        else if (acs == 1)
            ukernel(kc, Ap, ars, 1, Bp, NR, C, ldc, first, 1, MR);
        else
            ukernel(kc, Ap, 1, acs, Bp, NR, C, ldc, first, 2, MR);
        return;
    }}
    /* an edge: C's last columns through a tile of NR (B's panel is zero past nr), A's last
     * rows 4 at a time and then one (read where A lies, or from a packed panel): each
     * element the same fold, and no row of A past m read */
    T tmp[MR * NR] __attribute__((aligned(64)));
    T *c = C;
    int64_t ld = ldc;
    if (nr < NR) {{
        memset(tmp, 0, sizeof tmp);
        if (!first)
            for (int64_t i = 0; i < mr; i++) memcpy(tmp + i * NR, C + i * ldc, nr * sizeof(T));
        c = tmp;
        ld = NR;
    }}
    tile_rows(kc, Ap, ars, acs, Bp, NR, c, ld, mr, first);
    if (nr < NR)
        for (int64_t i = 0; i < mr; i++) memcpy(C + i * ldc, tmp + i * NR, nr * sizeof(T));
}}

/* A buffer of at least `bytes` for this thread's packed panels, kept between calls (a
 * small product would otherwise pay an allocation a call). */
static T *scratch(int which, size_t bytes) {{
    static _Thread_local T *buf[2];
    static _Thread_local size_t cap[2];
    if (cap[which] < bytes) {{
        free(buf[which]);
        buf[which] = aligned_alloc(64, (bytes + 63) / 64 * 64);
        cap[which] = buf[which] ? bytes : 0;
        if (!buf[which]) abort();
    }}
    return buf[which];
}}

/* An epilogue: called on each part of C (rows i0 … i0 + mr, columns j0 … j0 + nr of the
 * whole call) once its sums are finished, while it is in L2: an MC×NC block's rows over
 * EPI_PANELS of its column panels (f32 on AVX2: 96 rows of 512 columns, 192 KB), long loops
 * (called per MR×NR tile, two vectors a row, a GELU's erfc ran 1.2× as long an element).
 * Each element's statements read its own sum: the order of the parts changes no bit. */
#define EPI_PANEL (MC * NR * (int64_t)sizeof(T)) /* the bytes of a block's column panel */
#define EPI_PANELS (EPI_PANEL < 196608 ? 196608 / EPI_PANEL : 1)
typedef void (*epilogue)(void *ctx, int64_t i0, int64_t j0, int64_t mr, int64_t nr);

/* A prologue (a packer): writes the panel of an operand computed from the kernel's buffers
 * rather than read from one (a dequantised weight, a norm's scaled rows): `w` (MR or NR)
 * lines of the panel from line p0 of the whole call (A's rows, B's columns), `n` of them
 * real and the rest zero, over kc of the sum from k0, as pack_a and pack_b lay them out:
 * dst[k·w + line]. */
typedef void (*packer)(void *ctx, int64_t p0, int64_t k0, int64_t n, int64_t kc, int64_t w,
                       T *restrict dst);

/* A banded product (issue 26: causal attention's): the call's rows in panels of MR from its
 * row 0, row i's panel [i / MR · MR, min(m, that + MR)); each panel computed over the columns
 * (BAND_COLS) or the terms (BAND_KEND, BAND_KSTART) its rows need, by `stop`:
 * - BAND_COLS: row r needs columns [0, min(n, r + stop)); the panel's, its last row's. The
 *   others are not written (dead: presk_kernel.narrow).
 * - BAND_KEND: the panel folds k over [0, band_kend) (its last row's r + stop, at least 1
 *   term), the fold of each element up to there; the rest is the caller's (a repair).
 * - BAND_KSTART: the panel folds k over [band_kstart, k) (its first row's r + stop, at most
 *   k − 1), from that term as the fold's first; what it skips is the caller's.
 * The caller's repair uses the same functions, so the same bounds. */
#define BAND_COLS 1
#define BAND_KEND 2
#define BAND_KSTART 3
static inline __attribute__((unused)) int64_t band_last(int64_t i, int64_t m) {{
    return min64(m, i / MR * MR + MR) - 1;
}}
static inline __attribute__((unused)) int64_t band_ncols(int64_t i, int64_t m, int64_t n,
                                                        int64_t stop) {{
    int64_t e = min64(n, band_last(i, m) + stop);
    return e < 0 ? 0 : e;
}}
static inline __attribute__((unused)) int64_t band_kend(int64_t i, int64_t m, int64_t k,
                                                       int64_t stop) {{
    int64_t e = min64(k, band_last(i, m) + stop);
    return e < 1 ? 1 : e;
}}
static inline __attribute__((unused)) int64_t band_kstart(int64_t i, int64_t k, int64_t stop) {{
    int64_t s = min64(k - 1, i / MR * MR + stop);
    return s < 0 ? 0 : s;
}}

/* the whole nest, one thread, over C[m, n] (rows i_off…, columns j_off… of the call) */
static void nest(int64_t m, int64_t n, int64_t k, const T *A, int64_t rsa, int64_t csa,
                 const T *B, int64_t rsb, int64_t csb, T *C, int64_t ldc, epilogue epi,
                 void *ctx, int64_t i_off, int64_t j_off, packer pa, packer pb, int band,
                 int64_t stop, int64_t m_all, int64_t n_all) {{
    /* k in blocks of KC, but a sum of at most 2·KC terms in one block: C's tiles loaded
     * and stored again once fewer (4096×192 by 768 terms, f32 on AVX-512: 7–8 % faster) */
    int64_t ncap = min64(NC, (n + NR - 1) / NR * NR), kcap = k <= 2 * KC ? k : KC;
    /* B's full panels are read where they lie when its rows are contiguous and m has at
     * most two panels of A (a prompt's few rows, issue 26): packing B would pass over it
     * twice more for the one or two tiles that read each panel (16 rows by 384 × 1536 of a
     * weight: the packed panels, 2.4 MB, fall out of L2 before they are read), when that
     * block is larger than BDIRECT (a smaller one, a weight's gradient's dY of 64 columns,
     * is packed faster than its panels are read in blocks of BK in place). A's panels
     * are packed then, and k runs in blocks of BK: a block's rows of B are read across
     * (each tile prefetching the next one's lines), where a panel's whole k would walk
     * down B a row a page. (`tile` and `ukernel` tell such a panel by its row stride, not
     * NR: a B of NR columns, one panel, is packed.) */
    int bdirect = !pb && csb == 1 && rsb != NR && m <= 2 * MR &&
                  kcap * ncap * (int64_t)sizeof(T) > BDIRECT;
    if (bdirect) kcap = min64(k, BK);
    T *Bp = scratch(0, (size_t)(kcap * ncap) * sizeof(T));
    T *Ap = scratch(1, (size_t)(kcap * MC) * sizeof(T));
    /* A's full panels are read where they lie when its rows are contiguous and n has
     * fewer than DIRECT panels (the micro-kernel broadcasts A[i·rsa + k], prefetching each
     * row a few lines ahead: as many lines of L2 a step as a packed panel, without the
     * packing's pass over A; with more panels that pass is shared by them all, and a
     * packed panel is one stream, not MR), or its columns and n has at most four panels
     * and A's rows are not a multiple of 2 KB apart (a panel's pass reads one line a k;
     * at such a stride all kc of them fall in two sets of L1 or one, and miss); the edge
     * panel's rows too (`tile`: no packing of a few rows by the scalar loop, 3 µs of a
     * causal values product's 20 at T 256).
     * The bits are the same: the same products in the same order. */
    int few = n <= 4 * NR;
    int sets = (csa * (int64_t)sizeof(T)) % 2048 != 0;
    int direct = !pa && !bdirect && ((csa == 1 && n < DIRECT * NR) || (rsa == 1 && few && sets));
    for (int64_t jc = 0; jc < n; jc += NC) {{
        int64_t nc = min64(NC, n - jc), np = (nc + NR - 1) / NR;
        for (int64_t pc = 0; pc < k; pc += kcap) {{
            int64_t kc = min64(kcap, k - pc);
            int first = pc == 0, last = pc + kc >= k;
            int64_t jp0 = 0; /* B's full panels packed row by row when it has 2 or more */
            if (bdirect)
                jp0 = nc / NR; /* the last panel's few columns packed (zero past n) */
            else if (!pb && csb == 1 && nc >= 2 * NR) {{
                pack_b_rows(kc, nc, B + pc * rsb + jc, rsb, Bp);
                jp0 = nc / NR;
            }}
            for (int64_t jp = jp0; jp < np; jp++)
                if (pb)
                    pb(ctx, j_off + jc + jp * NR, pc, min64(NR, nc - jp * NR), kc, NR,
                       Bp + jp * NR * kc);
                else
                    pack_b(jp, kc, nc, B + pc * rsb + jc * csb, rsb, csb, Bp);
            for (int64_t ic = 0; ic < m; ic += MC) {{
                int64_t mc = min64(MC, m - ic), mp = (mc + MR - 1) / MR;
                int rows = !pa && rsa == 1 && !direct;
                if (rows) pack_a_rows(kc, mc, A + ic + pc * csa, csa, Ap);
                for (int64_t ip = 0; ip < mp; ip++)
                    if (pa)
                        pa(ctx, i_off + ic + ip * MR, pc, min64(MR, mc - ip * MR), kc, MR,
                           Ap + ip * MR * kc);
                    else if (!direct && (!rows || mc - ip * MR < MR))
                        pack_a(ip, kc, mc, A + ic * rsa + pc * csa, rsa, csa, Ap);
                /* read where it lies, a panel of A comes from memory once for all of n's
                 * few panels (the panels' loop inside): n's panels are in L1 and L2 */
                int64_t outer = few ? mp : np, inner = few ? np : mp, ep = 0;
                for (int64_t o = 0; o < outer; o++) {{
                    for (int64_t q = 0; q < inner; q++) {{
                        int64_t ip = few ? o : q, jp = few ? q : o;
                        int64_t mr = min64(MR, mc - ip * MR), nr = min64(NR, nc - jp * NR);
                        T *c = C + (ic + ip * MR) * ldc + jc + jp * NR;
                        int64_t row = i_off + ic + ip * MR, kk = kc, off = 0, fst = first;
                        if (band == BAND_COLS) {{ /* the panel's columns, from j_off + jc */
                            if (band_ncols(row, m_all, n_all, stop) <= j_off + jc + jp * NR)
                                continue;
                        }} else if (band == BAND_KEND) {{ /* its terms [pc, kend) here */
                            int64_t e = band_kend(row, m_all, k, stop);
                            if (e <= pc) continue;
                            kk = min64(kc, e - pc);
                        }} else if (band == BAND_KSTART) {{ /* [max(pc, kstart), pc + kc) */
                            int64_t s = band_kstart(row, k, stop);
                            if (s >= pc + kc) continue;
                            off = s > pc ? s - pc : 0;
                            kk = kc - off;
                            fst = s >= pc;
                        }}
                        if (q + 1 < inner) {{ /* the next tile of C, for writing */
                            T *cn = few ? c + NR : c + MR * ldc;
#pragma GCC unroll 32
                            for (int i = 0; i < MR; i++)
#pragma GCC unroll 8
                                for (int v = 0; v < NR; v += 64 / (int)sizeof(T))
                                    __builtin_prefetch(cn + i * ldc + v, 1);
                        }}
                        if (bdirect && nr == NR)
                            tile(kk, Ap + ip * MR * kc + off * MR, 1, MR,
                                 B + (pc + off) * rsb + jc + jp * NR, rsb, c, ldc, mr, nr, fst);
                        else if (direct)
                            tile(kk, A + (ic + ip * MR) * rsa + (pc + off) * csa, rsa, csa,
                                 Bp + jp * NR * kc + off * NR, NR, c, ldc, mr, nr, fst);
                        else
                            tile(kk, Ap + ip * MR * kc + off * MR, 1, MR,
                                 Bp + jp * NR * kc + off * NR, NR, c, ldc, mr, nr, fst);
                    }}
                    /* the epilogue of the block's finished columns (their every row panel
                     * done), EPI_PANELS of them at a time: in L2 still */
                    if (epi && last && !few && (o + 1 - ep == EPI_PANELS || o + 1 == outer)) {{
                        epi(ctx, i_off + ic, j_off + jc + ep * NR, mc,
                            min64(nc, (o + 1) * NR) - ep * NR);
                        ep = o + 1;
                    }}
                }}
                if (epi && last && few) /* the block's sums are finished (n's few panels) */
                    epi(ctx, i_off + ic, j_off + jc, mc, nc);
            }}
        }}
    }}
}}

/* Whether the threads share n's panels (1) or m's (0). Each thread packs (or reads) the
 * whole of the operand along the side it does not split: sharing n, all of A (m·k) each;
 * sharing m, all of B (k·n) each. So m's panels when m is the longer side and has a panel
 * for every thread (a weight's gradient, m 768 by n 192 over k 4096, did 1.6× its one-thread
 * CPU time on two threads sharing n: issue 26, tools/bench_threads.py); else n's, as long as
 * it has a panel for every thread or more panels than m, and its largest share of panels is
 * no larger a part of the product than m's would be (a weight's gradient, 192 by 192 in
 * three panels of 64 columns, gave one thread two of them: 1.44× on two threads). */
static int split_columns(int64_t m, int64_t n, int64_t npan, int64_t mpan, int threads) {{
    const int64_t t = threads < 1 ? 1 : threads;
    if (m > n && mpan >= t) return 0;
    if (npan < t && npan < mpan) return 0;
    return (npan + t - 1) / t * mpan <= (mpan + t - 1) / t * npan;
}}

/* Threads take contiguous ranges of NR panels of n or of MR panels of m (`split_columns`),
 * each running the whole nest on its part with its own packed buffers: no barrier, and
 * every element is one thread's fold. */
static void gemm_all(int64_t m, int64_t n, int64_t k, const T *A, int64_t rsa, int64_t csa,
                     const T *B, int64_t rsb, int64_t csb, T *C, int64_t ldc, int threads,
                     epilogue epi, void *ctx, packer pa, packer pb, int band, int64_t stop) {{
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {{ /* the empty sum */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) C[i * ldc + j] = 0;
        if (epi) epi(ctx, 0, 0, m, n);
        return;
    }}
    int64_t npan = (n + NR - 1) / NR, mpan = (m + MR - 1) / MR;
#ifdef WIDE
    /* the wider tiles of `wide_blocking` (fewer loads a term) where n has two of their
     * panels or more and they pad it no more than these: the same fold of each element, so
     * the same bits */
    if (!band && n > WIDE_NR && (n + WIDE_NR - 1) / WIDE_NR * WIDE_NR <= npan * NR) {{
        WIDE(m, n, k, A, rsa, csa, B, rsb, csb, C, ldc, threads, epi, ctx, pa, pb, 0, 0);
        return;
    }}
#endif
    int by_n = split_columns(m, n, npan, mpan, threads);
    int64_t parts = by_n ? npan : mpan;
    int nt = threads < 1 ? 1 : (threads > parts ? (int)parts : threads);
#pragma omp parallel for num_threads(nt) schedule(static, 1) if (nt > 1)
    for (int t = 0; t < nt; t++) {{
        int64_t p0 = parts * t / nt, p1 = parts * (t + 1) / nt;
        if (by_n) {{
            int64_t j0 = p0 * NR, j1 = min64(n, p1 * NR);
            nest(m, j1 - j0, k, A, rsa, csa, B + j0 * csb, rsb, csb, C + j0, ldc, epi, ctx, 0,
                 j0, pa, pb, band, stop, m, j1);
        }} else {{
            int64_t i0 = p0 * MR, i1 = min64(m, p1 * MR);
            nest(i1 - i0, n, k, A + i0 * rsa, rsa, csa, B, rsb, csb, C + i0 * ldc, ldc, epi, ctx,
                 i0, 0, pa, pb, band, stop, i1, n);
        }}
    }}
}}

void presk_gemm_epi_{tag}(int64_t m, int64_t n, int64_t k, const T *A, int64_t rsa,
                       int64_t csa, const T *B, int64_t rsb, int64_t csb, T *C, int64_t ldc,
                       int threads, epilogue epi, void *ctx, packer pa, packer pb) {{
    gemm_all(m, n, k, A, rsa, csa, B, rsb, csb, C, ldc, threads, epi, ctx, pa, pb, 0, 0);
}}

/* A banded product (`band`: BAND_COLS, BAND_KEND, BAND_KSTART; 0 the whole) in one call */
void presk_gemm_band_{tag}(int64_t m, int64_t n, int64_t k, const T *A, int64_t rsa,
                        int64_t csa, const T *B, int64_t rsb, int64_t csb, T *C, int64_t ldc,
                        int threads, int band, int64_t stop) {{
    gemm_all(m, n, k, A, rsa, csa, B, rsb, csb, C, ldc, threads, 0, 0, 0, 0, band, stop);
}}

void presk_gemm_{tag}(int64_t m, int64_t n, int64_t k, const T *A, int64_t rsa, int64_t csa,
                   const T *B, int64_t rsb, int64_t csb, T *C, int64_t ldc, int threads) {{
    gemm_all(m, n, k, A, rsa, csa, B, rsb, csb, C, ldc, threads, 0, 0, 0, 0, 0, 0);
}}
"""


@functools.lru_cache(maxsize=32)
def source(tag: str, blocking: Blocking, tc: Toolchain) -> str:
    """The C of one GEMM for `tag` ("f64" or "f32") at `blocking` (made once for each: `gemm`
    asks at every call)."""
    vl = lanes(tag, tc)
    nr = blocking.nv * vl
    nc = max(nr, blocking.nc // nr * nr)
    mc = max(blocking.mr, blocking.mc // blocking.mr * blocking.mr)
    return TEMPLATE.format(
        tag=tag,
        c=CTYPE[tag],
        mr=blocking.mr,
        nv=blocking.nv,
        vl=vl,
        nr=nr,
        kc=blocking.kc,
        mc=mc,
        nc=nc,
        direct=direct_panels(tag, tc),
        vector_ops=_vector_ops(tag, tc),
    )


LOCAL_NAMES = (
    "T", "vec", "VFMA", "VSET1", "VLOAD", "VLOADU", "VSTORE", "VSTOREU", "MR", "NV", "VL", "NR", "KC",
    "MC", "NC", "PFD", "PFC", "BK", "BDIRECT", "DIRECT", "HAVE_AVX512", "HAVE_TRANSPOSE", "VPARTSTOREU", "VMASKSTOREU", "VMASKLOADU", "transpose", "min64", "ukernel", "tile_rows", "pack_a", "pack_a_rows", "pack_b", "pack_b_rows", "tile", "nest", "scratch",
    "epilogue", "packer", "gemm_all", "BAND_COLS", "BAND_KEND", "BAND_KSTART", "band_last",
    "band_ncols", "band_kend", "band_kstart", "EPI_PANEL", "EPI_PANELS", "WIDE", "WIDE_NR",
    "split_columns",
)  # fmt: skip


def takes_wide(tag: str, main: Blocking, tc: Toolchain, n: int) -> bool:
    """Whether a call of `n` columns runs `wide_blocking`'s tiles (gemm_all's test in C: n
    has two of their panels or more, and they pad it no more than `main`'s). One panel is
    no call's gain, and an entry whose calls all have one (the tiny MiniGPT's 64 columns)
    compiles no wide nest."""
    wide = wide_blocking(tag, main, tc)
    if wide is None:
        return False
    vl = lanes(tag, tc)
    wide_nr = wide.nv * vl
    return n > wide_nr and -(-n // wide_nr) * wide.nv <= -(-n // (main.nv * vl)) * main.nv


def embedded_source(
    tag: str, blocking: Blocking, tc: Toolchain, cols: Iterable[int] | None = None
) -> str:
    """`source` to be included in another C file (the native backend's entries): every
    name of it suffixed with the type, the GEMM itself `static`. Where `wide_blocking` gives
    wider tiles, their nest too (suffixed `{tag}w`), which the GEMM's calls take where they
    pad n no more (a banded call keeps `blocking`'s panels: its repair's bounds are theirs)
    — given `cols`, the calls' columns, only when one of them takes it (its compile, 0.4 s,
    is not paid for nothing)."""
    text = _suffixed(source(tag, blocking, tc), tag)
    wide = wide_blocking(tag, blocking, tc)
    if wide is None or (
        cols is not None and not any(takes_wide(tag, blocking, tc, n) for n in cols)
    ):
        return text
    hook = f"#define WIDE_{tag} gemm_all_{tag}w\n#define WIDE_NR_{tag} NR_{tag}w\n"
    return _suffixed(source(tag, wide, tc), tag, "w") + "\n" + hook + text


def _suffixed(text: str, tag: str, variant: str = "") -> str:
    """`source`'s text with its names suffixed `_{tag}{variant}`, its GEMMs static."""
    text = re.sub(rf"\b({'|'.join(LOCAL_NAMES)})\b", rf"\1_{tag}{variant}", text)
    for name in (f"presk_gemm_{tag}", f"presk_gemm_epi_{tag}", f"presk_gemm_band_{tag}"):
        text = text.replace(
            f"\nvoid {name}(", f"\nstatic __attribute__((unused)) void {name}{variant}("
        )
    return text


def _operand(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """A C-contiguous buffer holding x (cffi's from_buffer wants one), and x's strides in it:
    a C- or Fortran-ordered x is passed as it lies, any other is copied."""
    if not (x.flags.c_contiguous or x.flags.f_contiguous):
        x = np.ascontiguousarray(x)
    rs, cs = x.strides[0] // x.itemsize, x.strides[1] // x.itemsize
    return (x if x.flags.c_contiguous else x.T), rs, cs


def gemm(
    a: np.ndarray,
    b: np.ndarray,
    out: np.ndarray | None = None,
    *,
    threads: int = 1,
    blocking: Blocking | None = None,
    toolchain: Toolchain | None = None,
    band: str | None = None,
    stop: int = 0,
) -> np.ndarray:
    """a @ b through the generated GEMM (both f64 or both f32; 2-D; any row/column strides of
    a C- or Fortran-ordered array). `out`, if given, is C-contiguous and overwritten.
    `toolchain` (tests): another target's vector width, compiled for this machine.
    `band` (`BANDS`: "cols", "kend", "kstart") with `stop`: the banded product of
    `presk_gemm_band_*` (by panels of MR rows: the columns or the terms each panel's rows
    need), written into `out` where it computes, the rest of `out` as it was."""
    if a.dtype != b.dtype or a.dtype not in TAGS or a.ndim != 2 or b.ndim != 2:
        raise TypeError("gemm takes two 2-D arrays, both float64 or both float32")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"gemm: shapes {a.shape} and {b.shape} do not contract")
    tag = TAGS[a.dtype]
    tc = toolchain or find_toolchain()
    blocking = blocking or host_blocking(tag, tc)
    names = (f"presk_gemm_{tag}", f"presk_gemm_band_{tag}")
    module = load(
        source(tag, blocking, tc), CDEF + "\n" + BAND_CDEF, names, threads=True, toolchain=tc
    )
    out = np.empty((m, n), a.dtype) if out is None else out
    if out.shape != (m, n) or out.dtype != a.dtype or not out.flags.c_contiguous:
        raise ValueError("gemm: out must be a C-contiguous array of the result's shape and type")
    (abuf, rsa, csa), (bbuf, rsb, csb) = _operand(a), _operand(b)
    c = CTYPE[tag]
    args = (m, n, k, pointer(abuf, c), rsa, csa, pointer(bbuf, c), rsb, csb, pointer(out, c), n)
    if band is None:
        getattr(module.lib, f"presk_gemm_{tag}")(*args, threads)
    else:
        getattr(module.lib, f"presk_gemm_band_{tag}")(*args, threads, BANDS[band], stop)
    return out
