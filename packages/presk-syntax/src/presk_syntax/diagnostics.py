"""Diagnostics: built as plain data, rendered in one place in the tutorial's layout.

A `Diagnostic` is a code, a severity, a message, labels on source spans, and an optional help
and note. `render` writes it byte for byte as the reference compiler does, which copies the
layout of the Rust crate ariadne (ASCII, labels attached at their middle, not compact); the
writer below follows ariadne's closely, and drops trailing spaces from every line.
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

from presk_syntax.span import Source, Span


class Severity(Enum):
    """How bad a diagnostic is; the value is the word printed in the header."""

    ERROR = "Error"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class Label:
    """A span of source with a message (an empty message draws nothing, as in ariadne)."""

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
    return Diagnostic(code, Severity.ERROR, message, labels, help, note)


def warning(
    code: str, message: str, *labels: Label, help: str | None = None, note: str | None = None
) -> Diagnostic:
    """A warning diagnostic."""
    return Diagnostic(code, Severity.WARNING, message, labels, help, note)


class DiagnosticError(Exception):
    """Raised by a stage with the diagnostics that stop it."""

    def __init__(self, diagnostics: Diagnostic | Iterable[Diagnostic]) -> None:
        diags = [diagnostics] if isinstance(diagnostics, Diagnostic) else list(diagnostics)
        self.diagnostics: list[Diagnostic] = diags
        super().__init__("; ".join(f"[{d.code}] {d.message}" for d in diags))


def should_color(stream: TextIO) -> bool:
    """Colour for a terminal, unless NO_COLOR is set to a non-empty value (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def emit(
    diags: Iterable[Diagnostic], sources: Mapping[str, Source], stream: TextIO | None = None
) -> None:
    """Render each diagnostic to `stream` (standard error by default), coloured on a terminal."""
    out = sys.stderr if stream is None else stream
    color = should_color(out)
    for diag in diags:
        out.write(render(diag, sources, color))
    out.flush()


def render(diag: Diagnostic, sources: Mapping[str, Source], color: bool) -> str:
    """The text of `diag`, ending with a newline. `sources` maps the paths of the spans to
    their text; labels in files it lacks are left out (with no label left, no snippet)."""
    code = f"[{diag.code}] " if diag.code else ""
    rows: list[Row] = [
        [(f"{code}{diag.severity.value}:", _KIND[diag.severity]), (" " + diag.message, None)]
    ]
    diag, sources, headers = _windowed(diag, sources)
    groups = _groups(diag, sources)
    for g in groups:
        g.header = headers.get(g.path)
    if not groups:  # the one-line form; help and note, if any, follow as plain lines
        rows += _sections(diag, [], "")
    width = len(str(max((g.last for g in groups), default=1)))
    for k, group in enumerate(groups):
        rows += _group_rows(group, diag, width, k == 0, k + 1 == len(groups))
    return "".join(_finish(row, color) + "\n" for row in rows)


# --- Rendering -----------------------------------------------------------------------------
# A row is a list of cells (text, ANSI style or None), joined once at the end: the layout code
# never sees an escape sequence. Offsets below are in characters, columns from 0.

Row = list[tuple[str, str | None]]

# ariadne's default palette: red/yellow kinds, Fixed(246) margin, 240 skipped margin, 249
# source text outside labels, 115 Help/Note; labels after the primary are blue.
_KIND = {Severity.ERROR: "31", Severity.WARNING: "33"}
_MARGIN, _SKIPPED, _PLAIN, _NOTE, _SECONDARY = "38;5;246", "38;5;240", "38;5;249", "38;5;115", "34"
_TAB = 4


@dataclass(eq=False, slots=True)
class _Info:
    """A label placed in its source (compared by identity: a label may be given twice)."""

    start: int
    end: int
    line: int  # the line of its start
    multi: bool
    text: str
    color: str

    @property
    def last(self) -> int:
        return max(self.end - 1, self.start)

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class _LineLabel:
    """A label as drawn on one line: the column of its arrow, and whether its text is."""

    col: int
    info: _Info
    draw_msg: bool


@dataclass(frozen=True, slots=True)
class _Line:
    number: int
    offset: int
    length: int  # the terminator included
    text: str  # trailing whitespace and terminator dropped

    def __contains__(self, offset: int) -> bool:
        return self.offset <= offset < self.offset + self.length


@dataclass(slots=True)
class _Group:
    """The labels of one file, drawn in one snippet."""

    path: str  # as the spans give it
    src: Source
    infos: list[_Info]
    location: int  # the byte offset the header points at
    first: int  # the first and last lines shown
    last: int
    multi: list[_Info] = dataclasses.field(default_factory=list)  # longest first
    messaged: list[_Info] = dataclasses.field(default_factory=list)  # those with a text
    header: tuple[int, int] | None = None  # (line, column) in the file, when windowed


def _groups(diag: Diagnostic, sources: Mapping[str, Source]) -> list[_Group]:
    groups: dict[str, _Group] = {}
    for i, label in enumerate(diag.labels):
        src = sources.get(label.span.file)
        if src is None:
            continue  # an unregistered file: left out, never a crash
        start, end = src.clamp(label.span.start), src.clamp(label.span.end)
        line, last = src.line_of(start), src.line_of(max(end - 1, start))
        cstart = src.char_offset(start)
        cend = src.char_offset(end - 1) + 1 if end > start else cstart
        color = _KIND[diag.severity] if i == 0 else _SECONDARY
        info = _Info(cstart, cend, line, last != line, label.text, color)
        group = groups.get(label.span.file)
        if group is None:
            groups[label.span.file] = _Group(label.span.file, src, [info], start, line, last)
        else:
            group.infos.append(info)
            group.first, group.last = min(group.first, line), max(group.last, last)
    for group in groups.values():
        group.multi = sorted((i for i in group.infos if i.multi), key=lambda i: -i.size)
        group.messaged = [i for i in group.multi if i.text]
    return list(groups.values())


@dataclass(frozen=True, slots=True)
class _View:
    """One line of a group as drawn: its margin label, its labels, whether it is elided."""

    g: _Group
    width: int
    line: _Line
    margin_label: _LineLabel | None
    line_labels: list[_LineLabel]
    ellipsis: bool

    def referenced(self, info: _Info) -> bool:
        return self.margin_label is not None and self.margin_label.info is info


def _gutter(width: int, number: int | None = None, ellipsis: bool = False) -> Row:
    if number is not None and not ellipsis:
        return [(" ", None), (f"{number:>{width}} |", _MARGIN), (" ", None)]
    return [(" " * (width + 2) + (":" if ellipsis else "|"), _SKIPPED), (" ", None)]


def _margin(v: _View, report_row: tuple[int, bool] | None) -> Row:
    """The gutter and the margin of the multi-line labels (ariadne's `write_margin`), for the
    source row (`report_row` None) or a label's bar or arrow row (row, is the arrow row)."""
    g, line, line_labels = v.g, v.line, v.line_labels
    src_line = report_row is None
    row = _gutter(v.width, line.number if src_line else None, v.ellipsis)
    n = len(g.messaged)
    for col in range(n + 1 if n else 0):
        corner: tuple[_Info, bool] | None = None
        hbar = vbar = None
        ptr: tuple[_Info, bool] | None = None  # the margin label of a source row
        for i, info in enumerate(g.messaged[: col + 1]):
            if not (info.start <= line.offset + line.length and info.end > line.offset):
                continue
            margin = v.referenced(info)
            parent, is_start, is_end = i != col, info.start in line, info.last in line
            if margin and src_line:
                ptr = (info, is_start)
            elif not is_start and (not is_end or src_line):
                vbar = vbar or (None if parent else info)
            elif report_row is not None:
                r, is_arrow = report_row
                label_row = next((k for k, ll in enumerate(line_labels) if ll.info is info), 0)
                if r != label_row:
                    if not parent and is_start != (r < label_row):
                        vbar = vbar or info
                    continue
                if margin:
                    vbar = info if col == i else None
                    if is_start:
                        continue
                if is_arrow:
                    hbar = info
                    corner = corner if parent else (info, is_start)
                elif not is_start:
                    vbar = vbar or (None if parent else info)
        is_col = ptr is not None and col < n and ptr[0] is g.messaged[col]
        if ptr and not is_col and col + 1 != n:
            hbar = hbar or ptr[0]
        if hbar and src_line and v.referenced(hbar):
            hbar = None
        if corner:
            row += [("," if corner[1] else "`", corner[0].color), ("-", corner[0].color)]
        elif hbar:
            row.append(("--", hbar.color))
        elif vbar:
            row += [(":" if v.ellipsis else "|", vbar.color), (" ", None)]
        elif ptr:
            limit = col == n
            head = ">" if limit else ("," if ptr[1] else "|") if is_col else "-"
            row += [(head, ptr[0].color), (" " if limit else "-", ptr[0].color)]
        else:
            row.append(("  ", None))
    return row


def _line_labels(g: _Group, line: _Line) -> tuple[_LineLabel | None, list[_LineLabel]]:
    """The multi-line label in the margin of `line`, and the labels drawn under it in order."""
    ends: list[_LineLabel] = []
    for info in g.messaged:
        if info.start in line:
            ends.append(_LineLabel(info.start - line.offset, info, False))
        elif info.last in line:
            ends.append(_LineLabel(info.last - line.offset, info, True))
    margin_label = min(ends, key=lambda ll: (ll.col, -ll.info.start), default=None)
    line_labels = [ll for ll in ends if ll.draw_msg or ll is not margin_label]
    for info in g.infos:
        if not info.multi and info.line == line.number:
            col = max((info.start + info.end) // 2, info.start) - line.offset
            line_labels.append(_LineLabel(col, info, True))
    line_labels.sort(key=lambda ll: (ll.col, -ll.info.start))
    return margin_label, line_labels


def _char_width(c: str, col: int) -> tuple[str, int]:
    if c == "\t":
        return " ", _TAB - col % _TAB
    if c.isspace():
        return " ", 1
    if unicodedata.combining(c):
        return c, 0
    return c, 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def _line_rows(v: _View) -> list[Row]:
    """The source row of one line, then two rows per label with a text: a bar (or, for the
    first, the underlines) and the arrow to the text."""
    line, line_labels, margin_label = v.line, v.line_labels, v.margin_label
    arrow_len = 0
    for ll in line_labels:  # ariadne's fold: a multi-line label takes the whole line
        arrow_len = line.length if ll.info.multi else max(arrow_len, ll.info.end - line.offset)
    arrow_len += 2  # the arrows run two columns past the end of the longest label

    def vbar_at(col: int, row: int) -> _Info | None:
        for j, ll in enumerate(line_labels):
            if ll.info.text and not v.referenced(ll.info) and ll.col == col and row <= j:
                return ll.info
        return None

    def smallest(infos: Iterable[_Info], col: int) -> _Info | None:
        hits = (i for i in infos if i.start <= line.offset + col < i.end)
        return min(hits, key=lambda i: i.size, default=None)

    widths = [_char_width(c, col)[1] for col, c in enumerate(line.text)]

    def cells(col: int, head: str, tail: str, style: str | None) -> Row:
        # A character drawn over `col`: its head, then its tail for each more terminal column.
        size = widths[col] if col < len(widths) else 1
        return [(tail if k else head, style) for k in range(size)]

    rows = [_margin(v, None)]
    if not v.ellipsis:
        shown = [margin_label.info] if margin_label else []
        shown += v.g.multi + [ll.info for ll in line_labels]
        for col, c in enumerate(line.text):
            hit, (ch, w) = smallest(shown, col), _char_width(c, col)
            rows[0].append((ch * w if ch.isspace() else ch, hit.color if hit else _PLAIN))
    inline = [ll.info for ll in line_labels if not ll.info.multi]
    for r, ll in enumerate(line_labels):
        if not ll.info.text:
            continue
        row = _margin(v, (r, False))
        for col in range(arrow_len):
            vbar, under = vbar_at(col, r), smallest(inline, col) if r == 0 else None
            if vbar:
                head, tail = "|", "^" if under else " "
                head = "^" if vbar.multi and r == 0 and not under else head
                row += cells(col, head, tail, vbar.color)
            else:
                row += cells(col, "^", "^", under.color) if under else cells(col, " ", " ", None)
        rows.append(row)
        row = _margin(v, (r, True))
        for col in range(arrow_len):
            is_hbar = (col > ll.col) != ll.info.multi or (ll.draw_msg and col > ll.col)
            vbar = vbar_at(col, r)
            if col == ll.col and not v.referenced(ll.info):
                head = ("-" if ll.draw_msg else "'") if ll.info.multi else "`"
                row += cells(col, head, "-", ll.info.color)
            elif vbar and not is_hbar:
                row += cells(col, "|", " ", vbar.color)
            elif is_hbar:
                row += cells(col, "-", "-", ll.info.color)
            else:
                row += cells(col, " ", " ", None)
        if ll.draw_msg:
            row.append((" " + ll.info.text, None))
        rows.append(row)
    return rows


def _group_rows(g: _Group, diag: Diagnostic, width: int, first: bool, final: bool) -> list[Row]:
    """The snippet of one file: its header, its lines with their labels, and its tail."""
    pad, (number, col) = " " * (width + 2), g.header or g.src.line_col(g.location)
    rows: list[Row] = [
        [(pad, None), (("," if first else "|") + "-[ ", _MARGIN)]
        + [(f"{g.path}:{number}:{col}", None), (" ]", _MARGIN)],
        [(pad, None), ("|", _MARGIN)],
    ]
    ellipsis = False
    for number in range(g.first, g.last + 1):
        line = _line(g.src, number)
        margin_label, line_labels = _line_labels(g, line)
        if margin_label or line_labels:
            ellipsis = False
        elif not ellipsis and any(i.start <= line.offset < i.end for i in g.multi):
            ellipsis = True  # the first unlabelled line inside a multi-line label: a `:` row
        else:
            if not ellipsis:  # the first of a run of unlabelled lines: an empty gutter row
                rows.append(_gutter(width))
            ellipsis = True
            continue
        rows += _line_rows(_View(g, width, line, margin_label, line_labels, ellipsis))
    if not final:
        return [*rows, [(pad, None), ("|", _MARGIN)]]
    rows += _sections(diag, _gutter(width), "  " * (len(g.messaged) + 1 if g.messaged else 0))
    return [*rows, [("-" * (width + 2) + "'", _MARGIN)]]


# A line longer than this is shown as a window of WINDOW characters around its labels
# (`…` marking what is cut): a syntax error on a line of megabytes draws a line of a screen.
LONG_LINE = 240
WINDOW = 160


def _windowed(
    diag: Diagnostic, sources: Mapping[str, Source]
) -> tuple[Diagnostic, Mapping[str, Source], dict[str, tuple[int, int]]]:
    """`diag` and `sources` with every long line the labels reach cut to a window, and the
    header's (line, column) of each file so cut, as in the whole file."""
    spans: dict[str, list[Span]] = {}
    for label in diag.labels:
        if label.span.file in sources:
            spans.setdefault(label.span.file, []).append(label.span)
    cut: dict[str, Source] = {}
    moved: dict[tuple[str, int], int] = {}
    headers: dict[str, tuple[int, int]] = {}
    for path, group in spans.items():
        src = sources[path]
        offsets = sorted({src.clamp(o) for sp in group for o in (sp.start, sp.end)})
        first, last = src.line_of(offsets[0]), src.line_of(offsets[-1])
        lines = [src.raw_line(n) for n in range(first, last + 1)]
        if all(len(line) <= LONG_LINE for line in lines):
            continue
        headers[path] = src.line_col(src.clamp(group[0].start))
        text = ["\n" * (first - 1)]
        for n, line in zip(range(first, last + 1), lines, strict=True):
            at = len("".join(text).encode("utf-8", errors="surrogatepass"))
            start = src.line_start(n)
            here = [o for o in offsets if start <= o < src.line_end(n) or o == src.line_end(n)]
            cols = [src.char_offset(o) - src.line_char_start(n) for o in here]
            body = line.rstrip("\r\n")
            if len(body) <= LONG_LINE:
                text.append(line)
                lo, hi, lead = 0, len(body), ""
            else:
                lo = max(0, min(cols, default=0) - WINDOW // 4)
                hi = min(len(body), lo + WINDOW)
                lead = "…" if lo else ""
                text.append(lead + body[lo:hi] + ("…" if hi < len(body) else "") + "\n")
            for o, c in zip(here, cols, strict=True):
                shown = lead + body[lo : max(lo, min(c, hi))]
                moved[(path, o)] = at + len(shown.encode("utf-8", errors="surrogatepass"))
        cut[path] = Source(path, "".join(text))
    if not cut:
        return diag, sources, headers

    def span(sp: Span) -> Span:
        if sp.file not in cut:
            return sp
        src = sources[sp.file]
        return Span(
            sp.file, moved[(sp.file, src.clamp(sp.start))], moved[(sp.file, src.clamp(sp.end))]
        )

    labels = tuple(Label(span(label.span), label.text) for label in diag.labels)
    return dataclasses.replace(diag, labels=labels), {**sources, **cut}, headers


def _line(src: Source, number: int) -> _Line:
    raw = src.raw_line(number)
    return _Line(number, src.line_char_start(number), len(raw), raw.rstrip())


def _sections(diag: Diagnostic, gutter: Row, indent: str) -> list[Row]:
    """The Help and Note sections, each after an empty gutter row (when there is a gutter)."""
    rows: list[Row] = []
    for word, text in (("Help", diag.help), ("Note", diag.note)):
        if text is None:
            continue
        first, *more = text.split("\n")
        rows += [[*gutter, (indent, None)]] if gutter else []
        rows.append([*gutter, (indent, None), (word, _NOTE), (": " + first, None)])
        rows += [[*gutter, (indent + " " * (len(word) + 2) + extra, None)] for extra in more]
    return rows


def _finish(row: Row, color: bool) -> str:
    """The text of a row, trailing spaces dropped, with escapes when `color`."""
    runs: Row = []  # cells merged by style
    for text, style in row:
        if runs and runs[-1][1] == style:
            runs[-1] = (runs[-1][0] + text, style)
        elif text:
            runs.append((text, style))
    while runs and not runs[-1][0].rstrip():
        runs.pop()
    if runs:
        runs[-1] = (runs[-1][0].rstrip(), runs[-1][1])
    if not color:
        return "".join(text for text, _ in runs)
    return "".join(f"\x1b[{style}m{text}\x1b[0m" if style else text for text, style in runs)
