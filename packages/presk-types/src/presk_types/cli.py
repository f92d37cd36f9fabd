"""`presk-elab [--const NAME=V]…`: an AST document on standard input, the `elab` one out
(the stage program of the pass `elab`, presk_types.passes)."""

from __future__ import annotations

import sys

from presk_syntax import passes as syntax
from presk_syntax.pipeline import Pipeline, stage_main

from presk_types import passes as types


def elab_main(argv: list[str] | None = None) -> int:
    return stage_main(Pipeline(syntax.PASSES + types.PASSES), "presk-elab", argv)


if __name__ == "__main__":
    sys.exit(elab_main())
