"""presk libm against MPFR: the largest error in ulps of each function and type, over the
points that matter (`.venv/bin/python -m presk_kernel.libm.accuracy` prints the table that
docs/native.md quotes; the tests assert its bounds). `--speed` prints instead each
function's time per element (`speed`).

The reference is gmpy2 at 256 bits; the error of y at x is |y − f(x)| / ulp(f(x)), the ulp
of the format at f(x) (subnormal ulps below the normal range). Specials — ±0, ±inf, NaN,
results that overflow or underflow to zero — must come out exactly as the correctly rounded
result (the sign of a zero included).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import gmpy2
import numpy as np

from presk_kernel import libm

FORMATS = {  # precision, smallest normal exponent (of the ulp), largest finite
    np.dtype(np.float64): (53, -1022, float(np.finfo(np.float64).max)),
    np.dtype(np.float32): (24, -126, float(np.finfo(np.float32).max)),
}


def _exact(name: str, x: float) -> gmpy2.mpfr:
    ctx = gmpy2.context(precision=256)
    with ctx:
        v = gmpy2.mpfr(x)
        match name:
            case "sigmoid":
                return 1 / (1 + gmpy2.exp(-v))
            case _:
                return getattr(gmpy2, name)(v)


def ulps(got: float, exact: gmpy2.mpfr, dtype: np.dtype) -> float:
    """The error of `got` in ulps of `dtype` at `exact`; inf for a wrong special."""
    prec, emin, big = FORMATS[np.dtype(dtype)]
    if gmpy2.is_nan(exact):
        return 0.0 if math.isnan(got) else math.inf
    if math.isnan(got):
        return math.inf
    if not gmpy2.is_finite(exact) or abs(exact) > big * (1 + 2.0**-prec):
        return 0.0 if math.isinf(got) and (got > 0) == (exact > 0) else math.inf
    if gmpy2.is_zero(exact):
        same = got == 0.0 and math.copysign(1, got) == (-1 if gmpy2.is_signed(exact) else 1)
        return 0.0 if same else math.inf
    if math.isinf(got):
        return math.inf
    e = max(gmpy2.get_exp(exact) - 1, emin) if exact != 0 else emin  # exact in [2^e, 2^(e+1))
    with gmpy2.context(precision=256):
        err = abs(gmpy2.mpfr(got) - exact) / gmpy2.mpfr(2) ** (e - prec + 1)
    return float(err)


TRIG_MAX = 2.0**50  # sin and cos are NaN from there on (no Payne–Hanek reduction)
SPECIALS = [
    0.0,
    -0.0,
    math.inf,
    -math.inf,
    math.nan,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    -2.2250738585072014e-308,
    1e-300,
    -1e-300,
    1.0,
    -1.0,
    0.5,
    2.0,
    1e300,
    -1e300,
]
EDGES = {  # where results overflow, underflow or turn subnormal
    "exp": [
        709.782712893384,
        709.7827128933841,
        -708.3964185322641,
        -745.1332191019411,
        -745.1332191019412,
        88.72283935546875,
        -87.33654022216797,
        -103.97207641601562,
    ],
    "expm1": [709.782712893384, 709.7827128933841, -37.5, 1e-17, -1e-17],
    "sigmoid": [-745.13, -708.4, -709.79, 36.8, 37.5, -87.3, -103.9],
    "erfc": [26.5, 27.2, 27.3, 9.19, 10.05],
    "tanh": [19.1, 22.0, 9.0],
}


# f32: where the results are neither 0 nor ±inf (nor ±1 for tanh) and where they turn subnormal
F32_RANGES = {
    "exp": [(-104, 89), (-104, -87)],
    "expm1": [(-18, 89)],
    "tanh": [(-10, 10)],
    "sigmoid": [(-105, 105), (-105, -87)],
    "erf": [(-4, 4)],
    "erfc": [(-4, 10.1), (9.1, 10.1)],
}


def points(name: str, rng: np.random.Generator, n: int = 2000, f32: bool = False) -> np.ndarray:
    """Random points over the ranges that matter for `name`, the specials and the edges;
    `f32` adds as many over F32_RANGES."""
    x = _points(name, rng, n)
    if not f32:
        return x
    u = rng.uniform
    extra = [u(lo, hi, n // (2 * len(F32_RANGES[name]))) for lo, hi in F32_RANGES.get(name, [])]
    if name == "log":
        extra = [2.0 ** u(-149, 128, n // 2)]
    return np.concatenate([x, *extra])


def _points(name: str, rng: np.random.Generator, n: int) -> np.ndarray:
    u = rng.uniform
    wide = {
        "exp": u(-746, 710, n // 2),
        "expm1": u(-40, 710, n // 2),
        "log": 2.0 ** u(-1074, 1024, n // 2),
        "log1p": np.concatenate([u(-1, 0, n // 4), 2.0 ** u(-60, 100, n // 4)]),
        "tanh": u(-25, 25, n // 2),
        "sigmoid": u(-750, 750, n // 2),
        "erf": u(-7, 7, n // 2),
        "erfc": u(-7, 30, n // 2),
        "sin": np.concatenate([u(-1e5, 1e5, n // 4), np.arange(1, n // 4 + 1) * (math.pi / 2)]),
        "cos": np.concatenate([u(-1e5, 1e5, n // 4), np.arange(1, n // 4 + 1) * (math.pi / 2)]),
        "big": 2.0 ** u(17, 49.9, n // 8) * rng.choice([-1, 1], n // 8),
    }
    wide = wide[name] if name not in ("sin", "cos") else np.concatenate([wide[name], wide["big"]])
    narrow = u(-2, 2, n // 2) if name != "log" else u(0, 3, n // 2)
    tiny = 2.0 ** u(-70, -10, 20) * rng.choice([-1, 1], 20)
    return np.concatenate([wide, narrow, tiny, SPECIALS, EDGES.get(name, [])])


def worst(name: str, dtype, rng: np.random.Generator | None = None, n: int = 2000):
    """(largest error in ulps, the x where it is) of `name` in `dtype`."""
    rng = rng or np.random.default_rng(20261130)
    with np.errstate(over="ignore"):
        x = points(name, rng, n, np.dtype(dtype) == np.float32).astype(dtype)
    y = libm.apply(name, x)
    best = (0.0, float("nan"))
    for xi, yi in zip(x.tolist(), y.tolist(), strict=True):
        if name in ("sin", "cos") and abs(xi) >= TRIG_MAX:
            e = 0.0 if math.isnan(yi) else math.inf
        else:
            e = ulps(yi, _exact(name, xi), dtype)
        if e > best[0] or math.isinf(e):
            best = (e, xi)
    return best


def sweep(name: str, step: int = 1, chunk: int = 1 << 24) -> tuple[float, float]:
    """(largest error in ulps, the x where it is) of the f32 `name` over every `step`-th f32
    bit pattern (every one with step 1: a few minutes for erfc), against the f64 function at
    the same argument (within a few f64 ulps of the exact value: an error of 2⁻⁴⁸ f32 ulp).
    Results within the f32 range only; the specials and the overflows are `worst`'s."""
    best = (0.0, float("nan"))
    for start in range(0, 1 << 32, chunk):
        bits = np.arange(start, min(start + chunk, 1 << 32), step, dtype=np.uint64)
        x = bits.astype(np.uint32).view(np.float32)
        x = x[np.isfinite(x)]
        y = libm.apply(name, x).astype(np.float64)
        ref = libm.apply(name, x.astype(np.float64))
        keep = np.abs(ref) <= FORMATS[np.dtype(np.float32)][2]
        x, y, ref = x[keep], y[keep], ref[keep]
        with np.errstate(divide="ignore"):
            exp = np.maximum(np.floor(np.log2(np.abs(ref))), -126)
        err = np.abs(y - ref) / np.exp2(exp - 23)
        if len(err) and err.max() > best[0]:
            i = int(np.argmax(err))
            best = (float(err[i]), float(x[i]))
    return best


def speed(name: str, dtype, n: int = 1 << 14, repeat: int = 40, runs: int = 7) -> float:
    """Nanoseconds an element of `name` in `dtype` (the helper's loop, in vector lanes) over n
    normal points of standard deviation 3 (|x| for log and log1p), which stay in the
    caches: the median of `runs` runs of `repeat` calls, by the thread's CPU clock."""
    from presk_core.cc.load import pointer

    x = np.random.default_rng(1).standard_normal(n) * 3
    x = np.abs(x) if name in ("log", "log1p") else x
    x = x.astype(dtype)
    y = np.empty_like(x)
    tag, ctype, _ = libm.TYPES[np.dtype(dtype)]
    fn = getattr(libm._module(True).lib, libm._symbol(name, tag))
    px, py = pointer(x, ctype), pointer(y, ctype)
    fn(px, py, n)
    times = []
    for _ in range(runs):
        start = time.thread_time()
        for _ in range(repeat):
            fn(px, py, n)
        times.append((time.thread_time() - start) / (repeat * n) * 1e9)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", action="store_true", help="ns an element, not the errors")
    parser.add_argument("--sweep", metavar="NAME", help="every f32 argument of NAME (erfc, …)")
    args = parser.parse_args()
    if args.sweep:
        err, at = sweep(args.sweep)
        print(f"{args.sweep} f32 over every finite argument: {err:.4f} ulp at {at!r}")
        return
    if args.speed:
        print(f"{'function':10} {'f64 ns':>8} {'f32 ns':>8}   (an element, median of 7)")
        for name in libm.FUNCTIONS:
            print(f"{name:10} {speed(name, np.float64):8.2f} {speed(name, np.float32):8.2f}")
        return
    print(f"{'function':10} {'f64 ulps':>10} {'at':>24} {'f32 ulps':>10} {'at':>16}")
    for name in libm.FUNCTIONS:
        e64, x64 = worst(name, np.float64)
        e32, x32 = worst(name, np.float32)
        print(f"{name:10} {e64:10.3f} {x64!r:>24} {e32:10.5f} {x32!r:>16}")


if __name__ == "__main__":
    main()
