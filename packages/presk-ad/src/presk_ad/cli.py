"""`presk-ad [--remat residuals|recompute]`: a `core` document in, the differentiated one out."""

from __future__ import annotations

import sys

from presk_core.codec import decode_core, encode_core
from presk_syntax.codec import DocumentError

from presk_ad.vjp import REMATS, ADError, differentiate

USAGE = "usage: presk-parse FILE | presk-elab | presk-lower | presk-ad [--remat MODE] | presk-dump"


def ad_main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    remat = "residuals"
    if args in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(args) == 2 and args[0] == "--remat" and args[1] in REMATS:
        remat = args[1]
    elif args:
        print(USAGE, file=sys.stderr)
        return 2
    if sys.stdin.isatty() or sys.stdout.isatty():
        print(
            "presk-ad: reads and writes binary documents; use it in a pipe\n" + USAGE,
            file=sys.stderr,
        )
        return 2
    try:
        program, files = decode_core(sys.stdin.buffer.read())
        out = differentiate(program, remat)
    except DocumentError as e:
        print(f"presk-ad: {e}", file=sys.stderr)
        return 1
    except ADError as e:
        print(f"[E7002] Error: cannot differentiate: {e}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(encode_core(out, files.sources))
    return 0


if __name__ == "__main__":
    sys.exit(ad_main())
