"""Generated C never assumes an alignment it has not declared (issue 27: a fused kernel's
strip array `double v_s3[8]`, read by an aligned vector move at 8 mod 16, was a SIGSEGV of
`sum(axis seq, embed(table, ids))` in f64 at B 8, T 1 and B 12, T 6): every array the C
declares is `_Alignas(64)`, the arena starts at a multiple of 64, and the entries that
crashed, with the tutorial's and the examples', run natively with the kernel interpreter's
bits, at `-march=native` (the toolchain's flags) and under UBSan's alignment check."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from presk_cback.host import entry_units
from presk_cback.native import NativeEntry
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "presk-kernel" / "tests"))
from kernel_entries import ENTRIES, laid_default, lowered, same_bits  # noqa: E402

HERE = Path(__file__).resolve().parent
POOL = HERE / "data" / "pool.psk"  # sum(axis seq, embed(table, ids)): the crash of issue 27
POOLS = [
    (str(POOL), "pool", (("V", 16), ("D", d), ("B", b), ("T", t)), ())
    for d, b, t in [(8, 8, 1), (8, 12, 6), (16, 12, 6), (5, 8, 1)]
]
ARRAY = re.compile(r"^\s*(?:const\s+)?(?:double|float|int64_t|uint16_t|int)\s+\w+\[[^\]]*\]")


def _fused(case, realize="f64"):
    file, entry, dims, consts = case
    schedule, args, _ = lowered(file, entry, dims, realize, False, consts)
    fused = laid_default(fuse(schedule)[0])
    return fused, args


@pytest.mark.parametrize("case", POOLS + ENTRIES, ids=lambda c: f"{Path(c[0]).stem}:{c[2]}")
def test_every_array_the_c_declares_is_aligned(case):
    fused, _ = _fused(case)
    c = "\n".join(entry_units(fused, True, None, 1, False))
    body = c[c.index("presk_checked") :]  # the kernels, after presk libm and the prelude
    bare = [ln.strip() for ln in body.splitlines() if ARRAY.match(ln) and "_Alignas" not in ln]
    assert bare == []


@pytest.mark.parametrize("realize", ["f64", "f32"])
@pytest.mark.parametrize("case", POOLS, ids=lambda c: str(c[2]))
def test_the_entries_that_crashed_run_natively(case, realize):
    # f64 at D 8: one strip of 8 lanes, `double v_s3[8]`, as issue 27 saw it
    fused, args = _fused(case, realize)
    expected = run_schedule(fused, args)
    entry = NativeEntry(fused)
    assert entry.arena.ctypes.data % 64 == 0
    assert same_bits(entry.run(args), expected)


PROBE = textwrap.dedent(
    """\
    import sys
    sys.path.insert(0, {tests!r})
    sys.path.insert(0, {kernel_tests!r})
    from test_align import POOLS, ENTRIES, _fused
    from presk_cback.native import NativeEntry
    from presk_kernel.interp import run_schedule
    from kernel_entries import same_bits
    for case in POOLS + ENTRIES:
        fused, args = _fused(case)
        entry = NativeEntry(fused)
        assert b"libubsan" in open(entry.module.path, "rb").read()  # instrumented
        assert same_bits(entry.run(args), run_schedule(fused, args)), case
    print("ran", len(POOLS + ENTRIES))
    """
)


def test_the_entries_run_under_ubsans_alignment_check(tmp_path):
    # In a process of its own: UBSan aborts it at the first misaligned access.
    env = {
        **os.environ,
        "PRESK_SANITIZE": "alignment",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
        "PRESK_CACHE": str(tmp_path / "cache"),
    }
    probe = PROBE.format(
        tests=str(HERE), kernel_tests=str(HERE.parents[1] / "presk-kernel" / "tests")
    )
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "runtime error" not in r.stderr, r.stderr[-3000:]
    assert r.stdout.strip() == f"ran {len(POOLS) + len(ENTRIES)}"
