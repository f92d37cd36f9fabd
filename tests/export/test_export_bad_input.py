"""The export's items of issue 16, each exported with its conformance test and the test run
(in this process: torch is imported once): scalar parameters, `max`/`min` with a number,
dimensions no argument holds whole (in entries, in `grad` λs, Llama's `positions`), primed
names, a masked softmax over a row that allows nothing, NaN in results, what cannot be
written left out (W8001) unless an entry reaches it (E8001), and a source named
`test_conformance.psk`."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRESK = [sys.executable, "-m", "presk_cli.main"]

PROGRAMS = {
    "scalar.psk": """dim B
module Aff {
  param w : ℝ[] init = ones
  param b : ℝ[] init = zeros
  fn apply(x : ℝ[batch: B]) -> ℝ[batch: B] =
    x * w + b
}
""",
    "clip.psk": """dim B
fn clip(z : ℝ[batch: B]) -> ℝ[batch: B] =
  min(max(z, 0), 1)
""",
    "dims.psk": """const P : nat = 2
dim N
dim B
fn halves(x : ℝ[seq: P*N]) -> ℝ[a: P, b: N] =
  split(axis seq, x, a: P, b: N)
fn scale(x : ℝ[batch: B]) -> ℝ[batch: B] =
  x * (N : ℝ)
fn g(x : ℝ[batch: B]) -> ℝ[batch: B] =
  grad(λ y. sum(axis batch, y * y) * (N : ℝ))(x)
""",
    "prime.psk": """dim B
fn f(x : ℝ[batch: B]) -> ℝ[batch: B] =
  let x' = x * 2.0
  let x'' = x' + x
  x'' * x'
""",
    "masked.psk": """dim B
dim T
fn none_allowed(x : ℝ[batch: B, seq: T]) -> ℝ[batch: B, seq: T] =
  softmax(axis seq, x, where = x > 100.0)
fn log_none_allowed(x : ℝ[batch: B, seq: T]) -> ℝ[batch: B, seq: T] =
  log_softmax(axis seq, x, where = x > 100.0)
fn some_allowed(x : ℝ[batch: B, seq: T]) -> ℝ[batch: B, seq: T] =
  softmax(axis seq, x, where = x > 0.0)
fn grad_none_allowed(x : ℝ[batch: B, seq: T]) -> ℝ[batch: B, seq: T] =
  let m = x > 100.0
  grad(λ y. sum(axis seq, sum(axis batch, softmax(axis seq, y, where = m) * y)))(x)
fn logs(x : ℝ[batch: B, seq: T]) -> ℝ[batch: B, seq: T] =
  log(x)
""",
    "draw.psk": """dim B
fn draw(x : ℝ[..., batch: 2, vocab: 4], ids : idx[4][...]) -> ℝ[..., batch: 2] =
  take(axis vocab, x, ids)
fn twice(x : ℝ[batch: 2, vocab: 4], ids : idx[4][]) -> ℝ[batch: 2] =
  draw(x, ids)
fn ok(x : ℝ[batch: B]) -> ℝ[batch: B] =
  x * 2.0
""",
}


def presk_export(tmp_path: Path, source: Path, entry: str, *flags: str):
    out = tmp_path / f"out_{source.stem}_{entry.replace('.', '_')}"
    args = ["export", str(source), "--target", "pytorch", "--conformance-entry", entry]
    done = subprocess.run(
        [*PRESK, *args, *flags, "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_COLOR": "1"},
    )
    return done, out


def run_conformance(out: Path) -> None:
    """Import the generated test_conformance.py (its folder first on sys.path, its sibling
    modules purged before and after) and call its test function."""
    torch = pytest.importorskip("torch")
    names = {p.stem for p in out.glob("*.py")}
    for n in names:
        sys.modules.pop(n, None)
    sys.path.insert(0, str(out))
    try:
        spec = importlib.util.spec_from_file_location(
            "test_conformance", out / "test_conformance.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        tests = [getattr(module, n) for n in dir(module) if n.startswith("test_")]
        assert len(tests) == 1
        tests[0]()
    finally:
        sys.path.remove(str(out))
        for n in names:
            sys.modules.pop(n, None)
        torch.set_default_dtype(torch.float32)


def exported(tmp_path: Path, name: str, entry: str, *dims: str) -> tuple[str, Path]:
    source = tmp_path / name
    source.write_text(PROGRAMS[name], encoding="utf-8")
    done, out = presk_export(tmp_path, source, entry, *[f"--dim={d}" for d in dims])
    assert done.returncode == 0, done.stderr
    return (out / f"{source.stem}.py").read_text(encoding="utf-8"), out


def test_a_scalar_parameter(tmp_path):
    text, out = exported(tmp_path, "scalar.psk", "Aff.apply", "B=3")
    assert "self.w = nn.Parameter(torch.ones(()))" in text
    assert "self.b = nn.Parameter(torch.zeros(()))" in text
    run_conformance(out)


def test_max_and_min_with_a_number(tmp_path):
    text, out = exported(tmp_path, "clip.psk", "clip", "B=5")
    assert "torch.minimum(torch.maximum(z, torch.tensor(0)), torch.tensor(1))" in text
    run_conformance(out)


@pytest.mark.parametrize(
    ("entry", "dims", "line"),
    [
        ("halves", ["N=3", "B=1"], "    N = x.shape[0] // 2\n"),
        ("scale", ["N=3", "B=2"], "def scale(x, *, N):\n"),
        ("g", ["N=3", "B=2"], "def g(x, *, N):\n"),
    ],
)
def test_dimensions_no_argument_holds_whole(tmp_path, entry, dims, line):
    text, out = exported(tmp_path, "dims.psk", entry, *dims)
    assert line in text
    run_conformance(out)


def test_llamas_positions(tmp_path):
    llama = ROOT / "tests/examples/llama/llama.psk"
    consts = ["--const=D=8", "--const=H=2", "--const=F=12"]
    done, out = presk_export(tmp_path, llama, "positions", "--dim=T=5", "--dim=B=1", *consts)
    assert done.returncode == 0, done.stderr
    assert "got = positions(T=5)" in (out / "test_conformance.py").read_text()
    run_conformance(out)


def test_primed_names_are_python_names(tmp_path):
    text, out = exported(tmp_path, "prime.psk", "f", "B=3")
    assert "    xʹ = x * 2.0  # ℝ[batch: B]\n    xʹʹ = xʹ + x  # ℝ[batch: B]\n" in text
    run_conformance(out)


@pytest.mark.parametrize(
    "entry", ["none_allowed", "log_none_allowed", "some_allowed", "grad_none_allowed", "logs"]
)
def test_masked_softmax_rows_that_allow_nothing_and_nan(tmp_path, entry):
    """A row that allows nothing: 0 (log_softmax −inf, the gradient 0) in both; `log` of
    negative inputs: NaN at the same positions in both."""
    _, out = exported(tmp_path, "masked.psk", entry, "B=2", "T=3")
    run_conformance(out)


def test_the_interpreter_gives_0_for_a_row_that_allows_nothing(tmp_path):
    source = tmp_path / "masked.psk"
    source.write_text(PROGRAMS["masked.psk"], encoding="utf-8")
    args = [str(source), "--entry", "none_allowed", "--dim", "B=1", "--dim", "T=3"]
    done = subprocess.run([*PRESK, "run", *args], capture_output=True, text=True)
    assert done.stdout == "ℝ[batch: 1, seq: 3] = [batch: 1, seq: 3] [[0, 0, 0]]\n"


def test_what_cannot_be_written_is_left_out_unless_the_entry_reaches_it(tmp_path):
    text, out = exported(tmp_path, "draw.psk", "ok", "B=2")
    assert "# `draw` (draw.psk:2) is not exported: `take` of operands with an open prefix" in text
    assert "# `twice` (draw.psk:4) is not exported: `draw` is not exported" in text
    assert "def ok(x):" in text and "def draw" not in text
    run_conformance(out)
    done, _ = presk_export(tmp_path, tmp_path / "draw.psk", "ok", "--dim=B=2")
    assert done.stderr.count("[W8001] Warning: ") == 2
    done, again = presk_export(tmp_path, tmp_path / "draw.psk", "twice", "--dim=B=1")
    assert done.returncode == 1 and not again.exists()
    assert "[E8001] Error: cannot export: `draw` is not exported" in done.stderr


def test_a_source_named_test_conformance(tmp_path):
    source = tmp_path / "test_conformance.psk"
    source.write_text(PROGRAMS["clip.psk"], encoding="utf-8")
    done, out = presk_export(tmp_path, source, "clip", "--dim=B=3")
    assert done.returncode == 0, done.stderr
    assert (out / "test_conformance_.py").exists()
    assert "from test_conformance_ import clip" in (out / "test_conformance.py").read_text()
    run_conformance(out)
