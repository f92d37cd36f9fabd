"""Room for a tensor of mpfr values, measured before it is made (issue 16's fuzzer).

GMP aborts the process when an allocation fails ("GNU MP: Cannot allocate memory", signal
6): a tensor of reals too large for the memory there is never becomes a `MemoryError` that
presk could turn into a diagnostic. So the interpreter asks `make_room(shape)` before it
makes a large one (a result of an instruction, `presk_core.interp`; doubles made reals,
`mpfr.real`), and a tensor that would not fit is refused with `RoomError`, E7011 to a user.

The estimate (`tensor_bytes`) is what a tensor made from doubles measured per element:
numpy's pointer (8 bytes), gmpy2's object (72, 80 with malloc's header) and its limbs
(⌈bits/64⌉ words and malloc's 16 bytes): 104 bytes at 53 bits, 120 at 256, 152 at 512,
600 at 4096; the formula gives 8 to 16 more. The room (`room`) is what the process may still
take: its RLIMIT_AS less the address space it has (`/proc/self/statm`), and the machine's
MemAvailable (`/proc/meminfo`), the smaller; a tensor must fit in three quarters of it less
64 MiB (a kernel's temporaries; the rest of the run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gmpy2

CHECKED = 1 << 18
"""Tensors from this many elements on (about 30 MB of reals) are measured; smaller ones not."""

MARGIN = 64 << 20


class RoomError(MemoryError):
    """A tensor of reals larger than the memory this process may still use."""


def tensor_bytes(count: int, bits: int) -> int:
    """About the bytes `count` mpfr values of `bits` bits take in a numpy array."""
    return count * (104 + 8 * -(-bits // 64))


def room() -> int | None:
    """The bytes this process may still take (None where neither limit can be read)."""
    known = []
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            with open("/proc/self/statm") as statm:
                size = int(statm.read().split()[0]) * resource.getpagesize()
            known.append(soft - size)
    except (ImportError, OSError, ValueError):
        pass
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    known.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError):
        pass
    return min(known) if known else None


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def make_room(shape: Sequence[int], bits: int | None = None) -> None:
    """Raise RoomError if a tensor of reals of `shape`, at `bits` (the current context's
    precision by default), would not fit in the room there is."""
    count = math.prod(shape)
    if count < CHECKED:
        return
    free = room()
    if free is None:
        return
    bits = gmpy2.get_context().precision if bits is None else bits
    need = tensor_bytes(count, bits)
    usable = (free - MARGIN) * 3 // 4
    if need > usable:
        dims = " × ".join(str(n) for n in shape)
        raise RoomError(
            f"a tensor of {dims + ' = ' if len(shape) > 1 else ''}{count} reals at {bits} bits takes about {_gib(need)},"
            f" more than the {_gib(max(usable, 0))} this process may still use"
        )
