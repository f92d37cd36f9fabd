"""`presk run` on inputs a new user or a fuzzer reaches (issue 27): each a result or a coded
diagnostic, never an internal error (exit 101)."""

from pathlib import Path

import pytest
from helpers import presk

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path / name


@pytest.mark.parametrize("value", ["²", "١", "٣", "𝟘", "1²", "①", " 2", "+2", "0x2", "2.0"])
def test_a_dim_is_ascii_digits_only(tmp_path, value):
    f = write(tmp_path, "t.psk", "dim A\nfn f(x : ℝ[a: A]) -> ℝ[a: A] = x\n")
    r = presk("run", f, "--entry", "f", "--dim", f"A={value}")
    if value == " 2":  # blanks around a value are trimmed, as for NAME
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "is not NAME=N" in r.stderr and "internal error" not in r.stderr


def test_a_module_argument_is_ascii_digits_only(tmp_path):
    f = write(tmp_path, "t.psk", "module M{N : dim} {\n  fn f(x : ℝ[a: N]) -> ℝ[a: N] = x\n}\n")
    for bad in ("²", "١"):
        r = presk("run", f, "--entry", f"M{{{bad}}}.f")
        assert r.returncode == 2 and "is not a natural number" in r.stderr, r.stderr
    assert presk("run", f, "--entry", "M{2}.f").returncode == 0


IDX0 = "dim B\nfn f(ids : idx[0][batch: B]) -> ℝ[] = 1.0\n"


@pytest.mark.parametrize("backend", ["interp", "kernel"])
def test_an_argument_of_idx_0_is_empty_or_refused(tmp_path, backend):
    f = write(tmp_path, "t.psk", IDX0)
    r = presk("run", f, "--entry", "f", "--dim", "B=2", "--backend", backend)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("[E7011] Error: cannot synthesize `ids` of type `idx[0][batch: 2]`")
    r = presk("run", f, "--entry", "f", "--dim", "B=0", "--backend", backend)
    assert r.returncode == 0 and r.stdout == "ℝ[] = 1\n", r.stderr


TRANSPOSES = """dim A
fn t(x : ℝ[a: A, b: 2]) -> ℝ[b: 2, a: A] = ein[b, a](x)
fn s(x : ℝ[a: A, b: 2]) -> ℝ[b: 2] = ein[b](x)
fn u(x : ℝ[a: 2, b: A]) -> ℝ[a: 2] = ein[a](x)
fn w(x : ℝ[a: 2, b: A, c: 3]) -> ℝ[c: 3, a: 2] = ein[c, a](x)
fn v(x : ℝ[a: 2, b: A], y : ℝ[b: A, c: 3]) -> ℝ[a: 2, c: 3] = ein[a, c](x * y)
fn o(x : ℝ[a: A, b: 2], y : ℝ[b: 2, c: 3]) -> ℝ[c: 3, a: A] = ein[c, a](x * y)
"""


@pytest.mark.parametrize("entry", ["t", "s", "u", "w", "v", "o"])
def test_an_ein_over_a_length_0_axis_prints_what_the_kernels_print(tmp_path, entry):
    f = write(tmp_path, "t.psk", TRANSPOSES)
    args = ("run", f, "--entry", entry, "--dim", "A=0")
    interp = presk(*args)
    assert interp.returncode == 0, interp.stderr
    for backend in ("kernel", "native"):  # the layout of a length-0 loop: a tile of 1
        other = presk(*args, "--backend", backend)
        assert other.returncode == 0, (backend, other.stderr)
        assert other.stdout == interp.stdout, backend


def test_run_data_on_a_file_of_no_sample_is_a_batch_of_length_0(tmp_path):
    (tmp_path / "e.txt").write_text("\n")
    assert presk("data", "pack", "e.txt", "--type", "ℝ[model: 2]", "-o", "e.psk.d",
                 cwd=tmp_path).returncode == 0  # fmt: skip
    f = write(
        tmp_path,
        "t.psk",
        "dim B\nfn f(x : ℝ[batch: B, model: 2]) -> ℝ[model: 2] = sum(axis batch, x)\n"
        "fn n(x : ℝ[batch: B, model: 2]) -> ℝ[] = (B : ℝ)\n",
    )
    for backend in ("interp", "kernel"):
        r = presk("run", f, "--entry", "f", "--data", "e.psk.d", "--backend", backend, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "ℝ[model: 2] = [model: 2] [0, 0]\n"
    bounded = write(tmp_path, "b.psk", "dim B >= 1\n" + f.read_text().split("\n", 1)[1])
    r = presk("run", bounded, "--entry", "f", "--data", "e.psk.d", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("[E7001]"), r.stderr


def test_run_data_into_an_argument_without_a_batch_axis_is_e7008(tmp_path):
    (tmp_path / "e.txt").write_text("1 2\n3 4\n")
    assert presk("data", "pack", "e.txt", "--type", "ℝ[model: 2]", "-o", "e.psk.d",
                 cwd=tmp_path).returncode == 0  # fmt: skip
    f = write(tmp_path, "t.psk", "fn f(x : ℝ[model: 2]) -> ℝ[] = sum(x)\n")
    for backend in ("interp", "native"):
        r = presk("run", f, "--entry", "f", "--data", "e.psk.d", "--backend", backend, cwd=tmp_path)
        assert r.returncode == 1 and r.stderr.startswith("[E7008]"), r.stderr
        assert "`x`: `ℝ[model: 2]` has no `batch` axis to stack the samples on" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("run", "tutorial/02_norm.psk", "--entry", "RMSNorm.apply", "--dim", "batch=2", "--seed"),
        ("run", "tutorial/02_norm.psk", "--entry", "RMSNorm.apply", "--dim", "batch=2", "--bits"),
        ("run", "tutorial/02_norm.psk", "--entry", "RMSNorm.apply", "--dim", "batch=2", "--digits"),
        (
            "run",
            "tutorial/02_norm.psk",
            "--entry",
            "RMSNorm.apply",
            "--dim",
            "batch=2",
            "--threads",
        ),
        (
            "bench",
            "tutorial/02_norm.psk",
            "--entry",
            "RMSNorm.apply",
            "--dim",
            "batch=2",
            "--repeat",
        ),
        ("train", "tutorial/07_train.psk", "--steps"),
        ("train", "tutorial/07_train.psk", "--log-every"),
        ("data", "info", "tutorial/data/pairs.psk.d", "--limit"),
        ("serve", "tests/examples/minigpt/minigpt.psk", "--prompt", "a", "--tokens"),
        ("serve", "tests/examples/minigpt/minigpt.psk", "--prompt", "a", "--temperature"),
    ],
    ids=lambda a: f"{a[0]} {a[-1]}",
)
def test_a_number_flag_is_ascii_digits_only(args):
    for value in ("١٢", "٣"):  # int() and float() read them as 12 and 3
        r = presk(*args, value)
        assert r.returncode == 2 and "ASCII digits" in r.stderr, (value, r.stderr)
