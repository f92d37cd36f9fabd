"""The document a statement is laid out from, and its printer: ruff's model (after Prettier)
of text, groups that print flat when they fit, soft line breaks, indents, content on the
condition of a group's mode, and trailing comments whose width is reserved."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

WIDTH = 88  # ruff's default line length
INDENT = 4


def width(text: str) -> int:
    """Columns, as ruff counts them: wide East Asian characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


@dataclass(frozen=True, slots=True)
class Line:
    soft: bool  # flat: nothing (soft) or a space


SOFT, LINE = Line(True), Line(False)
LINE_BREAK = "\n"  # a line break, whatever the mode


@dataclass(frozen=True, slots=True)
class BestFit:
    """The first of `variants` whose every line fits, else the last (ruff's `best_fitting`
    in its all-lines mode)."""

    variants: list


@dataclass(slots=True)
class Group:
    contents: object
    id: int | None = None


@dataclass(frozen=True, slots=True)
class Indent:
    contents: object


@dataclass(frozen=True, slots=True)
class IfBreaks:
    """`then` if group `id` is broken, else `other`."""

    id: int
    then: object
    other: object = ""


@dataclass(frozen=True, slots=True)
class GroupIf:
    """A group while group `id` is broken, and its contents as they are while it is flat
    (ruff's `in_parentheses_only_group` inside optional parentheses)."""

    id: int
    contents: object


@dataclass(frozen=True, slots=True)
class FitsExpanded:
    """Brackets inside optional parentheses: while group `id` is flat, measured as if they
    broke, so that the optional parentheses stay out when the text up to them fits."""

    id: int
    contents: object


@dataclass(frozen=True, slots=True)
class Suffix:
    """A trailing comment: printed at the end of its line, its width reserved."""

    text: str


FLAT, BREAK = 0, 1


@dataclass
class Printer:
    out: list[str] = field(default_factory=list)
    modes: dict[int, int] = field(default_factory=dict)

    def print(self, doc: object, indent: int, column: int | None = None) -> str:
        """`doc` at `indent`, from `column` (its start, if not given); the first line is
        not indented (the caller wrote that)."""
        column, suffixes = (indent if column is None else column), []
        if column != indent:
            self.out.append(" " * column)  # measured as if the line so far were there
        stack = [(indent, BREAK, doc)]
        while stack:
            ind, mode, d = stack.pop()
            match d:
                case "\n":
                    self.out.extend(suffixes)
                    suffixes.clear()
                    self.out.append("\n" + " " * ind)
                    column = ind
                case str():
                    self.out.append(d)
                    column += width(d)
                case list():
                    stack.extend((ind, mode, x) for x in reversed(d))
                case BestFit(variants=variants):
                    stack.append((ind, mode, self.best(variants, ind, column)))
                case Indent(contents=c):
                    stack.append((ind + INDENT, mode, c))
                case Group(contents=c, id=gid):
                    flat = self.fits([(ind, FLAT, c)], stack, WIDTH - column, gid)
                    m = FLAT if flat else BREAK
                    if gid is not None:
                        self.modes[gid] = m
                    stack.append((ind, m, c))
                case GroupIf(id=gid, contents=c):
                    inner = Group(c) if self.modes.get(gid) == BREAK else c
                    stack.append((ind, mode, inner))
                case FitsExpanded(contents=c):
                    stack.append((ind, mode, c))
                case IfBreaks(id=gid, then=t, other=o):
                    stack.append((ind, mode, t if self.modes.get(gid) == BREAK else o))
                case Suffix(text=t):
                    suffixes.append(t)
                case Line(soft=soft) if mode == FLAT:
                    if not soft:
                        self.out.append(" ")
                        column += 1
                case Line():
                    self.out.extend(suffixes)
                    suffixes.clear()
                    self.out.append("\n" + " " * ind)
                    column = ind
        self.out.extend(suffixes)
        return "".join(self.out)

    def best(self, variants: list, indent: int, column: int) -> object:
        for variant in variants[:-1]:
            trial = Printer(modes=dict(self.modes))
            text = trial.print(variant, indent, column)
            if all(width(line) <= WIDTH for line in text.split("\n")):
                return variant
        return variants[-1]

    def fits(self, todo: list, rest: list, room: int, measured: int | None) -> bool:
        """Whether `todo` fits in `room` columns up to the next line break, with what
        follows it (`rest`, in the modes it was pushed with). Groups in `todo` are flat."""
        modes = dict(self.modes)
        if measured is not None:
            modes[measured] = FLAT
        stack, rest = list(todo), list(rest)
        while room >= 0:
            if not stack:
                if not rest:
                    return True
                stack.append(rest.pop())
            ind, mode, d = stack.pop()
            match d:
                case "\n":
                    return True
                case str():
                    room -= width(d)
                case BestFit(variants=variants):
                    stack.append((ind, mode, variants[0]))
                case list():
                    stack.extend((ind, mode, x) for x in reversed(d))
                case Indent(contents=c) | GroupIf(contents=c):
                    stack.append((ind, mode, c))
                case Group(contents=c, id=gid):
                    if gid is not None:
                        modes[gid] = mode
                    stack.append((ind, mode, c))
                case FitsExpanded(id=gid, contents=c):
                    expand = mode == FLAT and modes.get(gid) == FLAT
                    stack.append((ind, BREAK, c) if expand else (ind, mode, c))
                case IfBreaks(id=gid, then=t, other=o):
                    stack.append((ind, mode, t if modes.get(gid, mode) == BREAK else o))
                case Suffix(text=t):
                    room -= width(t)
                case Line(soft=soft):
                    if mode == BREAK:
                        return True
                    room -= 0 if soft else 1
        return False


__all__ = [
    "BREAK",
    "FLAT",
    "INDENT",
    "LINE",
    "LINE_BREAK",
    "SOFT",
    "WIDTH",
    "BestFit",
    "FitsExpanded",
    "Group",
    "GroupIf",
    "IfBreaks",
    "Indent",
    "Line",
    "Printer",
    "Suffix",
    "width",
]
