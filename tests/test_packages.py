"""Packages that stand alone (DESIGN §1, issue 21 §6): each declares exactly what it imports,
none imports a later stage, each has one version, a README and a CHANGELOG, and presk-syntax's
sdist carries what its build compiles. `make packages` installs and tests each one alone."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import deps  # noqa: E402

PACKAGES = [p for p in deps.packages()]


def test_every_package_imports_exactly_what_it_declares() -> None:
    assert deps.report() == []


def test_the_order_of_the_stages_is_the_packages() -> None:
    assert sorted(p.name for p in PACKAGES) == sorted(deps.ORDER)


# ---- the scan itself, on a made-up workspace: each kind of problem is found -----------------


def package(root: Path, name: str, dependencies: list[str], test: list[str] = (), **files: str):
    folder = root / name
    mod = name.replace("-", "_")
    group = f"[dependency-groups]\ntest = {list(test)!r}\n" if test else ""
    (folder / "src" / mod).mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\ndependencies = {dependencies!r}\n'
        f'[project.scripts]\n{name} = "{mod}.cli:main"\n{group}'
    )
    for rel, text in files.items():
        path = folder / re.sub(r"_py$", ".py", rel.replace("__", "/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def scan(tmp_path: Path, known: dict | None = None) -> list[str]:
    return deps.report(deps.packages(tmp_path), known={} if known is None else known)


def test_a_clean_workspace_has_no_problem(tmp_path: Path) -> None:
    package(tmp_path, "presk-syntax", ["msgpack>=1.0"], ["pytest>=8"],
            src__presk_syntax__codec_py="import msgpack\nimport os\n",
            tests__test_codec_py="import pytest\nfrom presk_syntax import codec\n")  # fmt: skip
    package(tmp_path, "presk-core", ["presk-syntax", "numpy"],
            src__presk_core__run_py="import numpy as np\nfrom presk_syntax.codec import x\n",
            tests__test_run_py="from presk_core.run import y\nimport numpy\n")  # fmt: skip
    assert scan(tmp_path) == []


@pytest.mark.parametrize(
    "source, problem",
    [
        ("import numpy\n", "presk-core: src imports numpy: no dependency (src/presk_core/m.py)"),
        ("def f():\n    from gmpy2 import mpq\n", "presk-core: src imports gmpy2: no dependency"),
        ("import tree_sitter\n", "presk-core: src imports tree-sitter: no dependency"),
        ("from presk_cli import main\n", "presk-core: imports the later stage presk-cli"),
        ('PASS = "presk_ad.vjp:differentiate"\n', "presk-core: imports the later stage presk-ad"),
        ('import importlib\nimportlib.import_module("presk_kernel.lower")\n',
         "presk-core: imports the later stage presk-kernel"),
    ],
)  # fmt: skip
def test_an_undeclared_or_later_import_in_src_is_found(tmp_path, source, problem) -> None:
    package(tmp_path, "presk-syntax", [])
    package(tmp_path, "presk-core", ["presk-syntax"],
            src__presk_core__m_py=source + "import presk_syntax\n")  # fmt: skip
    found = scan(tmp_path)
    assert len(found) == 1 and found[0].startswith(problem), found


def test_a_dependency_never_imported_is_found_and_a_c_header_name_is_no_import(tmp_path):
    package(tmp_path, "presk-syntax", ["msgpack", "jinja2>=3.1"],
            src__presk_syntax__m_py='import msgpack\nHEADER = "presk_libm.h"\n')  # fmt: skip
    assert scan(tmp_path) == ["presk-syntax: declares jinja2 and src/ never imports it"]


@pytest.mark.parametrize(
    "source, problem",
    [
        ("import hypothesis\n", "presk-core: tests imports hypothesis: no test dependency"),
        ('PRESK = ROOT / ".venv" / "bin" / "presk-cli"\n',
         "presk-core: imports the later stage presk-cli (tests/test_m.py)"),
        ('CMD = [sys.executable, "-m", "presk_cli.main"]\n',
         "presk-core: imports the later stage presk-cli"),
        ("from presk_ad import differentiate\n", "presk-core: imports the later stage presk-ad"),
    ],
)  # fmt: skip
def test_what_a_packages_tests_use_is_checked_too(tmp_path, source, problem) -> None:
    package(tmp_path, "presk-syntax", [])
    package(tmp_path, "presk-core", ["presk-syntax"],
            src__presk_core__m_py="import presk_syntax\n", tests__test_m_py=source)  # fmt: skip
    package(tmp_path, "presk-ad", ["presk-core"], src__presk_ad__m_py="import presk_core\n")
    package(tmp_path, "presk-cli", ["presk-ad"], src__presk_cli__m_py="import presk_ad\n")
    found = scan(tmp_path)
    assert len(found) == 1 and found[0].startswith(problem), found


def test_a_declared_later_stage_and_a_stale_known_entry_are_problems(tmp_path) -> None:
    package(tmp_path, "presk-syntax", ["presk-core"], src__presk_syntax__m_py="import presk_core\n")
    package(tmp_path, "presk-core", [], src__presk_core__m_py="")
    found = scan(tmp_path)
    assert "presk-syntax: declares the later stage presk-core" in found
    assert "presk-syntax: imports the later stage presk-core (src/presk_syntax/m.py)" in found
    # a known problem is not reported while it occurs, and is once it no longer does
    known = {("presk-syntax", "later", "presk-core"): "issue 21", ("presk-core", "later", "x"): "y"}
    assert scan(tmp_path, known) == ["presk-core: no longer imports x (y): delete it from KNOWN"]


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_every_presk_dependency_comes_from_the_workspace(pkg) -> None:
    """A Presk package a pyproject names is the workspace's member, never looked up on an
    index (uv lock would ask PyPI for `presk-core` otherwise)."""
    meta = tomllib.loads((pkg.path / "pyproject.toml").read_text(encoding="utf-8"))
    sources = meta.get("tool", {}).get("uv", {}).get("sources", {})
    named = {d for d in pkg.runtime | pkg.test if d.startswith("presk-")}
    assert {d: sources.get(d) for d in named} == {d: {"workspace": True} for d in named}
    root = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert root["tool"]["uv"]["sources"][pkg.name] == {"workspace": True}


# ---- versions, READMEs, changelogs ----------------------------------------------------------


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_one_version_written_once(pkg) -> None:
    """`version` is dynamic in pyproject.toml, read from the one `__version__ = "X.Y.Z"` of
    the package's __init__.py; the installed metadata says the same (else: uv sync)."""
    meta = tomllib.loads((pkg.path / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in meta["project"] and meta["project"]["dynamic"] == ["version"]
    init = pkg.path / "src" / pkg.name.replace("-", "_") / "__init__.py"
    versions = re.findall(r'^__version__ = "(\d+\.\d+\.\d+)"$', init.read_text(), re.M)
    assert len(versions) == 1, init
    assert importlib.metadata.version(pkg.name) == versions[0]


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p.name)
def test_a_readme_naming_its_programs_and_a_changelog(pkg) -> None:
    meta = tomllib.loads((pkg.path / "pyproject.toml").read_text(encoding="utf-8"))
    assert meta["project"]["readme"] == "README.md"
    readme = (pkg.path / "README.md").read_text(encoding="utf-8")
    assert readme.startswith(f"# {pkg.name}: ")
    for word in ("| reads |", "| writes |", "| program |", "| place |", "```console"):
        assert word in readme, word
    for script in pkg.scripts:
        assert f"`{script}" in readme or f" {script} " in readme, script
    assert (pkg.path / "CHANGELOG.md").read_text(encoding="utf-8").startswith("# ")


def test_presk_syntax_sdist_carries_the_headers_its_build_compiles(tmp_path: Path) -> None:
    """The sdist holds every file the extension's sources include (tree_sitter/*.h)."""
    folder = ROOT / "packages" / "presk-syntax"
    # A copy without the egg-info of the editable install, whose SOURCES.txt setuptools
    # would add to the manifest.
    copy = tmp_path / "presk-syntax"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("*.egg-info", "build", "*.so"))
    code = f"import setuptools.build_meta as b; print(b.build_sdist({str(tmp_path)!r}))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=copy, capture_output=True, text=True, check=True
    )
    with tarfile.open(tmp_path / done.stdout.split()[-1]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    sources = ["grammar/src/parser.c", "grammar/src/scanner.c", "grammar/bindings/binding.c"]
    assert set(sources) <= names
    for src in sources:
        for header in re.findall(r'#include "([^"]+)"', (folder / src).read_text()):
            assert f"grammar/src/{header}" in names, (src, header)
    assert {"README.md", "CHANGELOG.md", "setup.py", "pyproject.toml"} <= names
