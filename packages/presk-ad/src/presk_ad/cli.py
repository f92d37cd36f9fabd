"""`presk-ad [--remat residuals|recompute]`: a `core` document in, the differentiated one
out (the stage program of the pass `core-after-ad`, presk_ad.passes)."""

from __future__ import annotations

import sys

from presk_syntax.pipeline import Pipeline, stage_main

from presk_ad.passes import UP_TO_AD


def ad_main(argv: list[str] | None = None) -> int:
    return stage_main(Pipeline(UP_TO_AD), "presk-ad", argv)


if __name__ == "__main__":
    sys.exit(ad_main())
