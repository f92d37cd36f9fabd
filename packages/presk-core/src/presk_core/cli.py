"""`presk-lower`: an `elab` document on standard input, the `core` one on standard output
(the stage program of the pass `core`, presk_core.passes)."""

from __future__ import annotations

import sys

from presk_syntax import passes as syntax
from presk_syntax.pipeline import Pipeline, stage_main
from presk_types import passes as types

from presk_core import passes as core


def lower_main(argv: list[str] | None = None) -> int:
    return stage_main(Pipeline(syntax.PASSES + types.PASSES + core.PASSES), "presk-lower", argv)


if __name__ == "__main__":
    sys.exit(lower_main())
