"""The passes of the compiler, as data; `unroll_stack`.

`PASSES` is the one list of the compiler's stages: each a name, the kind of document it
takes and the kind it gives, the pass it comes after, a line of description, the function
that runs it (`module:function`, imported when used), and its stage program (`presk-lower`)
with the options that program takes. `presk dump --stage` offers every pass that gives a
printable document; the stage programs (`presk-parse`, `presk-elab`, `presk-lower`,
`presk-ad`) are `stage_main(name)`; `presk run`, `train` and `export` run `pipeline(last)`.
Adding a stage is adding an entry here (docs/development.md, "Adding a pass").

A pass's function takes the value the pass before it gave and a `Context` (the source
map, the constants' overrides, the options) and returns its own value: a path for `file`,
`(Source, SourceFile)` for `ast`, an elaborated program for `elab`, a PSK-Core program
for `core`, text for `tokens`. User errors are `DiagnosticError`s.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field

from presk_syntax.span import SourceMap

from presk_core.ir import Program


@dataclass(frozen=True, slots=True)
class Pass:
    name: str  # `presk dump --stage NAME`
    takes: str  # the kind of value it reads: file, ast, elab, core
    gives: str  # the kind it gives: tokens, ast, elab, core
    after: str | None  # the pass whose value it takes (None: the file itself)
    line: str  # what it does, in a line
    run: str  # `module:function`, the function that runs it
    program: str | None = None  # its stage program, reading and writing documents
    options: tuple[str, ...] = ()  # what the stage program takes: FILE, --const, --remat


PASSES: tuple[Pass, ...] = (
    Pass(
        "tokens",
        "file",
        "tokens",
        None,
        'the token stream (Kw(Module) @ 77..83, Ident("Linear") @ 84..90, …)',
        "presk_syntax.cli:tokens_pass",
    ),
    Pass(
        "ast",
        "file",
        "ast",
        None,
        "the syntax tree",
        "presk_syntax.cli:parse_pass",
        "presk-parse",
        ("FILE",),
    ),
    Pass(
        "elab",
        "ast",
        "elab",
        "ast",
        "the elaborated program: imports, constants, instances, signatures",
        "presk_types.cli:elab_pass",
        "presk-elab",
        ("--const",),
    ),
    Pass(
        "core",
        "elab",
        "core",
        "elab",
        "PSK-Core: one typed instruction per line, explicit parameter trees",
        "presk_core.cli:lower_pass",
        "presk-lower",
    ),
    Pass(
        "core-after-ad",
        "core",
        "core",
        "core",
        "PSK-Core after differentiation: grad replaced by generated .vjp, .grad, .fwd and .bwd",
        "presk_ad.cli:ad_pass",
        "presk-ad",
        ("--remat",),
    ),
    Pass(
        "core-opt",
        "core",
        "core",
        "core-after-ad",
        "PSK-Core after the e-graph optimizer (--opt): exact rules, the cheapest program",
        "presk_opt.optimize:opt_pass",
    ),
    Pass(
        "specialize",
        "core",
        "core",
        "core-after-ad",
        "PSK-Core of an entry (--entry, --dim) at its dimensions: every shape static",
        "presk_core.specialize:specialize_pass",
    ),
    Pass(
        "flat",
        "core",
        "core",
        "specialize",
        "the specialized entry with its parameter trees as their leaves",
        "presk_core.flatten:flatten_pass",
    ),
    Pass(
        "sched",
        "core",
        "sched",
        "core-after-ad",
        "the fusion groups of an entry (--entry, --dim), and the launches they remove",
        "presk_kernel.cli:sched_pass",
    ),
    Pass(
        "kernel",
        "core",
        "kernel",
        "core-after-ad",
        "PSK-Kernel: the kernels an entry (--entry, --dim) launches, after fusion",
        "presk_kernel.cli:kernel_pass",
    ),
)


@dataclass
class Context:
    """What a pass reads besides its input: the sources (for diagnostics), the constants'
    overrides, the options; `check` asks the elaboration to run the checker (a stage
    program, `presk dump --stage elab`), whose diagnostics it leaves in `diagnostics`."""

    sources: SourceMap = field(default_factory=SourceMap)
    consts: dict[str, str] = field(default_factory=dict)
    remat: str = "residuals"
    check: bool = False
    data_header: object = None
    diagnostics: list = field(default_factory=list)
    files: list = field(default_factory=list)  # the sources a document records
    options: dict[str, object] = field(default_factory=dict)  # for passes added later


def find(name: str) -> Pass:
    """The pass called `name`; KeyError (its message the choices) when there is none."""
    for p in PASSES:
        if p.name == name:
            return p
    raise KeyError(f"no stage `{name}`; stages: {', '.join(p.name for p in PASSES)}")


def pipeline(last: str) -> list[Pass]:
    """The passes that make `last`'s value from a file, in order."""
    out = [find(last)]
    while out[0].after is not None:
        out.insert(0, find(out[0].after))
    return out


def runner(p: Pass):
    module, _, name = p.run.partition(":")
    return getattr(importlib.import_module(module), name)


def run_pipeline(
    last: str, path: str, ctx: Context, start: object = None, first: str | None = None
):
    """The value of pass `last` for the file at `path` (or from `start`, the value of
    pass `first`)."""
    passes = pipeline(last)
    value: object = path
    if first is not None:
        passes = passes[[p.name for p in passes].index(first) + 1 :]
        value = start
    lowered = None  # the first PSK-Core program: its modules' `.init`s give the trees
    for p in passes:
        value = runner(p)(value, ctx)
        if p.gives == "core":
            verified(value, p.name, lowered)
            lowered = lowered or value
    return value


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


# ---- documents ---------------------------------------------------------------------------


def read_document(kind: str, data: bytes, ctx: Context) -> object:
    """A document of `kind` as the value a pass takes."""
    if kind == "ast":
        from presk_syntax.codec import decode_ast

        tree, files = decode_ast(data)
        ctx.files = list(files.sources)
        return files.sources[0], tree
    if kind == "elab":
        from presk_types.codec import program_of

        program = program_of(data, ctx.sources)
        ctx.files = [env.source for env in program.files]
        return program
    if kind == "core":
        from presk_core.codec import decode_core

        program, files = decode_core(data)
        ctx.files = list(files.sources)
        return program
    raise ValueError(kind)


def write_document(kind: str, value: object, ctx: Context) -> bytes:
    if kind == "ast":
        from presk_syntax.codec import encode_ast

        source, tree = value
        return encode_ast(tree, source)
    if kind == "elab":
        from presk_types.codec import encode_elab

        return encode_elab(value, ctx.consts)
    if kind == "core":
        from presk_core.codec import encode_core

        return encode_core(value, ctx.files)
    raise ValueError(kind)


def show(kind: str, value: object) -> str:
    """A value as `presk dump` prints it."""
    if kind in ("tokens", "sched", "kernel"):  # text already
        return value
    if kind == "ast":
        from presk_syntax.dump import format_tree

        return format_tree(value[1])
    if kind == "elab":
        from presk_types.dump import dump_elab

        return dump_elab(value)
    if kind == "core":
        from presk_core.ir import format_program

        return format_program(value)
    raise ValueError(kind)


def usage(p: Pass) -> str:
    """`usage: presk-parse FILE | presk-elab [--const NAME=V]… | presk-lower | presk-dump`:
    the pipe of stage programs up to p."""
    parts = []
    for q in pipeline(p.name):
        if q.program is None:
            continue
        shown = {"FILE": "FILE", "--const": "[--const NAME=V]…", "--remat": "[--remat MODE]"}
        parts.append(" ".join([q.program, *(shown[o] for o in q.options)]))
    return "usage: " + " | ".join([*parts, "presk-dump"])


def stage_main(program: str, argv: list[str] | None = None) -> int:
    """A stage program: its options, a document on standard input (a file for the first),
    the pass, the document it gives on standard output. Exit 0, 1 (an error), 2 (usage)."""
    from presk_syntax.codec import DocumentError
    from presk_syntax.diagnostics import DiagnosticError, emit

    (p,) = [q for q in PASSES if q.program == program]
    args = sys.argv[1:] if argv is None else list(argv)
    text = usage(p)
    if args in (["-h"], ["--help"]):
        print(text)
        return 0
    ctx = Context(check=True)
    path = None
    while args:
        a = args.pop(0)
        if a == "--const" and "--const" in p.options and args and "=" in args[0]:
            name, _, value = args.pop(0).partition("=")
            ctx.consts[name] = value
        elif a == "--remat" and "--remat" in p.options and args:
            from presk_ad.vjp import REMATS

            ctx.remat = args.pop(0)
            if ctx.remat not in REMATS:
                print(text, file=sys.stderr)
                return 2
        elif "FILE" in p.options and path is None and not a.startswith("-"):
            path = a
        else:
            print(text, file=sys.stderr)
            return 2
    if "FILE" in p.options and path is None:
        print(text, file=sys.stderr)
        return 2
    binary = "reads and writes binary documents; use it in a pipe"
    if p.takes == "file" and sys.stdout.isatty():
        print(f"{program}: the `{p.gives}` document is binary; pipe it", file=sys.stderr)
        return 2
    if p.takes != "file" and (sys.stdin.isatty() or sys.stdout.isatty()):
        print(f"{program}: {binary}\n{text}", file=sys.stderr)
        return 2
    try:
        value = path if p.takes == "file" else read_document(p.takes, sys.stdin.buffer.read(), ctx)
        out = runner(p)(value, ctx)
    except DocumentError as e:
        print(f"{program}: {e}", file=sys.stderr)
        return 1
    except DiagnosticError as e:
        emit(e.diagnostics, ctx.sources)
        return 1
    emit(ctx.diagnostics, ctx.sources)
    if any(d.is_error for d in ctx.diagnostics):
        return 1
    sys.stdout.buffer.write(write_document(p.gives, out, ctx))
    sys.stdout.buffer.flush()
    return 0


# ---- unroll_stack ----------------------------------------------------------------------------


def unroll_stack(program: Program) -> Program:
    """`fold{3} Block.apply(tree, x)` as `slice tree, 0`, `call Block.apply(…)`, three times
    (presk_core.unroll, through the function builder: sites and origins kept)."""
    from presk_core.unroll import unroll_stack as unroll

    return unroll(program)
