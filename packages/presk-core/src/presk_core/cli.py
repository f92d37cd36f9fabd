"""`presk-lower`: an `elab` document on standard input, the `core` one on standard output."""

from __future__ import annotations

import sys

from presk_syntax.codec import DocumentError
from presk_syntax.diagnostics import DiagnosticError, emit
from presk_syntax.span import SourceMap
from presk_types.codec import program_of

from presk_core.codec import encode_core
from presk_core.lower import lower_program

USAGE = "usage: presk-parse FILE | presk-elab | presk-lower | presk-dump"


def lower_main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        print(USAGE, file=sys.stderr if args not in (["-h"], ["--help"]) else sys.stdout)
        return 0 if args in (["-h"], ["--help"]) else 2
    if sys.stdin.isatty() or sys.stdout.isatty():
        print(
            "presk-lower: reads and writes binary documents; use it in a pipe\n" + USAGE,
            file=sys.stderr,
        )
        return 2
    sources = SourceMap()
    try:
        program = program_of(sys.stdin.buffer.read(), sources)
        core = lower_program(program)
    except DocumentError as e:
        print(f"presk-lower: {e}", file=sys.stderr)
        return 1
    except DiagnosticError as e:
        emit(e.diagnostics, sources)
        return 1
    sys.stdout.buffer.write(encode_core(core, [env.source for env in program.files]))
    return 0


if __name__ == "__main__":
    sys.exit(lower_main())
