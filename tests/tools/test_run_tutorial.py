"""Tests of tools/run_tutorial.py on small synthetic documents (no presk needed)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "run_tutorial.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("run_tutorial", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_tutorial"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


rt = load_tool()


def doc(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def write_doc(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "docs" / "tutorial.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text(doc(text), encoding="utf-8")
    return path


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    code = rt.main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def problems_of(text: str) -> list[tuple[int, str]]:
    with pytest.raises(rt.DocumentError) as raised:
        rt.parse_document(doc(text))
    return raised.value.problems


# ---------------------------------------------------------------------------------------------
# Parsing

TWO_STEPS = """
    Intro text.

    ```sh
    echo one
    ```

    ```output
    one
    ```

    ## 0. Build and first check

    ```sh exit=3
    sh -c 'echo a; exit 3'
    sh -c 'exit 3'
    ```
    ```output
    a
    ```

    ## 1. Nothing to run ##

    ### a level-3 heading is not a step
"""


def test_steps_and_blocks():
    steps = rt.parse_document(doc(TWO_STEPS))
    assert [step.name for step in steps] == [
        "preamble",
        "0. Build and first check",
        "1. Nothing to run",
    ]
    assert [len(step.blocks) for step in steps] == [1, 1, 0]
    first = steps[0].blocks[0]
    assert (first.line, first.commands, first.expected, first.exit_code) == (
        3,
        ("echo one",),
        ("one",),
        0,
    )
    second = steps[1].blocks[0]
    assert (second.line, second.commands, second.exit_code) == (
        13,
        ("sh -c 'echo a; exit 3'", "sh -c 'exit 3'"),
        3,
    )
    assert steps[1].line == 11


def test_continuation_lines_and_comments():
    steps = rt.parse_document(
        doc("""
        ```sh
        # a comment, not run
        printf '%s\\n' a \\
          b \\
          c

          # an indented comment
        echo d
        ```
        ```output
        ```
        """)
    )
    assert steps[0].blocks[0].commands == ("printf '%s\\n' a \\\n  b \\\n  c", "echo d")
    assert steps[0].blocks[0].expected == ()


def test_other_fences_are_prose_and_headings_inside_fences_are_not_steps():
    steps = rt.parse_document(
        doc("""
        ```bash
        rm -rf /
        ```

        ```console
        $ echo hi
        ```

        ~~~text
        ## not a heading
        ~~~

        ```psk
        fn f() -> ℝ
        ```
        """)
    )
    assert [(step.name, step.blocks) for step in steps] == [("preamble", ())]


def test_a_longer_fence_can_hold_backticks():
    steps = rt.parse_document(
        doc("""
        ```sh
        printf '```\\n'
        ```
        ````output
        ```
        ````
        """)
    )
    assert steps[0].blocks[0].expected == ("```",)


def test_expected_output_ignores_trailing_whitespace_and_blank_lines():
    steps = rt.parse_document(doc("```sh\necho a\n```\n```output\na   \n\nb\t\n\n\n```\n"))
    assert steps[0].blocks[0].expected == ("a", "", "b")


def test_command_block_without_output_block_is_an_error():
    problems = problems_of("""
        ## 1. Step

        ```sh
        echo a
        ```

        Some prose in between.

        ```output
        a
        ```
    """)
    assert (3, "command block is not followed by an ```output block") in problems
    assert (9, "output block without a command block before it") in problems


def test_command_block_at_the_end_without_output_is_an_error():
    assert problems_of("text\n\n```sh\necho a\n```\n") == [
        (3, "command block is not followed by an ```output block")
    ]


def test_a_command_block_followed_by_another_command_block_is_an_error():
    problems = problems_of("```sh\necho a\n```\n```sh\necho b\n```\n```output\nb\n```\n")
    assert problems == [(1, "command block is not followed by an ```output block")]


def test_malformed_blocks():
    assert problems_of("```sh exit=x\necho\n```\n```output\n```\n") == [
        (1, "unknown option 'exit=x' after ```sh (only exit=N)")
    ]
    assert problems_of("```sh\n# only a comment\n```\n```output\n```\n") == [
        (1, "command block has no commands")
    ]
    assert problems_of("```sh\necho a \\\n```\n```output\n```\n") == [
        (1, "the last command ends with a continuation backslash")
    ]
    assert problems_of("x\n\n```sh\necho a\n") == [(3, "fence ``` is never closed")]


# ---------------------------------------------------------------------------------------------
# Matching


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        (["a", "b"], ["a", "b"]),
        ([], []),
        (["a", "⋯", "b"], ["a", "b"]),  # ⋯ matches zero lines
        (["a", "⋯", "b"], ["a", "x", "y", "b"]),
        (["⋯"], []),
        (["⋯"], ["x", "y"]),
        (["⋯", "end"], ["end", "x", "end"]),  # the first "end" must be given back
        (["⋯", "a", "⋯", "b"], ["a", "b", "a", "x", "b"]),
        (["took ⋯ s"], ["took 0.25 s"]),
        (["⋯ and ⋯ end"], ["one and two end"]),
        (["x⋯"], ["x"]),  # in a line, ⋯ matches empty text too
        (["a.c (x+) [y]*"], ["a.c (x+) [y]*"]),  # metacharacters are literal
        (["  ⋯"], ["a", "b"]),  # an indented ⋯ alone is still a line wildcard
    ],
)
def test_output_matches(expected, actual):
    assert rt.output_matches(expected, actual)


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        (["a", "b"], ["a", "c"]),
        (["a"], ["a", "b"]),
        (["a", "b"], ["a"]),
        (["a", "⋯", "b"], ["a", "x"]),
        (["⋯", "end"], ["end", "x"]),
        (["took ⋯ s"], ["took 0.25 ms"]),
        (["took ⋯ s"], ["took", "1 s"]),  # an in-line ⋯ stays within one line
        (["a.c"], ["abc"]),  # . is not a regex wildcard
        (["x …"], ["x anything"]),  # … (U+2026) is literal: presk prints it
        (["x"], ["x y"]),  # a line must match as a whole
        ([], ["x"]),
    ],
)
def test_output_does_not_match(expected, actual):
    assert not rt.output_matches(expected, actual)


def test_ellipsis_is_literal_and_matches_itself():
    assert rt.output_matches(["[0, 0, …"], ["[0, 0, …"])


def test_resolve_expected_fills_masks_in_for_the_diff():
    expected = ["a", "⋯", "t = ⋯ s", "z", "⋯"]
    actual = ["a", "1", "2", "t = 3 s", "q"]
    assert rt.resolve_expected(expected, actual) == ["a", "1", "2", "t = 3 s", "z", "q"]
    assert rt.resolve_expected(["a", "b", "c"], ["a", "c"]) == ["a", "b", "c"]


# ---------------------------------------------------------------------------------------------
# Running


def test_passing_document_exits_0_and_prints_the_table(tmp_path, capsys):
    path = write_doc(tmp_path, TWO_STEPS)
    code, out, err = run_main(capsys, path)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["step", "commands", "result", "time"]
    assert lines[1].split()[:3] == ["preamble", "1", "passed"]
    assert lines[2].split()[:7] == ["0.", "Build", "and", "first", "check", "2", "passed"]
    assert lines[2].endswith(" s")
    assert "Nothing to run" not in out  # steps without commands have no row
    assert lines[3].startswith("2 steps, 3 commands: all passed")


FAILING = """
    ## 1. Good

    ```sh
    echo fine
    ```
    ```output
    fine
    ```

    ## 2. Bad

    ```sh
    echo actual
    ```

    ```output
    expected
    ```
"""


def test_wrong_output_exits_1_with_a_diff(tmp_path, capsys):
    path = write_doc(tmp_path, FAILING)
    code, out, _ = run_main(capsys, path)
    assert code == 1
    assert out.splitlines()[1].split()[:4] == ["1.", "Good", "1", "passed"]
    assert out.splitlines()[2].split()[:4] == ["2.", "Bad", "1", "FAILED"]
    assert "1 of 2 blocks FAILED" in out
    assert f"FAILED {path}:12 (step '2. Bad')" in out
    assert "  $ echo actual" in out
    assert "-expected\n+actual" in out
    assert "actual output:\n```output\nactual\n```" in out


def test_masked_diff_shows_only_real_differences(tmp_path, capsys):
    path = write_doc(
        tmp_path,
        """
        ```sh
        printf 'head\\n1\\n2\\ntime 0.3 s\\nwrong\\n'
        ```
        ```output
        head
        ⋯
        time ⋯ s
        right
        ```
        """,
    )
    code, out, _ = run_main(capsys, path)
    assert code == 1
    diff = out[out.index("--- expected") : out.index("actual output:")].splitlines()
    changed = [line for line in diff if line[:1] in "+-" and line[:3] not in ("---", "+++")]
    assert changed == ["-right", "+wrong"]


def test_non_zero_exit_fails_even_when_the_output_matches(tmp_path, capsys):
    path = write_doc(tmp_path, "```sh\necho a\nsh -c 'exit 3'\n```\n```output\na\n```\n")
    code, out, _ = run_main(capsys, path)
    assert code == 1
    assert "  $ sh -c 'exit 3'\n    -> exited 3, expected exit 0" in out
    assert "  output matched" in out


def test_exit_n_requires_every_command_to_exit_n(tmp_path, capsys):
    good = write_doc(
        tmp_path, "```sh exit=3\nsh -c 'exit 3'\nbash -c 'exit 3'\n```\n```output\n```\n"
    )
    assert run_main(capsys, good)[0] == 0
    bad = write_doc(tmp_path, "```sh exit=3\nsh -c 'exit 3'\ntrue\n```\n```output\n```\n")
    code, out, _ = run_main(capsys, bad)
    assert code == 1
    assert "  $ true\n    -> exited 0, expected exit 3" in out


def test_stdout_and_stderr_are_merged_in_order(tmp_path, capsys):
    path = write_doc(
        tmp_path,
        """
        ```sh
        sh -c 'echo 1; echo 2 >&2; echo 3; echo 4 >&2'
        echo 5 >&2
        ```
        ```output
        1
        2
        3
        4
        5
        ```
        """,
    )
    assert run_main(capsys, path)[0] == 0


def test_merged_order_is_checked(tmp_path, capsys):
    path = write_doc(tmp_path, "```sh\nsh -c 'echo 1 >&2; echo 2'\n```\n```output\n2\n1\n```\n")
    assert run_main(capsys, path)[0] == 1


def test_environment_cwd_and_stdin(tmp_path, capsys):
    path = write_doc(
        tmp_path,
        """
        ```sh
        pwd
        echo "$NO_COLOR $LC_ALL"
        echo "$PATH" | cut -d: -f1
        cat
        ```
        ```output
        ⋯
        ```
        """,
    )
    code, out, _ = run_main(capsys, path, "--timeout", "10")
    assert code == 0
    steps = rt.parse_document(path.read_text())
    settings = rt.Settings(tmp_path.resolve(), 10.0, False)
    result = rt.run_block(steps[0].blocks[0], settings, rt.command_environment(tmp_path.resolve()))
    assert result.actual == (
        str(tmp_path.resolve()),
        "1 C.UTF-8",
        str(tmp_path.resolve() / ".venv" / "bin"),
    )  # `cat` read /dev/null: no output, no wait


def test_root_option_and_default_root(tmp_path, capsys):
    (tmp_path / "marker").write_text("")
    other = tmp_path / "other"
    other.mkdir()
    path = write_doc(tmp_path, "```sh\nls marker\n```\n```output\nmarker\n```\n")
    assert run_main(capsys, path)[0] == 0  # root: the parent of docs/
    assert run_main(capsys, path, "--root", other)[0] == 1
    code, _, err = run_main(capsys, path, "--root", tmp_path / "missing")
    assert code == 2
    assert err.startswith("run_tutorial: root is not a directory")


def test_timeout_kills_the_command_and_fails(tmp_path, capsys):
    path = write_doc(
        tmp_path,
        "```sh\necho started; sleep 30; echo never\necho next\n```\n```output\nstarted\nnext\n```\n",
    )
    start = time.monotonic()
    code, out, _ = run_main(capsys, path, "--timeout", "0.5")
    assert time.monotonic() - start < 10
    assert code == 1
    assert "    -> timed out, killed" in out
    assert "(timeout: 0.5 s per command)" in out
    assert "  output matched" in out  # output before the kill is kept; the next command ran


def test_step_option_runs_only_matching_steps(tmp_path, capsys):
    path = write_doc(tmp_path, FAILING)
    code, out, _ = run_main(capsys, path, "--step", "good")
    assert code == 0
    assert "Bad" not in out
    code, out, _ = run_main(capsys, path, "--step", "2.")
    assert code == 1
    assert "Good" not in out
    code, out, err = run_main(capsys, path, "--step", "nowhere")
    assert (code, out) == (2, "")
    assert err == "run_tutorial: no step heading contains 'nowhere'\n"


def test_skip_step_option_leaves_out_matching_steps(tmp_path, capsys):
    path = write_doc(tmp_path, FAILING)
    code, out, _ = run_main(capsys, path, "--skip-step", "2.")
    assert code == 0
    assert "Bad" not in out and "Good" in out
    code, out, _ = run_main(capsys, path, "--step", "2.", "--skip-step", "bad")
    assert code == 0
    assert "Bad" not in out


def test_verbose_prints_commands_as_they_run(tmp_path, capsys):
    path = write_doc(tmp_path, FAILING)
    code, out, _ = run_main(capsys, path, "-v")
    assert code == 1
    assert out.startswith("## 1. Good\n$ echo fine\n## 2. Bad\n$ echo actual\n")


def test_list_prints_steps_and_commands_without_running(tmp_path, capsys):
    path = write_doc(
        tmp_path,
        """
        ## 1. Make a file

        ```sh exit=4
        touch created && \\
          sh -c 'exit 4'
        ```
        ```output
        ```

        ## 2. Empty
        """,
    )
    code, out, err = run_main(capsys, path, "--list")
    assert (code, err) == (0, "")
    assert out == (
        "preamble\n"
        "  (no commands)\n"
        "1. Make a file\n"
        f"  {path}:3  (exit=4)\n"
        "    $ touch created && \\\n"
        "        sh -c 'exit 4'\n"
        "2. Empty\n"
        "  (no commands)\n"
    )
    assert not (tmp_path / "created").exists()


def test_malformed_document_exits_2_and_runs_nothing(tmp_path, capsys):
    path = write_doc(tmp_path, "```sh\ntouch created\n```\n\nprose\n\n```output\n```\n")
    code, out, err = run_main(capsys, path)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"{path}:1: command block is not followed by an ```output block",
        f"{path}:7: output block without a command block before it",
    ]
    assert not (tmp_path / "created").exists()


def test_missing_document_exits_2(tmp_path, capsys):
    code, out, err = run_main(capsys, tmp_path / "nope.md")
    assert (code, out) == (2, "")
    assert err == f"run_tutorial: no such file: {tmp_path / 'nope.md'}\n"


def test_bad_usage_exits_2(tmp_path, capsys):
    path = write_doc(tmp_path, FAILING)
    with pytest.raises(SystemExit) as raised:
        rt.main([str(path), "--timeout", "-1"])
    assert raised.value.code == 2
    assert "not a positive number of seconds" in capsys.readouterr().err


def test_as_a_script_with_plain_python3(tmp_path):
    """The tool runs outside the workspace's environment and never prints a traceback."""
    path = write_doc(tmp_path, FAILING)
    missing = subprocess.run(
        ["python3", TOOL, tmp_path / "nope.md"], capture_output=True, text=True, check=False
    )
    assert (missing.returncode, missing.stdout) == (2, "")
    assert len(missing.stderr.splitlines()) == 1 and "Traceback" not in missing.stderr
    failing = subprocess.run(["python3", TOOL, path], capture_output=True, text=True, check=False)
    assert failing.returncode == 1
    assert "FAILED" in failing.stdout


def test_the_format_chapter_is_itself_a_passing_document(capsys):
    chapter = TOOL.parents[1] / "docs" / "tutorial-format.md"
    code, out, _ = run_main(capsys, chapter)
    assert code == 0, out
    rows = out.splitlines()[1:-1]  # its examples are prose: one live block runs
    assert [row.split()[:5] for row in rows] == [["A", "live", "example", "3", "passed"]]
    assert "1 step, 3 commands: all passed" in out


def test_a_terminal_is_told_each_step_as_it_runs_and_finishes(tmp_path):
    """`make tutorial` on a terminal: a line per step, `running…` replaced by its outcome."""
    steps = rt.parse_document(doc(FAILING))
    shown: list[str] = []
    results = rt.run_steps(steps, rt.Settings(tmp_path.resolve(), 10.0, False), shown.append)
    assert [r.passed for r in results if r.step.blocks] == [True, False]
    assert shown[0] == "[1/2] 1. Good: running…"
    assert shown[1].startswith("\r\x1b[K[1/2] 1. Good: passed, 1 commands, ")
    assert shown[2] == "[2/2] 2. Bad: running…"
    assert shown[3].startswith("\r\x1b[K[2/2] 2. Bad: FAILED, 1 commands, ")
    assert all(line.endswith(" s\n") for line in shown[1::2]) and len(shown) == 4
