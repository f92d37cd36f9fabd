"""What the export's oracle tests share: programs run by the reference interpreter, and their
PyTorch export imported in this process.

The export of a program is written under the test's tmp_path and imported with importlib
(its folder on sys.path for the test, its module names purged from sys.modules before and
after, since `_01_linear` or `minigpt` recur from one export to the next). torch itself is
imported once for the whole pytest process. Inputs are float64 arrays, given to the
interpreter as exact reals and to the export as float64 tensors: both see the same numbers.
"""

from __future__ import annotations

import functools
import importlib
import sys
from pathlib import Path

import gmpy2
import numpy as np
import pytest
from presk_ad import differentiate
from presk_core import mpfr as M
from presk_core.interp import Interpreter
from presk_core.lower import lower_program
from presk_core.run import Entry, parse_entry, synthesize
from presk_export import Options, export_pytorch, write_files
from presk_syntax.span import SourceMap
from presk_types.elab import load_program

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROGRAMS = HERE / "programs"
BITS = 256


def program_path(name: str) -> Path:
    """A file of tests/export/programs, or a path from the repository's root."""
    local = PROGRAMS / name
    return local if local.exists() else ROOT / name


@functools.cache
def _compiled(name: str, consts: tuple[tuple[str, str], ...]):
    elab = load_program(str(program_path(name)), dict(consts), SourceMap())
    core = differentiate(lower_program(elab))
    return elab, core, Interpreter(core, BITS)


class Reference:
    """The reference interpreter at 256 bits on a program (its gradients included)."""

    def entry(self, program: str, text: str, dims: dict[str, int], consts=()) -> Entry:
        elab, core, _ = _compiled(program, tuple(consts))
        return parse_entry(text, core, elab, dims)

    def interpreter(self, program: str, consts=()) -> Interpreter:
        return _compiled(program, tuple(consts))[2]

    def synthesize(
        self, program: str, text: str, dims: dict[str, int], consts=(), seed: int = 0
    ) -> list:
        """The entry's arguments as `presk run` synthesizes them (DESIGN §5), as float64."""
        entry = self.entry(program, text, dims, consts)
        interp = self.interpreter(program, consts)
        return [double(v) for _, _, v in synthesize(entry, interp, seed)]

    def run(self, program: str, text: str, dims: dict[str, int], args: list, consts=()):
        """The entry `text` on args (float64 arrays, index arrays, tuples or trees of them),
        its result as float64 (an array, a tuple or a tree)."""
        entry = self.entry(program, text, dims, consts)
        interp = self.interpreter(program, consts)
        result = interp.run(entry.function.name, [exact(a) for a in args], entry.dims)
        return double(result)


def exact(value: object) -> object:
    """float64 arrays as the interpreter's reals, floats as its f64 hyperparameters
    (exactly: they are doubles)."""
    if isinstance(value, dict):
        return {k: exact(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(exact(v) for v in value)
    if isinstance(value, np.ndarray) and value.dtype == np.float64:
        with M.precision(BITS):
            return M.real(value)
    if isinstance(value, float):
        return gmpy2.mpfr(value)
    return value


def double(value: object) -> object:
    """The interpreter's reals rounded to float64 (indices and masks as they are)."""
    if isinstance(value, dict):
        return {k: double(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(double(v) for v in value)
    array = np.asarray(value)
    if array.dtype == object:
        return np.vectorize(float, otypes=[np.float64])(array)
    return array


@pytest.fixture(scope="session")
def reference() -> Reference:
    return Reference()


def _purge(names: list[str]) -> None:
    for name in names:
        sys.modules.pop(name, None)


@pytest.fixture
def exported(tmp_path):
    """`exported(program, consts)`: its export (--shapes=check) written under tmp_path and
    imported, as {Python module name: module}; in float64 for the test."""
    torch = pytest.importorskip("torch")
    folders: list[str] = []
    names: list[str] = []

    def load(program: str, consts=()) -> dict[str, object]:
        elab = load_program(str(program_path(program)), dict(consts), SourceMap())
        files = export_pytorch(elab, Options(check_shapes=True))
        folder = tmp_path / f"export{len(folders)}"
        write_files(str(folder), files)
        modules = [Path(f).stem for f in files if f.endswith(".py") and "/" not in f]
        _purge(modules)
        sys.path.insert(0, str(folder))
        folders.append(str(folder))
        names.extend(modules)
        importlib.invalidate_caches()
        return {m: importlib.import_module(m) for m in modules}

    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield load
    finally:
        torch.set_default_dtype(dtype)
        for folder in folders:
            sys.path.remove(folder)
        _purge(names)
