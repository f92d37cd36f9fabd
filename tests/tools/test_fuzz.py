"""A short seeded run of tools/fuzz.py (issue 16; `make fuzz` runs 10,000 inputs): mutated
programs through `presk check`, corrupted `.psk.d` files through `presk data|run|train`,
garbage and type-confused documents through every stage program, extreme flags.

The classes fixed by issue 16's bad-input work (data files, stage documents, the syntax
stage's deep nesting and long lines) must give no internal error and no hang; an internal
error elsewhere must be one the issue lists (KNOWN, in its words), else the test fails."""

from __future__ import annotations

import json
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
    """100 inputs in two workers: about 12 s of CPU time (half of it the checks of megabyte
    lines), a few seconds on two free cores."""
    tally = fuzz.fuzz(100, seed=0, timeout=10.0, only=("check", "data", "stages", "flags"), jobs=2)
    print("\n" + fuzz.table(tally))
    assert sum(tally.tried.values()) == 100
    for c in CLEAN:
        assert tally.tried[c] > 15
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


def _rows(tally) -> list[str]:
    """The table without its seconds (a clock's, different from run to run)."""
    return [
        re.sub(r"\| [\d.]+ \| ([\d:, ]*) \|$", r"| \1 |", r) for r in fuzz.table(tally).split("\n")
    ]


def test_two_workers_count_what_one_counts():
    """`--jobs 2` shares out the same list of inputs: the same table, in the same order."""
    only = ("data", "stages", "flags")
    one = fuzz.fuzz(40, seed=5, timeout=10.0, only=only)
    two = fuzz.fuzz(40, seed=5, timeout=10.0, only=only, jobs=2)
    assert sum(one.tried.values()) == 40
    assert _rows(one) == _rows(two)
    assert one.exits == two.exits


def test_a_worker_that_dies_on_a_run_leaves_its_mutant_saved(tmp_path, monkeypatch):
    """A run whose worker dies (as GMP's abort kills it, in C) is an internal error, the worker is
    restarted for the next input, and the mutant that killed it is saved with its command,
    to be run again (`--replay`)."""
    import os
    import signal

    real_invoke = fuzz.invoke

    def invoke(program, argv, stdin):
        if argv[0] == "run":
            os.kill(os.getpid(), signal.SIGKILL)
        return real_invoke(program, argv, stdin)

    monkeypatch.setattr(fuzz, "invoke", invoke)  # the workers fork after it
    tally = fuzz.fuzz(4, seed=0, timeout=10.0, only=("run",), save=str(tmp_path))
    died = [s for s in tally.classes.get("run", {}) if s.startswith("the process died")]
    assert died and tally.internal["run"] == tally.tried["run"] >= 2, fuzz.table(tally)
    saved = sorted(tmp_path.iterdir())
    assert len(saved) == tally.internal["run"]
    for where in saved:
        command = (where / "command.txt").read_text()
        assert command.startswith("presk run ") and "fuzz_mutant.psk --entry" in command
        assert (where / "fuzz_mutant.psk").read_text(encoding="utf-8").strip()
    again = fuzz.saved(str(tmp_path))  # `--replay`: the same inputs, the mutant in its place
    assert [c.argv for c in again] == [
        json.loads((where / "argv.json").read_text())[1:] for where in saved
    ]
    for case in again:
        (name,) = case.files
        assert name == case.argv[1] and name.endswith("/fuzz_mutant.psk")


# ---- issue 27's surfaces ------------------------------------------------------------------


def test_every_document_kind_s_decoder_gives_no_internal_error():
    """The `documents` surface: ast, elab, core and kernel documents damaged (type-confused,
    extreme numbers, cut, nested, random bytes) through the program that decodes each,
    and sources of integers ≥ 2⁶⁴ through presk-parse: every one a DocumentError or read."""
    tally = fuzz.fuzz(80, seed=3, timeout=10.0, only=("documents",))
    assert tally.tried["documents"] == 80
    assert tally.internal["documents"] == 0 and tally.hangs["documents"] == 0, fuzz.table(tally)


def test_each_surface_draws_its_own_inputs():
    import fuzz_cases

    docs = fuzz.documents_of(str(ROOT))
    for surface in ("native", "serve", "profile", "documents", "values"):
        cases = fuzz_cases.make_cases(40, 0, docs, (surface,))
        assert {c.kind for c in cases} == {surface}
        assert cases == fuzz_cases.make_cases(40, 0, docs, (surface,))  # seeded
    natives = fuzz_cases.make_cases(40, 0, docs, ("native",))
    assert any(c.prepare and c.prepare[0] == "cache" for c in natives)
    assert any(c.remutate and "--backend" in c.argv for c in natives)
    assert fuzz._consts(["--const", "D=8", "--backend", "native", "--const", "H=2"]) == (
        ["--const", "D=8", "--const", "H=2"],
        ["--backend", "native"],
    )


def test_a_cache_is_damaged_by_each_kind_of_damage(tmp_path):
    from fuzz_surfaces import CACHE_DAMAGE, damage_cache

    seen = set()
    for seed in range(200):
        where = tmp_path / f"c{seed}"
        (where / "ab").mkdir(parents=True)
        obj = where / "ab" / "abc.so"
        obj.write_bytes(b"\x7fELF" + bytes(range(256)) * 4)
        (where / "ab" / "abc.c").write_text("int presk_entry(void);\n")
        (where / "ab" / "abc.lock").write_bytes(b"")
        other = tmp_path / "other.so"
        other.write_bytes(b"\x7fELF other")
        before = {p: p.read_bytes() for p in where.rglob("*") if p.is_file()}
        op = damage_cache(where, [other], seed)
        seen.add(op)
        after = (
            {p: p.read_bytes() for p in where.rglob("*") if p.is_file() and not p.is_symlink()}
            if where.is_dir() and not where.is_symlink()
            else {}
        )
        assert after != before or op in ("lock-folder",), op
        fuzz._rmtree(where) if where.is_dir() and not where.is_symlink() else where.unlink()
    assert seen == set(CACHE_DAMAGE)


def test_a_training_of_a_horizon_longer_than_the_timeout_is_no_hang(monkeypatch):
    """`train --steps 2^64` trains until stopped, as asked (the values surface counted it as a
    hang): its timeout is an ordinary end once it has logged its first step, and still a hang
    when nothing gets there."""
    import time

    from presk_ad import step

    argv = ["train", str(ROOT / "tutorial/07_train.psk"), "--steps", str(2**64)]
    argv += ["--log-every", "1", "--ckpt", "ckpt"]
    endless = fuzz.Case("values", "presk", argv, endless=True)
    assert fuzz.run_case(endless, 3) == ("ok", "exit stopped")
    assert fuzz.run_case(fuzz.Case("values", "presk", argv), 3) == ("hang", "timeout")

    def spin(self, *args, **kwargs):  # stuck before the first step
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pass
        yield from ()

    monkeypatch.setattr(step.Trainer, "steps", spin)
    assert fuzz.run_case(endless, 1) == ("hang", "timeout")


def test_the_values_surface_draws_huge_horizons_as_endless():
    import fuzz_cases

    cases = fuzz_cases.make_cases(2000, 0, fuzz.documents_of(str(ROOT)), ("values",))
    for c in cases:
        steps = c.argv[-1] if c.argv[-2] == "--steps" else c.argv[-3]
        huge = c.argv[0] == "train" and steps.isascii() and steps.isdigit() and len(steps) > 4
        assert c.endless == huge
        assert c.argv[-2:] == (["--log-every", "1"] if huge else c.argv[-2:])
    assert any(c.endless and c.argv[-3] == str(2**64) for c in cases)


def test_a_mutant_with_a_syntax_error_is_not_clean_and_not_checked(tmp_path, monkeypatch):
    """A run, dump or native mutant is checked only when its syntax tree has no error (what
    check says of the others is the check surface's), and once per text in a worker."""
    calls = []
    real = fuzz.invoke

    def invoke(program, argv, stdin):
        calls.append(argv)
        return real(program, argv, stdin)

    monkeypatch.setattr(fuzz, "invoke", invoke)
    monkeypatch.setattr(fuzz, "_CHECKED", {})
    good = (ROOT / "tutorial/01_linear.psk").read_bytes()
    name = str(tmp_path / "m.psk")
    argv = ["check", name]
    assert fuzz.checks_clean(argv, good, name)
    Path(name).unlink()
    assert fuzz.checks_clean(argv, good, name) and calls == [argv]
    assert Path(name).read_bytes() == good  # a clean mutant's file is there to run
    bad = good.replace(b"fn ", b"fn fn ", 1)
    assert not fuzz.checks_clean(argv, bad, name) and calls == [argv]
    typo = good.replace(b"->", b"-> ", 1) + b"\nfn g(x : nope) -> nope = x\n"
    assert not fuzz.checks_clean(argv, typo, name) and calls == [argv, argv]  # checked: E-code
    assert Path(name).read_bytes() == typo
