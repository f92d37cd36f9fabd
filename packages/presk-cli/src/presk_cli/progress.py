"""What `presk train` shows on a terminal while it goes (docs/training.md, "On a terminal").

Before step 1, each phase as it starts (`presk train: drawing θ₀ (76 reals)…`), the line
completed with its time when the next begins; then one line overwritten in place, the step
the run is at, its loss, the rate, the time elapsed and the time left at that rate (drawn
at most ten times a second). Only on
a terminal and without `--quiet`: through a pipe or into a file `presk train` prints what it
always printed (the tutorial's outputs, byte for byte).
"""

from __future__ import annotations

import time
from collections.abc import Callable


def clock(seconds: float) -> str:
    """`0:07`, `12:03`, `1:02:03`."""
    s = int(round(seconds))
    h, m, s = s // 3600, s // 60 % 60, s % 60
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def took(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


class Progress:
    """The phases and steps of a run, written by `write` (text without a newline, to a
    terminal); with `write` None (not a terminal, `--quiet`) it shows nothing."""

    def __init__(self, write: Callable[[str], None] | None, command: str = "train") -> None:
        self.write = write
        self.command = command  # the phases' prefix: `presk train: `, `presk bench: `
        self.current: tuple[str, float] | None = None
        self.first = self.horizon = 0
        self.start = self.shown_at = 0.0

    def phase(self, words: str) -> None:
        """A phase begins (`drawing θ₀ (76 reals)`): the one before ends, with its time."""
        if self.write is None:
            return
        self.end_phase()
        self.write(f"presk {self.command}: {words}…")
        self.current = (words, time.perf_counter())

    def end_phase(self, outcome: str | None = None) -> None:
        """The phase under way ends: its line completed (`…`, and `outcome` when given)."""
        if self.write is None or self.current is None:
            return
        words, since = self.current
        self.current = None
        shown = f"{outcome}, " if outcome else ""
        done = took(time.perf_counter() - since)
        self.write(f"\r\x1b[Kpresk {self.command}: {words}: {shown}{done}\n")

    def steps(self, first: int, horizon: int) -> None:
        """The steps after `first` begin (a resumed run's after its step), up to `horizon`."""
        self.end_phase()
        self.first, self.horizon, self.start = first, horizon, time.perf_counter()

    def step(self, t: int, loss: float) -> None:
        """Step t is done: the line of where the run is, overwritten in place."""
        if self.write is None:
            return
        now = time.perf_counter()
        if now - self.shown_at < 0.1 and t != self.horizon:  # a native step: 0.1 ms
            return
        self.shown_at = now
        elapsed = now - self.start
        done = t - self.first
        rate = done / elapsed if elapsed > 0 else 0.0
        left = (self.horizon - t) / rate if rate > 0 else 0.0
        per = f"{rate:.1f} steps/s" if rate >= 1 else f"{elapsed / done:.2f} s/step"
        self.write(
            f"\rstep {t}/{self.horizon}  loss {loss:.6f}  {per}  elapsed {clock(elapsed)}"
            f"  left {clock(left)}\x1b[K"
        )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind, error, trace) -> None:
        if error is not None:  # an error's diagnostic, a signal's line: on a clean line
            self.clear()

    def clear(self) -> None:
        """The step line erased (before a log line, at the end)."""
        if self.write is not None:
            self.write("\r\x1b[K")


__all__ = ["Progress", "clock"]


def on_terminal(command: str) -> Progress:
    """The phases of `presk COMMAND` on standard error when that is a terminal, else none
    (`presk bench`, `presk serve`: their standard output stays as it is)."""
    import sys

    import click

    def write(text: str) -> None:
        click.echo(text, nl=False, err=True)

    return Progress(write if sys.stderr.isatty() else None, command)
