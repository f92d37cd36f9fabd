"""Loading compiled C: cffi's ABI mode over the cache.

One `cffi.FFI` per process, and each declaration text given to its `cdef` once (the first
`cdef` of a process costs ~65 ms, DESIGN §10): kernels and host functions share one
signature, so a process declares it once whatever the number of objects it loads. cffi is
imported on first use only, so that commands which never run native code do not pay for it.
Arrays go to C through `ffi.from_buffer` (`pointer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from presk_cback.cache import build
from presk_cback.toolchain import Toolchain, find_toolchain

_state: dict[str, Any] = {}
_declared: set[str] = set()
_loaded: dict[tuple[str, tuple[str, ...], str], Any] = {}


def ffi() -> Any:
    """The process's `cffi.FFI` (created on first use)."""
    if "ffi" not in _state:
        import cffi

        _state["ffi"] = cffi.FFI()
    return _state["ffi"]


def declare(cdef: str) -> None:
    """Declare C signatures to the process's FFI, once per distinct text."""
    if cdef not in _declared:
        ffi().cdef(cdef)
        _declared.add(cdef)


class LoadError(Exception):
    """An object that neither loads nor rebuilds into one that loads (a bug, or a broken
    compiler): the caller reports it as internal."""


@dataclass(frozen=True)
class Module:
    """A loaded object: `lib` is cffi's library, `path` its file in the cache."""

    lib: Any
    path: str


def _open(path: str, symbols: tuple[str, ...]) -> Any:
    lib = ffi().dlopen(path)
    try:
        for name in symbols:  # a corrupt object may open and still lack its functions
            getattr(lib, name)
    except AttributeError:
        ffi().dlclose(lib)  # else dlopen of the rebuilt file returns this handle again
        raise
    return lib


def load(
    source: str,
    cdef: str,
    symbols: tuple[str, ...],
    *,
    threads: bool = False,
    extra_flags: tuple[str, ...] = (),
    toolchain: Toolchain | None = None,
) -> Module:
    """Compile `source` (or find it in the cache), open it, and check that `symbols`, declared
    by `cdef`, resolve. A cached object that fails to open is rebuilt once."""
    tc = toolchain or find_toolchain()
    flags = tc.flags(threads=threads, extra=extra_flags)
    memo = (source, flags, cdef)
    if memo in _loaded:
        return _loaded[memo]
    declare(cdef)
    path = build(tc, flags, source)
    try:
        lib = _open(str(path), symbols)
    except (OSError, AttributeError):
        path = build(tc, flags, source, rebuild=True)
        try:
            lib = _open(str(path), symbols)
        except (OSError, AttributeError) as e:
            raise LoadError(f"{path}: {e}") from e
    module = Module(lib, str(path))
    _loaded[memo] = module
    return module


def pointer(array: Any, ctype: str = "double") -> Any:
    """A `ctype *` to a C-contiguous numpy array's data (no copy; cffi checks contiguity)."""
    return ffi().from_buffer(f"{ctype}[]", array)
