"""presk libm from Python: the header's functions over numpy arrays, bit for bit.

The kernel interpreter (presk-kernel) computes transcendentals through this module, so that
it reproduces the native backend's bits: the helper is the header itself, compiled (through
the cache) into one loop per function and type.

    from presk_cback import libm
    y = libm.apply("tanh", x)        # x: float64 or float32 array (any shape); y: same dtype
    libm.FUNCTIONS                   # ("exp", "expm1", "log", "log1p", "tanh", ...)
    z = libm.power(x, y)             # the C library's pow (the emitter's `powf`)

`lanes=False` compiles the same loops without vectorization (the tests compare both).
"""

from __future__ import annotations

from importlib import resources

import numpy as np

FUNCTIONS = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "erfc", "sin", "cos")
TYPES = {np.dtype(np.float64): ("f64", "double", ""), np.dtype(np.float32): ("f32", "float", "f")}


def header() -> str:
    """The text of presk_libm.h (the C emitter includes it in every generated file)."""
    return resources.files(__name__).joinpath("presk_libm.h").read_text()


def _symbol(name: str, tag: str) -> str:
    return f"presk_libm_{name}_{tag}"


def cdef() -> str:
    """The helper's declarations."""
    return "\n".join(
        [
            f"void {_symbol(n, tag)}(const {ct} *x, {ct} *y, int64_t n);"
            for n in FUNCTIONS
            for tag, ct, _ in TYPES.values()
        ]
        + [
            f"void {_symbol('pow', tag)}(const {ct} *x, const {ct} *y, {ct} *z, int64_t n);"
            for tag, ct, _ in TYPES.values()
        ]
    )


def source(lanes: bool = True) -> str:
    """The helper's C: the header, then one loop per function and type."""
    pragma = "#pragma omp simd\n    " if lanes else ""
    loops = [
        f"void {_symbol(n, tag)}(const {ct} *restrict x, {ct} *restrict y, int64_t n) {{\n"
        f"    {pragma}for (int64_t i = 0; i < n; i++) y[i] = presk_{n}{suffix}(x[i]);\n}}\n"
        for n in FUNCTIONS
        for tag, ct, suffix in TYPES.values()
    ]
    loops += [  # pow is the C library's (the emitter's `powf`), exposed with the rest
        f"void {_symbol('pow', tag)}(const {ct} *restrict x, const {ct} *restrict y, "
        f"{ct} *restrict z, int64_t n) {{\n"
        f"    for (int64_t i = 0; i < n; i++) z[i] = pow{suffix}(x[i], y[i]);\n}}\n"
        for tag, ct, suffix in TYPES.values()
    ]
    return header() + "\n" + "\n".join(loops)


def _module(lanes: bool):
    from presk_cback.load import load

    extra = () if lanes else ("-fno-tree-vectorize",)
    symbols = tuple(_symbol(n, t) for n in (*FUNCTIONS, "pow") for t, _, _ in TYPES.values())
    return load(source(lanes), cdef(), symbols, extra_flags=extra)


def apply(name: str, x, lanes: bool = True) -> np.ndarray:
    """presk libm's `name` elementwise over `x` (float64 or float32, any shape, 0-d
    included), a new array of x's shape and type."""
    from presk_cback.load import pointer

    if name not in FUNCTIONS:
        raise KeyError(f"presk libm has no function {name!r}")
    x = np.asarray(x)
    if x.dtype not in TYPES:
        raise TypeError(f"presk libm computes float64 or float32, not {x.dtype}")
    flat = np.ascontiguousarray(x).reshape(-1)
    tag, ctype, _ = TYPES[x.dtype]
    y = np.empty_like(flat)
    fn = getattr(_module(lanes).lib, _symbol(name, tag))
    fn(pointer(flat, ctype), pointer(y, ctype), flat.size)
    return y.reshape(x.shape)


def power(x, y, lanes: bool = True) -> np.ndarray:
    """The C library's pow elementwise (x and y broadcast, float64 or float32 alike): the
    emitter's `powf`, so that the kernel interpreter can have its bits."""
    from presk_cback.load import pointer

    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if x.dtype != y.dtype or x.dtype not in TYPES:
        raise TypeError(f"pow computes float64 or float32 alike, not {x.dtype}, {y.dtype}")
    fx, fy = (np.ascontiguousarray(a).reshape(-1) for a in (x, y))
    tag, ctype, _ = TYPES[x.dtype]
    z = np.empty_like(fx)
    fn = getattr(_module(lanes).lib, _symbol("pow", tag))
    fn(pointer(fx, ctype), pointer(fy, ctype), pointer(z, ctype), fx.size)
    return z.reshape(x.shape)
