"""presk-cback's pass `c` (after `layout`): the C of an entry's laid-out kernels, one translation unit
(presk libm, the kernels, `int presk_entry(char *arena)`), and its stage program
`presk-c`: a `kernel` document on standard input, the C on standard output as text
(presk_syntax.pipeline; docs/ir.md, "The stage programs")."""

from __future__ import annotations

from presk_kernel.ir import Schedule
from presk_kernel.passes import KERNEL
from presk_syntax.pipeline import Context, Document, Pass, StageProgram, Text


class CSource(Text):
    """The value of the pass `c`: C text, compiled with `cc -c` as it is."""


def c_pass(schedule: Schedule, ctx: Context) -> CSource:
    """The pass `c`: the entry's C for this machine's compiler (its vector width and the
    GEMM's blocking are the toolchain's; E9001 without a C compiler)."""
    from presk_cback.host import entry_source

    return CSource(entry_source(schedule))


def network_pass(schedule: Schedule, ctx: Context) -> Text:
    """The pass `network`: the entry's calls as an outline (presk_cback.network)."""
    from presk_cback.network import outline

    return Text(outline(schedule))


def _no_reading(data: bytes, ctx: Context) -> CSource:  # C is the end of the pipe
    from presk_syntax.codec import DocumentError

    raise DocumentError("C is not read back by a stage program")


C = Document("c", _no_reading, lambda text, ctx: text.encode("utf-8"), binary=False)

PASSES: tuple[Pass, ...] = (
    Pass(
        "c",
        "the C of an entry's kernels (--entry, --dim): presk libm, the kernels, presk_entry",
        Schedule,
        CSource,
        "layout",
        c_pass,
        StageProgram("presk-c", KERNEL, C),
    ),
    Pass(
        "network",
        "the entry's calls (--entry, --dim) as an outline: each call, the kernels its body"
        " launches and its temporaries' bytes (presk explain's network.svg)",
        Schedule,
        Text,
        "layout",
        network_pass,
    ),
)
