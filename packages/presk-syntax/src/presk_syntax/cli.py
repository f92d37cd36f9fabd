"""`presk-parse FILE`: the AST document of a file, in msgpack, on standard output (the
stage program of the pass `ast`, presk_syntax.passes)."""

from __future__ import annotations

import sys

from presk_syntax.passes import PASSES
from presk_syntax.pipeline import Pipeline, stage_main


def parse_main(argv: list[str] | None = None) -> int:
    return stage_main(Pipeline(PASSES), "presk-parse", argv)


if __name__ == "__main__":
    sys.exit(parse_main())
