"""presk-opt's rules through `presk run --opt` (moved from presk-opt's tests: they drive
presk-cli)."""

from helpers import ROOT, presk

PROGRAMS = ROOT / "packages" / "presk-opt" / "tests" / "programs"


def test_a_sum_over_length_1_runs_natively_as_without_opt() -> None:
    """`reshape_like` lowered natively as a view of its operand's buffer: the same digits
    with and without --opt."""
    args = ["run", PROGRAMS / "rules.psk", "--entry", "onesum_grad", "--dim", "B=4",
            "--backend", "native"]  # fmt: skip
    plain = presk(*args)
    opt = presk(*args, "--opt")
    assert plain.returncode == 0 and opt.returncode == 0, opt.stderr
    assert plain.stdout == opt.stdout and "  onesum_loss.bwd: " in opt.stderr
