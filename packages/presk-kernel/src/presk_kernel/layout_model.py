"""The layout cost model (step 17, plan 0.8.0's form): the machine as the model reads it,
one worker's share of a laid-out kernel as five counts, and the model that prices them.

A laid-out kernel (`presk_kernel.layout.apply_layout`: `Tile`, `For`, `GemmStmt`) is read
as one worker's share (`counts`):

- **work**: one operation per iteration of an innermost loop (a fold's term, an innermost
  `For`'s body; a lanes loop's iteration is one vector of `lanes`); under the rule
  `overhead`, also one per iteration of every other loop and tile (the loops' control);
- **loads**: the register loads and stores the body executes: each load of a fold's term
  once per iteration, less what a register tile keeps (a term that does not read a point
  loop of the tile around the fold is loaded once for all of that loop's points), a vector
  load once per vector, each store once;
- **bytes from L2, L3 and memory**: the lines each cache level misses, by the classic
  footprint recursion: a loop whose whole footprint fits a capacity brings it once, else
  each of its iterations brings its body's; the traffic past L1 less the traffic past L2
  comes from L2, and so on; footprints counted in whole cache lines (rule `lines`) or in
  bytes (without it). Capacities are one worker's: L3 shared by the workers that run.

The model: t = λ + spawn·[workers > 1] + ‖(W/π_g, R/ρ_g, B₂/β_L2, B₃/β_L3, Bₘ/β_mem)‖_q,
π and ρ per group g (type, lanes, workers), the p-norm's q fitted (`--combine pnorm`), or
1 (`sum`), or ∞ (`max`). The fit is presk_kernel.layout_fit's. Profiles are JSON documents
(`{"presk": "layout-profile", "version": 1, …}`) holding the machine, the samples kept
across runs and the model (docs/plans.md).
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from presk_kernel.contract import gemm_stop
from presk_kernel.ir import Affine, For, GemmStmt, Kernel, Let, Load, Loop, Op, Reduce, Store, Tile

ITEMSIZE = {"f64": 8, "f32": 4, "bf16": 2, "i64": 8, "bool": 1, "i8": 1}
RULES = ("lines", "overhead")
DEFAULT_RULES = ("lines", "overhead")
COMBINES = ("pnorm", "sum", "max")
PROFILE_KIND = "layout-profile"
PROFILE_VERSION = 1
TERMS = ("work", "loads", "l2", "l3", "mem")


class ModelError(Exception):
    """A layout profile, a rule or a form that cannot be used: its code (E7120–E7129) and
    message."""

    def __init__(self, code: str, message: str, help: str | None = None) -> None:
        super().__init__(message)
        self.code, self.help = code, help


# ---- the machine ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    """The machine as the model reads it, for the first CPU the process may run on."""

    arch: str
    cpu_model: str
    cpu: int  # the first CPU of the affinity
    l1d: int  # bytes
    l2: int
    l3: int
    l3_shared: int  # CPUs sharing that L3
    l2_shared: int
    workers: int  # CPUs the process may run on
    vregs: int  # vector registers
    vector_bits: int
    line: int = 64

    @property
    def kind(self) -> str:
        """What two profiles must share to be compared: the architecture and CPU model."""
        return f"{self.arch} {self.cpu_model}"

    def lanes(self, dtype: str) -> int:
        return max(1, self.vector_bits // (8 * ITEMSIZE.get(dtype, 8)))

    def line_text(self, nest: str, dtype: str) -> str:
        """`-- gemm/%2 on cpu0 (f32): L1d 48 KiB, …` (R17.5)."""
        return (
            f"-- {nest} on cpu{self.cpu} ({dtype}): L1d {self.l1d // 1024} KiB, "
            f"L2 {self.l2 // 1024} KiB, L3 {self.l3 // 1024} KiB shared by {self.l3_shared}, "
            f"{self.workers} workers, {self.vregs} vector registers"
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> Machine:
        names = [f for f in Machine.__dataclass_fields__]
        if not isinstance(d, dict) or set(d) != set(names):
            raise ValueError("`machine` does not have the machine's fields")
        for f in names:
            want = str if f in ("arch", "cpu_model") else int
            if isinstance(d[f], bool) or not isinstance(d[f], want):
                raise ValueError(f"the machine's `{f}` is not a {want.__name__}")
        if any(d[f] < 1 for f in names if f not in ("arch", "cpu_model", "cpu")):
            raise ValueError("a machine's sizes and counts are positive")
        return Machine(**d)


def _size(text: str) -> int:
    """`48K`, `2048K`, `8M` as bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text)
    if not m:
        return 0
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def _cpus(text: str) -> int:
    """How many CPUs a list like `0-3,8` names."""
    n = 0
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            n += int(b) - int(a) + 1
        elif part:
            n += 1
    return n


def _flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":")[0].strip() in ("flags", "Features"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":")[0].strip() in ("model name", "Model", "Hardware"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "an unnamed CPU"


def _lscpu_caches() -> dict[str, int]:
    """Cache sizes from `lscpu -C` where /sys does not give them (whole-chip totals)."""
    if shutil.which("lscpu") is None:
        return {}
    try:
        out = subprocess.run(["lscpu", "-C", "-B"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return {}
    sizes = {}
    for line in out.stdout.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            sizes[parts[0]] = int(parts[1])
    return sizes


def read_machine() -> Machine:
    """The machine from the system: the caches of the first CPU of the affinity
    (/sys/devices/system/cpu/cpuK/cache, `lscpu` where /sys has none), the CPUs the process
    may run on, and the vector registers its ISA has (32 with AVX-512 or on aarch64, 16
    with AVX, else 16)."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = list(range(os.cpu_count() or 1))
    cpu = allowed[0] if allowed else 0
    caches: dict[str, tuple[int, int]] = {}
    base = Path(f"/sys/devices/system/cpu/cpu{cpu}/cache")
    line = 64
    for index in sorted(base.glob("index*")) if base.is_dir() else ():
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _size((index / "size").read_text())
            shared = _cpus((index / "shared_cpu_list").read_text())
            line = int((index / "coherency_line_size").read_text().strip() or 64)
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified"):
            caches[f"L{level}"] = (size, max(1, shared))
    if not caches:
        found = _lscpu_caches()
        caches = {k.replace("d", ""): (v, 1) for k, v in found.items() if k in ("L1d", "L2", "L3")}
    l1 = caches.get("L1", (32 * 1024, 1))
    l2 = caches.get("L2", (l1[0] * 16, 1))
    l3 = caches.get("L3", l2)
    arch = platform.machine().lower()
    flags = _flags()
    if "avx512f" in flags:
        vregs, bits = 32, 512
    elif "avx" in flags or "avx2" in flags:
        vregs, bits = 16, 256
    elif arch in ("aarch64", "arm64"):
        vregs, bits = 32, 128
    else:
        vregs, bits = 16, 128
    return Machine(
        arch, _model_name(), cpu, max(1, l1[0]), max(1, l2[0]), max(1, l3[0]),
        max(1, l3[1]), max(1, l2[1]), max(1, len(allowed)), vregs, bits, max(1, line),
    )  # fmt: skip


# ---- counts -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    """One worker's share of a laid-out kernel: the five terms and its group."""

    work: float
    loads: float
    l2: float  # bytes
    l3: float
    mem: float
    group: str  # `f32+lanes4+w2`
    workers: int = 1

    def terms(self) -> tuple[float, ...]:
        return (self.work, self.loads, self.l2, self.l3, self.mem)

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d) -> Counts:
        if not isinstance(d, dict):
            raise ValueError("`counts` is not a map")
        try:
            values = [float(d[t]) for t in TERMS]
            group, workers = d["group"], d.get("workers", 1)
        except KeyError as e:
            raise ValueError(f"`counts` has no field {e}") from None
        except (TypeError, ValueError, OverflowError):
            raise ValueError("a count is not a number") from None
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise ValueError("a count is not a finite natural amount")
        if not isinstance(group, str) or not GROUP.fullmatch(group):
            raise ValueError(f"`{str(group)[:40]}` is not a group (`f32+lanes4+w2`)")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError("`workers` is not a positive integer")
        return Counts(*values, group=group, workers=workers)


GROUP = re.compile(r"(\w+)\+lanes(\d+)\+w(\d+)(\+gemm)?")


def group_of(dtype: str, lanes: int, workers: int, gemm: bool = False) -> str:
    """`f32+lanes8+w2`; the generated GEMM statement's own `f32+lanes16+w2+gemm`."""
    return f"{dtype}+lanes{max(1, lanes)}+w{max(1, workers)}{'+gemm' if gemm else ''}"


def group_key(group: str) -> tuple:
    """Groups ordered by lanes, then workers (then type), as the fit's lines list them, the
    GEMM statement's after the loop nests': (gemm, lanes, workers, type), a GEMM's type
    `f32+gemm` (a group the fit has not seen takes the rates of one of its own kind)."""
    m = GROUP.fullmatch(group)
    if not m:
        return (0, 0, 0, group)
    gemm = m.group(4) is not None
    return (int(gemm), int(m.group(2)), int(m.group(3)), m.group(1) + ("+gemm" if gemm else ""))


@dataclass
class _Access:
    buf: int
    coefs: dict[str, int]  # element stride per loop variable (a gather: each variable 1 line)
    itemsize: int
    gather: bool = False


@dataclass
class _Node:
    """A loop of the walk: its variable's range inside it, iterations, children."""

    var: str | None  # the loop variable whose range it sets (a tile: the variable it tiles)
    rng: float  # that variable's range within one execution of this node
    iters: float  # iterations of this worker, per execution
    children: list = field(default_factory=list)  # _Node or _Access (a leaf access)


def _vars_of(e, out: set[str]) -> None:
    match e:
        case Affine():
            out.update(v for v, c in e.terms if c)
        case Load():
            for i in e.index:
                _vars_of(i, out)
        case Op():
            for a in e.args:
                _vars_of(a, out)
        case _:
            if hasattr(e, "var"):
                out.add(e.var)


def _access(k: Kernel, buf: int, index: tuple) -> _Access:
    b = k.buffers[buf]
    item = ITEMSIZE.get(b.dtype, 8)
    if all(isinstance(i, Affine) for i in index) and len(index) == len(b.axes):
        coefs: dict[str, int] = {}
        stride = 1
        for ax in reversed(range(len(b.axes))):
            for v, c in index[ax].terms:
                coefs[v] = coefs.get(v, 0) + c * stride
            stride *= b.axes[ax].length
        return _Access(buf, {v: c for v, c in coefs.items() if c}, item)
    seen: set[str] = set()
    for i in index:
        _vars_of(i, seen)
    return _Access(buf, dict.fromkeys(sorted(seen), 1 << 20), item, gather=True)


def _loads(e, k: Kernel, out: list) -> None:
    match e:
        case Load():
            out.append(_access(k, e.buf, e.index))
            for i in e.index:
                if not isinstance(i, Affine):
                    _loads(i, k, out)
        case Op():
            for a in e.args:
                _loads(a, k, out)


class _Walk:
    """One walk of a laid-out body: work and register loads summed, the loop tree kept for
    the footprints."""

    def __init__(self, k: Kernel, machine: Machine, rules: tuple[str, ...]) -> None:
        self.k, self.m, self.rules = k, machine, rules
        self.work = 0.0
        self.loads = 0.0
        self.workers = 1
        self.lanes = 1
        self.gemm = False

    def body(self, stmts, times: float, ctx: dict) -> list:
        """The nodes and accesses of `stmts`, executed `times` times by this worker; `ctx`:
        lanes (the enclosing lanes loop's width), reg (the register tile's point loops
        around: var → size)."""
        out: list = []
        innermost = not any(isinstance(s, (Loop, For, Tile, Reduce, GemmStmt)) for s in stmts)
        for s in stmts:
            match s:
                case Let(_, e) | Store(_, _, e):
                    acc: list = []
                    _loads(e, self.k, acc)
                    if isinstance(s, Store):
                        acc.append(_access(self.k, s.buf, s.index))
                    self.loads += times * len(acc) / ctx["lanes"]
                    out.extend(acc)
                    if innermost and isinstance(s, Store):
                        self.work += times / ctx["lanes"]
                case Tile():
                    share = s.extent / s.threads if s.threads > 1 else s.extent
                    iters = math.ceil(math.ceil(s.extent / s.size) / s.threads)
                    if s.threads > 1:
                        self.workers = max(self.workers, s.threads)
                    self._overhead(times * iters)
                    node = _Node(s.of, share, iters)
                    node.children = self.body(s.body, times * iters, ctx)
                    out.append(node)
                case For():
                    out.append(self._for(s, times, ctx))
                case Loop():
                    trips = _trips(s.extent, s.start, s.stop)
                    node = _Node(s.var, trips, trips)
                    inner = not any(isinstance(b, (Loop, Reduce)) for b in s.body)
                    if not inner:
                        self._overhead(times * trips)
                    node.children = self.body(s.body, times * trips, ctx)
                    out.append(node)
                case Reduce():
                    out.append(self._reduce(s, times, ctx))
                case GemmStmt():
                    out.append(self._gemm(s))
                case _ if hasattr(s, "body") and hasattr(s, "nest"):
                    # a statement that runs `body` for the nest it keeps (a softmax's passes)
                    out.extend(self.body(s.body, times, ctx))
        return out

    def _overhead(self, n: float) -> None:
        if "overhead" in self.rules:
            self.work += n

    def _for(self, s: For, times: float, ctx: dict) -> _Node:
        if s.tile is not None:
            ntiles = math.ceil(s.extent / s.size)
            iters = s.extent / ntiles  # the mean tile: the point loops run `extent` in all
        else:
            iters = s.extent
        rng = iters
        if s.threads > 1:
            self.workers = max(self.workers, s.threads)
            iters = math.ceil(iters / s.threads)
            rng = iters
        ctx = dict(ctx)
        if s.lanes > 0:
            self.lanes = max(self.lanes, s.lanes)
            ctx["lanes"] = ctx["lanes"] * s.lanes
        if s.tile is not None:
            ctx["reg"] = {**ctx["reg"], s.var: iters}
        node = _Node(s.var, rng, iters)
        leaf = not any(isinstance(b, (Loop, For, Tile, Reduce, GemmStmt)) for b in s.body)
        if not leaf:
            self._overhead(times * iters / (s.lanes or 1))
        node.children = self.body(s.body, times * iters, ctx)
        return node

    def _reduce(self, r: Reduce, times: float, ctx: dict) -> _Node:
        extents = [e for _, _, e in r.vars]
        size = getattr(r, "size", 0)
        if getattr(r, "block", None) is not None and size and extents:
            # a block of the fold (a kblock): its variable runs within the enclosing tile,
            # the mean block so that the blocks run `extent` terms in all; the partial sum
            # resumed from its output once a block
            extents[-1] = extents[-1] / math.ceil(extents[-1] / size)
            self.loads += times
        if getattr(r, "stop", None) is not None and extents:
            extents[-1] = _trips(extents[-1], None, r.stop)
        n = math.prod(extents)
        reg = ctx["reg"]
        acc = math.prod(reg.values()) / max(1, ctx["lanes"]) if reg else 0
        fits = reg and acc <= max(1, self.m.vregs - 4)
        inner = times * n
        terms: list = []
        for t in r.terms:
            _loads(t, self.k, terms)
        for a in terms:
            seen = set(a.coefs)
            reuse = math.prod(v for var, v in reg.items() if var not in seen) if fits else 1
            self.loads += inner / reuse / ctx["lanes"]
        if not fits and reg:
            self.loads += 2 * inner / ctx["lanes"]  # the accumulators spill: a load and a store
        self.work += inner / ctx["lanes"]
        # the fold's variables as nested loops, outermost first
        node = root = None
        for (var, _, _), extent in zip(r.vars, extents, strict=True):
            child = _Node(var, extent, extent)
            if node is None:
                root = child
            else:
                node.children.append(child)
            node = child
        if root is None:  # a fold over no variable (one term: a sum of one element)
            node = root = _Node(None, 1, 1)
        node.children.extend(terms)
        inside = self.body(r.body, inner, ctx)
        node.children.extend(inside)
        return root

    def _gemm(self, g: GemmStmt) -> _Node:
        """The generated GEMM (presk_cback.gemm's Goto nest, its default blocking), one
        worker's share of it: its MR panels of m when m is longer than n and has a panel
        for every worker, else its NR panels of n (of m when n has fewer panels than the
        workers and than m, or its largest share is a larger part than m's would be;
        presk_cback.gemm's `split_columns`), each call once per point of the batch loops (its
        share of those points when the workers share them, `batched`). Work: the
        micro-kernel's vector FMAs over the tiles padded to MR × NR, the panels' copies (B's
        once, A's once per NC block of columns; in place when n has at most four panels),
        and under the rule `overhead` one operation per tile and per packed panel. Register
        loads: the micro-kernel's broadcasts and vector loads, C's tile read and written for
        every KC block, the copies' loads and stores. Traffic (`_gemm_traffic`): A re-read
        from L2 for every NR panel, B from L3 for every MC block, C for every KC block, the
        packed panels and C's rows in whole cache lines under the rule `lines`. Its group is
        its own (`+gemm`): its rates are fitted on its samples, apart from the loop nests'."""
        gm = g.gemm
        batch = math.prod(n for _, n in gm.batch)
        stop = gemm_stop(gm, g.nest)
        if stop is None:
            return self._gemm_call(gm.rows, gm.cols, gm.depth, batch, g.threads, g.batched)
        # a narrowed product (its live triangle, presk_kernel.narrow): one call of the banded
        # driver (presk_cback.emit's band_call), each panel of MR rows over the NR panels of
        # columns its last row needs: priced as one call over as many tiles, its columns
        # the mean a row
        mr, nr = gemm_blocking(self.k.compute, self.m.vector_bits)[:2]
        tiles = 0
        for r0 in range(0, gm.rows, mr):
            r1 = min(gm.rows, r0 + mr)
            tiles += (r1 - r0) * min(gm.cols, math.ceil(max(0, r1 - 1 + stop) / nr) * nr)
        node = _Node(None, 1, 1)
        if tiles:
            cols = max(1, round(tiles / gm.rows))
            node.children.append(
                self._gemm_call(gm.rows, cols, gm.depth, batch, g.threads, g.batched)
            )
        return node

    def _gemm_call(
        self, m: int, n: int, k: int, batch: int, threads: int, batched: bool = False
    ) -> _Node:
        """One call of the generated GEMM over C[m, n] summed over k, `batch` times."""
        dt = self.k.compute
        vl = self.m.lanes(dt)
        self.lanes = max(self.lanes, vl)
        self.gemm = True
        mr, nr, mc, kc, nc = gemm_blocking(dt, self.m.vector_bits)
        item = ITEMSIZE.get(dt, 8)
        npan, mpan = math.ceil(n / nr), math.ceil(m / mr)
        threads = max(1, threads)
        if batched:  # the workers share the batch's points, each call whole on one
            self.workers = max(self.workers, threads)
            batch, threads = math.ceil(batch / threads), 1
        by_n = split_columns(m, n, npan, mpan, threads)
        parts = npan if by_n else mpan
        nt = max(1, min(threads, parts))
        self.workers = max(self.workers, nt)
        if by_n:
            n = min(n, math.ceil(parts / nt) * nr)
            npan = math.ceil(n / nr)
        else:
            m = min(m, math.ceil(parts / nt) * mr)
            mpan = math.ceil(m / mr)
        tiles = mpan * npan
        fmas = batch * tiles * mr * nr * k
        in_place = npan <= 4
        copy_a = 0 if in_place else batch * mpan * mr * k * math.ceil(n / nc)
        copy_b = batch * npan * nr * k
        self.work += fmas / vl + (copy_a + copy_b) / vl
        blocks = math.ceil(k / kc)
        self.loads += fmas * (mr + nr / vl) / (mr * nr)
        self.loads += batch * tiles * mr * (nr / vl) * (2 * blocks - 1)
        self.loads += 2 * (copy_a + copy_b) / vl
        self._overhead(batch * (tiles * blocks + mpan * blocks + npan * blocks))
        line = self.m.line
        lines = "lines" in self.rules

        def whole(nbytes: float) -> float:
            return math.ceil(nbytes / line) * line if lines else nbytes

        if not in_place:
            a = batch * mpan * whole(mr * k * item)
        else:
            a = batch * m * whole(k * item)
        b = batch * npan * whole(nr * k * item)
        c = batch * m * whole(n * item)
        node = _Node(None, 1, 1)
        node.gemm = (a, b, c, m, n, k, mr, nr, mc, kc, nc)  # type: ignore[attr-defined]
        return node


def gemm_shape(laid: Kernel) -> list | None:
    """[type, rows (its batch folded in), columns, depth, the narrowed bound or None,
    threads] of a laid-out kernel that is one GEMM statement (within batch loops or not),
    else None: what makes two timed GEMM statements the same product on the same workers
    (a layout profile's samples carry it, so that `presk plan` reads what it measured)."""
    found: list = []

    def walk(body) -> None:
        for s in body:
            if isinstance(s, GemmStmt):
                found.append(s)
            elif hasattr(s, "body") and not isinstance(s, GemmStmt):
                walk(s.body)

    walk(laid.body)
    if len(found) != 1:
        return None
    g = found[0]
    gm = g.gemm
    rows = gm.rows * math.prod(n for _, n in gm.batch)
    return [laid.compute, rows, gm.cols, gm.depth, gemm_stop(gm, g.nest), max(1, g.threads)]


def gemm_blocking(dtype: str, vector_bits: int) -> tuple[int, int, int, int, int]:
    """(MR, NR, MC, KC, NC) of the generated GEMM's default blocking on vectors of
    `vector_bits` (presk_cback.gemm.default_blocking and source, read here: a later stage's)."""
    vl = max(1, vector_bits // (8 * ITEMSIZE.get(dtype, 8)))
    match vector_bits, dtype:
        case 512, "f64":
            mr, nv, kc, mc = 6, 4, 384, 192
        case 512, "f32":
            mr, nv, kc, mc = 12, 2, 384, 96
        case 256, _:
            mr, nv, kc, mc = 6, 2, 256, 96
        case _:
            mr, nv, kc, mc = 4, 2, 256, 64
    nr = nv * vl
    return mr, nr, max(mr, mc // mr * mr), kc, max(nr, 4096 // nr * nr)


def split_columns(m: int, n: int, npan: int, mpan: int, threads: int) -> bool:
    """Whether the generated GEMM's threads share n's `npan` panels (True) or m's `mpan`
    (presk_cback.gemm's `split_columns`, the same rule, read here: a later stage's): m's when
    m is the longer side and has a panel for every thread, or n has fewer panels than the
    threads and than m, or n's largest share would be a larger part of C than m's."""
    t = max(1, threads)
    if m > n and mpan >= t:
        return False
    if npan < t and npan < mpan:
        return False
    return -(-npan // t) * mpan <= -(-mpan // t) * npan


def _footprint(node, ranges: dict[str, float], line: int, lines: bool) -> float:
    """Bytes (whole lines under the rule `lines`) of every buffer that `node`'s accesses
    touch, the variables bound inside it over their ranges: per buffer, its largest access."""
    per: dict[int, float] = {}
    for a, rng in _accesses(node, ranges):
        if a.gather:
            n = math.prod(rng.get(v, 1) for v in a.coefs)
            size = n * (line if lines else a.itemsize)
        else:
            dims = {v: rng[v] for v in a.coefs if v in rng}
            run_var = next((v for v, c in a.coefs.items() if abs(c) == 1 and v in dims), None)
            run = dims.pop(run_var) if run_var else 1
            rest = math.prod(dims.values()) if dims else 1
            size = rest * (math.ceil(run * a.itemsize / line) * line if lines else run * a.itemsize)
        buf = a.buf
        per[buf] = max(per.get(buf, 0.0), size)
    return sum(per.values()) + sum(sum(g[:3]) for g in _gemms(node))


def _gemms(node):
    """The GEMM statements under `node` (their operands' bytes: a, b, c first)."""
    if isinstance(node, _Access):
        return
    if hasattr(node, "gemm"):
        yield node.gemm
    for c in node.children:
        yield from _gemms(c)


def _accesses(node, ranges: dict[str, float]):
    """(access, the ranges of the variables bound inside `node`) of every access under it."""
    if isinstance(node, _Access):
        yield node, ranges
        return
    inner = dict(ranges)
    if node.var is not None:
        inner[node.var] = max(inner.get(node.var, 0), node.rng)
    for c in node.children:
        yield from _accesses(c, inner)


def _gemm_traffic(g: tuple, cap: float) -> float:
    """Bytes the GEMM brings past a cache of `cap` bytes (see `_Walk._gemm`)."""
    a, b, c, m, n, k, mr, nr, mc, kc, nc = g
    if a + b + c <= cap:
        return a + b + c
    if kc * nc * (b / max(1, k * n)) <= cap:  # B's block stays: A streams once per NC
        return a * math.ceil(n / nc) + b + c * (2 * math.ceil(k / kc) - 1)
    if mc * kc * (a / max(1, m * k)) <= cap:  # A's block stays: B streams once per MC block
        return a * math.ceil(n / nc) + b * math.ceil(m / mc) + c * (2 * math.ceil(k / kc) - 1)
    return a * math.ceil(n / nr) + b * math.ceil(m / mr) + c * (2 * math.ceil(k / kc) - 1)


def _traffic(node, cap: float, line: int, lines: bool, ranges: dict[str, float]) -> float:
    """Bytes brought past a cache of `cap` bytes by one execution of `node`: its footprint
    when that fits, else its iterations times its body's."""
    if isinstance(node, _Access):
        return float(line if lines else node.itemsize)
    if hasattr(node, "gemm"):
        return _gemm_traffic(node.gemm, cap)
    fp = _footprint(node, ranges, line, lines)
    if fp <= cap:
        return fp
    inner = dict(ranges)
    if node.var is not None:
        inner[node.var] = max(inner.get(node.var, 0), node.rng)
    # one iteration: the node's own variable fixed, so its range is one point
    one = dict(ranges)
    body = sum(_traffic(c, cap, line, lines, _fixed(one, node.var)) for c in node.children)
    return node.iters * body


def _fixed(ranges: dict[str, float], var: str | None) -> dict[str, float]:
    if var is None:
        return ranges
    out = dict(ranges)
    out.pop(var, None)
    return out


def _trips(extent: int, start, stop) -> float:
    """A loop's mean iterations: a triangular bound (issue 26, presk_kernel.narrow) counted at
    its mean, each variable it reads taken over [0, extent) (a mask's two axes are as long)."""

    def mean(a) -> float:
        return a.const + sum(c * (extent - 1) / 2 for _, c in a.terms)

    lo = 0.0 if start is None else max(0.0, mean(start))
    hi = float(extent) if stop is None else min(float(extent), mean(stop))
    return max(0.0, hi - lo)


def counts(laid: Kernel, machine: Machine, rules: tuple[str, ...] = DEFAULT_RULES) -> Counts:
    """One worker's share of a laid-out kernel (module docstring): work, register loads and
    stores, and the bytes it brings from L2, L3 and memory, with its group."""
    walk = _Walk(laid, machine, rules)
    root = _Node(None, 1, 1)
    root.children = walk.body(laid.body, 1.0, {"lanes": 1, "reg": {}})
    lines = "lines" in rules
    line = machine.line
    w = walk.workers
    l1 = float(machine.l1d)
    l2 = machine.l2 / max(1, min(w, machine.l2_shared))
    l3 = machine.l3 / max(1, min(w, machine.l3_shared))
    past = [_traffic(root, cap, line, lines, {}) for cap in (l1, l2, l3)]
    past = [max(past[i], *past[i + 1 :]) if i < 2 else past[i] for i in range(3)]
    from_l2, from_l3, from_mem = past[0] - past[1], past[1] - past[2], past[2]
    return Counts(
        float(walk.work), float(walk.loads), float(from_l2), float(from_l3), float(from_mem),
        group_of(laid.compute, walk.lanes, w, walk.gemm), w,
    )  # fmt: skip


def parse_rules(text: str) -> tuple[str, ...]:
    """`--rules`: a comma-separated subset of lines, overhead, or `none` (E7123)."""
    if text.strip() == "none":
        return ()
    parts = [p.strip() for p in text.split(",")]
    bad = [p for p in parts if p not in RULES]
    if bad or len(set(parts)) != len(parts):
        raise ModelError(
            "E7123",
            f"`--rules {text}`: the rules are a comma-separated subset of "
            f"{', '.join(RULES)}, each once, or `none`",
        )
    return tuple(r for r in RULES if r in parts)


def rules_text(rules: tuple[str, ...]) -> str:
    return ",".join(rules) if rules else "none"


def parse_combine(text: str) -> str:
    if text not in COMBINES:
        raise ModelError(
            "E7123", f"`--combine {text}`: one of {', '.join(COMBINES)} (the p-norm, its q fitted)"
        )
    return text


# ---- the model ----------------------------------------------------------------------------


@dataclass
class Model:
    """λ + spawn·[workers > 1] + the `combine` of the five terms over their rates (seconds,
    rates in operations, loads or bytes a second); π and ρ per group."""

    lam: float
    spawn: float
    beta_l2: float
    beta_l3: float
    beta_mem: float
    pi: dict[str, float]
    rho: dict[str, float]
    q: float  # the p-norm's exponent (math.inf: the max)
    combine: str = "pnorm"
    rules: tuple[str, ...] = DEFAULT_RULES
    u: float = 0.0  # the median relative residual
    spearman: float = 0.0
    samples: int = 0

    def rates(self, group: str) -> tuple[float, float]:
        """π and ρ of `group`; a group the fit has not seen takes the nearest one's (the same
        type and lanes, then the same type; the nearest worker count)."""
        if group in self.pi:
            return self.pi[group], self.rho[group]
        _, lanes, workers, t = group_key(group)
        known = sorted(self.pi, key=group_key)
        same = [g for g in known if group_key(g)[3] == t] or known
        if not same:
            raise ModelError("E7129", f"the model has no rates at all: no group near `{group}`")
        best = min(
            same,
            key=lambda g: (group_key(g)[1] != lanes, abs(group_key(g)[2] - workers), group_key(g)),
        )
        return self.pi[best], self.rho[best]

    def predict(self, c: Counts) -> float:
        """Seconds."""
        pi, rho = self.rates(c.group)
        parts = [
            c.work / pi, c.loads / rho, c.l2 / self.beta_l2, c.l3 / self.beta_l3,
            c.mem / self.beta_mem,
        ]  # fmt: skip
        return self.lam + (self.spawn if c.workers > 1 else 0.0) + combine_terms(parts, self.q)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["q"] = None if math.isinf(self.q) else self.q
        d["rules"] = list(self.rules)
        return d

    @staticmethod
    def from_dict(d) -> Model:
        if not isinstance(d, dict):
            raise ValueError("`model` is not a map")
        try:
            reals = {
                k: _real(d[k])
                for k in ("lam", "spawn", "beta_l2", "beta_l3", "beta_mem", "u", "spearman")
            }
            q = math.inf if d["q"] is None else _real(d["q"])
            pi = {str(g): _real(v) for g, v in _map(d["pi"]).items()}
            rho = {str(g): _real(v) for g, v in _map(d["rho"]).items()}
            combine, rules, n = d["combine"], d["rules"], d["samples"]
        except KeyError as e:
            raise ValueError(f"`model` has no field {e}") from None
        if set(pi) != set(rho):
            raise ValueError("π and ρ are not of the same groups")
        if combine not in COMBINES or not isinstance(rules, list):
            raise ValueError("`combine` or `rules` is not one the model knows")
        if any(r not in RULES for r in rules) or isinstance(n, bool) or not isinstance(n, int):
            raise ValueError("`rules` or `samples` is malformed")
        rates = [reals["beta_l2"], reals["beta_l3"], reals["beta_mem"], *pi.values(), *rho.values()]
        if any(r <= 0 for r in rates) or q < 1 or reals["lam"] < 0 or reals["spawn"] < 0:
            raise ValueError("rates are positive, λ and spawn not negative, q at least 1")
        return Model(
            reals["lam"], reals["spawn"], reals["beta_l2"], reals["beta_l3"], reals["beta_mem"],
            pi, rho, q, combine, tuple(r for r in RULES if r in rules), reals["u"],
            reals["spearman"], n,
        )  # fmt: skip


def combine_terms(parts, q: float) -> float:
    """The p-norm of the non-negative terms (q = ∞: their maximum)."""
    if math.isinf(q):
        return max(parts)
    top = max(parts)
    if top <= 0:
        return 0.0
    return top * sum((p / top) ** q for p in parts) ** (1.0 / q)


def _map(v) -> dict:
    if not isinstance(v, dict):
        raise ValueError("a rate table is not a map")
    return v


def _real(v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("a number of the model is not a number")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError("a number of the model is not finite")
    return v


def sci(x: float) -> str:
    """`1.331e10`: four significant digits, the exponent without sign or zeros."""
    mant, exp = f"{x:.3e}".split("e")
    return f"{mant}e{int(exp)}"


# ---- samples and profiles -----------------------------------------------------------------


SAMPLE_FIELDS = ("nest", "operands", "type", "decisions", "layout", "counts", "times_us")


def check_sample(s, where: str) -> dict:
    """A sample as the profile keeps it, its fields checked (ValueError saying which)."""
    if not isinstance(s, dict) or any(f not in s for f in SAMPLE_FIELDS):
        raise ValueError(f"{where} is not a sample ({', '.join(SAMPLE_FIELDS)})")
    if not isinstance(s["nest"], str) or not isinstance(s["layout"], str):
        raise ValueError(f"{where}: `nest` and `layout` are strings")
    if not isinstance(s["decisions"], dict) or not isinstance(s["operands"], list):
        raise ValueError(f"{where}: `decisions` is a map, `operands` a list")
    check_counts(s["counts"])
    times = s["times_us"]
    if (
        not isinstance(times, list)
        or not times
        or not all(
            not isinstance(t, bool) and isinstance(t, (int, float)) and math.isfinite(t) and t > 0
            for t in times
        )
    ):
        raise ValueError(f"{where}: `times_us` is a list of positive times")
    g = s.get("gemm")
    if g is not None and not (
        isinstance(g, list)
        and len(g) == 6
        and isinstance(g[0], str)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in g[1:4] + g[5:])
        and (g[4] is None or (isinstance(g[4], int) and not isinstance(g[4], bool)))
    ):
        raise ValueError(f"{where}: `gemm` is [type, rows, columns, depth, bound, threads]")
    return s


def check_counts(doc) -> None:
    """A `counts` map: rules (`lines,overhead` …) → counts (ValueError saying what)."""
    if not isinstance(doc, dict) or not doc:
        raise ValueError("`counts` is not a map of rules to counts")
    for key, c in doc.items():
        if key != "none" and any(r not in RULES for r in key.split(",")):
            raise ValueError(f"`counts` has unknown rules `{key[:40]}`")
        Counts.from_dict(c)


def sample_key(s: dict) -> str:
    """What makes two samples one (a run times it again: the newer replaces the older)."""
    return json.dumps(
        [s["nest"], s["operands"], s["type"], s["layout"], s.get("dims", {})], sort_keys=True
    )


@dataclass
class Profile:
    machine: Machine
    samples: list[dict] = field(default_factory=list)
    model: Model | None = None

    def check_machine(self, machine: Machine, path: str) -> None:
        """E7122 when the profile describes another kind of machine."""
        if machine.kind != self.machine.kind:
            raise ModelError(
                "E7122",
                f"`{path}` profiles another machine ({self.machine.kind}); this one is "
                f"{machine.kind}",
                "calibrate a profile of its own for this machine",
            )

    def to_json(self) -> str:
        doc = {
            "presk": PROFILE_KIND,
            "version": PROFILE_VERSION,
            "machine": self.machine.to_dict(),
            "samples": self.samples,
            "model": None if self.model is None else self.model.to_dict(),
        }
        return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def save_profile(profile: Profile, path: str) -> None:
    """Written whole (a temporary file renamed: presk_core.data.write_text); E7127 if not."""
    write_text_file(path, profile.to_json())


def write_text_file(path: str, text: str) -> None:
    """`text` written whole at `path` (presk_core.data.write_text); E7127 if it cannot be."""
    from presk_core.data import write_text

    try:
        write_text(path, text)
    except OSError as e:
        raise ModelError("E7127", f"cannot write `{path}`: {e.strerror or e}") from None


def load_profile(path: str) -> Profile:
    """A layout profile; ModelError otherwise: E7120 unreadable or malformed, E7121 another
    version, E7128 the step-12 roofline profile (`presk bench --calibrate` without
    --space), which holds no layout model."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelError("E7120", f"`{path}`: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ModelError("E7120", f"`{path}` cannot be read: {e}") from None
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise ModelError("E7120", f"`{path}` is not JSON: {e}") from None
    if isinstance(doc, dict) and "presk_profile" in doc:
        raise ModelError(
            "E7128",
            f"`{path}` is a roofline profile (presk bench --calibrate without --space), "
            "not a layout profile",
            "calibrate the layout model with --space calib into another file",
        )
    if not isinstance(doc, dict) or doc.get("presk") != PROFILE_KIND:
        raise ModelError("E7120", f"`{path}` is not a presk layout profile")
    if doc.get("version") != PROFILE_VERSION:
        raise ModelError(
            "E7121",
            f"`{path}` is a layout profile of version {str(doc.get('version'))[:20]}; this "
            f"presk reads version {PROFILE_VERSION}",
            "calibrate it again",
        )
    try:
        machine = Machine.from_dict(doc["machine"])
        samples = doc["samples"]
        if not isinstance(samples, list):
            raise ValueError("`samples` is not a list")
        samples = [check_sample(s, f"sample {i}") for i, s in enumerate(samples)]
        model = None if doc["model"] is None else Model.from_dict(doc["model"])
    except KeyError as e:
        raise ModelError("E7120", f"`{path}` is a malformed layout profile: no field {e}") from None
    except (ValueError, TypeError) as e:
        raise ModelError("E7120", f"`{path}` is a malformed layout profile: {e}") from None
    return Profile(machine, samples, model)


__all__ = [
    "Counts",
    "Machine",
    "Model",
    "ModelError",
    "Profile",
    "combine_terms",
    "counts",
    "group_key",
    "load_profile",
    "parse_combine",
    "parse_rules",
    "read_machine",
    "rules_text",
    "save_profile",
]


RULE_SETS = ((), ("lines",), ("overhead",), ("lines", "overhead"))


def count_all(laid: Kernel, machine: Machine) -> dict[str, dict]:
    """The counts under every rule set, by `rules_text` (`lines,overhead`, `lines`,
    `overhead`, `none`): what a sample and a day's point keep, so that `presk refit` and
    `presk reprice` can price them under any rules without the kernel."""
    return {rules_text(r): counts(laid, machine, r).to_dict() for r in RULE_SETS}


def counts_for(doc, rules: tuple[str, ...]) -> Counts:
    """The counts of a sample's or a point's `counts` map under `rules` (ValueError)."""
    if not isinstance(doc, dict):
        raise ValueError("`counts` is not a map")
    key = rules_text(rules)
    if key not in doc:
        raise ValueError(f"`counts` has none under the rules {key}")
    return Counts.from_dict(doc[key])
