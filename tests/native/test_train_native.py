"""`presk train --backend native` against the interpreter's run: the tutorial's step 11
(`tutorial/07_train.psk --steps 100 --log-every 20`), its log equal at the six digits
printed in f64, and in f32 within one unit of the last digit printed; the launch and time
lines of the specification; checkpoints as the interpreter writes them."""

import re
from pathlib import Path

import numpy as np
import pytest
from helpers import presk_ok
from presk_core.data import read_header, read_reals

ROOT = Path(__file__).resolve().parents[2]
RUN = ("train", "tutorial/07_train.psk", "--steps", "100", "--log-every", "20")
NUMBER = re.compile(r"-?\d+\.\d+(?:e-?\d+)?")


def presk(*args: str):
    return presk_ok(*args, quiet=True)


@pytest.fixture(scope="module")
def interp(tmp_path_factory):
    folder = tmp_path_factory.mktemp("interp")
    return presk(*RUN, "--ckpt", str(folder)).stdout.splitlines(), folder


def native(tmp_path, *more: str):
    return presk(*RUN, "--ckpt", str(tmp_path), "--backend", "native", *more).stdout.splitlines()


def log(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("step ")]


def test_the_log_is_the_interpreters_at_six_digits(compiler, interp, tmp_path):
    lines, folder = interp
    got = native(tmp_path)
    assert len(log(got)) == 5 and log(got) == log(lines)
    assert got[-1] == lines[-1].replace(str(folder), str(tmp_path))
    assert re.fullmatch(
        r"presk train: (\d+) kernel launches a step, (\d+) without fusion \((\d+)% removed\)",
        got[-3],
    )
    n, m, p = map(int, re.findall(r"\d+", got[-3]))
    assert n < m and p == round(100 * (m - n) / m)
    assert re.fullmatch(
        r"presk train: [0-9.e-]+ ms a step, median of 99 \(the first excluded\)", got[-2]
    )


def test_the_checkpoints_are_the_interpreters(compiler, interp, tmp_path):
    _, folder = interp
    native(tmp_path)
    for name in ("step_50.psk.d", "final.psk.d"):
        a, b = tmp_path / name, folder / name
        assert read_header(str(a)).type_text == read_header(str(b)).type_text == "params Tower"
        x, y = read_reals(str(a)), read_reals(str(b))
        assert x.shape == y.shape and np.allclose(x, y, rtol=1e-12, atol=1e-14)


def test_f32_prints_the_same_digits_within_one_unit(compiler, interp, tmp_path):
    want = log(interp[0])
    got = log(native(tmp_path, "--realize", "f32", "--threads", "2"))
    same = 0
    for a, b in zip(got, want, strict=True):
        xs, ys = NUMBER.findall(a), NUMBER.findall(b)
        assert NUMBER.sub("#", a) == NUMBER.sub("#", b) and len(xs) == len(ys)
        for x, y in zip(xs, ys, strict=True):
            last = 10.0 ** -len(x.split("e")[0].split(".")[1])
            scale = 10.0 ** int(x.split("e")[1]) if "e" in x else 1.0
            assert abs(float(x) - float(y)) <= 1.01 * last * scale
        same += a == b
    assert same >= 4  # the lines differ only where a value lies near a rounding boundary


def test_a_tiny_minigpt_step_is_the_interpreters(compiler, tmp_path):
    # an embedding's gradient scattered over 16 rows of a 64-row table with 16 columns: the
    # rows and the columns must not be confused (two steps: the interpreter takes seconds)
    args = (
        "train", "tests/examples/minigpt/train_minigpt.psk", "--const", "V=64", "--const",
        "D=16", "--const", "H=2", "--const", "L=2", "--data",
        "tests/examples/minigpt/data/tiny_T8.psk.d", "--steps", "2", "--log-every", "1",
    )  # fmt: skip
    interp = presk(*args, "--ckpt", str(tmp_path / "i")).stdout.splitlines()
    native = presk(*args, "--ckpt", str(tmp_path / "n"), "--backend", "native")
    assert log(native.stdout.splitlines()) == log(interp) and len(log(interp)) == 2
    x = read_reals(str(tmp_path / "n" / "final.psk.d"))
    y = read_reals(str(tmp_path / "i" / "final.psk.d"))
    assert np.allclose(x, y, rtol=1e-12, atol=1e-15)


def test_the_kernel_interpreter_trains_as_the_native_code(compiler, tmp_path):
    short = ("train", "tutorial/07_train.psk", "--steps", "20", "--log-every", "10")
    kernel = presk(*short, "--ckpt", str(tmp_path / "k"), "--backend", "kernel")
    native = presk(*short, "--ckpt", str(tmp_path / "n"), "--backend", "native")
    assert log(kernel.stdout.splitlines()) == log(native.stdout.splitlines())
    x = read_reals(str(tmp_path / "k" / "final.psk.d"))
    assert x.tobytes() == read_reals(str(tmp_path / "n" / "final.psk.d")).tobytes()
