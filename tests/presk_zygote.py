"""A Python that has imported `presk` and what its commands import, forking one child per
call (tests/helpers.py's `presk`, and tests/presk_client.py for the tutorial's commands): the
suite's thousands of `presk` calls without paying ~0.3–0.9 s of CPU of imports each.

    python tests/presk_zygote.py SOCKET

listens on the UNIX socket SOCKET; it prints a line on stdout once its imports are done, and
exits when its stdin reaches EOF and its children have exited. A call is one connection: the
client sends, in one message, 8 bytes (the length of the rest, big-endian), the JSON document
{"argv", "cwd", "env"} (argv[0] is the console script's path) and its standard input, output
and error (SCM_RIGHTS). The zygote answers one JSON document a line: {"fresh": true} when the
call's environment sets a variable read at import (`READ_AT_IMPORT`) otherwise than the
zygote's (the client then runs `presk` as a process of its own); else {"pid"} once the child
is started and {"rc"} once it has exited (a negative rc: the signal that stopped it). A client
that closes its connection before then (killed, timed out) has its child killed (SIGKILL).

The child chdirs to cwd, takes env as its whole environment and the three descriptors as its
0, 1 and 2 (Python's stdio objects made anew over them, as a fresh interpreter makes them),
then runs `presk_cli.main.main()` and exits as the interpreter does (atexit, threads joined).
Nothing here runs a command before forking: module-level caches are empty, no thread pool
of presk's exists (OpenBLAS's, started when numpy loads, is stopped and restarted around a
fork by OpenBLAS itself, as under any forking Python).
"""

import importlib
import io
import json
import os
import selectors
import signal
import socket
import struct
import sys

# What the commands import (presk_cli.main imports each command's module when it is used, and
# each of those what it needs when it runs): `python -X importtime -m presk_cli.main …` of
# check, run, run --backend native, export, train and train --backend native, in their order.
IMPORTS = (
    "presk_cli.main", "presk_cli.commands", "presk_cli.flags", "presk_cli.pipeline",
    "presk_syntax.parse", "presk_syntax.diagnostics", "presk_types.driver", "presk_types.elab",
    "presk_types.summary", "presk_types.training", "presk_core.run", "presk_core.data",
    "presk_core.lower", "presk_core.layout", "presk_ad.vjp", "presk_ad.residuals",
    "presk_kernel.lower", "presk_kernel.interp", "presk_kernel.fuse", "presk_kernel.narrow",
    "presk_kernel.epilogue", "presk_kernel.quant", "presk_kernel.rows", "presk_kernel.strips",
    "presk_cback.native", "presk_cli.native", "presk_cli.native_train", "presk_cli.train",
    "presk_cli.metrics", "presk_cli.progress", "presk_cli.resume", "presk_cli.precision",
    "presk_cli.export", "presk_export", "numpy", "cffi", "cffi.cparser",
)  # fmt: skip

# Variables read once, when the interpreter starts or a library loads (the stdio encoding,
# OpenBLAS's and OpenMP's threads, the allocator): a call that sets one of them otherwise
# than the zygote's environment is run fresh.
READ_AT_IMPORT = ("OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS", "LD_", "PYTHON", "MALLOC",
                  "LC_", "LANG")  # fmt: skip


def fresh(env: dict[str, str]) -> bool:
    """Whether `env` sets a variable read at import otherwise than this process's."""
    keys = set(env) | set(os.environ)
    return any(env.get(k) != os.environ.get(k) for k in keys if k.startswith(READ_AT_IMPORT))


def receive(conn: socket.socket) -> tuple[dict, list[int]]:
    """A call's document and descriptors."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < 8 or len(data) < 8 + struct.unpack(">Q", data[:8])[0]:
        chunk = conn.recv(1 << 16)
        if not chunk:
            raise EOFError
        data += chunk
    return json.loads(data[8:]), fds


def serve(path: str) -> tuple[dict, list[int]] | None:
    """Serve calls until stdin's EOF (then None), or, in a child, return its call."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(0, selectors.EVENT_READ, "stdin")
    calls: dict[int, tuple[socket.socket, int]] = {}  # pid: (connection, pidfd)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    accepting = True
    while accepting or calls:
        for key, _ in sel.select():
            match key.data:
                case "stdin":
                    if not os.read(0, 1 << 12):
                        sel.unregister(0)
                        sel.unregister(listener)
                        listener.close()
                        accepting = False
                case "accept":
                    conn, _ = listener.accept()
                    try:
                        req, fds = receive(conn)
                    except (OSError, EOFError, ValueError):
                        conn.close()
                        continue
                    if fresh(req["env"]):
                        for fd in fds:
                            os.close(fd)
                        conn.sendall(b'{"fresh": true}\n')
                        conn.close()
                        continue
                    pid = os.fork()
                    if pid == 0:
                        sel.close()
                        for c, pidfd in calls.values():
                            c.close()
                            os.close(pidfd)
                        conn.close()
                        if accepting:
                            listener.close()
                        return req, fds
                    for fd in fds:
                        os.close(fd)
                    pidfd = os.pidfd_open(pid)
                    calls[pid] = conn, pidfd
                    sel.register(pidfd, selectors.EVENT_READ, ("exit", pid))
                    sel.register(conn, selectors.EVENT_READ, ("client", pid))
                    with _suppress():
                        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                case ("client", pid):  # the client went away before its child: kill it
                    with _suppress():
                        os.kill(pid, signal.SIGKILL)
                    sel.unregister(calls[pid][0])
                case ("exit", pid):
                    _, status = os.waitpid(pid, 0)
                    conn, pidfd = calls.pop(pid)
                    sel.unregister(pidfd)
                    os.close(pidfd)
                    with _suppress():
                        sel.unregister(conn)
                    with _suppress():
                        rc = os.waitstatus_to_exitcode(status)
                        conn.sendall(json.dumps({"rc": rc}).encode() + b"\n")
                    conn.close()
    return None


def _suppress():
    import contextlib

    return contextlib.suppress(OSError, KeyError, ValueError)


def stdio(fd: int, like: io.TextIOWrapper) -> io.TextIOWrapper:
    """The text stream a fresh interpreter makes over `fd` (create_stdio: buffered, newline
    "\\n", stderr and a terminal line-buffered), with `like`'s encoding and errors."""
    write = fd != 0
    raw = open(fd, "wb" if write else "rb", closefd=False)  # noqa: SIM115
    stream = io.TextIOWrapper(
        raw, encoding=like.encoding, errors=like.errors, newline="\n",
        line_buffering=write and (fd == 2 or os.isatty(fd)), write_through=False,
    )  # fmt: skip
    stream.mode = "w" if write else "r"
    return stream


def child(req: dict, fds: list[int]) -> int:
    """Become `presk ARGV` in the call's folder, environment and descriptors."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    for name, fd in (("stdin", 0), ("stdout", 1), ("stderr", 2)):
        stream = stdio(fd, getattr(sys, f"__{name}__"))
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    sys.argv = list(req["argv"])
    sys.path.insert(0, os.path.dirname(sys.argv[0]))  # as the console script's

    from presk_cli.main import main

    return main()


if __name__ == "__main__":
    del sys.path[0]  # this file's folder (tests/): nothing of it shadows what presk imports
    for name in IMPORTS:
        importlib.import_module(name)
    call = serve(sys.argv[1])
    if call is not None:
        sys.exit(child(*call))
