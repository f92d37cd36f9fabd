"""The printing of values against the tutorial's outputs and the rounding rules of show.py."""

from __future__ import annotations

from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from gmpy2 import mpfr
from presk_core import mpfr as M
from presk_core.show import format_axes, format_number, format_real, format_tensor, format_tree


@pytest.fixture(autouse=True)
def at_256_bits():
    with M.precision(256):
        yield


def r(text: str) -> mpfr:
    return M.real(text)[()]


def test_ln_64_prints_as_the_tutorial_prints_minigpts_loss():
    assert format_real(M.log(M.real(64))[()]) == "4.15888308336"  # ln 64 = 4.1588830833596…


@pytest.mark.parametrize(
    "value,digits,text",
    [
        ("-2.51907504100", 12, "-2.519075041"),  # trailing zeros dropped
        ("-2.519075040996", 12, "-2.519075041"),  # rounded up into zeros
        ("-0.0351536766703", 12, "-0.0351536766703"),  # 12 significant digits below 0.1
        ("0.03515367667034999", 12, "0.0351536766703"),
        ("-1.87090", 6, "-1.8709"),  # tutorial step 2 at --digits 6
        ("0.06606324", 6, "0.0660632"),
        ("3", 12, "3"),
        ("100", 2, "1e2"),  # exponent 2 > digits − 1: 100 would claim three digits
        ("0.00001", 12, "0.00001"),  # exponent −5: still fixed
        ("0.0000099999", 12, "9.9999e-6"),  # exponent −6: scientific
        ("0.000009999999999999", 12, "0.00001"),  # rounding moves it to exponent −5
        ("123456789012", 12, "123456789012"),  # exponent digits − 1: fixed
        ("1234567890123", 12, "1.23456789012e12"),
        ("999999999999.5", 12, "1e12"),  # a tie rounds to even, here up, into e12
        ("1.5e-7", 12, "1.5e-7"),
        ("-2.5e300", 12, "-2.5e300"),
        ("12345", 2, "1.2e4"),
    ],
)
def test_digits_and_layout(value, digits, text):
    assert format_real(r(value), digits) == text


def test_rounding_is_of_the_exact_binary_value_ties_to_even():
    assert format_real(r("0.125"), 2) == "0.12"  # exact ties: to even
    assert format_real(r("0.375"), 2) == "0.38"
    assert format_real(r("2.5"), 1) == "2" and format_real(r("3.5"), 1) == "4"
    above = r("1.25") + mpfr(2) ** -100  # float() would make this the tie 1.25
    assert format_real(float(above), 2) == "1.2" and format_real(above, 2) == "1.3"
    assert format_real(0.1, 20) == "0.10000000000000000555"  # a double's exact value
    assert format_real(M.div(M.real(1), M.real(3))[()], 30) == "0.333333333333333333333333333333"
    assert (
        format_real(Fraction(2, 3), 3) == "0.667" and format_real(gmpy2.mpq(-1, 8), 5) == "-0.125"
    )


def test_special_values():
    assert format_real(mpfr(0)) == "0" and format_real(r("-0")) == "-0"
    assert format_real(mpfr("nan")) == "NaN"
    assert format_real(mpfr("inf")) == "inf" and format_real(mpfr("-inf")) == "-inf"
    assert format_real(-0.0) == "-0" and format_real(float("inf")) == "inf"
    with pytest.raises(ValueError):
        format_real(mpfr(1), 0)


def test_elements_of_each_kind():
    assert format_number(np.int64(7)) == "7" and format_number(3) == "3"
    assert format_number(np.bool_(True)) == "true" and format_number(False) == "false"
    assert format_number(r("0.5")) == "0.5"


def test_tensors():
    x = M.real([[1, 2], ["-0.5", "1e-9"]])
    assert format_tensor(x, [("batch", 2), (None, 2)]) == "[batch: 2, 2] [[1, 2], [-0.5, 1e-9]]"
    assert format_tensor(M.real("3.478806"), [], 6) == "3.47881"  # a scalar: the number
    ids = np.array([3, 3, 5, 1, 7], dtype=np.int64)
    assert format_tensor(ids, [("batch", 5)]) == "[batch: 5] [3, 3, 5, 1, 7]"  # step 5
    mask = np.tril(np.ones((2, 2), dtype=bool))
    assert format_tensor(mask, [("seq", 2), ("seq2", 2)]) == (
        "[seq: 2, seq2: 2] [[true, false], [true, true]]"
    )
    assert format_tensor(M.zeros((2, 0)), [(None, 2), (None, 0)]) == "[2, 0] [[], []]"
    assert format_tensor(M.zeros((0,)), [("batch", 0)]) == "[batch: 0] []"
    assert format_axes([("heads", 2), (None, 64)]) == "[heads: 2, 64]"
    with pytest.raises(ValueError):
        format_tensor(x, [(None, 4)])


def test_the_tutorials_linear_layer():
    w = M.real(
        [
            ["-0.983257327109", "1.01328364301"],
            ["0.616220484208", "-0.0351536766703"],
            ["0.541220283065", "-0.348589323961"],
        ]
    )
    text = format_tree([("w", w, [(None, 3), (None, 2)]), (("b",), M.zeros((2,)), [(None, 2)])])
    assert text == (
        "params = {\n"
        "  w = [3, 2] [[-0.983257327109, 1.01328364301], [0.616220484208, -0.0351536766703],"
        " [0.541220283065, -0.348589323961]]\n"
        "  b = [2] [0, 0]\n"
        "}"
    )
    y = M.real([["0.896290523413", "-1.22253725991"], ["-2.51907504100", "2.26085457153"]])
    line = "ℝ[batch: 2, 2] = " + format_tensor(y, [("batch", 2), (None, 2)])
    assert line == (
        "ℝ[batch: 2, 2] = [batch: 2, 2] [[0.896290523413, -1.22253725991],"
        " [-2.519075041, 2.26085457153]]"
    )


def test_trees_with_nested_paths_and_labels():
    leaves = [
        (("norm", "γ"), M.real([1, 1]), [(None, 2)]),
        ("proj.b", M.real(["3.47884"]), [(None, 1)]),
    ]
    assert format_tree(leaves, 6, label="θ : params") == (
        "θ : params = {\n  norm.γ = [2] [1, 1]\n  proj.b = [1] [3.47884]\n}"
    )
    assert format_tree([]) == "params = {}"
