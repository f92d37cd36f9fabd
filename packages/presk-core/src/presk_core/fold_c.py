"""The fold of a contraction in C, on the interpreter's own `gmpy2.mpfr` objects.

`presk_core.mpfr.contract` folds each output left to right from the first product,
∘(…∘(∘(a0·b0) + ∘(a1·b1))…), in the precision of the context, round to nearest even
(DESIGN §4). numpy's `matmul` on object arrays does that fold with one gmpy2 call per
operation, about 0.2 µs a multiply-add at 256 bits, most of it Python's objects around
MPFR's work. `fold` does the same MPFR calls (`mpfr_mul`, `mpfr_add`, RNDN, into results
of the context's precision) in one C loop, with the MPFR library gmpy2 itself loaded, on
the `mpfr_t` inside each gmpy2 object: the same bits, several times faster.

The C is compiled once per machine with `cc` into the user's cache
(`$XDG_CACHE_HOME/presk`, else `~/.cache/presk`), named by a hash of its source and of
the MPFR library; where that cannot be done (no compiler, another object layout, or
`PRESK_INTERP_C=0`), `available()` is False and the interpreter keeps numpy's loop.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import gmpy2
import numpy as np


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


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "presk"


def _build(
    name: str, source: str, library: Path, includes: tuple[str, ...] = (), suffix: str = ".so"
) -> Path:
    include = Path(gmpy2.__file__).resolve().parent  # gmpy2 ships gmp.h and mpfr.h
    key = hashlib.sha256((source + str(library) + sys.version).encode()).hexdigest()[:16]
    target = _cache() / f"{name}_{key}{suffix}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        c = Path(tmp) / f"{name}.c"
        c.write_text(source)
        built = Path(tmp) / f"{name}.so"
        cmd = ["cc", "-O2", "-shared", "-fPIC", f"-I{include}", *(f"-I{i}" for i in includes)]
        cmd += [str(c), "-o", str(built)]
        gmp = sorted(library.parent.glob("libgmp*.so*"))  # mpz_* for presk_core.erfc_c
        cmd += [str(library), *map(str, gmp[:1]), f"-Wl,-rpath,{library.parent}"]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
        os.replace(built, target)  # whole or not at all
    return target


def _layout_holds() -> bool:
    """The type of a gmpy2 object and its mpfr_t are where `AT_TYPE` and `OFFSET` say:
    they read back."""
    probe = gmpy2.mpfr(1, 77)
    prec = ctypes.c_long.from_address(id(probe) + OFFSET).value
    kind = ctypes.c_void_p.from_address(id(probe) + AT_TYPE).value
    return prec == 77 and kind == id(MPFR_TYPE)


def library(
    name: str, source: str, includes: tuple[str, ...] = (), suffix: str = ".so"
) -> Path | None:
    """The C `source` compiled against the MPFR (and GMP) that gmpy2 loads, MPFR loaded
    first, if that can be done here (a compiler, the object layout, `PRESK_INTERP_C` not
    0); else None."""
    if os.environ.get("PRESK_INTERP_C", "1") == "0":
        return None
    mpfr = _mpfr_library()
    if mpfr is None or not _layout_holds():
        return None
    try:
        for lib in [mpfr, *sorted(mpfr.parent.glob("libgmp*.so*"))[:1]]:
            ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)  # the instances gmpy2 uses
        return _build(name, source, mpfr, includes, suffix)
    except (OSError, subprocess.SubprocessError):
        return None


def extension(name: str, source: str) -> Path | None:
    """`library`, built as a Python extension module `name` (Python's and numpy's headers
    too), or None."""
    import sysconfig

    python = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    if not os.path.exists(os.path.join(python, "Python.h")):
        return None
    return library(name, source, (python, np.get_include()), suffix)


class Helper:
    """A C helper compiled by `library` and loaded on first use: `lib` is the ctypes
    library (its functions declared by `declare`) once `available()` has said True."""

    def __init__(self, name: str, source: str, declare, kind=ctypes.CDLL):
        self.name, self.source, self.declare, self.kind = name, source, declare, kind
        self.lib: ctypes.CDLL | None | bool = False  # False: not tried yet

    def available(self) -> bool:
        if self.lib is False:
            path = library(self.name, self.source)
            try:
                self.lib = None if path is None else self.kind(str(path))
            except OSError:
                self.lib = None
            if self.lib is not None:
                self.declare(self.lib)
        return self.lib is not None


def _declare(lib: ctypes.CDLL) -> None:
    lib.presk_fold_layout.restype = None
    lib.presk_fold_layout.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    lib.presk_fold_layout(id(MPFR_TYPE), AT_TYPE, OFFSET)
    lib.presk_fold.restype = ctypes.c_int
    lib.presk_fold.argtypes = [ctypes.c_size_t] * 4 + [ctypes.c_void_p] * 3 + [ctypes.c_long]


_C = Helper("presk_fold", SOURCE, _declare)
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
