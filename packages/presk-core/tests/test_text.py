"""Text as token windows (presk_core.text): vocabularies of characters, encoding, the
token file, and the window arithmetic of `presk data lm-windows`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from presk_core.data import DataError
from presk_core.text import (
    decode,
    encode,
    format_tokens,
    lm_windows,
    parse_tokens,
    parse_vocabulary,
    vocabulary,
    vocabulary_json,
    window_count,
    windows,
)


def test_the_vocabulary_is_the_characters_sorted_by_code_point():
    assert vocabulary("bac a\n") == ["\n", " ", "a", "b", "c"]
    assert vocabulary("") == []


def test_an_accent_is_one_token():
    text = "Été déjà"
    vocab = vocabulary(text)
    assert vocab == [" ", "d", "j", "t", "É", "à", "é"]
    assert encode(text, vocab).tolist() == [4, 3, 6, 0, 1, 6, 2, 5]
    assert decode(encode(text, vocab), vocab) == text


def test_code_point_order_is_not_the_alphabet():
    # É is U+00C9, à U+00E0, é U+00E9: the order of code points, not of a dictionary
    assert vocabulary("éÉàz") == ["z", "É", "à", "é"]


def test_a_decomposed_accent_is_two_characters():
    # no normalization: e + U+0301 (combining acute) stays two code points
    assert vocabulary("e\u0301") == ["e", "\u0301"]


def test_line_ends_are_kept():
    assert vocabulary("a\r\nb") == ["\n", "\r", "a", "b"]


@given(st.text())
def test_encode_then_decode_gives_the_text_back(text):
    vocab = vocabulary(text)
    tokens = encode(text, vocab)
    assert tokens.dtype == np.int64 and decode(tokens, vocab) == text
    assert all(0 <= t < len(vocab) for t in tokens)


def test_the_vocabulary_file_round_trips_and_is_readable():
    vocab = vocabulary('é"\n\\ a')
    text = vocabulary_json(vocab)
    assert text == '["\\n", " ", "\\"", "\\\\", "a", "é"]\n'
    assert parse_vocabulary(text, "v.json") == vocab == json.loads(text)


def test_any_order_of_distinct_characters_is_a_vocabulary():
    assert encode("ba", parse_vocabulary('["b", "a"]', "v")).tolist() == [0, 1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('["a"', "`v.json` is not JSON: expecting ',' delimiter at line 1, column 5"),
        ('{"a": 0}', "`v.json` is not a JSON array of characters"),
        ('["a", "bc"]', '`v.json`: entry 1 is "bc", not one character'),
        ('["a", 3]', "`v.json`: entry 1 is 3, not one character"),
        ('["a", "b", "a"]', "`v.json`: `a` (U+0061) is both entry 0 and entry 2"),
    ],
)
def test_a_bad_vocabulary_is_e7009(text, message):
    with pytest.raises(DataError) as e:
        parse_vocabulary(text, "v.json")
    assert e.value.code == "E7009" and str(e.value) == message


def test_a_character_outside_the_vocabulary_says_where():
    with pytest.raises(DataError) as e:
        encode("ab\ncß d\n", ["\n", " ", "a", "b", "c", "d"], "t.md", "v.json")
    assert e.value.code == "E7009"
    assert str(e.value) == (
        "`t.md` line 2, column 2: `ß` (U+00DF) is not in the vocabulary of `v.json`"
        " (1 character of the text is not in it: `ß` (U+00DF))"
    )
    with pytest.raises(DataError) as e:
        encode("x\ty", ["x"], "t.md")
    assert str(e.value).startswith("`t.md` line 1, column 2: U+0009 is not in the vocabulary (")
    assert str(e.value).endswith("(2 characters of the text are not in it: U+0009, `y` (U+0079))")


def test_the_token_file():
    tokens = np.arange(130) % 7
    text = format_tokens(tokens)
    lines = text.splitlines()
    assert len(lines) == 3 and lines[0].split() == [str(t % 7) for t in range(64)]
    assert text.endswith("\n") and format_tokens([]) == ""
    assert parse_tokens(text, "t").tolist() == tokens.tolist()
    assert parse_tokens(" 3\t4\r\n\n5 ", "t").tolist() == [3, 4, 5]
    for bad in ("1 -2", "1 2.0", "1 x", "1 ٣"):
        with pytest.raises(DataError) as e:
            parse_tokens(bad, "t.txt")
        assert e.value.code == "E7009" and str(e.value).startswith("`t.txt`: token 1 is `")


def test_the_window_arithmetic():
    # the specification's civil code: 4617 windows of 256 from 1182121 tokens
    assert window_count(1182121, 256) == 4617 == (1182121 - 1) // 256
    # a window needs the token after it: 2·4 + 1 tokens give two windows of 4, 2·4 one
    assert window_count(9, 4) == 2 and window_count(8, 4) == 1
    assert window_count(5, 4) == 1 and window_count(4, 4) == 0
    assert window_count(1, 1) == 0 and window_count(0, 3) == 0


def test_windows_are_shifted_by_one_side_by_side():
    tokens = np.arange(11)
    got = windows(tokens, 4)
    assert [[x.tolist(), y.tolist()] for x, y in got] == [
        [[0, 1, 2, 3], [1, 2, 3, 4]],
        [[4, 5, 6, 7], [5, 6, 7, 8]],
    ]  # 9 and 10 fill no window


@given(st.integers(0, 300), st.integers(1, 40))
def test_every_window_is_its_target_shifted(length, seq):
    tokens = np.arange(length)
    got = windows(tokens, seq)
    assert len(got) == window_count(length, seq)
    for i, (x, y) in enumerate(got):
        assert x.tolist() == list(range(i * seq, (i + 1) * seq))
        assert y.tolist() == [t + 1 for t in x.tolist()]


def test_lm_windows_checks_the_tokens():
    type_text, samples = lm_windows(np.array([0, 1, 2, 1, 0]), 3, 2)
    assert type_text == "(idx[3][seq: 2], idx[3][seq: 2])" and len(samples) == 2
    with pytest.raises(DataError) as e:
        lm_windows(np.array([0, 1, 3, 4, 0]), 3, 2, "t.txt")
    assert e.value.code == "E7009"
    assert (
        str(e.value) == "`t.txt`: token 2 is 3, not below the vocabulary's size 3 (2 such tokens)"
    )
    with pytest.raises(DataError) as e:
        lm_windows(np.array([0, 1, 2]), 3, 3, "t.txt")
    assert str(e.value) == (
        "`t.txt` holds 3 tokens: a window of 3 needs 4 (the window and the token after it)"
    )
