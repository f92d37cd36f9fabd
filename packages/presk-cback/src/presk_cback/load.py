"""Loading the native backend's C: presk-core's one loader (presk_core.cc.load, cffi's ABI
mode over the cache) under this generator's version."""

from __future__ import annotations

import contextlib
import os

from presk_core.cc import load as _load
from presk_core.cc.load import LoadError, Module, declare, ffi, pointer
from presk_core.cc.toolchain import Toolchain

from presk_cback.cache import CODEGEN_VERSION

__all__ = ["LoadError", "Module", "declare", "ffi", "load", "pointer"]


SPIN = "0"
"""libgomp's spins before a waiting thread sleeps (GOMP_SPINCOUNT), unless the environment
says otherwise: its default, 300 000 spins (some ms), holds a core after every launch, and
on a machine whose other jobs want that core a two-thread step ran 20× slower than one
thread (docs/native.md, "Threads"). A thread waits on a futex at once, woken in some µs."""


@contextlib.contextmanager
def quiet_pool():
    """GOMP_SPINCOUNT = SPIN while libgomp first loads (its constructor reads its environment
    once), where neither it nor OMP_WAIT_POLICY is set; the environment as it was afterwards,
    so that child processes (a PyTorch side of a benchmark, a compiler) do not inherit it."""
    if "GOMP_SPINCOUNT" in os.environ or "OMP_WAIT_POLICY" in os.environ:
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = SPIN
    try:
        yield
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)


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
    `symbols`, declared by `cdef`, resolve (presk_core.cc.load.load); OpenMP's pool quiet
    (`quiet_pool`)."""
    with quiet_pool() if threads else contextlib.nullcontext():
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
