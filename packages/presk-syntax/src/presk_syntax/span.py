"""Source spans and source text: byte offsets to (line, column), and a registry of files.

A `Span` is a half-open range of byte offsets into the UTF-8 text of a file, named by the path
as the user gave it. A `Source` holds one file's text and answers position queries: lines are
1-based, columns 1-based and counted in characters (θ, ℝ, — are one column each). A `SourceMap`
registers every file read, so that diagnostics can be rendered from spans alone.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open range ``[start, end)`` of byte offsets into the UTF-8 text of `file`."""

    file: str
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start

    def to(self, other: Span) -> Span:
        """The smallest span covering this span and `other` (same file)."""
        if other.file != self.file:
            raise ValueError(f"cannot join spans of {self.file} and {other.file}")
        return Span(self.file, min(self.start, other.start), max(self.end, other.end))


@dataclass(frozen=True, slots=True)
class Source:
    """The text of one file, with byte offset -> (line, column) queries.

    Lines end after each ``\\n``; as in ariadne, a final newline does not start a new line, so
    the end of the file is a position on the last line, past its newline (``1:10`` in
    ``"apple ==\\n"``). Offsets past the end are clamped to it.
    """

    path: str
    text: str
    _data: bytes = field(init=False, repr=False, compare=False)
    _starts: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _char_starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        data = self.text.encode("utf-8", errors="surrogatepass")
        starts = [0] + [m.end() for m in re.finditer(b"\n", data)]
        char_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        if len(starts) > 1 and starts[-1] == len(data):  # no empty line after a final newline
            starts.pop()
            char_starts.pop()
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_starts", tuple(starts))
        object.__setattr__(self, "_char_starts", tuple(char_starts))

    @classmethod
    def read(cls, path: str) -> Source:
        """Read `path` as UTF-8 (invalid bytes replaced) and keep `path` as given."""
        return cls(path, Path(path).read_bytes().decode("utf-8", errors="replace"))

    @property
    def byte_len(self) -> int:
        """The length of the text in UTF-8 bytes."""
        return len(self._data)

    @property
    def line_count(self) -> int:
        """The number of lines (at least 1, even for an empty file)."""
        return len(self._starts)

    def clamp(self, byte_offset: int) -> int:
        """`byte_offset` brought into ``[0, byte_len]``."""
        return max(0, min(byte_offset, len(self._data)))

    def line_of(self, byte_offset: int) -> int:
        """The 1-based line holding `byte_offset`."""
        return bisect_right(self._starts, self.clamp(byte_offset))

    def line_start(self, line: int) -> int:
        """The byte offset of the first byte of `line` (1-based)."""
        return self._starts[line - 1]

    def line_end(self, line: int) -> int:
        """The byte offset just past `line`, its terminator included."""
        return self._starts[line] if line < len(self._starts) else len(self._data)

    def line_col(self, byte_offset: int) -> tuple[int, int]:
        """The 1-based (line, column in characters) of `byte_offset`."""
        offset = self.clamp(byte_offset)
        line = self.line_of(offset)
        prefix = self._data[self._starts[line - 1] : offset]
        return line, len(prefix.decode("utf-8", errors="ignore")) + 1

    def raw_line(self, line: int) -> str:
        """The text of `line` (1-based) with its terminator, if it has one."""
        data = self._data[self.line_start(line) : self.line_end(line)]
        return data.decode("utf-8", errors="surrogatepass")

    def line_text(self, line: int) -> str:
        """The text of `line` (1-based) without its line terminator."""
        return self.raw_line(line).rstrip("\r\n")

    def char_offset(self, byte_offset: int) -> int:
        """The number of characters before `byte_offset` (a byte inside a character counts
        the character as not yet reached)."""
        offset = self.clamp(byte_offset)
        line = self.line_of(offset)
        start = self._starts[line - 1]
        return self._char_starts[line - 1] + len(
            self._data[start:offset].decode("utf-8", errors="ignore")
        )

    def line_char_start(self, line: int) -> int:
        """The character offset of the first character of `line` (1-based)."""
        return self._char_starts[line - 1]


class SourceMap(Mapping[str, Source]):
    """The registry of sources, by path as the user gave it; sources are added when read."""

    def __init__(self, sources: Iterable[Source] = ()) -> None:
        self._sources: dict[str, Source] = {}
        for source in sources:
            self.add(source)

    def add(self, source: Source) -> Source:
        """Register `source` (replacing a previous text of the same path) and return it."""
        self._sources[source.path] = source
        return source

    def add_text(self, path: str, text: str) -> Source:
        """Register `text` as the source of `path`."""
        return self.add(Source(path, text))

    def read(self, path: str) -> Source:
        """Read the file at `path`, register it and return it (OSError if unreadable)."""
        return self.add(Source.read(path))

    def __getitem__(self, path: str) -> Source:
        return self._sources[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)
