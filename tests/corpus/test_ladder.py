"""The NLP ladder of corpus/nlp/ (docs/corpus.md) on a slice of the civil code made in a
temporary folder: `presk data ngrams` (outputs and diagnostics), 01's loss the same ten digits
on the interpreter, natively and in NumPy, 02's losses closing on it from above, 03 and 04
checked and lowering the loss of a batch in a few steps. Skipped where ../shared/data/civil.md
is absent, except the data subcommand's tests (a synthetic token file)."""

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import presk
from presk_core import data as D
from presk_types.elab import type_from_text

ROOT = Path(__file__).resolve().parents[2]
CIVIL = ROOT.parent / "shared" / "data" / "civil.md"
NLP = ROOT / "corpus" / "nlp"
PAIRS = 10_000  # 02's batch: the test's pairs are one batch, as the corpus's are
STEP = re.compile(r"^step (\d+)\s+epoch \d+\s+loss (\S+)", re.M)


def ok(*args, cwd=ROOT) -> str:
    r = presk(*args, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout


# -- presk data ngrams ----------------------------------------------------------------------

TOKENS = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]


def test_ngrams_pairs(tmp_path):
    (tmp_path / "t.txt").write_text(" ".join(map(str, TOKENS)) + "\n")
    out = ok(
        "data", "ngrams", "--vocab", 10, "--context", 1, "t.txt", "-o", "p.psk.d", cwd=tmp_path
    )
    t = "(idx[10][], idx[10][])"
    assert out == f"presk data: wrote p.psk.d (9 pairs of type {t} from 10 tokens)\n"
    samples = D.read(str(tmp_path / "p.psk.d"), type_from_text(t))
    assert [(int(x), int(y)) for x, y in samples] == list(zip(TOKENS, TOKENS[1:], strict=False))
    assert samples[0][0].shape == ()


def test_ngrams_contexts_and_limit(tmp_path):
    (tmp_path / "t.txt").write_text("\n".join(map(str, TOKENS)))
    args = ("data", "ngrams", "--vocab", 10, "--context", 3, "t.txt", "-o", "c.psk.d")
    out = ok(*args, cwd=tmp_path)
    t = "(idx[10][ctx: 3], idx[10][])"
    assert out == f"presk data: wrote c.psk.d (7 contexts of 3 of type {t} from 10 tokens)\n"
    samples = D.read(str(tmp_path / "c.psk.d"), type_from_text(t))
    assert [x.tolist() for x, _ in samples] == [TOKENS[i : i + 3] for i in range(7)]
    assert [int(y) for _, y in samples] == TOKENS[3:]
    out = ok(*args, "--limit", 2, cwd=tmp_path)
    assert out.startswith("presk data: wrote c.psk.d (2 contexts of 3 of type")
    assert len(D.read(str(tmp_path / "c.psk.d"), type_from_text(t))) == 2
    out = ok(*args[:5], 9, *args[6:], cwd=tmp_path)  # a context of 9: one sample
    assert "(1 context of 9 of type" in out


@pytest.mark.parametrize(
    ("tokens", "options", "code", "message"),
    [
        ("1 2 12 3", ("--vocab", 10, "--context", 1), "E7009", "token 2 is 12, not below"),
        ("1 2 x", ("--vocab", 10, "--context", 1), "E7009", "token 2 is `x`, not a natural"),
        ("1 2 3", ("--vocab", 10, "--context", 3), "E7009", "a context of 3 and its target"),
        (None, ("--vocab", 10, "--context", 1), "E7004", "cannot read"),
    ],
)
def test_ngrams_diagnostics(tmp_path, tokens, options, code, message):
    if tokens is not None:
        (tmp_path / "t.txt").write_text(tokens)
    r = presk("data", "ngrams", *options, "t.txt", "-o", "o.psk.d", cwd=tmp_path)
    assert r.returncode == 1 and f"[{code}]" in r.stderr and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "o.psk.d").exists()


@pytest.mark.parametrize("option", [("--context", 0), ("--limit", 0), ("--vocab", 0)])
def test_ngrams_usage(tmp_path, option):
    (tmp_path / "t.txt").write_text("1 2 3")
    args = {"--vocab": 10, "--context": 1, **dict([option])}
    flat = [w for k, v in args.items() for w in (k, v)]
    r = presk("data", "ngrams", *flat, "t.txt", "-o", "o.psk.d", cwd=tmp_path)
    assert r.returncode == 2 and option[0] in r.stderr
    assert not (tmp_path / "o.psk.d").exists()


# -- the rungs on a slice of the civil code -------------------------------------------------


@pytest.fixture(scope="module")
def civil(tmp_path_factory):
    """A folder holding the first 10,001 characters of the civil code, their vocabulary and
    tokens, with the vocabulary's size V (the rungs are run with --const V=…)."""
    if not CIVIL.exists():
        pytest.skip(f"{CIVIL} is absent")
    d = tmp_path_factory.mktemp("ladder")
    (d / "slice.md").write_text(CIVIL.read_text(encoding="utf-8")[: PAIRS + 1], encoding="utf-8")
    ok("data", "chars", "slice.md", "-o", "vocab.json", cwd=d)
    ok("data", "encode", "slice.md", "--vocab", "vocab.json", "-o", "tokens.txt", cwd=d)
    tokens = np.array((d / "tokens.txt").read_text().split(), dtype=np.int64)
    v = len(json.loads((d / "vocab.json").read_text(encoding="utf-8")))
    return d, v, tokens


def bigram_loss(x: np.ndarray, y: np.ndarray, v: int) -> float:
    """01 in NumPy: counts, rows normalised, the negative mean log-probability of each pair."""
    c = np.zeros((v, v))
    np.add.at(c, (x, y), 1.0)
    p = c / np.maximum(c.sum(axis=1, keepdims=True), 1.0)
    return -math.fsum(np.log(p[x, y])) / len(x)


def rung_in(folder: Path, name: str) -> Path:
    """A copy of a rung beside the test's data/ (a run reads its data relative to its file)."""
    shutil.copy(NLP / name, folder / name)
    return folder / name


def losses(stdout: str) -> list[float]:
    return [float(m[2]) for m in STEP.finditer(stdout)]


def test_bigram_count_three_ways(civil):
    d, v, tokens = civil
    ok("data", "ngrams", "--vocab", v, "--context", 1, "--limit", 2000, "tokens.txt", "-o",
       "pairs.psk.d", cwd=d)  # fmt: skip
    f = NLP / "01_bigram_count.psk"
    summary = ok("check", f, "--summary", "--const", f"V={v}")
    assert summary.split("-- regularity")[0].splitlines() == [
        f"01_bigram_count.psk counts : ℝ[prev: {v}, next: {v}]",
        f"01_bigram_count.psk probs : ℝ[prev: {v}, next: {v}]",
        f"    let c : ℝ[prev: {v}, next: {v}]",
        "01_bigram_count.psk loss : ℝ[]",
        f"    let x : idx[{v}][batch: N]",
        f"    let y : idx[{v}][batch: N]",
        f"    let p : ℝ[prev: {v}, next: {v}]",
    ]
    run = ("run", f, "--entry", "loss", "--data", d / "pairs.psk.d", "--digits", 10)
    interp = ok(*run, "--const", f"V={v}")
    native = ok(*run, "--const", f"V={v}", "--backend", "native")
    expected = bigram_loss(tokens[:2000], tokens[1:2001], v)
    assert interp == native == f"ℝ[] = {expected:.10g}\n"
    assert 1.0 < expected < math.log(v)


def test_bigram_neural_closes_from_above(civil):
    d, v, tokens = civil
    ok("data", "ngrams", "--vocab", v, "--context", 1, "tokens.txt", "-o", "pairs.psk.d", cwd=d)
    closed = bigram_loss(tokens[:-1], tokens[1:], v)  # 01's loss on the same 10,000 pairs
    f = NLP / "02_bigram_neural.psk"
    out = ok("train", f, "--const", f"V={v}", "--data", d / "pairs.psk.d", "--steps", 40,
             "--log-every", 1, "--ckpt", d / "ckpt02", "--backend", "native")  # fmt: skip
    seen = losses(out)
    assert len(seen) == 40
    assert abs(seen[0] - math.log(v)) < 1e-6  # the table starts at zero: every next as likely
    assert all(loss > closed for loss in seen)  # from above: the closed form is the least
    assert seen[-1] < seen[0] - 1.0 and seen[-1] - closed < 0.5 * (seen[0] - closed)


@pytest.mark.parametrize(
    ("name", "data", "make"),
    [
        ("03_mlp.psk", "context3.psk.d", ("ngrams", "--context", 3, "--limit", 256)),
        ("04_attention.psk", "civil_T32.psk.d", ("lm-windows", "--seq", 32)),
    ],
)
def test_rung_checks_and_learns(civil, tmp_path, name, data, make):
    """The rung checks beside data of its type, and eight steps on one batch (the file holds
    exactly one) lower that batch's loss."""
    d, v, tokens = civil
    (tmp_path / "tokens.txt").write_text(" ".join(map(str, tokens[: 32 * 32 + 1])))
    (tmp_path / "data").mkdir()
    ok("data", *make, "--vocab", v, "tokens.txt", "-o", f"data/{data}", cwd=tmp_path)
    f = rung_in(tmp_path, name)
    ok("check", f, "--const", f"V={v}")
    out = ok("train", f, "--const", f"V={v}", "--steps", 8, "--log-every", 1, "--backend",
             "native", "--realize", "f32")  # fmt: skip
    seen = losses(out)
    assert len(seen) == 8 and seen[-1] < seen[0] < 1.2 * math.log(v)


def test_rung_without_its_data_is_e1011(tmp_path):
    f = rung_in(tmp_path, "03_mlp.psk")
    r = presk("check", f)
    assert r.returncode == 1 and "[E1011]" in r.stderr and "context3.psk.d" in r.stderr
