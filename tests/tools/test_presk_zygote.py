"""tests/presk_zygote.py, the suite's `presk` forked from a Python that imported it: a call
gives what a process of its own gives (exit code, stdout, stderr, its folder, environment and
standard input), a timeout kills it, and a shell's `presk` (presk_on_path) keeps the order of
stdout and stderr in one pipe, the exit status, and passes a signal on."""

import os
import signal
import subprocess
import time

import pytest
from helpers import PRESK, ROOT, PreskZygote, presk_on_path


@pytest.fixture(scope="module")
def zygote():
    z = PreskZygote()
    yield z
    z.close()


def forked(z: PreskZygote, *args, cwd=ROOT, env=None, input=None, timeout=60):
    done = z.run([*PRESK, *map(str, args)], cwd, {**os.environ, **(env or {})}, input, timeout)
    assert done is not None
    return done


def fresh(*args, cwd=ROOT, env=None, input=None):
    return subprocess.run(
        [*PRESK, *map(str, args)], cwd=cwd, env={**os.environ, **(env or {})},
        input=input, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ("check", "tutorial/01_linear.psk"),
        ("run", "tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2"),
        ("run", "tutorial/01_linear.psk"),  # 2: no --entry
        ("no-such-command",),  # 2: click's usage, `Usage: presk …`
        ("check", "no/such/file.psk"),  # 1: a diagnostic
        ("--version",),
    ],
)
def test_a_call_is_a_fresh_process_s(zygote, args):
    got, want = forked(zygote, *args), fresh(*args)
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)


def test_folder_environment_and_standard_input(zygote, tmp_path):
    (tmp_path / "01_linear.psk").write_text((ROOT / "tutorial" / "01_linear.psk").read_text())
    assert forked(zygote, "check", "01_linear.psk", cwd=tmp_path).returncode == 0
    # the environment is the call's whole one: NO_COLOR off here, on there, as a process's
    for env in ({"NO_COLOR": "1"}, {"PRESK_DEBUG": "1"}):
        got, want = (
            forked(zygote, "check", "nope.psk", env=env),
            fresh("check", "nope.psk", env=env),
        )
        assert (got.returncode, got.stderr) == (want.returncode, want.stderr)
    done = forked(zygote, "data", "chars", "/dev/stdin", "-o", tmp_path / "v.json", input="abca\n")
    assert done.returncode == 0, done.stderr
    assert (
        fresh("data", "chars", "/dev/stdin", "-o", tmp_path / "w.json", input="abca\n").returncode
        == 0
    )
    assert (tmp_path / "v.json").read_text() == (tmp_path / "w.json").read_text()


def test_a_variable_read_at_import_set_otherwise_is_left_to_a_process(zygote):
    threads = "7" if os.environ.get("OPENBLAS_NUM_THREADS") != "7" else "5"
    argv = [*PRESK, "--version"]
    assert zygote.run(argv, ROOT, {**os.environ, "OPENBLAS_NUM_THREADS": threads}, None, 60) is None


def test_a_timeout_kills_the_child(zygote, tmp_path):
    before = set(_children(zygote.proc.pid))
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        forked(zygote, "train", "tutorial/07_train.psk", "--steps", 100000, "--ckpt",
               tmp_path / "ck", timeout=3)  # fmt: skip
    assert time.monotonic() - start < 30
    for _ in range(100):  # the zygote reaps it
        if set(_children(zygote.proc.pid)) <= before:
            break
        time.sleep(0.1)
    assert set(_children(zygote.proc.pid)) <= before


def _children(pid: int) -> list[int]:
    tasks = f"/proc/{pid}/task/{pid}/children"
    return [int(p) for p in open(tasks).read().split()] if os.path.exists(tasks) else []


def test_a_shells_presk_keeps_order_status_and_signals(tmp_path):
    env = {**os.environ, "NO_COLOR": "1", "LC_ALL": "C.UTF-8"}
    with presk_on_path(env) as env:
        assert env["PATH"].split(os.pathsep)[0] != str(ROOT / ".venv" / "bin")

        def sh(command: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)  # fmt: skip

        command = "presk run tutorial/01_linear.psk; echo $?; presk check tutorial/01_linear.psk"
        got = sh(command)
        want = sh(command.replace("presk ", f"{PRESK[0]} "))
        assert got.stdout == want.stdout and got.returncode == want.returncode == 0
        assert "\n2\n" in got.stdout
        assert sh("type -p presk").stdout.strip() != PRESK[0]  # the client, first on PATH
        # SIGTERM to the client reaches the child: `presk train: terminated`, 143, as a process's
        stopped = sh(
            f"presk train tutorial/07_train.psk --steps 100000 --ckpt {tmp_path}/ck & "
            "sleep 4; kill -TERM $!; wait $!; echo $?"
        )
        assert stopped.stdout.splitlines()[-1] == str(128 + signal.SIGTERM), stopped.stdout
        assert "presk train: terminated (SIGTERM)" in stopped.stdout
