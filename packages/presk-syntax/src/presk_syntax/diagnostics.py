"""Diagnostics: built as plain data, rendered in one place in the tutorial's layout.

A `Diagnostic` is a code, a severity, a message, labels on source spans, and an optional help
and note. `render` writes it exactly as the reference compiler does, which copies the layout of
the Rust crate ariadne (ASCII characters, labels attached at their middle, not compact):

    [E2003] Error: cannot broadcast ...
       ,-[ bad_axis.psk:3:3 ]
       |
     3 |   a + b
       |   ^^|^^
       |     `---- no alignment by position or by name
    ---'

The renderer below follows ariadne's writer closely (a margin for multi-line labels, one arrow
row per label, arrows running two columns past the longest underline of the line); trailing
spaces are dropped from every line.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TextIO

from presk_syntax.span import Source, SourceMap, Span

__all__ = [
    "Diagnostic",
    "DiagnosticError",
    "Label",
    "Severity",
    "emit",
    "error",
    "render",
    "should_color",
    "warning",
]


class Severity(Enum):
    """How bad a diagnostic is; the value is the word printed in the header."""

    ERROR = "Error"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class Label:
    """A span of source with a message (an empty message draws the underline only)."""

    span: Span
    text: str = ""


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One diagnostic; ``labels[0]`` is the primary label, whose start the header points at."""

    code: str
    severity: Severity
    message: str
    labels: tuple[Label, ...] = ()
    help: str | None = None
    note: str | None = None

    @property
    def is_error(self) -> bool:
        """True for an error (exit code 1), False for a warning."""
        return self.severity is Severity.ERROR

    @property
    def primary(self) -> Label | None:
        """The primary label, if any."""
        return self.labels[0] if self.labels else None

    def with_label(self, span: Span, text: str = "") -> Diagnostic:
        """This diagnostic with one more label."""
        return dataclasses.replace(self, labels=(*self.labels, Label(span, text)))

    def with_help(self, text: str) -> Diagnostic:
        """This diagnostic with its help line set."""
        return dataclasses.replace(self, help=text)

    def with_note(self, text: str) -> Diagnostic:
        """This diagnostic with its note line set."""
        return dataclasses.replace(self, note=text)


def error(
    code: str, message: str, *labels: Label, help: str | None = None, note: str | None = None
) -> Diagnostic:
    """An error diagnostic."""
    return Diagnostic(code, Severity.ERROR, message, tuple(labels), help, note)


def warning(
    code: str, message: str, *labels: Label, help: str | None = None, note: str | None = None
) -> Diagnostic:
    """A warning diagnostic."""
    return Diagnostic(code, Severity.WARNING, message, tuple(labels), help, note)


class DiagnosticError(Exception):
    """Raised by a stage with the diagnostics that stop it (at least one is an error)."""

    def __init__(self, diagnostics: Diagnostic | Iterable[Diagnostic]) -> None:
        diags = [diagnostics] if isinstance(diagnostics, Diagnostic) else list(diagnostics)
        self.diagnostics: list[Diagnostic] = diags
        super().__init__("; ".join(f"[{d.code}] {d.message}" for d in diags))


Sources = SourceMap | Mapping[str, Source]


def should_color(stream: TextIO) -> bool:
    """Whether to colour output to `stream`: a terminal, and NO_COLOR not set (no-color.org:
    a non-empty value disables colour)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def emit(diags: Iterable[Diagnostic], sources: Sources, stream: TextIO | None = None) -> None:
    """Render each diagnostic to `stream` (standard error by default), coloured on a terminal."""
    out = sys.stderr if stream is None else stream
    color = should_color(out)
    for diag in diags:
        out.write(render(diag, sources, color))
    out.flush()


# --- Rendering -----------------------------------------------------------------------------
# A row is a list of cells (text, ANSI style or None), joined once at the end: colour is a
# property of a cell, so the layout code never sees an escape sequence.

Cell = tuple[str, str | None]
Row = list[Cell]

# ariadne's default palette: kind colours, Fixed(246) margin, 240 skipped margin, 249 source
# text outside labels, 115 for Help/Note; secondary labels get a blue of their own.
_KIND = {Severity.ERROR: "31", Severity.WARNING: "33"}
_MARGIN, _SKIPPED, _PLAIN, _NOTE, _SECONDARY = "38;5;246", "38;5;240", "38;5;249", "38;5;115", "34"
_TAB = 4


def _finish(row: Row, color: bool) -> str:
    """The text of a row, trailing spaces dropped, with escapes when `color`."""
    runs: list[list] = []
    for text, style in row:
        if runs and runs[-1][1] == style:
            runs[-1][0] += text
        elif text:
            runs.append([text, style])
    while runs and not runs[-1][0].rstrip():
        runs.pop()
    if runs:
        runs[-1][0] = runs[-1][0].rstrip()
    if not color:
        return "".join(text for text, _ in runs)
    return "".join(f"\x1b[{style}m{text}\x1b[0m" if style else text for text, style in runs)


@dataclass(eq=False, slots=True)
class _Info:
    """A label placed in its source: character offsets, kind, message and colour."""

    start: int
    end: int
    line: int  # the 1-based line of its start
    multi: bool
    text: str
    color: str

    @property
    def last(self) -> int:
        return max(self.end - 1, self.start)

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class _LineLabel:
    col: int
    info: _Info
    multi: bool
    draw_msg: bool


@dataclass(frozen=True, slots=True)
class _Line:
    number: int
    offset: int  # character offset of its first character
    length: int  # in characters, the terminator included
    text: str  # without the trailing whitespace and terminator

    def __contains__(self, char_offset: int) -> bool:
        return self.offset <= char_offset < self.offset + self.length


def _place(label: Label, src: Source, color: str) -> _Info:
    start, end = src.clamp(label.span.start), src.clamp(label.span.end)
    first, cstart = src.line_of(start), src.char_offset(start)
    if start >= end:
        return _Info(cstart, cstart, first, False, label.text, color)
    cend = src.char_offset(end - 1) + 1
    return _Info(cstart, cend, first, src.line_of(end - 1) != first, label.text, color)


def _line(src: Source, number: int) -> _Line:
    raw = src.raw_line(number)
    return _Line(number, src.line_char_start(number), len(raw), raw.rstrip())


def _char_width(c: str, col: int) -> tuple[str, int]:
    if c == "\t":
        return " ", _TAB - col % _TAB
    if c.isspace():
        return " ", 1
    if unicodedata.combining(c):
        return c, 0
    return c, 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


@dataclass(slots=True)
class _Group:
    """The labels of one file, drawn in one snippet."""

    src: Source
    infos: list[_Info]
    location: int  # byte offset the header points at
    first: int  # first and last line shown
    last: int
    multi: list[_Info] = dataclasses.field(default_factory=list)
    messaged: list[_Info] = dataclasses.field(default_factory=list)  # multi-line, with text

    def base_margin(self, width: int, number: int | None, ellipsis: bool = False) -> Row:
        if number is not None and not ellipsis:
            return [(" ", None), (f"{number:>{width}} |", _MARGIN), (" ", None)]
        return [(" " + " " * (width + 1) + (":" if ellipsis else "|"), _SKIPPED), (" ", None)]


def _groups(diag: Diagnostic, sources: Sources) -> list[_Group]:
    groups: dict[str, _Group] = {}
    for i, label in enumerate(diag.labels):
        src = sources.get(label.span.file)
        if src is None:
            continue  # an unregistered file: its labels are left out, never a crash
        info = _place(label, src, _KIND[diag.severity] if i == 0 else _SECONDARY)
        start, end = src.clamp(label.span.start), src.clamp(label.span.end)
        last = src.line_of(max(end - 1, start))
        group = groups.get(label.span.file)
        if group is None:
            groups[label.span.file] = _Group(src, [info], start, info.line, last)
        else:
            group.infos.append(info)
            group.first, group.last = min(group.first, info.line), max(group.last, last)
    for group in groups.values():
        group.multi = sorted((i for i in group.infos if i.multi), key=lambda i: -len(i))
        group.messaged = [i for i in group.multi if i.text]
    return list(groups.values())


def _margin(
    g: _Group,
    width: int,
    line: _Line,
    src_line: bool,
    ellipsis: bool,
    report_row: tuple[int, bool] | None,
    line_labels: list[_LineLabel],
    margin_label: _LineLabel | None,
) -> Row:
    """The gutter and the multi-line label margin of a row (ariadne's `write_margin`)."""
    row = g.base_margin(width, line.number if src_line else None, ellipsis)
    n = len(g.messaged)
    for col in range(n + (1 if n else 0)):
        corner: tuple[_Info, bool] | None = None
        hbar = vbar = None
        ptr: tuple[_LineLabel, bool] | None = None
        for i, info in enumerate(g.messaged[: min(col + 1, n)]):
            margin = margin_label if margin_label and margin_label.info is info else None
            if not (info.start <= line.offset + line.length and info.end > line.offset):
                continue
            parent, is_start, is_end = i != col, info.start in line, info.last in line
            if margin and src_line:
                ptr = (margin, is_start)
            elif not is_start and (not is_end or src_line):
                vbar = vbar or (None if parent else info)
            elif report_row is not None:
                r, is_arrow = report_row
                label_row = next((k for k, ll in enumerate(line_labels) if ll.info is info), 0)
                if r == label_row:
                    if margin:
                        vbar = info if col == i else None
                        if is_start:
                            continue
                    if is_arrow:
                        hbar = info
                        if not parent:
                            corner = (info, is_start)
                    elif not is_start:
                        vbar = vbar or (None if parent else info)
                elif not parent and (is_start != (r < label_row)):
                    vbar = vbar or info
        is_col = ptr is not None and col < n and ptr[0].info is g.messaged[col]
        if ptr and src_line and not is_col and col + 1 != n:
            hbar = hbar or ptr[0].info
        if hbar and src_line and margin_label and margin_label.info is hbar:
            hbar = None
        if corner:
            row += [("," if corner[1] else "`", corner[0].color), ("-", corner[0].color)]
        elif hbar:
            row += [("--", hbar.color)]
        elif vbar:
            row += [(":" if ellipsis else "|", vbar.color), (" ", None)]
        elif ptr and src_line:
            limit, style = col == n, ptr[0].info.color
            head = ">" if limit else ("," if ptr[1] else "|") if is_col else "-"
            row += [(head, style), (" " if limit else "-", style)]
        else:
            row += [("  ", None)]
    return row


def _line_labels(g: _Group, line: _Line) -> tuple[_LineLabel | None, list[_LineLabel]]:
    """The multi-line label drawn in the margin of `line`, and the labels with arrows there."""
    margin_label = None
    for info in g.messaged:
        if info.start in line:
            ll = _LineLabel(info.start - line.offset, info, True, False)
        elif info.last in line:
            ll = _LineLabel(info.last - line.offset, info, True, True)
        else:
            continue
        if margin_label is None or (ll.col, -info.start) < (margin_label.col, -margin_label.info.start):
            margin_label = ll
    line_labels = []
    for info in g.messaged:
        if info.start in line:
            if not (margin_label and margin_label.info is info):
                line_labels.append(_LineLabel(info.start - line.offset, info, True, False))
        elif info.last in line:
            line_labels.append(_LineLabel(info.last - line.offset, info, True, True))
    for info in g.infos:
        if not info.multi and info.line == line.number:
            col = max((info.start + info.end) // 2, info.start) - line.offset
            line_labels.append(_LineLabel(col, info, False, True))
    line_labels.sort(key=lambda ll: (ll.col, -ll.info.start))
    return margin_label, line_labels


def _line_rows(
    g: _Group,
    width: int,
    line: _Line,
    ellipsis: bool,
    margin_label: _LineLabel | None,
    line_labels: list[_LineLabel],
) -> list[Row]:
    """The source row of one line and the arrow rows of its labels."""
    arrow_len = 0
    for ll in line_labels:  # ariadne's fold: a multi-line label takes the whole line
        arrow_len = line.length if ll.multi else max(arrow_len, ll.info.end - line.offset)
    arrow_len += 2

    def referenced(info: _Info) -> bool:
        return margin_label is not None and margin_label.info is info

    def vbar_at(col: int, row: int) -> _LineLabel | None:
        for j, ll in enumerate(line_labels):
            if ll.info.text and not referenced(ll.info) and ll.col == col and row <= j:
                return ll
        return None

    def smallest(infos: Iterable[_Info], col: int) -> _Info | None:
        hits = [i for i in infos if line.offset + col >= i.start and line.offset + col < i.end]
        return min(hits, key=len, default=None)

    widths = [_char_width(c, col)[1] for col, c in enumerate(line.text)]

    def width_at(col: int) -> int:
        return widths[col] if col < len(widths) else 1

    row = _margin(g, width, line, True, ellipsis, None, line_labels, margin_label)
    if not ellipsis:
        infos = [ll.info for ll in line_labels]
        extra = [margin_label.info] if margin_label else []
        for col, c in enumerate(line.text):
            hit = smallest([*extra, *g.multi, *infos], col)
            ch, w = _char_width(c, col)
            row.append((ch * w if ch.isspace() else ch, hit.color if hit else _PLAIN))
    rows = [row]
    inline = [ll.info for ll in line_labels if not ll.multi]
    for r, ll in enumerate(line_labels):
        if not ll.info.text:
            continue
        row = _margin(g, width, line, False, ellipsis, (r, False), line_labels, margin_label)
        for col in range(arrow_len):
            vbar, under = vbar_at(col, r), smallest(inline, col) if r == 0 else None
            if vbar:
                c = ("|", "^") if under else ("^", " ") if vbar.multi and r == 0 else ("|", " ")
                style: str | None = vbar.info.color
            else:
                c, style = ("^", "^") if under else (" ", " "), under.color if under else None
            row += [(c[0] if k == 0 else c[1], style) for k in range(width_at(col))]
        rows.append(row)
        row = _margin(g, width, line, False, ellipsis, (r, True), line_labels, margin_label)
        for col in range(arrow_len):
            is_hbar = (col > ll.col) != ll.multi or (ll.draw_msg and col > ll.col)
            vbar, style = vbar_at(col, r), ll.info.color
            if col == ll.col and not referenced(ll.info):
                c = (("-" if ll.draw_msg else "'") if ll.multi else "`", "-")
            elif vbar and not is_hbar:
                c, style = ("|", " "), vbar.info.color
            else:
                c = ("-", "-") if is_hbar else (" ", " ")
            row += [(c[0] if k == 0 else c[1], style) for k in range(width_at(col))]
        if ll.draw_msg:
            row.append((" " + ll.info.text, None))
        rows.append(row)
    return rows


def _group_rows(g: _Group, diag: Diagnostic, width: int, first: bool, final: bool) -> list[Row]:
    line, col = g.src.line_col(g.location)
    pad = " " * (width + 2)
    rows: list[Row] = [
        [(pad, None), (("," if first else "|") + "-[ ", _MARGIN)]
        + [(f"{g.src.path}:{line}:{col}", None), (" ]", _MARGIN)],
        [(pad, None), ("|", _MARGIN)],
    ]
    ellipsis = False
    for number in range(g.first, g.last + 1):
        line = _line(g.src, number)
        margin_label, line_labels = _line_labels(g, line)
        if not line_labels and margin_label is None:
            # A line without labels: inside a multi-line label the first one shows as `:`;
            # elsewhere the first of a run shows as an empty gutter row.
            within = any(i.start <= line.offset < i.end for i in g.multi)
            if not ellipsis and within:
                ellipsis = True
            else:
                if not ellipsis:
                    rows.append(g.base_margin(width, None))
                ellipsis = True
                continue
        else:
            ellipsis = False
        rows += _line_rows(g, width, line, ellipsis, margin_label, line_labels)
    if final:
        extra = "  " * (len(g.messaged) + 1 if g.messaged else 0)
        for word, text in (("Help", diag.help), ("Note", diag.note)):
            if text:
                rows.append(g.base_margin(width, None) + [(extra, None)])
                rows.append(g.base_margin(width, None) + _section(word, text, extra))
        rows.append([("-" * (width + 2) + "'", _MARGIN)])
    else:
        rows.append([(pad, None), ("|", _MARGIN)])
    return rows


def _section(word: str, text: str, indent: str) -> Row:
    return [(indent, None), (word, _NOTE), (": " + text, None)]


def render(diag: Diagnostic, sources: Sources, color: bool) -> str:
    """The text of `diag` in the tutorial's layout, ending with a newline; `sources` maps the
    paths of the labels' spans to their text (labels in unregistered files are left out)."""
    code = f"[{diag.code}] " if diag.code else ""
    rows: list[Row] = [
        [(f"{code}{diag.severity.value}:", _KIND[diag.severity]), (" " + diag.message, None)]
    ]
    groups = _groups(diag, sources)
    if not groups:  # no snippet: the header, then help and note as plain lines
        for word, text in (("Help", diag.help), ("Note", diag.note)):
            if text:
                rows.append(_section(word, text, ""))
    width = len(str(max((g.last for g in groups), default=1)))
    for k, g in enumerate(groups):
        rows += _group_rows(g, diag, width, k == 0, k + 1 == len(groups))
    return "".join(_finish(row, color) + "\n" for row in rows)
