"""The 1-D convolutional classifier of tests/examples/conv1d (issue 29: slices and padding in
a model) trained natively: its log equal to the reference interpreter's at the six digits a
line prints, its loss going down; the data file as make_data.py writes it."""

from helpers import (
    ROOT,
    data_is_what_make_data_writes,
    export_passes_conformance,
    native_training_is_the_interpreters,
)

EXAMPLE = ROOT / "tests" / "examples" / "conv1d"


def test_native_training_is_the_interpreters_at_six_digits(tmp_path):
    native_training_is_the_interpreters(EXAMPLE / "conv1d.psk", 12, tmp_path)


def test_the_data_is_what_make_data_writes(tmp_path):
    data_is_what_make_data_writes(EXAMPLE, "bumps_T16.psk.d", tmp_path)


def test_the_training_export_passes_its_conformance_test(tmp_path):
    export_passes_conformance(EXAMPLE / "conv1d.psk", "train:2", tmp_path / "export")
