"""The fold of a contraction in C, on the interpreter's own `gmpy2.mpfr` objects.

`presk_core.mpfr.contract` folds each output left to right from the first product,
∘(…∘(∘(a0·b0) + ∘(a1·b1))…), in the precision of the context, round to nearest even
(DESIGN §4). numpy's `matmul` on object arrays does that fold with one gmpy2 call per
operation, about 0.2 µs a multiply-add at 256 bits, most of it Python's objects around
MPFR's work. `fold` does the same MPFR calls (`mpfr_mul`, `mpfr_add`, RNDN, into results
of the context's precision) in one C loop, with the MPFR library gmpy2 itself loaded, on
the `mpfr_t` inside each gmpy2 object: the same bits, several times faster.

The C is compiled once per machine through presk's one toolchain, cache and loader
(presk_core.cc: `$PRESK_CACHE`, keyed by the compiler, the resolved target, the flags —
`-ffp-contract=off` among them —, the MPFR library and the source; loaded only if its
digest is the one written with it); where that cannot be done (no compiler, another object
layout, a cache that cannot be used, or `PRESK_INTERP_C=0`), `available()` is False and the
interpreter keeps numpy's loop, which gives the same bits.
"""

from __future__ import annotations

import ctypes
import importlib.util
import math
import os
import sys
from pathlib import Path

import gmpy2
import numpy as np
from presk_syntax.diagnostics import DiagnosticError

from presk_core.cc.load import Module, Opener, load_object
from presk_core.cc.toolchain import CompileError

GENERATOR = "presk-core helper 1"  # bump when a helper's C changes meaning


def layout_c(name: str) -> str:
    """The C every library over gmpy2's objects starts with: MPFR's headers and
    `presk_NAME_layout(type, type_offset, value_offset)`, which tells it where an object's
    type and its mpfr_t are (called once with `MPFR_TYPE`, `AT_TYPE`, `OFFSET`)."""
    return (
        "#include <stdlib.h>\n#include <stddef.h>\n#include <gmp.h>\n#include <mpfr.h>\n\n"
        "/* Where the objects are: each object's type at `at_type` bytes, its mpfr_t at"
        " `at_value`. */\n"
        "static const void *mpfr_type;\nstatic size_t at_type, at_value;\n\n"
        f"void presk_{name}_layout(const void *type, size_t type_offset, size_t value_offset)\n"
        "{\n    mpfr_type = type;\n    at_type = type_offset;\n    at_value = value_offset;\n}\n"
    )


SOURCE = (
    layout_c("fold")
    + r"""

static void release(mpfr_t *c, size_t count)
{
    for (size_t i = 0; i < count; i++)
        mpfr_clear(c[i]);
    free(c);
}

/* Copies of the objects x[r * stride + c * step], r < rows, c < cols (row-major), at their
   own precisions (exact), next to each other; NULL if one is not an mpfr. */
static mpfr_t *copy(char **x, size_t rows, size_t cols, size_t stride, size_t step)
{
    mpfr_t *c = malloc(rows * cols * sizeof(mpfr_t));
    if (c == NULL)
        return NULL;
    for (size_t r = 0; r < rows; r++)
        for (size_t q = 0; q < cols; q++) {
            char *object = x[r * stride + q * step];
            if (*(const void **)(object + at_type) != mpfr_type) {
                release(c, r * cols + q);
                return NULL;
            }
            mpfr_ptr v = (mpfr_ptr)(object + at_value);
            mpfr_init2(c[r * cols + q], mpfr_get_prec(v));
            mpfr_set(c[r * cols + q], v, MPFR_RNDN);
        }
    return c;
}

/* For each of `batch` items: out[i][j] = the fold over l of a[i][l] * b[l][j], each
   product and each sum rounded to nearest even to `prec` bits (k >= 1); a and b hold
   objects, out the mpfr_t of fresh ones. 0 if done, 1 if an operand is not an mpfr. */
int presk_fold(size_t batch, size_t m, size_t k, size_t n, char **a, char **b,
               mpfr_ptr *out, long prec)
{
    mpfr_t t;
    mpfr_init2(t, (mpfr_prec_t)prec);
    for (size_t q = 0; q < batch; q++) {
        mpfr_t *A = copy(a + q * m * k, m, k, k, 1);
        mpfr_t *B = copy(b + q * k * n, n, k, 1, n); /* b's columns as rows */
        if (A == NULL || B == NULL) {
            if (A != NULL) release(A, m * k);
            if (B != NULL) release(B, n * k);
            mpfr_clear(t);
            return 1;
        }
        mpfr_ptr *O = out + q * m * n;
        for (size_t i = 0; i < m; i++) {
            mpfr_t *row = A + i * k;
            for (size_t j = 0; j < n; j++) {
                mpfr_t *col = B + j * k;
                mpfr_ptr o = O[i * n + j];
                mpfr_mul(o, row[0], col[0], MPFR_RNDN);
                for (size_t l = 1; l < k; l++) {
                    mpfr_mul(t, row[l], col[l], MPFR_RNDN);
                    mpfr_add(o, o, t, MPFR_RNDN);
                }
            }
        }
        release(A, m * k);
        release(B, n * k);
    }
    mpfr_clear(t);
    return 0;
}
"""
)

MPFR_TYPE = type(gmpy2.mpfr(0))
_ZERO = gmpy2.mpfr(0)
OFFSET = object.__basicsize__  # PyObject_HEAD: the mpfr_t follows it (gmpy2.h, MPFR_Object)
AT_TYPE = ctypes.sizeof(ctypes.c_ssize_t)  # ob_type, after ob_refcnt
SMALL = 512
"""Below this many multiply-adds, numpy's loop is the faster (the C call costs ~25 µs)."""


def _mpfr_library() -> Path | None:
    libs = Path(gmpy2.__file__).resolve().parent.parent / "gmpy2.libs"
    found = sorted(libs.glob("libmpfr*.so*")) if libs.is_dir() else []
    return found[0] if found else None


def _layout_holds() -> bool:
    """The type of a gmpy2 object and its mpfr_t are where `AT_TYPE` and `OFFSET` say:
    they read back."""
    probe = gmpy2.mpfr(1, 77)
    prec = ctypes.c_long.from_address(id(probe) + OFFSET).value
    kind = ctypes.c_void_p.from_address(id(probe) + AT_TYPE).value
    return prec == 77 and kind == id(MPFR_TYPE)


def _mpfr_loaded() -> Path | None:
    """The MPFR library gmpy2 uses, loaded first (with its GMP) so that the helpers link to
    the same instances; None where the helpers cannot work on gmpy2's objects here."""
    if os.environ.get("PRESK_INTERP_C", "1") == "0":
        return None
    mpfr = _mpfr_library()
    if mpfr is None or not _layout_holds():
        return None
    try:
        for lib in [mpfr, *sorted(mpfr.parent.glob("libgmp*.so*"))[:1]]:
            ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)  # the instances gmpy2 uses
    except OSError:
        return None
    return mpfr


def _close(lib) -> None:
    import _ctypes

    _ctypes.dlclose(lib._handle)


CDLL = Opener("ctypes", ctypes.CDLL, _close)
PYDLL = Opener("ctypes-gil", ctypes.PyDLL, _close)  # for C that calls Python


def _extension_opener(name: str) -> Opener:
    def open_module(path: str):
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{path} is not a Python extension")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return Opener(f"extension {name}", open_module)


def load_helper(
    name: str,
    source: str,
    symbols: tuple[str, ...],
    opener: Opener = CDLL,
    includes: tuple[str, ...] = (),
) -> Module | None:
    """The C `source` compiled against the MPFR (and GMP) that gmpy2 loads, through presk's
    one toolchain, cache and loader (presk_core.cc: its key has the compiler and the flags,
    `-ffp-contract=off` among them; the object is loaded only if its digest is the one
    written with it), and opened by `opener` with `symbols` checked; None where that cannot
    be done here (no compiler, another object layout, a cache that cannot be used,
    `PRESK_INTERP_C=0`): the interpreter's Python loops give the same bits."""
    mpfr = _mpfr_loaded()
    if mpfr is None:
        return None
    include = Path(gmpy2.__file__).resolve().parent  # gmpy2 ships gmp.h and mpfr.h
    flags = tuple(f"-I{i}" for i in (include, *includes))
    gmp = sorted(mpfr.parent.glob("libgmp*.so*"))[:1]  # mpz_* for presk_core.erfc_c
    libs = (str(mpfr), *map(str, gmp), f"-Wl,-rpath,{mpfr.parent}")
    try:
        return load_object(
            f"{GENERATOR} {name} / Python {sys.version}",
            source,
            symbols,
            opener,
            extra_flags=flags,
            libs=libs,
        )
    except (DiagnosticError, CompileError):
        return None


def extension(name: str, source: str, symbols: tuple[str, ...]) -> Module | None:
    """`load_helper` of a Python extension module `name` (Python's and numpy's headers too):
    the module, or None."""
    import sysconfig

    python = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(python, "Python.h")):
        return None
    opener = _extension_opener(name)
    return load_helper(name, source, symbols, opener, (python, np.get_include()))


class Helper:
    """A C helper built by `load_helper` on first use: `lib` is the ctypes library (its
    functions declared by `declare`) once `available()` has said True."""

    def __init__(self, name: str, source: str, symbols: tuple[str, ...], declare, kind=CDLL):
        self.name, self.source, self.symbols = name, source, symbols
        self.declare, self.kind = declare, kind
        self.lib: ctypes.CDLL | None | bool = False  # False: not tried yet

    def available(self) -> bool:
        if self.lib is False:
            module = load_helper(self.name, self.source, self.symbols, self.kind)
            self.lib = None if module is None else module.lib
            if self.lib is not None:
                self.declare(self.lib)
        return self.lib is not None


def _declare(lib: ctypes.CDLL) -> None:
    lib.presk_fold_layout.restype = None
    lib.presk_fold_layout.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    lib.presk_fold_layout(id(MPFR_TYPE), AT_TYPE, OFFSET)
    lib.presk_fold.restype = ctypes.c_int
    lib.presk_fold.argtypes = [ctypes.c_size_t] * 4 + [ctypes.c_void_p] * 3 + [ctypes.c_long]


_C = Helper("presk_fold", SOURCE, ("presk_fold_layout", "presk_fold"), _declare)
available = _C.available


def addresses(x: np.ndarray) -> np.ndarray:
    """The address of each element (row-major): the C checks that each is an mpfr."""
    flat = x.reshape(-1)
    return np.fromiter(map(id, flat), dtype=np.uintp, count=flat.size)


def fresh(count: int) -> np.ndarray:
    """`count` new mpfr objects of the context's precision (each the result of a negation),
    for C to write into before anyone else sees them."""
    return np.negative(np.full(count, _ZERO, dtype=object))


def slots(out: np.ndarray) -> np.ndarray:
    """The address of the mpfr_t inside each of `fresh`'s objects."""
    return addresses(out) + OFFSET


def fold(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """a[..., m, k] @ b[..., k, n] (the same batch shape, k ≥ 1) as numpy's matmul folds it,
    in the current context; None where the C loop does not apply (then use matmul)."""
    *batch, m, k = a.shape
    n = b.shape[-1]
    if a.size * n < SMALL or not available():
        return None
    context = gmpy2.get_context()
    if context.round != gmpy2.RoundToNearest or context.subnormalize:
        return None
    count = math.prod(batch) * m * n
    out = fresh(count)
    pa, pb, po = addresses(a), addresses(b), slots(out)  # alive through the call
    failed = _C.lib.presk_fold(
        count // (m * n) if m * n else 0,
        m,
        k,
        n,
        pa.ctypes.data,
        pb.ctypes.data,
        po.ctypes.data,
        context.precision,
    )
    return None if failed else out.reshape((*batch, m, n))
