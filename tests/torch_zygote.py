"""A Python with torch already imported, forking one child per run (tests/helpers.py's
`python_run`): the exported programs' own pytest files and scripts, run as a user runs them,
without paying torch's import (~7 s of CPU) and torch.func's first call (torch._dynamo, ~9 s)
in every one of the suite's hundred-odd runs.

Protocol, one JSON document a line: on stdin {"id", "argv", "cwd", "env", "out", "err"}
(argv is what follows `python`: ["-m", "pytest", …], ["-c", code, …] or ["train.py", …]);
on stdout {"ready"} once torch is imported, {"id", "pid"} once a run is started, {"id", "rc"} once it has exited. The child chdirs to cwd, takes env as its whole
environment, writes its stdout and stderr to the files `out` and `err`, and runs the module
or the script as `python` would (sys.argv, sys.path[0]). Nothing here computes with torch
before forking: no thread pool exists to be copied half-alive into a child. EOF on stdin:
the runs under way finish, then the zygote exits.
"""

import json
import os
import runpy
import select
import sys

import numpy  # noqa: F401  (imported once here, as torch would import it in each child)
import pytest  # noqa: F401
import torch  # noqa: F401
import torch._dynamo  # noqa: F401  (what torch.func.grad imports on its first call)
import torch._functorch.eager_transforms  # noqa: F401

BASE_PATH = sys.path[1:]  # without this file's folder, which sys.path[0] is


def child(req: dict) -> None:
    """Become `python ARGV` in req's folder and environment; never returns."""
    code = 1
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        for fd, name in ((1, req["out"]), (2, req["err"])):
            f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        os.close(stdin)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        argv = req["argv"]
        try:
            if argv[0] == "-c":
                sys.argv = ["-c", *argv[2:]]
                sys.path[:] = ["", *BASE_PATH]
                exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
            elif argv[0] == "-m":
                sys.argv = [argv[1], *argv[2:]]
                sys.path[:] = [os.getcwd(), *BASE_PATH]
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            else:
                script = os.path.abspath(argv[0])
                sys.argv = list(argv)
                sys.path[:] = [os.path.dirname(script), *BASE_PATH]
                runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                print(e.code, file=sys.stderr)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def warm_pytest() -> None:
    """One pytest session of one trivial test, its output discarded: the plugins pytest loads
    (hypothesis's imports hypothesis whole at the session's end, ~3 s) are then imported, through
    pytest's assertion rewriter as a session imports them, once for every child."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        test = os.path.join(folder, "test_warm.py")
        with open(test, "w") as f:
            f.write("def test_warm():\n    assert True\n")
        saved = os.dup(1), os.dup(2), os.getcwd()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            os.chdir(folder)
            pytest.main(["-q", "-p", "no:cacheprovider", "test_warm.py"])
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.chdir(saved[2])
            for fd in (devnull, saved[0], saved[1]):
                os.close(fd)
    sys.modules.pop("test_warm", None)


def main() -> None:
    warm_pytest()
    sys.stdout.write(json.dumps({"ready": True}) + "\n")  # the runs' timeouts start now
    sys.stdout.flush()
    running: dict[int, str] = {}
    buffer = b""
    eof = False
    while not eof or running:
        if not eof and select.select([0], [], [], 0.02)[0]:
            chunk = os.read(0, 1 << 16)
            eof = not chunk
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                req = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    child(req)
                running[pid] = req["id"]
                sys.stdout.write(json.dumps({"id": req["id"], "pid": pid}) + "\n")
                sys.stdout.flush()
        elif eof:
            select.select([], [], [], 0.02)
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            rc = os.waitstatus_to_exitcode(status)
            sys.stdout.write(json.dumps({"id": running.pop(pid), "rc": rc}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
