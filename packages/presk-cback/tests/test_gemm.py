"""The generated GEMM gives the bits of the naive fused fold (c = a₀b₀, then fma in increasing
k) for every size, blocking and thread count, in f64 and f32."""

import dataclasses

import numpy as np
import pytest
from kernel_entries import same_bits
from presk_cback import gemm as G
from presk_cback.load import load, pointer
from presk_cback.toolchain import find_toolchain

REFERENCE = """#include <math.h>
#include <stdint.h>
#define REF(tag, T, FMA) \\
void presk_gemm_ref_##tag(int64_t m, int64_t n, int64_t k, const T *A, const T *B, T *C) { \\
    for (int64_t i = 0; i < m; i++) \\
        for (int64_t j = 0; j < n; j++) { \\
            T c = k ? A[i * k] * B[j] : 0; \\
            for (int64_t p = 1; p < k; p++) c = FMA(A[i * k + p], B[p * n + j], c); \\
            C[i * n + j] = c; \\
        } \\
}
REF(f64, double, fma)
REF(f32, float, fmaf)
"""
REF_CDEF = """
void presk_gemm_ref_f64(int64_t, int64_t, int64_t, const double *, const double *, double *);
void presk_gemm_ref_f32(int64_t, int64_t, int64_t, const float *, const float *, float *);
"""
SMALL = G.Blocking(mr=3, nv=1, kc=16, mc=7, nc=1)  # many blocks, edge tiles everywhere
SIZES = [
    (1, 1, 1),
    (7, 7, 7),
    (33, 33, 33),
    (129, 129, 129),
    (7, 129, 33),
    (129, 33, 1),
    (1, 7, 129),
    (33, 400, 70),
    (9, 800, 50),
]  # m, k, n; k = 400 is one block (at most 2·KC terms are), 800 three of 384


def reference(a, b):
    tag = G.TAGS[a.dtype]
    lib = load(REFERENCE, REF_CDEF, ("presk_gemm_ref_f64", "presk_gemm_ref_f32")).lib
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    c = G.CTYPE[tag]
    getattr(lib, f"presk_gemm_ref_{tag}")(
        a.shape[0], b.shape[1], a.shape[1], pointer(a, c), pointer(b, c), pointer(out, c)
    )
    return out


def operands(m, k, n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    a[rng.random(a.shape) < 0.05] = -0.0  # signed zeros through the fold
    return a, b


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("m", "k", "n"), SIZES)
def test_bits_of_the_fold_for_every_blocking_and_thread_count(dtype, m, k, n):
    a, b = operands(m, k, n, dtype)
    ref = reference(a, b)
    assert np.allclose(ref, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
    for blocking in (None, SMALL):
        for threads in (1, 2):
            got = G.gemm(a, b, threads=threads, blocking=blocking)
            assert same_bits(got, ref), (blocking, threads)


def test_a_near_miss_is_seen():
    # the same products summed from +0, or multiplied then added, differ somewhere
    a, b = operands(33, 129, 33, np.float32, seed=3)
    ref = reference(a, b)
    unfused = np.zeros_like(ref)
    for p in range(a.shape[1]):
        unfused = unfused + np.outer(a[:, p], b[p])
    assert not same_bits(unfused, ref)
    z = np.array([[-0.0]], np.float64)
    assert str(G.gemm(z, np.array([[1.0]]))[0, 0]) == "-0.0"  # not fma(−0, 1, +0) = +0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_signed_zeros_and_specials(dtype):
    a = np.array([[-0.0, -0.0], [1.0, np.inf], [0.0, 1.0]], dtype)
    b = np.array([[1.0, 0.0, np.nan], [1.0, 1.0, 2.0]], dtype)
    got, ref = G.gemm(a, b, threads=2, blocking=SMALL), reference(a, b)
    assert np.array_equal(got, ref, equal_nan=True)
    assert np.signbit(got[0, 0]) and np.signbit(ref[0, 0])


def test_strided_operands_and_an_empty_sum():
    a, b = operands(40, 50, 30, np.float64, seed=1)
    ref = reference(a, b)
    at, bt = np.asfortranarray(a), np.asfortranarray(b)  # transposed in memory
    assert same_bits(G.gemm(at, bt), ref)
    wide = np.zeros((40, 100))
    wide[:, ::2] = a[:, :50]
    assert same_bits(G.gemm(wide[:, ::2], b), ref)  # neither C- nor F-ordered: copied
    assert G.gemm(np.ones((3, 0)), np.ones((0, 4))).tolist() == [[0.0] * 4] * 3
    with pytest.raises(ValueError):
        G.gemm(a, a)
    with pytest.raises(TypeError):
        G.gemm(a, b.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    ("m", "k", "n"), [(37, 400, 70), (25, 64, 64), (25, 40, 260), (512, 20, 40)]
)
def test_every_operand_order_packs_to_the_same_bits(dtype, m, k, n):
    # the packers copy a full panel along whichever axis of the operand is contiguous (on
    # AVX-512 VL×VL blocks transposed in registers, the rest of k one element at a time);
    # n = 260 has 8 panels and more of every default NR: A's rows are packed, not read in
    # place; m = 512 puts a Fortran-ordered A's rows 2 KB apart or more: packed too
    a, b = operands(m, k, n, dtype, seed=4)
    ref = reference(a, b)
    for fa in (np.ascontiguousarray, np.asfortranarray):
        for fb in (np.ascontiguousarray, np.asfortranarray):
            for blocking in (None, SMALL):
                got = G.gemm(fa(a), fb(b), blocking=blocking)
                assert same_bits(got, ref), (fa.__name__, fb.__name__, blocking)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("blocking", [None, G.Blocking(6, 4, 384, 96)], ids=str)
def test_few_rows_read_b_where_it_lies_with_the_same_bits(dtype, blocking):
    # m up to two panels of A reads B's full panels where they lie when their packed block
    # would be larger than BDIRECT (row k at k·rsb, k in blocks of BK, the next tile's lines
    # prefetched), the last panel's columns packed: rows of one panel, of two, of an edge of
    # 4 and 1 (5, 2·MR − 1), and of more (packed as before); k of 25 blocks and of 4 (the
    # last of 4 terms); B's rows wider than n (rsb ≠ n). Packed as before: a small block
    # (100 columns), one panel of NR columns (its stride is NR)
    tc = find_toolchain()
    tag = G.TAGS[np.dtype(dtype)]
    blocking = blocking or G.host_blocking(tag, tc)
    c = G.CTYPE[tag]
    names = (f"presk_gemm_{tag}", f"presk_gemm_band_{tag}")  # the cdef G.gemm declares
    lib = G.load(G.source(tag, blocking, tc), G.CDEF + "\n" + G.BAND_CDEF, names,
                 threads=True, toolchain=tc).lib  # fmt: skip
    fn = getattr(lib, names[0])
    nr = blocking.nv * G.lanes(tag, tc)
    mr = blocking.mr
    shapes = ((800, 700, 24), (100, 2000, 5), (800, 100, 24), (40, nr, 0))
    for m in sorted({1, 5, mr, 2 * mr - 1, 2 * mr, 2 * mr + 1}):
        for k, n, pad in shapes:
            a, b = operands(m, k, n, dtype, seed=m + k)
            ref = reference(a, b)
            wide = np.full((k, n + pad), np.nan, dtype)
            wide[:, pad // 2 : pad // 2 + n] = b
            for threads in (1, 2):
                got = np.empty((m, n), dtype)
                fn(m, n, k, pointer(a, c), k, 1, pointer(wide, c) + pad // 2, n + pad, 1,
                   pointer(got, c), n, threads)  # fmt: skip
                assert same_bits(got, ref), (m, k, n, pad, threads)


@pytest.mark.parametrize("tag", ["f64", "f32"])
def test_generated_c_is_warning_free(tmp_path, tag, strict_cc):
    tc = find_toolchain()
    c = tmp_path / "gemm.c"
    c.write_text(G.source(tag, G.default_blocking(tag, tc), tc))
    p = strict_cc(tc, c, tmp_path / "gemm.so", tc.flags(threads=True))
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("target", ["-march=haswell -mavx2 -mfma", "-march=x86-64"])
def test_the_narrower_vector_paths_keep_the_bits(target):
    # AVX2 intrinsics (32 bytes) and the generic vector_size(16) path with a lane loop of
    # fma, as other machines would build them (compiled here for this one); every operand
    # order: AVX2's packers transpose a row-major A's panels (n = 260: packed, not read in
    # place) and a column-major B's in registers
    tc = dataclasses.replace(find_toolchain(), target=target)
    assert tc.vector_bytes == (32 if "avx2" in target else 16)
    orders = (np.ascontiguousarray, np.asfortranarray)
    for dtype in (np.float64, np.float32):
        for m, k, n in ((33, 400, 70), (25, 40, 260)):
            a, b = operands(m, k, n, dtype, seed=4)
            ref = reference(a, b)
            for fa in orders:
                for fb in orders:
                    got = G.gemm(fa(a), fb(b), threads=2, toolchain=tc)
                    assert same_bits(got, ref), (m, k, n, fa.__name__, fb.__name__)
        source = G.source(G.TAGS[np.dtype(dtype)], G.default_blocking("f64", tc), tc)
        assert ("_mm256_fmadd" in source) == ("avx2" in target)


def test_a_blocking_kept_for_the_host_is_used(monkeypatch, tmp_path):
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path))
    tc = find_toolchain()
    assert G.host_blocking("f64", tc) == G.default_blocking("f64", tc)
    G.save_blocking("f64", tc, SMALL)
    assert G.host_blocking("f64", tc) == SMALL
    assert G.host_blocking("f32", tc) == G.default_blocking("f32", tc)
    other = dataclasses.replace(tc, target="-march=znver4")
    assert G.host_blocking("f64", other) == G.default_blocking("f64", other)
    used = []
    source = G.source
    monkeypatch.setattr(G, "source", lambda tag, bl, tc: used.append(bl) or source(tag, bl, tc))
    a, b = operands(20, 30, 40, np.float64)
    assert same_bits(G.gemm(a, b), reference(a, b))
    assert used == [SMALL]
    (tmp_path / "gemm-blocking.json").write_text("not json")
    assert G.host_blocking("f64", tc) == G.default_blocking("f64", tc)


def _band_bounds(band, mr, m, n, k, stop, r):
    """Row r's columns or terms in `presk_gemm_band_*` (by panels of MR rows from row 0)."""
    first, last = r // mr * mr, min(m, r // mr * mr + mr) - 1
    if band == "cols":
        return 0, max(0, min(n, last + stop))
    if band == "kend":
        return 0, max(1, min(k, last + stop))
    return max(0, min(k - 1, first + stop)), k


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("band", ["cols", "kend", "kstart"])
def test_a_banded_product_computes_each_panels_columns_or_terms(dtype, band):
    # by panels of MR rows: the columns their last row needs (the rest not written), the
    # fold over the terms [0, their last row's r + stop) or [their first row's, k); k = 800
    # spans three KC blocks of 384, SMALL's KC 16 many; stops past either end of a row
    tc = find_toolchain()
    for (m, k, n), stops in (((37, 70, 45), (1, -4, 30)), ((30, 800, 20), (0, 150, 500))):
        a, b = operands(m, k, n, dtype, seed=m)
        for blocking in (None, SMALL):
            mr = (blocking or G.host_blocking(G.TAGS[np.dtype(dtype)], tc)).mr
            for stop in stops:
                want = np.full((m, n), np.nan, dtype)
                for r in range(m):
                    lo, hi = _band_bounds(band, mr, m, n, k, stop, r)
                    if band == "cols":
                        want[r, :hi] = reference(a[r : r + 1], b[:, :hi])[0] if hi else 0
                    else:
                        want[r] = reference(a[r : r + 1, lo:hi], b[lo:hi])[0]
                for threads in (1, 2):
                    got = np.full((m, n), np.nan, dtype)
                    G.gemm(a, b, got, threads=threads, blocking=blocking, band=band, stop=stop)
                    if band == "cols":  # the needed columns; any other written is the fold
                        need = ~np.isnan(want)
                        assert same_bits(got[need], want[need]), (blocking, stop, threads)
                        full = reference(a, b)
                        done = ~np.isnan(got)
                        assert same_bits(got[done], full[done])
                    else:
                        assert same_bits(got, want), (blocking, stop, threads)


def test_wider_tiles_only_for_f32_on_avx512():
    tc = find_toolchain()
    wide = dataclasses.replace(tc, target="-march=icelake-server -mavx512f -mavx2 -mfma")
    narrow = dataclasses.replace(tc, target="-march=haswell -mavx2 -mfma")
    main = G.default_blocking("f32", wide)
    assert G.wide_blocking("f32", main, wide) == G.Blocking(6, 4, 384, 96)
    assert G.wide_blocking("f64", G.default_blocking("f64", wide), wide) is None
    assert G.wide_blocking("f32", G.default_blocking("f32", narrow), narrow) is None
    assert G.wide_blocking("f32", G.Blocking(6, 4), wide) is None  # already as wide
    # 64 columns a tile against 32: taken where n has two such tiles or more and they pad it
    # no more
    ns = (32, 64, 86, 96, 128, 192, 256, 576, 768)
    taken = {n: G.takes_wide("f32", main, wide, n) for n in ns}
    assert taken == {32: False, 64: False, 86: False, 96: False, 128: True, 192: True,
                     256: True, 576: True, 768: True}  # fmt: skip
    assert "gemm_all_f32w" not in G.embedded_source("f32", main, wide, cols=[32, 64, 96])
    assert "gemm_all_f32w" in G.embedded_source("f32", main, wide, cols=[32, 192])
    text = G.embedded_source("f32", main, wide)
    assert (
        "#define WIDE_f32 gemm_all_f32w" in text
        and "WIDE_f32w(" not in text.split("#define WIDE_f32 ")[1]
    )


WRAP = """
void wrap_{tag}(int64_t m, int64_t n, int64_t k, const {c} *A, const {c} *B, {c} *C, int t) {{
    presk_gemm_{tag}(m, n, k, A, k, 1, B, n, 1, C, n, t);
}}
void wrap_band_{tag}(int64_t m, int64_t n, int64_t k, const {c} *A, const {c} *B, {c} *C,
                     int band, int64_t stop) {{
    presk_gemm_band_{tag}(m, n, k, A, k, 1, B, n, 1, C, n, 1, band, stop);
}}
"""


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_wider_tiles_keep_the_bits_and_a_band_keeps_its_panels(monkeypatch, dtype):
    # wider tiles forced on any machine (NR 2 vectors against 1): taken where n has two of
    # them and they pad it no more (n 4 vectors less one), not where it has one (2 vectors)
    # or they pad it more (1 or 3); the bits are the fold's either way, and a banded call
    # keeps the main blocking's panels of MR rows
    tc = find_toolchain()
    tag = G.TAGS[np.dtype(dtype)]
    vl = G.lanes(tag, tc)
    main, wide = G.Blocking(3, 1, 16, 7, 1), G.Blocking(2, 2, 16, 6, 1)
    monkeypatch.setattr(G, "wide_blocking", lambda t, m, c: wide)
    text = G.embedded_source(tag, main, tc)
    assert f"gemm_all_{tag}w" in text
    c = G.CTYPE[tag]
    cdef = (
        f"void wrap_{tag}(int64_t, int64_t, int64_t, const {c} *, const {c} *, {c} *, int);"
        f"void wrap_band_{tag}(int64_t, int64_t, int64_t, const {c} *, const {c} *, {c} *,"
        " int, int64_t);"
    )
    lib = load(text + WRAP.format(tag=tag, c=c), cdef, (f"wrap_{tag}", f"wrap_band_{tag}"),
               threads=True).lib  # fmt: skip
    for n in (vl, 2 * vl, 3 * vl, 4 * vl - 1):
        for threads in (1, 2):
            a, b = operands(11, 40, n, dtype, seed=n)
            out = np.empty((11, n), dtype)
            getattr(lib, f"wrap_{tag}")(11, n, 40, pointer(a, c), pointer(b, c), pointer(out, c),
                                        threads)  # fmt: skip
            assert same_bits(out, reference(a, b)), (n, threads)
    a, b = operands(11, 40, 2 * vl, dtype, seed=1)
    out = np.empty((11, 2 * vl), dtype)
    getattr(lib, f"wrap_band_{tag}")(11, 2 * vl, 40, pointer(a, c), pointer(b, c),
                                     pointer(out, c), G.BANDS["kend"], 1)  # fmt: skip
    for r in range(11):  # the terms its panel of main.mr rows needs (wide.mr would differ)
        _, hi = _band_bounds("kend", main.mr, 11, 2 * vl, 40, 1, r)
        assert same_bits(out[r], reference(a[r : r + 1, :hi], b[:hi])[0]), r


SPLIT = """
int wrap_split(int64_t m, int64_t n, int64_t npan, int64_t mpan, int threads) {
    return split_columns(m, n, npan, mpan, threads);
}
"""


def test_threads_split_the_side_that_shares_best_and_the_model_agrees():
    # a weight's gradient 192 by 192 in three panels of 64 columns: two threads sharing n
    # would give one of them two thirds of C (1.44× on two threads); they share m's 32
    # panels. Where n's panels share evenly, or m is the longer side, the rule is as before.
    # The layout model's mirror of the rule (a stage before this one) gives the same answer.
    from presk_kernel.layout_model import split_columns

    tc = find_toolchain()
    text = G.source("f32", G.Blocking(6, 4, 384, 96), tc) + SPLIT
    lib = load(text, "int wrap_split(int64_t, int64_t, int64_t, int64_t, int);",
               ("wrap_split",), threads=True).lib  # fmt: skip
    table = {
        (192, 192, 3, 32, 2): 0,  # n's three panels 2 and 1: m's
        (384, 384, 6, 64, 2): 1,  # 3 and 3
        (768, 192, 3, 128, 2): 0,  # m the longer side
        (192, 768, 12, 32, 2): 1,
        (6, 192, 3, 1, 2): 1,  # one panel of m: n's, uneven as they are
        (12, 6, 1, 2, 2): 0,  # n has fewer panels than the threads and than m
        (192, 192, 3, 32, 1): 1,  # one thread: n's, as before
    }
    for (m, n, npan, mpan, t), by_n in table.items():
        assert lib.wrap_split(m, n, npan, mpan, t) == by_n, (m, n, t)
    for m in (1, 6, 12, 96, 192, 200, 768):
        for n in (1, 32, 64, 128, 192, 320, 1536):
            for t in (1, 2, 3, 4):
                npan, mpan = -(-n // 64), -(-m // 6)
                c = lib.wrap_split(m, n, npan, mpan, t)
                assert c == split_columns(m, n, npan, mpan, t), (m, n, t)
