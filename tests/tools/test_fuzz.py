"""A short seeded run of tools/fuzz.py (issue 16; `make fuzz` runs 10,000 inputs): mutated
programs through `presk check`, corrupted `.psk.d` files through `presk data|run|train`,
garbage and type-confused documents through every stage program, extreme flags.

The classes fixed by issue 16's bad-input work (data files, stage documents, the syntax
stage's deep nesting and long lines) must give no internal error and no hang; an internal
error elsewhere must be one the issue lists (KNOWN, in its words), else the test fails."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import fuzz  # noqa: E402

# Classes with nothing known at this seed: every internal error or hang there is a regression.
CLEAN = ("check", "data", "stages")
# Internal errors outside them that issue 16 lists, each with its words; a new one fails.
KNOWN = {
    r"a seed is a N-bit integer": "extreme flags: `--seed 2^70` (a usage error, not exit 101)",
    r"^hang: check": "check crashes / hangs: a constant like `2^2^31` or `1e8` heads evaluated"
    " eagerly; shapes of huge constants",
    r"random_bits|Maximum allowed dimension": "check passes, run crashes: a dimension or a"
    " length of a huge or negative constant",
}


def test_a_short_seeded_run():
    tally = fuzz.fuzz(200, seed=0, timeout=10.0, only=("check", "data", "stages", "flags"))
    print("\n" + fuzz.table(tally))
    assert sum(tally.tried.values()) == 200
    for c in CLEAN:
        assert tally.tried[c] > 30
        assert tally.internal[c] == 0 and tally.hangs[c] == 0, fuzz.table(tally)
    for c, sigs in tally.classes.items():
        unknown = [s for s in sigs if not any(re.search(k, s) for k in KNOWN)]
        assert not unknown, f"new internal errors in {c}: {unknown}"


def test_an_internal_error_and_a_hang_are_counted(tmp_path, monkeypatch):
    """The counting itself can fail: an exception escaping a command is an internal error
    with its frame, a command that outlives the timeout a hang."""
    import time

    from presk_core import data

    case = fuzz.Case("data", "presk", ["data", "info", str(ROOT / "tutorial/data/pairs.psk.d")])
    assert fuzz.run_case(case, 10) == ("ok", "exit 0")

    def boom(*args, **kwargs):
        raise KeyError("planted")

    monkeypatch.setattr(data, "read_header", boom)
    status, sig = fuzz.run_case(case, 10)
    assert status == "internal" and sig.startswith("KeyError: 'planted'")

    def spin(*args, **kwargs):  # a hang spends CPU time, which the timeout counts
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pass

    monkeypatch.setattr(data, "read_header", spin)
    assert fuzz.run_case(case, 0.5) == ("hang", "timeout")
