"""The draws' check (issue 29's done-when: a golden of each construct's check and
diagnostics): every random primitive's type, class and effect in the summary, and each
misuse a coded diagnostic (a `split_key` of a real was accepted, then `presk run` failed
with a Python error). Their values are tests/native/test_draws_native.py's and
presk-core's test_random (against mpmath), their gradients presk-ad's (draws.psk) and
tests/export/test_draws_torch.py's."""

from helpers import ROOT, presk

GOLDEN = ROOT / "tests" / "check" / "golden"


def test_the_summary_is_the_golden():
    done = presk("check", "tests/check/programs/draws.psk", "--summary")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (GOLDEN / "draws.summary.txt").read_text(encoding="utf-8")


def test_the_misuses_are_the_golden():
    done = presk("check", "programs/bad_draws.psk", cwd="tests/check")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (GOLDEN / "bad_draws.txt").read_text(encoding="utf-8")
    assert done.stderr.count("Error:") == 6
