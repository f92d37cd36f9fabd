"""`presk`, the umbrella command: one process that runs the stages' functions in order.

The help follows the specification's layout (clap's): `Usage: presk <COMMAND>`, the
commands with their one-line descriptions, the options. A command appears here when it is
implemented; exit codes are 0 success, 1 an error diagnostic, 2 usage, 101 an internal
error (a bug of presk's; `PRESK_DEBUG=1` prints its traceback), and 128 + the signal's number
when a signal stops it: 130 SIGINT, 143 SIGTERM, 129 SIGHUP (each a line on standard error,
the temporaries of unfinished writes removed), 141 when standard output is a closed pipe
(`presk run … | head`: quiet, the status a program killed by SIGPIPE has; docs/cli.md).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
import traceback
import warnings

import click

from presk_cli import __version__

COMMANDS = {
    "check": "presk_cli.commands:check",
    "run": "presk_cli.commands:run",
    "export": "presk_cli.export:export",
    "dump": "presk_cli.commands:dump",
    "train": "presk_cli.commands:train",
    "serve": "presk_cli.serve:serve",
    "explain": "presk_cli.explain:explain",
    "memory": "presk_cli.memory:memory",
    "plan": "presk_cli.planning:plan",
    "autotune": "presk_cli.planning:autotune",
    "reprice": "presk_cli.layout_reports:reprice",
    "rank": "presk_cli.layout_reports:rank",
    "refit": "presk_cli.layout_reports:refit",
    "bench": "presk_cli.bench:bench",
    "calibrate": "presk_cli.precision:calibrate",
    "solve": "presk_cli.solve:solve",
    "quantize": "presk_cli.quantize:quantize",
    "data": "presk_cli.data:data",
}
"""The commands: each imported when it is used (or listed)."""

ORDER = ("check run export dump train serve plan explain memory autotune reprice rank refit"
         " bench calibrate solve quantize data").split()  # fmt: skip
"""The order of the specification's `presk --help` (L50–L68); a command not in it comes after."""

BUILT = (
    "front-end, reference interpreter, native backend, e-graph optimizer, training, serving,"
    " precision budgets, layout plans, PyTorch and C exports, a compilation as a document"
)
"""What is built, as the banner says it (the specification's words, for what has landed)."""

DESCRIPTION = f"Presk compiler ({__version__}: {BUILT})"


class ClapFormatter(click.HelpFormatter):
    """A command's help in clap's layout, as `presk --help` has it: the description first,
    unindented, then `Usage: …`, then the sections (`Arguments:`, `Options:`, `Commands:`),
    and `-h, --help` as `Print help`."""

    HEADINGS = {"Positional arguments": "Arguments"}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.usage = ""
        self.headed = False

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        self.usage = f"Usage: {prog} {args}".rstrip() + "\n"  # written before the sections

    def write_text(self, text: str) -> None:
        if self.headed:
            return super().write_text(text)
        indent, self.current_indent = self.current_indent, 0  # the description: unindented
        try:
            super().write_text(text)
        finally:
            self.current_indent = indent

    def write_heading(self, heading: str) -> None:
        if not self.headed:
            self._usage_after_description()
        super().write_heading(self.HEADINGS.get(heading, heading))

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        rows = [(t, "Print help" if t == "-h, --help" else d) for t, d in rows]
        super().write_dl(rows, col_max, col_spacing)

    def getvalue(self) -> str:
        if not self.headed:
            self._usage_after_description()
        return super().getvalue()

    def _usage_after_description(self) -> None:
        self.headed = True
        text = "".join(self.buffer).strip("\n")
        self.buffer = [f"{text}\n\n" if text else "", self.usage, "\n"]


class PreskContext(click.Context):
    formatter_class = ClapFormatter


def _clap(command: click.Command) -> click.Command:
    """`command` (a group's subcommands too) with its help in clap's layout."""
    command.context_class = PreskContext
    for sub in getattr(command, "commands", {}).values():
        _clap(sub)
    return command


class PreskGroup(click.Group):
    """A group whose help reads as the specification's `presk --help`, its commands loaded
    from `COMMANDS` when used: a command's module imports what it needs when it runs."""

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in COMMANDS:
            module, _, attr = COMMANDS[name].partition(":")
            self.add_command(_clap(getattr(importlib.import_module(module), attr)), name)
        return self.commands.get(name)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as e:  # click offers only the commands loaded
            raise click.exceptions.NoSuchCommand(
                e.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        every = {name: self.get_command(ctx, name) for name in self.list_commands(ctx)}
        shown = {name: c for name, c in every.items() if not c.hidden}
        width = (
            max(len(name) for name in [*shown, "help"]) + 1
        )  # clap's: two spaces after the longest
        lines = [DESCRIPTION, "", "Usage: presk <COMMAND>", "", "Commands:"]
        for name, command in shown.items():
            lines.append(f"  {name:<{width}} {command.get_short_help_str(limit=200)}")
        lines.append(
            f"  {'help':<{width}} Print this message or the help of the given subcommand(s)"
        )
        lines += ["", "Options:", "  -h, --help     Print help", "  -V, --version  Print version"]
        formatter.write("\n".join(lines) + "\n")

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = [*COMMANDS, *(n for n in self.commands if n not in COMMANDS)]
        return sorted(names, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # past click, which would exit 1 for it (its convention)
            raise ClosedPipe() from None


class ClosedPipe(Exception):
    """Standard output is a closed pipe (`presk run … | head`)."""


@click.group(
    cls=PreskGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    invoke_without_command=True,
)
@click.version_option(
    __version__, "-V", "--version", prog_name="presk", message="%(prog)s %(version)s"
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help(), err=True)
        ctx.exit(2)


class _Command(click.Command):
    context_class = PreskContext


@cli.command("help", hidden=True, cls=_Command)
@click.argument("command", required=False)
@click.pass_context
def help_command(ctx: click.Context, command: str | None) -> None:
    """Print this message or the help of the given subcommand(s)."""
    group = ctx.parent.command
    if command is None:
        click.echo(ctx.parent.get_help())
        return
    sub = group.get_command(ctx, command)
    if sub is None:
        raise click.UsageError(f"no command `{command}`", ctx)
    with sub.context_class(sub, info_name=command, parent=ctx.parent) as sub_ctx:
        click.echo(sub.get_help(sub_ctx))


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised wherever the process is, as SIGINT raises KeyboardInterrupt:
    every `except KeyboardInterrupt` and `finally` on the way out runs for the three."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOPS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}
"""The signals presk stops on cleanly, and what it says."""


def stopped(e: BaseException) -> tuple[int, str]:
    """The exit status (128 + the signal's number) and the words for a KeyboardInterrupt."""
    # click turns a KeyboardInterrupt (ours too) into Abort: the signal is its cause
    signum = getattr(e, "signum", getattr(e.__cause__, "signum", signal.SIGINT))
    words = STOPS[signum] + ("" if signum == signal.SIGINT else f" ({signal.Signals(signum).name})")
    return 128 + signum, words


def _raise(signum: int, frame) -> None:
    raise Interrupted(signum)


def _handle_signals() -> dict:
    """SIGTERM and SIGHUP raise Interrupted; the handlers before, to restore (main() also runs
    inside other programs: the tests, the fuzzer)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    before = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        handler = signal.getsignal(signum)
        if handler is not signal.SIG_IGN:  # `nohup` keeps SIGHUP ignored
            before[signum] = handler
            signal.signal(signum, _raise)
    return before


def mask_signals() -> set | None:
    """No second signal in the middle of the way out (a Ctrl-C pressed twice); the mask before."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, set(STOPS))


def _current_mask() -> set | None:
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, set())


def _clean_up() -> None:
    data = sys.modules.get("presk_core.data")  # loaded only by a command that writes
    if data is not None:
        data.remove_temporaries()


def _quiet_stdout() -> None:
    """Standard output to /dev/null: the interpreter's last flush finds no closed pipe."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    """The console script: exit codes 0, 1, 2, 128 + a signal; never a traceback."""
    # numpy's RuntimeWarnings (an overflow to inf, 0/0 to NaN) are values of IEEE arithmetic:
    # presk prints them as results, never as warnings
    warnings.simplefilter("ignore", RuntimeWarning)
    # a program calling main() gets its signal mask back (the train command masks on its way
    # out, and children, which inherit the mask, would never see a signal)
    before, mask = _handle_signals(), _current_mask()
    try:
        result = cli.main(args=argv, prog_name="presk", standalone_mode=False)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:
        e.show()
        return 2
    except (click.exceptions.Abort, KeyboardInterrupt) as e:
        mask_signals()
        _clean_up()
        status, words = stopped(e)
        click.echo(f"presk: {words}", err=True)
        return status
    except (BrokenPipeError, ClosedPipe):  # `presk run … | head`: quiet, as SIGPIPE stops one
        _quiet_stdout()
        return 128 + signal.SIGPIPE
    except Exception as e:  # a bug of presk's: one line, and how to report it
        from presk_syntax.diagnostics import DiagnosticError, emit

        if isinstance(e, DiagnosticError):  # one no command caught (the C toolchain's, cache's)
            emit(e.diagnostics, {})
            return 1
        if os.environ.get("PRESK_DEBUG"):  # PRESK_DEBUG=1: the traceback as well
            traceback.print_exc()
        click.echo(
            f"presk: internal error: {type(e).__name__}: {e} (please report it with the command"
            " and the file that caused it)",
            err=True,
        )
        return 101
    finally:
        _clean_up()
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        if mask is not None and argv is not None:  # the console script exits masked
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
