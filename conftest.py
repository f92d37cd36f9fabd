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
