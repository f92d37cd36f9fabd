"""The inputs of the fuzzer (tools/fuzz.py), all drawn from one seeded generator: mutated
programs (`check`, and `run`/`dump` of the mutants that check clean), corrupted `.psk.d`
files (`data`), garbage and type-confused stage documents (`stages`), extreme flags
(`flags`); and issue 27's surfaces: the clean mutants run natively and a damaged compile
cache (`native`), `presk serve`'s flags, prompts, weights and vocabularies (`serve`),
damaged machine profiles through `--opt --profile` (`profile`), every document kind's
decoder, big integers and deep nesting included (`documents`), and every flag's value
domain, unicode digits and huge values included (`values`). `make_cases(n, seed,
documents)` is the whole list, made up front: the same list whatever the number of workers
that run it."""

from __future__ import annotations

import random
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLASSES = ("check", "run", "dump", "data", "stages", "flags")
CLASSES += ("native", "serve", "profile", "documents", "values")  # issue 27's surfaces
SHARE = {"check": 0.3, "run": 0.2, "dump": 0.1, "data": 0.2, "stages": 0.15, "flags": 0.05}
SHARE |= {"native": 0.05, "serve": 0.05, "profile": 0.03, "documents": 0.1, "values": 0.05}
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
LONG = (10_000, 200_000)  # how many times a long line repeats `, x`
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
    prepare: tuple | None = None  # native: ("cache", template, seed): a damaged cache to run on
    # runs until stopped, as asked (`train --steps 2^64`): its timeout is no hang once it has
    # logged its first step
    endless: bool = False


# ---- the inputs --------------------------------------------------------------------------


def tokens(text: str) -> tuple[tuple[int, int, str], ...]:
    """The tokens of a program: (start, end, kind), character offsets (in one pass; kept for
    the programs mutated, which every mutant's first mutation starts from)."""
    if text in _TOKENS:
        return _TOKENS[text]
    found = _tokens(text)
    if len(_TOKENS) < 64 and len(text) < 100_000:
        _TOKENS[text] = found
    return found


_TOKENS: dict[str, tuple[tuple[int, int, str], ...]] = {}


def _tokens(text: str) -> tuple[tuple[int, int, str], ...]:
    import numpy as np
    from presk_syntax.parse import parse_tree

    data = text.encode("utf-8", errors="surrogatepass")
    out, cursor = [], parse_tree(data).walk()
    # the character at each byte offset: the UTF-8 lead bytes before it
    char = [0, *np.cumsum((np.frombuffer(data, np.uint8) & 0xC0) != 0x80).tolist()]
    while True:
        if cursor.goto_first_child():
            continue
        node = cursor.node
        if node.type != "comment" and node.end_byte > node.start_byte:
            out.append((char[node.start_byte], char[node.end_byte], node.type))
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return tuple(out)


def mutate(text: str, rng: random.Random, long=LONG) -> str:
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
        return text[:end] + ", x" * rng.choice(long) + text[end:]
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


def mutant(path: str, rng: random.Random, long=LONG) -> tuple[str, str]:
    """A mutant of a program: its file name (next to the original) and its text (a long
    line `long` times `, x`, one of them drawn)."""
    text = (ROOT / path).read_text(encoding="utf-8")
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        text = mutate(text, rng, long)
        if len(text) > 100_000:  # a line of megabytes: mutated no further
            break
    return str(Path(path).parent / "fuzz_mutant.psk"), text


def source_case(kind: str, rng: random.Random) -> Case:
    path = rng.choice(sorted(SOURCES))
    consts = list(SOURCES[path])
    if kind == "native":  # the clean mutant natively, in a realization, on some threads
        consts += ["--backend", "native", "--realize", rng.choice(("f64", "f64", "f32", "bf16"))]
        consts += ["--threads", rng.choice(("1", "1", "2"))]
        return Case(kind, "presk", ["run", *consts], remutate=(path, rng.randrange(2**32)))
    if kind == "check":
        name, text = mutant(path, rng)
        files = {name: text.encode("utf-8", errors="surrogatepass")}
        return Case(kind, "presk", ["check", name, *consts], files)
    # run and dump: the worker draws mutants from this seed until one checks clean
    return Case(kind, "presk", [kind, *consts], remutate=(path, rng.randrange(2**32)))


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
    from fuzz_surfaces import document_case, native_case, profile_case, serve_case, values_case

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
        elif kind == "native":
            cases.append(native_case(rng))
        elif kind == "serve":
            cases.append(serve_case(rng))
        elif kind == "profile":
            cases.append(profile_case(rng))
        elif kind == "documents":
            cases.append(document_case(rng, documents))
        elif kind == "values":
            cases.append(values_case(rng))
        else:
            cases.append(flags_case(rng))
    return cases
