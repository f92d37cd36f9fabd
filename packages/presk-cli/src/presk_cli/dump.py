"""`presk-dump`: print any presk document read on standard input, as `presk dump` does
(the documents of presk_cli.pipeline.DOCUMENTS: ast, elab, core, kernel)."""

from __future__ import annotations

import sys

from presk_syntax.codec import DocumentError, load_document
from presk_syntax.diagnostics import DiagnosticError, emit
from presk_syntax.pipeline import Context
from presk_types.driver import checked
from presk_types.passes import Elaborated

from presk_cli.pipeline import DOCUMENTS, show

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
        if kind not in DOCUMENTS:
            raise DocumentError(f"documents of kind `{kind}` are not known to this presk-dump")
        ctx = Context()
        try:
            value = DOCUMENTS[kind].read(data, ctx)
            if isinstance(value, Elaborated):  # checked again, as `presk dump` does
                value = Elaborated(checked(value.program).program)
        except DiagnosticError as e:
            emit(e.diagnostics, ctx.sources)
            return 1
        sys.stdout.write(show(value))
        return 0
    except DocumentError as e:
        print(f"presk-dump: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(dump_main())
