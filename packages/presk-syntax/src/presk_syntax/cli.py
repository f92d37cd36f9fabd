"""`presk-parse FILE`: the AST document of a file, in msgpack, on standard output.

The stage program is presk-core's `stage_main("presk-parse")` (presk_core.passes, the list
of passes); here are the functions of the passes `tokens` and `ast`.
"""

from __future__ import annotations

import sys

from presk_syntax.parse import parse_source, parse_tree, read_source


def parse_pass(path: str, ctx) -> tuple:
    """The pass `ast`: a file's `(Source, SourceFile)`; DiagnosticError on a syntax error."""
    source = ctx.sources.add(read_source(path))
    ctx.files = [source]
    return source, parse_source(source)


def tokens_pass(path: str, ctx) -> str:
    """The pass `tokens`: a file's tokens, a line each."""
    from presk_syntax.dump import tokens

    source = ctx.sources.add(read_source(path))
    data = source.text.encode("utf-8")
    return "\n".join(tokens(parse_tree(data), data)) + "\n"


def parse_main(argv: list[str] | None = None) -> int:
    from presk_core.passes import stage_main  # the list of passes is presk-core's

    return stage_main("presk-parse", argv)


if __name__ == "__main__":
    sys.exit(parse_main())
