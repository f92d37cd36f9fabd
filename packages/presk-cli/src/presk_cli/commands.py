"""The commands of `presk`, each calling the stages' functions in one process."""

from __future__ import annotations

import sys

import click
from presk_syntax.diagnostics import DiagnosticError, emit
from presk_syntax.dump import format_tree, tokens
from presk_syntax.parse import parse_source, parse_tree, read_source
from presk_syntax.span import SourceMap

# The stages `presk dump` prints, in pipeline order; later stages add theirs here.
STAGES = {
    "tokens": "the token stream (Kw(Module) @ 77..83, Ident(\"Linear\") @ 84..90, …)",
    "ast": "the syntax tree",
}


def _fail(error: DiagnosticError, sources: SourceMap) -> None:
    emit(error.diagnostics, sources)
    sys.exit(1)


@click.command(short_help="Type-check a program: shapes, regularity classes, effects")
@click.argument("file", type=click.Path(dir_okay=False))
def check(file: str) -> None:
    """Check FILE. Silent on success (exit 0); diagnostics on standard error (exit 1).

    This version checks the syntax; elaboration and typing come with presk-types.
    """
    sources = SourceMap()
    try:
        parse_source(sources.add(read_source(file)))
    except DiagnosticError as e:
        _fail(e, sources)


@click.command(short_help="Dump an intermediate representation (development aid)")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--stage",
    required=True,
    type=click.Choice(list(STAGES)),
    help="What to print: " + "; ".join(f"{k}: {v}" for k, v in STAGES.items()),
)
def dump(file: str, stage: str) -> None:
    """Print FILE after a stage of the compiler. The format is not stable."""
    sources = SourceMap()
    try:
        source = read_source(file)
        sources.add(source)
        if stage == "tokens":
            data = source.text.encode("utf-8")
            click.echo("\n".join(tokens(parse_tree(data), data)))
            return
        tree = parse_source(source)
        click.echo(format_tree(tree), nl=False)
    except DiagnosticError as e:
        _fail(e, sources)
