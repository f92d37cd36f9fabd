"""`presk-elab [--const NAME=V]…`: an AST document on standard input, the `elab` one out."""

from __future__ import annotations

import sys

from presk_syntax.codec import DocumentError, decode_ast
from presk_syntax.diagnostics import DiagnosticError, emit
from presk_syntax.span import SourceMap

from presk_types.codec import encode_elab
from presk_types.driver import check_file

USAGE = "usage: presk-parse FILE | presk-elab [--const NAME=V]… | presk-dump"


def elab_main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    overrides: dict[str, str] = {}
    while args:
        if args[0] in ("-h", "--help"):
            print(USAGE)
            return 0
        if args[0] == "--const" and len(args) > 1 and "=" in args[1]:
            name, _, value = args[1].partition("=")
            overrides[name] = value
            args = args[2:]
            continue
        print(USAGE, file=sys.stderr)
        return 2
    if sys.stdin.isatty() or sys.stdout.isatty():
        print(
            "presk-elab: reads and writes binary documents; use it in a pipe\n" + USAGE,
            file=sys.stderr,
        )
        return 2
    try:
        tree, files = decode_ast(sys.stdin.buffer.read())
    except DocumentError as e:
        print(f"presk-elab: {e}", file=sys.stderr)
        return 1
    sources = SourceMap()
    parsed = {tree.path: (files.sources[0], tree)}
    try:
        checked = check_file(tree.path, overrides, sources, parsed)
    except DiagnosticError as e:
        emit(e.diagnostics, sources)
        return 1
    emit(checked.diagnostics, sources)
    if not checked.ok:
        return 1
    sys.stdout.buffer.write(encode_elab(checked.program, overrides))
    return 0


if __name__ == "__main__":
    sys.exit(elab_main())
