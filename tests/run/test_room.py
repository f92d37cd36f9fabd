"""A tensor of reals too large for the memory the process may still use is refused before it
is made (presk_core.room): GMP aborts the process where an allocation fails, so a
`MemoryError` never comes (issue 16's fuzzer: `const D : nat = 1e8` in the tutorial's tower,
"GNU MP: Cannot allocate memory", signal 6)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from presk_core import room

# presk under an address space of 600 MB beyond what it maps once loaded: 10^7 doubles and
# numpy's pointers to them fit (160 MB), their 10^7 mpfr objects (about 1.2 GB) do not
LIMITED = """
import resource, sys
import presk_cli.commands, presk_cli.main, presk_core.run
with open("/proc/self/statm") as statm:
    mapped = int(statm.read().split()[0]) * resource.getpagesize()
limit = mapped + 600 * 2**20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from presk_cli.main import main
sys.exit(main(sys.argv[1:]))
"""

PROGRAM = """const D : nat = 10000000
fn f(x : ℝ[model: D]) -> ℝ[] = sum(x)
module M {
  param w : ℝ[model: D] init = ones
  fn apply(x : ℝ[model: 2]) -> ℝ[model: 2] = x
}
fn g(θ : params M, x : ℝ[model: 2]) -> ℝ[model: 2] = M.apply(θ, x)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux's /proc")
@pytest.mark.parametrize(
    ("entry", "message"),
    [("f", "cannot synthesize `x`"), ("g", "`M.init` needs more memory than there is")],
)
def test_a_tensor_too_large_for_the_address_space_is_e7011_not_an_abort(tmp_path, entry, message):
    (tmp_path / "m.psk").write_text(PROGRAM, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, "run", "m.psk", "--entry", entry],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"},
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert done.stderr.startswith("[E7011]") and message in done.stderr, done.stderr
    assert "a tensor of 10000000 reals at 256 bits takes about 1." in done.stderr, done.stderr


def test_an_argument_too_large_is_refused_before_it_is_drawn(tmp_path, monkeypatch, capsys):
    """The fuzzer's `const D : nat = 1e8` in 03_attention.psk: three arguments of 10^8 reals,
    each drawn (12 s of normals) before the room was measured, a hang at 10 s of CPU."""
    from presk_cli.main import main
    from presk_core import random as R

    def normal(key, shape):
        raise AssertionError(f"drawn: {shape}")

    monkeypatch.setattr(room, "room", lambda: 200 << 20)
    monkeypatch.setattr(R, "normal", normal)
    (tmp_path / "m.psk").write_text(PROGRAM, encoding="utf-8")
    monkeypatch.setenv("NO_COLOR", "1")
    with pytest.raises(SystemExit) as done:
        main(["run", str(tmp_path / "m.psk"), "--entry", "f"])
    assert done.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("[E7011] Error: cannot synthesize `x`") and "10000000 reals" in err


MEASURE = """
import resource, sys
import numpy as np
from presk_core import mpfr as M

def mapped():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()

doubles = np.random.default_rng(0).standard_normal(200_000)
with M.precision(int(sys.argv[1])):
    before = mapped()
    x = M.real(doubles)
    print(mapped() - before, type(x[0]).__name__)
"""


@pytest.mark.parametrize("bits", [53, 512])
def test_the_estimate_covers_what_a_tensor_of_reals_measures(bits):
    """The bytes of 200,000 reals made from doubles, measured by the growth of the address
    space of a fresh process (in this one, memory the suite freed is taken again), are under
    the estimate, and not far under."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(bits)], capture_output=True, text=True, check=True
    )
    grown, kind = done.stdout.split()
    assert kind == "mpfr"
    assert 0.7 * room.tensor_bytes(200_000, bits) < int(grown) <= room.tensor_bytes(200_000, bits)


def test_make_room_refuses_what_does_not_fit_and_says_the_sizes(monkeypatch):
    monkeypatch.setattr(room, "room", lambda: 1 << 30)
    room.make_room((1000, 1000), bits=256)  # 136 MB in 1 GiB
    with pytest.raises(room.RoomError, match=r"1000 × 10000 = 10000000 reals at 256 bits takes"):
        room.make_room((1000, 10000), bits=256)  # 1.3 GB
    room.make_room((10, 10), bits=256)  # small: not measured
    monkeypatch.setattr(room, "room", lambda: None)
    room.make_room((1000, 10000), bits=256)  # nothing known: not refused
