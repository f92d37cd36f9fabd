"""Hypothesis under CI (`CI` set, as `.ci/run` is run): derandomized, the same examples every
run, so that a submission's CI cannot fail on a draw nobody saw before it; elsewhere random,
to find what is new (a failure found locally is then fixed and kept as a test)."""

import os

try:
    from hypothesis import settings
except ImportError:  # a package's own environment without hypothesis (make packages)
    settings = None

if settings is not None:
    settings.register_profile("ci", derandomize=True, database=None)
    if os.environ.get("CI"):
        settings.load_profile("ci")


# The files that take longest, heaviest first (seconds of one worker, about 70 s down to 30 s:
# `pytest -n 2 --dist loadfile --junitxml=J` summed by file on a quiet machine; test_bound,
# test_window, test_pi_iota_compare, test_conv and test_resume placed since by the savings
# measured on each alone, docs/development.md). `make test` deals whole files to its two
# workers in collection order (with --no-loadscope-reorder: xdist's own order, by number of
# tests, left the one-test tutorial files for last, one worker idle), so the longest run
# first and the short ones fill in behind them.
LONGEST = (
    "tests/test_tutorial.py",
    "tests/precision/test_bound.py",
    "tests/test_tutorial_apart.py",
    "tests/run/test_window.py",
    "tests/precision/test_step_budget.py",
    "tests/export/test_c_export.py",
    "tests/run/test_pi_iota_compare.py",
    "tests/train/test_resume.py",
    "packages/presk-kernel/tests/test_layout_space.py",
    "tests/run/test_conv.py",
    "tests/export/test_train_export.py",
    "tests/plans/test_plan.py",
    "packages/presk-kernel/tests/test_laid.py",
    "tests/precision/test_solve.py",
)


def pytest_collection_modifyitems(items) -> None:
    rank = {path: i for i, path in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(LONGEST)))
