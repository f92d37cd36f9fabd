"""`make c-conformance` and `make c-speed` (issue 24, L856): the C export checked and timed
outside the test suite, at sizes the suite does not afford.

    python tools/c_conformance.py conformance   # every case × type × threads × compiler
    python tools/c_conformance.py speed         # the exported course GPT against native

conformance: each case exported with `presk export --target c` (f64 and f32, one thread and
two), built with every C compiler found (gcc, clang-16) with and without OpenMP, and its
`make check` run (C1: the outputs are the native backend's, bit for bit); then under plans
(`--plan`: every nest at a point of its layout space drawn at random, f64 and f32, with
gcc); then each case's SCoP nests (`--mode scop`) checked, and found by Polly where clang
has it; then the tiny MiniGPT's generation loop (`--serve`), its tokens against presk
serve's. A table, one row a build; exit 1 if any build fails C1.

speed: the course GPT's forward pass (corpus/nlp/05_gpt.psk, reduced width) exported in f32
and timed by the program's `-r N` against `presk bench --backend native` of the same entry
in the same minute (medians), at one thread and at two: the ratios C / native.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRESK = [sys.executable, "-m", "presk_cli.main"]
CASES = [
    ("tutorial/07_train.psk", "loss", ["--dim", "B=8"]),
    ("tutorial/03_attention.psk", "attend", ["--dim", "B=16", "--dim", "T=256"]),
    ("tests/examples/mlp/mlp.psk", "mse_grad", ["--dim", "D=16", "--dim", "B=64"]),
    ("tests/examples/llama/llama.psk", "block",
     ["--dim", "B=1", "--dim", "T=16", "--const", "D=32", "--const", "H=4", "--const", "F=48"]),
    ("tests/examples/minigpt/minigpt.psk", "MiniGPT.apply",
     ["--dim", "B=2", "--dim", "T=32", "--const", "V=64", "--const", "D=64", "--const", "H=4",
      "--const", "L=2"]),
]  # fmt: skip
GPT = ("corpus/nlp/05_gpt.psk", ["--const", "D=64", "--const", "H=4", "--const", "L=2"])


def write_plan(file, entry, dims, consts, realize, workers, choose, out) -> list[str]:
    """Write a plan of `entry` (as `presk plan` writes one, without a profile: the points
    are chosen, not costed) whose nest `site` takes `choose(site, points)`, a point of its
    full space on `workers` workers; the chosen points' texts."""
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_cli.plans import PLAN_KIND, PLAN_VERSION, fused_schedule, layout_fields, nests_of
    from presk_kernel.layout_space import points
    from presk_syntax.pipeline import Context

    core = PIPELINE.run(RUN, str(file), Context(consts={k: str(v) for k, v in consts.items()}))
    nests, texts = [], []
    for nest in nests_of(fused_schedule(core, entry, dict(dims), realize)):
        pt = choose(nest.site, [p for p in points(nest.kernel, "full", workers) if p.why is None])
        texts.append(f"{nest.site}: {pt.text}")
        nests.append({"nest": nest.site, "operands": [list(s) for s in nest.operands],
                      "layout": pt.text, "decisions": pt.decisions,
                      "fields": layout_fields(pt.layout)})  # fmt: skip
    doc = {"presk": PLAN_KIND, "version": PLAN_VERSION, "entry": entry, "dims": dict(dims),
           "realize": realize, "space": "full", "workers": workers, "nests": nests}  # fmt: skip
    Path(out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return texts


def run(cmd: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)


def compilers() -> list[str]:
    return [c for c in ("gcc", "clang-16", "clang") if shutil.which(c)][:2]


def conformance() -> int:
    failures = 0
    print(f"{'case':<34}{'type':<6}{'threads':>8}  {'compiler':<10}{'openmp':<8}result")
    with tempfile.TemporaryDirectory() as tmp:
        for file, entry, flags in CASES:
            for realize in ("f64", "f32"):
                for threads in ("1", "2"):
                    out = Path(tmp) / f"{Path(file).stem}-{realize}-{threads}"
                    done = run([*PRESK, "export", file, "--target", "c", "--entry", entry,
                                *flags, "--realize", realize, "--threads", threads,
                                "-o", str(out)])  # fmt: skip
                    name = f"{Path(file).stem}:{entry}"
                    if done.returncode != 0:
                        print(f"{name:<34}{realize:<6}{threads:>8}  export failed: "
                              f"{done.stderr.strip().splitlines()[:1]}")  # fmt: skip
                        failures += 1
                        continue
                    for cc in compilers():
                        for openmp in ("-fopenmp", ""):
                            run(["make", "-s", "-C", str(out), "clean"])
                            check = run(["make", "-s", "-C", str(out), "check", f"CC={cc}",
                                         f"OPENMP={openmp}"])  # fmt: skip
                            ok = check.returncode == 0 and "C1 holds" in check.stdout
                            failures += not ok
                            result = "C1 holds" if ok else "C1 FAILS " + check.stdout.strip()
                            print(f"{name:<34}{realize:<6}{threads:>8}  {cc:<10}"
                                  f"{'yes' if openmp else 'no':<8}{result}", flush=True)  # fmt: skip
            failures += planned(Path(tmp), file, entry, flags)
            scop = Path(tmp) / f"{Path(file).stem}-scop"
            done = run([*PRESK, "export", file, "--target", "c", "--mode", "scop", "--entry",
                        entry, *flags, "--realize", "f32", "-o", str(scop)])  # fmt: skip
            check = run(["make", "-s", "-C", str(scop), "check"])
            ok = done.returncode == 0 and check.returncode == 0
            failures += not ok
            summary = re.search(r"(\d+ of them static-control parts and \d+ not)", done.stdout)
            polly = ""
            clang = shutil.which("clang-16") or shutil.which("clang")
            if clang and ok:
                seen = run(["make", "-s", "-C", str(scop), "polly", f"POLLY={clang}"]).stdout
                polly = f", Polly: {seen.count('SCoP begins here') // 2} SCoPs"
            print(f"{Path(file).stem + ':' + entry:<34}scop  {'':>8}  "
                  f"{(summary.group(1) if summary else 'export failed')}"
                  f"{'; nests bit-identical' if ok else '; FAILS'}{polly}")  # fmt: skip
        failures += served(Path(tmp))
    print(f"-- {failures} failure(s)")
    return 1 if failures else 0


TINY = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]


def served(tmp: Path) -> int:
    """`--serve`: the tiny MiniGPT trained 2 steps, its generation loop exported in f64 and
    f32 (two threads), built with gcc, and its `make check` (C1, then ./generate's tokens
    against presk serve's, greedy and sampled); the failures."""
    failures = 0
    done = run([*PRESK, "train", "tests/examples/minigpt/train_minigpt.psk", *TINY, "--data",
                "tests/examples/minigpt/data/tiny_T8.psk.d", "--steps", "2", "--log-every", "0",
                "--ckpt", str(tmp / "ckpt")])  # fmt: skip
    if done.returncode != 0:
        print(f"{'minigpt:serve':<34}train failed: {done.stderr.strip().splitlines()[-1:]}")
        return 1
    for realize, threads in (("f64", "1"), ("f32", "2")):
        out = tmp / f"serve-{realize}"
        done = run([*PRESK, "export", "tests/examples/minigpt/minigpt.psk", "--target", "c",
                    "--serve", *TINY, "--weights", str(tmp / "ckpt" / "final.psk.d"),
                    "--realize", realize, "--threads", threads, "-o", str(out)])  # fmt: skip
        if done.returncode != 0:
            print(f"{'minigpt:serve':<34}{realize:<6}{threads:>8}  export failed: "
                  f"{done.stderr.strip().splitlines()[:1]}")  # fmt: skip
            failures += 1
            continue
        check = run(["make", "-s", "-C", str(out), "check", "CC=gcc"])
        ok = check.returncode == 0 and "presk serve's tokens" in check.stdout
        failures += not ok
        result = check.stdout.strip().splitlines()[-1] if ok else "FAILS " + check.stdout.strip()
        print(f"{'minigpt:serve':<34}{realize:<6}{threads:>8}  {'gcc':<10}{'yes':<8}{result}",
              flush=True)  # fmt: skip
    return failures


def _pairs(flags: list[str], flag: str) -> dict:
    return {
        k: int(v)
        for f, x in zip(flags, flags[1:], strict=False)
        if f == flag
        for k, v in [x.split("=")]
    }


def planned(tmp: Path, file: str, entry: str, flags: list[str]) -> int:
    """The case under plans (`--plan @FILE`): in f64 and f32, every nest at a point of its
    full space drawn at random (seeded) on two workers, exported, built with gcc with and
    without OpenMP, and checked (C1 against the native backend under the same plan); the
    failures."""
    failures = 0
    dims, consts = _pairs(flags, "--dim"), _pairs(flags, "--const")
    name = f"{Path(file).stem}:{entry}"
    for realize in ("f64", "f32"):
        pick = random.Random(f"{file}:{realize}")
        plan = tmp / f"{Path(file).stem}-{realize}-plan.json"
        write_plan(ROOT / file, entry, dims, consts, realize, 2,
                   lambda _, pts, pick=pick: pick.choice(pts), plan)  # fmt: skip
        out = tmp / f"{Path(file).stem}-{realize}-planned"
        done = run([*PRESK, "export", file, "--target", "c", "--entry", entry, *flags,
                    "--plan", f"@{plan}", "-o", str(out)])  # fmt: skip
        if done.returncode != 0:
            print(f"{name:<34}{realize:<6}{'plan':>8}  export failed: "
                  f"{done.stderr.strip().splitlines()[:1]}")  # fmt: skip
            failures += 1
            continue
        for openmp in ("-fopenmp", ""):
            run(["make", "-s", "-C", str(out), "clean"])
            check = run(["make", "-s", "-C", str(out), "check", "CC=gcc", f"OPENMP={openmp}"])
            ok = check.returncode == 0 and "C1 holds" in check.stdout
            failures += not ok
            result = "C1 holds" if ok else "C1 FAILS " + check.stdout.strip()
            print(f"{name:<34}{realize:<6}{'plan':>8}  {'gcc':<10}"
                  f"{'yes' if openmp else 'no':<8}{result}", flush=True)  # fmt: skip
    return failures


def speed() -> int:
    """The course GPT's forward pass, C against native, at one thread and at two: for each,
    the program exported with --threads N and run with OMP_NUM_THREADS=N (and the native
    backend's GOMP_SPINCOUNT: its threads sleep as soon as they wait), and `presk bench
    --threads N`, interleaved (three rounds; the median ratio)."""
    file, flags = GPT
    entry = ["--entry", "GPT.apply"]
    dims = ["--dim", "B=4", "--dim", "T=64"]
    with tempfile.TemporaryDirectory() as tmp:
        for threads in ("1", "2"):
            out = Path(tmp) / f"gpt{threads}"
            done = run([*PRESK, "export", file, "--target", "c", *entry, *dims, *flags,
                        "--realize", "f32", "--threads", threads, "-o", str(out)])  # fmt: skip
            if done.returncode != 0:
                print(f"c-speed: the export failed: {done.stderr.strip()}", file=sys.stderr)
                return 1
            build = run(["make", "-s", "-C", str(out), "model"])
            if build.returncode != 0:
                print(f"c-speed: the build failed: {build.stderr.strip()}", file=sys.stderr)
                return 1
            env = {**os.environ, "OMP_NUM_THREADS": threads}
            if "OMP_WAIT_POLICY" not in env:  # the native backend's pool (load.spin_count)
                from presk_cback.load import spin_count

                env.setdefault("GOMP_SPINCOUNT", spin_count())
            rows = []
            for _ in range(3):  # interleaved: C, then native, three rounds
                timed = subprocess.run(
                    [str(out / "model"), "-r", "21", str(out / "conformance/inputs.psk.d"),
                     str(out / "out.psk.d")], capture_output=True, text=True, env=env,
                )  # fmt: skip
                m = re.search(r"median ([\d.]+) ms", timed.stdout + timed.stderr)
                bench = run([*PRESK, "bench", file, *entry, *dims, *flags, "--realize", "f32",
                             "--threads", threads, "--repeat", "21"])  # fmt: skip
                # the row with lanes: what --backend native runs, and the export writes
                n = re.search(r"^native f32 \+lanes +([\d.]+)", bench.stdout, re.M)
                if m and n:
                    rows.append((float(m.group(1)), float(n.group(1))))
            if not rows:
                print("c-speed: no times read", file=sys.stderr)
                return 1
            rows.sort(key=lambda r: r[0] / r[1])
            c, native = rows[len(rows) // 2]
            print(f"course GPT forward (D=64, L=2, B=4, T=64, f32), {threads} thread(s): C"
                  f" {c:.3f} ms, native {native:.3f} ms, C / native {c / native:.2f} (median of"
                  f" 3 interleaved rounds, {os.cpu_count()} cores)", flush=True)  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["conformance", "speed"])
    args = parser.parse_args(argv)
    return conformance() if args.what == "conformance" else speed()


if __name__ == "__main__":
    sys.exit(main())
