"""`presk-c`: a `kernel` document on standard input, the entry's C on standard output (the
stage program of the pass `c`, presk_cback.passes)."""

from __future__ import annotations

import sys


def c_main(argv: list[str] | None = None) -> int:
    from presk_ad.passes import UP_TO_AD
    from presk_kernel import passes as kernel
    from presk_syntax.pipeline import Pipeline, stage_main

    from presk_cback import passes as cback

    return stage_main(Pipeline(UP_TO_AD + kernel.PASSES + cback.PASSES), "presk-c", argv)


if __name__ == "__main__":
    sys.exit(c_main())
