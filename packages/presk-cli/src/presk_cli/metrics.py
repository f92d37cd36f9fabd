"""A training run's metrics as JSON lines (`presk train --metrics FILE.jsonl`) and their plot
(`--plot FILE.png`, `--compare OTHER.jsonl`).

The first line holds the run's settings (`{"presk": "train-metrics", "version": 1, …}`:
the backend, realization, bits, seed, model, objective, data, the tree's layout, the
horizon); each later line one step: `{"step": 1, "epoch": 1, "loss": …, "lr": …,
"grad_norm": …, "seconds": …}`, the numbers those of the log line in full (a double's
shortest text), `seconds` the step's wall time. The file is a log to follow while the run
goes (`tail -f`): each line is written whole and flushed as its step ends, not renamed into
place at the end; its start (the settings, and on `--resume` the lines up to the step
resumed from) is written atomically. tools/experiment_gpt.py and tools/corpus_ladder.py
write theirs with this writer.
"""

from __future__ import annotations

import importlib
import json
import math
import os
from collections.abc import Callable

from presk_core import data as D

KIND = "train-metrics"
VERSION = 1


class MetricsError(Exception):
    """A metrics file that cannot be written or read (E7074), or a plot without matplotlib
    (E7073)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _dump(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(", ", ": "), allow_nan=True)


class MetricsWriter:
    """The metrics of a run, a line a step, to a file and (for `--plot`) kept in memory."""

    def __init__(self, path: str | None, settings: dict, start: int = 0, keep: bool = False,
                 on_step: Callable[[dict], None] | None = None):  # fmt: skip
        """A new file at `path` with `settings` on its first line; from `start` > 0 (a resumed
        run), the lines of the steps up to `start` a file at `path` holds are kept. `keep`:
        the rows in memory too (`rows`), for a plot; `path` None: in memory only. `on_step`
        is given each step's row as it is written (the Python API's callback)."""
        self.path, self.file, self.on_step = path, None, on_step
        self.head = {"presk": KIND, "version": VERSION, **_without_kind(settings)}
        kept = [r for r in _rows_if_any(path) if r["step"] <= start] if start and path else []
        self.rows: list[dict] | None = list(kept) if keep else None
        if path is None:
            return
        try:
            D.write_bytes(path, "".join(_dump(r) + "\n" for r in [self.head, *kept]).encode())
            self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        except OSError as e:
            raise MetricsError("E7074", f"cannot write `{path}`: {_why(e)}") from None

    @classmethod
    def open(
        cls, path: str | None, settings: dict, start: int = 0, keep: bool = False, on_step=None
    ) -> MetricsWriter | None:
        """A writer, or None when neither a file, the rows nor a callback are asked for."""
        if path is None and not keep and on_step is None:
            return None
        return cls(path, settings, start, keep, on_step)

    def step(self, t: int, epoch: int, loss: float, lr: float, norm: float, seconds: float):
        """Step t's line (`epoch` from 0, written from 1 as the log writes it)."""
        row = {"step": t, "epoch": epoch + 1, "loss": loss, "lr": lr, "grad_norm": norm,
               "seconds": round(seconds, 6)}  # fmt: skip
        if self.rows is not None:
            self.rows.append(row)
        if self.on_step is not None:
            self.on_step(dict(row))
        if self.file is None:
            return
        try:
            self.file.write(_dump(row) + "\n")
            self.file.flush()
        except OSError as e:
            raise MetricsError("E7074", f"cannot write `{self.path}`: {_why(e)}") from None

    def close(self) -> None:
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass


def _without_kind(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k not in ("presk", "version")}


def _why(e: OSError) -> str:
    return (e.strerror or str(e)).lower()


def _rows_if_any(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    return read_metrics(path)[1]


def read_metrics(path: str) -> tuple[dict, list[dict]]:
    """A metrics file's settings and its steps' rows; E7074 when it is not one (a line that
    is not JSON, a first line without the settings, a step without its fields). A last line
    cut short (the run stopped in its write) is left out."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except (OSError, UnicodeDecodeError) as e:
        why = _why(e) if isinstance(e, OSError) else "not UTF-8 text"
        raise MetricsError("E7074", f"cannot read `{path}`: {why}") from None
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        lines.pop()  # no newline after it: a line being written
    rows = []
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict):
            raise MetricsError("E7074", f"`{path}`:{number} is not a JSON object")
        rows.append(row)
    if not rows or rows[0].get("presk") != KIND:
        raise MetricsError(
            "E7074", f"`{path}` is not the metrics of a run (its first line has no settings)"
        )
    head, steps = rows[0], rows[1:]
    for number, row in enumerate(steps, 2):
        if not all(isinstance(row.get(k), int | float) for k in ("step", "loss", "grad_norm")):
            raise MetricsError(
                "E7074", f"`{path}`:{number} is not a step's metrics (step, loss, grad_norm)"
            )
    return head, steps


PLOT_EXTRA = "matplotlib"
"""The `plot` extra of presk-cli (pyproject.toml's optional-dependencies), imported by name
when `--plot` asks for it: an optional dependency is never a static import."""


def needs_matplotlib():
    """matplotlib, or E7073 when it is not installed (an optional dependency)."""
    try:
        return importlib.import_module(PLOT_EXTRA)
    except ImportError:
        raise MetricsError(
            "E7073",
            "--plot needs matplotlib, an optional dependency of presk-cli: install"
            " `presk-cli[plot]` (or `uv pip install matplotlib`)",
        ) from None


def plot(path: str, runs: list[tuple[str, list[dict]]]) -> None:
    """The loss and |g| against the step of each run (`runs`: a label and its rows), two
    panels one above the other, the loss on a log scale, written to `path` (a PNG)
    atomically; E7073 without matplotlib (presk-cli's `plot` extra)."""
    matplotlib = needs_matplotlib()
    matplotlib.use("Agg")  # no display: a file
    import io

    figure = importlib.import_module(PLOT_EXTRA + ".figure").Figure(
        figsize=(8, 6), dpi=110, layout="constrained"
    )
    loss_ax, norm_ax = figure.subplots(2, 1, sharex=True)
    for label, rows in runs:
        steps = [r["step"] for r in rows]
        loss_ax.plot(steps, [_positive(r["loss"]) for r in rows], label=label, linewidth=1.2)
        norm_ax.plot(steps, [r["grad_norm"] for r in rows], label=label, linewidth=1.0)
    loss_ax.set_ylabel("loss")
    loss_ax.set_yscale("log")
    norm_ax.set_ylabel("|g| (the gradient's norm)")
    norm_ax.set_yscale("log")
    norm_ax.set_xlabel("step")
    for ax in (loss_ax, norm_ax):
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="upper right", fontsize="small")
    loss_ax.set_title(runs[0][0] if len(runs) == 1 else " vs ".join(label for label, _ in runs))
    blob = io.BytesIO()
    figure.savefig(blob, format="png")
    try:
        D.write_bytes(path, blob.getvalue())
    except OSError as e:
        raise MetricsError("E7074", f"cannot write `{path}`: {_why(e)}") from None


def _positive(x: float) -> float:
    """A loss on a log scale: 0 or less (a loss that reached 0, or a signed one) as NaN, a gap."""
    return x if x > 0 and math.isfinite(x) else math.nan


def label(settings: dict, path: str) -> str:
    """A run's name in a plot's legend: its file's name, model and backend."""
    return (
        f"{os.path.basename(path)}: {settings.get('model', '?')} ({settings.get('backend', '?')})"
    )


__all__ = ["MetricsError", "MetricsWriter", "label", "needs_matplotlib", "plot", "read_metrics"]
