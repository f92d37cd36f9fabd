"""Save on interrupt, and `presk train --resume` (issue 28): a run stopped at a step (by
`--stop-after`, or by a real SIGINT or SIGTERM) and resumed prints the log lines and writes the
final weights of the run never stopped, bit for bit, on the interpreter and natively; a
state that is missing, corrupt, or another run's is a coded diagnostic."""

import fcntl
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import PRESK, presk, tutorial_run

BACKENDS = [[], ["--backend", "native"], ["--backend", "kernel"], ["--backend", "native", "--realize", "bf16"]]  # fmt: skip
IDS = ["interp", "native", "kernel", "native-bf16"]
RESUME = re.compile(r"--resume (\S+)")
STEPS = "400"  # the signal's runs: more lines than the shrunk pipe and the reader's buffer hold


@pytest.fixture
def run(tmp_path) -> Path:
    """The tutorial's training run in a folder of its own, a checkpoint every 10 steps."""
    return tutorial_run(tmp_path, every=10)


def train(run: Path, ckpt: str, *more: str) -> subprocess.CompletedProcess:
    r = presk("train", "07_train.psk", "--log-every", "1", "--ckpt", ckpt, *more, cwd=run)
    assert r.returncode == 0, r.stderr
    return r


def steps(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("step ")]


def metrics_rows(path: Path) -> list[dict]:
    """The metrics' lines, each step's seconds left out (a wall time)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


@pytest.mark.parametrize("backend", BACKENDS, ids=IDS)
def test_stopped_at_several_steps_then_resumed_is_the_run_never_stopped(run, backend):
    whole = train(run, "whole", "--steps", "30", "--metrics", "whole.jsonl", *backend)
    for k in (1, 10, 17):  # the first step, a checkpoint's step, another
        ckpt = f"part{k}"
        first = train(run, ckpt, "--steps", "30", "--stop-after", str(k),
                      "--metrics", f"{ckpt}.jsonl", *backend)  # fmt: skip
        where = RESUME.search(first.stdout).group(1)
        assert where == f"{ckpt}/step_{k}.psk.d" and (run / ckpt / f"step_{k}.state").exists()
        assert not (run / ckpt / "final.psk.d").exists()
        rest = train(run, ckpt, "--resume", where, "--metrics", f"{ckpt}.jsonl", *backend)
        assert steps(first.stdout) + steps(rest.stdout) == steps(whole.stdout)
        assert rest.stdout.splitlines()[-1] == whole.stdout.splitlines()[-1].replace(
            "whole/", f"{ckpt}/"
        )
        assert (run / ckpt / "final.psk.d").read_bytes() == (run / "whole/final.psk.d").read_bytes()
        assert metrics_rows(run / f"{ckpt}.jsonl") == metrics_rows(run / "whole.jsonl")


def _stop_by_signal(run: Path, signum: int, after: int, backend: list[str]) -> tuple[str, str]:
    """A run of STEPS steps, a line a step, stopped by `signum` once `after` lines are read: it
    cannot end first (its lines fill the pipe, shrunk to a page: about 70 lines, and the
    reader's buffer, 8 KiB, about 140; then it waits for the reader)."""
    args = [*PRESK, "train", "07_train.psk", "--log-every", "1", "--steps", STEPS, "--ckpt",
            "part", *backend]  # fmt: skip
    fd, into = os.pipe()
    fcntl.fcntl(into, fcntl.F_SETPIPE_SZ, 4096)  # the least a pipe holds (64 KiB unless told)
    p = subprocess.Popen(args, cwd=run, stdout=into, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "NO_COLOR": "1"})  # fmt: skip
    os.close(into)
    with open(fd, encoding="utf-8") as stdout:
        head = [stdout.readline() for _ in range(after)]
        assert all(line.startswith("step ") for line in head), (head, p.stderr.read())
        p.send_signal(signum)
        out = stdout.read()  # through the reader's buffer (communicate() would skip what it holds)
    err = p.stderr.read()
    assert p.wait(timeout=600) == 128 + signum, err
    assert "the checkpoints written so far are whole" in err and "Traceback" not in err
    return "".join(head) + out, err


@pytest.mark.parametrize(("backend", "signum"), [([], signal.SIGINT), (["--backend", "native"], signal.SIGINT), (["--backend", "native"], signal.SIGTERM)], ids=["interp-SIGINT", "native-SIGINT", "native-SIGTERM"])  # fmt: skip
def test_a_signal_saves_the_last_completed_step_and_resume_continues_it(run, backend, signum):
    whole = train(run, "whole", "--steps", STEPS, *backend)
    out, err = _stop_by_signal(run, signum, 3, backend)
    where = RESUME.search(err).group(1)
    k = int(re.search(r"step_(\d+)\.psk\.d", where).group(1))
    # the signal may land in the log line of step 3 (read as it is written): step 2 complete
    assert k >= 2 and (run / where).exists() and (run / where.replace(".psk.d", ".state")).exists()
    done = [line for line in steps(out) if int(line.split()[1]) <= k]  # a last line cut: left out
    rest = train(run, "part", "--resume", where, *backend)
    assert done + steps(rest.stdout) == steps(whole.stdout)
    assert (run / "part/final.psk.d").read_bytes() == (run / "whole/final.psk.d").read_bytes()
    assert [p.name for p in run.rglob("*.tmp")] == []


def test_a_resumed_run_that_is_stopped_again_resumes_again(run):
    whole = train(run, "whole", "--steps", "25")
    a = train(run, "c", "--steps", "25", "--stop-after", "5")
    b = train(run, "c", "--resume", "c/step_5.psk.d", "--stop-after", "12")
    c = train(run, "c", "--resume", "c/step_12.psk.d")
    assert steps(a.stdout) + steps(b.stdout) + steps(c.stdout) == steps(whole.stdout)
    assert (run / "c/final.psk.d").read_bytes() == (run / "whole/final.psk.d").read_bytes()


def test_the_state_holds_theta_exactly_at_the_runs_bits(run):
    train(run, "c", "--steps", "5", "--stop-after", "3", "--bits", "100")
    state = np.load(run / "c/step_3.state")
    settings = json.loads(str(state["settings"]))
    assert settings["t"] == 3 and settings["bits"] == 100 and settings["horizon"] == 5
    w = state["theta/blocks.proj.w"]
    assert w.shape == (3, 4, 4) and w.dtype.kind == "U" and str(w.flat[0]).startswith(("0x", "-0x"))
    import gmpy2

    assert gmpy2.mpfr(str(w.flat[0]), 100, 0).precision == 100
    saved = np.fromfile(run / "c/step_3.psk.d", dtype="<f8")[-76:]  # θ's doubles, the header before
    assert float(gmpy2.mpfr(str(state["theta/blocks.norm.γ"].flat[0]), 100, 0)) == saved[0]


def test_resume_without_a_state_or_from_another_run_is_a_diagnostic(run):
    train(run, "c", "--steps", "20", "--stop-after", "4")
    r = presk("train", "07_train.psk", "--ckpt", "c", "--resume", "c/step_9.psk.d", cwd=run)
    assert r.returncode == 1 and r.stderr.startswith(
        "[E7070] Error: no checkpoint `c/step_9.psk.d`"
    )
    train(run, "d", "--steps", "20")  # a periodic checkpoint: θ alone
    r = presk("train", "07_train.psk", "--ckpt", "d", "--resume", "d/step_10.psk.d", cwd=run)
    assert r.returncode == 1 and r.stderr.startswith(
        "[E7070] Error: `d/step_10.psk.d` has no state beside it (`d/step_10.state`)"
    )
    r = presk("train", "07_train.psk", "--ckpt", "c", "--resume", "c/step_4.psk.d", "--seed", "1",
              cwd=run)  # fmt: skip
    assert r.returncode == 1 and r.stderr.startswith(
        "[E7071] Error: `c/step_4.psk.d` was saved by a run with --seed `0`, this run has `1`"
    ), r.stderr
    r = presk("train", "07_train.psk", "--ckpt", "c", "--resume", "c/step_4.psk.d", "--backend",
              "native", cwd=run)  # fmt: skip
    assert r.returncode == 1 and "[E7071]" in r.stderr and "--backend `interp`" in r.stderr
    r = presk("train", "07_train.psk", "--ckpt", "c", "--resume", "c/step_4.psk.d", "--stop-after",
              "3", cwd=run)  # fmt: skip
    assert r.returncode == 1 and r.stderr.startswith(
        "[E7072] Error: --stop-after 3: the run resumes after step 4 of `c/step_4.psk.d`"
    ), r.stderr
    r = presk("train", "07_train.psk", "--ckpt", "c", "--resume", "c/step_4.psk.d", "--opt",
              cwd=run)  # fmt: skip
    assert r.returncode == 1 and "[E7071]" in r.stderr and "with --opt `False`" in r.stderr
    (run / "c/step_4.state").write_bytes(b"not a zip")
    r = presk("train", "07_train.psk", "--ckpt", "c", "--resume", "c/step_4.psk.d", cwd=run)
    assert r.returncode == 1 and r.stderr.startswith("[E7070] Error: `c/step_4.state` is not a")
    assert "Traceback" not in r.stderr


def test_a_signal_before_any_step_saves_nothing_and_says_so(run):
    (run / "hold").write_text("")
    env = {"PRESK_TEST_HOLD_WRITE": str(run / "hold")}  # the first write (the metrics'), held
    args = [*PRESK, "train", "07_train.psk", "--metrics", "m.jsonl", "--ckpt", "c"]
    p = subprocess.Popen(args, cwd=run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "NO_COLOR": "1", **env})  # fmt: skip
    while not (run / "hold").read_text():
        assert p.poll() is None, p.stderr.read()
        time.sleep(0.01)  # polling, not timing: the CPU to the run
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "no step was complete: nothing to resume" in err, err
    assert not (run / "c").exists() or not list((run / "c").iterdir())


@pytest.mark.parametrize("backend", [[], ["--backend", "native"]], ids=["interp", "native"])
def test_resumable_writes_a_state_beside_every_checkpoint(run, backend):
    whole = train(run, "whole", "--steps", "25", *backend)
    part = train(run, "part", "--steps", "25", "--resumable", *backend)  # as if killed after
    assert sorted(p.name for p in (run / "part").iterdir()) == [
        "final.psk.d", "step_10.psk.d", "step_10.state", "step_20.psk.d", "step_20.state"
    ]  # fmt: skip
    rest = train(run, "again", "--resume", "part/step_10.psk.d", *backend)
    assert steps(part.stdout)[:10] + steps(rest.stdout) == steps(whole.stdout)
    assert (run / "again/final.psk.d").read_bytes() == (run / "whole/final.psk.d").read_bytes()
