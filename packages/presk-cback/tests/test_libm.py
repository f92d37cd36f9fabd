"""presk libm: its error against MPFR (gmpy2, 256 bits) within the bounds docs/native.md
states, its specials exact, and the same bits with and without vector lanes."""

import dataclasses
import math
import re

import numpy as np
import pytest
from presk_cback.toolchain import find_toolchain
from presk_kernel import libm
from presk_kernel.error_rules import LIBM_ULPS
from presk_kernel.libm import accuracy

# the bounds of docs/native.md, in ulps (measured maxima in the comments)
BOUNDS_F64 = {
    "exp": 1.0,  # 0.905
    "expm1": 2.0,  # 1.590
    "log": 1.0,  # 0.734
    "log1p": 1.0,  # 0.738
    "tanh": 2.5,  # 1.781
    "sigmoid": 2.5,  # 1.701
    "erf": 2.5,  # 1.777
    "erfc": 4.0,  # 3.281
    "sin": 1.0,  # 0.683
    "cos": 1.0,  # 0.647
}


def test_every_function_has_a_bound():
    assert set(BOUNDS_F64) == set(libm.FUNCTIONS)


@pytest.mark.parametrize("name", libm.FUNCTIONS)
def test_f64_error_against_mpfr(name):
    err, at = accuracy.worst(name, np.float64)
    assert err <= BOUNDS_F64[name], f"{name}: {err} ulps at x = {at!r}"


# f32: the series fitted for f32 (fit.py) are within a relative 2^-41 before the one
# rounding, so every result is within 0.5 + 2^-17 ulp (measured: 0.50000); exp and erfc
# compute in f32 arithmetic, within 0.76 and 2.5 ulp (every f32 argument checked:
# docs/native.md)
BOUNDS_F32 = {name: LIBM_ULPS["f32"][name] for name in libm.FUNCTIONS if name in LIBM_ULPS["f32"]}


@pytest.mark.parametrize("name", libm.FUNCTIONS)
def test_f32_error_against_mpfr(name):
    err, at = accuracy.worst(name, np.float32, n=600)
    assert err <= BOUNDS_F32.get(name, 0.5 + 2.0**-16), f"{name}: {err} ulps at x = {at!r}"


@pytest.mark.parametrize("name,above", [("exp", 0.6), ("erfc", 1.5)])
def test_the_f32_arithmetic_functions_are_within_their_bounds_over_a_sweep(name, above):
    # every 4096th f32 bit pattern (a million arguments; the whole 2^32: `python -m
    # presk_kernel.libm.accuracy --sweep NAME`: exp 0.7578 ulp at -87.69805908, erfc 2.4803
    # at 8.73349285); `above`: the sweep does find errors of that size
    err, at = accuracy.sweep(name, step=4096)
    assert above < err <= BOUNDS_F32[name], f"{err} ulps at x = {at!r}"


def test_f32_results_are_rarely_not_the_f64_functions_rounded():
    # the f64 functions rounded once to f32 were correctly rounded on every point tried; the
    # f32 series differ from them only where the exact value lies within 2^-17 ulp of a
    # midpoint between two floats (measured: 1 point in 2 million); exp and erfc, in f32
    # arithmetic, differ on about 1 in 100 (747 of these 65 536) and 12 in 100 (8014)
    x = (np.random.default_rng(5).standard_normal(1 << 16) * 3).astype(np.float32)
    allowed = {"exp": len(x) // 50, "erfc": len(x) // 6}
    for name in libm.FUNCTIONS:
        xi = np.abs(x) if name in ("log", "log1p") else x
        f64 = libm.apply(name, xi.astype(np.float64)).astype(np.float32)
        differ = (libm.apply(name, xi).view(np.int32) != f64.view(np.int32)).sum()
        assert differ <= allowed.get(name, 2), (name, differ)


def test_the_measure_catches_a_wrong_result():
    # a near miss must fail: one ulp off where the result is exact
    exact = accuracy._exact("exp", 0.0)
    assert accuracy.ulps(1.0, exact, np.float64) == 0.0
    assert accuracy.ulps(np.nextafter(1.0, 2.0), exact, np.float64) == 1.0
    assert accuracy.ulps(-0.0, accuracy._exact("sin", 0.0), np.float64) == math.inf
    assert accuracy.ulps(math.nan, exact, np.float64) == math.inf


SIGNED = {  # f(−0) keeps the sign; f(+0)
    "exp": (1.0, 1.0),
    "expm1": (-0.0, 0.0),
    "log": (-math.inf, -math.inf),
    "log1p": (-0.0, 0.0),
    "tanh": (-0.0, 0.0),
    "sigmoid": (0.5, 0.5),
    "erf": (-0.0, 0.0),
    "erfc": (1.0, 1.0),
    "sin": (-0.0, 0.0),
    "cos": (1.0, 1.0),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_specials(dtype):
    for name, (neg, pos) in SIGNED.items():
        y = libm.apply(name, np.array([-0.0, 0.0, math.nan], dtype))
        assert y[0] == neg and math.copysign(1, y[0]) == math.copysign(1, neg), name
        assert y[1] == pos and math.copysign(1, y[1]) == math.copysign(1, pos), name
        assert math.isnan(y[2]), name
    inf = np.array([math.inf, -math.inf], dtype)
    assert libm.apply("exp", inf).tolist() == [math.inf, 0.0]
    assert libm.apply("tanh", inf).tolist() == [1.0, -1.0]
    assert libm.apply("erfc", inf).tolist() == [0.0, 2.0]
    assert np.isnan(libm.apply("sin", inf)).all() and np.isnan(libm.apply("log", -inf[:1])).all()


def _sample(dtype):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-50, 50, 997), rng.standard_normal(1003), [0.0, -0.0]])
    with np.errstate(over="ignore"):
        return np.concatenate([x, accuracy.SPECIALS]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lanes_change_no_bit(dtype):
    x = _sample(dtype)
    for name in libm.FUNCTIONS:
        a, b = libm.apply(name, x), libm.apply(name, x, lanes=False)
        assert a.tobytes() == b.tobytes(), name


def _erfc_mixes():
    rng = np.random.default_rng(11)
    for scale in (0.2, 0.7, 1.0, 3.0, 30.0):  # from almost every lane small to almost none
        yield (rng.standard_normal(3000) * scale).astype(np.float32)
    small, large = rng.uniform(-0.75, 0.75, 1500), rng.uniform(0.75, 12, 1500)
    yield np.concatenate([small[:64], large]).astype(np.float32)  # the sample small, then not
    yield np.concatenate([large[:64], small]).astype(np.float32)  # the other way round
    odd = rng.standard_normal(3000).astype(np.float32)
    odd[::97], odd[5::101], odd[7::103], odd[9::89] = np.nan, np.inf, -np.inf, -0.0
    odd[11::83] = np.uint32(0x7FC01234).view(np.float32)  # a NaN's payload passes
    odd[13::79] = np.float32(0.75)  # the branches' edge, both sides
    odd[15::79] = np.nextafter(np.float32(0.75), np.float32(1))
    yield odd


def test_erfc_in_blocks_is_erfcf_lane_for_lane():
    # f32 erfc's helper with lanes is presk_erfcf_n (the native epilogues' erfc): a block's
    # small lanes apart, its large ones packed, or every lane both; every length, every mix
    for x in _erfc_mixes():
        for n in (1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, len(x)):
            a, b = libm.apply("erfc", x[:n]), libm.apply("erfc", x[:n], lanes=False)
            assert a.tobytes() == b.tobytes(), n


ERFC_BLOCKS = r"""
#include <stdio.h>
#include "presk_libm.h"
/* presk_erfcf_n against presk_erfcf_lanes on each record of the file argv[1] (an int32 n,
 * then n f32), at several of its lengths: the count of lengths whose bits differ */
static float x[1 << 16], a[1 << 16], b[1 << 16];
int main(int argc, char **argv) {
    FILE *f = fopen(argv[argc - 1], "rb");
    int32_t n;
    long bad = 0;
    while (fread(&n, 4, 1, f) == 1 && fread(x, 4, (size_t)n, f) == (size_t)n)
        for (int32_t m = 1; m <= n; m = m < 64 ? m + 7 : m * 2 + 1) {
            presk_erfcf_n(x, a, m);
            presk_erfcf_lanes(x, b, m);
            bad += memcmp(a, b, 4 * (size_t)m) != 0;
        }
    printf("%ld\n", bad);
    return 0;
}
"""


def test_erfc_in_blocks_on_avx2_whatever_the_host(tmp_path, strict_cc):
    # presk_erfcf_n's AVX2 form (its large lanes packed by a permutation, b30) built for
    # Haswell and run here, so that an AVX-512 host checks it too: the mixes and lengths of
    # test_erfc_in_blocks_is_erfcf_lane_for_lane
    import subprocess

    host = find_toolchain()
    if "avx2" not in host.features or "fma" not in host.features:
        pytest.skip("the host runs no AVX2 code")
    # the target's features choose the vector width; the flags name it -march=native
    tc = dataclasses.replace(host, sanitize="", target="-march=haswell -mavx2 -mfma")
    (tmp_path / "presk_libm.h").write_text(libm.header())
    data = tmp_path / "mixes.bin"
    data.write_bytes(b"".join(np.int32(x.size).tobytes() + x.tobytes() for x in _erfc_mixes()))
    c = tmp_path / "t.c"
    c.write_text(ERFC_BLOCKS)
    flags = [
        "-march=haswell" if f == "-march=native" else f
        for f in tc.flags()
        if f not in ("-shared", "-fPIC")
    ]
    assert "-march=haswell" in flags
    p = strict_cc(tc, c, tmp_path / "t", flags, "-lm")
    assert p.returncode == 0, p.stderr
    asm = strict_cc(tc, c, tmp_path / "t.s", flags, "-S")
    assert asm.returncode == 0 and "vpermps" in (tmp_path / "t.s").read_text()  # packed
    run = subprocess.run([str(tmp_path / "t"), str(data)], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "0", run.stdout + run.stderr


EXPF_NEG = r"""
#include <stdio.h>
#include "presk_libm.h"
/* presk_expf_neg against presk_expf on every STEP-th f32 of [-110, 0] (its bit patterns
 * from -0 down to -110) and -110 itself, in vectors as the native strips call it */
static float x[4096], a[4096], b[4096];
static long check(int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) a[i] = presk_expf(x[i]);
#pragma omp simd
    for (int i = 0; i < n; i++) b[i] = presk_expf_neg(x[i]);
    return memcmp(a, b, 4 * (size_t)n) != 0;
}
int main(void) {
    float edge = -110.0f;
    uint32_t hi;
    memcpy(&hi, &edge, 4);
    long bad = 0;
    int n = 0;
    for (uint64_t u = 0x80000000u; u <= hi; u += STEP) {
        uint32_t v = (uint32_t)u;
        memcpy(x + n++, &v, 4);
        if (n == 4096) bad += check(n), n = 0;
    }
    x[n++] = edge;
    bad += check(n);
    printf("%ld\n", bad);
    return 0;
}
"""


def test_expf_neg_is_expf_on_its_range(tmp_path, strict_cc):
    # presk_expf_neg (a softmax's exponentials, presk_cback.strip) gives presk_expf's bits on
    # [-110, 0]: every f32 there in a session's C harness (1 121 714 177 of them), every
    # 97th here, -0, -110 and the subnormal results' edge among them
    import subprocess

    tc = dataclasses.replace(find_toolchain(), sanitize="")
    (tmp_path / "presk_libm.h").write_text(libm.header())
    c = tmp_path / "t.c"
    c.write_text(EXPF_NEG.replace("STEP", "97u"))
    flags = [f for f in tc.flags() if f not in ("-shared", "-fPIC")]
    p = strict_cc(tc, c, tmp_path / "t", flags, "-lm")
    assert p.returncode == 0, p.stderr
    run = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "0"


def test_any_shape_and_a_strided_input():
    x = np.linspace(-2, 2, 24).reshape(2, 3, 4)
    y = libm.apply("tanh", x[:, :, ::2])
    assert y.shape == (2, 3, 2)
    assert y.tobytes() == libm.apply("tanh", np.ascontiguousarray(x[:, :, ::2])).tobytes()
    with pytest.raises(TypeError):
        libm.apply("exp", np.arange(3))


def test_the_helper_vectorizes_every_loop_and_is_warning_free(tmp_path, strict_cc):
    tc = dataclasses.replace(find_toolchain(), sanitize="")  # sanitizers block vectorizing
    c = tmp_path / "libm.c"
    c.write_text(libm.source(lanes=True))
    flags = [f for f in tc.flags() if f not in ("-shared", "-fPIC")]
    p = strict_cc(tc, c, tmp_path / "libm.s", flags, "-fopt-info-vec-optimized", "-S")
    assert p.returncode == 0, p.stderr
    vectorized = {int(ln.split(":")[1]) for ln in p.stderr.splitlines() if "loop vectorized" in ln}
    header = libm.header().splitlines()
    # the header's own loops this target compiles (presk_erfcf_n's, which f32 erfc's helper
    # calls, differ by the vector extension): the line after each PRESK_LIBM_SIMD the
    # preprocessor keeps, which marks its `#pragma omp simd` with the macro's line
    kept = strict_cc(tc, c, tmp_path / "libm.i", flags, "-E")
    assert kept.returncode == 0, kept.stderr
    text = (tmp_path / "libm.i").read_text()
    marks = re.findall(r'^# (\d+) "[^"]*"\n#pragma omp simd$', text, re.M)
    own = {int(n) + 1 for n in marks if int(n) <= len(header)}
    assert own and all(header[n - 2] == "PRESK_LIBM_SIMD" for n in own)
    assert own <= vectorized
    helpers = {n for n in vectorized if n > len(header)}
    assert len(helpers) == 2 * len(libm.FUNCTIONS) - 1


def test_a_scalar_keeps_its_shape():
    y = libm.apply("exp", np.float32(1.0))
    assert y.shape == () and y.dtype == np.float32
    assert libm.apply("sin", np.ones((2, 0))).shape == (2, 0)


def test_power_is_the_c_librarys_pow():
    x = np.array([2.0, 0.5, -8.0, 0.0, 10.0])
    y = np.array([0.5, 3.0, 1.0 / 3.0, -1.0, -300.0])
    got = libm.power(x, y)
    assert got[0] == math.sqrt(2.0) and got[1] == 0.125 and math.isnan(got[2])
    assert got[3] == math.inf and got[4] == 1e-300
    assert libm.power(np.float32(2.0), np.array([3.0], np.float32)).tolist() == [8.0]
