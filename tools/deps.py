"""Each package's imports against its declared dependencies (DESIGN §1, issue 21 §6).

For every `packages/presk-*`, the distributions its `src/` imports (import statements at any
depth, `importlib.import_module("x")`, and `"presk_x.module"` / `"presk_x.module:function"`
strings, which name a module to load) are compared with `[project] dependencies`, both ways:
nothing imported undeclared, nothing declared unused. Its `tests/` are compared with those
plus the `test` dependency group (console scripts of another package run as subprocesses
count as importing it). Nothing imports, in code or in tests, a stage after its own.

    .venv/bin/python tools/deps.py       # one line per problem, exit 1 if any

`KNOWN` lists the problems that other work of issue 21 removes; each entry names its issue,
and an entry that no longer occurs is itself a problem (delete its line).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"

# The pipeline's floors (DESIGN §1): a package may depend on the ones before it only.
ORDER = (
    "presk-syntax",
    "presk-types",
    "presk-core",
    "presk-ad",
    "presk-kernel",
    "presk-opt",
    "presk-cback",
    "presk-export",
    "presk-cli",
)

# Import name -> distribution, where they differ.
DIST = {"tree_sitter": "tree-sitter", "yaml": "pyyaml", "PIL": "pillow", "_pytest": "pytest"}

# A test runner is used without being imported by every test file.
RUNNERS = {"pytest"}

# Problems that other work of issue 21 removes: (package, problem kind, distribution) -> why.
# None today: presk-syntax's and presk-types' stage programs no longer import presk-core,
# presk-core's pass list names no later stage, presk libm lives in presk-kernel.
KNOWN: dict[tuple[str, str, str], str] = {}

_MODULE_STRING = re.compile(r"(presk_[a-z]+)(\.[A-Za-z_][A-Za-z0-9_]*)*(:[A-Za-z_][A-Za-z0-9_.]*)?")


@dataclass
class Package:
    name: str
    path: Path
    runtime: set[str]
    test: set[str]
    scripts: set[str]
    imports: dict[str, set[str]] = field(default_factory=dict)  # dist -> files (src)
    test_imports: dict[str, set[str]] = field(default_factory=dict)  # dist -> files (tests)


def dist_name(requirement: str) -> str:
    """`numpy>=1.26` -> `numpy`, `Jinja2[i18n]` -> `jinja2` (PEP 503 normalised)."""
    name = re.split(r"[<>=!~ \[;@]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def load(path: Path) -> Package:
    meta = tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))
    project = meta["project"]
    groups = meta.get("dependency-groups", {})
    test = {dist_name(d) for d in groups.get("test", []) if isinstance(d, str)}
    return Package(
        name=project["name"],
        path=path,
        runtime={dist_name(d) for d in project.get("dependencies", [])},
        test=test,
        scripts=set(project.get("scripts", {})),
    )


def packages(root: Path = PACKAGES) -> list[Package]:
    found = [load(p) for p in sorted(root.iterdir()) if (p / "pyproject.toml").exists()]
    return sorted(found, key=lambda p: ORDER.index(p.name) if p.name in ORDER else len(ORDER))


def modules_of(source: str) -> set[str]:
    """The top-level module names a Python file imports or names as a module to load."""
    tree = ast.parse(source)
    found: set[str] = set()
    for node in ast.walk(tree):
        match node:
            case ast.Import(names=names):
                found |= {a.name.split(".")[0] for a in names}
            case ast.ImportFrom(level=0, module=str(module)):
                found.add(module.split(".")[0])
            case ast.Call(func=func, args=[ast.Constant(value=str(name)), *_]) if (
                getattr(func, "attr", getattr(func, "id", "")) == "import_module"
            ):
                found.add(name.split(".")[0])
            case ast.Constant(value=str(text)) if (m := _MODULE_STRING.fullmatch(text)) and (
                m.group(2) or m.group(3)
            ):
                found.add(m.group(1))
    return found


def scripts_run(source: str, scripts: dict[str, str]) -> set[str]:
    """The packages whose console scripts a test runs: `ROOT / ".venv" / "bin" / "presk"`,
    `["presk-parse", ...]`, `shutil.which("presk")`."""
    tree = ast.parse(source)
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list = []
        match node:
            case ast.BinOp(
                op=ast.Div(),
                left=ast.BinOp(op=ast.Div(), right=ast.Constant(value="bin")),
                right=ast.Constant(value=str(s)),
            ):
                names = [s]
            case (
                ast.List(elts=[ast.Constant(value=str(s)), *_])
                | ast.Tuple(elts=[ast.Constant(value=str(s)), *_])
            ):
                names = [s]
            case ast.Call(func=ast.Attribute(attr="which"), args=[ast.Constant(value=str(s))]):
                names = [s]
        found |= {scripts[s] for s in names if s in scripts}
    return found


def to_dist(module: str, local: dict[str, str]) -> str | None:
    """The distribution a top-level module comes from; None for the standard library."""
    if module in local:
        return local[module]
    if module in sys.stdlib_module_names or module == "__future__" or module.startswith("_"):
        return None if module not in DIST else DIST[module]
    return dist_name(DIST.get(module, module))


def scan(pkgs: list[Package]) -> None:
    scripts = {s: p.name for p in pkgs for s in p.scripts}
    # Test helper modules (kernel_entries.py, conftest.py) belong to the package whose tests
    # hold them; a C header's name in a string (presk_libm) is no module.
    helpers = {f.stem: p.name for p in pkgs for f in (p.path / "tests").glob("*.py")}
    for p in pkgs:
        own = p.name.replace("-", "_")
        for part, into in (("src", p.imports), ("tests", p.test_imports)):
            for f in sorted((p.path / part).rglob("*.py")):
                source = f.read_text(encoding="utf-8")
                rel = f.relative_to(p.path).as_posix()
                local = {own: p.name, **(helpers if part == "tests" else {})}
                dists = {to_dist(m, local) for m in modules_of(source)}
                if part == "tests":
                    dists |= scripts_run(source, scripts)
                for d in dists - {None}:
                    if d.startswith("presk-") and d not in ORDER:
                        continue  # presk_libm.h and the like: a file's name, not a package
                    into.setdefault(d, set()).add(rel)


def problems(pkgs: list[Package]) -> list[tuple[str, str, str, str]]:
    """(package, kind, distribution, detail) for every problem, KNOWN ones included."""
    out = []
    for p in pkgs:
        rank = ORDER.index(p.name)
        for kind, imported in (("src", p.imports), ("tests", p.test_imports)):
            declared = p.runtime | (p.test | RUNNERS if kind == "tests" else set())
            for d, files in sorted(imported.items()):
                where = ", ".join(sorted(files)[:3])
                if d == p.name:
                    continue
                if d in ORDER and ORDER.index(d) > rank:
                    out.append((p.name, "later", d, f"imports the later stage {d} ({where})"))
                elif d not in declared:
                    what = "dependency" if kind == "src" else "test dependency"
                    out.append((p.name, "missing", d, f"{kind} imports {d}: no {what} ({where})"))
        for d in sorted(p.runtime - set(p.imports)):
            out.append((p.name, "unused", d, f"declares {d} and src/ never imports it"))
        for d in sorted(p.test - set(p.test_imports) - p.runtime - RUNNERS):
            out.append((p.name, "unused", d, f"test group has {d} and tests/ never import it"))
        for d in sorted(p.test & p.runtime):
            out.append((p.name, "twice", d, f"{d} is both a dependency and a test dependency"))
        for d in sorted(p.runtime | p.test):
            if d in ORDER and ORDER.index(d) > rank:
                out.append((p.name, "later", d, f"declares the later stage {d}"))
    return out


def report(pkgs: list[Package] | None = None, known: dict | None = None) -> list[str]:
    """One line per problem that is not KNOWN, and one per KNOWN entry that no longer occurs."""
    pkgs = pkgs if pkgs is not None else packages()
    known = KNOWN if known is None else known
    scan(pkgs)
    found = problems(pkgs)
    lines = [f"{p}: {detail}" for p, kind, d, detail in found if (p, kind, d) not in known]
    occurring = {(p, kind, d) for p, kind, d, _ in found}
    for key, why in known.items():
        if key not in occurring:
            lines.append(f"{key[0]}: no longer imports {key[2]} ({why}): delete it from KNOWN")
    # A later stage listed twice (declared and imported) is one problem.
    return list(dict.fromkeys(lines))


def main() -> int:
    lines = report()
    for line in lines:
        print(line)
    known = len(KNOWN) - sum("delete it from KNOWN" in line for line in lines)
    print(f"deps: {len(lines)} problem(s), {known} known (issue 21), in {len(packages())} packages")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
