"""`.psk.d` files through `presk data` and `presk run --data`: the round trip, the header a
C reader relies on, and every kind of bad file getting its diagnostic with nothing written."""

import struct
from pathlib import Path

import numpy as np
import pytest
from helpers import presk
from presk_core import data as D
from presk_types.elab import type_from_text

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "tutorial" / "data" / "pairs.psk.d"
TYPE = "(ℝ[model: 4], ℝ[model: 4])"


def test_pack_then_read_gives_the_numbers_back(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("1 2 3 4 5 6 7 8\n-0.5 0.25 1e-3 7 0 0 0 1.5\n")
    r = presk("data", "pack", "--type", TYPE, text, "-o", tmp_path / "t.psk.d")
    assert r.returncode == 0 and r.stdout == (
        f"presk data: wrote {tmp_path / 't.psk.d'} (2 samples of type {TYPE})\n"
    )
    samples = D.read(str(tmp_path / "t.psk.d"), type_from_text(TYPE))
    assert samples[1][0].tolist() == [-0.5, 0.25, 1e-3, 7.0] and samples[1][1].tolist()[-1] == 1.5


def test_the_header_is_what_a_c_reader_reads():
    raw = PAIRS.read_bytes()
    magic, version, header, count, size, tlen = struct.unpack_from("<4sIIQQI", raw)
    assert (magic, version, count, size) == (b"PSKD", 1, 128, 64)
    assert raw[32 : 32 + tlen].decode() == TYPE and header % 8 == 0
    assert len(raw) == header + count * size
    x0 = struct.unpack_from("<4d", raw, header)
    assert x0 == (-0.6097, 0.0468, 0.6466, 0.6771)


def test_info_and_diff():
    r = presk("data", "info", PAIRS, "--limit", "1")
    assert r.stdout.splitlines()[:5] == [
        f"type    {TYPE}",
        "count   128",
        "version 1",
        "sample  64 bytes, 2 leaves",
        "[0] ([-0.6097, 0.0468, 0.6466, 0.6771], [-0.2194, 1.0936, 2.2932, 2.3542])",
    ]
    d = presk("data", "diff", PAIRS, PAIRS)
    assert d.stdout.startswith("presk data: ‖a − b‖₂ 0.000000e0   ‖a‖₂ ")
    assert d.stdout.endswith("   over 1024 reals\n")


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda p: p.write_bytes(PAIRS.read_bytes()[:100]), "E7005"),
        (lambda p: p.write_bytes(b"not a data file at all, not at all, no"), "E7004"),
        (
            lambda p: p.write_bytes(
                PAIRS.read_bytes()[:4] + struct.pack("<I", 2) + PAIRS.read_bytes()[8:]
            ),
            "E7006",
        ),
    ],
)
def test_bad_files_get_their_code(tmp_path, make, code):
    bad = tmp_path / "bad.psk.d"
    make(bad)
    r = presk("data", "info", bad)
    assert r.returncode == 1 and r.stderr.startswith(f"[{code}] Error: ")


def test_a_missing_file_and_a_bad_type_write_nothing(tmp_path):
    out = tmp_path / "out.psk.d"
    assert presk("data", "info", tmp_path / "nowhere.psk.d").stderr.startswith("[E7004]")
    r = presk("data", "pack", "--type", "ℝ[3", ROOT / "tutorial" / "data" / "pairs.txt", "-o", out)
    assert r.returncode == 1 and r.stderr.startswith("[E7007] Error: `ℝ[3` is not a type")
    r = presk("data", "pack", "--type", "ℝ[3]", ROOT / "tutorial" / "data" / "pairs.txt", "-o", out)
    assert r.returncode == 1 and "not a multiple of the 3" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    t = type_from_text("ℝ[2]")
    with pytest.raises(ValueError):
        D.write(str(tmp_path / "x.psk.d"), "ℝ[2]", t, [[np.array([1.0, 2.0, 3.0])]])
    assert list(tmp_path.iterdir()) == []


def test_run_data_fills_the_batch():
    r = presk("run", "tutorial/07_train.psk", "--entry", "loss", "--data", PAIRS, "--json")
    assert r.returncode == 0, r.stderr
    import json

    doc = json.loads(r.stdout)
    x, y = (np.array(v, dtype=object).astype(float) for v in doc["inputs"]["batch"])
    assert x.shape == (128, 4) and np.allclose(y, 2 * x + 1)
    assert doc["dims"]["B"] == 128


def test_a_training_run_with_data_of_another_type_is_refused(tmp_path):
    for f in ("01_linear.psk", "02_norm.psk", "06_tower.psk", "07_train.psk"):
        (tmp_path / f).write_text((ROOT / "tutorial" / f).read_text())
    (tmp_path / "data").mkdir()
    t = type_from_text("ℝ[model: 3]")
    D.write(str(tmp_path / "data" / "pairs.psk.d"), "ℝ[model: 3]", t, [[np.zeros(3)]])
    r = presk("check", "07_train.psk", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith(
        "[E1011] Error: training run: `data/pairs.psk.d`"
    )


def test_a_batch_taken_from_the_columns_is_the_stacked_samples(tmp_path):
    """presk_core.run.take_samples (a training step's batch) against stack_samples, a batch
    axis in the middle of a tensor's axes and a scalar index, indices repeated."""
    from presk_core.run import stack_samples, take_samples

    rng = np.random.default_rng(5)
    sample = "(ℝ[model: 3, k: 2], idx[5][])"
    rows = [[rng.standard_normal((3, 2)), np.array(rng.integers(5))] for _ in range(9)]
    path = str(tmp_path / "s.psk.d")
    D.write(path, sample, type_from_text(sample), rows)
    columns = D.read_columns(path, type_from_text(sample))
    batch = type_from_text("(ℝ[model: 3, batch: 4, k: 2], idx[5][batch: 4])")
    indices = [7, 0, 7, 3]
    taken = take_samples(batch, columns, indices)
    stacked = stack_samples(batch, [D.samples(columns)[i] for i in indices])
    assert taken[0].shape == (3, 4, 2) and taken[0].flags.c_contiguous
    for a, b in zip(taken, stacked, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert np.array_equal(taken[0][:, 1], rows[0][0]) and taken[1][0] == rows[7][1]
    alone = type_from_text("ℝ[model: 3, batch: 4, k: 2]")  # a batch of one tensor: no tuple
    assert np.array_equal(take_samples(alone, columns[:1], indices), taken[0])
    none = take_samples(batch, columns, np.arange(0))  # a file of no sample: length 0
    assert [(x.shape, x.dtype) for x in none] == [((3, 0, 2), np.float64), ((0,), np.int64)]
