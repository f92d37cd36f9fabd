"""The native tests compile into one cache folder kept between runs (`out/presk-cache-tests`,
unless PRESK_CACHE is set): a rerun finds every object compiled. Tests that need a C
compiler skip, with the reason, where there is none."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "out" / "presk-cache-tests"
os.environ.setdefault("PRESK_VERIFY", "1")  # the verifiers after every pass, here and in `presk`


@pytest.fixture(scope="session", autouse=True)
def tests_cache():
    old = os.environ.get("PRESK_CACHE")
    if old is None:
        CACHE.mkdir(parents=True, exist_ok=True, mode=0o700)  # the cache refuses group-writable
        os.environ["PRESK_CACHE"] = str(CACHE)
    yield os.environ["PRESK_CACHE"]
    if old is None:
        os.environ.pop("PRESK_CACHE", None)


@pytest.fixture(scope="session")
def compiler():
    """The C toolchain, or a skip that says why there is none."""
    from presk_cback.toolchain import find_toolchain
    from presk_syntax.diagnostics import DiagnosticError

    try:
        return find_toolchain()
    except DiagnosticError as e:
        pytest.skip(f"no C compiler: {e.diagnostics[0].message}")
