"""presk-core's passes: `core` (lowering), `specialize` and `flat`; the `core` document
the stage program `presk-lower` writes; `verified`, the Core verifier every pass that
gives PSK-Core is followed by (presk_syntax.pipeline); `unroll_stack`."""

from __future__ import annotations

import os

from presk_syntax.pipeline import Context, Document, Pass, StageProgram
from presk_types.passes import ELAB, Elaborated

from presk_core.ir import Program


def lower_pass(value: Elaborated, ctx: Context) -> Program:
    """The pass `core`: PSK-Core of an elaborated program, with its training runs (whose
    data files the checker opened, `--data` perhaps replacing one); DiagnosticError if the
    program has errors."""
    from dataclasses import replace

    from presk_core.layout import training_of
    from presk_core.lower import lower_program

    ctx.files = [env.source for env in value.program.files]
    core = lower_program(value.program)
    if value.runs:
        core = replace(core, trainings=tuple(training_of(r) for r in value.runs))
    return core


def _entry_error(message: str):
    from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Severity

    return DiagnosticError(Diagnostic("E7001", Severity.ERROR, message))


def specialize_pass(program: Program, ctx: Context) -> Program:
    """The pass `specialize`: the entry `ctx.entry` (as `presk run --entry` takes it: `f`,
    `M.f`, `M{3, 2}.f`) at its dimensions; E7001 when it cannot be."""
    from presk_core.run import EntryError, parse_entry
    from presk_core.specialize import SpecializeError, has_prefix, specialize

    if not ctx.entry.entry:
        raise _entry_error("the pass `specialize` needs an entry: give `--entry F`")
    try:
        e = parse_entry(ctx.entry.entry, program, None, ctx.entry.dim_values)
        dims = {**e.dims, **dict(e.prefix)} if has_prefix(e.function) else e.dims
        return specialize(program, e.function.name, dims)
    except (EntryError, SpecializeError) as err:
        raise _entry_error(str(err)) from None


def flatten_pass(program: Program, ctx: Context) -> Program:
    """The pass `flat`: the specialized entry flattened; E7001 when it cannot be."""
    from presk_core.flatten import FlattenError, flatten

    try:
        return flatten(program)
    except FlattenError as e:
        raise _entry_error(f"cannot flatten: {e}") from None


def verified(program: Program, after: str, made_from: Program | None = None) -> Program:
    """The program, verified (presk_core.verify) when `PRESK_VERIFY=1`: a pass that makes
    an ill-typed program is stopped there, the instruction named. `made_from`: the program
    before the passes that dropped the modules' `.init`s (specialize)."""
    if os.environ.get("PRESK_VERIFY", "") in ("", "0"):
        return program
    from presk_core.verify import VerifyError, verify

    try:
        return verify(program, made_from)
    except VerifyError as e:
        raise VerifyError([f"after the pass `{after}`: {p}" for p in e.problems]) from None


def read_core(data: bytes, ctx: Context) -> Program:
    from presk_core.codec import decode_core

    program, files = decode_core(data)
    ctx.files = list(files.sources)
    return program


def write_core(value: Program, ctx: Context) -> bytes:
    from presk_core.codec import encode_core

    return encode_core(value, ctx.files)


CORE = Document("core", read_core, write_core)

PASSES: tuple[Pass, ...] = (
    Pass(
        "core",
        "PSK-Core: one typed instruction per line, explicit parameter trees",
        Elaborated,
        Program,
        "elab",
        lower_pass,
        StageProgram("presk-lower", ELAB, CORE),
        verified,
    ),
)

ENTRY_PASSES: tuple[Pass, ...] = (  # after differentiation: presk-cli puts them there
    Pass(
        "specialize",
        "PSK-Core of an entry (--entry, --dim) at its dimensions: every shape static",
        Program,
        Program,
        "core",
        specialize_pass,
        verify=verified,
    ),
    Pass(
        "flat",
        "the specialized entry with its parameter trees as their leaves",
        Program,
        Program,
        "specialize",
        flatten_pass,
        verify=verified,
    ),
)


def unroll_stack(program: Program) -> Program:
    """`fold{3} Block.apply(tree, x)` as `slice tree, 0`, `call Block.apply(…)`, three times
    (presk_core.unroll, through the function builder: sites and origins kept)."""
    from presk_core.unroll import unroll_stack as unroll

    return unroll(program)
