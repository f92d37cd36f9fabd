"""`presk-dump`: print any presk document read on standard input, as `presk dump` does."""

from __future__ import annotations

import sys

from presk_syntax.codec import DocumentError, decode_ast, load_document
from presk_syntax.dump import format_tree

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
    try:
        kind, _, _ = load_document(data)
        if kind == "ast":
            tree, _ = decode_ast(data)
            sys.stdout.write(format_tree(tree))
            return 0
        raise DocumentError(f"documents of kind `{kind}` are not known to this presk-dump")
    except DocumentError as e:
        print(f"presk-dump: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(dump_main())
