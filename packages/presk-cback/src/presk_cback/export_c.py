"""The C export (step 18): an entry's laid-out schedule as a C program in the style of
llama2.c, which computes the native backend's bits without presk.

    program = c_program(schedule, lets, "attend", output_header, threads)
    program.files                  # {"kernels.c": …, "model.c": …, "main.c": …, …}

The files follow the schedule as the native backend runs it (presk_cback.emit renders the
same kernels): `kernels.c` holds each distinct kernel as one `PRESK_KERNEL` function
`kN(in…, out…, lo, hi)` under its PSK-Kernel text, its outermost loop running from `lo` to
`hi`; `model.c` holds a C function per host function (presk_kernel.frames: each buffer
named after its let, taken from one arena past a mark and released on return), a split
launch as an OpenMP region whose threads each run the kernel on their piece of the divided
loop (a plain call without OpenMP); `main.c` reads the inputs from a `.psk.d` file, calls
the entry and writes its outputs as one (`-r N` times N calls). Every element is computed
by one thread in the order of the native backend's loops, so no team, compiler or build
changes a bit (DESIGN §11).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from importlib import resources

from presk_core import normal_c
from presk_kernel import libm
from presk_kernel.calls import entry_call
from presk_kernel.frames import HostFrame, host_frames
from presk_kernel.ir import (
    Call,
    For,
    GemmStmt,
    Kernel,
    Loop,
    Reduce,
    Schedule,
    Tile,
    TwoPass,
    format_kernel,
)
from presk_kernel.layout import applies, is_laid
from presk_kernel.narrow import mask_inputs
from presk_kernel.written import zeroed

from presk_cback import gemm
from presk_cback.emit import CTYPE, PRELUDE, EmitError, KernelC, _name, affine_c
from presk_cback.export_main import main_c
from presk_cback.memory import c_arenas
from presk_cback.strip import Strip
from presk_cback.toolchain import Toolchain, find_toolchain

CFLAGS = "-std=c11 -ffp-contract=off -O2 -Wall -Wextra"


@dataclass(frozen=True, slots=True)
class CProgram:
    """The files of an exported program (name -> text), and what the summary line counts."""

    files: dict[str, str]
    mpfr: tuple[tuple[str, ...], tuple[str, ...]] | None  # (cflags, libs) of normal draws
    entry: HostFrame  # the entry's frame: its inputs and outputs as model.h names them
    cname: str  # the entry's C function
    launches: int
    dead: int
    split: int
    kernels: int
    functions: int
    loops: int
    arena: int
    unreleased: int


# ---- kernels.c -----------------------------------------------------------------------------


def _split_loop(k: Kernel):
    """The statement whose iterations `lo` and `hi` bound: the kernel's one top statement
    when it is a loop (a tile loop counts its tiles), else None (a 0-d kernel, a body of
    several statements: `lo` and `hi` are unused and the host passes 0 and 1)."""
    if len(k.body) == 1 and isinstance(k.body[0], Loop | Tile):
        return k.body[0]
    if len(k.body) == 1 and isinstance(k.body[0], For) and k.body[0].tile is None:
        return k.body[0]
    return None


def trips(s) -> int:
    """The iterations of a split loop: a tile loop's tiles, another loop's extent."""
    if isinstance(s, Tile):
        return -(-s.extent // s.size)
    return s.extent


def threads_of(s) -> int:
    return getattr(s, "threads", 1) if isinstance(s, For | Tile) else 1


class ExportKernelC(KernelC):
    """A kernel as kernels.c writes it: the native backend's C (presk_cback.emit.KernelC),
    its outer loop bounded by `lo` and `hi` (the host's piece of it, with no thread pragma
    of its own), its buffers the parameters `in0…` and `out…`."""

    def __init__(self, k: Kernel, fname: str, restrict: bool, masks=None) -> None:
        super().__init__(k, fname, lanes=True, masks=masks)
        self.top = _split_loop(k)
        self.restrict = restrict

    def stmt(self, s, depth: int) -> None:
        if s is not self.top or s is None:
            return super().stmt(s, depth)
        match s:
            case Loop(var, _, extent, body, _, start, stop):
                v = _name(var)
                lo = "lo" if start is None else f"presk_maxi(lo, {affine_c(start)})"
                hi = "hi" if stop is None else f"presk_mini(hi, {affine_c(stop)})"  # bounded
                self.emit(f"for (int64_t {v} = {lo}; {v} < {hi}; {v}++) {{", depth)
                self.block(body, depth + 1)
                self.emit("}", depth)
            case Tile(var, _, extent, size, body, _):
                v = _name(var)
                end = f"(hi * {size} < {extent} ? hi * {size} : {extent})"
                self.emit(f"for (int64_t {v} = lo * {size}; {v} < {end}; {v} += {size}) {{", depth)
                self.block(body, depth + 1)
                self.emit("}", depth)
            case For(var, _, _, body, _, _, _, lanes, strip, rows):
                v = _name(var)
                if strip:
                    Strip(self, v, strip, rows, var).emit("lo", "hi", depth, body, None)
                    return
                if lanes > 0:
                    self.emit("#pragma omp simd", 0)
                self.emit(f"for (int64_t {v} = lo; {v} < hi; {v}++) {{", depth)
                self.block(body, depth + 1)
                self.emit("}", depth)

    def gemm_call(
        self,
        g,
        threads,
        depth: int,
        stop: int | None = None,
        batched: bool = False,
        kstop=None,
        bound: int = 0,
    ) -> None:
        """The GEMM's call, its threads at most those OpenMP may use (presk_threads); a
        narrowed product's (`stop`) or one folding its rows' allowed terms (`kstop`) as one
        banded call, KernelC.band_call; `batched`: those threads share its batch's points,
        each call on one; `bound`: its first batch loops are the loops around it."""
        many = f"presk_threads({threads})" if threads > 1 else threads
        super().gemm_call(g, many, depth, stop, batched, kstop, bound)

    def function(self) -> list[str]:
        k = self.k
        if applies(k.layout) and not is_laid(k):
            raise EmitError(f"`{k.name}` at {k.site}: its layout is not applied to its body")
        names = param_names(k)
        r = " restrict" if self.restrict else ""
        params = [
            f"{'const ' if i < len(k.inputs) else ''}{CTYPE[b.dtype]} *{r} {names[i]}".replace(
                "* ", "*"
            )
            for i, b in enumerate(k.buffers)
        ]
        head = f"PRESK_KERNEL void {self.fname}({', '.join([*params, 'int64_t lo, int64_t hi'])})"
        self.lines = [head + " {"]
        for i, b in enumerate(k.buffers):
            const = "const " if i < len(k.inputs) else ""
            self.emit(f"{const}{CTYPE[b.dtype]} *const b{b.id} = {names[i]};", 1)
        self.emit("int *const err = &presk_error;", 1)
        self.emit("(void)err;", 1)
        for b in self.masks:  # (read as comparisons: KernelC.mask_read)
            self.emit(f"(void)b{b};", 1)
        if self.top is None:
            self.emit("(void)lo;", 1)
            self.emit("(void)hi;", 1)
        self.block(k.body, 1)
        self.lines.append("}")
        return self.pre + self.lines  # a GEMM's epilogue functions first (emit.KernelC)


def param_names(k: Kernel) -> list[str]:
    outs = len(k.outputs)
    return [f"in{i}" for i in range(len(k.inputs))] + (
        ["out"] if outs == 1 else [f"out{i}" for i in range(outs)]
    )


def _omp_macros(text: str) -> str:
    """`#pragma omp …` lines as PRESK_OMP(omp …) (presk_rt.h): nothing without OpenMP; a
    kernel's own team of N threads at most those OpenMP may use (presk_threads). A line with
    `simd` is PRESK_SIMD(omp …): a pragma with OpenMP or its simd constructs alone (the
    Makefile's SIMD, `-fopenmp-simd`, as the native backend compiles), which keep each lane's
    order (the same bits) and vectorize the loops the layout put in lanes."""
    text = re.sub(r"num_threads\((\d+)\)", r"num_threads(presk_threads(\1))", text)
    text = re.sub(r"(?m)^(\s*)#pragma (omp .*\bsimd\b.*)$", r"\1PRESK_SIMD(\2)", text)
    return re.sub(r"(?m)^(\s*)#pragma (omp .*)$", r"\1PRESK_OMP(\2)", text)


def portable(tc: Toolchain) -> Toolchain:
    """The toolchain with no target features: the GEMM in plain C vector types, which any
    C11 compiler with GCC's extensions builds on any machine (the same bits: its fold is
    the kernel's, DESIGN §11)."""
    from dataclasses import replace

    return replace(tc, target="")


def _gemm_source(tag: str, host: Toolchain, tc: Toolchain) -> str:
    """The GEMM of `tag`: this machine's (its vector registers' intrinsics and its tuned
    blocking) where the program is built for a target that has them (`-march=native`, the
    Makefile's ARCH), else in plain C vector types; the same fold, so the same bits."""
    plain = gemm.embedded_source(tag, gemm.default_blocking(tag, tc), tc)
    if host.vector_bytes == tc.vector_bytes:
        return plain
    cond = {64: "defined(__AVX512F__)", 32: "defined(__AVX2__) && defined(__FMA__)"}
    native = gemm.embedded_source(tag, gemm.host_blocking(tag, host), host)
    return f"#if {cond[host.vector_bytes]}\n{native}\n#else\n{plain}\n#endif"


NORMALS = """/* normal draws: presk_core.normal_c's Box-Muller, the 256-bit values rounded once (its
 * double-double and 128-bit tiers where Ziv's test proves them, MPFR else): the native
 * backend's bits. The Makefile links MPFR and GMP (MPFR_CFLAGS, MPFR_LIBS). */"""


def normals(blocks: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The MPFR the kernels' normal draws and drawing initializers link
    (presk_core.normal_c.link: gmpy2's headers and libraries), None when no kernel calls
    it; EmitError where it cannot be loaded here (which the native run the export records
    has said first: E7160)."""
    if not any(normal_c.calls_mpfr(b) for b in blocks):  # normals, initializers
        return None
    found = normal_c.link()
    if found is None:
        raise EmitError(
            "a normal draw compiles against gmpy2's MPFR, which cannot be loaded here"
            " (PRESK_INTERP_C=0, or no C compiler for the helpers)"
        )
    return found


# ---- model.c -------------------------------------------------------------------------------


def c_function_name(function: str) -> str:
    """`presk_scores` for `scores{B=1,T=3}`, `presk_Linear_apply` for `Linear{3, 2}.apply`."""
    base = re.sub(r"\{[^}]*\}", "", function)
    return "presk_" + re.sub(r"\W", "_", base)


@dataclass
class _Host:
    """What model.c is written from: the schedule, the kernels' C names, the frames."""

    schedule: Schedule
    kernel_of: list[str]  # launch -> its kernel's C name
    frames: dict[str, HostFrame]
    cnames: dict[str, str]
    zero: set[int]
    split: set[int] = field(default_factory=set)  # launches split among threads


def _names(h: _Host, call: Call, frame: HostFrame) -> dict[int, str]:
    """Host buffer -> its C name in `call`'s function (frames' order: params, results, then
    the locals in the order the body first binds them)."""
    out: dict[int, str] = {}
    for a, b in zip(call.args, frame.params, strict=True):
        out.setdefault(a.buf, b.name)
    for a, b in zip(call.results, frame.results, strict=True):
        out.setdefault(a.buf, b.name)
    local_ids: list[int] = []
    for item in call.body:
        bufs = (
            [a.buf for a in (*item.args, *item.results)]
            if isinstance(item, Call)
            else [a.buf for a in h.schedule.launches[item].args]
        )
        local_ids += [b for b in bufs if b not in out and b not in local_ids]
    if len(local_ids) != len(frame.locals):
        raise EmitError(
            f"`{call.function}`: {len(local_ids)} locals, its frame has {len(frame.locals)}"
        )
    for b, fb in zip(local_ids, frame.locals, strict=True):
        out[b] = fb.name
    return out


def _alloc(h: _Host, buf: int, name: str) -> list[str]:
    hb = h.schedule.buffers[buf]
    ct = CTYPE[hb.dtype]
    n = math.prod(a.length for a in hb.axes)
    lines = [f"{ct} *{name} = presk_alloc(arena, {n} * sizeof({ct}));"]
    if buf in h.zero:
        lines.append(f"memset({name}, 0, {n} * sizeof({ct}));")
    return lines


def _arg(name: str, offset: int) -> str:
    return f"{name} + {offset}" if offset else name


def _launch(h: _Host, i: int, names: dict[int, str], lets: dict[str, str]) -> list[str]:
    launch = h.schedule.launches[i]
    k = launch.kernel
    let = lets.get(k.site)
    lines = [f"/* {k.site}{f' ({let})' if let else ''} */"]
    args = ", ".join(_arg(names[a.buf], a.offset) for a in launch.args)
    top = _split_loop(k)
    n = trips(top) if top is not None else 1
    if top is not None and threads_of(top) > 1:
        h.split.add(i)
        lines += [
            "#ifdef _OPENMP",
            f"#pragma omp parallel num_threads(presk_team({min(n, threads_of(top))}))",
            "    {",
            "        int64_t t = omp_get_thread_num(), w = omp_get_num_threads();",
            f"        {h.kernel_of[i]}({args}, {n} * t / w, {n} * (t + 1) / w);",
            "    }",
            "#else",
            f"    {h.kernel_of[i]}({args}, 0, {n});",
            "#endif",
        ]
    else:
        if _inner_threads(k):
            h.split.add(i)
        lines.append(f"{h.kernel_of[i]}({args}, 0, {n});")
    return lines


def most_threads(schedule: Schedule) -> int:
    """The most threads a statement of the schedule's kernels divides among (a loop, a
    tile loop or a GEMM split by the layout: a plan's workers), 1 when nothing is split."""

    def walk(body) -> int:
        n = 1
        for s in body:
            if isinstance(s, For | Tile | GemmStmt):
                n = max(n, s.threads)
            if isinstance(s, Loop | For | Tile | Reduce | TwoPass):
                n = max(n, walk(s.body))
        return n

    return max((walk(launch.kernel.body) for launch in schedule.launches), default=1)


def _inner_threads(k: Kernel) -> bool:
    """A kernel whose threads are its own (a loop under its top statement, a GEMM's)."""

    def walk(body) -> bool:
        for s in body:
            if isinstance(s, For | Tile | GemmStmt) and s.threads > 1:
                return True
            if isinstance(s, Loop | For | Tile | Reduce | TwoPass) and walk(s.body):
                return True
        return False

    return walk(k.body)


def _body(h: _Host, call: Call, names: dict[int, str], lets: dict[str, str]) -> list[str]:
    lines: list[str] = []
    done = set(names[a.buf] for a in (*call.args, *call.results))
    for item in call.body:
        if isinstance(item, Call):
            bufs = [a.buf for a in (*item.args, *item.results)]
        else:
            bufs = [a.buf for a in h.schedule.launches[item].args]
        allocs = []
        for b in bufs:
            if names[b] not in done:
                done.add(names[b])
                allocs += _alloc(h, b, names[b])
        if isinstance(item, Call):
            shown = ", ".join(names[a.buf] for a in item.results)
            lines.append(f"/* {item.function} -> {shown} */")
            lines += allocs
            args = [_arg(names[a.buf], a.offset) for a in (*item.args, *item.results)]
            lines.append(f"{h.cnames[item.function]}({', '.join(['arena', *args])});")
        else:
            launch = _launch(h, item, names, lets)
            lines += launch[:1] + allocs + launch[1:]
    return lines


def _signature(h: _Host, frame: HostFrame) -> str:
    params = [f"const {CTYPE[b.dtype]} *{b.name}" for b in frame.params] + [
        f"{CTYPE[b.dtype]} *{b.name}" for b in frame.results
    ]
    return f"static void {h.cnames[frame.function]}({', '.join(['presk_arena *arena', *params])})"


def _indent(lines: list[str]) -> list[str]:
    return [line if line.startswith("#") else "    " + line for line in lines]


def model_c(
    h: _Host, lets: dict[str, str], entry: str, threads: int, arena: int
) -> tuple[str, str]:
    """model.h (the entry's types and prototype) and model.c (the host functions)."""
    body = entry_call(h.schedule)
    first: dict[str, Call] = {}
    for c in _calls(body):
        first.setdefault(c.function, c)
    frames = h.frames
    ef = frames[body.function]
    cname = h.cnames[body.function]
    header = [
        "/* model.h: the entry's inputs and outputs, and its function (presk export). */",
        "#ifndef PRESK_MODEL_H",
        "#define PRESK_MODEL_H",
        '#include "presk_rt.h"',
        "",
        "typedef struct {",
        *[f"    const {CTYPE[b.dtype]} *{b.name};" for b in ef.params],
        *(["    char unused;"] if not ef.params else []),
        f"}} {cname}_in;",
        "",
        "typedef struct {",
        *[f"    {CTYPE[b.dtype]} *{b.name};" for b in ef.results],
        f"}} {cname}_out;",
        "",
        f"/* `{entry}`: its outputs into `out`, allocated from `arena` (the entry's own",
        " * buffers are released when it returns) */",
        f"void {cname}(presk_arena *arena, const {cname}_in *in, {cname}_out *out);",
        "",
        f"#define PRESK_ARENA_BYTES {arena} /* the inputs, the outputs and the entry's need */",
        "",
        "#endif",
        "",
    ]
    out = [
        f"/* model.c: the host of `{entry}`, a C function per Presk function (presk export). */",
        "#include <string.h>",
        '#include "model.h"',
        '#include "kernels.c"',
        "#ifdef _OPENMP",
        "#include <omp.h>",
        "",
        f"#define PRESK_THREADS {threads} /* the threads of the export (--threads) */",
        "",
        "/* a team of at most n threads (the divided loop's iterations), the export's threads",
        " * and the threads OpenMP may use */",
        "__attribute__((unused)) static inline int presk_team(int64_t n) {",
        "    int64_t m = omp_get_max_threads();",
        "    m = m < PRESK_THREADS ? m : PRESK_THREADS;",
        "    m = m < n ? m : n;",
        "    return m < 1 ? 1 : (int)m;",
        "}",
        "#endif",
        "",
    ]
    callees = [f for f in frames.values() if f.function != body.function]
    for f in reversed(callees):  # callees before their callers
        names = _names(h, first[f.function], f)
        out.append(_signature(h, f))
        out.append("{")
        out.append("    const size_t mark = presk_mark(arena);")
        lines = _body(h, first[f.function], names, lets)
        used = set(re.findall(r"\w+", "\n".join(lines)))
        out += [f"    (void){b.name};" for b in (*f.params, *f.results) if b.name not in used]
        out += _indent(lines)
        out.append("    presk_release(arena, mark);")
        out.append("}")
        out.append("")
    names = _names(h, body, ef)
    out.append(f"void {cname}(presk_arena *arena, const {cname}_in *in, {cname}_out *out)")
    out.append("{")
    out += [f"    const {CTYPE[b.dtype]} *{b.name} = in->{b.name};" for b in ef.params]
    if not ef.params:
        out.append("    (void)in;")
    for a, b in zip(body.results, ef.results, strict=True):
        out += _indent(_alloc(h, a.buf, b.name))
    out.append("    const size_t mark = presk_mark(arena);")
    out += _indent(_body(h, body, names, lets))
    out += [f"    out->{b.name} = {b.name};" for b in ef.results]
    out.append("    presk_release(arena, mark);")
    out.append("}")
    return "\n".join(header), "\n".join(out) + "\n"


RESERVED = frozenset(
    "arena in out mark t w auto break case char const continue default do double else"
    " enum extern float for goto if inline int long register restrict return short signed"
    " sizeof static struct switch typedef union unsigned void volatile while".split()
)


def _safe_frame(f: HostFrame) -> HostFrame:
    """`f` with no buffer named as a C keyword or a name model.c declares itself (`arena`,
    `in`, `out`, `mark`, an OpenMP region's `t` and `w`), nor as a kernel (`k0`): those
    take a `_`."""
    taken = {b.name for b in (*f.params, *f.results, *f.locals)}

    def safe(b):
        name = b.name
        if name in RESERVED or re.fullmatch(r"k\d+|presk_\w*", name):
            while name in taken or name in RESERVED or re.fullmatch(r"k\d+", name):
                name += "_"
            taken.add(name)
        return replace(b, name=name)

    return replace(
        f,
        params=tuple(map(safe, f.params)),
        results=tuple(map(safe, f.results)),
        locals=tuple(map(safe, f.locals)),
    )


def _calls(call: Call):
    yield call
    for item in call.body:
        if isinstance(item, Call):
            yield from _calls(item)


# ---- the program ---------------------------------------------------------------------------


def _dead(schedule: Schedule) -> int:
    """Launches whose outputs nothing reads: no later launch binds them as an input and the
    entry does not return them."""
    outputs = set(schedule.outputs)
    n = 0
    for i, launch in enumerate(schedule.launches):
        k = launch.kernel
        written = {a.buf for a in launch.args[len(k.inputs) :]}
        read = set()
        for later in schedule.launches[i + 1 :]:
            read |= {a.buf for a in later.args[: len(later.kernel.inputs)]}
        if not (written & (read | outputs)):
            n += 1
    return n


def c_program(
    schedule: Schedule,
    lets: dict[str, str],
    entry: str,
    output_header: bytes,
    threads: int = 1,
    toolchain: Toolchain | None = None,
) -> CProgram:
    """The C program of `schedule` (laid out, as the native backend runs it): `lets` names
    the buffers (presk_kernel.frames.let_names), `entry` is the entry as the user named it,
    `output_header` the .psk.d header main.c writes before the outputs (one sample of the
    entry's result leaves), `threads` the most a split launch's team takes."""
    host = toolchain or find_toolchain()
    tc = portable(host)
    frames = {f.function: _safe_frame(f) for f in host_frames(schedule, lets)}
    # kernels: identical ones share a function, as the native backend's do
    texts: dict[str, str] = {}
    kernel_of: list[str] = []
    blocks: list[str] = []
    tags: set[str] = set()
    for launch, masks in zip(schedule.launches, mask_inputs(schedule), strict=True):
        bufs = [a.buf for a in launch.args]
        restrict = len(set(bufs)) == len(bufs)
        kc = ExportKernelC(launch.kernel, "@FN@", restrict, masks)
        text = "\n".join(kc.function())
        if text not in texts:
            fname = f"k{len(texts)}"
            texts[text] = fname
            comment = "\n".join("// " + x for x in format_kernel(launch.kernel).splitlines())
            blocks.append(comment + "\n" + text.replace("@FN@", fname))
            if kc.gemm:
                tags.add(kc.gemm)
        kernel_of.append(texts[text])
    gemms = [_gemm_source(t, host, tc) for t in sorted(tags)]
    mpfr = normals(blocks)
    kernels = "\n".join(
        [
            "/* kernels.c: the kernels of the entry, each the native backend's, one C function",
            " * under its PSK-Kernel text (presk export; included by model.c). */",
            "#include <math.h>",
            "#include <stdint.h>",
            "#include <string.h>",
            *(["#include <gmp.h>", "#include <mpfr.h>"] if mpfr else []),
            '#include "presk_rt.h"',
            '#include "presk_libm.h"',
            PRELUDE,
            *([NORMALS, normal_c.entry_source()] if mpfr else []),
            *gemms,
            *blocks,
            "",
        ]
    )
    cnames: dict[str, str] = {}
    for f in frames:
        name = c_function_name(f)
        while name in cnames.values():
            name += "_"
        cnames[f] = name
    host = _Host(schedule, kernel_of, frames, cnames, set(zeroed(schedule)))
    body = entry_call(schedule)
    ef = frames[body.function]
    cname = cnames[body.function]
    arena, unreleased = c_arenas(schedule, tuple(frames.values()))
    model_h, model = model_c(host, lets, entry, threads, arena)
    files = {
        "kernels.c": _omp_macros(kernels),
        "model.h": model_h,
        "model.c": model,
        "main.c": main_c(schedule, ef, cname, output_header),
        "presk_rt.h": _template("presk_rt.h"),
        "presk_rt.c": _template("presk_rt.c"),
        "presk_libm.h": libm.header(),
        "presk_libm.c": LIBM_C + libm.source(lanes=False).replace(libm.header(), "", 1),
    }
    split = set(host.split)
    return CProgram(
        files,
        mpfr=mpfr,
        entry=ef,
        cname=cname,
        launches=len(schedule.launches),
        dead=_dead(schedule),
        split=len(split),
        kernels=len(texts),
        functions=len(frames) - 1,
        loops=0,
        arena=arena,
        unreleased=unreleased,
    )


LIBM_C = """/* presk_libm.c: presk libm's functions over arrays, out of line (the kernels inline
 * presk_libm.h's own): y[i] = presk_exp(x[i]) and the like, for a program that links them. */
#include "presk_libm.h"
"""


def _template(name: str) -> str:
    return resources.files("presk_cback").joinpath("templates", name).read_text()


__all__ = ["CFLAGS", "CProgram", "c_function_name", "c_program", "most_threads"]
