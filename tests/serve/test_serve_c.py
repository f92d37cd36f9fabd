"""`presk export --target c --serve` (L1261): the generation loop of `presk serve` as a C
program beside the tiny MiniGPT (conftest.py's checkpoint): `make check` holds (C1 and the
loop's tokens against presk serve's), and ./generate prints what `presk serve --backend
native` prints on another prompt, sampled with a seed; in f32, on two threads.
Bad input is coded and writes nothing. One export, one build (gcc)."""

import subprocess

import pytest
from helpers import presk, presk_ok

MINIGPT = "tests/examples/minigpt/minigpt.psk"
TINY = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")


@pytest.fixture(scope="module")
def exported(ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("serve") / "c"
    done = presk_ok("export", MINIGPT, "--target", "c", "--serve", *TINY, "--weights", ckpt,
                    "--realize", "f32", "--threads", 2, "-o", out)  # fmt: skip
    first, second = done.stdout.splitlines()
    assert first.startswith("presk export: `MiniGPT.apply` at B = 1, T = 8 in f32: ")
    assert second == (
        "presk export: the generation loop of `inference serve` (MiniGPT, window 8, 64 tokens,"
        f" 24 a run by default, greedy) into {out}/generate, with the weights beside it;"
        f" `{out}/generate PROMPT` prints what presk serve prints"
    )
    return out


def test_the_loop_prints_presk_serve_s_tokens(ckpt, exported):
    check = subprocess.run(["make", "-s", "-C", str(exported), "check", "CC=gcc"],
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.splitlines() == [
        "C1 holds: the outputs are the native backend's, bit for bit",
        "the generation loop prints presk serve's tokens, greedy and sampled (12 tokens,"
        " temperature 1, seed 0)",
    ]
    for flags in (("--temperature", "0.8", "--seed", "9"),):  # greedy: `make check`'s
        served = presk_ok("serve", MINIGPT, *TINY, "--weights", ckpt, "--prompt", "Presk serves ",
                          "--tokens", 20, "--backend", "native", "--realize", "f32", *flags)  # fmt: skip
        short = [{"--temperature": "-t", "--seed": "-s"}.get(f, f) for f in flags]
        run = subprocess.run([str(exported / "generate"), "-n", "20", *short, "Presk serves "],
                             capture_output=True, text=True)  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert run.stdout == served.stdout
        assert run.stderr.endswith(" tokens/s (C f32, temperature 0.8, seed 9, window 8)\n")
    bad = subprocess.run([str(exported / "generate"), "é"], capture_output=True, text=True)
    assert bad.returncode == 1 and "U+00E9 is not in the vocabulary" in bad.stderr


def test_bad_input_is_coded_and_writes_nothing(ckpt, tmp_path):
    usage = presk("export", MINIGPT, "--target", "c", "--serve", "--entry", "MiniGPT.apply",
                  *TINY, "-o", tmp_path / "a")  # fmt: skip
    assert usage.returncode == 2 and "no --entry" in usage.stderr
    none = presk("export", "tutorial/03_attention.psk", "--target", "c", "--serve", "-o",
                 tmp_path / "b")  # fmt: skip
    assert none.returncode == 1 and none.stderr.startswith("[E7020] Error: "), none.stderr
    assert list(tmp_path.iterdir()) == []
