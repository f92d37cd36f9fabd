"""What the cross-stage tests share: the checkout's root and `presk` run as a user runs it.

Importable from any test under tests/ as `from helpers import ...` (tests/conftest.py puts this
folder on sys.path, since pytest runs with --import-mode=importlib).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_SCRIPT = ROOT / ".venv" / "bin" / "presk"
# The installed console script where there is one (what a user runs), else the same main.
PRESK = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "presk_cli.main"]


def presk(
    *args: object,
    cwd: Path | str = ROOT,
    env: dict[str, str] | None = None,
    input: str | None = None,
    timeout: float | None = 600,
) -> subprocess.CompletedProcess[str]:
    """`presk ARGS` in `cwd` (relative to the root), colours off, `env` added to the
    environment; its exit code, stdout and stderr as text. A fork of a Python that imported
    presk once a worker (tests/presk_zygote.py) where it can, else a process of its own."""
    argv, full = [*PRESK, *map(str, args)], {**os.environ, "NO_COLOR": "1", **(env or {})}
    z = _presk_zygote()
    if z is not None:
        done = z.run(argv, ROOT / cwd, full, input, timeout)
        if done is not None:
            return done
    return subprocess.run(
        argv, cwd=ROOT / cwd, capture_output=True, text=True, input=input, env=full,
        timeout=timeout,
    )  # fmt: skip


def presk_ok(*args: object, quiet: bool = False, **kw) -> subprocess.CompletedProcess[str]:
    """`presk(*args)` that must exit 0 (and, with `quiet`, write nothing on stderr)."""
    done = presk(*args, **kw)
    assert done.returncode == 0, done.stderr
    if quiet:
        assert done.stderr == "", done.stderr
    return done


def run_json(program: str, entry: str, *args: object, **kw) -> dict:
    """The document `presk run PROGRAM --entry E --json ARGS…` prints (the run must exit 0)."""
    return json.loads(presk_ok("run", program, "--entry", entry, "--json", *args, **kw).stdout)


def floats(v):
    """A JSON result's reals (decimal texts, nested lists) as a numpy array of doubles."""
    import numpy as np

    return np.array(v, dtype=object).astype(float)


# ---- the reference interpreter's results, for the native tests ------------------------------


@functools.cache
def core_of(file: str, consts: tuple = ()):
    """The differentiated PSK-Core of `file` (relative to the root) at `consts`."""
    from presk_cli.pipeline import run_pipeline
    from presk_syntax.pipeline import Context

    return run_pipeline("core-after-ad", str(ROOT / file), Context(consts=dict(consts)))


def json_leaves(doc) -> list:
    """A JSON result's tensors (trees and tuples flattened), as arrays of doubles."""
    import numpy as np

    match doc:
        case dict():
            return [x for v in doc.values() for x in json_leaves(v)]
        case list() if doc and isinstance(doc[0], dict | list) and not _tensor(doc):
            return [x for v in doc for x in json_leaves(v)]
    return [np.asarray(np.asarray(doc, dtype=object).astype(float), dtype=np.float64)]


def _tensor(doc) -> bool:
    while isinstance(doc, list) and doc:
        doc = doc[0]
    return not isinstance(doc, dict)


@functools.cache
def reference(case) -> list:
    """The reference interpreter's result of `case` = (file, entry, dims, consts), as doubles."""
    import json

    from presk_core.run import run_entry

    file, entry, dims, consts = case
    text = run_entry(core_of(file, consts), None, entry, dict(dims), as_json=True)
    return json_leaves(json.loads(text)["result"])


def close(got: list, want: list, tol: float) -> bool:
    """The same number of arrays, each of its pair's shape and within `tol` of it relative to
    the largest magnitude of the wanted array (1 where that is 0)."""
    import numpy as np

    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        scale = float(np.max(np.abs(w), initial=0.0)) or 1.0
        if g.shape != w.shape or not np.all(np.abs(g - w) <= tol * scale):
            return False
    return True


def export_passes_conformance(program, entry: str, out: Path, *args: object, **kw) -> None:
    """`presk export PROGRAM --target pytorch --conformance-entry ENTRY ARGS… -o OUT`, then the
    export's own test_conformance.py run by pytest in OUT (as a user runs it): it must pass."""
    presk_ok("export", program, "--target", "pytorch", "--conformance-entry", entry, *args,
             "-o", out, **kw)  # fmt: skip
    conformance_passes(out, env=kw.get("env"))


def conformance_passes(out: Path, env: dict[str, str] | None = None) -> None:
    """The export in OUT passes its test_conformance.py, run by pytest as a user runs it."""
    done = python_run(
        "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_conformance.py", cwd=out, env=env
    )
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout + done.stderr


# ---- `python ARGS` with torch already imported (tests/torch_zygote.py) -------------------------

# What torch and the libraries under it read once, when torch is imported: a run that sets one
# of these differently from this process gets a Python of its own.
_READ_AT_IMPORT = ("OMP_", "MKL_", "KMP_", "GOMP_", "OPENBLAS", "TORCH", "PYTORCH", "CUDA",
                   "LD_", "PYTHON", "MALLOC")  # fmt: skip


class _Zygote:
    """tests/torch_zygote.py, started on the first run this process asks of it."""

    def __init__(self) -> None:
        import tempfile

        self.folder = Path(tempfile.mkdtemp(prefix="presk-zygote-"))
        self.env = dict(os.environ)
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "torch_zygote.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=self.env,
        )  # fmt: skip
        self.buf = b""  # what the zygote wrote past its last whole line
        ready = self.proc.stdout.readline()  # its imports done: a run's timeout starts after
        if not ready:
            raise RuntimeError("tests/torch_zygote.py exited before it was ready")
        self.done: dict[str, int] = {}  # the exit codes of runs not yet waited for
        self.pids: dict[str, int] = {}
        self.count = 0

    def close(self) -> None:
        """EOF to the zygote: it exits when its runs have (waited for: their CPU time counts
        in this process's children's, as a subprocess's would)."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.folder, ignore_errors=True)

    def takes(self, env: dict[str, str]) -> bool:
        keys = set(env) | set(self.env)
        return self.proc.poll() is None and all(
            env.get(k) == self.env.get(k) for k in keys if k.startswith(_READ_AT_IMPORT)
        )

    def start(self, argv: list[str], cwd: Path, env: dict[str, str]) -> str:
        self.count += 1
        rid = str(self.count)
        req = {"id": rid, "argv": argv, "cwd": str(cwd), "env": env,
               "out": str(self.folder / f"{rid}.out"), "err": str(self.folder / f"{rid}.err")}  # fmt: skip
        data = memoryview((json.dumps(req) + "\n").encode())
        while data:  # an unbuffered pipe may take part of a write
            data = data[self.proc.stdin.write(data) :]
        return rid

    def wait(self, rid: str, timeout: float | None) -> tuple[int, str, str]:
        import select
        import time

        end = None if timeout is None else time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while rid not in self.done:
            if b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                doc = json.loads(line)
                if "pid" in doc:
                    self.pids[doc["id"]] = doc["pid"]
                else:
                    self.done[doc["id"]] = doc["rc"]
                continue
            left = None if end is None else end - time.monotonic()
            if left is not None and (left <= 0 or not select.select([fd], [], [], left)[0]):
                if rid in self.pids:  # as subprocess.run kills its child on a timeout
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.pids[rid], signal.SIGKILL)
                raise subprocess.TimeoutExpired(["python", "(zygote run)", rid], timeout)
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise RuntimeError("tests/torch_zygote.py exited")
            self.buf += chunk
        texts = []
        for ext in ("out", "err"):
            f = self.folder / f"{rid}.{ext}"
            texts.append(f.read_text(encoding="utf-8", errors="replace"))
            f.unlink()
        self.pids.pop(rid, None)
        return self.done.pop(rid), texts[0], texts[1]


@functools.cache
def _zygote() -> _Zygote | None:
    if os.environ.get("PRESK_TEST_NO_ZYGOTE"):
        return None
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    try:
        z = _Zygote()
    except RuntimeError:  # it could not start: each run a Python of its own
        return None
    import atexit

    atexit.register(z.close)
    return z


class PythonRun:
    """`python ARGV` in `cwd` started by `python_start`: `wait()` gives its CompletedProcess."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str] | None) -> None:
        self.argv, full = argv, {**os.environ, **(env or {})}
        z = _zygote()
        if z is not None and z.takes(full):
            self.zygote, self.rid = z, z.start(argv, Path(cwd).resolve(), full)
        else:
            self.zygote, self.proc = None, subprocess.Popen(
                [sys.executable, *argv], cwd=cwd, env=full, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip

    def wait(self, timeout: float | None = 900) -> subprocess.CompletedProcess[str]:
        if self.zygote is None:
            out, err = self.proc.communicate(timeout=timeout)
            rc = self.proc.returncode
        else:
            rc, out, err = self.zygote.wait(self.rid, timeout)
        return subprocess.CompletedProcess([sys.executable, *self.argv], rc, out, err)


def python_start(*argv: object, cwd: Path, env: dict[str, str] | None = None) -> PythonRun:
    """`python ARGV` in `cwd` (env added to the environment), as a user runs it, started: a
    fork of a Python that has imported torch already (tests/torch_zygote.py), since most of
    these runs are the exports' own tests and scripts, which import torch and call torch.func
    (seconds of CPU each, paid once per test worker instead); a Python of its own where torch
    is absent, where `env` changes a variable torch reads at its import, or with
    PRESK_TEST_NO_ZYGOTE=1."""
    return PythonRun([str(a) for a in argv], cwd, env)


def python_run(*argv: object, cwd: Path, env: dict[str, str] | None = None,
               timeout: float | None = 900) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`python_start(*argv, …).wait(timeout)`."""
    return python_start(*argv, cwd=cwd, env=env).wait(timeout)


# ---- `presk ARGS` forked from a Python that imported it (tests/presk_zygote.py) ---------------


class PreskZygote:
    """tests/presk_zygote.py started in `env` (this process's environment by default), its
    socket in a folder of its own; `close()` stops it."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        import tempfile

        self.folder = Path(tempfile.mkdtemp(prefix="presk-z-"))
        self.socket = str(self.folder / "socket")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "presk_zygote.py"), self.socket],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
        )  # fmt: skip
        if self.proc.stdout.readline() != b"ready\n":
            self.close()
            raise RuntimeError("tests/presk_zygote.py exited before it was ready")

    def close(self) -> None:
        """EOF to the zygote: it exits once its children have."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def run(
        self, argv: list[str], cwd: Path, env: dict[str, str], input: str | None,
        timeout: float | None,
    ) -> subprocess.CompletedProcess[str] | None:  # fmt: skip
        """What `subprocess.run(argv, capture_output=True, text=True, …)` gives, the child
        a fork of the zygote's; None where the zygote does not take the call (the environment
        sets a variable read at import otherwise, or it is gone)."""
        import locale
        import selectors
        import time

        from presk_client import call

        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe() if input is not None else (0, None)
        try:
            started = call(self.socket, argv, str(Path(cwd).resolve()), env, [in_r, out_w, err_w])
        finally:
            os.close(out_w)
            os.close(err_w)
            if in_w is not None:
                os.close(in_r)
        if started is None:
            for fd in (out_r, err_r, in_w):
                if fd is not None:
                    os.close(fd)
            return None
        conn, pid, reply = started
        encoding = locale.getpreferredencoding(False)
        data = {out_r: b"", err_r: b"", "reply": reply}
        sel = selectors.DefaultSelector()
        sel.register(out_r, selectors.EVENT_READ, out_r)
        sel.register(err_r, selectors.EVENT_READ, err_r)
        sel.register(conn, selectors.EVENT_READ, "reply")
        pending = memoryview(input.encode(encoding)) if input is not None else None
        if in_w is not None:
            os.set_blocking(in_w, False)
            sel.register(in_w, selectors.EVENT_WRITE, "input")
        end = None if timeout is None else time.monotonic() + timeout
        try:
            while sel.get_map():
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    raise subprocess.TimeoutExpired(argv, timeout, data[out_r], data[err_r])
                for key, _ in sel.select(left):
                    if key.data == "input":
                        try:
                            pending = pending[os.write(in_w, pending[: 1 << 16]) :]
                        except BrokenPipeError:
                            pending = pending[:0]
                        if not pending:
                            sel.unregister(in_w)
                            os.close(in_w)
                            in_w = None
                        continue
                    chunk = conn.recv(1 << 12) if key.data == "reply" else os.read(key.fd, 1 << 16)
                    if chunk:
                        data[key.data] += chunk
                    else:
                        sel.unregister(key.fileobj)
        finally:
            sel.close()
            conn.close()
            for fd in (out_r, err_r, in_w):
                if fd is not None:
                    os.close(fd)
        rc = next((json.loads(x)["rc"] for x in data["reply"].splitlines() if b'"rc"' in x), None)
        if rc is None:
            return None if data[out_r] == data[err_r] == b"" else subprocess.CompletedProcess(
                argv, -signal.SIGKILL, _text(data[out_r], encoding), _text(data[err_r], encoding)
            )  # fmt: skip
        return subprocess.CompletedProcess(
            argv, rc, _text(data[out_r], encoding), _text(data[err_r], encoding)
        )


def _text(data: bytes, encoding: str) -> str:
    """Bytes read from a pipe as subprocess's text mode gives them (universal newlines)."""
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


@functools.cache
def _presk_zygote() -> PreskZygote | None:
    if os.environ.get("PRESK_TEST_NO_ZYGOTE") or not _SCRIPT.exists():
        return None
    try:
        z = PreskZygote()
    except (RuntimeError, OSError):  # it could not start: each call a process of its own
        return None
    import atexit

    atexit.register(z.close)
    return z


@contextlib.contextmanager
def presk_on_path(env: dict[str, str]):
    """`env` with a folder first on its PATH holding a `presk` that is a client of a zygote
    started in `env` (tests/presk_client.py): each `presk` a shell runs in that environment
    (the tutorial's commands) a fork of a Python that imported presk once; `env` as it is
    with PRESK_TEST_NO_ZYGOTE=1."""
    if env.get("PRESK_TEST_NO_ZYGOTE") or not _SCRIPT.exists():
        yield env
        return
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="presk-bin-"))
    bin_env = {**env, "PATH": os.pathsep.join(p for p in (str(folder), env.get("PATH")) if p)}
    z = None
    try:
        z = PreskZygote(bin_env)
        client = folder / "presk"
        client.write_text(
            f"#!{sys.executable} -IS\n"
            "import sys\n"
            f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
            "from presk_client import run\n"
            f"run({z.socket!r}, {str(_SCRIPT)!r})\n",
            encoding="utf-8",
        )
        client.chmod(0o755)
        yield bin_env
    finally:
        if z is not None:
            z.close()
        shutil.rmtree(folder, ignore_errors=True)


_TRAIN_STEP = re.compile(r"^step (\d+)  epoch \d+  loss ([0-9.e+-]+)  lr \S+  \|g\| (\S+)$")


def train_log(program: Path, steps: int, backend: str, ckpt: Path) -> list[tuple[str, ...]]:
    """`presk train PROGRAM --steps STEPS --log-every 2 --backend BACKEND --ckpt CKPT`: its
    step lines as (step, loss, |g|), one every two steps."""
    done = presk_ok(
        "train", program, "--steps", steps, "--log-every", "2",
        "--backend", backend, "--ckpt", ckpt,
    )  # fmt: skip
    lines = [m.groups() for line in done.stdout.splitlines() if (m := _TRAIN_STEP.match(line))]
    assert len(lines) == steps // 2, done.stdout
    return lines


def native_training_is_the_interpreters(program: Path, steps: int, tmp_path: Path) -> None:
    """PROGRAM trained natively logs what the reference interpreter logs, at the six digits a
    line prints, and its loss goes down."""
    native = train_log(program, steps, "native", tmp_path / "native")
    assert native == train_log(program, steps, "interp", tmp_path / "interp")
    assert float(native[-1][1]) < float(native[0][1])  # it learns


def data_is_what_make_data_writes(example: Path, data: str, tmp_path: Path) -> None:
    """EXAMPLE's make_data.py, run in a fresh folder, writes data/DATA as it is committed."""
    (tmp_path / "data").mkdir()
    (tmp_path / "make_data.py").write_text((example / "make_data.py").read_text())
    subprocess.run([sys.executable, "make_data.py"], cwd=tmp_path, check=True)
    written = (tmp_path / "data" / data).read_bytes()
    assert written == (example / "data" / data).read_bytes()


def tutorial_run(folder: Path, every: int | None = None) -> Path:
    """The tutorial's training run (07_train.psk, the files it links and its data) copied
    into `folder`; with `every`, its checkpoints every `every` steps instead of 50."""
    for name in ("01_linear.psk", "02_norm.psk", "06_tower.psk"):
        shutil.copy(ROOT / "tutorial" / name, folder / name)
    (folder / "data").mkdir()
    shutil.copy(ROOT / "tutorial" / "data" / "pairs.psk.d", folder / "data" / "pairs.psk.d")
    text = (ROOT / "tutorial" / "07_train.psk").read_text(encoding="utf-8")
    if every is not None:
        text = text.replace("every 50 steps", f"every {every} steps")
    (folder / "07_train.psk").write_text(text, encoding="utf-8")
    return folder
