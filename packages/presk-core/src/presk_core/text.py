"""Text as token windows: what `presk data chars|encode|lm-windows|ngrams` compute
(docs/data.md).

Pure functions over strings and arrays; the commands read and write the files.

- A vocabulary is the distinct characters (code points, not bytes: `é` is one token) of a
  text, sorted by code point; a token is a character's position in it. On disk it is a
  JSON array of one-character strings.
- A token file is decimal naturals separated by blanks, `TOKENS_PER_LINE` to a line.
- A window is a pair (x, y) of `seq` tokens, y being x shifted by one; from L tokens
  there are ⌊(L − 1) / seq⌋ of them, side by side without overlap, the last tokens that
  do not fill a window dropped.
- An n-gram is K tokens of context and the token after them; from L tokens there are
  L − K of them, one a position (`presk data ngrams`: the bigrams' pairs for K = 1, the
  MLP's contexts of three).

Every problem is a `DataError` with code E7009 (docs/diagnostics.md).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence

import numpy as np

from presk_core.data import DataError

CODE = "E7009"
TOKENS_PER_LINE = 64


def show(c: str) -> str:
    """A character for a message: `é` (U+00E9), or U+000A alone for one that does not print."""
    name = f"U+{ord(c):04X}"
    if unicodedata.category(c)[0] in "CZ" and c != " ":
        return name
    return f"`{c}` ({name})"


def count(n: int, noun: str) -> str:
    """`1 token`, `2 tokens`: the counts of the messages."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def vocabulary(text: str) -> list[str]:
    """The distinct characters of `text`, sorted by code point."""
    return sorted(set(text))


def vocabulary_json(vocab: Sequence[str]) -> str:
    """A vocabulary as its file holds it: a JSON array on one line, UTF-8, not escaped."""
    return json.dumps(list(vocab), ensure_ascii=False) + "\n"


def parse_vocabulary(text: str, name: str) -> list[str]:
    """The vocabulary a file holds: a JSON array of distinct one-character strings, in any
    order (a token is a position in the array)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(
            CODE, f"`{name}` is not JSON: {e.msg.lower()} at line {e.lineno}, column {e.colno}"
        ) from None
    except RecursionError:  # [[[[…]]]]: deeper than the JSON reader follows
        raise DataError(
            CODE, f"`{name}` is not a JSON array of characters: its arrays nest too deeply"
        ) from None
    if not isinstance(value, list):
        raise DataError(CODE, f"`{name}` is not a JSON array of characters")
    seen: dict[str, int] = {}
    for i, c in enumerate(value):
        if not isinstance(c, str) or len(c) != 1:
            shown = json.dumps(c, ensure_ascii=False) if not isinstance(c, list | dict) else None
            if shown is None or len(shown) > 40:  # an array, an object, a long string: its kind
                kind = {list: "an array", dict: "an object", str: "a string"}
                shown = kind.get(type(c), "a number")
                shown += f" of {len(c)} characters" if isinstance(c, str) else ""
            raise DataError(CODE, f"`{name}`: entry {i} is {shown}, not one character")
        if c in seen:
            raise DataError(CODE, f"`{name}`: {show(c)} is both entry {seen[c]} and entry {i}")
        seen[c] = i
    return value


def encode(
    text: str, vocab: Sequence[str], name: str = "the text", vocab_name: str = ""
) -> np.ndarray:
    """The tokens of `text` (int64), each character's position in `vocab`; E7009 for a
    character that is not in it, with its line and column (from 1) and the other ones."""
    index = {c: i for i, c in enumerate(vocab)}
    try:
        return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text))
    except KeyError as e:
        c = e.args[0]
    at = text.index(c)
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    missing = sorted(set(text) - set(index))
    listed = ", ".join(show(m) for m in missing[:5]) + (", …" if len(missing) > 5 else "")
    where = f" of `{vocab_name}`" if vocab_name else ""
    raise DataError(
        CODE,
        f"`{name}` line {line}, column {column}: {show(c)} is not in the vocabulary{where}"
        f" ({count(len(missing), 'character')} of the text"
        f" {'is' if len(missing) == 1 else 'are'} not in it: {listed})",
    )


def decode(tokens: Sequence[int] | np.ndarray, vocab: Sequence[str]) -> str:
    """The text of `tokens`: encode's inverse."""
    return "".join(vocab[int(t)] for t in tokens)


def format_tokens(tokens: Sequence[int] | np.ndarray) -> str:
    """A token file: the tokens in decimal, separated by spaces, `TOKENS_PER_LINE` a line."""
    words = [str(int(t)) for t in tokens]
    return "".join(
        " ".join(words[i : i + TOKENS_PER_LINE]) + "\n"
        for i in range(0, len(words), TOKENS_PER_LINE)
    )


def parse_tokens(text: str, name: str) -> np.ndarray:
    """The tokens of a token file (int64): decimal naturals separated by any blanks."""
    words = text.split()
    for i, w in enumerate(words):
        if not (w.isascii() and w.isdigit()):
            raise DataError(CODE, f"`{name}`: token {i} is `{w}`, not a natural number")
        if len(w) > 18 and int(w) >= 2**63:
            raise DataError(CODE, f"`{name}`: token {i} is {w}, above any vocabulary (2⁶³ − 1)")
    return np.array([int(w) for w in words], dtype=np.int64)


def window_count(length: int, seq: int) -> int:
    """How many windows of `seq` tokens, and their targets, `length` tokens give:
    ⌊(length − 1) / seq⌋ (a window's target needs the token after it)."""
    return max(0, (length - 1) // seq)


def windows(tokens: np.ndarray, seq: int) -> list[list[np.ndarray]]:
    """Window i of `tokens`: x = tokens[i·seq : (i+1)·seq] and y = x shifted by one, as the
    samples of a `.psk.d` file of `windows_type`."""
    return [
        [tokens[i * seq : (i + 1) * seq], tokens[i * seq + 1 : (i + 1) * seq + 1]]
        for i in range(window_count(len(tokens), seq))
    ]


def windows_type(vocab_size: int, seq: int) -> str:
    """The sample type of windows: `(idx[V][seq: T], idx[V][seq: T])`."""
    return f"(idx[{vocab_size}][seq: {seq}], idx[{vocab_size}][seq: {seq}])"


def lm_windows(
    tokens: np.ndarray, vocab_size: int, seq: int, name: str = "the tokens"
) -> tuple[str, list[list[np.ndarray]]]:
    """The type and the samples of the windows of `tokens`, checked: every token below
    `vocab_size`, at least one window."""
    tokens = np.asarray(tokens, dtype=np.int64)
    _check_below(tokens, vocab_size, name)
    if window_count(len(tokens), seq) == 0:
        raise DataError(
            CODE,
            f"`{name}` holds {count(len(tokens), 'token')}: a window of {seq} needs {seq + 1}"
            " (the window and the token after it)",
        )
    return windows_type(vocab_size, seq), windows(tokens, seq)


def ngram_count(length: int, context: int) -> int:
    """How many samples of `context` tokens and the next one `length` tokens give: every
    position from `context` on is a target once (length − context)."""
    return max(0, length - context)


def ngrams_type(vocab_size: int, context: int) -> str:
    """The sample type of n-grams: a pair of tokens `(idx[V][], idx[V][])` for a context of
    one, else `(idx[V][ctx: K], idx[V][])`, the K tokens before a target and the target."""
    x = "[]" if context == 1 else f"[ctx: {context}]"
    return f"(idx[{vocab_size}]{x}, idx[{vocab_size}][])"


def ngrams(
    tokens: np.ndarray,
    vocab_size: int,
    context: int,
    limit: int | None = None,
    name: str = "the tokens",
) -> tuple[str, np.ndarray, np.ndarray]:
    """The type and the samples of the n-grams of `tokens`: sample i is x = tokens[i : i + K]
    (a scalar for K = 1) and y = tokens[i + K], the token after it; one a position, so the
    samples overlap and every token from the K-th on is a target once. `limit` keeps the
    first ones. Checked as `lm_windows` is: every token below `vocab_size`, one sample at
    least. Returns x (count × K, or count for K = 1) and y (count), int64."""
    tokens = np.asarray(tokens, dtype=np.int64)
    _check_below(tokens, vocab_size, name)
    n = ngram_count(len(tokens), context)
    if n == 0:
        raise DataError(
            CODE,
            f"`{name}` holds {count(len(tokens), 'token')}: a context of {context} and its"
            f" target need {context + 1}",
        )
    if limit is not None:
        n = min(n, limit)
    view = np.lib.stride_tricks.sliding_window_view(tokens, context)[:n]
    x = view[:, 0].copy() if context == 1 else view.copy()
    return ngrams_type(vocab_size, context), x, tokens[context : context + n].copy()


def _check_below(tokens: np.ndarray, vocab_size: int, name: str) -> None:
    bad = np.flatnonzero((tokens < 0) | (tokens >= vocab_size))
    if bad.size:
        i = int(bad[0])
        raise DataError(
            CODE,
            f"`{name}`: token {i} is {int(tokens[i])}, not below the vocabulary's size"
            f" {vocab_size} ({count(int(bad.size), 'such token')})",
        )
