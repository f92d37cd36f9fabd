"""`presk check --summary`: each function's type and its lets, then its regularity and effects."""

from __future__ import annotations

from presk_types.check import Checker, FnInfo
from presk_types.elab import Program
from presk_types.training import Run, training_summary


def _in_program_order(checker: Checker) -> list[FnInfo]:
    rank = {f.path: i for i, f in enumerate(checker.program.files)}
    position = {}
    for info in checker.order:
        position[id(info)] = (rank[info.file.path], info.decl.span.start)
    return sorted(checker.order, key=lambda info: position[id(info)])


def summary(checker: Checker, runs: list[Run] | None = None) -> str:
    """The text of `--summary`: the functions in import order, then the file's own."""
    program: Program = checker.program
    fns = [info for info in _in_program_order(checker) if info.ok]
    lines = []
    for info in fns:
        shown = info.declared if info.declared is not None else info.result
        lines.append(f"{info.file.name} {info.key} : {shown}")
        lines.extend(f"    let {name} : {t}" for name, t in info.lets)
    lines.append("-- regularity and effects --")
    for info in fns:
        lines.append(_regularity(info))
    for env in program.files:
        for name in env.modules:
            lines.append(f"{name}.init : [key C∞] uses Rand")
    lines.extend(_regularity(info) for info in checker.lambdas)
    for run in runs or []:
        lines.extend(training_summary(run))
    return "\n".join(lines) + "\n"


def _regularity(info: FnInfo) -> str:
    classes = ", ".join(f"{name} {cls}" for name, cls, _ in info.classes)
    effects = ", ".join(info.effects) or "none"
    return f"{info.key} : [{classes}] uses {effects}"
