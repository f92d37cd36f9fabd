"""What `presk train` shows on a terminal (issue 28): the phases before step 1, each with its
time, then the step line with its rate, elapsed and remaining time; nothing of it with
`--quiet` or through a pipe (the tutorial's outputs stay byte for byte)."""

import os
import pty
import re
import subprocess
from pathlib import Path

import pytest
from helpers import PRESK, presk, tutorial_run
from presk_cli.progress import Progress, clock


@pytest.fixture
def run(tmp_path) -> Path:
    return tutorial_run(tmp_path)


def on_a_terminal(run: Path, *args: str) -> str:
    """presk's output (stdout and stderr) when both are a terminal (a pseudo-terminal)."""
    main, child = pty.openpty()
    p = subprocess.Popen([*PRESK, *args], cwd=run, stdin=child, stdout=child, stderr=child,
                         env={**os.environ, "NO_COLOR": "1"})  # fmt: skip
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert p.wait(timeout=600) == 0, out.decode()
    return out.decode()


def lines(text: str) -> list[str]:
    """What a terminal ends up showing: each line as its last `\\r` left it, erased parts gone."""
    shown = []
    for line in text.replace("\r\n", "\n").split("\n"):
        shown.append(line.split("\r")[-1].replace("\x1b[K", ""))
    return [line for line in shown if line]


@pytest.mark.parametrize("backend", ["interp", "native"])
def test_the_phases_then_the_steps_with_rate_elapsed_and_left(run, backend):
    args = ["train", "07_train.psk", "--steps", "40", "--log-every", "20", "--ckpt", "c"]
    out = on_a_terminal(run, *args, "--backend", backend)
    shown = lines(out)
    phases = [
        line
        for line in shown
        if re.fullmatch(r"presk train: [^:]+: (.*, )?(\d+ ms|\d+\.\d s)", line)
    ]
    words = [line.split(": ")[1] for line in phases]
    assert words[:5] == ["checking `07_train.psk`", "lowering to PSK-Core", "differentiating `loss`",
                         "reading `data/pairs.psk.d`", "drawing θ₀ of `Tower` (seed 0, 256 bits)"]  # fmt: skip
    if backend == "native":
        assert re.fullmatch(
            r"presk train: lowering the step to kernels \(f64\) and compiling it: \d+ kernel"
            r" launches, (compiled|its object from the cache), .*",
            phases[5],
        ), phases
    step = re.compile(r"step (\d+)/40  loss \d\.\d{6}  \d+\.\d (steps/s|s/step)  elapsed \d+:\d\d  left \d+:\d\d")  # fmt: skip
    assert step.search(out), out  # drawn in place (the last one: step 40)
    assert "\rstep 40/40  loss" in out
    piped = presk(*args, "--backend", backend, cwd=run).stdout.splitlines()
    timing = re.compile(r"presk train: [\d.]+ ms a step")
    assert [x for x in shown if x not in phases and not timing.match(x)] == [
        x for x in piped if not timing.match(x)
    ]  # the rest is the log, as a pipe has it


def test_quiet_shows_only_the_log(run):
    args = ["train", "07_train.psk", "--steps", "20", "--log-every", "10", "--ckpt", "c"]
    out = on_a_terminal(run, *args, "--quiet")
    assert "\r" not in out.replace("\r\n", "\n") and "…" not in out
    assert [x for x in lines(out) if "ms a step" not in x] == [
        x for x in presk(*args, cwd=run).stdout.splitlines() if "ms a step" not in x
    ]


def test_a_pipe_gets_no_progress(run):
    r = presk("train", "07_train.psk", "--steps", "3", "--log-every", "1", "--ckpt", "c", cwd=run)
    assert "\r" not in r.stdout and "\x1b" not in r.stdout and r.stderr == ""


def test_the_clock_and_a_progress_that_shows_nothing():
    assert [clock(s) for s in (0, 7.4, 65, 3723)] == ["0:00", "0:07", "1:05", "1:02:03"]
    written = []
    quiet = Progress(None)
    quiet.phase("drawing θ₀")
    quiet.steps(0, 10)
    quiet.step(1, 0.5)
    quiet.clear()  # nothing to write to: nothing written, no error
    loud = Progress(written.append)
    loud.phase("drawing θ₀")
    loud.phase("lowering")  # the first completed with its time
    assert written[0] == "presk train: drawing θ₀…" and written[1].startswith(
        "\r\x1b[Kpresk train: drawing θ₀: "
    )
    loud.steps(0, 10)
    loud.step(10, 0.25)  # the last step is always drawn
    assert written[-1].startswith("\rstep 10/10  loss 0.250000  ")
