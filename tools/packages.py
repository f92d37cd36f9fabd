"""Each package alone, in a fresh environment of its own (DESIGN §1, issue 21 §6).

    python tools/packages.py test [PACKAGE…]   # `make packages`: its own tests
    python tools/packages.py dist [PACKAGE…]   # `make dist`: uv build, then each wheel alone

`test` makes `build/packages/NAME/` (uv venv) with the package installed from its folder, the
Presk packages it depends on from theirs (nothing else from the workspace), its third-party
dependencies and its `test` dependency group, then runs `pytest packages/NAME/tests` there.
`dist` runs `uv build --all-packages` (each wheel is built from its sdist) into `build/dist/`,
then installs each wheel with the wheels of its Presk dependencies into `build/dist-env/NAME/`
and runs its stage program, piped after those of the stages before it, on
tutorial/01_linear.psk. One line per package; exit 1 if any failed.

torch (presk-export's tests) comes from a wheel on this disk where there is one (`--torch-wheels
DIR`, default the folder pip's `find-links` names, /opt/wheels): uv would otherwise download a
CUDA build of several GB. Without one, the test files that import torch are left out, and the
line says so.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import deps  # noqa: E402

ROOT = deps.ROOT
BUILD = ROOT / "build"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
UV = os.environ.get("UV") or shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
SAMPLE = "tutorial/01_linear.psk"
ENTRY = ("--entry", "Linear{3, 2}.apply", "--dim", "batch=4")

# The stage programs in pipeline order: (package, console script, its arguments).
STAGES = [
    ("presk-syntax", "presk-parse", (SAMPLE,)),
    ("presk-types", "presk-elab", ()),
    ("presk-core", "presk-lower", ()),
    ("presk-ad", "presk-ad", ()),
    ("presk-kernel", "presk-kernel", ENTRY),
    ("presk-cback", "presk-c", ()),
]


def uv(*args: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "VIRTUAL_ENV": kw.pop("venv", "")} if "venv" in kw else None
    return subprocess.run([UV, *args], capture_output=True, text=True, env=env, **kw)


def closure(name: str, pkgs: dict[str, deps.Package], test: bool = False) -> list[str]:
    """The Presk packages `name` needs (itself included), in pipeline order."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        p = pkgs[todo.pop()]
        if p.name in seen:
            continue
        seen.add(p.name)
        direct = p.runtime | (p.test if test and p.name == name else set())
        todo += [d for d in direct if d in pkgs]
    return [n for n in deps.ORDER if n in seen]


def requirements(path: Path, group: str | None) -> list[str]:
    meta = tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))
    reqs = meta["project"].get("dependencies", [])
    if group:
        reqs = reqs + meta.get("dependency-groups", {}).get(group, [])
    return [r for r in reqs if not deps.dist_name(r).startswith("presk-")]


def torch_wheels(given: str | None) -> Path | None:
    """A folder holding a torch wheel for this Python, or None."""
    if given:
        folders = [given]
    else:
        links = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
            capture_output=True,
            text=True,
        ).stdout.split()
        folders = [*links, "/opt/wheels"]
    tag = f"cp{PY.replace('.', '')}"
    for folder in map(Path, folders):
        if folder.is_dir() and any(folder.glob(f"torch-*-{tag}-{tag}-*.whl")):
            return folder
    return None


def fresh_env(where: Path) -> str:
    shutil.rmtree(where, ignore_errors=True)
    where.parent.mkdir(parents=True, exist_ok=True)
    done = uv("venv", "--quiet", "--python", sys.executable, str(where))
    if done.returncode:
        raise RuntimeError(done.stderr.strip())
    return str(where)


def install(venv: str, items: list[str], links: Path | None = None) -> None:
    extra = ["--find-links", str(links)] if links else []
    done = uv("pip", "install", "--quiet", *extra, *items, venv=venv)
    if done.returncode:
        raise RuntimeError(done.stderr.strip()[-2000:])


def test_package(p: deps.Package, pkgs: dict, wheels: Path | None) -> tuple[bool, str]:
    venv = fresh_env(BUILD / "packages" / p.name)
    wanted = closure(p.name, pkgs, test=True)
    reqs = [r for n in wanted for r in requirements(pkgs[n].path, "test" if n == p.name else None)]
    note, ignore = "", []
    if any(deps.dist_name(r) == "torch" for r in reqs):
        if wheels is not None:
            found = sorted(wheels.glob(f"torch-*-cp{PY.replace('.', '')}-*.whl"))[-1]
            version = found.name.split("-")[1].split("+")[0]
            reqs = [r for r in reqs if deps.dist_name(r) != "torch"] + [f"torch=={version}"]
            note = f", torch {version} from {wheels}"
        else:
            reqs = [r for r in reqs if deps.dist_name(r) != "torch"]
            tests = sorted((p.path / "tests").glob("*.py"))
            ignore = [t for t in tests if "torch" in deps.modules_of(t.read_text())]
            note = f", no torch wheel on this disk: {len(ignore)} test file(s) left out"
    install(venv, [str(pkgs[n].path) for n in wanted] + reqs, links=wheels if note else None)
    if not (p.path / "tests").is_dir():
        return (
            True,
            f"installed alone; no tests of its own (its tests are tests/, across stages){note}",
        )
    cmd = [f"{venv}/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    cmd += [f"--ignore={t}" for t in ignore] + [str(p.path / "tests")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    tail = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    if done.returncode:
        return False, f"{tail}{note}\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
    return True, f"{tail} (with {', '.join(wanted[:-1]) or 'no other Presk package'}{note})"


def dist_all() -> dict[str, Path]:
    out = BUILD / "dist"
    shutil.rmtree(out, ignore_errors=True)
    done = uv("build", "--all-packages", "--quiet", "-o", str(out), cwd=ROOT)
    if done.returncode:
        raise RuntimeError("uv build --all-packages failed:\n" + done.stderr[-3000:])
    wheels = {}
    for whl in out.glob("*.whl"):
        name = re.sub(r"_", "-", whl.name.split("-")[0])
        wheels[name] = whl
    sdists = {re.sub(r"_", "-", s.name.rsplit("-", 1)[0]) for s in out.glob("*.tar.gz")}
    missing = set(deps.ORDER) - set(wheels) | set(deps.ORDER) - sdists
    if missing:
        raise RuntimeError(f"uv build made no wheel or sdist for {sorted(missing)}")
    return wheels


def run_stages(venv: str, p: deps.Package, wanted: list[str]) -> str:
    """The stage programs of `wanted` piped in order on the sample; what the last printed."""
    data, ran = b"", []
    for pkg, script, args in STAGES:
        exe = Path(venv) / "bin" / script
        if pkg not in wanted or (p.name == "presk-cli" and pkg == "presk-cback"):
            continue  # presk-cli: presk-dump reads the kernel document, not the C
        if not exe.exists():
            if pkg == p.name:
                raise RuntimeError(f"{script}: not installed (no [project.scripts] entry?)")
            break
        done = subprocess.run([str(exe), *args], input=data, capture_output=True, cwd=ROOT)
        if done.returncode:
            raise RuntimeError(f"{' | '.join(ran + [script])}: {done.stderr.decode()[-1500:]}")
        data, ran = done.stdout, ran + [script]
    if p.name == "presk-cli":
        dump = subprocess.run([f"{venv}/bin/presk-dump"], input=data, capture_output=True)
        run = subprocess.run(
            [f"{venv}/bin/presk", "run", SAMPLE, *ENTRY], capture_output=True, cwd=ROOT
        )
        if dump.returncode or run.returncode or not dump.stdout.strip():
            why = (dump.stderr + run.stderr).decode()[-1500:] or "nothing printed"
            raise RuntimeError(f"presk-dump (exit {dump.returncode}), presk run: {why}")
        return f"{' | '.join(ran)} | presk-dump: {len(dump.stdout)} bytes; presk run: ok"
    if p.name in {name for name, _, _ in STAGES}:
        if not data:
            raise RuntimeError(f"{' | '.join(ran)}: nothing written")
        if p.name == "presk-cback" and (cc := shutil.which(os.environ.get("CC", "cc"))):
            c = BUILD / "dist-env" / "sample.c"
            c.write_bytes(data)
            # its pragmas as presk's toolchain reads them (`-fopenmp-simd`, BASE_FLAGS): the
            # entry's finite check is a `#pragma omp simd` loop, an unknown pragma without it
            flags = ["-std=c11", "-fopenmp-simd", "-fsyntax-only", "-Wall", "-Werror"]
            done = subprocess.run([cc, *flags, str(c)], capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"the C of presk-c does not compile: {done.stderr[-1500:]}")
            return f"{' | '.join(ran)}: {len(data)} bytes of C that {Path(cc).name} compiles"
        return f"{' | '.join(ran)}: {len(data)} bytes"
    mod = p.name.replace("-", "_")
    code = f"import {mod}; print({mod}.__version__)"
    done = subprocess.run([f"{venv}/bin/python", "-c", code], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-1500:])
    return f"no stage program; import {mod}: {done.stdout.strip()}"


def dist_package(p: deps.Package, pkgs: dict, wheels: dict[str, Path]) -> tuple[bool, str]:
    venv = fresh_env(BUILD / "dist-env" / p.name)
    wanted = closure(p.name, pkgs)
    install(venv, [str(wheels[n]) for n in wanted])
    return True, f"{wheels[p.name].name}: {run_stages(venv, p, wanted)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["test", "dist"])
    ap.add_argument("packages", nargs="*", help="default: all nine")
    ap.add_argument("--torch-wheels", help="a folder with a torch wheel for this Python")
    a = ap.parse_args()
    pkgs = {p.name: p for p in deps.packages()}
    chosen = a.packages or list(pkgs)
    unknown = [n for n in chosen if n not in pkgs]
    if unknown:
        print(f"packages: no package {', '.join(unknown)} (one of {', '.join(pkgs)})")
        return 2
    try:
        wheels = dist_all() if a.what == "dist" else torch_wheels(a.torch_wheels)
    except RuntimeError as e:
        print(f"packages: {e}")
        return 1
    if a.what == "dist":
        print(f"uv build --all-packages: {len(wheels)} wheels and sdists in {BUILD / 'dist'}")
    # setuptools builds presk-syntax in its folder (build/): removed after the run, so that
    # no stale copy of a source file lies in packages/ for the scans of the tests.
    before = set(ROOT.glob("packages/*/build"))
    failed = 0
    for name in chosen:
        start = time.monotonic()
        try:
            ok, line = (test_package if a.what == "test" else dist_package)(
                pkgs[name], pkgs, wheels
            )
        except RuntimeError as e:
            ok, line = False, str(e)
        failed += not ok
        print(f"{name:<13} {'ok  ' if ok else 'FAIL'} {line}  [{time.monotonic() - start:.0f} s]")
        sys.stdout.flush()
    for left in set(ROOT.glob("packages/*/build")) - before:
        shutil.rmtree(left, ignore_errors=True)
    print(f"packages {a.what}: {len(chosen) - failed} of {len(chosen)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
