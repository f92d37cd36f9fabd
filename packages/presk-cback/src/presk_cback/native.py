"""An entry run natively: its schedule as C (presk_cback.emit), compiled through the cache,
called once per run over one arena.

    entry = NativeEntry(schedule)          # compiles, or finds the object in the cache
    outputs = entry.run(inputs)            # as presk_kernel.interp.run_schedule returns them

A warm hit costs the C's generation (~0.06 s for the tiny MiniGPT step's 344 launches),
its hash, and `dlopen`: keying the cache on the schedule's `kernel` document instead was
measured slower (encoding it takes 0.09–0.2 s).
"""

from __future__ import annotations

import math

import numpy as np
from presk_kernel.interp import NUMPY, KernelError, from_storage, to_storage
from presk_kernel.ir import Schedule

from presk_cback.arena import ALIGN, ITEMSIZE, arena_layout
from presk_cback.emit import ENTRY_CDEF, TIMED_CDEF, entry_units
from presk_cback.load import declare, load, pointer

UNITS = 2  # translation units an entry's C is split into, compiled in parallel


def aligned_zeros(size: int) -> np.ndarray:
    """`size` zero bytes starting at a multiple of ALIGN (64): the arena's offsets are
    64-byte aligned (presk_cback.arena), and numpy's allocator promises only 16 bytes of
    the base."""
    raw = np.zeros(size + ALIGN, np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip : skip + size]


class NativeEntry:
    """A compiled entry and its arena. `lanes=False` ignores the layouts' vector lanes and
    compiles without vectorization (the tests compare both). `timed=True` also compiles
    `presk_entry_timed`, for `run_timed` (each launch's time; `timed="cpu"`: each launch's
    CPU time in the calling thread)."""

    def __init__(
        self,
        schedule: Schedule,
        *,
        lanes: bool = True,
        timed: bool | str = False,
        units: int = UNITS,
    ) -> None:
        self.schedule = schedule
        self.lanes, self.units, self.timed = lanes, units, timed
        extra = () if lanes else ("-fno-tree-vectorize",)
        declare(ENTRY_CDEF)
        cdef = TIMED_CDEF if timed else ENTRY_CDEF
        symbols = ("presk_entry", "presk_entry_timed") if timed else ("presk_entry",)
        c = entry_units(schedule, lanes, None, units, timed)
        libs: tuple[str, ...] = ()
        if any("presk_normal_at(" in unit for unit in c):  # normal draws: MPFR (normal_c)
            extra, libs = _mpfr(extra)
        self.module = load(
            c[0] if len(c) == 1 else c, cdef, symbols, threads=True, extra_flags=extra, libs=libs
        )
        self.offsets, size = arena_layout(schedule)
        self.arena = aligned_zeros(size)
        self.buffers = {b.id: b for b in schedule.buffers}

    @property
    def source(self) -> tuple[str, ...]:
        """The C of the entry, its translation units (generated again)."""
        return entry_units(self.schedule, self.lanes, None, self.units, self.timed)

    def view(self, buf: int) -> np.ndarray:
        """Host buffer `buf` as an array of its storage type and shape, inside the arena.
        Only an input's or an output's is its own between calls: a temporary shares its
        space with others whose live ranges do not overlap its own (presk_cback.arena)."""
        b = self.buffers[buf]
        n = math.prod(a.length for a in b.axes)
        at = self.offsets[buf]
        flat = self.arena[at : at + n * ITEMSIZE[b.dtype]].view(NUMPY[b.dtype])
        return flat.reshape(tuple(a.length for a in b.axes))

    def _write(self, inputs: list) -> None:
        for buf, value in zip(self.schedule.inputs, inputs, strict=True):
            b = self.buffers[buf]
            self.view(buf).reshape(-1)[...] = to_storage(value, b.dtype).reshape(-1)

    def _outputs(self) -> list[np.ndarray]:
        return [
            np.array(from_storage(self.view(buf), self.buffers[buf].dtype))
            for buf in self.schedule.outputs
        ]

    def run(self, inputs: list) -> list[np.ndarray]:
        """The entry's outputs (bf16 widened to float32, copies), from its inputs in the
        order of `schedule.inputs`."""
        self._write(inputs)
        if self.module.lib.presk_entry(pointer(self.arena, "char")):
            raise KernelError(f"an index out of range in `{self.schedule.entry}`")
        return self._outputs()

    def run_timed(self, inputs: list, ns: np.ndarray) -> list[np.ndarray]:
        """`run`, adding each launch's nanoseconds into `ns[i]` and the zeroing of the
        buffers that are not inputs into `ns[-1]` (`ns`: float64, launches + 1)."""
        assert self.timed and ns.dtype == np.float64 and ns.size == len(self.schedule.launches) + 1
        self._write(inputs)
        if self.module.lib.presk_entry_timed(pointer(self.arena, "char"), pointer(ns)):
            raise KernelError(f"an index out of range in `{self.schedule.entry}`")
        return self._outputs()


def _mpfr(extra: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The flags and libraries of an entry that draws normals (presk_core.normal_c.link), or
    its diagnostic where MPFR cannot be linked here (E7160)."""
    from presk_core.normal_c import link
    from presk_syntax.diagnostics import DiagnosticError, error

    found = link()
    if found is None:
        raise DiagnosticError(
            [
                error(
                    "E7160",
                    "a normal draw compiles against gmpy2's MPFR, which cannot be loaded here"
                    " (PRESK_INTERP_C=0, or no C compiler for the helpers)",
                    help="run on the interpreter or the kernel interpreter (--backend kernel)",
                )
            ]
        )
    return extra + found[0], found[1]
