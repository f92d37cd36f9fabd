"""`presk export --target c`: an entry as a C program (step 18, presk_cback.export_c).

The export runs the entry once on the native backend, at the dimensions given and on the
inputs `presk run` synthesizes (the same seed), and writes the program that records it:
the C files, a Makefile, a README, and `conformance/` with the inputs, the native
backend's outputs, the exact reference's and `check.sh`. The directory is written beside
its place and renamed into it, so that an error leaves no half-written directory; one that
exists is replaced only when it is an export (it holds EXPORT_MARK).
"""

from __future__ import annotations

import math
import os
import shutil

from presk_cli.native import NativeError

EXPORT_MARK = ".presk-export-c"
KEY_BOUND = 2**32  # a key's leaf in a .psk.d: its two words, `idx[4294967296][2]`


class ExportCError(Exception):
    """A C export that cannot be written: its diagnostic's code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _bounds(core, t, value, dims: dict[str, int]) -> list[int | None]:
    """The bound of each tensor leaf of a value of type `t` that is an index (None for
    another), the leaves in the order presk_kernel.lower.argument_leaves flattens them
    (`value` None for a result)."""
    import numpy as np
    from presk_types.presburger import Lin
    from presk_types.types import Bool, Idx, KeyT, ParamsT, Real, TupleT, subst_lin

    match t:
        case ParamsT(inst):
            layout = core.layout(inst.module) or core.layout(inst.name)
            if layout is None:
                raise NativeError("E7002", f"no parameter tree for `{t}` in the program")
            return [None] * len(layout.leaves)  # a tree holds reals
        case TupleT(elements):
            vals = value if isinstance(value, tuple | list) else [None] * len(elements)
            return [
                x for e, v in zip(elements, vals, strict=True) for x in _bounds(core, e, v, dims)
            ]
        case Real() | Bool():
            return [] if value is not None and not isinstance(value, np.ndarray) else [None]
        case KeyT():  # its two uint32 words (presk_kernel.draws): `idx[4294967296][2]`
            return [KEY_BOUND]
        case Idx(bound):
            if value is not None and not isinstance(value, np.ndarray):
                return []
            b = subst_lin(bound, {k: Lin.const(v) for k, v in dims.items()})
            if not b.is_const:
                raise NativeError("E7002", f"the bound of `{t}` is not known at these dimensions")
            return [b.constant]
    return []


def _leaf_texts(schedule, bufs, bounds: list[int | None]) -> list[str]:
    """The .psk.d type of each leaf, from its host buffer (no axis names): `ℝ[1, 2, 3, 4]`,
    `idx[10][8]`, `bool[3, 3]`."""
    out = []
    for buf, bound in zip(bufs, bounds, strict=True):
        b = schedule.buffers[buf]
        shape = f"[{', '.join(str(a.length) for a in b.axes)}]"
        if b.dtype == "i64":
            out.append(f"idx[{bound}]{shape}")
        elif b.dtype == "bool":
            out.append(f"bool{shape}")
        else:
            out.append("ℝ" + ("" if shape == "[]" else shape))
    return out


def _type_text(texts: list[str]) -> str:
    return texts[0] if len(texts) == 1 else f"({', '.join(texts)})"


def _after_colon(message: str) -> str:
    """`the initializer … draws through MPFR …` of `cannot lower `f` to kernels: the …`."""
    head, sep, tail = message.partition("to kernels: ")
    return tail if sep else message


def _flat(value) -> list:
    import numpy as np
    from presk_core.random import Key

    match value:
        case Key():  # its two words, as the kernels hold it
            return [np.array([value.k0, value.k1], dtype=np.int64)]
        case dict():
            return [x for v in value.values() for x in _flat(v)]
        case tuple() | list():
            return [x for v in value for x in _flat(v)]
    return [value]


def _floats(value):
    import numpy as np

    arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
    if arr.dtype == object:
        with np.errstate(invalid="ignore"):
            return np.vectorize(float, otypes=[np.float64])(arr)
    return arr


def _sample(text: str, arrays: list) -> tuple:
    """(type, one sample) for presk_core.data.write: each array as its leaf's dtype."""
    from presk_core import data as D

    t = D.type_of(text)
    leaves = D.leaves(t)
    if len(leaves) != len(arrays) or any(
        math.prod(leaf.shape) != a.size for leaf, a in zip(leaves, arrays, strict=True)
    ):
        raise NativeError("E7002", f"the entry's leaves are not a sample of `{text}`")
    sample = [
        a.astype(leaf.dtype).reshape(leaf.shape) for leaf, a in zip(leaves, arrays, strict=True)
    ]
    return t, [sample]


def buffer_names(core) -> dict[str, str]:
    """Site -> the name model.c gives its buffer: the `let` that binds it
    (presk_kernel.frames.let_names), and for a function's returned value, the `let` its
    first caller binds the call to (`s = scores(q, k)`: scores' result is `s` in attend)."""
    from presk_kernel.frames import let_names
    from presk_kernel.lower import site_in_source

    functions = {f.name: f for f in core.functions}
    called: dict[str, str] = {}
    for f in core.functions:
        for ins in f.body:
            if ins.op != "call" or ins.out is None or ins.out.name is None:
                continue
            g = functions.get(dict(ins.attrs).get("fn"))
            ret = getattr(g, "ret", None)
            for r in g.body if g is not None else ():
                if r.out is not None and r.out.id == getattr(ret, "id", None):
                    called.setdefault(site_in_source(g, r), ins.out.name)
    return called | let_names(core)


def check_out(out: str) -> None:
    """E8010 for an output path that exists and is not a C export (nothing is written)."""
    if os.path.lexists(out) and not (
        os.path.isdir(out)
        and (not os.listdir(out) or os.path.exists(os.path.join(out, EXPORT_MARK)))
    ):
        raise ExportCError(
            "E8010",
            f"`{out}` exists and is not a C export of presk: choose another folder, or remove it",
        )


def export_c(
    core,
    entry_text: str,
    dims: dict,
    seed: int,
    realize: str,
    threads: int,
    out: str,
    weights: str | None = None,
    plan: str | None = None,
    given: bool = False,
    serve=None,
) -> str:
    """Write the C program of `entry_text` into `out`; the summary line. `weights`: a
    checkpoint binding the entry's parameter tree (`--weights`), its inputs' θ; `plan`:
    `@FILE`, a plan of presk plan, whose layouts and realization the program takes (the
    plan's codes E7110–E7113: another entry or dims, a point outside its nest's space,
    --realize naming another type when `given`); `serve`: a function of (schedule, program,
    input leaves, the files so far) giving more files (a text, or a path to copy)
    (presk_cli.export_serve)."""
    import numpy as np
    from presk_cback.emit import EmitError
    from presk_cback.export_c import c_program, most_threads
    from presk_core import data as D
    from presk_core.interp import Interpreter
    from presk_core.run import check_dim_names, parse_entry
    from presk_kernel.lower import argument_leaves

    from presk_cli.native import compiled, entry_inputs, lower, planned, storage

    check_out(out)
    read = None
    if plan is not None:
        from presk_cli.plans import PlanError, plan_realize

        try:
            read, realize = plan_realize(plan, realize, given)
        except PlanError as e:
            raise NativeError(e.code, str(e), e.help) from None
    entry = parse_entry(entry_text, core, None, dims)
    check_dim_names(entry)
    trees = None
    if weights is not None:
        from presk_cli.weights import bind_weights

        trees = bind_weights(core, entry, weights, 256)
    inputs = entry_inputs(core, entry, seed, 256, None, trees)
    args = [v for _, _, v in inputs]
    all_dims = dict(entry.dims) | dict(entry.prefix)
    layouts = planned(read, core, entry.function.name, all_dims, args)
    try:
        schedule = lower(core, entry.function.name, all_dims, args, realize, threads, layouts)
    except NativeError as e:
        if e.code == "E7002" and "Rand" in getattr(entry.function, "effects", ()):
            raise NativeError(  # what the kernels still do not draw (docs/randomness.md)
                "E7161",
                f"`{entry.shown}` draws what the kernels do not: {_after_colon(str(e))}",
            ) from None
        raise
    threads = max(threads, most_threads(schedule))
    leaves = argument_leaves(args)
    native = compiled(schedule).run(storage(schedule, leaves))
    exact = [
        _floats(x) for x in _flat(Interpreter(core, 256).run(entry.function.name, args, entry.dims))
    ]
    scope = all_dims | dict(entry.module_dims)
    in_bounds = [x for (_, t, v) in inputs for x in _bounds(core, t, v, scope)]
    out_bounds = _bounds(core, entry.function.result, None, scope)
    in_bounds += [None] * sum(".scale:" in schedule.buffers[b].name for b in schedule.inputs)
    if len(in_bounds) != len(schedule.inputs) or len(out_bounds) != len(schedule.outputs):
        raise NativeError("E7002", f"the leaves of `{entry.shown}` are not its kernels' buffers")
    in_texts = _leaf_texts(schedule, schedule.inputs, in_bounds)
    out_texts = _leaf_texts(schedule, schedule.outputs, out_bounds)
    in_text, out_text = _type_text(in_texts), _type_text(out_texts)
    with D.atomic_dir(out) as tmp:  # whole or not at all
        conf = os.path.join(tmp, "conformance")
        os.mkdir(conf)
        leaves_in = [np.asarray(x) for x in storage(schedule, leaves)]
        D.write(os.path.join(conf, "inputs.psk.d"), in_text, *_sample(in_text, leaves_in))
        widened = [np.asarray(x).astype(np.float64) if x.dtype.kind == "f" else x for x in native]
        native_path = os.path.join(conf, "native.psk.d")
        D.write(native_path, out_text, *_sample(out_text, widened))
        D.write(os.path.join(conf, "exact.psk.d"), out_text, *_sample(out_text, exact))
        size = D.read_header(native_path).header_size
        with open(native_path, "rb") as f:
            header = f.read(size)
        try:
            program = c_program(schedule, buffer_names(core), entry.shown, header, threads)
        except EmitError as e:
            raise ExportCError("E7170", f"the C program of `{entry.shown}`: {e}") from None
        shown_dims = ", ".join(f"{k} = {v}" for k, v in dims.items())
        at = f" at {shown_dims}" if shown_dims else ""
        kind = (
            f"in {realize}"
            if not realize.startswith("@")
            else f"under the realization {realize[1:]}"
        )
        if read is not None:
            kind += f" under the plan {read.path}"
        files = dict(program.files)
        files["Makefile"] = makefile(program.split > 0, program.mpfr)
        files["README.md"] = readme(entry.shown, at, kind, program)
        files["conformance/check.sh"] = CHECK
        files[EXPORT_MARK] = "presk export --target c\n"
        if serve is not None:
            files |= serve(schedule, program, leaves_in, files)
        for name, text in files.items():
            if isinstance(text, str):
                D.write_text(os.path.join(tmp, name), text)
            else:  # a file copied in (the weights of --serve)
                shutil.copyfile(text, os.path.join(tmp, name))
    threads_text = (
        "on one thread"
        if program.split == 0
        else f"{program.split} of them divided among up to {threads} threads"
    )
    fns = program.functions
    return (
        f"presk export: `{entry.shown}`{at} {kind}: {program.launches} launches"
        f" ({program.dead} dead, {threads_text}) of {program.kernels} kernels,"
        f" {fns} function{'' if fns == 1 else 's'} besides the entry's and {program.loops} loops,"
        f" an arena of {program.arena} bytes ({program.unreleased} released nothing), into {out};"
        f" `make -C {out} check` builds it and compares it with the native backend"
    )


def export_scop(core, entry_text: str, dims: dict, realize: str, out: str) -> str:
    """`--mode scop`: each nest of `entry_text` at point zero, a C function a polyhedral tool
    reads, with a driver comparing each with the native backend (presk_cback.scop); the
    summary line."""
    from presk_cback.scop import scop_files
    from presk_core import data as D
    from presk_core.run import check_dim_names, parse_entry

    from presk_cli.native import lower

    check_out(out)
    entry = parse_entry(entry_text, core, None, dims)
    check_dim_names(entry)
    all_dims = dict(entry.dims) | dict(entry.prefix)
    schedule = lower(core, entry.function.name, all_dims, None, realize, 1)
    files, found = scop_files(schedule, entry.shown)
    files[EXPORT_MARK] = "presk export --target c --mode scop\n"
    with D.atomic_dir(out) as tmp:
        for name, text in files.items():
            D.write_text(os.path.join(tmp, name), text)
    shown_dims = ", ".join(f"{k} = {v}" for k, v in dims.items())
    at = f" at {shown_dims}" if shown_dims else ""
    kind = (
        f"in {realize}" if not realize.startswith("@") else f"under the realization {realize[1:]}"
    )
    sites = len({n.site for n in found})
    static = sum(n.static for n in found)
    return (
        f"presk export: `{entry.shown}`{at} {kind}: {sites} nests at {len(found)} shapes at point"
        f" zero, a C function each, {static} of them static-control parts and"
        f" {len(found) - static} not (`nests.json` says why), into {out}; `make -C {out} check`"
        " builds them and compares each with the native backend"
    )


def makefile(openmp: bool, mpfr=None, serve: bool = False) -> str:
    """The Makefile; `mpfr` (cflags, libs) where the kernels draw normals or `serve` samples
    (MPFR_CFLAGS and MPFR_LIBS, this machine's gmpy2's MPFR by default); `serve`: also
    ./generate, the generation loop, which `make check` compares with presk serve's."""
    text = MAKEFILE.replace("@OPENMP@", "-fopenmp" if openmp else "")
    if serve:
        text = text.replace("\ncheck: model\n", "\n" + GENERATE_RULE + "\ncheck: model generate\n")
        text = text.replace(
            "sh conformance/check.sh\n", "sh conformance/check.sh\n\tsh conformance/serve.sh\n"
        )
        text = text.replace("rm -f model out.psk.d", "rm -f model generate out.psk.d out.txt")
    if mpfr is None:
        return (
            text.replace("@MPFR@", "").replace(" $(MPFR_CFLAGS)", "").replace(" $(MPFR_LIBS)", "")
        )
    cflags, libs = mpfr
    return text.replace("@MPFR@", MPFR.format(cflags=" ".join(cflags), libs=" ".join(libs)))


GENERATE_RULE = """\
generate: generate.c model.c presk_rt.c presk_libm.c $(HEADERS)
\t$(CC) $(CFLAGS) $(ARCH) $(SIMD) $(OPENMP) $(MPFR_CFLAGS) -o generate generate.c model.c presk_rt.c \\
\t\tpresk_libm.c $(MPFR_LIBS) -lm
"""

MPFR = """\
# Normal draws and the generation loop's sampling link MPFR and GMP: by default the copies
# this program was exported beside (gmpy2's); elsewhere MPFR_CFLAGS= MPFR_LIBS="-lmpfr -lgmp".
MPFR_CFLAGS = {cflags}
MPFR_LIBS = {libs}
"""


MAKEFILE = """\
# The exported program (presk export --target c). `make` builds ./model; `make check`
# compares its outputs with the native backend's, bit for bit (PRESK=/path/to/presk also
# prints the distance to the exact reference); `make time` times 11 calls.
# OPENMP= builds without OpenMP (the same bits); CC= names another compiler; ARCH= builds
# for the target's baseline (the same bits: on x86-64 without FMA, each fma() is the C
# library's, many times slower); SIMD: the flags the native backend compiles with that
# change no value (OpenMP's simd constructs, which keep each lane's order; no math errno,
# no trapping math), SIMD= without them (the same bits, several times slower).
CC = cc
CFLAGS = -std=c11 -ffp-contract=off -O2 -Wall -Wextra
ARCH = -march=native
SIMD = -fopenmp-simd -DPRESK_OPENMP_SIMD -fno-trapping-math -fno-math-errno
OPENMP = @OPENMP@
@MPFR@SOURCES = main.c model.c presk_rt.c presk_libm.c
HEADERS = model.h kernels.c presk_rt.h presk_libm.h

model: $(SOURCES) $(HEADERS)
\t$(CC) $(CFLAGS) $(ARCH) $(SIMD) $(OPENMP) $(MPFR_CFLAGS) -o model $(SOURCES) $(MPFR_LIBS) -lm

check: model
\tPRESK="$(PRESK)" sh conformance/check.sh

time: model
\t./model -r 11 conformance/inputs.psk.d out.psk.d

clean:
\trm -f model out.psk.d

.PHONY: check time clean
"""

CHECK = """\
#!/bin/sh
# Runs the program on the inputs and compares its outputs with the native backend's, byte
# for byte; with PRESK set, also prints the distance to the exact reference.
cd "$(dirname "$0")/.." || exit 1
./model conformance/inputs.psk.d out.psk.d || exit 1
if cmp -s out.psk.d conformance/native.psk.d; then
    echo "C1 holds: the outputs are the native backend's, bit for bit"
    status=0
else
    echo "C1 fails: the outputs are not the native backend's"
    status=1
fi
if [ -n "$PRESK" ]; then
    echo "against the exact reference:"
    "$PRESK" data diff out.psk.d conformance/exact.psk.d
fi
exit $status
"""


def readme(entry: str, at: str, kind: str, p) -> str:
    return f"""# `{entry}`{at} {kind}, as a C program

Written by `presk export --target c`: the entry as the native backend runs it, {p.launches}
launches of {p.kernels} kernels, bit for bit.

- `kernels.c`: each kernel one `PRESK_KERNEL` function (static inline, always inlined)
  under its PSK-Kernel text; its outer loop runs from `lo` to `hi`.
- `model.c`, `model.h`: a C function per Presk function the entry reaches, and the entry's;
  every buffer from one arena of {p.arena} bytes (`PRESK_ARENA_BYTES`), each function's own
  released when it returns ({p.unreleased} bytes if nothing were released).
- `main.c`: `./model [-r N] INPUTS.psk.d OUTPUTS.psk.d` reads the inputs, calls the
  entry and writes its outputs; `-r N` also times N calls (median and best).
- `presk_rt.c`, `presk_rt.h`: the arena and the `.psk.d` files; `presk_libm.h`,
  `presk_libm.c`: presk libm, the transcendentals the native backend calls.
- `conformance/`: `inputs.psk.d` (the inputs `presk run` synthesizes), `native.psk.d` (the
  native backend's outputs), `exact.psk.d` (the exact reference's), `check.sh`.

`make check` builds the program and compares its outputs with the native backend's with
`cmp`; `make check PRESK=/path/to/presk` also prints the distance to the exact reference.
`-std=c11 -ffp-contract=off` keep the bits: no product and sum fused into one rounding
but the `fma` the kernels write. `SIMD` adds the flags the native backend compiles with
that change no value (`-fopenmp-simd`: the loops in lanes, each lane in its own order; no
math errno, no trapping math). `make OPENMP=` builds without OpenMP, `OMP_NUM_THREADS`
sets the team of a divided launch: neither changes a bit, since each element is computed
by one thread in the same order.
"""
