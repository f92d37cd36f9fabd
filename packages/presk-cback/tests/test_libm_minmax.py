"""The emitter's IEEE maximum and minimum (emit.PRELUDE), scalar and over 8 lanes (the
folds of a strip's 8 rows, presk_cback.strip): NaN wins, then the larger (smaller), +0 above
−0, bit for bit against a reference written from the definition, on every pair of specials
and on random values; and the prelude compiles warning-free for targets without AVX-512
or AVX (no vector wider than the target's crosses a function's boundary: -Wpsabi)."""

import math

import numpy as np
import pytest
from presk_cback.emit import PRELUDE
from presk_cback.load import load, pointer

SOURCE = """
#include <math.h>
#include <stdint.h>
#include <string.h>
PRELUDE
#define LOOPS(T, S, V, tag)                                                            \\
void scalar_##tag(const T *a, const T *b, T *mx, T *mn, int64_t n) {                 \\
    for (int64_t i = 0; i < n; i++) { mx[i] = presk_max##S(a[i], b[i]);               \\
                                      mn[i] = presk_min##S(a[i], b[i]); } }            \\
void lanes_##tag(const T *a, const T *b, T *mx, T *mn, int64_t n) {                  \\
    for (int64_t i = 0; i + 8 <= n; i += 8) {                                          \\
        V va, vb, vx, vn; memcpy(&va, a + i, sizeof va); memcpy(&vb, b + i, sizeof vb); \\
        vx = va; presk_max##S##_x8(vx, vb); vn = va; presk_min##S##_x8(vn, vb);        \\
        memcpy(mx + i, &vx, sizeof vx); memcpy(mn + i, &vn, sizeof vn); } }
LOOPS(double, , presk_f64x8, f64)
LOOPS(float, f, presk_f32x8, f32)
#define T8(T, V, I, tag)                                                               \
void t8_##tag(const T *a, T *out, int64_t n, int64_t v) {                            \
    T rows[8][n]; memcpy(rows, a, sizeof rows);                                        \
    V c[8]; PRESK_T8(V, I, rows, v, c); memcpy(out, c, sizeof c); }
T8(double, presk_f64x8, presk_i64x8, f64)
T8(float, presk_f32x8, presk_i32x8, f32)
""".replace("PRELUDE", PRELUDE)
CDEF = "\n".join(
    f"void {kind}_{tag}(const {ct} *a, const {ct} *b, {ct} *mx, {ct} *mn, int64_t n);"
    for kind in ("scalar", "lanes")
    for tag, ct in (("f64", "double"), ("f32", "float"))
) + "".join(
    f"\nvoid t8_{tag}(const {ct} *a, {ct} *out, int64_t n, int64_t v);"
    for tag, ct in (("f64", "double"), ("f32", "float"))
)
SPECIALS = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, math.inf, -math.inf, math.nan, 5e-324, 1e-310]


def reference(a: float, b: float, larger: bool) -> float:
    if math.isnan(a):
        return a
    if math.isnan(b):
        return b
    if a == b:  # ±0 or the same value
        neg = math.copysign(1, a) < 0 and math.copysign(1, b) < 0
        neg = neg if larger else (math.copysign(1, a) < 0 or math.copysign(1, b) < 0)
        return math.copysign(a, -1.0 if neg else 1.0)
    return max(a, b) if larger else min(a, b)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ieee_maximum_and_minimum_scalar_and_in_lanes(dtype):
    lib = load(SOURCE, CDEF, ("scalar_f64", "scalar_f32", "lanes_f64", "lanes_f32")).lib
    pairs = [(a, b) for a in SPECIALS for b in SPECIALS]
    rng = np.random.default_rng(3)
    pairs += [tuple(p) for p in rng.standard_normal((200, 2)).tolist()]
    pairs += [(-x, -x) for x in rng.standard_normal(8).tolist()]
    pairs += [(0.0, 0.0)] * (-len(pairs) % 8)
    with np.errstate(under="ignore"):
        a = np.array([p[0] for p in pairs], dtype)
        b = np.array([p[1] for p in pairs], dtype)
    tag, ct = ("f64", "double") if dtype == np.float64 else ("f32", "float")
    for kind in ("scalar", "lanes"):
        mx, mn = np.empty_like(a), np.empty_like(a)
        args = [pointer(v, ct) for v in (a, b, mx, mn)]
        getattr(lib, f"{kind}_{tag}")(*args, len(a))
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
            for got, larger in ((mx[i], True), (mn[i], False)):
                want = np.array(reference(x, y, larger), dtype)
                assert got.tobytes() == want.tobytes(), (kind, x, y, larger, got, want)


@pytest.mark.parametrize(
    "dtype, tag, ct", [(np.float64, "f64", "double"), (np.float32, "f32", "float")]
)
def test_a_strips_8_by_8_block_transposed_in_registers(dtype, tag, ct):
    # PRESK_T8: the next 8 terms of a strip's 8 rows as 8 vectors, each a step of the 8
    # folds (presk_cback.strip); every bit moved, NaN payloads and −0 included, at an
    # offset that is no multiple of 8 in rows of 13 terms
    lib = load(SOURCE, CDEF, ("t8_f64", "t8_f32")).lib
    n = 13
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2 ** (8 * np.dtype(dtype).itemsize), (8, n), dtype=np.uint64)
    a = bits.astype(np.uint32 if dtype == np.float32 else np.uint64).view(dtype).copy()
    a[0, 3], a[5, 4] = -0.0, np.nan
    for v in (0, 1, 5):
        out = np.empty((8, 8), dtype)
        getattr(lib, f"t8_{tag}")(pointer(a, ct), pointer(out, ct), n, v)
        assert out.tobytes() == np.ascontiguousarray(a[:, v : v + 8].T).tobytes(), v


@pytest.mark.parametrize("march", ["x86-64", "haswell"])
def test_the_prelude_is_warning_free_on_narrower_targets(tmp_path, march):
    import platform
    import subprocess

    from presk_cback.toolchain import find_toolchain

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86 targets")
    c = tmp_path / "prelude.c"
    c.write_text(SOURCE)
    flags = [f for f in find_toolchain().flags() if f not in ("-march=native", "-shared")]
    cmd = [*find_toolchain().cc, *flags, f"-march={march}", "-Wall", "-Wextra", "-Werror"]
    p = subprocess.run([*cmd, "-c", str(c), "-o", str(tmp_path / "p.o")], capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
