"""The fuzzer of issue 16: bad input of every kind through presk, counted by class.

    .venv/bin/python tools/fuzz.py [--inputs 10000] [--seed 0] [--timeout 10] [--save DIR]

Inputs, all drawn from one seeded generator:

- `check`: the tutorial's and the examples' programs mutated (a token deleted, doubled,
  swapped with the next, a number made extreme, a name replaced by another of the file, a
  word inserted, an expression nested a thousand deep, a line of megabytes) through
  `presk check`;
- `run`, `dump`: the mutants that check clean, through `presk run` of one of their
  functions and `presk dump --stage core-after-ad`;
- `data`: `.psk.d` files corrupted (header fields set to extremes, bytes flipped, cut,
  extended, their type replaced, NaN samples) through `presk data info|diff`,
  `presk run --data` and `presk train --data`;
- `stages`: garbage, truncated and type-confused documents (a field of a node given a
  value of another type) through every stage program (presk-parse, presk-elab,
  presk-lower, presk-ad, presk-dump);
- `flags`: extreme flags (`--bits 2`, `--digits 0`, `--dim B=0`, `--const L=0`, …).

Each input runs in a worker process (in-process: the stages' functions, not a new Python
each time), under a per-input timeout of CPU time (a busy machine makes no false hang). An
internal error is what would reach a user as one (presk's exit 101, a stage program's
traceback): it is counted by class (the exception, its message without numbers, and the
innermost frame of presk's code); an input still running after the timeout is a hang (a
worker stuck where the alarm cannot reach is killed and restarted). The table printed at the
end is the count by input class; then each distinct internal error, with how often and an
example (`--save DIR` writes every failing input there, to reproduce).

`make fuzz` runs 10,000 inputs; tests/tools/test_fuzz.py runs a short seeded run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing as mp
import os
import random
import re
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLASSES = ("check", "run", "dump", "data", "stages", "flags")
SHARE = {"check": 0.3, "run": 0.2, "dump": 0.1, "data": 0.2, "stages": 0.15, "flags": 0.05}
TINY = ("--const", "V=32", "--const", "D=8", "--const", "H=2", "--const", "L=2")
SOURCES = {  # the programs mutated, and the constants they run at
    "tutorial/01_linear.psk": (),
    "tutorial/02_norm.psk": (),
    "tutorial/03_attention.psk": (),
    "tutorial/04_grad.psk": (),
    "tutorial/05_sample.psk": (),
    "tutorial/06_tower.psk": (),
    "tutorial/07_train.psk": (),
    "tests/examples/mlp/mlp.psk": (),
    "tests/examples/minigpt/minigpt.psk": TINY,
    "tests/examples/minigpt/train_minigpt.psk": TINY,
    "tests/examples/bert/bert.psk": TINY,
    "tests/examples/llama/llama.psk": ("--const", "D=8", "--const", "H=2", "--const", "F=12"),
}
PAIRS = "tutorial/data/pairs.psk.d"
WINDOWS = "tests/examples/minigpt/data/tiny_T8.psk.d"
STAGES = ("presk-parse", "presk-elab", "presk-lower", "presk-ad", "presk-dump")
EXTREME_NUMBERS = ("0", "1", "-1", "2147483648", "4294967297", "1e308", "1e-308", "0.0")
EXTREME_NUMBERS += ("99999999999999999999", "1e8", "2^31", "1 + 0", "7 % 0", "(0 - 3)")
WORDS = ("fn", "let", "grad", "module", "param", "use", "stack{2}", "ein[", "(", ")", "[", "]")
WORDS += ("λ", "·", "^", "=", ",", ":", "->", "ℝ[]", "idx[3][]", "...", "uses Rand", "'")
WORDS += ("stop_grad", "uniform(key, n: 3)", "bernoulli(key, 0.5, n: 2)", ">=", "dim T >= 2")
WORDS += ("dim 2 <= T <= 1", "key :", "key,")  # issue 16's leftovers: bounds, draws


@dataclass
class Case:
    kind: str  # one of CLASSES
    program: str  # "presk" or a stage program
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)  # written in the work folder
    stdin: bytes = b""
    remutate: tuple[str, int] | None = None  # run/dump: (source, seed) of mutants until one checks


# ---- the inputs --------------------------------------------------------------------------


def tokens(text: str) -> list[tuple[int, int, str]]:
    """The tokens of a program: (start, end, kind), character offsets (in one pass)."""
    from presk_syntax.parse import parse_tree

    data = text.encode("utf-8", errors="surrogatepass")
    out, cursor = [], parse_tree(data).walk()
    at_byte = at_char = 0

    def char(byte: int) -> int:
        nonlocal at_byte, at_char
        at_char += len(data[at_byte:byte].decode("utf-8", errors="ignore"))
        at_byte = byte
        return at_char

    while True:
        if cursor.goto_first_child():
            continue
        node = cursor.node
        if node.type != "comment" and node.end_byte > node.start_byte:
            start = char(node.start_byte)
            out.append((start, char(node.end_byte), node.type))
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return out


def mutate(text: str, rng: random.Random) -> str:
    toks = tokens(text)
    if not toks:
        return text
    k = rng.randrange(len(toks))
    start, end, kind = toks[k]
    word = text[start:end]
    op = rng.choice(("delete", "double", "swap", "number", "name", "insert", "deep", "long"))
    if op == "delete":
        return text[:start] + text[end:]
    if op == "double":
        return text[:end] + " " + word + text[end:]
    if op == "swap" and k + 1 < len(toks):
        s2, e2, _ = toks[k + 1]
        return text[:start] + text[s2:e2] + text[end:s2] + word + text[e2:]
    if op == "number":
        numbers = [t for t in toks if t[2] in ("integer", "float")] or [toks[k]]
        start, end, _ = rng.choice(numbers)
        return text[:start] + rng.choice(EXTREME_NUMBERS) + text[end:]
    if op == "name":
        names = sorted({text[s:e] for s, e, t in toks if t == "identifier"})
        idents = [t for t in toks if t[2] == "identifier"]
        if names and idents:
            start, end, _ = rng.choice(idents)
            return text[:start] + rng.choice(names) + text[end:]
    if op == "deep":
        idents = [t for t in toks if t[2] == "identifier"] or [toks[k]]
        start, end, _ = rng.choice(idents)
        w = text[start:end]
        n = rng.choice((300, 1000))
        deep = rng.choice(
            ("(" * n + w + ")" * n, " + ".join([w] * n), "- " * n + w, f"{w}^1e8", f"{w}^2^31")
        )
        return text[:start] + deep + text[end:]
    if op == "long":
        return text[:end] + ", x" * rng.choice((10_000, 200_000)) + text[end:]
    return text[:start] + rng.choice(WORDS) + " " + text[start:]


def entry_and_dims(text: str, rng: random.Random) -> list[str]:
    """`--entry E --dim B=2 …` for one function of a program (a module's by its name)."""
    fns: list[str] = []
    module = None
    for line in text.splitlines():
        m = re.match(r"\s*module\s+(\w+)", line)
        if m:
            module = m.group(1)
        m = re.match(r"(\s*)fn\s+(\w+)", line)
        if m:
            fns.append(f"{module}.{m.group(2)}" if m.group(1) and module else m.group(2))
        if line.startswith("}"):
            module = None
    dims = sorted(set(re.findall(r"^dim\s+(\w+)", text, re.M)) | {"B", "T"})
    args = ["--entry", rng.choice(fns) if fns else "f"]
    for d in dims:
        args += ["--dim", f"{d}={rng.choice((1, 2, 3))}"]
    return args


def mutant(path: str, rng: random.Random) -> tuple[str, str]:
    """A mutant of a program: its file name (next to the original) and its text."""
    text = (ROOT / path).read_text(encoding="utf-8")
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        text = mutate(text, rng)
        if len(text) > 100_000:  # a line of megabytes: mutated no further
            break
    return str(Path(path).parent / "fuzz_mutant.psk"), text


def source_case(kind: str, rng: random.Random) -> Case:
    path = rng.choice(sorted(SOURCES))
    consts = list(SOURCES[path])
    if kind == "check":
        name, text = mutant(path, rng)
        files = {name: text.encode("utf-8", errors="surrogatepass")}
        return Case(kind, "presk", ["check", name, *consts], files)
    # run and dump: the worker draws mutants from this seed until one checks clean
    return Case(kind, "presk", [kind, *consts], remutate=(path, rng.randrange(2**32)))


def clean_mutant(case: Case, tries: int = 12, timeout=None, started=None) -> list[str] | None:
    """The argv of a run or dump case on the first of its mutants that checks clean (its
    file written), or None. Each mutant's check has its own `timeout` of CPU time, and
    `started` is told its argv (the parent's clock starts again: twelve slow checks of
    megabyte lines on a busy machine are not one hang)."""
    path, seed = case.remutate
    rng = random.Random(seed)
    consts = case.argv[1:]
    for _ in range(tries):
        name, text = mutant(path, rng)
        case.files = {name: text.encode("utf-8", errors="surrogatepass")}
        Path(name).write_bytes(case.files[name])
        case.argv = ["check", name, *consts]  # a hang here is check's
        if timeout is not None:
            signal.setitimer(signal.ITIMER_PROF, timeout)
        if started is not None:
            started(case.argv)
        code, _, escaped = invoke("presk", case.argv, b"")
        if code == 0 and escaped is None:
            if case.kind == "run":
                return ["run", name, *entry_and_dims(text, rng), *consts]
            return ["dump", name, "--stage", "core-after-ad", *consts]
    return None


def corrupt(blob: bytes, rng: random.Random) -> bytes:
    b = bytearray(blob)
    op = rng.choice(("field", "flip", "cut", "extend", "type", "nan", "empty", "header0"))
    if op == "field":
        fmt, at = rng.choice((("<I", 4), ("<I", 8), ("<Q", 12), ("<Q", 20), ("<I", 28)))
        top = 2 ** (8 * struct.calcsize(fmt)) - 1
        struct.pack_into(
            fmt, b, at, rng.choice((0, 1, 7, 8, 64, top, top // 2, rng.randrange(top)))
        )
    elif op == "flip":
        for _ in range(rng.choice((1, 2, 8))):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif op == "cut":
        b = b[: rng.randrange(len(b))]
    elif op == "extend":
        b += bytes(rng.randrange(1, 64))
    elif op == "type":
        text = rng.choice(
            ("ℝ[]", "params Tower", "(ℝ[model: 4]", "idx[3]", "ℝ[model: 99999999999]",
             "(ℝ[model: 4], ℝ[model: 5])", "bool[model: 4]", "(ℝ[model: 0], ℝ[model: 0])",
             "ℝ[" * 500, "(idx[0][seq: 8], idx[0][seq: 8])", "ℝ[a: 1, a: 2]")
        ).encode("utf-8")  # fmt: skip
        h = (32 + len(text) + 7) // 8 * 8
        head = struct.pack("<4sIIQQI", b"PSKD", 1, h, *struct.unpack_from("<QQ", b, 12), len(text))
        old = struct.unpack_from("<I", b, 8)[0]
        b = bytearray(head + text + bytes(h - 32 - len(text))) + b[old:]
    elif op == "nan":
        old = struct.unpack_from("<I", b, 8)[0]
        for _ in range(3):
            at = old + 8 * rng.randrange(max(1, (len(b) - old) // 8))
            if at + 8 <= len(b):
                struct.pack_into("<d", b, at, rng.choice((float("nan"), float("inf"), -1e308)))
    elif op == "empty":
        b = bytearray()
    else:
        struct.pack_into("<I", b, 8, 0)
    return bytes(b)


def data_case(rng: random.Random) -> Case:
    source = rng.choice((PAIRS, WINDOWS))
    blob = corrupt((ROOT / source).read_bytes(), rng)
    files = {"bad.psk.d": blob}
    which = rng.choice(("info", "diff", "run", "train"))
    if which == "info":
        return Case("data", "presk", ["data", "info", "bad.psk.d"], files)
    if which == "diff":
        return Case("data", "presk", ["data", "diff", "bad.psk.d", source], files)
    if source == PAIRS:
        program, consts, entry = "tutorial/07_train.psk", [], "loss"
    else:
        program, consts, entry = "tests/examples/minigpt/train_minigpt.psk", list(TINY), "loss"
    if which == "run":
        argv = ["run", program, "--entry", entry, "--data", "bad.psk.d", *consts]
    else:
        argv = ["train", program, "--data", "bad.psk.d", "--steps", "1"]
        argv += ["--log-every", "0", "--ckpt", "ckpt", *consts]
    return Case("data", "presk", argv, files)


def confuse(value, rng: random.Random):
    """A msgpack value with one field somewhere given a value of another type."""
    nodes = []

    def walk(x):
        if isinstance(x, dict):
            nodes.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(value)
    if nodes:
        node = rng.choice(nodes)
        keys = [k for k in node if k != "@"] or list(node)
        if keys:
            node[rng.choice(keys)] = rng.choice(
                (5, -1, 2**63, "x", "", None, True, 1.5, [], [1, "a"], {}, {"@": "Nope"},
                 {"@": "Span", "file": 99, "start": 0, "end": 1})
            )  # fmt: skip
    return value


def stage_case(rng: random.Random, documents: dict[str, bytes]) -> Case:
    import msgpack

    program = rng.choice(STAGES)
    if program == "presk-parse":
        text = rng.choice(
            (bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))),
             (ROOT / rng.choice(sorted(SOURCES))).read_bytes()[: rng.randrange(1, 2000)],
             b"\xff\xfe" + b"fn f() -> \x00 =\n", b"")
        )  # fmt: skip
        return Case("stages", program, ["garbage.psk"], {"garbage.psk": text})
    takes = {"presk-elab": "ast", "presk-lower": "elab", "presk-ad": "core"}.get(program)
    doc = documents[takes or rng.choice(sorted(documents))]
    op = rng.choice(("confuse", "confuse", "confuse", "cut", "bytes", "kind"))
    if op == "confuse":
        doc = msgpack.packb(confuse(msgpack.unpackb(doc, strict_map_key=False), rng))
    elif op == "cut":
        doc = doc[: rng.randrange(len(doc))]
    elif op == "bytes":
        doc = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    else:
        doc = documents[rng.choice(sorted(documents))]
    return Case("stages", program, [], {}, doc)


FLAGS = [
    ["run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "B=0"],
    ["run", "tutorial/01_linear.psk", "--entry", "Linear{0, 2}.apply", "--dim", "B=2"],
    ["run", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--bits", "2"],
    ["run", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--digits", "0"],
    ["run", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--digits", "400"],
    ["run", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--seed", "-1"],
    ["run", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--seed", str(2**70)],
    ["run", "tutorial/06_tower.psk", "--entry", "Tower.apply", "--const", "L=0"],
    ["run", "tutorial/06_tower.psk", "--entry", "Tower.apply", "--const", "D=0"],
    ["check", "tutorial/06_tower.psk", "--const", "L=2^31"],
    ["check", "tutorial/03_attention.psk", "--const", "H=0"],
    ["check", "tutorial/03_attention.psk", "--const", "D=x"],
    ["check", "tutorial/03_attention.psk", "--const", "D=1e400"],
    ["run", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=0"],
    ["run", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=2000"],
    ["run", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=-1", "--dim", "T=2"],
    ["run", "tutorial/04_grad.psk", "--entry", "nope", "--dim", "B=2"],
    ["run", "tutorial/04_grad.psk", "--entry", "", "--dim", "B=2"],
    ["run", "tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "B=x"],
    ["train", "tutorial/07_train.psk", "--steps", "0"],
    ["train", "tutorial/07_train.psk", "--steps", "1", "--bits", "2", "--ckpt", "ckpt"],
    ["train", "tutorial/07_train.psk", "--steps", "1", "--seed", "-5", "--ckpt", "ckpt"],
    ["dump", "tutorial/06_tower.psk", "--stage", "nope"],
    ["dump", "tutorial/06_tower.psk", "--stage", "core", "--unroll-stack", "--const", "L=0"],
    ["data", "info", PAIRS, "--limit", "0"],
    ["data", "info", PAIRS, "--limit", str(2**70)],
    ["export", "tutorial/06_tower.psk", "--target", "c", "-o", "out"],
    ["check", "/dev/null"],
    ["check", "tutorial"],
    ["check", "nonexistent.psk"],
]


def flags_case(rng: random.Random) -> Case:
    return Case("flags", "presk", list(rng.choice(FLAGS)))  # paths in the work folder


def make_cases(n: int, seed: int, documents: dict[str, bytes], only=CLASSES) -> list[Case]:
    rng = random.Random(seed)
    weights = [SHARE[c] for c in only]
    cases = []
    for _ in range(n):
        kind = rng.choices(only, weights)[0]
        if kind in ("check", "run", "dump"):
            cases.append(source_case(kind, rng))
        elif kind == "data":
            cases.append(data_case(rng))
        elif kind == "stages":
            cases.append(stage_case(rng, documents))
        else:
            cases.append(flags_case(rng))
    return cases


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
            elif program == "presk-dump":
                from presk_cli.dump import dump_main

                code = dump_main(argv)
            else:
                from presk_core.passes import stage_main

                code = stage_main(program, argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Timeout:
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
    """('ok' | 'skip' | 'internal' | 'hang', signature); `started` is told the argv of a
    run or dump once its mutant checks clean."""
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
                started(argv)
        code, err, escaped = invoke(case.program, argv, case.stdin)
    except Timeout:
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
    import warnings

    warnings.simplefilter("ignore")
    while True:
        case = conn.recv()
        if case is None:
            return
        for name, blob in case.files.items():
            Path(name).parent.mkdir(parents=True, exist_ok=True)
            Path(name).write_bytes(blob)
        began = time.monotonic()
        try:
            status, sig = run_case(case, timeout, lambda argv: conn.send(("started", argv)))
        except MemoryError:
            status, sig = "internal", "MemoryError (above 3 GB)"
        conn.send((status, sig, case.argv, time.monotonic() - began, case.files))
        for name in case.files:
            with contextlib.suppress(OSError):
                os.unlink(name)
        shutil.rmtree("ckpt", ignore_errors=True)


def documents_of(folder: str) -> dict[str, bytes]:
    """Valid documents of each kind (ast, elab, core, core after ad) of 06_tower.psk."""
    from presk_core.passes import stage_main

    docs = {}
    current = b""
    path = str(Path(folder) / "tutorial" / "06_tower.psk")
    for program, kind in (("presk-parse", "ast"), ("presk-elab", "elab"), ("presk-lower", "core"),
                          ("presk-ad", "core-ad")):  # fmt: skip
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
        saved = sys.stdin, sys.stdout
        sys.stdin = io.TextIOWrapper(io.BytesIO(current), encoding="utf-8")
        sys.stdout = out
        try:
            stage_main(program, [path] if program == "presk-parse" else [])
        finally:
            sys.stdin, sys.stdout = saved
        out.flush()
        current = out.buffer.getvalue()
        docs[kind] = current
    return docs


@dataclass
class Tally:
    tried: Counter = field(default_factory=Counter)
    seconds: Counter = field(default_factory=Counter)
    exits: dict[str, Counter] = field(default_factory=dict)  # input class -> exit codes
    internal: Counter = field(default_factory=Counter)
    hangs: Counter = field(default_factory=Counter)
    classes: dict[str, Counter] = field(default_factory=dict)  # input class -> signatures
    example: dict[str, list[str]] = field(default_factory=dict)


def fuzz(n: int, seed: int, timeout: float = 10.0, only=CLASSES, save: str | None = None,
         progress=None) -> Tally:  # fmt: skip
    """Run n seeded inputs; the counts by class."""
    folder = tempfile.mkdtemp(prefix="presk-fuzz-")
    try:
        for sub in ("tutorial", "tests/examples"):
            shutil.copytree(ROOT / sub, Path(folder) / sub)
        documents = documents_of(folder)
        _preload()  # imported once, before the worker forks: a restart costs nothing
        cases = make_cases(n, seed, documents, tuple(only))
        tally = Tally()
        ctx = mp.get_context("fork")
        conn = proc = None
        for i, case in enumerate(cases):
            if proc is None:
                conn, child = ctx.Pipe()
                proc = ctx.Process(target=worker, args=(child, folder, timeout), daemon=True)
                proc.start()
                child.close()  # the worker's end: a worker that dies is then an EOF here
            conn.send(case)
            status, sig, seconds = "hang", "timeout (killed)", timeout
            while conn.poll(max(120, 12 * timeout)):  # else stuck where the alarm cannot reach
                try:
                    message = conn.recv()
                except EOFError:  # the worker died (a crash in C code): an internal error
                    status, sig = "internal", f"the process died ({proc.exitcode})"
                    proc = None
                    break
                if message[0] == "started":  # a run or dump: its mutant checked clean
                    case.argv = message[1]
                    continue
                status, sig, case.argv, seconds, case.files = message
                break
            if sig == "timeout (killed)" or (proc is not None and not proc.is_alive()):
                if proc is not None:
                    proc.kill()
                    proc.join()
                proc = None
            if status == "skip":
                continue
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
            if progress is not None:
                progress(i + 1, len(cases), tally)
        if proc is not None:
            conn.send(None)
            proc.join(5)
        return tally
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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
    parser.add_argument("--save", help="A folder for the failing inputs.")
    parser.add_argument("--every", type=int, default=1000, help="Print the table every N inputs.")
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

    tally = fuzz(args.inputs, args.seed, args.timeout, only, args.save, progress)
    print(file=sys.stderr)
    print(table(tally))
    print(
        f"\n{sum(tally.tried.values())} inputs in {time.monotonic() - started:.0f} s, seed {args.seed}"
    )
    return 1 if sum(tally.internal.values()) + sum(tally.hangs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
