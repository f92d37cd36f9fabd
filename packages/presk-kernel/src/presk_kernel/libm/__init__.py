"""presk libm: the kernels' transcendentals in plain C (presk_libm.h), and the same from
Python over numpy arrays, bit for bit.

The header is the kernels' arithmetic (DESIGN §11): the C emitter (presk-cback) includes it
in every generated file, and the kernel interpreter computes its transcendentals through a
`Libm`, the header itself compiled through presk's one toolchain, cache and loader
(presk_core.cc) into one loop per function and type, so that it reproduces the native
backend's bits. There is no stand-in: where it cannot be loaded, `load` raises the
diagnostic (E9001 without a compiler; the cache's E9003–E9009).

    from presk_kernel import libm
    m = libm.load()                  # a Libm (compiled once, from the cache after)
    y = m.apply("tanh", x)           # x: float64 or float32 array (any shape); y: same dtype
    z = m.power(x, y)                # the C library's pow (the emitter's `powf`)
    libm.apply("tanh", x)            # the same through the process's Libm
    libm.FUNCTIONS                   # ("exp", "expm1", "log", "log1p", "tanh", ...)

`lanes=False` compiles the same loops without vectorization (the tests compare both).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

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

    def body(n: str, suffix: str) -> str:
        if lanes and (n, suffix) == ("erfc", "f"):  # the native epilogues' blocks of erfc
            return "presk_erfcf_n(x, y, n);"
        return f"{pragma}for (int64_t i = 0; i < n; i++) y[i] = presk_{n}{suffix}(x[i]);"

    loops = [
        f"void {_symbol(n, tag)}(const {ct} *restrict x, {ct} *restrict y, int64_t n) {{\n"
        f"    {body(n, suffix)}\n}}\n"
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


GENERATOR = "presk libm 1"  # bump when the helper's calling convention changes


def _module(lanes: bool):
    from presk_core.cc.load import load as load_c

    extra = () if lanes else ("-fno-tree-vectorize",)
    symbols = tuple(_symbol(n, t) for n in (*FUNCTIONS, "pow") for t, _, _ in TYPES.values())
    return load_c(GENERATOR, source(lanes), cdef(), symbols, extra_flags=extra)


@dataclass(frozen=True)
class Libm:
    """presk libm loaded, callable over numpy arrays (what the kernel interpreter is given)."""

    lib: Any  # cffi's library of the helper

    def apply(self, name: str, x) -> np.ndarray:
        """presk libm's `name` elementwise over `x` (float64 or float32, any shape, 0-d
        included), a new array of x's shape and type."""
        from presk_core.cc.load import pointer

        if name not in FUNCTIONS:
            raise KeyError(f"presk libm has no function {name!r}")
        x = np.asarray(x)
        if x.dtype not in TYPES:
            raise TypeError(f"presk libm computes float64 or float32, not {x.dtype}")
        flat = np.ascontiguousarray(x).reshape(-1)
        tag, ctype, _ = TYPES[x.dtype]
        y = np.empty_like(flat)
        getattr(self.lib, _symbol(name, tag))(pointer(flat, ctype), pointer(y, ctype), flat.size)
        return y.reshape(x.shape)

    def power(self, x, y) -> np.ndarray:
        """The C library's pow elementwise (x and y broadcast, float64 or float32 alike): the
        emitter's `powf`, so that the kernel interpreter can have its bits."""
        from presk_core.cc.load import pointer

        x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
        if x.dtype != y.dtype or x.dtype not in TYPES:
            raise TypeError(f"pow computes float64 or float32 alike, not {x.dtype}, {y.dtype}")
        fx, fy = (np.ascontiguousarray(a).reshape(-1) for a in (x, y))
        tag, ctype, _ = TYPES[x.dtype]
        z = np.empty_like(fx)
        fn = getattr(self.lib, _symbol("pow", tag))
        fn(pointer(fx, ctype), pointer(fy, ctype), pointer(z, ctype), fx.size)
        return z.reshape(x.shape)


def load(lanes: bool = True) -> Libm:
    """presk libm, compiled or found in the cache and loaded; a DiagnosticError (E9001, or
    one of the cache's E9003–E9009) where it cannot be. Loaded once a process."""
    if lanes not in _LOADED:
        _LOADED[lanes] = Libm(_module(lanes).lib)
    return _LOADED[lanes]


_LOADED: dict[bool, Libm] = {}


def apply(name: str, x, lanes: bool = True) -> np.ndarray:
    """`load(lanes).apply(name, x)`."""
    return load(lanes).apply(name, x)


def power(x, y, lanes: bool = True) -> np.ndarray:
    """`load(lanes).power(x, y)`."""
    return load(lanes).power(x, y)
