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
import sys

import numpy as np
from presk_core.normal_c import calls_mpfr
from presk_kernel.interp import NUMPY, KernelError, from_storage, to_storage
from presk_kernel.ir import Schedule
from presk_kernel.passes import emitted

from presk_cback.arena import ALIGN, ITEMSIZE, arena_layout, plan
from presk_cback.host import ENTRY_CDEF, SQUARE_LIMBS, TIMED_CDEF, entry_units, io_buffers
from presk_cback.load import declare, ffi, load, pointer

CHUNK = 1 << 30  # values a call of presk_square_sum at most (its limbs hold 2^31 terms)
UNITS = 2  # translation units an entry's C is split into, compiled in parallel


def aligned_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialized C-contiguous array starting at a multiple of ALIGN (64)."""
    size = math.prod(shape) * np.dtype(dtype).itemsize
    raw = np.empty(size + ALIGN, np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip : skip + size].view(dtype).reshape(shape)


def written(schedule: Schedule) -> set[int]:
    """The host buffers some launch writes (bound to one of its kernel's outputs)."""
    out: set[int] = set()
    for launch in schedule.launches:
        n = len(launch.kernel.inputs)
        out.update(arg.buf for arg in launch.args[n:])
    return out


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
    CPU time in the calling thread; `timed="threads"`: three clocks a launch, its wall time,
    the calling thread's CPU time and the process's, tools/bench_threads.py). It compiles
    `presk_kernel.passes.emitted(schedule)`: each GEMM statement takes its elementwise
    consumers as its epilogue (presk_kernel.epilogue; `epilogues=False`: not), timed or
    not: `schedule` is then the schedule compiled, with fewer launches than the one given,
    and a timed entry clocks those launches (a product and its epilogue one launch,
    `dot+add+gelu`), the step that runs untimed. A caller
    that times the plan's own nests launch by launch (a layout point, `presk tune`, the
    calibrations) passes `epilogues=False, rows=False`. The kernels that sweep one row loop
    are one kernel, and so are those over the same batch points (presk_kernel.rows and
    presk_kernel.slices), timed or not (`rows=False`: neither; `slices=False`: not the
    latter; `scratch=False`: the groups' temporaries whole, not one slice a point)."""

    def __init__(
        self,
        schedule: Schedule,
        *,
        lanes: bool = True,
        timed: bool | str = False,
        units: int = UNITS,
        epilogues: bool = True,
        rows: bool = True,
        slices: bool = True,
        scratch: bool = True,
    ) -> None:
        slices = slices and rows
        schedule = emitted(  # the timed entry clocks what runs, timed or not
            schedule, epilogues=epilogues, rows=rows, slices=slices, scratch=scratch
        )
        self.schedule = schedule
        self.lanes, self.units, self.timed = lanes, units, timed
        extra = () if lanes else ("-fno-tree-vectorize",)
        declare(ENTRY_CDEF)
        cdef = TIMED_CDEF if timed else ENTRY_CDEF
        symbols = ("presk_entry", "presk_entry_io", "presk_nonfinite", "presk_square_sum")
        symbols += ("presk_entry_timed", "presk_entry_timed_io") if timed else ()
        c = entry_units(schedule, lanes, None, units, timed)
        libs: tuple[str, ...] = ()
        if any(calls_mpfr(unit) for unit in c):  # normal draws, initializers: MPFR (normal_c)
            extra, libs = _mpfr(extra)
        self.module = load(
            c[0] if len(c) == 1 else c, cdef, symbols, threads=True, extra_flags=extra, libs=libs
        )
        self.offsets, size = arena_layout(schedule)
        self.arena = aligned_zeros(size)
        self.buffers = {b.id: b for b in schedule.buffers}
        self.io = io_buffers(schedule)
        self.slot = {buf: j for j, buf in enumerate(self.io)}
        self.table = ffi().new("char *[]", max(1, len(self.io)))
        self._returned: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # an input read where the caller holds it: one no launch writes, not zeroed, not
        # also an output (those live in the arena, copied in)
        kept = written(schedule) | set(schedule.outputs) | set(plan(schedule).zero_first)
        self.direct = {
            buf for buf in schedule.inputs if buf not in kept and self.buffers[buf].dtype != "bf16"
        }
        # outputs read back out of the arena: bf16 (widened), an input too, or one listed twice
        twice = {b for b in schedule.outputs if schedule.outputs.count(b) > 1}
        self.copied = (
            twice
            | set(schedule.inputs)
            | {b for b in schedule.outputs if self.buffers[b].dtype == "bf16"}
        )

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

    def _shape(self, buf: int) -> tuple[int, ...]:
        return tuple(a.length for a in self.buffers[buf].axes)

    def _fresh(self, i: int, buf: int) -> np.ndarray:
        """A new array for output i, or the one the last call returned when nobody holds
        it or a view of it any more (a view's base is the raw block: both counted): a loop
        that drops each result pays no new pages a call."""
        if i in self._returned:
            last, raw = self._returned[i]
            if sys.getrefcount(last) == 3 and sys.getrefcount(raw) == 4:  # ours alone
                return last
        size = math.prod(self._shape(buf)) * ITEMSIZE[self.buffers[buf].dtype]
        raw = np.empty(size + ALIGN, np.uint8)
        skip = -raw.ctypes.data % ALIGN
        last = raw[skip : skip + size].view(NUMPY[self.buffers[buf].dtype])
        last = last.reshape(self._shape(buf))
        self._returned[i] = (last, raw)
        return last

    def nonfinite(self, array: np.ndarray) -> int:
        """The first flat position of `array` that is not finite, or -1: in C for a
        C-contiguous float32 or float64 array, else numpy's isfinite."""
        if _fits(array, array.dtype, array.shape) and array.dtype in (np.float32, np.float64):
            f64 = int(array.dtype == np.float64)
            return int(self.module.lib.presk_nonfinite(pointer(array, "char"), array.size, f64))
        bad = np.flatnonzero(~np.isfinite(np.asarray(array).ravel()))
        return int(bad[0]) if bad.size else -1

    def square_sum(self, arrays: list[np.ndarray]) -> float:
        """Σ x² over the finite values of `arrays`, each square rounded to a double and
        their sum exact, then rounded once: `math.fsum` of numpy's squares in float64,
        computed in C (a fixed-point sum) for C-contiguous float32 and float64 arrays; inf
        when a square or the sum is past the doubles."""
        limbs = np.zeros(SQUARE_LIMBS, np.int64)
        total, rest = 0, []
        for a in arrays:
            if not (_fits(a, a.dtype, a.shape) and a.dtype in (np.float32, np.float64)):
                rest.append(a)
                continue
            f64, flat = int(a.dtype == np.float64), a.reshape(-1)
            for at in range(0, flat.size, CHUNK):
                part = flat[at : at + CHUNK]
                self.module.lib.presk_square_sum(
                    pointer(part, "char"), part.size, f64, pointer(limbs, "int64_t")
                )
                if limbs[-1]:
                    return math.inf
                total += sum(int(v) << (32 * i) for i, v in enumerate(limbs.tolist()) if v)
                limbs[:] = 0
        for a in rest:  # exact too: each square's numerator over 2^1074
            with np.errstate(over="ignore"):
                squares = np.square(np.ravel(a), dtype=np.float64).tolist()
            for s in squares:
                if math.isinf(s):
                    return math.inf
                n, d = s.as_integer_ratio()
                total += n * (1 << 1074) // d
        try:
            return total / (1 << 1074)  # Python's int division: rounded once, to nearest
        except OverflowError:  # a sum past the doubles (math.fsum raises; |g| is infinite)
            return math.inf

    def bind(self, buf: int, array: np.ndarray) -> None:
        """Input or output `buf` at `array` for the calls of `presk_entry_io` with `table`
        (a caller keeping the array alive and of the buffer's storage type and size)."""
        assert _fits(array, NUMPY[self.buffers[buf].dtype], self._shape(buf)), buf
        self._place(buf, array.ctypes.data)

    def held_in_arena(self) -> None:
        """Every input and output of the calls of `presk_entry_io` with `table` at its own
        space in the arena, as `presk_entry` has them (then `bind` moves some)."""
        base = self.arena.ctypes.data
        for buf in self.io:
            self._place(buf, base + self.offsets[buf])

    def call_io(self) -> None:
        """`presk_entry_io` with `table` as bound (`held_in_arena`, `bind`)."""
        if self.module.lib.presk_entry_io(pointer(self.arena, "char"), self.table):
            raise KernelError(f"an index out of range in `{self.schedule.entry}`")

    def _place(self, buf: int, address: int) -> None:
        if buf in self.slot:
            self.table[self.slot[buf]] = ffi().cast("char *", address)

    def run(self, inputs: list, out: list | None = None) -> list[np.ndarray]:
        """The entry's outputs (bf16 widened to float32), from its inputs in the order of
        `schedule.inputs`, without a copy where none is needed: an input that is a
        C-contiguous numpy array of its buffer's storage type (float64, float32, int64,
        bool; aligned to its item) is read where it lies; any other is converted into the
        arena. Each output is written where it is returned: into `out[i]` when given (a
        C-contiguous array of the output's storage type and size), else into a new array
        (or the one the last call returned, when nothing holds it any more); an output that
        is also an input, listed twice, or of bf16, is copied out of the arena."""
        held, results = self._bind(inputs, out)
        self.call_io()
        del held
        return self._results(results)

    def run_timed(self, inputs: list, ns: np.ndarray) -> list[np.ndarray]:
        """`run`, adding each launch's nanoseconds into `ns[i]` and the zeroing of the
        buffers that are not inputs into `ns[-1]` (`ns`: float64, launches + 1; three
        entries each under `timed="threads"`: ns[3i:3i + 3], the zeroing's last)."""
        per = 3 if self.timed == "threads" else 1  # three clocks a launch (host._timed_host)
        assert self.timed and ns.dtype == np.float64
        assert ns.size == per * (len(self.schedule.launches) + 1)
        held, results = self._bind(inputs, None)
        if self.module.lib.presk_entry_timed_io(
            pointer(self.arena, "char"), self.table, pointer(ns)
        ):
            raise KernelError(f"an index out of range in `{self.schedule.entry}`")
        del held
        return self._results(results)

    def _bind(self, inputs: list, out: list | None) -> tuple[list, list]:
        """The table's addresses for a call: the arrays it holds, and each output's array
        (None: read from the arena after the call)."""
        base = self.arena.ctypes.data
        held = []  # the arrays whose addresses the table holds, alive through the call
        for buf, value in zip(self.schedule.inputs, inputs, strict=True):
            b = self.buffers[buf]
            if buf in self.direct and _fits(value, NUMPY[b.dtype], self._shape(buf)):
                held.append(value)
                self._place(buf, value.ctypes.data)
                continue
            self.view(buf).reshape(-1)[...] = to_storage(value, b.dtype).reshape(-1)
            self._place(buf, base + self.offsets[buf])
        results: list[np.ndarray | None] = []
        for i, buf in enumerate(self.schedule.outputs):
            b = self.buffers[buf]
            given = out[i] if out is not None else None
            if buf in self.copied:
                results.append(None)
                self._place(buf, base + self.offsets[buf])
                continue
            if given is not None and not _fits(given, NUMPY[b.dtype], self._shape(buf)):
                raise ValueError(f"out[{i}] is not a C-contiguous {b.dtype} {self._shape(buf)}")
            array = given if given is not None else self._fresh(i, buf)
            results.append(array)
            self._place(buf, array.ctypes.data)
        return held, results

    def _results(self, results: list) -> list[np.ndarray]:
        return [
            np.array(from_storage(self.view(buf), self.buffers[buf].dtype)) if r is None else r
            for buf, r in zip(self.schedule.outputs, results, strict=True)
        ]


def _fits(value, dtype, shape: tuple[int, ...]) -> bool:
    """`value` is an array C may read or write where it lies as a buffer of `dtype` and
    `shape`: that storage type, as many elements, C-contiguous, aligned to its item."""
    return (
        isinstance(value, np.ndarray)
        and value.dtype == dtype
        and value.size == math.prod(shape)
        and value.flags.c_contiguous
        and value.flags.aligned
    )


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
