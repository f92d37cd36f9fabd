"""Loading the native backend's C: presk-core's one loader (presk_core.cc.load, cffi's ABI
mode over the cache) under this generator's version."""

from __future__ import annotations

from presk_core.cc import load as _load
from presk_core.cc.load import LoadError, Module, declare, ffi, pointer
from presk_core.cc.toolchain import Toolchain

from presk_cback.cache import CODEGEN_VERSION

__all__ = ["LoadError", "Module", "declare", "ffi", "load", "pointer"]


def load(
    source: str | tuple[str, ...],
    cdef: str,
    symbols: tuple[str, ...],
    *,
    threads: bool = False,
    extra_flags: tuple[str, ...] = (),
    toolchain: Toolchain | None = None,
    libs: tuple[str, ...] = (),
) -> Module:
    """Compile `source` (or find it in the cache), linked with `libs`, open it, and check that
    `symbols`, declared by `cdef`, resolve (presk_core.cc.load.load)."""
    return _load.load(
        CODEGEN_VERSION,
        source,
        cdef,
        symbols,
        threads=threads,
        extra_flags=extra_flags,
        toolchain=toolchain,
        libs=libs,
    )
