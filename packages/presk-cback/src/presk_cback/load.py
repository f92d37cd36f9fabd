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


SPIN_IDLE = "3000"
"""libgomp's spins before a waiting thread sleeps (GOMP_SPINCOUNT) on a machine with a core to
spare: 3 000 `pause`s, about 32 µs here, enough to bridge one launch's join and the next
launch's fork, so a two-thread step wakes no sleeping thread between launches (1.91× one
thread against 1.79× with none, docs/native.md, "Threads")."""

SPIN_BUSY = "0"
"""The same where the machine's other jobs want the cores: a waiting thread sleeps on a futex
at once, woken in some µs. A spinning thread holds a core another job wants: libgomp's
default, 300 000 spins (some ms), made a two-thread step 20× slower than one thread on a
loaded machine, and even 3 000 spins cost 3 % against none beside one busy process."""


def spin_count() -> str:
    """GOMP_SPINCOUNT for a process that loads the native backend: SPIN_IDLE where the
    1-minute load average leaves more than half a core idle (below cores − ½: on two cores,
    this process and no other busy one), SPIN_BUSY otherwise or where the load cannot be read.
    Read once, as libgomp first loads; a load that comes later does not change it."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return SPIN_BUSY
    return SPIN_IDLE if load < (os.cpu_count() or 1) - 0.5 else SPIN_BUSY


@contextlib.contextmanager
def quiet_pool():
    """GOMP_SPINCOUNT = `spin_count()` while libgomp first loads (its constructor reads its
    environment once), where neither it nor OMP_WAIT_POLICY is set; the environment as it was
    afterwards, so that child processes (a PyTorch side of a benchmark, a compiler) do not
    inherit it."""
    if "GOMP_SPINCOUNT" in os.environ or "OMP_WAIT_POLICY" in os.environ:
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = spin_count()
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
