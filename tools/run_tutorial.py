#!/usr/bin/env python3
"""Run a runnable tutorial: every ```sh block of a markdown document, checked against its output.

The format is described in docs/tutorial-format.md. Usage:

    python3 tools/run_tutorial.py docs/tutorial.md [--step TEXT] [--list] [-v]

Exit status: 0 when every block passed, 1 when a block failed, 2 for a malformed
document or bad usage. Standard library only: any python3 from 3.10 on runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

WILDCARD = "\u22ef"  # ⋯ ; presk prints … (U+2026), which stays literal
DEFAULT_TIMEOUT = 600.0
SHORT_OUTPUT = 40  # actual outputs up to this many lines are shown in full on failure
MAX_NAME = 60  # step names are cut to this width in the table
RESOLVE_LIMIT = 4_000_000  # beyond this many line pairs, a failure's diff shows masks as written

FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})[ \t]*(.*?)[ \t]*$")
EXIT_OPTION = re.compile(r"^exit=(\d{1,3})$")


# ---------------------------------------------------------------------------------------------
# The document


@dataclass(frozen=True, slots=True)
class Block:
    """A command block with its expected output; `line` is its opening fence's line."""

    line: int
    commands: tuple[str, ...]
    expected: tuple[str, ...]
    exit_code: int


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    line: int
    blocks: tuple[Block, ...]


class DocumentError(Exception):
    """The document breaks the format; `problems` are (line, message) pairs."""

    def __init__(self, problems: list[tuple[int, str]]) -> None:
        super().__init__(f"{len(problems)} problem(s)")
        self.problems = problems


@dataclass(frozen=True, slots=True)
class Heading:
    line: int
    name: str


@dataclass(frozen=True, slots=True)
class Fence:
    line: int
    info: str
    body: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Prose:
    line: int


Token = Heading | Fence | Prose


def closes(line: str, marker: str) -> bool:
    """A closing fence: the opening's character, at least as many, nothing after."""
    stripped = line.strip()
    if len(line) - len(line.lstrip(" ")) > 3 or not stripped:
        return False
    return set(stripped) == {marker[0]} and len(stripped) >= len(marker)


def heading_name(line: str) -> str | None:
    """The text of a level-2 ATX heading (optional closing #s removed), else None."""
    if line.rstrip() != "##" and not line.startswith("## "):
        return None
    return re.sub(r"(^|\s+)#+\s*$", "", line[2:].strip()).strip()


def scan(lines: Sequence[str]) -> Iterator[Token]:
    """Cut the document into headings, fenced blocks and prose lines (blank lines vanish)."""
    i = 0
    while i < len(lines):
        line = lines[i]
        opening = FENCE_OPEN.match(line)
        if opening and not (opening[2][0] == "`" and "`" in opening[3]):
            indent, marker, info = opening.groups()
            end = next((j for j in range(i + 1, len(lines)) if closes(lines[j], marker)), None)
            if end is None:
                raise DocumentError([(i + 1, f"fence {marker} is never closed")])
            body = tuple(dedent(body_line, len(indent)) for body_line in lines[i + 1 : end])
            yield Fence(i + 1, info, body)
            i = end + 1
            continue
        name = heading_name(line)
        if name is not None:
            yield Heading(i + 1, name)
        elif line.strip():
            yield Prose(i + 1)
        i += 1


def dedent(line: str, width: int) -> str:
    """Remove up to `width` leading spaces, as CommonMark does for an indented fence."""
    spaces = len(line) - len(line.lstrip(" "))
    return line[min(spaces, width) :]


def fence_kind(info: str) -> str:
    words = info.split()
    return words[0] if words else ""


def parse_exit_code(fence: Fence, problems: list[tuple[int, str]]) -> int:
    """The N of ```sh exit=N (0 without it); anything else after `sh` is a problem."""
    code = 0
    for word in fence.info.split()[1:]:
        option = EXIT_OPTION.match(word)
        if option is None or int(option[1]) > 255:
            problems.append((fence.line, f"unknown option {word!r} after ```sh (only exit=N)"))
        else:
            code = int(option[1])
    return code


def parse_commands(fence: Fence, problems: list[tuple[int, str]]) -> tuple[str, ...]:
    """One command a line; a trailing backslash joins the next line; `#` lines are comments."""
    commands: list[str] = []
    pending: list[str] = []
    for line in fence.body:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending.append(line.rstrip())
        if not pending[-1].endswith("\\"):
            commands.append("\n".join(pending))
            pending = []
    if pending:
        problems.append((fence.line, "the last command ends with a continuation backslash"))
    if not commands and not pending:
        problems.append((fence.line, "command block has no commands"))
    return tuple(commands)


def normalize(lines: Sequence[str]) -> tuple[str, ...]:
    """Trailing whitespace of each line and trailing blank lines of the whole do not count."""
    stripped = [line.rstrip() for line in lines]
    while stripped and not stripped[-1]:
        stripped.pop()
    return tuple(stripped)


class StepBuilder:
    """Collects the steps while the tokens go by; a command block waits for its output."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, int, list[Block]]] = [("preamble", 1, [])]
        self.waiting: Fence | None = None
        self.problems: list[tuple[int, str]] = []

    def feed(self, token: Token) -> None:
        if self.waiting is not None:
            if isinstance(token, Fence) and fence_kind(token.info) == "output":
                if token.info != "output":
                    self.problems.append((token.line, "```output takes no options"))
                self.add_block(self.waiting, token)
                self.waiting = None
                return
            self.missing_output()
        match token:
            case Heading(line, name):
                self.steps.append((name, line, []))
            case Fence(line, info, _) if fence_kind(info) == "sh":
                self.waiting = token
            case Fence(line, info, _) if fence_kind(info) == "output":
                self.problems.append((line, "output block without a command block before it"))

    def missing_output(self) -> None:
        assert self.waiting is not None
        message = "command block is not followed by an ```output block"
        self.problems.append((self.waiting.line, message))
        self.waiting = None

    def add_block(self, command: Fence, output: Fence) -> None:
        exit_code = parse_exit_code(command, self.problems)
        commands = parse_commands(command, self.problems)
        expected = normalize(output.body)
        self.steps[-1][2].append(Block(command.line, commands, expected, exit_code))

    def finish(self) -> list[Step]:
        if self.waiting is not None:
            self.missing_output()
        if self.problems:
            raise DocumentError(sorted(self.problems))
        return [Step(name, line, tuple(blocks)) for name, line, blocks in self.steps]


def parse_document(text: str) -> list[Step]:
    """The steps of a tutorial; raises DocumentError listing every problem found."""
    builder = StepBuilder()
    for token in scan(text.splitlines()):
        builder.feed(token)
    return builder.finish()


# ---------------------------------------------------------------------------------------------
# Matching an output against its expectation


def line_pattern(expected: str) -> re.Pattern[str]:
    """⋯ inside a line matches any text of that line; everything else is literal."""
    parts = (re.escape(part) for part in expected.split(WILDCARD))
    return re.compile(".*?".join(parts))


def is_wildcard_line(expected: str) -> bool:
    return expected.strip() == WILDCARD


def fits(expected: str, actual: str) -> bool:
    return line_pattern(expected).fullmatch(actual) is not None


def output_matches(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """Both sides normalized; a line holding only ⋯ matches zero or more lines.

    The set of actual positions reachable after each expected line is carried forward,
    which explores every way the wildcard lines could split the output (full backtracking)
    in time proportional to the product of the lengths.
    """
    reachable = {0}
    for line in expected:
        if not reachable:
            return False
        if is_wildcard_line(line):
            reachable = set(range(min(reachable), len(actual) + 1))
            continue
        reachable = {j + 1 for j in reachable if j < len(actual) and fits(line, actual[j])}
    return len(actual) in reachable


def resolve_expected(expected: Sequence[str], actual: Sequence[str]) -> list[str]:
    """The expectation with its masks filled in from the output, where they line up.

    For the diff of a failed block only: each ⋯ line becomes the lines it absorbs and each
    line with ⋯ that matches becomes the actual line, so that the diff shows real changes
    only. The alignment maximizes the expected lines matched (a longest common subsequence).
    """
    if len(expected) * len(actual) > RESOLVE_LIMIT:
        return list(expected)
    best = alignment_scores(expected, actual)
    resolved: list[str] = []
    i = j = 0
    while i < len(expected):
        line = expected[i]
        if is_wildcard_line(line):
            if j < len(actual) and best[i][j] == best[i][j + 1]:
                resolved.append(actual[j])
                j += 1
            else:
                i += 1
        elif j < len(actual) and best[i][j] == best[i + 1][j + 1] + 1 and fits(line, actual[j]):
            resolved.append(actual[j])
            i, j = i + 1, j + 1
        elif best[i][j] == best[i + 1][j]:
            resolved.append(line)
            i += 1
        else:
            j += 1
    return resolved


def alignment_scores(expected: Sequence[str], actual: Sequence[str]) -> list[list[int]]:
    """best[i][j]: most expected lines of expected[i:] matched in order within actual[j:]."""
    n, m = len(expected), len(actual)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        wildcard = is_wildcard_line(expected[i])
        for j in range(m - 1, -1, -1):
            score = max(best[i + 1][j], best[i][j + 1])
            if not wildcard and fits(expected[i], actual[j]):
                score = max(score, best[i + 1][j + 1] + 1)
            best[i][j] = score
        best[i][m] = best[i + 1][m]
    return best


# ---------------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True, slots=True)
class CommandResult:
    command: str
    exit_code: int | None  # None: killed at the timeout
    output: str
    seconds: float


@dataclass(frozen=True, slots=True)
class BlockResult:
    block: Block
    commands: tuple[CommandResult, ...]
    actual: tuple[str, ...]
    output_ok: bool

    @property
    def exit_ok(self) -> bool:
        return all(result.exit_code == self.block.exit_code for result in self.commands)

    @property
    def passed(self) -> bool:
        return self.output_ok and self.exit_ok

    @property
    def seconds(self) -> float:
        return sum(result.seconds for result in self.commands)


@dataclass(frozen=True, slots=True)
class StepResult:
    step: Step
    blocks: tuple[BlockResult, ...]

    @property
    def commands(self) -> int:
        return sum(len(block.commands) for block in self.blocks)

    @property
    def passed(self) -> bool:
        return all(block.passed for block in self.blocks)

    @property
    def seconds(self) -> float:
        return sum(block.seconds for block in self.blocks)


@dataclass(frozen=True, slots=True)
class Settings:
    root: Path
    timeout: float
    verbose: bool


def command_environment(root: Path) -> dict[str, str]:
    """The caller's environment, colours off, a UTF-8 C locale, the workspace's tools first
    (where the caller's PATH has them already, its order is kept: a folder the caller put
    before them, as the tutorial's tests do, stays first)."""
    env = dict(os.environ)
    env["NO_COLOR"] = "1"
    env["LC_ALL"] = "C.UTF-8"
    venv_bin = str(root / ".venv" / "bin")
    path = env.get("PATH", "")
    if venv_bin not in path.split(os.pathsep):
        env["PATH"] = venv_bin + os.pathsep + path if path else venv_bin
    return env


def run_command(command: str, settings: Settings, env: dict[str, str]) -> CommandResult:
    """One `bash -c`, stdout and stderr in one pipe so that their order is kept."""
    start = time.monotonic()
    with subprocess.Popen(
        ["bash", "-c", command],
        cwd=settings.root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so a timeout kills its children too
    ) as process:
        try:
            raw, _ = process.communicate(timeout=settings.timeout)
            exit_code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            kill_group(process)
            raw, _ = process.communicate()
            exit_code = None
    output = raw.decode("utf-8", errors="replace")
    return CommandResult(command, exit_code, output, time.monotonic() - start)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group may be gone already
        os.killpg(process.pid, signal.SIGKILL)


def run_block(block: Block, settings: Settings, env: dict[str, str]) -> BlockResult:
    """Every command of the block runs, even after a failure, so the diff shows everything."""
    results = []
    for command in block.commands:
        if settings.verbose:
            print(f"$ {command}", flush=True)
        results.append(run_command(command, settings, env))
    actual = normalize("".join(result.output for result in results).split("\n"))
    return BlockResult(block, tuple(results), actual, output_matches(block.expected, actual))


def run_steps(
    steps: Sequence[Step], settings: Settings, shown: Callable[[str], None] | None = None
) -> list[StepResult]:
    """Each step's blocks run in turn; `shown` (on a terminal) is told which step runs, and
    replaces that line with the step's outcome when it finishes."""
    env = command_environment(settings.root)
    results = []
    todo = sum(1 for step in steps if step.blocks)
    for step in steps:
        if settings.verbose and step.blocks:
            print(f"## {step.name}", flush=True)
        at = f"[{sum(1 for r in results if r.step.blocks) + 1}/{todo}] {step.name}"
        if shown is not None and step.blocks:
            shown(f"{at}: running…")
        blocks = tuple(run_block(block, settings, env) for block in step.blocks)
        results.append(StepResult(step, blocks))
        if shown is not None and step.blocks:
            done = results[-1]
            outcome = "passed" if done.passed else "FAILED"
            shown(f"\r\x1b[K{at}: {outcome}, {done.commands} commands, {done.seconds:.1f} s\n")
    return results


def terminal_line(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


# ---------------------------------------------------------------------------------------------
# Reporting


def shorten(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "\u2026"


def render_table(results: Sequence[StepResult]) -> list[str]:
    """One row per step that has commands, then a summary line."""
    rows = [result for result in results if result.step.blocks]
    width = max([len("step")] + [len(shorten(row.step.name)) for row in rows])
    lines = [f"{'step':<{width}}  {'commands':>8}  {'result':<6}  {'time':>9}"]
    for row in rows:
        status = "passed" if row.passed else "FAILED"
        name = shorten(row.step.name)
        lines.append(f"{name:<{width}}  {row.commands:>8}  {status:<6}  {row.seconds:>7.2f} s")
    lines.append(summary(rows))
    return lines


def summary(rows: Sequence[StepResult]) -> str:
    blocks = [block for row in rows for block in row.blocks]
    failed = sum(not block.passed for block in blocks)
    commands = sum(row.commands for row in rows)
    seconds = sum(row.seconds for row in rows)
    verdict = "all passed" if not failed else f"{failed} of {len(blocks)} blocks FAILED"
    return (
        f"{plural(len(rows), 'step')}, {plural(commands, 'command')}: {verdict} ({seconds:.2f} s)"
    )


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def render_commands(result: BlockResult) -> list[str]:
    lines = []
    for command in result.commands:
        lines.extend(prompt(command.command))
        if command.exit_code is None:
            lines.append("    -> timed out, killed")
        elif command.exit_code != result.block.exit_code:
            code = command.exit_code
            got = f"killed by signal {-code}" if code < 0 else f"exited {code}"
            lines.append(f"    -> {got}, expected exit {result.block.exit_code}")
    return lines


def prompt(command: str) -> list[str]:
    first, *rest = command.split("\n")
    return [f"  $ {first}"] + [f"    {line}" for line in rest]


def fenced(info: str, lines: Sequence[str]) -> list[str]:
    """Lines in a fence long enough for their own backticks, ready to paste into the document."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *lines, fence]


def render_failure(path: str, step: Step, result: BlockResult, timeout: float) -> list[str]:
    lines = ["", f"FAILED {path}:{result.block.line} (step {step.name!r})"]
    lines += render_commands(result)
    if any(command.exit_code is None for command in result.commands):
        lines.append(f"  (timeout: {timeout:g} s per command)")
    if result.output_ok:
        lines.append("  output matched")
        return lines
    expected = resolve_expected(result.block.expected, result.actual)
    diff = difflib.unified_diff(expected, result.actual, "expected", "actual", lineterm="")
    lines += list(diff)
    if len(result.actual) <= SHORT_OUTPUT:
        lines += ["actual output:", *fenced("output", result.actual)]
    return lines


def render_list(path: str, steps: Sequence[Step]) -> list[str]:
    lines = []
    for step in steps:
        lines.append(step.name)
        if not step.blocks:
            lines.append("  (no commands)")
        for block in step.blocks:
            exit_note = f"  (exit={block.exit_code})" if block.exit_code else ""
            lines.append(f"  {path}:{block.line}{exit_note}")
            lines += [f"  {line}" for command in block.commands for line in prompt(command)]
    return lines


# ---------------------------------------------------------------------------------------------
# Command line


class UsageError(Exception):
    """Bad usage or an unreadable document: one line on stderr, exit 2."""


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {text!r}")
    return value


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="run_tutorial.py",
        description="Run every ```sh block of a tutorial and compare with its ```output block.",
        epilog="Exit status: 0 all passed, 1 a block failed, 2 malformed document or bad usage.",
    )
    parser.add_argument("document", help="the markdown document, e.g. docs/tutorial.md")
    parser.add_argument(
        "--step",
        action="append",
        metavar="TEXT",
        help="run only the steps whose heading contains TEXT (case-insensitive; repeatable). "
        "Later steps may need files that earlier steps write.",
    )
    parser.add_argument(
        "--skip-step",
        action="append",
        metavar="TEXT",
        help="leave out the steps whose heading contains TEXT (case-insensitive; repeatable)",
    )
    parser.add_argument("--list", action="store_true", help="print steps and commands, run none")
    parser.add_argument(
        "--root", type=Path, metavar="DIR", help="working directory of the commands"
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"seconds allowed to each command (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print commands as they run")
    return parser


def read_document(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"is a directory, not a document: {path}") from None
    except UnicodeDecodeError:
        raise UsageError(f"not UTF-8 text: {path}") from None
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None


def default_root(document: Path) -> Path:
    """The repository root: the parent of the document's docs/ (else the document's folder)."""
    folder = document.resolve().parent
    return folder.parent if folder.name == "docs" else folder


def resolve_root(document: Path, root: Path | None) -> Path:
    chosen = root.resolve() if root is not None else default_root(document)
    if not chosen.is_dir():
        raise UsageError(f"root is not a directory: {chosen}")
    return chosen


def select_steps(
    steps: Sequence[Step], wanted: Sequence[str] | None, unwanted: Sequence[str] | None = None
) -> list[Step]:
    def names(step: Step, texts: Sequence[str]) -> bool:
        return any(text.lower() in step.name.lower() for text in texts)

    chosen = [s for s in steps if names(s, wanted)] if wanted else list(steps)
    if wanted and not chosen:
        raise UsageError(f"no step heading contains {' or '.join(map(repr, wanted))}")
    return [s for s in chosen if not names(s, unwanted)] if unwanted else chosen


def report_problems(path: str, error: DocumentError) -> None:
    for line, message in error.problems:
        print(f"{path}:{line}: {message}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    path = str(args.document)
    text = read_document(Path(args.document))
    try:
        steps = select_steps(parse_document(text), args.step, args.skip_step)
    except DocumentError as error:
        report_problems(path, error)
        return 2
    if args.list:
        print("\n".join(render_list(path, steps)))
        return 0
    settings = Settings(resolve_root(Path(args.document), args.root), args.timeout, args.verbose)
    # a line per step as it finishes, on a terminal only (the table on stdout is the record)
    shown = terminal_line if sys.stderr.isatty() and not args.verbose else None
    results = run_steps(steps, settings, shown)
    lines = render_table(results)
    for result in results:
        for block in result.blocks:
            if not block.passed:
                lines += render_failure(path, result.step, block, settings.timeout)
    print("\n".join(lines))
    return 0 if all(result.passed for result in results) else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    try:
        return run(args)
    except (UsageError, OSError) as error:  # OSError: e.g. no bash
        print(f"run_tutorial: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("run_tutorial: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
