"""`presk-dump`: print any presk document read on standard input, as `presk dump` does."""

from __future__ import annotations

import sys

from presk_core.codec import decode_core
from presk_core.ir import format_program
from presk_syntax.codec import DocumentError, decode_ast, load_document
from presk_syntax.diagnostics import DiagnosticError, emit
from presk_syntax.dump import format_tree
from presk_syntax.span import SourceMap
from presk_types.codec import program_of
from presk_types.driver import checked
from presk_types.dump import dump_elab

USAGE = "usage: presk-parse FILE | presk-dump   (prints the document read on standard input)"


def dump_main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        print(USAGE, file=sys.stderr)
        return 0 if args in (["-h"], ["--help"]) else 2
    if sys.stdin.isatty():
        print("presk-dump: no document on standard input\n" + USAGE, file=sys.stderr)
        return 2
    data = sys.stdin.buffer.read()
    if not data:
        print(
            "presk-dump: no document on standard input (did the stage before it fail?)",
            file=sys.stderr,
        )
        return 1
    try:
        kind, _, _ = load_document(data)
        if kind == "ast":
            tree, _ = decode_ast(data)
            sys.stdout.write(format_tree(tree))
            return 0
        if kind == "core":
            program, _ = decode_core(data)
            sys.stdout.write(format_program(program))
            return 0
        if kind == "elab":
            sources = SourceMap()
            try:
                program = checked(program_of(data, sources)).program
            except DiagnosticError as e:
                emit(e.diagnostics, sources)
                return 1
            sys.stdout.write(dump_elab(program))
            return 0
        if kind == "kernel":
            from presk_kernel.codec import decode_kernel
            from presk_kernel.ir import format_schedule

            sys.stdout.write(format_schedule(decode_kernel(data)))
            return 0
        raise DocumentError(f"documents of kind `{kind}` are not known to this presk-dump")
    except DocumentError as e:
        print(f"presk-dump: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(dump_main())
