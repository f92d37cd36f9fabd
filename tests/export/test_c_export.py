"""`presk export --target c` (step 18): C1, the exported program's outputs are the native
backend's bit for bit, built with gcc and with clang-16, with and without OpenMP, on one
thread and on two; the inputs are those `presk run` draws; the summary line in the spec's
form (L1123–L1124); bad input gets its diagnostic and leaves nothing written.

The oracle is `presk run --backend native --json`, run apart from the export: its inputs
and result are printed as exact decimals, read here as doubles (an f32 or bf16 result is
widened exactly)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, presk, presk_ok
from presk_core import data as D

TRAIN = ("tutorial/07_train.psk", "loss", ("--dim", "B=8"))
ATTEND = ("tutorial/03_attention.psk", "attend", ("--dim", "B=16", "--dim", "T=32"))
LLAMA = (
    "tests/examples/llama/llama.psk",
    "block",
    ("--dim", "B=1", "--dim", "T=3", "--const", "D=8", "--const", "H=2", "--const", "F=12"),
)
MLP_GRAD = ("tests/examples/mlp/mlp.psk", "mse_grad", ("--dim", "D=3", "--dim", "B=2"))
MINIGPT = (  # large enough that its contractions are the GEMM's
    "tests/examples/minigpt/minigpt.psk",
    "MiniGPT.apply",
    ("--dim", "B=1", "--dim", "T=16", "--const", "V=64", "--const", "D=32", "--const", "H=2",
     "--const", "L=1"),
)  # fmt: skip

# (case, realization, threads): the tutorial's loss and example entries of presk-kernel's
# CASES, under f64 and f32 (bf16 once), one split among threads, one through the GEMM
EXPORTS = [
    (TRAIN, "f64", 1),
    (TRAIN, "f32", 1),
    (ATTEND, "f64", 2),
    (LLAMA, "f32", 1),
    (MLP_GRAD, "bf16", 1),
    (MINIGPT, "f32", 2),
]
IDS = [f"{Path(c[0]).stem}:{c[1]}:{r}:t{t}" for c, r, t in EXPORTS]

SUMMARY = re.compile(
    r"presk export: `(?P<entry>[^`]+)`(?: at (?P<dims>[^:]+))? in (?P<type>f64|f32|bf16): "
    r"(?P<launches>\d+) launches \((?P<dead>\d+) dead, (?:on one thread|(?P<split>\d+) of them"
    r" divided among up to (?P<threads>\d+) threads)\) of (?P<kernels>\d+) kernels, "
    r"(?P<functions>\d+) functions? besides the entry's and (?P<loops>\d+) loops, an arena of"
    r" (?P<arena>\d+) bytes \((?P<all>\d+) released nothing\), into (?P<out>\S+); "
    r"`make -C (?P=out) check` builds it and compares it with the native backend\n"
)


def _compilers() -> list[tuple[str, str]]:
    """(CC, OPENMP) pairs this machine builds: gcc and clang-16, each with -fopenmp where
    its OpenMP runtime is installed (clang needs libomp-16-dev) and without."""
    out = []
    for cc in ("gcc", "clang-16"):
        if shutil.which(cc) is None:
            continue
        out.append((cc, ""))
        probe = subprocess.run(
            [cc, "-fopenmp", "-x", "c", "-o", os.devnull, "-"],
            input="#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n",
            capture_output=True,
            text=True,
        )
        if probe.returncode == 0:
            out.append((cc, "-fopenmp"))
    return out


COMPILERS = _compilers()


def _decimals(doc) -> np.ndarray:
    """A `--json` value (nested lists of exact decimals; a tree's leaves in order) as
    doubles, flattened."""
    if isinstance(doc, dict):
        return np.concatenate([_decimals(v) for v in doc.values()])
    if isinstance(doc, list):
        parts = [_decimals(v) for v in doc]
        return np.concatenate(parts) if parts else np.zeros(0)
    return np.array([float(doc)])


@pytest.fixture(scope="module", params=list(zip(EXPORTS, IDS, strict=True)), ids=IDS)
def exported(request, tmp_path_factory):
    (file, entry, dims), realize, threads = request.param[0]
    out = tmp_path_factory.mktemp("c") / "prog"
    done = presk_ok(
        "export", file, "--target", "c", "--entry", entry, *dims, "--realize", realize,
        "--threads", threads, "-o", out,
    )  # fmt: skip
    native = presk_ok(
        "run", file, "--entry", entry, *dims, "--backend", "native", "--realize", realize,
        "--threads", threads, "--json",
    )  # fmt: skip
    return out, done.stdout, json.loads(native.stdout), threads, (file, entry, dims)


def _run_model(out: Path, env: dict | None = None) -> np.ndarray:
    result = out / "result.psk.d"
    run = subprocess.run(
        [str(out / "model"), str(out / "conformance" / "inputs.psk.d"), str(result)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert run.returncode == 0, run.stderr
    return D.read_reals(str(result)) if result.exists() else np.zeros(0)


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()


def _openmp(export: int, cc: str) -> tuple[str, str]:
    """The (CC, OPENMP) `cc` builds the export numbered `export` with: gcc with OpenMP and
    clang-16 without for an even one, the other way round for an odd one (the threaded
    attend gcc's OpenMP, MiniGPT clang's): every export under both compilers and both
    settings, each compiler under both, pairs of the cross product (where this machine
    lacks one, what it has: the same compiler without OpenMP, else gcc)."""
    openmp = "-fopenmp" if (export % 2 == 0) == (cc == "gcc") else ""
    for want in ((cc, openmp), (cc, ""), ("gcc", openmp)):
        if want in COMPILERS:
            return want
    return COMPILERS[0]


@pytest.mark.parametrize("compiler", ["gcc", "clang-16"])
def test_c1_holds(request, exported, compiler):
    """The program's outputs are `presk run --backend native`'s, bit for bit, whatever the
    compiler, OpenMP or not, on one thread or two; `make check` says C1 holds."""
    if not COMPILERS:
        pytest.skip("no C compiler (gcc, clang-16)")
    export = IDS.index(request.node.callspec.params["exported"][1])
    cc, openmp = _openmp(export, compiler)
    out, _, native, threads, _ = exported
    subprocess.run(["make", "-s", "-C", str(out), "clean"], check=True)
    build = subprocess.run(
        ["make", "-s", "-C", str(out), "model", f"CC={cc}", f"OPENMP={openmp}"],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    assert " error" not in build.stderr
    want = _decimals(native["result"])
    for team in ("1", "2"):
        got = _run_model(out, {"OMP_NUM_THREADS": team})
        assert _bits(got) == _bits(want), (cc, openmp, team)
    check = subprocess.run(
        ["make", "-s", "-C", str(out), "check", f"CC={cc}", f"OPENMP={openmp}"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout == "C1 holds: the outputs are the native backend's, bit for bit\n"


def test_clean_under_werror_and_sanitizers(exported, tmp_path):
    """The generated C builds with -Werror (gcc, with and without OpenMP, for this machine
    and for the baseline, ARCH=), and runs with the same bits, under AddressSanitizer and
    UndefinedBehaviorSanitizer too."""
    out, _, native, _, case = exported
    if case not in (ATTEND, MINIGPT):  # an OpenMP region and the GEMM: enough C to cover
        pytest.skip("built with -Werror and the sanitizers for attend and MiniGPT only")
    copy = tmp_path / "prog"
    shutil.copytree(out, copy)
    strict = "-std=c11 -ffp-contract=off -O2 -Wall -Wextra -Werror"
    want = _bits(_decimals(native["result"]))
    for openmp, arch in (("-fopenmp", "-march=native"), ("", "")):  # ARCH=: the baseline
        subprocess.run(["make", "-s", "-C", str(copy), "clean"], check=True)
        build = subprocess.run(
            ["make", "-s", "-C", str(copy), "model", "CC=gcc", f"OPENMP={openmp}",
             f"ARCH={arch}", f"CFLAGS={strict}"],
            capture_output=True,
            text=True,
        )  # fmt: skip
        assert build.returncode == 0, build.stderr
        assert _bits(_run_model(copy)) == want, arch
    sanitized = "-std=c11 -ffp-contract=off -O1 -g -fsanitize=address,undefined"
    subprocess.run(["make", "-s", "-C", str(copy), "clean"], check=True)
    build = subprocess.run(
        ["make", "-s", "-C", str(copy), "model", "CC=gcc", "OPENMP=",
         f"CFLAGS={sanitized} -fno-sanitize-recover=all"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    got = _run_model(copy, {"ASAN_OPTIONS": "detect_leaks=1"})
    assert _bits(got) == want


def test_inputs_are_the_runs(exported):
    """conformance/inputs.psk.d holds the inputs `presk run` synthesizes (the same seed)."""
    out, _, native, _, _ = exported
    path = str(out / "conformance" / "inputs.psk.d")
    (sample,) = D.read(path, D.type_of(D.read_header(path).type_text))
    got = np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in sample])
    want = np.concatenate([_decimals(v) for v in native["inputs"].values()])
    assert _bits(got) == _bits(want)


def test_summary_line(exported):
    """The line in the spec's form; its counts are the program's: as many `kN(` calls in
    model.c as launches, as many kernels in kernels.c, the functions besides the entry's,
    and the arena main.c allocates (the program runs in it: presk_alloc exits when an
    arena is too small)."""
    out, stdout, _, threads, case = exported
    m = SUMMARY.fullmatch(stdout)
    assert m, stdout
    kernels = (out / "kernels.c").read_text()
    model = (out / "model.c").read_text()
    assert int(m["kernels"]) == len(re.findall(r"^PRESK_KERNEL void k\d+\(", kernels, re.M))
    regions = model.count("#pragma omp parallel num_threads")
    file, entry, dims = case
    dump = presk_ok("dump", file, "--stage", "layout", "--entry", entry, *dims).stdout
    assert f": {m['launches']} launches\n" in dump.splitlines(keepends=True)[0]
    assert int(m["functions"]) == len(re.findall(r"^static void presk_\w+\(", model, re.M))
    assert f"#define PRESK_ARENA_BYTES {m['arena']} " in (out / "model.h").read_text()
    assert int(m["arena"]) <= int(m["all"])
    # (at T 32 the narrowed attention splits no launch: its large nests are the scores'
    # triangle; OpenMP regions are tested under a plan's splits, test_c_export_plan.py, and
    # in presk-cback's test_export_c.py)
    if m["split"] is not None:
        assert int(m["threads"]) == threads and regions <= int(m["split"])
    else:
        assert regions == 0
    assert m["out"] == str(out)


def test_repeat_times_the_entry(exported, tmp_path):
    """`model -r N` calls the entry N times and prints the median and the best; its outputs
    into a pipe (as into /dev/null) are written in place, the pipe left a pipe (a rename of a
    temporary over it replaced /dev/null itself when run as root)."""
    import stat
    import threading

    out, _, _, _, _ = exported
    if not (out / "model").exists():
        subprocess.run(["make", "-s", "-C", str(out), "model"], check=True)
    fifo = tmp_path / "outputs"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = subprocess.run(
        [str(out / "model"), "-r", "3", str(out / "conformance" / "inputs.psk.d"), str(fifo)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    reader.join(timeout=10)
    assert re.fullmatch(
        r"presk_\w+: 3 calls, median \d+\.\d{3} ms, best \d+\.\d{3} ms\n", done.stdout
    )
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and got and got[0].startswith(b"PSKD")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs"]


def test_exact_reference_distance(exported):
    """`make check PRESK=…` also prints the distance to the exact reference."""
    out, _, _, _, _ = exported
    check = subprocess.run(
        ["make", "-s", "-C", str(out), "check", f"PRESK={ROOT / '.venv' / 'bin' / 'presk'}"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    lines = check.stdout.splitlines()
    assert lines[:2] == ["C1 holds: the outputs are the native backend's, bit for bit",
                         "against the exact reference:"]  # fmt: skip
    assert lines[2].startswith("presk data: ‖a − b‖₂ ")


def test_not_an_export_is_refused(tmp_path):
    """A folder that exists and is not an export: E8010, and nothing in it changes."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep")
    file, entry, dims = TRAIN
    done = presk("export", file, "--target", "c", "--entry", entry, *dims, "-o", out)
    assert done.returncode == 1
    assert "E8010" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no temporary left


def test_entry_is_required(tmp_path):
    file, _, dims = TRAIN
    done = presk("export", file, "--target", "c", *dims, "-o", tmp_path / "x")
    assert done.returncode == 2
    assert "--entry" in done.stderr
    assert not (tmp_path / "x").exists()


def test_export_over_an_export(tmp_path):
    """An export replaces the export already in its folder."""
    file, entry, dims = TRAIN
    out = tmp_path / "c"
    presk_ok("export", file, "--target", "c", "--entry", entry, *dims, "-o", out)
    (out / "model.c").write_text("stale")
    presk_ok("export", file, "--target", "c", "--entry", entry, *dims, "-o", out)
    assert "presk_loss" in (out / "model.c").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_a_realization_file(tmp_path):
    """`--realize @FILE`: the line names the file, and C1 holds (every real in f32 here)."""
    from presk_kernel.realization import Realization

    path = tmp_path / "r.json"
    Realization.uniform("f32").write(str(path))
    file, entry, dims = TRAIN
    out = tmp_path / "c"
    done = presk_ok(
        "export", file, "--target", "c", "--entry", entry, *dims, "--realize", f"@{path}",
        "-o", out,
    )  # fmt: skip
    assert f"`loss` at B = 8 under the realization {path}: " in done.stdout
    check = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True, text=True)
    assert check.stdout == "C1 holds: the outputs are the native backend's, bit for bit\n"


def test_the_entry_host_function_as_the_spec_prints_it(tmp_path):
    """Step 3's attention at B = 1, T = 3 (L1123): kernels.c's first kernel under its
    PSK-Kernel text, as the spec prints them; model.c's entry has the spec's lines, in
    the spec's order (L1151–L1171): the inputs from `in`, the result allocated before the
    mark, `s` from scores into a buffer of the caller, the result out, the release."""
    out = tmp_path / "c"
    presk_ok(
        "export", "tutorial/03_attention.psk", "--target", "c", "--entry", "attend",
        "--dim", "B=1", "--dim", "T=3", "-o", out,
    )  # fmt: skip
    model = (out / "model.c").read_text()
    entry = model[model.index("void presk_attend(") :]
    spec_lines = [
        "void presk_attend(presk_arena *arena, const presk_attend_in *in, presk_attend_out *out)",
        "    const double *q = in->q;",
        "    const double *k = in->k;",
        "    const double *v = in->v;",
        "    double *result = presk_alloc(arena, 24 * sizeof(double));",
        "    const size_t mark = presk_mark(arena);",
        "    double *s = presk_alloc(arena, 18 * sizeof(double));",
        "    presk_scores(arena, q, k, s);",
        "    double *a = presk_alloc(arena, 18 * sizeof(double));",
        "    out->result = result;",
        "    presk_release(arena, mark);",
    ]
    lines = entry.splitlines()
    assert [line for line in lines if line in spec_lines] == spec_lines
    kernels = (out / "kernels.c").read_text().splitlines()  # the scores' ein (L1128, L1130)
    at = kernels.index(
        "// kernel ein[batch, heads, seq, seq2] (%0 : f64[batch: 1, heads: 2, seq: 3, hd: 4],"
        " %1 : f64[batch: 1, heads: 2, seq: 3, hd: 4]) -> %2 : f64[batch: 1, heads: 2, seq: 3,"
        " seq2: 3] {"
    )
    head = next(line for line in kernels[at:] if line.startswith("PRESK_KERNEL"))
    assert head == (
        "PRESK_KERNEL void k0(const double *restrict in0, const double *restrict in1,"
        " double *restrict out, int64_t lo, int64_t hi) {"
    )


def test_flags_of_the_pytorch_target_are_refused(tmp_path):
    file, entry, dims = TRAIN
    done = presk("export", file, "--target", "c", "--entry", entry, *dims, "--shapes", "check",
                 "-o", tmp_path / "x")  # fmt: skip
    assert done.returncode == 2
    assert "for --target pytorch" in done.stderr
    done = presk("export", file, "--target", "pytorch", "--realize", "f32", "-o", tmp_path / "y")
    assert done.returncode == 2
    assert "for --target c" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_weights_from_a_checkpoint(tmp_path):
    """`--weights CKPT`: the program's inputs hold the checkpoint's θ, as `presk run --weights`
    binds it, and C1 holds on them; a checkpoint of another model is E7060, nothing written."""
    file, entry, dims = TRAIN
    presk_ok("train", file, "--steps", "2", "--ckpt", tmp_path / "ckpt")
    ckpt = tmp_path / "ckpt" / "final.psk.d"
    out = tmp_path / "c"
    presk_ok("export", file, "--target", "c", "--entry", entry, *dims, "--weights", ckpt,
             "-o", out)  # fmt: skip
    run = json.loads(presk_ok("run", file, "--entry", entry, *dims, "--weights", ckpt,
                              "--json").stdout)  # fmt: skip
    path = str(out / "conformance" / "inputs.psk.d")
    (sample,) = D.read(path, D.type_of(D.read_header(path).type_text))
    got = np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in sample])
    want = np.concatenate([_decimals(v) for v in run["inputs"].values()])
    assert _bits(got) == _bits(want)
    check = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True, text=True)
    assert check.stdout == "C1 holds: the outputs are the native backend's, bit for bit\n"
    other = presk("export", "tutorial/03_attention.psk", "--target", "c", "--entry", "attend",
                  "--dim", "B=1", "--dim", "T=3", "--weights", ckpt, "-o", tmp_path / "x")  # fmt: skip
    assert other.returncode != 0 and "[E" in other.stderr and not (tmp_path / "x").exists()
    usage = presk("export", file, "--target", "pytorch", "--weights", ckpt, "-o", tmp_path / "y")
    assert usage.returncode == 2 and "--weights and --plan are for --target c" in usage.stderr
