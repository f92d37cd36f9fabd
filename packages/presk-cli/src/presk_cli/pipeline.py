"""The pipeline of the compiler, assembled from the passes each stage package exports.

`PIPELINE` is every pass in the order `presk dump --help` lists them, each after the pass
whose value it takes (checked when it is assembled: presk_syntax.pipeline.Pipeline).
`presk dump --stage`, the usage lines of the stage programs, and `run`, `train`, `bench`,
`serve` and `export` all take their passes from here. Adding a pass: docs/development.md.
"""

from __future__ import annotations

import dataclasses

from presk_ad import passes as ad
from presk_cback import passes as cback
from presk_core import passes as core
from presk_core.ir import Program, format_program
from presk_kernel import passes as kernel
from presk_kernel.ir import Schedule
from presk_opt import passes as opt
from presk_syntax import passes as syntax
from presk_syntax.pipeline import Context, EntryOptions, Parsed, Pass, Pipeline, Text
from presk_types import passes as types
from presk_types.passes import Elaborated

RUN = "core-after-ad"  # the last pass `presk run` runs before the interpreter
TRAIN = "core"  # and `presk train`, before its step (presk_ad.step differentiates it)
NATIVE = "layout"  # the schedule `--backend kernel|native` runs, from RUN's value
SHOWN = kernel.SHOWN  # `presk dump --stage S` prints the value of the pass SHOWN.get(S, S)

_ENTRY = tuple(dataclasses.replace(p, after=RUN) for p in core.ENTRY_PASSES[:1])

PIPELINE = Pipeline(
    syntax.PASSES
    + types.PASSES
    + core.PASSES
    + ad.PASSES
    + opt.PASSES
    + _ENTRY
    + core.ENTRY_PASSES[1:]
    + kernel.PASSES
    + cback.PASSES
    + ad.SENSITIVITY
)

DOCUMENTS = {d.kind: d for d in (syntax.AST, types.ELAB, core.CORE, kernel.KERNEL)}
"""The documents `presk-dump` reads, by kind."""


def native_schedule(core: Program, entry: EntryOptions) -> Schedule:
    """The laid-out schedule `entry` runs on `--backend kernel|native`: `core` (a program
    as the pass RUN gives it, or a training step's) through the passes `kernel` and
    `layout`, each through the PSK-Kernel verifier."""
    return PIPELINE.run(NATIVE, "", Context(entry=entry), core, first=RUN)


def find(name: str) -> Pass:
    return PIPELINE.find(name)


def run_pipeline(
    last: str, path: str, ctx: Context, start: object = None, first: str | None = None
):
    """The value of pass `last` for the file at `path` (or from `start`, the value of pass
    `first`), each value through its pass's verifier."""
    return PIPELINE.run(last, path, ctx, start, first)


def show(value: object, sites: bool = False) -> str:
    """A pass's value as `presk dump` prints it (`sites`: each instruction's site)."""
    match value:
        case Text():
            return str(value)
        case Parsed(_, tree):
            from presk_syntax.dump import format_tree

            return format_tree(tree)
        case Elaborated(program=program):
            from presk_types.dump import dump_elab

            return dump_elab(program)
        case Program():
            return format_program(value, sites)
        case opt.Optimized(program=program):
            return format_program(program, sites)
        case Schedule():
            from presk_kernel.ir import format_schedule

            return format_schedule(value)
    raise TypeError(f"no printer for a {type(value).__name__}")
