"""The tutorial's steps that stand alone (13, 17, 18): tests/test_tutorial.py says why they
run apart."""

from test_tutorial import apart_flags, run_tutorial


def test_the_steps_that_stand_alone_run_as_written():
    result = run_tutorial(*apart_flags())
    assert result.returncode == 0, result.stdout + result.stderr
