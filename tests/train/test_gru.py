"""The GRU classifier of tests/examples/gru (issue 29: a scan over a symbolic number of steps
in a model) trained natively: its log equal to the reference interpreter's at the six digits
a line prints, its loss going down; the data file as make_data.py writes it. (The export of
its training passes its conformance test in `make train-examples`; the export of a scan{T}
is tests/run/test_scan_n.py's.)"""

import re
import subprocess
import sys

from helpers import ROOT, presk_ok

EXAMPLE = ROOT / "tests" / "examples" / "gru"
STEP = re.compile(r"^step (\d+)  epoch \d+  loss ([0-9.e+-]+)  lr \S+  \|g\| (\S+)$")


def log(backend: str, tmp_path) -> list[tuple[str, ...]]:
    done = presk_ok(
        "train", EXAMPLE / "gru.psk", "--steps", "8", "--log-every", "2",
        "--backend", backend, "--ckpt", tmp_path / backend,
    )  # fmt: skip
    lines = [m.groups() for line in done.stdout.splitlines() if (m := STEP.match(line))]
    assert len(lines) == 4, done.stdout
    return lines


def test_native_training_is_the_interpreters_at_six_digits(tmp_path):
    native = log("native", tmp_path)
    assert native == log("interp", tmp_path)
    assert float(native[-1][1]) < float(native[0][1])  # it learns


def test_the_data_is_what_make_data_writes(tmp_path):
    (tmp_path / "data").mkdir()
    script = (EXAMPLE / "make_data.py").read_text()
    (tmp_path / "make_data.py").write_text(script)
    subprocess.run([sys.executable, "make_data.py"], cwd=tmp_path, check=True)
    written = (tmp_path / "data" / "signs_T8.psk.d").read_bytes()
    assert written == (EXAMPLE / "data" / "signs_T8.psk.d").read_bytes()
