"""The checking of a file from its path: what `presk check` and `presk-elab` run."""

from __future__ import annotations

from dataclasses import dataclass, field

from presk_syntax.diagnostics import Diagnostic
from presk_syntax.span import SourceMap

from presk_types.check import Checker, check_program
from presk_types.elab import Program, load_program
from presk_types.serving import Serve, check_serves
from presk_types.training import Run, check_optimizer, check_training, open_data


@dataclass
class Checked:
    program: Program
    checker: Checker
    diagnostics: list[Diagnostic]  # in the order of the files, then of the source
    runs: list[Run]  # the main file's training runs
    serves: list[Serve] = field(default_factory=list)  # its `inference serve` (one at most)

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)


def check_file(
    path: str,
    overrides: dict[str, str] | None = None,
    sources: SourceMap | None = None,
    parsed: dict | None = None,
    data_header=None,
) -> Checked:
    """Elaborate and check the program of `path`. DiagnosticError for syntax and import
    errors (which stop everything); the other diagnostics are in `Checked.diagnostics`."""
    program = load_program(path, overrides, sources, parsed)
    return checked(program, data_header)


def checked(program: Program, data_header=None) -> Checked:
    """Check an elaborated program: its functions, then its training runs and its serve."""
    checker = check_program(program)
    rank = {f.path: i for i, f in enumerate(program.files)}

    def where(d: Diagnostic) -> tuple[int, int]:
        if not d.labels:
            return (-1, 0)
        span = d.labels[0].span
        return (rank.get(span.file, len(rank)), span.start)

    runs: list[Run] = []
    found = list(program.diagnostics + checker.diagnostics)
    for block in program.main.optimizers.values():
        found.extend(check_optimizer(block))
    for block in program.main.trainings:
        run = check_training(block, program.main, checker)
        if isinstance(run, Run):
            runs.append(run)
            if data_header is not None:  # a reader of data files (presk-core's), when given
                problem = open_data(run, program.main, data_header)
                if problem is not None:
                    found.append(problem)
        else:
            found.extend(run)
    serves, problems = check_serves(program.main, checker)
    found.extend(problems)
    return Checked(program, checker, sorted(found, key=where), runs, serves)
