"""presk_core.data on headers that contradict themselves and numbers a type cannot hold."""

import struct

import numpy as np
import pytest
from presk_core import data as D
from presk_types.elab import type_from_text


def _file(tmp_path, type_text: bytes, count: int, size: int, header_size: int, body: bytes = b""):
    head = struct.pack("<4sIIQQI", b"PSKD", 1, header_size, count, size, len(type_text))
    path = tmp_path / "f.psk.d"
    path.write_bytes(head + type_text + body)
    return str(path)


def test_a_header_size_below_its_fields_is_e7010(tmp_path):
    t = "ℝ[]".encode()
    # 32 + 5 bytes of header, and the header says the samples start at 0: one sample of 40
    path = _file(tmp_path, t, 1, 37, 0)
    with pytest.raises(D.DataError) as e:
        D.read_header(path)
    assert e.value.code == "E7010"


def test_samples_of_zero_bytes_are_e7010_at_once(tmp_path):
    t = "ℝ[n: 0]".encode()
    path = _file(tmp_path, t, 2**64 - 1, 0, 48, b"\0" * (48 - 32 - len(t)))
    with pytest.raises(D.DataError) as e:
        D.read_header(path)
    assert e.value.code == "E7010" and "18446744073709551615 samples of 0 bytes" in str(e.value)


def test_parse_samples_checks_each_number():
    t = type_from_text("(ℝ[n: 2], idx[4][])")
    samples = D.parse_samples("0.5 -1 3 2 2.5 0".split(), t, "x")
    assert samples[1][0].tolist() == [2.0, 2.5] and samples[1][1].dtype == np.int64
    for words, what in [("0.5 -1 4", r"outside `idx\[4\]`"), ("1e999 0 0", "not a finite")]:
        with pytest.raises(D.DataError, match=what):
            D.parse_samples(words.split(), t, "x")


def test_type_of_names_a_checkpoint_and_hints_a_scalar_index():
    with pytest.raises(D.DataError, match="is a checkpoint"):
        D.type_of("params Tower", "c.psk.d")
    with pytest.raises(D.DataError, match=r"a scalar index is `idx\[3\]\[\]`"):
        D.type_of("idx[3]")


def test_a_type_length_beyond_the_file_is_e7005_without_reading_it(tmp_path, monkeypatch):
    import resource

    path = _file(tmp_path, "ℝ[]".encode(), 0, 8, 40)
    raw = bytearray(open(path, "rb").read())
    raw[28:32] = struct.pack("<I", 2**32 - 1)  # a type's text of 4 GB
    open(path, "wb").write(bytes(raw))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (2**31, hard))  # reading 4 GB would fail here
    try:
        with pytest.raises(D.DataError) as e:
            D.read_header(path)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert e.value.code == "E7005"
