"""`presk-elab [--const NAME=V]…`: an AST document on standard input, the `elab` one out.

The stage program is presk-core's `stage_main("presk-elab")` (presk_core.passes, the list
of passes); here is the function of the pass `elab`.
"""

from __future__ import annotations

import sys


def elab_pass(parsed: tuple, ctx):
    """The pass `elab`: the elaborated program of a parsed file (its imports read). With
    `ctx.check`, the checker runs too and leaves its diagnostics in `ctx.diagnostics`;
    without, the errors of checking come out of lowering."""
    source, tree = parsed
    given = {tree.path: (source, tree)}
    if ctx.check:
        from presk_types.driver import check_file

        checked = check_file(tree.path, ctx.consts, ctx.sources, given, ctx.data_header)
        ctx.diagnostics.extend(checked.diagnostics)
        ctx.options["runs"] = checked.runs  # the main file's training runs
        ctx.options["serves"] = checked.serves  # and its `inference serve`
        program = checked.program
    else:
        from presk_types.elab import load_program

        program = load_program(tree.path, ctx.consts, ctx.sources, given)
    ctx.files = [env.source for env in program.files]
    return program


def elab_main(argv: list[str] | None = None) -> int:
    from presk_core.passes import stage_main  # the list of passes is presk-core's

    return stage_main("presk-elab", argv)


if __name__ == "__main__":
    sys.exit(elab_main())
