"""presk-types's pass `elab` and the `elab` document the stage program `presk-elab`
writes (presk_syntax.pipeline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from presk_syntax.passes import AST
from presk_syntax.pipeline import Context, Document, Option, Parsed, Pass, StageProgram

if TYPE_CHECKING:  # `presk --help` does not load the elaboration
    from presk_types.elab import Program
    from presk_types.serving import Serve
    from presk_types.training import Run


@dataclass(frozen=True, slots=True)
class Elaborated:
    """The value of the pass `elab`: the elaborated program, and, when the checker ran
    (`ctx.check`), the main file's training runs and its `inference serve`."""

    program: Program
    runs: tuple[Run, ...] = ()
    serves: tuple[Serve, ...] = ()


def elab_pass(parsed: Parsed, ctx: Context) -> Elaborated:
    """The pass `elab`: the elaborated program of a parsed file (its imports read). With
    `ctx.check`, the checker runs too and leaves its diagnostics in `ctx.diagnostics`;
    without, the errors of checking come out of lowering."""
    source, tree = parsed
    given = {tree.path: (source, tree)}
    if ctx.check:
        from presk_types.driver import check_file

        checked = check_file(tree.path, ctx.consts, ctx.sources, given, ctx.data_header)
        ctx.diagnostics.extend(checked.diagnostics)
        out = Elaborated(checked.program, tuple(checked.runs), tuple(checked.serves))
    else:
        from presk_types.elab import load_program

        out = Elaborated(load_program(tree.path, ctx.consts, ctx.sources, given))
    ctx.files = [env.source for env in out.program.files]
    return out


def read_elab(data: bytes, ctx: Context) -> Elaborated:
    from presk_types.codec import program_of

    program = program_of(data, ctx.sources)
    ctx.files = [env.source for env in program.files]
    return Elaborated(program)


def write_elab(value: Elaborated, ctx: Context) -> bytes:
    from presk_types.codec import encode_elab

    return encode_elab(value.program, ctx.consts)


def _const(ctx: Context, text: str) -> None:
    name, eq, value = text.partition("=")
    if not eq:
        raise ValueError(text)
    ctx.consts[name] = value


ELAB = Document("elab", read_elab, write_elab)
CONST = Option("--const", "--const NAME=V", _const, repeat=True)

PASSES: tuple[Pass, ...] = (
    Pass(
        "elab",
        "the elaborated program: imports, constants, instances, signatures",
        Parsed,
        Elaborated,
        "ast",
        elab_pass,
        StageProgram("presk-elab", AST, ELAB, (CONST,)),
    ),
)
