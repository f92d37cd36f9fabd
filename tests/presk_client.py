"""`presk` as a client of tests/presk_zygote.py, for commands run by a shell (the tutorial's):
tests/helpers.py's `presk_on_path` writes a `presk` into a folder put first on PATH, run by
`python -I -S` (~15 ms), that calls `run(SOCKET, SCRIPT)`.

It sends its argv, folder, whole environment and its descriptors 0, 1 and 2 (the very pipe
or file the shell gave it, so that the order of stdout and stderr in a shared pipe is the
one `presk` writes), passes SIGINT, SIGTERM and SIGHUP on to the child, and exits with the
child's status (killed by the signal that killed the child). Where the zygote cannot take
the call (it is gone, or the environment sets a variable read at import otherwise), it
becomes the real console script SCRIPT (exec). Standard library only, nothing imported that
`-I -S` does not give.
"""

import json
import os
import signal
import socket
import struct
import sys


def call(
    path: str, argv: list[str], cwd: str, env: dict[str, str], fds: list[int]
) -> tuple[socket.socket, int, bytes] | None:
    """`presk` started by the zygote on SOCKET `path` with descriptors `fds` as its 0, 1, 2:
    the connection, the child's pid and what the zygote sent after it; None where this call
    runs fresh (tests/helpers.py's `presk` calls it too)."""
    doc = json.dumps({"argv": argv, "cwd": cwd, "env": env}).encode()
    data = struct.pack(">Q", len(doc)) + doc
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
        sent = socket.send_fds(conn, [data], fds)
        conn.sendall(data[sent:])
        got = b""
        while b"\n" not in got:
            chunk = conn.recv(1 << 12)
            if not chunk:
                return None
            got += chunk
        line, rest = got.split(b"\n", 1)
        answer = json.loads(line)
    except (OSError, ValueError):
        return None
    return None if "pid" not in answer else (conn, answer["pid"], rest)


def run(path: str, script: str) -> None:
    argv = [script, *sys.argv[1:]]
    started = call(path, argv, os.getcwd(), dict(os.environ), [0, 1, 2])
    if started is None:
        os.execv(script, argv)
    conn, pid, rest = started

    def forward(signum, _frame) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:  # as a shell's `&` or nohup left it
            signal.signal(signum, forward)
    while True:
        chunk = conn.recv(1 << 12)
        if not chunk:
            break
        rest += chunk
    lines = [json.loads(x) for x in rest.splitlines() if x.strip()]
    rc = next((doc["rc"] for doc in lines if "rc" in doc), -signal.SIGKILL)
    if rc < 0:  # killed by a signal: so is this process, as the shell then reports it
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    sys.exit(rc)
