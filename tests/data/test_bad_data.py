"""Bad `.psk.d` files and bad numbers (issue 16): each a coded diagnostic through `presk
data` and `presk run --data`, never an internal error, a hang or samples read from a header."""

import struct
from pathlib import Path

import pytest
from helpers import presk

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "tutorial" / "data" / "pairs.psk.d"
TRAIN = ROOT / "tutorial" / "07_train.psk"


def header(type_text: bytes, count: int, size: int, header_size: int | None = None) -> bytes:
    h = header_size if header_size is not None else (32 + len(type_text) + 7) // 8 * 8
    head = struct.pack("<4sIIQQI", b"PSKD", 1, h, count, size, len(type_text)) + type_text
    return head + b"\0" * max(0, h - len(head))


def _header_size_zero(p):  # the pairs, their header claiming 0 bytes: size 0 + N·S exactly
    raw = PAIRS.read_bytes()
    p.write_bytes((raw[:8] + struct.pack("<I", 0) + raw[12:])[: 128 * 64])


BAD = {
    "a header type that is not a type": (
        lambda p: p.write_bytes(header(b"(R[model: 4]", 0, 0)),
        "E7007",
        "holds `(R[model: 4]`, which is not a type",
    ),
    "a checkpoint": (
        lambda p: p.write_bytes(header(b"params Tower", 1, 8) + b"\0" * 8),
        "E7007",
        "is a checkpoint",
    ),
    "an empty file": (lambda p: p.write_bytes(b""), "E7004", "is not a .psk.d file"),
    "a header size of 0": (_header_size_zero, "E7010", "its size is 0 bytes"),
    "2^64 - 1 samples of 0 bytes": (
        lambda p: p.write_bytes(header("ℝ[model: 0]".encode(), 2**64 - 1, 0)),
        "E7010",
        "18446744073709551615 samples of 0 bytes",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_run_data_on_a_bad_file_is_its_code(tmp_path, case):
    make, code, words = BAD[case]
    bad = tmp_path / "bad.psk.d"
    make(bad)
    r = presk("run", TRAIN, "--entry", "loss", "--data", bad)
    assert r.returncode == 1 and r.stderr.startswith(f"[{code}] Error: ") and words in r.stderr


@pytest.mark.parametrize("case", [c for c in BAD if c != "a checkpoint"])
def test_data_info_on_a_bad_file_is_its_code(tmp_path, case):
    make, code, words = BAD[case]
    bad = tmp_path / "bad.psk.d"
    make(bad)
    r = presk("data", "info", bad)
    assert r.returncode == 1 and r.stderr.startswith(f"[{code}] Error: ") and words in r.stderr


def test_diff_with_a_nan_prints_nan(tmp_path):
    raw = bytearray(PAIRS.read_bytes())
    at = struct.unpack_from("<I", raw, 8)[0]
    raw[at : at + 8] = struct.pack("<d", float("nan"))
    (tmp_path / "n.psk.d").write_bytes(bytes(raw))
    r = presk("data", "diff", tmp_path / "n.psk.d", PAIRS)
    assert r.returncode == 0
    assert r.stdout == "presk data: ‖a − b‖₂ NaN   ‖a‖₂ NaN   relative NaN   over 1024 reals\n"


@pytest.mark.parametrize(
    ("type_text", "numbers", "words"),
    [
        ("idx[3][]", "0 1 5 2", "number 2, `5`, is outside `idx[3]` (0 to 2)"),
        ("idx[3][]", "0 -1", "number 1, `-1`, is outside `idx[3]` (0 to 2)"),
        ("idx[100][]", "1 99999999999999999999", "is outside `idx[100]`"),
        ("ℝ[]", "1e400 2", "number 0, `1e400`, is not a finite double"),
        ("bool[]", "0 1 2 1", "number 2, `2`, is outside bool (0 or 1)"),
        ("ℝ[]", "1 x", "number 1, `x`, is not a real"),
        ("idx[3]", "0 1", "(a scalar index is `idx[3][]`: an index type takes its shape)"),
    ],
)
def test_pack_refuses_numbers_the_type_cannot_hold(tmp_path, type_text, numbers, words):
    (tmp_path / "t.txt").write_text(numbers + "\n")
    r = presk("data", "pack", "--type", type_text, "t.txt", "-o", "o.psk.d", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("[E7007] Error: ") and words in r.stderr
    assert not (tmp_path / "o.psk.d").exists()


def test_lm_windows_refuses_what_overflows_an_index(tmp_path):
    (tmp_path / "t.txt").write_text("1 2 3 99999999999999999999\n")
    r = presk("data", "lm-windows", "--vocab", 10, "--seq", 1, "t.txt", "-o", "w", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("[E7009] Error: ")
    assert "token 3 is 99999999999999999999, above any vocabulary" in r.stderr
    r = presk("data", "lm-windows", "--vocab", 2**70, "--seq", 1, "t.txt", "-o", "w", cwd=tmp_path)
    assert r.returncode == 2 and "--vocab" in r.stderr
