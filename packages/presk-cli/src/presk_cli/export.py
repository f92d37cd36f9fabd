"""`presk export`: a program as readable PyTorch, with its conformance test."""

from __future__ import annotations

import sys

import click
from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Label, Severity, emit

from presk_cli.commands import CONST, SEED, _consts, _dims, _fail, entry_fail
from presk_cli.flags import Count
from presk_cli.native import REALIZE


@click.command(
    short_help="Export a program to another framework (PyTorch), or an entry as a C program"
)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--target",
    type=click.Choice(["pytorch", "c"]),
    required=True,
    help="`pytorch`: Python files mirroring the source; `c`: --entry as a C program that"
    " computes the native backend's bits (docs/export-c.md).",
)
@click.option(
    "--mode",
    type=click.Choice(["readable", "scop"]),
    default=None,
    help="`readable` (PyTorch's, the default): a class per module, a function per function,"
    " the source's names; `scop` (with --target c): each nest at point zero, a C function"
    " a polyhedral tool reads.",
)
@click.option(
    "--shapes",
    type=click.Choice(["check", "none"]),
    default="none",
    show_default=True,
    help="`check`: `assert x.shape == (…)` after each binding of a closed shape.",
)
@click.option(
    "--stack",
    type=click.Choice(["loop", "unroll"]),
    default="loop",
    show_default=True,
    help="`loop`: stack{L} as an nn.ModuleList and a loop; `unroll`: the L calls.",
)
@click.option(
    "--conformance-entry",
    "entry",
    metavar="ENTRY",
    help="Also write a conformance test of ENTRY (`f`, `M.f`) against the interpreter.",
)
@click.option(
    "--entry",
    "c_entry",
    metavar="ENTRY",
    help="With --target c: the entry (`f`, `M.f`) the program computes.",
)
@click.option(
    "--realize",
    type=REALIZE,
    default="f64",
    show_default=True,
    help="With --target c: the type of every real, or a realization file (@FILE).",
)
@click.option(
    "--threads",
    type=Count(1, 256),
    default=1,
    show_default=True,
    help="With --target c: threads for the large launches (OpenMP regions; no bit changes).",
)
@click.option(
    "--plan",
    metavar="@FILE",
    help="With --target c: a layout per nest and the realization, from presk plan: the"
    " program's kernels are the plan's (docs/export-c.md).",
)
@click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="A dimension of the entry.")
@click.option(
    "--data",
    "data_file",
    type=click.Path(dir_okay=False),
    help="With --conformance-entry train:K: this .psk.d file instead of the run's data.",
)
@click.option(
    "--serve",
    is_flag=True,
    help="The file's `inference serve` as a loop: with --target pytorch, also serve.py; with"
    " --target c (no --entry), the generation function and ./generate, presk serve's loop.",
)
@CONST
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="The root of the inputs.",
)
@click.option(
    "--weights",
    "weights_file",
    type=click.Path(dir_okay=False),
    metavar="CKPT",
    help="With --target c: the entry's parameter tree from a checkpoint (a .psk.d of"
    " `params M`, as `presk train` writes it): the program's inputs hold it.",
)
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False), help="The folder.")
def export(
    file,
    target,
    mode,
    shapes,
    stack,
    entry,
    c_entry,
    realize,
    threads,
    plan,
    dims,
    data_file,
    serve,
    consts,
    seed,
    weights_file,
    out,
) -> None:
    """Export FILE to PyTorch: one Python file per Presk file it reaches, and with
    --conformance-entry a test that runs the export on the interpreter's inputs."""
    from presk_core.run import EntryError, RunError
    from presk_export import ExportError, Options, export_pytorch, write_files
    from presk_syntax.pipeline import Context

    from presk_cli.pipeline import PIPELINE

    if target == "c":
        if entry is not None or data_file is not None or shapes != "none" or (stack != "loop"):
            click.echo(
                "presk export: --conformance-entry, --data, --shapes and --stack are for"
                " --target pytorch",
                err=True,
            )
            sys.exit(2)
        if serve and (c_entry is not None or mode == "scop"):
            click.echo(
                "presk export: --serve exports the file's `inference serve` (its generation"
                " function and the loop): no --entry, no --mode scop",
                err=True,
            )
            sys.exit(2)
        if mode == "readable":
            click.echo("presk export: --mode readable is for --target pytorch", err=True)
            sys.exit(2)
        if mode == "scop" and threads != 1:
            click.echo("presk export: --mode scop writes each nest at point zero, on one"
                       " thread: no --threads", err=True)  # fmt: skip
            sys.exit(2)
        if mode == "scop" and weights_file is not None:
            click.echo("presk export: --mode scop draws each nest's inputs: no --weights", err=True)
            sys.exit(2)
        if mode == "scop" and plan is not None:
            click.echo("presk export: --mode scop writes each nest at point zero: no --plan",
                       err=True)  # fmt: skip
            sys.exit(2)
        export_c_command(file, c_entry, dims, consts, seed, realize, threads, out, mode,
                         weights_file, plan, serve)  # fmt: skip
        return
    if mode == "scop":
        click.echo("presk export: --mode scop is for --target c", err=True)
        sys.exit(2)
    if (
        c_entry is not None
        or realize != "f64"
        or threads != 1
        or weights_file is not None
        or plan is not None
    ):
        click.echo(
            "presk export: --entry, --realize, --threads, --weights and --plan are for --target c",
            err=True,
        )
        sys.exit(2)
    ctx = Context(consts=_consts(consts))
    sources = ctx.sources
    options = Options(check_shapes=shapes == "check", unroll=stack == "unroll")
    try:  # the list's passes up to elaboration; the export lowers with the checker's
        # signatures (module arguments, which PSK-Core erases: presk_core.lower.lower_checked)
        program = PIPELINE.run("elab", file, ctx).program
        notes: list[ExportError] = []  # what is left out (W8001)
        files = export_pytorch(
            program,
            options,
            entry,
            _dims(dims),
            seed,
            out=out,
            data=data_file,
            notes=notes,
            serve=serve,
        )
    except DiagnosticError as e:
        _fail(e, sources)
    except ExportError as e:
        labels = (Label(e.span, "here"),) if e.span is not None else ()
        emit([Diagnostic(e.code, Severity.ERROR, f"cannot export: {e}", labels)], sources)
        sys.exit(1)
    except (EntryError, RunError) as e:
        entry_fail("export", e, sources)
    emit(
        [
            Diagnostic(n.code, Severity.WARNING, str(n), (Label(n.span, "not exported"),))
            if n.span is not None
            else Diagnostic(n.code, Severity.WARNING, str(n))
            for n in notes
        ],
        sources,
    )
    try:
        written = write_files(out, files)
    except OSError as e:
        click.echo(f"presk export: cannot write into {out}: {e.strerror}", err=True)
        sys.exit(1)
    click.echo(f"presk export: wrote {', '.join(written)}")


def _given(name: str) -> bool:
    """Whether the option `name` was given on the command line (not its default)."""
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(name) not in (
        ParameterSource.DEFAULT,
        None,
    )


def export_c_command(
    file,
    entry,
    dims,
    consts,
    seed,
    realize,
    threads,
    out,
    mode=None,
    weights=None,
    plan=None,
    serve=False,
) -> None:
    """`presk export --target c` (presk_cli.export_c): the summary line, or a diagnostic."""
    from presk_core.run import EntryError, RunError
    from presk_syntax.pipeline import Context

    from presk_cli.export_c import ExportCError, export_c, export_scop
    from presk_cli.native import NativeError, fail
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_cli.serve import ServeError

    if entry is None and not serve:
        click.echo(
            "presk export: --target c needs --entry (the entry the program computes)", err=True
        )
        sys.exit(2)
    ctx = Context(consts=_consts(consts))
    sources = ctx.sources
    given = _given("realize")
    try:
        if serve:  # the block is checked (check=True), as presk serve checks it
            from presk_cli.export_serve import export_serve

            ctx = Context(consts=_consts(consts), check=True, sources=sources)
            line = export_serve(
                file, ctx, _dims(dims), seed, realize, threads, out, weights, plan, given
            )
            click.echo(line)
            return
        core = PIPELINE.run(RUN, file, ctx)
        if mode == "scop":
            line = export_scop(core, entry, _dims(dims), realize, out)
        else:
            line = export_c(
                core, entry, _dims(dims), seed, realize, threads, out, weights, plan, given
            )
    except DiagnosticError as e:
        _fail(e, sources)
    except (EntryError, RunError) as e:
        entry_fail("export", e, sources)
    except NativeError as e:
        fail(e, sources)
    except ExportCError as e:
        emit([Diagnostic(e.code, Severity.ERROR, f"cannot export: {e}")], sources)
        sys.exit(1)
    except ServeError as e:
        emit([Diagnostic(e.code, Severity.ERROR, str(e))], sources)
        sys.exit(1)
    except OSError as e:
        click.echo(f"presk export: cannot write into {out}: {e.strerror}", err=True)
        sys.exit(1)
    click.echo(line)
