"""Passes as values, the pipeline they make, and the stage program of any pass.

A `Pass` is a name, a line of description, the type of the value it takes and of the value
it gives, the pass it comes after (`None`: it reads the file) and its function, called as
`run(value, ctx)`. Each stage package declares its own passes (`presk_X.passes.PASSES`);
presk-cli assembles them all (`presk_cli.pipeline.PIPELINE`), and a stage program
assembles those up to its own (so nothing imports a later stage). `Pipeline(passes)`
checks, when it is made, that each pass takes what the pass it comes after gives.

What a pass reads besides its value is the `Context`: the sources (for diagnostics), the
constants' overrides, and the typed options of the passes that take them (`remat`,
`entry`, `pricing`). A pass that has a stage program says which document it reads and
writes (`Document`, each package's codec) and which options the program takes (`Option`);
`stage_main(pipeline, name)` is that program: exit 0, 1 (an error diagnostic or a bad
document), 2 (usage). docs/development.md, "Adding a pass", says how to add one.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from presk_syntax.span import SourceMap

if TYPE_CHECKING:  # `presk --help` assembles the pipeline without loading the syntax tree
    from presk_syntax.ast import SourceFile
    from presk_syntax.span import Source


class Parsed(NamedTuple):
    """The value of the pass `ast`: a file's source and its syntax tree."""

    source: Source
    tree: SourceFile


class Text(str):
    """A value that is already what `presk dump` prints (the stages `tokens`, `sched`)."""


@dataclass(frozen=True, slots=True)
class EntryOptions:
    """The entry the passes after differentiation specialize, lower and compile, as
    `presk run --entry E --dim N=V… --realize T --threads K` takes it; `realize` is a type
    of every real (`f64`, `f32`, `bf16`) or a realization value (presk-kernel's); `args`
    the run's inputs when a run has them (they give the hyperparameters' values); `plan` a
    layout per nest, by site (presk-kernel's `Layout`s: step 17's), None for a run's."""

    entry: str | None = None
    dims: tuple[tuple[str, int], ...] = ()
    realize: object = "f64"
    threads: int = 1
    args: tuple | None = None
    plan: object = None

    @property
    def dim_values(self) -> dict[str, int]:
        return dict(self.dims)


@dataclass(frozen=True, slots=True)
class Pricing:
    """What prices the optimizer's extraction (`--opt --profile FILE`): a machine profile
    and the `(function, dims)` it is priced at."""

    profile: str
    entries: tuple[tuple[str, dict[str, int]], ...] = ()


@dataclass
class Context:
    """What a pass reads besides its value. `check` asks the elaboration to run the checker
    (whose diagnostics it leaves in `diagnostics`); `files` are the sources the document a
    pass writes records."""

    sources: SourceMap = field(default_factory=SourceMap)
    consts: dict[str, str] = field(default_factory=dict)
    check: bool = False
    data_header: Callable[[str], str] | None = None
    diagnostics: list = field(default_factory=list)
    files: list = field(default_factory=list)
    remat: str = "residuals"  # presk-ad's reverse mode
    entry: EntryOptions = field(default_factory=EntryOptions)
    pricing: Pricing | None = None  # presk-opt's cost model (None: operation counts)


@dataclass(frozen=True, slots=True)
class Document:
    """A kind of document a stage program reads or writes: the value a pass takes as read
    from one, and the document of the value a pass gives. `binary=False`: text a terminal
    may show (the C stage's)."""

    kind: str
    read: Callable[[bytes, Context], Any]
    write: Callable[[Any, Context], bytes]
    binary: bool = True


@dataclass(frozen=True, slots=True)
class Option:
    """An option of a stage program: `--flag VALUE`, shown in its usage line as `shown`;
    `apply(ctx, VALUE)` sets it (ValueError: a usage error)."""

    flag: str
    shown: str
    apply: Callable[[Context, str], None]
    required: bool = False
    repeat: bool = False  # may be given more than once (`…` in the usage line)


@dataclass(frozen=True, slots=True)
class StageProgram:
    """The console script of a pass: `reads` None when it reads a FILE argument. `since`:
    the pass whose value it reads when it runs the passes after that one up to its own
    (`presk-kernel`: `kernel` then `layout`); None, its own pass alone."""

    name: str
    reads: Document | None
    writes: Document
    options: tuple[Option, ...] = ()
    since: str | None = None

    def usage(self) -> str:
        shown = [
            (o.shown if o.required else f"[{o.shown}]") + ("…" if o.repeat else "")
            for o in self.options
        ]
        return " ".join([self.name, *(["FILE"] if self.reads is None else []), *shown])


@dataclass(frozen=True, slots=True)
class Pass:
    """A pass: `run(value, ctx)` from a `takes` to a `gives`; `verify(value, name, first)`,
    when given, checks what it gives (the IR's verifier: `first` is the first value of the
    pipeline it checked); `program` its stage program."""

    name: str  # `presk dump --stage NAME`
    line: str  # what it does, in a line (`presk dump --help`)
    takes: type
    gives: type
    after: str | None  # the pass whose value it takes (None: the file, a path)
    run: Callable[[Any, Context], Any]
    program: StageProgram | None = None
    verify: Callable[[Any, str, Any], Any] | None = None


class Pipeline:
    """Passes in the order of `presk dump --help`, each after one before it (a tree rooted
    at the file). TypeError when a pass does not take what the pass it follows gives."""

    def __init__(self, passes: tuple[Pass, ...]) -> None:
        self.passes = tuple(passes)
        seen: dict[str, Pass] = {}
        for p in self.passes:
            if p.name in seen:
                raise TypeError(f"two passes named `{p.name}`")
            given = str if p.after is None else _gives(seen, p)
            if not issubclass(given, p.takes):
                raise TypeError(
                    f"the pass `{p.name}` takes {p.takes.__name__}; `{p.after or 'the file'}`"
                    f" gives {given.__name__}"
                )
            seen[p.name] = p

    def __iter__(self):
        return iter(self.passes)

    def find(self, name: str) -> Pass:
        """The pass called `name`; KeyError (its message the choices) when there is none."""
        for p in self.passes:
            if p.name == name:
                return p
        names = ", ".join(p.name for p in self.passes)
        raise KeyError(f"no stage `{name}`; stages: {names}")

    def chain(self, last: str) -> list[Pass]:
        """The passes that make `last`'s value from a file, in order."""
        out = [self.find(last)]
        while out[0].after is not None:
            out.insert(0, self.find(out[0].after))
        return out

    def run(
        self, last: str, path: str, ctx: Context, start: object = None, first: str | None = None
    ) -> Any:
        """The value of pass `last` for the file at `path` (or from `start`, the value of
        pass `first`), each value checked by its pass's verifier."""
        passes = self.chain(last)
        value: object = path
        if first is not None:
            passes = passes[[p.name for p in passes].index(first) + 1 :]
            value = start
        earlier: dict[object, object] = {}  # per verifier, the first value it checked
        for p in passes:
            value = p.run(value, ctx)
            if not isinstance(value, p.gives):  # a bug of the pass, not a user's error
                raise TypeError(f"the pass `{p.name}` gave a {type(value).__name__}")
            if p.verify is not None:
                value = p.verify(value, p.name, earlier.get(p.verify))
                earlier.setdefault(p.verify, value)
        return value

    def usage(self, name: str) -> str:
        """`usage: presk-parse FILE | presk-elab [--const NAME=V]… | presk-lower | presk-dump`:
        the pipe of stage programs up to the pass `name`."""
        programs = [p.program for p in self.chain(name) if p.program is not None]
        dump = ["presk-dump"] if programs[-1].writes.binary else []  # text ends the pipe
        return "usage: " + " | ".join([*(q.usage() for q in programs), *dump])

    def program(self, name: str) -> Pass:
        (p,) = [q for q in self.passes if q.program is not None and q.program.name == name]
        return p


def _gives(seen: dict[str, Pass], p: Pass) -> type:
    if p.after not in seen:
        raise TypeError(f"the pass `{p.name}` comes after `{p.after}`, which is not before it")
    return seen[p.after].gives


def with_entry(ctx: Context, **changes: object) -> None:
    """`ctx.entry` with `changes` (an option of a stage program)."""
    ctx.entry = dataclasses.replace(ctx.entry, **changes)


def stage_main(pipeline: Pipeline, program: str, argv: list[str] | None = None) -> int:
    """A stage program: its options, a document on standard input (a file for the first),
    the pass, the document it gives on standard output. Exit 0, 1 (an error), 2 (usage)."""
    from presk_syntax.codec import DocumentError
    from presk_syntax.diagnostics import DiagnosticError, emit

    p = pipeline.program(program)
    prog = p.program
    args = sys.argv[1:] if argv is None else list(argv)
    text = pipeline.usage(p.name)
    if args in (["-h"], ["--help"]):
        print(text)
        return 0
    ctx = Context(check=True)
    path, given = None, set()
    options = {o.flag: o for o in prog.options}
    while args:
        a = args.pop(0)
        if a in options and args:
            try:
                options[a].apply(ctx, args.pop(0))
            except ValueError:
                print(text, file=sys.stderr)
                return 2
            given.add(a)
        elif prog.reads is None and path is None and not a.startswith("-"):
            path = a
        else:
            print(text, file=sys.stderr)
            return 2
    missing = (prog.reads is None and path is None) or any(
        o.required and o.flag not in given for o in prog.options
    )
    if missing:
        print(text, file=sys.stderr)
        return 2
    out_binary = prog.writes.binary and sys.stdout.isatty()
    if prog.reads is None and out_binary:
        print(f"{program}: the `{prog.writes.kind}` document is binary; pipe it", file=sys.stderr)
        return 2
    if prog.reads is not None and (sys.stdin.isatty() or out_binary):
        binary = "reads and writes binary documents; use it in a pipe"
        print(f"{program}: {binary}\n{text}", file=sys.stderr)
        return 2
    data = b"" if prog.reads is None else sys.stdin.buffer.read()
    if prog.reads is not None and not data:
        why = "did the stage before it fail?"
        print(f"{program}: no document on standard input ({why})", file=sys.stderr)
        return 1
    try:
        value = path if prog.reads is None else prog.reads.read(data, ctx)
        if prog.since is not None:  # each pass through its verifier, as the pipeline runs it
            out = pipeline.run(p.name, "", ctx, value, first=prog.since)
        else:
            out = p.run(value, ctx)
            if p.verify is not None:
                out = p.verify(out, p.name, None)
        emit(ctx.diagnostics, ctx.sources)
        if any(d.is_error for d in ctx.diagnostics):
            return 1
        data = prog.writes.write(out, ctx)
    except DocumentError as e:
        print(f"{program}: {e}", file=sys.stderr)
        return 1
    except DiagnosticError as e:
        emit(e.diagnostics, ctx.sources)
        return 1
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return 0
