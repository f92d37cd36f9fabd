"""The GRU classifier of tests/examples/gru (issue 29: a scan over a symbolic number of steps
in a model) trained natively: its log equal to the reference interpreter's at the six digits
a line prints, its loss going down; the data file as make_data.py writes it. (The export of
its training passes its conformance test in `make train-examples`; the export of a scan{T}
is tests/run/test_scan_n.py's.)"""

from helpers import ROOT, data_is_what_make_data_writes, native_training_is_the_interpreters

EXAMPLE = ROOT / "tests" / "examples" / "gru"


def test_native_training_is_the_interpreters_at_six_digits(tmp_path):
    native_training_is_the_interpreters(EXAMPLE / "gru.psk", 8, tmp_path)


def test_the_data_is_what_make_data_writes(tmp_path):
    data_is_what_make_data_writes(EXAMPLE, "signs_T8.psk.d", tmp_path)
