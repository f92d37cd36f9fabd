"""Every test of presk-cback compiles into one cache folder, nothing into the user's cache:
in the checkout, `out/presk-cache-tests`, the folder tests/native's conftest.py keeps between
runs (an object is compiled once, then found by every later run and by both of `make test`'s
workers: the cache compiles under a per-entry lock and renames into place, see
presk_core.cc.cache); outside a checkout (a package tested alone), a folder of the session.
A test of the compile itself sets PRESK_CACHE to a folder of its own. presk-kernel's test
helpers (kernel_entries.py: its entries, same_bits) are importable by name."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "presk-kernel" / "tests"))
ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / "out" / "presk-cache-tests"  # as tests/native/conftest.py's


@pytest.fixture(scope="session", autouse=True)
def session_cache(tmp_path_factory):
    if (ROOT / "tests" / "native" / "conftest.py").is_file():  # the checkout
        folder = CACHE
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)  # the cache refuses group-writable
    else:
        folder = tmp_path_factory.mktemp("presk-cache")
    old = os.environ.get("PRESK_CACHE")
    os.environ["PRESK_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("PRESK_CACHE", None)
    else:
        os.environ["PRESK_CACHE"] = old


def _strict_cc(tc, c, out, flags, *extra) -> subprocess.CompletedProcess:
    """The toolchain `tc` compiling the C file `c` to `out` with `flags`, every warning an
    error, then `extra` flags."""
    return subprocess.run(
        [*tc.cc, *flags, "-Wall", "-Wextra", "-Werror", *extra, str(c), "-o", str(out)],
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="session")
def strict_cc():
    """`strict_cc(tc, c, out, flags, *extra)`: the compiler's run, warnings as errors (the
    tests that the generated C is warning-free)."""
    return _strict_cc


@pytest.fixture
def acc_and_copy():
    """(vec, acc, copy): a vector of 4 doubles and two kernels over it, `acc` adding input 0
    into output 1 (it reads its output before writing it) and `copy` writing it whole, each
    at its loop order (well formed: a native entry verifies what it compiles)."""
    from presk_kernel.ir import Affine, Axis, Buffer, Kernel, Layout, Load, Loop, Op, Store

    vec = (Axis(None, 4),)
    i = Affine.var("i0")

    def kernel(name, body):
        ins, outs = (Buffer(0, "f64", vec),), (Buffer(1, "f64", vec),)
        return Kernel(name, f"t/{name}", ins, outs, body, layout=Layout(order=("i0",)))

    acc = kernel(
        "acc", (Loop("i0", None, 4, (Store(1, (i,), Op("add", (Load(1, (i,)), Load(0, (i,))))),)),)
    )
    copy = kernel("copy", (Loop("i0", None, 4, (Store(1, (i,), Load(0, (i,))),)),))
    return vec, acc, copy
