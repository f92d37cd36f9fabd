"""Parameter files (`params M`) whose header a fuzzer mutates (issue 27): `presk data info`
and `diff` say E7010 for samples that are not whole reals, never an internal error; a
checkpoint records its leaves (paths and shapes) where readers of the format skip."""

import struct
from pathlib import Path

import numpy as np
import pytest
from helpers import presk

ROOT = Path(__file__).resolve().parents[2]


def params_file(path: Path, size: int, count: int = 1) -> Path:
    text = b"params M"
    h = (32 + len(text) + 7) // 8 * 8
    head = struct.pack("<4sIIQQI", b"PSKD", 1, h, count, size, len(text)) + text
    path.write_bytes(head + b"\0" * (h - len(head)) + b"\x01" * (size * count))
    return path


@pytest.mark.parametrize("size", [1, 7, 12, 20])
def test_a_params_sample_that_is_not_whole_reals_is_E7010(tmp_path, size):
    f = params_file(tmp_path / "p.psk.d", size)
    for args in (("data", "info", f), ("data", "diff", f, f)):
        r = presk(*args)
        assert r.returncode == 1 and r.stdout == "", (args, r.stderr)
        assert r.stderr.startswith("[E7010] Error:") and f"samples of {size} bytes" in r.stderr


def test_a_checkpoints_layout_round_trips_and_old_readers_skip_it(tmp_path):
    from presk_core.data import read_header, read_reals, write_tree

    arrays = [np.arange(6.0).reshape(2, 3), np.ones(4)]
    write_tree(str(tmp_path / "w.psk.d"), "params M", arrays, ["a.w", "b"])
    h = read_header(str(tmp_path / "w.psk.d"))
    assert h.type_text == "params M" and h.layout == (("a.w", (2, 3)), ("b", (4,)))
    assert h.header_size % 8 == 0
    raw = (tmp_path / "w.psk.d").read_bytes()  # a reader of the format: the type, then at H
    (tlen,) = struct.unpack_from("<I", raw, 28)
    assert raw[32 : 32 + tlen] == b"params M"
    assert (
        np.frombuffer(raw[h.header_size :], "<f8").tolist()
        == read_reals(str(tmp_path / "w.psk.d")).tolist()
    )
    write_tree(str(tmp_path / "bare.psk.d"), "params M", arrays)
    assert read_header(str(tmp_path / "bare.psk.d")).layout is None
    info = presk("data", "info", tmp_path / "w.psk.d")
    assert info.returncode == 0 and info.stdout.startswith("type    params M\ncount   1\n")
