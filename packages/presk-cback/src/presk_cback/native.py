"""An entry run natively: its schedule as C (presk_cback.emit), compiled through the cache,
called once per run over one arena.

    entry = NativeEntry(schedule)          # compiles, or finds the object in the cache
    outputs = entry.run(inputs)            # as presk_kernel.interp.run_schedule returns them
"""

from __future__ import annotations

import math

import numpy as np
from presk_kernel.interp import NUMPY, KernelError, from_storage, to_storage
from presk_kernel.ir import Schedule

from presk_cback.emit import ENTRY_CDEF, ITEMSIZE, arena_layout, entry_source
from presk_cback.load import load, pointer


class NativeEntry:
    """A compiled entry and its arena. `lanes=False` ignores the layouts' vector lanes and
    compiles without vectorization (the tests compare both)."""

    def __init__(self, schedule: Schedule, *, lanes: bool = True) -> None:
        self.schedule = schedule
        self.source = entry_source(schedule, lanes)
        extra = () if lanes else ("-fno-tree-vectorize",)
        self.module = load(
            self.source, ENTRY_CDEF, ("presk_entry",), threads=True, extra_flags=extra
        )
        self.offsets, size = arena_layout(schedule)
        self.arena = np.zeros(size, np.uint8)
        self.buffers = {b.id: b for b in schedule.buffers}

    def view(self, buf: int) -> np.ndarray:
        """Host buffer `buf` as an array of its storage type and shape, inside the arena."""
        b = self.buffers[buf]
        n = math.prod(a.length for a in b.axes)
        at = self.offsets[buf]
        flat = self.arena[at : at + n * ITEMSIZE[b.dtype]].view(NUMPY[b.dtype])
        return flat.reshape(tuple(a.length for a in b.axes))

    def run(self, inputs: list) -> list[np.ndarray]:
        """The entry's outputs (bf16 widened to float32, copies), from its inputs in the
        order of `schedule.inputs`."""
        for buf, value in zip(self.schedule.inputs, inputs, strict=True):
            b = self.buffers[buf]
            self.view(buf).reshape(-1)[...] = to_storage(value, b.dtype).reshape(-1)
        if self.module.lib.presk_entry(pointer(self.arena, "char")):
            raise KernelError(f"an index out of range in `{self.schedule.entry}`")
        return [
            np.array(from_storage(self.view(buf), self.buffers[buf].dtype))
            for buf in self.schedule.outputs
        ]
