"""The fuzzer of issue 16: bad input of every kind through presk, counted by class.

    .venv/bin/python tools/fuzz.py [--inputs 10000] [--seed 0] [--timeout 10] [--jobs 1]
                                   [--save DIR] [--replay DIR]

Inputs, all drawn from one seeded generator (tools/fuzz_cases.py, the whole list made up
front):

- `check`: the tutorial's and the examples' programs mutated (a token deleted, doubled,
  swapped with the next, a number made extreme, a name replaced by another of the file, a
  word inserted, an expression nested a thousand deep, a line of megabytes) through
  `presk check`;
- `run`, `dump`: the mutants that check clean, through `presk run` of one of their
  functions and `presk dump --stage core-after-ad` (up to 12 mutants drawn, each checked
  once a worker and only when its syntax tree has no error: `checks_clean`);
- `data`: `.psk.d` files corrupted (header fields set to extremes, bytes flipped, cut,
  extended, their type replaced, NaN samples) through `presk data info|diff`,
  `presk run --data` and `presk train --data`;
- `stages`: garbage, truncated and type-confused documents (a field of a node given a
  value of another type) through every stage program (presk-parse, presk-elab,
  presk-lower, presk-ad, presk-dump);
- `flags`: extreme flags (`--bits 2`, `--digits 0`, `--dim B=0`, `--const L=0`, …);
- issue 27's surfaces (tools/fuzz_surfaces.py): `native`, the mutants that check clean
  through `presk run --backend native` (small dimensions, a realization, 1 or 2 threads),
  and commands run on a copy of a filled compile cache that was damaged (bits flipped, an
  object cut, emptied, replaced by a folder, a dangling link or another program's object,
  the cache folder a file); `serve`, `presk serve` of the tiny MiniGPT (weights trained at
  the start, 2 native steps) with prompts, temperatures, seeds, backends and constants of
  every kind, damaged weights and vocabularies; `profile`, damaged machine profiles through
  `presk run|train --opt --profile`; `documents`, every document kind (ast, elab, core,
  kernel) type-confused, given extreme numbers, cut, nested deeply, through the program
  that decodes it, and sources of big integers through presk-parse; `values`, one flag of
  a command (`--dim`, `--const`, `--bits`, `--digits`, `--temperature`, `--threads`,
  `--seed`, …) given a value of its domain or outside it (unicode digits, huge values).

`--surface NAME` runs every input from that one class (`--surface all`: each class in
turn, a table each): `make fuzz` runs 10,000 inputs per surface.

Each input runs in a worker process (in-process: the stages' functions, not a new Python
each time; `--jobs N` workers, each in its own copy of the programs, share out the list),
under a per-input timeout of CPU time (a busy machine makes no false hang) and an address
space of 3 GB beyond what the worker maps at its start. An internal error is what would
reach a user as one (presk's exit 101, a stage program's traceback, a worker that dies): it
is counted by class (the exception, its message without numbers, and the innermost frame of
presk's code); an input still running after the timeout is a hang (a worker stuck where the
alarm cannot reach is killed and restarted). Results are counted in the order of the list,
so the table is the same whatever the number of workers: the count by input class, then
each distinct internal error, with how often and an example (the lowest input of its class;
`--save DIR` writes every failing input there, to reproduce: a run or dump mutant is sent
back as soon as it is drawn, so that a worker that dies still leaves it; `--replay DIR`
runs the inputs saved there again, under the same limits).

tests/tools/test_fuzz.py runs short seeded runs.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import multiprocessing as mp
import multiprocessing.connection
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fuzz_cases import CLASSES, ROOT, Case, corrupt, entry_and_dims, make_cases, mutant
from fuzz_surfaces import NATIVE_RUNS, SERVE_CONSTS, WEIGHTS, damage_cache

PRESK = Path(sys.executable).parent / "presk"


# The long line of a run, dump or native mutant: 10,000 times `, x` (30 KB), not 200,000. The
# megabyte line is the check surface's: a tenth of these mutants, it took 95% of their time
# (tree-sitter's error recovery, the check of 200,000 axes) for as many clean mutants; a run
# quadratic in the line's length is a hang at 10,000 already.
RUN_LONG = (10_000,)


def clean_mutant(case: Case, tries: int = 12, timeout=None, started=None) -> list[str] | None:
    """The argv of a run or dump case on the first of its mutants that checks clean (its
    file written), or None. Each mutant's check has its own `timeout` of CPU time, and
    `started` is told its argv and files (the parent's clock starts again: twelve slow
    checks of megabyte lines on a busy machine are not one hang; a mutant that kills the
    worker is saved)."""
    path, seed = case.remutate
    rng = random.Random(seed)
    consts, extra = _consts(case.argv[1:])
    for _ in range(tries):
        name, text = mutant(path, rng, RUN_LONG)
        case.files = {name: text.encode("utf-8", errors="surrogatepass")}
        case.argv = ["check", name, *consts]  # a hang here is check's
        if timeout is not None:
            signal.setitimer(signal.ITIMER_PROF, timeout)
        if started is not None:
            started(case.argv, case.files)
        if checks_clean(case.argv, case.files[name], name):
            if case.kind in ("run", "native"):
                return ["run", name, *entry_and_dims(text, rng), *consts, *extra]
            return ["dump", name, "--stage", "core-after-ad", *consts]
    return None


# A mutant's text and check argv -> whether it checked clean, in this worker: the same mutant
# is drawn again and again (a token of a short program deleted, a number made extreme), and
# `presk check` of it gives the same answer every time.
_CHECKED: dict[bytes, bool] = {}


def checks_clean(argv: list[str], text: bytes, name: str) -> bool:
    """Whether `presk check` of a mutant (`argv`, its file `name` holding `text`, written
    when it is checked or clean) exits 0 with no internal error. A mutant whose syntax tree
    has an error is not clean and is not checked (what check says of it is the `check`
    surface's: a run or dump surface spent nine tenths of its time there, in the syntax
    error's repairs); a mutant seen before is not checked again."""
    from presk_syntax.parse import parse_tree

    key = hashlib.sha256(json.dumps(argv).encode() + b"\0" + text).digest()
    if key not in _CHECKED:
        if parse_tree(text).root_node.has_error:
            _CHECKED[key] = False
        else:
            Path(name).write_bytes(text)
            code, _, escaped = invoke("presk", argv, b"")
            _CHECKED[key] = code == 0 and escaped is None
    elif _CHECKED[key]:
        Path(name).write_bytes(text)  # what runs next reads it
    return _CHECKED[key]


def _consts(args: list[str]) -> tuple[list[str], list[str]]:
    """The `--const NAME=V` pairs of a mutant's flags (what its check takes), and the rest."""
    consts, rest = [], []
    while args:
        a, *args = args
        if a == "--const" and args:
            consts += [a, args[0]]
            args = args[1:]
        else:
            rest.append(a)
    return consts, rest


# ---- running one input ---------------------------------------------------------------------


class Timeout(BaseException):
    """Raised by the CPU-time alarm in the worker: not an Exception, so that no
    `except Exception` of presk's eats it."""


def _alarm(signum, frame):
    raise Timeout()


def invoke(program: str, argv: list[str], stdin: bytes) -> tuple[int, str, BaseException | None]:
    """Run presk or a stage program in this process: (exit code, stderr, the exception that
    escaped, if any: an internal error)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    inp = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    saved = sys.stdin
    sys.stdin = inp
    code, escaped = 0, None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if program == "presk":
                import click
                from presk_cli.main import cli

                try:
                    result = cli.main(args=argv, prog_name="presk", standalone_mode=False)
                    code = result if isinstance(result, int) else 0
                except click.exceptions.Exit as e:
                    code = e.exit_code
                except click.ClickException as e:
                    e.show()
                    code = 2
                except click.exceptions.Abort:
                    code = 130
            else:  # a stage program: its console script's function, as installed
                code = stage_program(program)(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Timeout as t:  # what it printed so far, for an input that runs until stopped
        out.flush()
        t.stdout = out.buffer.getvalue().decode("utf-8", errors="replace")
        raise
    except BaseException as e:  # what would be exit 101 or a traceback
        escaped = e
        code = 101
    finally:
        sys.stdin = saved
    err.flush()
    return code, err.buffer.getvalue().decode("utf-8", errors="replace"), escaped


def signature(e: BaseException) -> str:
    """An internal error's class: its type, its message without numbers or names in quotes,
    and the innermost frame in presk's own code."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "/packages/presk-" in f.filename]
    where = ""
    if frames:
        f = frames[-1]
        where = f" at {f.filename.split('/src/')[-1]}:{f.lineno}"
    message = re.sub(r"\d+", "N", str(e).split("\n")[0])[:90]
    return f"{type(e).__name__}: {message}{where}"


def run_case(case: Case, timeout: float, started=None) -> tuple[str, str]:
    """('ok' | 'skip' | 'internal' | 'hang', signature); `started` is told the argv and
    files of a run or dump's mutant, before its check and once it checks clean."""
    # the timeout counts the worker's CPU time, not the clock's: on a busy machine a slow
    # input is not a hang, and a real hang spins
    signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, timeout)
    try:
        argv = case.argv
        if case.remutate is not None:
            argv = clean_mutant(case, timeout=timeout, started=started)
            if argv is None:
                return "skip", ""
            case.argv = argv
            signal.setitimer(signal.ITIMER_PROF, timeout)  # the run's own time
            if started is not None:
                started(argv, case.files)
        code, err, escaped = invoke(case.program, argv, case.stdin)
    except Timeout as t:
        if case.endless and re.search(r"^step 1 ", getattr(t, "stdout", ""), re.M):
            return "ok", "exit stopped"  # training a horizon of 2^64 steps, as asked
        return "hang", "timeout"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    if escaped is not None:
        return "internal", signature(escaped)
    if "Traceback (most recent call last)" in err:
        return "internal", "a traceback on stderr: " + err.strip().splitlines()[-1][:90]
    if code == 101:
        return "internal", "exit 101: " + err.strip()[:90]
    return "ok", f"exit {code}"


def worker(conn, folder: str, timeout: float) -> None:
    import resource

    # 3 GB beyond what the process already maps: an input that asks for more fails here, not
    # the machine. Relative, because a parent that loaded torch (the test suite) already maps
    # several GB of address space; an absolute limit below that made every malloc fail.
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    limit = mapped + 3 * 2**30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.chdir(folder)
    cache = os.environ["PRESK_CACHE"] = str(Path(folder) / "cache")  # not the user's
    import warnings

    warnings.simplefilter("ignore")
    while True:
        case = conn.recv()
        if case is None:
            return
        damaged = prepare(case, Path(folder))
        for name, blob in case.files.items():
            Path(name).parent.mkdir(parents=True, exist_ok=True)
            Path(name).write_bytes(blob)
        began = time.monotonic()
        try:
            status, sig = run_case(
                case, timeout, lambda argv, files: conn.send(("started", argv, files))
            )
        except MemoryError:
            status, sig = "internal", "MemoryError (above 3 GB)"
        if damaged is not None and status == "internal":
            sig = f"{sig} [cache: {damaged}]"
        conn.send((status, sig, case.argv, time.monotonic() - began, case.files))
        for name in case.files:
            with contextlib.suppress(OSError):
                os.unlink(name)
        shutil.rmtree("ckpt", ignore_errors=True)
        if damaged is not None:  # the next input on the worker's own cache again
            where = Path(os.environ["PRESK_CACHE"])
            os.environ["PRESK_CACHE"] = cache
            if where.is_symlink() or where.is_file():
                where.unlink()
            _rmtree(where)


def _rmtree(where: Path) -> None:
    """Remove a damaged cache, modes cleared first (a folder of mode 0 included)."""
    for p in sorted(where.rglob("*"), reverse=True) if where.is_dir() else ():
        if not p.is_symlink():
            with contextlib.suppress(OSError):
                os.chmod(p, 0o700)
    shutil.rmtree(where, ignore_errors=True)


def prepare(case: Case, folder: Path) -> str | None:
    """What an input needs before it runs: its weights damaged (`serve`: made from the real
    ones), or its damaged copy of a filled compile cache (`native`: the damage's name; the
    copy in a folder of its own, whose objects this process has never loaded)."""
    if case.files.get("bad_weights.psk.d") == b"CORRUPT":
        rng = random.Random(case.prepare[1] if case.prepare else 0)
        case.files["bad_weights.psk.d"] = corrupt((folder / WEIGHTS).read_bytes(), rng)
    if case.prepare is None or case.prepare[0] != "cache":
        return None
    _, k, seed = case.prepare
    templates = folder.parent / "caches"
    where = folder / f"cache-{seed}"
    _rmtree(where)
    shutil.copytree(templates / str(k), where, symlinks=True)
    others = [
        p for j in range(len(NATIVE_RUNS)) if j != k for p in (templates / str(j)).rglob("*.so")
    ]
    os.environ["PRESK_CACHE"] = str(where)
    return damage_cache(where, others, seed)


def setup(top: Path, folders: list[str], only) -> None:
    """What the new surfaces run on, made once with presk itself (each its own process):
    the tiny MiniGPT's weights for `serve` and `values` (2 native steps), copied into every
    work folder, and for `native` a filled compile cache of each command of NATIVE_RUNS."""
    env = {**os.environ, "PRESK_CACHE": str(top / "setup-cache"), "NO_COLOR": "1"}
    if {"serve", "values"} & set(only):
        train = ["train", "tests/examples/minigpt/train_minigpt.psk", *SERVE_CONSTS]
        train += ["--data", "tests/examples/minigpt/data/tiny_T8.psk.d", "--steps", "2"]
        train += ["--log-every", "0", "--ckpt", str(top / "serve"), "--backend", "native"]
        subprocess.run([str(PRESK), *train], cwd=ROOT, env=env, check=True, capture_output=True)
        for f in folders:
            (Path(f) / WEIGHTS).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(top / "serve" / "final.psk.d", Path(f) / WEIGHTS)
    if "native" in only:
        for k, argv in enumerate(NATIVE_RUNS):
            env["PRESK_CACHE"] = str(top / "caches" / str(k))
            subprocess.run([str(PRESK), *argv], cwd=folders[0], env=env, check=True,
                           capture_output=True)  # fmt: skip
            shutil.rmtree(Path(folders[0]) / "ckpt", ignore_errors=True)


def stage_program(name: str):
    """The function of a stage program (`presk-parse`, …, `presk-dump`): its console script's
    entry point, which takes its argv."""
    from importlib.metadata import entry_points

    (ep,) = [ep for ep in entry_points(group="console_scripts") if ep.name == name]
    return ep.load()


def _chain(path: str, programs: tuple[str, ...]) -> list[bytes]:
    """The documents of `path` through stage programs in a pipe, each one's output."""
    docs, current = [], b""
    for program in programs:
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        saved = sys.stdin, sys.stdout
        sys.stdin = io.TextIOWrapper(io.BytesIO(current), encoding="utf-8")
        sys.stdout = out
        try:
            code = stage_program(program)([path] if program == "presk-parse" else [])
        finally:
            sys.stdin, sys.stdout = saved
        out.flush()
        current = out.buffer.getvalue()
        assert code == 0 and current, f"{program} of {path} failed"
        docs.append(current)
    return docs


def documents_of(folder: str) -> dict[str, bytes]:
    """Valid documents of each kind (ast, elab, core, core after ad) of 06_tower.psk, and
    the kernel document of 07_train.psk's `loss` at B 8, fused."""
    from presk_core.codec import decode_core
    from presk_kernel.codec import encode_kernel
    from presk_kernel.fuse import fuse
    from presk_kernel.lower import lower_entry

    stages = ("presk-parse", "presk-elab", "presk-lower", "presk-ad")
    tower = _chain(str(Path(folder) / "tutorial" / "06_tower.psk"), stages)
    docs = dict(zip(("ast", "elab", "core", "core-ad"), tower, strict=True))
    core, _ = decode_core(_chain(str(Path(folder) / "tutorial" / "07_train.psk"), stages)[-1])
    try:
        docs["kernel"] = encode_kernel(fuse(lower_entry(core, "loss", {"B": 8}, None, "f64"))[0])
    except Exception as e:  # presk-kernel broken: its decoder is still fuzzed, on less
        print(f"fuzz: 07_train.psk's loss does not lower ({e!r}): a kernel of one loop instead",
              file=sys.stderr)  # fmt: skip
        docs["kernel"] = encode_kernel(_one_loop())
    return docs


def _one_loop():
    """A schedule of one kernel that fills a buffer of two f32 (tests/cli's example)."""
    from presk_kernel import ir as K

    out = K.Buffer(0, "f32", (K.Axis("n", 2),))
    body = (K.Loop("i0", "n", 2, (K.Store(0, (K.Affine.var("i0"),), K.Const(1.5, "f32")),)),)
    k = K.Kernel("fill", "f/%1", (), (out,), body, "f32", K.Layout(order=("i0",)))
    host = K.HostBuffer(0, "f32", out.axes, "f/%1", "output")
    return K.Schedule("f", (), (host,), (K.Launch(k, (K.Arg(0),)),), (), (0,))


@dataclass
class Tally:
    tried: Counter = field(default_factory=Counter)
    seconds: Counter = field(default_factory=Counter)
    exits: dict[str, Counter] = field(default_factory=dict)  # input class -> exit codes
    internal: Counter = field(default_factory=Counter)
    hangs: Counter = field(default_factory=Counter)
    classes: dict[str, Counter] = field(default_factory=dict)  # input class -> signatures
    example: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Slot:
    """A worker: its folder, its process and end of the pipe (None until started, and after
    it dies or is killed), the input it runs (an index of the list) and since when."""

    folder: str
    proc: mp.Process | None = None
    conn: mp.connection.Connection | None = None
    index: int | None = None
    began: float = 0.0
    deadline: float = 0.0


def fuzz(n: int, seed: int, timeout: float = 10.0, only=CLASSES, save: str | None = None,
         progress=None, jobs: int = 1, cases: list[Case] | None = None,
         start: int = 0) -> Tally:  # fmt: skip
    """Run n seeded inputs from the `start`-th on (or these `cases`) in `jobs` workers; the
    counts by class, in the list's order."""
    top = tempfile.mkdtemp(prefix="presk-fuzz-")
    slots: list[Slot] = []
    try:
        for j in range(max(1, jobs)):
            folder = Path(top) / f"worker{j}"
            for sub in ("tutorial", "tests/examples"):
                shutil.copytree(ROOT / sub, folder / sub)
            slots.append(Slot(str(folder)))
        if cases is None:
            setup(Path(top), [s.folder for s in slots], only)
        else:  # a replay: what its inputs need
            setup(Path(top), [s.folder for s in slots], {c.kind for c in cases})
        documents = documents_of(slots[0].folder)
        _preload()  # imported once, before the workers fork: a restart costs nothing
        if cases is None:
            cases = make_cases(n, seed, documents, tuple(only))[start:]
        tally = Tally()
        ctx = mp.get_context("fork")
        stuck = max(120, 12 * timeout)  # seconds of the clock: stuck where the alarm cannot reach
        done: dict[int, tuple[str, str, float]] = {}
        sent = counted = 0
        while counted < len(cases):
            for slot in slots:
                if slot.index is None and sent < len(cases):
                    if slot.proc is None:
                        conn, child = ctx.Pipe()
                        slot.proc = ctx.Process(
                            target=worker, args=(child, slot.folder, timeout), daemon=True
                        )
                        slot.proc.start()
                        child.close()  # the worker's end: a worker that dies is an EOF here
                        slot.conn = conn
                    slot.conn.send(cases[sent])
                    slot.index, slot.began = sent, time.monotonic()
                    slot.deadline = slot.began + stuck
                    sent += 1
            busy = [s for s in slots if s.index is not None]
            wait = max(0.0, min(s.deadline for s in busy) - time.monotonic()) if busy else 0.0
            ready = mp.connection.wait([s.conn for s in busy], wait)
            for slot in busy:
                if slot.conn in ready:
                    outcome = _receive(slot, cases[slot.index], stuck)
                elif time.monotonic() >= slot.deadline:
                    outcome = ("hang", "timeout (killed)", timeout)
                    _stop(slot)
                else:
                    continue
                if outcome is not None:
                    done[slot.index] = outcome
                    slot.index = None
                    if slot.proc is not None and not slot.proc.is_alive():
                        _stop(slot)
            while counted in done:
                status, sig, seconds = done.pop(counted)
                _count(tally, counted, cases[counted], status, sig, seconds, save)
                counted += 1
                if progress is not None:
                    progress(counted, len(cases), tally)
        for slot in slots:
            if slot.proc is not None:
                slot.conn.send(None)
                slot.proc.join(5)
        return tally
    finally:
        for slot in slots:
            _stop(slot)
        shutil.rmtree(top, ignore_errors=True)


def _receive(slot: Slot, case: Case, stuck: float) -> tuple[str, str, float] | None:
    """A message from a worker: the outcome of its input, or None (a run or dump's mutant
    drawn: its argv and files kept, the clock started again)."""
    try:
        message = slot.conn.recv()
    except EOFError:  # the worker died (a crash in C code): an internal error
        slot.proc.join(5)
        code = slot.proc.exitcode
        _stop(slot)
        return "internal", f"the process died ({code})", time.monotonic() - slot.began
    if message[0] == "started":
        case.argv, case.files = message[1], message[2]
        slot.deadline = time.monotonic() + stuck
        return None
    status, sig, case.argv, seconds, case.files = message
    return status, sig, seconds


def _stop(slot: Slot) -> None:
    if slot.proc is not None:
        slot.proc.kill()
        slot.proc.join()
        slot.conn.close()
    slot.proc = slot.conn = None


def _count(tally: Tally, i: int, case: Case, status: str, sig: str, seconds: float,
           save: str | None) -> None:  # fmt: skip
    if status == "skip":
        return
    if case.remutate is not None and case.argv[0] == "check":  # a mutant's check
        case.kind = "check"
    tally.tried[case.kind] += 1
    if status == "ok":
        tally.exits.setdefault(case.kind, Counter())[sig] += 1
    tally.seconds[case.kind] += seconds
    if status in ("internal", "hang"):
        (tally.internal if status == "internal" else tally.hangs)[case.kind] += 1
        key = sig if status == "internal" else f"hang: {case.argv[0]} {case.argv[1:2]}"
        tally.classes.setdefault(case.kind, Counter())[key] += 1
        tally.example.setdefault(key, [case.program, *case.argv])
        if save:
            _save(save, i, case)


def _preload() -> None:
    import presk_ad  # noqa: F401
    import presk_cli.commands  # noqa: F401
    import presk_cli.dump  # noqa: F401
    import presk_cli.export  # noqa: F401
    import presk_cli.main  # noqa: F401
    import presk_core.run  # noqa: F401
    import presk_export  # noqa: F401


def _save(folder: str, i: int, case: Case) -> None:
    where = Path(folder) / f"{i:05d}-{case.kind}"
    where.mkdir(parents=True, exist_ok=True)
    for name, blob in case.files.items():
        (where / Path(name).name).write_bytes(blob)
    if case.stdin:
        (where / "stdin.msgpack").write_bytes(case.stdin)
    (where / "command.txt").write_text(" ".join([case.program, *case.argv]) + "\n")
    (where / "argv.json").write_text(json.dumps([case.program, *case.argv]) + "\n")


def saved(folder: str) -> list[Case]:
    """The inputs that `--save` wrote to `folder`, to run again (`--replay`): each its
    program, argv, files (put back where the argv names them) and stdin, as it failed."""
    cases = []
    for where in sorted(p for p in Path(folder).iterdir() if (p / "command.txt").exists()):
        kind = where.name.split("-", 1)[1]
        if (where / "argv.json").exists():
            program, *argv = json.loads((where / "argv.json").read_text())
        else:  # saved before argv.json: split at spaces
            program, *argv = (where / "command.txt").read_text().split()
        stdin = b""
        files = {}
        for f in sorted(where.iterdir()):
            if f.name == "stdin.msgpack":
                stdin = f.read_bytes()
            elif f.name not in ("command.txt", "argv.json"):
                at = next((a for a in argv if Path(a).name == f.name), f.name)
                files[at] = f.read_bytes()
        cases.append(Case(kind, program, argv, files, stdin))
    return cases


def _exits(codes: Counter) -> str:
    return ", ".join(f"{k.split()[-1]}: {n}" for k, n in sorted(codes.items()))


def table(t: Tally) -> str:
    rows = ["| inputs | tried | internal errors (distinct) | hangs | seconds | other exits |"]
    rows.append("|---|---|---|---|---|---|")
    for c in CLASSES:
        if t.tried[c]:
            distinct = len([k for k in t.classes.get(c, {}) if not k.startswith("hang")])
            rows.append(
                f"| {c} | {t.tried[c]} | {t.internal[c]} ({distinct}) | {t.hangs[c]}"
                f" | {t.seconds[c]:.0f} | {_exits(t.exits.get(c, Counter()))} |"
            )
    total = sum(t.tried.values())
    rows.append(f"| all | {total} | {sum(t.internal.values())} | {sum(t.hangs.values())} |")
    for c, sigs in t.classes.items():
        rows.append(f"\n{c}:")
        for sig, k in sigs.most_common():
            rows.append(f"  {k:5d}  {sig}\n         e.g. {' '.join(t.example[sig])[:160]}")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=10.0, help="Seconds an input may take.")
    parser.add_argument("--only", default=",".join(CLASSES), help="Input classes, comma-separated.")
    parser.add_argument(
        "--surface",
        choices=(*CLASSES, "all"),
        help="Every input from this class (all: each class in turn, --inputs of each).",
    )
    parser.add_argument("--jobs", type=int, default=1, help="Worker processes.")
    parser.add_argument("--save", help="A folder for the failing inputs.")
    parser.add_argument("--replay", help="Run the inputs saved in this folder again.")
    parser.add_argument("--every", type=int, default=1000, help="Print the table every N inputs.")
    parser.add_argument(
        "--start",
        type=int,
        default=0,
        help="Skip the first K of the seeded inputs (a resumed run).",
    )
    args = parser.parse_args()
    only = tuple(c for c in args.only.split(",") if c)
    started = time.monotonic()

    def progress(i: int, n: int, tally: Tally) -> None:
        if args.every and i % args.every == 0 and i < n:
            print(f"after {i} inputs, {time.monotonic() - started:.0f} s:\n{table(tally)}\n",
                  flush=True)  # fmt: skip
        if i % 100 == 0 or i == n:
            print(f"\rfuzz: {i}/{n} inputs, {time.monotonic() - started:.0f} s", end="",
                  file=sys.stderr, flush=True)  # fmt: skip

    cases = saved(args.replay) if args.replay else None
    n = len(cases) if cases is not None else args.inputs
    rounds = [only]
    if args.surface is not None:
        rounds = [(c,) for c in CLASSES] if args.surface == "all" else [(args.surface,)]
    bad = 0
    for only in rounds:
        tally = fuzz(
            n, args.seed, args.timeout, only, args.save, progress, args.jobs, cases, args.start
        )
        print(file=sys.stderr)
        if args.surface is not None:
            print(f"surface {only[0]}:")
        print(table(tally))
        print(
            f"\n{sum(tally.tried.values())} inputs in {time.monotonic() - started:.0f} s,"
            f" {'replayed from ' + args.replay if args.replay else f'seed {args.seed}'},"
            f"{f' from input {args.start},' if args.start else ''}"
            f" {args.jobs} job(s)\n",
            flush=True,
        )
        bad += sum(tally.internal.values()) + sum(tally.hangs.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
