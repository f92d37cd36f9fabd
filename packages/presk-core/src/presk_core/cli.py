"""`presk-lower`: an `elab` document on standard input, the `core` one on standard output
(`stage_main("presk-lower")`, presk_core.passes); the function of the pass `core`."""

from __future__ import annotations

import sys

from presk_core.passes import stage_main


def lower_pass(program, ctx):
    """The pass `core`: PSK-Core of an elaborated program; DiagnosticError if it has errors."""
    from dataclasses import replace

    from presk_core.layout import training_of
    from presk_core.lower import lower_program

    ctx.files = [env.source for env in program.files]
    core = lower_program(program)
    runs = ctx.options.get("runs")
    if runs:  # the checker opened their data files (and `--data` may have replaced one)
        core = replace(core, trainings=tuple(training_of(r) for r in runs))
    return core


def lower_main(argv: list[str] | None = None) -> int:
    return stage_main("presk-lower", argv)


if __name__ == "__main__":
    sys.exit(lower_main())
