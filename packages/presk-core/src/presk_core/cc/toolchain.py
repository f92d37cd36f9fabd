"""The C toolchain of presk: which compiler, who it is, what `-march=native` means.

One toolchain for every C presk compiles: the interpreter's helpers (presk_core.fold_c and
its siblings), presk libm (presk_kernel.libm) and the native backend (presk_cback). Every
object is built with `Toolchain.flags` (DESIGN §11: `-O2 -march=native
-ffp-contract=off -fno-fast-math -std=c11 -shared -fPIC`, plus `-fopenmp` for threads).
The compiler is `cc`, or `$CC`. Its identity (`cc -v`'s last line) and the resolved target
(the cc1 command line of `cc -march=native -E -v`, e.g. `-march=cooperlake -mavx512f …`)
enter every cache key, so that two kinds of machine never share a binary.

`PRESK_SANITIZE` (e.g. `address,undefined`) compiles everything with `-fsanitize=…`:
`make sanitize` runs the tests of presk-cback and tests/native so, with the sanitizer
runtimes preloaded.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from presk_syntax.diagnostics import DiagnosticError, error

BASE_FLAGS = (
    "-O2",
    "-march=native",
    "-ffp-contract=off",
    "-fno-fast-math",
    "-fno-trapping-math",  # lets selects of computed values vectorize; changes no value
    "-fno-math-errno",  # sqrt without its errno branch; changes no value
    "-std=c11",
    "-fopenmp-simd",
    "-DPRESK_OPENMP_SIMD",  # presk_libm.h's own simd loops (an exported Makefile's SIMD too)
    "-shared",
    "-fPIC",
)
OPENMP_FLAG = "-fopenmp"
# On AVX-512 targets the vectorizer's loops take the full registers (lanes are elementwise
# and no fold is vectorized by reassociation, so the width changes no bit: DESIGN §11);
# the libm's f64 polynomials of f32 functions run 8 lanes a vector instead of 4.
WIDE_VECTORS = "-mprefer-vector-width=512"
WARNINGS = ("-Wall", "-Wextra")
INSTALL_HELP = (
    "install a C compiler (Debian/Ubuntu: `apt-get install gcc`; Fedora: `dnf install gcc`; "
    "macOS: `xcode-select --install`), or name one with CC=/path/to/cc"
)


@dataclass(frozen=True, slots=True)
class Toolchain:
    """A C compiler as the native backend uses it."""

    cc: tuple[str, ...]  # the command (CC may carry words: `ccache gcc`)
    identity: str  # `cc -v`'s version line
    target: str  # the resolved `-march=native` (cc1's target flags), space-separated
    openmp: bool  # `-fopenmp` compiles and links
    sanitize: str  # the `-fsanitize=` list, or ""

    @property
    def features(self) -> frozenset[str]:
        """The target's enabled features, as `-m` flag names (`avx512f`, `fma`, …)."""
        return _features(self.target)

    @property
    def vector_bytes(self) -> int:
        """The widest vector register the target has: 64 (AVX-512), 32 (AVX2), else 16."""
        if "avx512f" in self.features:
            return 64
        if "avx2" in self.features:
            return 32
        return 16

    def flags(self, threads: bool = False, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The full flag list of a compile (`threads` adds OpenMP where the compiler has it)."""
        out = list(BASE_FLAGS)
        if self.vector_bytes == 64:  # the loops in 512-bit vectors (GCC's default: 256)
            out.append(WIDE_VECTORS)
        if threads and self.openmp:
            out.append(OPENMP_FLAG)
        if self.sanitize:
            out += [
                f"-fsanitize={self.sanitize}",
                "-fno-sanitize-recover=all",
                "-fno-omit-frame-pointer",
                "-g",
            ]
        return (*out, *extra)


@functools.lru_cache(maxsize=16)
def _features(target: str) -> frozenset[str]:
    # read once a target: every GEMM call and unit asks (its vector width)
    return frozenset(
        w[2:] for w in target.split() if w.startswith("-m") and not w.startswith("-mno-")
    )


class CompileError(Exception):
    """The compiler rejected generated C: a bug of presk (the caller reports it as internal)."""


def _run(argv: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    # the compiler runs without what `make sanitize` preloads into Python
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False, env=env)


def _no_compiler(why: str) -> DiagnosticError:
    return DiagnosticError(
        error("E9001", f"no C compiler for the native backend: {why}", help=INSTALL_HELP)
    )


def _command() -> tuple[str, ...]:
    words = tuple(shlex.split(os.environ.get("CC", "") or "cc"))
    if not words or shutil.which(words[0]) is None:
        named = f"`{words[0]}` (from CC)" if os.environ.get("CC") else "`cc`"
        raise _no_compiler(f"{named} is not on PATH")
    return words


VERSION_LINE = re.compile(r"\bversion \d")


def _identity(cc: tuple[str, ...]) -> str:
    p = _run([*cc, "-v"])
    # the compiler's own line ("gcc version 12.2.0 …", "Debian clang version 16.0.6 …"): a
    # version followed by its number, not another line naming one (clang's "Found CUDA
    # installation: …, version")
    lines = [ln for ln in (p.stderr + p.stdout).splitlines() if VERSION_LINE.search(ln)]
    if not lines:
        raise _no_compiler(f"`{' '.join(cc)} -v` does not say which compiler it is")
    return lines[-1].strip()


def _target(cc: tuple[str, ...]) -> str:
    # The cc1 line of a preprocessing run shows -march=native resolved to its features.
    p = _run([*cc, "-march=native", "-E", "-v", "-"], stdin="")
    for ln in p.stderr.splitlines():
        if "cc1" in ln and "-march=" in ln:
            words = [
                w
                for w in ln.split()
                if w.startswith("-m") or w.startswith("--param") or "cache" in w
            ]
            return " ".join(words)
    # clang prints `-target-cpu X -target-feature +f …`: keep those words
    found = re.findall(r"-target-cpu \S+|-target-feature \S+", p.stderr)
    if found:
        return " ".join(found)
    if p.returncode != 0:
        raise _no_compiler(f"`{' '.join(cc)} -march=native` fails: {p.stderr.strip()[:200]}")
    return "-march=native"


def _has_openmp(cc: tuple[str, ...]) -> bool:
    src = "#include <omp.h>\nint f(void) { return omp_get_max_threads(); }\n"
    with tempfile.TemporaryDirectory(prefix="presk-omp-") as d:
        c, so = os.path.join(d, "t.c"), os.path.join(d, "t.so")
        with open(c, "w") as f:
            f.write(src)
        return _run([*cc, OPENMP_FLAG, "-shared", "-fPIC", c, "-o", so]).returncode == 0


@functools.cache
def _probe(cc: tuple[str, ...]) -> tuple[str, str, bool]:
    return _identity(cc), _target(cc), _has_openmp(cc)


def find_toolchain() -> Toolchain:
    """The toolchain of this process (`$CC` or `cc`), probed once; E9001 when there is none."""
    cc = _command()
    identity, target, openmp = _probe(cc)
    sanitize = os.environ.get("PRESK_SANITIZE", "").strip()
    return Toolchain(cc, identity, target, openmp, sanitize)


def compile_shared(
    tc: Toolchain, c_path: str, so_path: str, flags: tuple[str, ...], libs: tuple[str, ...] = ()
) -> None:
    """Compile `c_path` into the shared object `so_path`, linked with `libs` (after the
    source) and libm: CompileError with cc's message; E9005 when the disk is full; E9008
    when the compiler says it succeeded and wrote no object."""
    p = _run([*tc.cc, *flags, c_path, "-o", so_path, *libs, "-lm"])
    check_compiled(tc, p.returncode, p.stderr, so_path, f"failed on {c_path}")


def check_compiled(tc: Toolchain, returncode: int, stderr: str, so_path: str, what: str) -> None:
    """The outcome of a compiler's run that should have written `so_path`."""
    if returncode != 0:
        if NO_SPACE in stderr:
            raise no_space(os.path.dirname(so_path))
        raise CompileError(f"{' '.join(tc.cc)} {what}:\n{stderr.strip()}")
    try:
        size = os.path.getsize(so_path)
    except OSError:
        size = 0
    if size == 0:
        raise empty_object(tc)


def empty_object(tc: Toolchain) -> DiagnosticError:
    """E9008: the compiler said it succeeded and wrote no (whole) object."""
    return DiagnosticError(
        error(
            "E9008",
            f"the C compiler `{' '.join(tc.cc)}` reported success but wrote an empty object",
            help="check the compiler CC names: `$CC -shared -fPIC f.c -o f.so` must write a"
            " shared object (unset CC to use `cc`)",
        )
    )


NO_SPACE = "No space left on device"


def no_space(folder: str) -> DiagnosticError:
    """E9005: the disk of the cache is full."""
    return DiagnosticError(
        error(
            "E9005",
            f"no space left on the device of the compile cache `{folder}`",
            help="free some space, or set PRESK_CACHE to a folder on another disk",
        )
    )
