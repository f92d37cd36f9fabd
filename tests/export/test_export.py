"""The PyTorch export: the listings of step 8, the rule table, formatting, diagnostics, and
the conformance tests it writes, run against the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import presk, python_start
from presk_export import Options, export_pytorch
from presk_export.pyformat import lay_out
from presk_export.torch_rules import ELSEWHERE, RULES, STRUCTURAL
from presk_syntax.span import SourceMap
from presk_types.elab import load_program
from presk_types.ops import ADJOINT_OPS, OPS
from presk_types.rules import PRIMITIVES

ROOT = Path(__file__).resolve().parents[2]
PRESK = [sys.executable, "-m", "presk_cli.main"]

TOWER = '''class Tower(nn.Module):
    """Generated from `module Tower` (06_tower.psk:16). Do not edit by hand."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.final = RMSNorm(4)

    def forward(self, x):
        """Generated from `fn apply` (06_tower.psk:20)."""
        # x : ℝ[..., model: 4]
        _stack0 = x
        for block in self.blocks:  # stack{3}
            _stack0 = block(_stack0)
        return self.final(_stack0)
'''

LOSS_GRAD = '''def loss_grad(net, θ, x, y):
    """Generated from `fn loss_grad` (04_grad.psk:9)."""
    # net : Linear{D, 1}  (a module, passed as an nn.Module)
    # θ : params Linear{D, 1}
    # x : ℝ[batch: B, D]
    B = x.shape[0]
    D = x.shape[1]
    # y : ℝ[batch: B, 1]
    return torch.func.grad((lambda θ: loss(net, θ, x, y)))(θ)
'''

TINY = {"V": "64", "D": "16", "H": "2", "L": "2"}
EXAMPLES = [
    ("tutorial/04_grad.psk", {}),
    ("tutorial/06_tower.psk", {}),
    ("tutorial/07_train.psk", {}),
    ("tests/examples/mlp/mlp.psk", {}),
    ("tests/examples/minigpt/minigpt.psk", TINY),
    ("tests/examples/minigpt/train_minigpt.psk", TINY),
    ("tests/examples/bert/bert.psk", {"V": "32", "D": "8", "H": "2", "L": "2"}),
    ("tests/examples/llama/llama.psk", {"D": "8", "H": "2", "F": "12"}),
]


PLAIN = Options()


def export(path: str, consts=None, options=PLAIN, **kw) -> dict[str, str]:
    program = load_program(str(ROOT / path), consts or {}, SourceMap())
    return export_pytorch(program, options, **kw)


def test_every_operation_has_a_pytorch_rule_or_says_where_its_pytorch_is():
    """Over the whole operation set: a rule, or the body writes it, or (the initializers, the
    training step's value_grad) no function body holds it; each in one place only."""
    assert set(RULES) | STRUCTURAL | set(ELSEWHERE) == set(OPS)
    assert not set(RULES) & STRUCTURAL and not (set(RULES) | STRUCTURAL) & set(ELSEWHERE)
    assert set(PRIMITIVES) | ADJOINT_OPS <= set(RULES) | {"grad"}


def test_the_tower_class_reads_as_step_8():
    files = export("tutorial/06_tower.psk", options=Options(check_shapes=True))
    assert list(files) == ["_01_linear.py", "_02_norm.py", "_06_tower.py"]
    assert TOWER in files["_06_tower.py"]
    assert "from _01_linear import Linear\nfrom _02_norm import RMSNorm\n" in files["_06_tower.py"]


def test_loss_grad_reads_as_step_8():
    files = export("tutorial/04_grad.psk")
    assert LOSS_GRAD in files["_04_grad.py"]


def test_unroll_writes_the_three_calls():
    text = export("tutorial/06_tower.psk", options=Options(unroll=True))["_06_tower.py"]
    calls = [f"_stack0 = self.blocks[{i}]" for i in range(3)]
    assert all(c in text for c in calls) and "for block" not in text


def test_shapes_check_asserts_closed_shapes_only():
    text = export("tutorial/04_grad.psk", options=Options(check_shapes=True))["_04_grad.py"]
    assert "ŷ = torch.func.functional_call(net, θ, (x,))  # ℝ[batch: B, 1]\n" in text
    assert "    assert ŷ.shape == (B, 1)\n" in text
    tower = export("tutorial/06_tower.psk", options=Options(check_shapes=True))["_06_tower.py"]
    assert "assert" not in tower  # every shape there has an open prefix


def test_a_parameter_table_that_depends_on_T_makes_it_a_constructor_argument():
    text = export("tests/examples/minigpt/minigpt.psk", TINY)["minigpt.py"]
    assert "class MiniGPT(nn.Module):" in text
    assert "    def __init__(self, T):\n" in text
    assert "self.pos = nn.Parameter(nn.init.normal_(torch.empty(T, 16), std=0.01))" in text
    loss = export("tests/examples/minigpt/train_minigpt.psk", TINY)["train_minigpt.py"]
    assert "    x, y = batch\n" in loss  # the tuple batch unpacked


@pytest.mark.parametrize(("path", "consts"), EXAMPLES, ids=[p for p, _ in EXAMPLES])
def test_examples_export_laid_out_and_compiling(path, consts):
    """Laid out once and for all (ruff's own check: test_export_format.py)."""
    for name, text in export(path, consts).items():
        assert lay_out(text) == text, name
        compile(text, name, "exec")


def test_a_dimension_no_argument_gives_becomes_a_keyword_parameter():
    text = export("tests/examples/llama/llama.psk", {"D": "8", "H": "2", "F": "12"})["llama.py"]
    assert "def positions(*, T):" in text
    assert "positions(T=T)" in text


def test_an_entry_reaching_an_unsupported_construct_is_E8001_and_nothing_is_written(tmp_path):
    src = tmp_path / "draw.psk"
    src.write_text(  # a take whose indices broadcast exports since issue 29 (H5); not with a prefix
        "fn draw(x : ℝ[..., batch: 2, vocab: 4], ids : idx[4][...]) -> ℝ[..., batch: 2] =\n"
        "  take(axis vocab, x, ids)\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [*PRESK, "export", str(src), "--target", "pytorch", "--conformance-entry", "draw"]
        + ["--dim", "K=3", "-o", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 1, done.stderr
    assert "[E8001] Error: cannot export: `take` of operands with an open prefix" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_usage_errors(tmp_path):
    c = presk("export", "tutorial/06_tower.psk", "--target", "onnx", "-o", str(tmp_path))
    assert c.returncode == 2 and "onnx" in c.stderr
    c = presk(
        "export", "tutorial/06_tower.psk", "--target", "pytorch", "--conformance-entry",
        "Nope.apply", "-o", str(tmp_path / "o"),
    )  # fmt: skip
    assert c.returncode == 2 and "no function `Nope.apply`" in c.stderr
    assert not (tmp_path / "o").exists()


CONFORMANCE = [
    ("tutorial/06_tower.psk", {}, ["--shapes=check"], "Tower.apply", ["batch=2"]),
    ("tutorial/04_grad.psk", {}, [], "loss_grad", ["D=3", "B=2"]),
    ("tests/examples/minigpt/train_minigpt.psk", TINY, [], "loss", ["B=2", "T=8"]),
    (
        "tests/examples/llama/llama.psk",
        {"D": "8", "H": "2", "F": "12"},
        [],
        "block",
        ["B=1", "T=3"],
    ),
    ("tests/export/programs/consts.psk", {}, [], "c", []),  # constants alone: a tensor
]


def test_an_entry_of_constants_returns_a_tensor_of_its_type():
    """Issue 27: `fn c() -> ℝ = 1.5 + 2` returned the Python float 3.5; `2` would be an
    int64 tensor without the dtype."""
    text = export("tests/export/programs/consts.psk")["consts.py"]
    assert "    return torch.tensor(1.5 + 2, dtype=torch.get_default_dtype())\n" in text
    assert "    return torch.tensor(2, dtype=torch.get_default_dtype())\n" in text
    assert "    return torch.tensor(e * 2, dtype=torch.get_default_dtype())\n" in text


def test_the_conformance_tests_pass(tmp_path):
    """Step 8's two exports and two of the examples, each tested by the pytest file it
    writes (in subprocesses side by side: torch takes seconds to import)."""
    runs = []
    for k, (path, consts, flags, entry, dims) in enumerate(CONFORMANCE):
        out = tmp_path / f"e{k}"
        args = ["export", path, "--target", "pytorch", *flags, "--conformance-entry", entry]
        args += [f"--dim={d}" for d in dims] + [f"--const={n}={v}" for n, v in consts.items()]
        done = subprocess.run(
            [*PRESK, *args, "-o", str(out)], capture_output=True, text=True, cwd=ROOT
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"presk export: wrote {out}/")
        assert done.stdout.rstrip().endswith(
            f"{out}/test_conformance.py, {out}/conformance/inputs.json,"
            f" {out}/conformance/expected.json"
        )
        cmd = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_conformance.py"]
        runs.append((entry, python_start(*cmd, cwd=out)))
    for entry, p in runs:
        done = p.wait(timeout=300)
        assert done.returncode == 0 and "1 passed" in done.stdout, (entry, done.stdout)


def test_the_spec_line_of_step_8(tmp_path):
    done = subprocess.run(
        [*PRESK, "export", str(ROOT / "tutorial/06_tower.psk"), "--target", "pytorch",
         "--mode", "readable", "--shapes=check", "-o", "out/tutorial_tower"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.stdout == (
        "presk export: wrote out/tutorial_tower/_01_linear.py, out/tutorial_tower/_02_norm.py,"
        " out/tutorial_tower/_06_tower.py\n"
    )
