"""`presk serve` on weights, flags and files a new user or a fuzzer reaches (issue 27): the
weights checked leaf by leaf against the program at the constants given and against its
bounds, the temperature's domain, a vocabulary nested too deeply, a closed standard output,
the prompt from a file or standard input."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import presk

ROOT = Path(__file__).resolve().parents[2]
PRESK = ROOT / ".venv" / "bin" / "presk"
MINIGPT = "tests/examples/minigpt/minigpt.psk"
TINY = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")


def serve(weights, *args, consts=TINY, **kw) -> subprocess.CompletedProcess:
    return presk("serve", MINIGPT, *consts, "--weights", weights, "--backend", "kernel", *args,
                 **kw)  # fmt: skip


def test_the_checkpoint_records_its_leaves(ckpt):
    from presk_core.data import read_header

    layout = read_header(str(ckpt)).layout
    assert layout is not None and ("pos", (8, 16)) in layout


def test_weights_of_another_width_are_refused_naming_the_leaf(ckpt):
    r = serve(ckpt, "--prompt", "a", consts=("--const", "V=64", "--const", "D=8",
                                              "--const", "H=2", "--const", "L=2"))  # fmt: skip
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert r.stderr.startswith("[E7021] Error:")
    assert "`tokens.table` is ℝ[64, 16] in the weights, and ℝ[64, 8] in the program's" in r.stderr


def _padded(ckpt, tmp_path, rows: int) -> Path:
    """The weights with a position table of `rows` rows, the layout saying so."""
    from presk_core.data import read_header, read_reals, write_tree

    layout, reals, at, arrays = read_header(str(ckpt)).layout, read_reals(str(ckpt)), 0, []
    for path, shape in layout:
        n = int(np.prod(shape))
        x = reals[at : at + n].reshape(shape)
        at += n
        if path == "pos":
            x = np.resize(x, (rows, shape[1]))
        arrays.append(x)
    out = tmp_path / f"T{rows}.psk.d"
    write_tree(str(out), "params MiniGPT", arrays, [p for p, _ in layout])
    return out


def test_weights_beyond_a_dim_bound_are_refused(ckpt, tmp_path):
    r = serve(_padded(ckpt, tmp_path, 4096), "--prompt", "a")
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert r.stderr.startswith("[E7021]") and "`T <= 1024` is false for T = 4096" in r.stderr
    ok = serve(_padded(ckpt, tmp_path, 12), "--prompt", "a", "--tokens", 1)
    assert ok.returncode == 0 and "window 12" in ok.stderr, ok.stderr


def test_weights_without_a_layout_beyond_the_bound_are_refused(ckpt, tmp_path):
    from presk_core.data import read_reals, write_tree

    padded = _padded(ckpt, tmp_path, 4096)
    bare = tmp_path / "bare.psk.d"  # as presk wrote them before it recorded the leaves
    write_tree(str(bare), "params MiniGPT", [read_reals(str(padded))])
    r = serve(bare, "--prompt", "a")
    assert r.returncode == 1 and "`T <= 1024` is false for T = 4096" in r.stderr, r.stderr


def test_weights_whose_leaves_are_others(ckpt, tmp_path):
    from presk_core.data import read_header, read_reals, write_tree

    layout = read_header(str(ckpt)).layout
    out = tmp_path / "renamed.psk.d"
    paths = [p if p != "pos" else "pos.rows" for p, _ in layout]
    sizes = np.cumsum([int(np.prod(s)) for _, s in layout])[:-1]
    write_tree(str(out), "params MiniGPT", np.split(read_reals(str(ckpt)), sizes), paths)
    r = serve(out, "--prompt", "a")
    assert r.returncode == 1 and "a leaf `pos.rows` that `params MiniGPT` does not have" in r.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "5e-324", "1e-310", "-0.5"])
def test_a_temperature_outside_its_domain_is_a_usage_error(ckpt, value):
    r = serve(ckpt, "--prompt", "a", "--temperature", value)
    assert r.returncode == 2 and "Invalid value for '--temperature'" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "flag, value",
    [("--tokens", str(2**1000)), ("--tokens", "1000001"), ("--dim", "V=" + "9" * 5000)],
)
def test_a_count_out_of_its_range_is_a_usage_error(ckpt, flag, value):
    """Counts beyond their bound (found by fuzz --surface values: `--tokens 2^1000` ran for
    ever, 5000 digits of a dimension were an internal error past int()'s limit)."""
    r = serve(ckpt, "--prompt", "a", flag, value)
    assert r.returncode == 2 and "Invalid value for" in r.stderr and flag in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_a_tiny_temperature_samples_the_argmax():
    from presk_cli.serve import generate

    row = np.array([1.0, 3.0, 2.0, 3.0 - 2**-51])
    for t in (2.2250738585072014e-308, 1e-300, 1e-307):  # each quotient overflows
        got = generate(lambda ids: np.array([row]), [0], 1, 3, t, 0, lambda k: None)
        assert got == [1, 1, 1], t


def test_a_vocabulary_nested_too_deeply_is_E7009(ckpt, tmp_path):
    program = tmp_path / "m.psk"
    text = (ROOT / MINIGPT).read_text(encoding="utf-8")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tiny_vocab.json").write_text("[" * 100_000 + "]" * 100_000)
    program.write_text(text, encoding="utf-8")
    r = presk("serve", program, *TINY, "--weights", ckpt, "--prompt", "a")
    assert r.returncode == 1 and r.stderr.startswith("[E7009]"), r.stderr
    assert "nest" in r.stderr


def test_a_closed_standard_output_exits_141_quietly(ckpt):
    read, write = os.pipe()
    os.close(read)
    for args in (
        ("serve", MINIGPT, *TINY, "--weights", ckpt, "--backend", "kernel", "--prompt", "ab",
         "--tokens", 3),
        ("run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=2"),
    ):  # fmt: skip
        p = subprocess.run([str(PRESK), *map(str, args)], cwd=ROOT, stdout=write,
                           stderr=subprocess.PIPE, text=True, timeout=300)  # fmt: skip
        assert p.returncode == 141, (args[0], p.returncode, p.stderr)
        assert p.stderr == "", p.stderr
    os.close(write)


def test_the_prompt_from_a_file_or_standard_input(ckpt, tmp_path):
    want = serve(ckpt, "--prompt", "abc", "--tokens", 3)
    assert want.returncode == 0, want.stderr
    (tmp_path / "p.txt").write_text("abc\n")  # one line end at the end is not the prompt's
    from_file = serve(ckpt, "--prompt-file", tmp_path / "p.txt", "--tokens", 3)
    from_stdin = serve(ckpt, "--prompt-file", "-", "--tokens", 3, input="abc")
    assert from_file.stdout == want.stdout and from_stdin.stdout == want.stdout
    long = "abcd" * 50_000  # 200,000 characters: beyond what argv takes
    (tmp_path / "long.txt").write_text(long)
    r = serve(ckpt, "--prompt-file", tmp_path / "long.txt", "--tokens", 1)
    assert r.returncode == 0 and r.stdout.startswith(long), r.stderr[-300:]
    both = serve(ckpt, "--prompt", "a", "--prompt-file", tmp_path / "p.txt")
    assert both.returncode == 2 and "--prompt" in both.stderr
    r = serve(ckpt, "--prompt-file", tmp_path / "none.txt")
    assert r.returncode == 1 and r.stderr.startswith("[E7004]"), r.stderr
    (tmp_path / "bad.txt").write_bytes(b"ab\xffc")
    r = serve(ckpt, "--prompt-file", tmp_path / "bad.txt")
    assert r.returncode == 1 and r.stderr.startswith("[E7004]") and "UTF-8" in r.stderr
