"""`presk data chars|encode|lm-windows`: a text to windows of tokens (docs/data.md), their
messages, every error a diagnostic with nothing written, and the French civil code of
../shared/data when it is there."""

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import presk
from presk_core import data as D
from presk_types.elab import type_from_text

ROOT = Path(__file__).resolve().parents[2]
CIVIL = ROOT.parent / "shared" / "data" / "civil.md"
TEXT = "Été à Noël,\nun œuf.\n"  # 20 characters (16 distinct), 25 bytes


def test_a_text_to_windows(tmp_path):
    (tmp_path / "t.md").write_text(TEXT, encoding="utf-8")
    r = presk("data", "chars", "t.md", "-o", "v.json", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == "presk data: wrote v.json (16 characters over 20 of text)\n"
    vocab = json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))
    assert vocab == sorted(set(TEXT)) and "é" in vocab and "œ" in vocab

    r = presk("data", "encode", "t.md", "--vocab", "v.json", "-o", "t.txt", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == "presk data: wrote t.txt (20 tokens over a vocabulary of 16)\n"
    tokens = [int(w) for w in (tmp_path / "t.txt").read_text().split()]
    assert "".join(vocab[t] for t in tokens) == TEXT

    r = presk(
        "data", "lm-windows", "--vocab", 16, "--seq", 6, "t.txt", "-o", "w.psk.d", cwd=tmp_path
    )
    assert (r.returncode, r.stderr) == (0, "")
    t = "(idx[16][seq: 6], idx[16][seq: 6])"
    assert r.stdout == f"presk data: wrote w.psk.d (3 windows of type {t} from 20 tokens)\n"
    samples = D.read(str(tmp_path / "w.psk.d"), type_from_text(t))
    assert [x.tolist() for x, _ in samples] == [tokens[0:6], tokens[6:12], tokens[12:18]]
    assert [y.tolist() for _, y in samples] == [tokens[1:7], tokens[7:13], tokens[13:19]]
    info = presk("data", "info", "w.psk.d", "--limit", 0, cwd=tmp_path)
    assert info.stdout.splitlines()[:2] == [f"type    {t}", "count   3"]


def test_one_window_and_one_character(tmp_path):
    (tmp_path / "t.md").write_text("aaa")
    r = presk("data", "chars", "t.md", "-o", "v.json", cwd=tmp_path)
    assert r.stdout == "presk data: wrote v.json (1 character over 3 of text)\n"
    presk("data", "encode", "t.md", "--vocab", "v.json", "-o", "t.txt", cwd=tmp_path)
    r = presk(
        "data", "lm-windows", "--vocab", 1, "--seq", 2, "t.txt", "-o", "w.psk.d", cwd=tmp_path
    )
    t = "(idx[1][seq: 2], idx[1][seq: 2])"
    assert r.stdout == f"presk data: wrote w.psk.d (1 window of type {t} from 3 tokens)\n"


def _setup(tmp_path):
    (tmp_path / "t.md").write_text(TEXT, encoding="utf-8")
    (tmp_path / "latin1.md").write_bytes("a\nété".encode("latin-1"))
    (tmp_path / "v.json").write_text(json.dumps(sorted(set(TEXT))))
    (tmp_path / "ascii.json").write_text(json.dumps(sorted(set("Ete a Noel,\nun uf."))))
    (tmp_path / "bad.json").write_text('["a", "b"')
    (tmp_path / "long.json").write_text('["a", "bc"]')
    (tmp_path / "t.txt").write_text("0 1 2 3 4 5 6 7 8 9\n")
    (tmp_path / "word.txt").write_text("0 1 two 3\n")


ERRORS = [
    (
        ("chars", "nowhere.md", "-o", "out"),
        "[E7004] Error: cannot read `nowhere.md`: no such file or directory",
    ),
    (
        ("chars", "latin1.md", "-o", "out"),
        "[E7004] Error: `latin1.md` is not UTF-8 text: byte 0xe9 at offset 2 (line 2)",
    ),
    (
        ("encode", "t.md", "--vocab", "nowhere.json", "-o", "out"),
        "[E7004] Error: cannot read `nowhere.json`: no such file or directory",
    ),
    (
        ("encode", "t.md", "--vocab", "ascii.json", "-o", "out"),
        "[E7009] Error: `t.md` line 1, column 1: `É` (U+00C9) is not in the vocabulary of"
        " `ascii.json` (5 characters of the text are not in it: `É` (U+00C9), `à` (U+00E0),"
        " `é` (U+00E9), `ë` (U+00EB), `œ` (U+0153))",
    ),
    (
        ("encode", "t.md", "--vocab", "bad.json", "-o", "out"),
        "[E7009] Error: `bad.json` is not JSON: expecting ',' delimiter at line 1, column 10",
    ),
    (
        ("encode", "t.md", "--vocab", "long.json", "-o", "out"),
        '[E7009] Error: `long.json`: entry 1 is "bc", not one character',
    ),
    (
        ("lm-windows", "--vocab", 10, "--seq", 10, "t.txt", "-o", "out"),
        "[E7009] Error: `t.txt` holds 10 tokens: a window of 10 needs 11 (the window and the"
        " token after it)",
    ),
    (
        ("lm-windows", "--vocab", 8, "--seq", 2, "t.txt", "-o", "out"),
        "[E7009] Error: `t.txt`: token 8 is 8, not below the vocabulary's size 8 (2 such tokens)",
    ),
    (
        ("lm-windows", "--vocab", 10, "--seq", 2, "word.txt", "-o", "out"),
        "[E7009] Error: `word.txt`: token 2 is `two`, not a natural number",
    ),
    (
        ("lm-windows", "--vocab", 10, "--seq", 2, "nowhere.txt", "-o", "out"),
        "[E7004] Error: cannot read `nowhere.txt`: no such file or directory",
    ),
]


@pytest.mark.parametrize(("args", "message"), ERRORS, ids=lambda v: "-".join(map(str, v[:3])))
def test_each_error_is_a_diagnostic_and_writes_nothing(tmp_path, args, message):
    _setup(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    r = presk("data", *args, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.splitlines()[0] == message
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no output, no temporary


def test_a_window_as_long_as_the_tokens_less_one_is_the_last_that_fits(tmp_path):
    _setup(tmp_path)
    r = presk(
        "data", "lm-windows", "--vocab", 10, "--seq", 9, "t.txt", "-o", "w.psk.d", cwd=tmp_path
    )
    assert r.returncode == 0 and "(1 window of type" in r.stdout


def test_bad_flags_are_usage_errors(tmp_path):
    _setup(tmp_path)
    for args in (
        ("lm-windows", "--vocab", 0, "--seq", 2, "t.txt", "-o", "out"),
        ("lm-windows", "--vocab", 10, "--seq", 0, "t.txt", "-o", "out"),
        ("lm-windows", "--vocab", "v.json", "--seq", 2, "t.txt", "-o", "out"),
        ("encode", "t.md", "-o", "out"),
        ("chars", "t.md"),
    ):
        assert presk("data", *args, cwd=tmp_path).returncode == 2
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not CIVIL.exists(), reason=f"{CIVIL} is absent (../shared/data)")
def test_the_civil_code(tmp_path):
    """The specification's step 13 on the civil code of ../shared/data. Its numbers are
    not the specification's (92 characters, 1182121, 4617 windows): this transcription
    (2015, 2802 articles; ../shared/data/README.md) has 86 distinct characters and
    1084227 of them, hence ⌊1084226 / 256⌋ = 4235 windows."""
    vocab, tokens, out = (
        tmp_path / "civil_vocab.json",
        tmp_path / "civil_tokens.txt",
        tmp_path / "civil_T256.psk.d",
    )
    lines = []
    for args in (
        ("chars", CIVIL, "-o", vocab),
        ("encode", CIVIL, "--vocab", vocab, "-o", tokens),
        ("lm-windows", "--vocab", 86, "--seq", 256, tokens, "-o", out),
    ):
        r = presk("data", *args)
        assert (r.returncode, r.stderr) == (0, "")
        lines.append(r.stdout)
    t = "(idx[86][seq: 256], idx[86][seq: 256])"
    assert lines == [
        f"presk data: wrote {vocab} (86 characters over 1084227 of text)\n",
        f"presk data: wrote {tokens} (1084227 tokens over a vocabulary of 86)\n",
        f"presk data: wrote {out} (4235 windows of type {t} from 1084227 tokens)\n",
    ]
    chars = json.loads(vocab.read_text(encoding="utf-8"))
    assert chars == sorted(chars) and "é" in chars and "œ" in chars
    header = D.read_header(str(out))
    assert (header.type_text, header.count, header.sample_size) == (t, 4235, 2 * 256 * 8)
    stream = np.array(tokens.read_text().split(), dtype=np.int64)
    text = CIVIL.read_text(encoding="utf-8")
    assert "".join(chars[i] for i in stream[:1000]) == text[:1000]
    last = D.read(str(out), type_from_text(t))[-1]
    assert last[1].tolist() == stream[4234 * 256 + 1 : 4235 * 256 + 1].tolist()
