"""Loading compiled C: one loader over the cache, for every C presk compiles.

`load_object` builds an object through the cache (which hands out only objects that prove
themselves: presk_core.cc.cache), opens it with an opener and checks that the symbols its
user needs resolve; an object that fails to open is compiled again once, then it is E9009.
Two openers use it:

- `load`: cffi's ABI mode (`ffi.dlopen`), for presk libm and the native backend. One
  `cffi.FFI` per process, and each declaration text given to its `cdef` once (the first
  `cdef` of a process costs ~65 ms, DESIGN §10); cffi is imported on first use only, so
  that commands which never run native code do not pay for it. Arrays go to C through
  `ffi.from_buffer` (`pointer`).
- ctypes (`ctypes.CDLL`, or `ctypes.PyDLL` where the C calls Python) and Python's extension
  loader, for the interpreter's C helpers (presk_core.fold_c and its siblings), which work
  on Python's own objects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from presk_syntax.diagnostics import DiagnosticError, error

from presk_core.cc.cache import build
from presk_core.cc.toolchain import Toolchain, find_toolchain

_state: dict[str, Any] = {}
_declared: set[str] = set()
_loaded: dict[tuple, Any] = {}
FAILED_TO_OPEN = (OSError, AttributeError, ImportError)


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


class LoadError(DiagnosticError):
    """E9009: an object that neither loads nor compiles again into one that loads (a broken
    compiler or C library)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(
            error(
                "E9009",
                f"the compiled object `{path}` cannot be loaded: {why}",
                help="check the compiler CC names (unset CC to use `cc`), or set PRESK_CACHE"
                " to an empty folder",
            )
        )


@dataclass(frozen=True)
class Module:
    """A loaded object: `lib` is the opener's library, `path` its file in the cache."""

    lib: Any
    path: str


@dataclass(frozen=True)
class Opener:
    """How to open an object (`open(path)`, raising OSError, ImportError or AttributeError)
    and close a handle that failed its check (so that `dlopen` of the rebuilt file does not
    return it again)."""

    name: str
    open: Callable[[str], Any]
    close: Callable[[Any], None] = lambda lib: None


def _cffi_opener() -> Opener:
    return Opener("cffi", lambda path: ffi().dlopen(path), lambda lib: ffi().dlclose(lib))


def _open(opener: Opener, path: str, symbols: tuple[str, ...]) -> Any:
    lib = opener.open(path)
    try:
        for name in symbols:  # a broken object may open and still lack its functions
            getattr(lib, name)
    except AttributeError:
        opener.close(lib)
        raise
    return lib


def _why(path: str, e: BaseException) -> str:
    """The loader's reason, without the path it repeats (`cannot load library 'P': P: file
    too short.  Additionally, …` says `file too short`)."""
    text = str(e).split(".  Additionally")[0].strip()
    if path + ": " in text:
        text = text.rsplit(path + ": ", 1)[1]
    return text or type(e).__name__


def load_object(
    generator: str,
    source: str | tuple[str, ...],
    symbols: tuple[str, ...],
    opener: Opener,
    *,
    threads: bool = False,
    extra_flags: tuple[str, ...] = (),
    libs: tuple[str, ...] = (),
    toolchain: Toolchain | None = None,
) -> Module:
    """Compile `source` (or find it in the cache), open it with `opener`, and check that
    `symbols` resolve. A cached object that fails to open is compiled again once; then E9009.
    E9001 without a compiler; the cache's own diagnostics (E9003–E9008)."""
    tc = toolchain or find_toolchain()
    flags = tc.flags(threads=threads, extra=extra_flags)
    memo = (generator, opener.name, source, flags, libs, symbols)
    if memo in _loaded:
        return _loaded[memo]
    path = build(generator, tc, flags, source, libs=libs)
    try:
        lib = _open(opener, str(path), symbols)
    except FAILED_TO_OPEN:
        path = build(generator, tc, flags, source, libs=libs, rebuild=True)
        try:
            lib = _open(opener, str(path), symbols)
        except FAILED_TO_OPEN as e:
            raise LoadError(str(path), _why(str(path), e)) from e
    module = Module(lib, str(path))
    _loaded[memo] = module
    return module


def load(
    generator: str,
    source: str | tuple[str, ...],
    cdef: str,
    symbols: tuple[str, ...],
    *,
    threads: bool = False,
    extra_flags: tuple[str, ...] = (),
    toolchain: Toolchain | None = None,
    libs: tuple[str, ...] = (),
) -> Module:
    """`load_object` through cffi's ABI mode, the `symbols` declared by `cdef`."""
    declare(cdef)
    return load_object(
        generator,
        source,
        symbols,
        _cffi_opener(),
        threads=threads,
        extra_flags=extra_flags,
        libs=libs,
        toolchain=toolchain,
    )


def pointer(array: Any, ctype: str = "double") -> Any:
    """A `ctype *` to a C-contiguous numpy array's data (no copy; cffi checks contiguity)."""
    return ffi().from_buffer(f"{ctype}[]", array)
