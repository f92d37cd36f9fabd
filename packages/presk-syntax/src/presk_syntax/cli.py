"""`presk-parse FILE`: the AST document of a file, in msgpack, on standard output."""

from __future__ import annotations

import sys

from presk_syntax.codec import encode_ast
from presk_syntax.diagnostics import DiagnosticError, emit
from presk_syntax.parse import parse_source, read_source
from presk_syntax.span import SourceMap

USAGE = "usage: presk-parse FILE  (writes the AST document to standard output)"


def parse_main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 0 if args in (["-h"], ["--help"]) else 2
    if sys.stdout.isatty():
        print(
            "presk-parse: the AST document is binary; pipe it, e.g. to presk-dump", file=sys.stderr
        )
        return 2
    sources = SourceMap()
    try:
        source = sources.add(read_source(args[0]))
        tree = parse_source(source)
    except DiagnosticError as e:
        emit(e.diagnostics, sources)
        return 1
    sys.stdout.buffer.write(encode_ast(tree, source))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(parse_main())
