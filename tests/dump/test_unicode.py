"""`presk dump --format unicode` (issue 25, L540): the Core stages as equations, a line per
instruction, each made by a pass with its rule; other stages refuse it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from presk_cli.pipeline import PIPELINE
from presk_core.equations import format_equations
from presk_syntax.pipeline import Context

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tutorial").glob("0*.psk"))


def presk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "presk_cli.main", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_the_derivatives_of_the_loss():
    out = presk("dump", "tutorial/04_grad.psk", "--stage", "core-after-ad", "--format", "unicode")
    assert out.returncode == 0, out.stderr
    loss = out.stdout.split("\n\nloss{D B}(θ, x, y):\n", 1)[1].split("\n\n", 1)[0]
    assert loss.splitlines() == [
        "  ŷ = Linear.apply(θ, x)",
        "  %4 = ŷ − y",
        "  %5 = %4²",
        "  %6 = mean(%5)",
        "  ⇒ %6",
    ]
    assert "  %10 = xᵀ · ct                ⟵ vjp of dot, from Linear.apply/%3\n" in out.stdout
    assert "  %9 = %4¹                            ⟵ vjp of pow, from loss/%5\n" in out.stdout


@pytest.mark.parametrize("path", PROGRAMS)
@pytest.mark.parametrize("stage", ["core", "core-after-ad"])
def test_an_equation_per_instruction(path, stage):
    program = PIPELINE.run(stage, str(ROOT / path), Context())
    text = format_equations(program)
    blocks = text.rstrip("\n").split("\n\n")
    assert len(blocks) == len(program.functions)
    for fn, block in zip(program.functions, blocks, strict=True):
        lines = block.splitlines()
        assert lines[0].startswith(fn.name) and lines[-1] == f"  ⇒ {fn.ret}"
        assert len(lines) == len(fn.body) + 2
        for ins, line in zip(fn.body, lines[1:-1], strict=True):
            assert line.startswith(f"  {ins.out} = ")
            assert ("⟵" in line) == (ins.origin is not None)


def test_only_the_core_stages():
    out = presk("dump", "tutorial/04_grad.psk", "--stage", "tokens", "--format", "unicode")
    assert out.returncode == 2 and "--format unicode is for the Core stages" in out.stderr
