"""Issue 27's surfaces of the fuzzer (tools/fuzz.py; the older ones are in fuzz_cases.py):
the clean mutants run natively and a damaged compile cache (`native`), `presk serve`'s flags,
prompts, weights and vocabularies (`serve`), damaged machine profiles through `--opt
--profile` (`profile`), every document kind's decoder (`documents`), every flag's value
domain (`values`)."""

from __future__ import annotations

import random
from pathlib import Path

from fuzz_cases import PAIRS, ROOT, Case, confuse, source_case

NATIVE_RUNS = [  # the commands whose compiled objects a damaged cache holds (fuzz.py fills it)
    ["run", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--dim", "B=2",
     "--backend", "native"],
    ["run", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=8", "--backend", "native"],
    ["train", "tutorial/07_train.psk", "--steps", "2", "--log-every", "0", "--ckpt", "ckpt",
     "--backend", "native"],
]  # fmt: skip
CACHE_DAMAGE = ("flip", "flip", "cut", "zero", "empty", "garbage", "folder", "dangling",
                "swap", "source", "root-file", "root-dangling", "lock-folder")  # fmt: skip


def native_case(rng: random.Random) -> Case:
    if rng.random() < 0.6:
        return source_case("native", rng)
    k = rng.randrange(len(NATIVE_RUNS))
    return Case("native", "presk", list(NATIVE_RUNS[k]), prepare=("cache", k, rng.randrange(2**32)))


def damage_cache(folder: Path, others: list[Path], seed: int) -> str:
    """One damage done to a copy of a filled cache (`folder`, what PRESK_CACHE names): its
    name. `others` are the objects of other commands' caches (a complete ELF of another
    program that exports `presk_entry`: what a poisoned cache holds)."""
    import os
    import shutil

    rng = random.Random(seed)
    op = rng.choice(CACHE_DAMAGE)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    objects = [p for p in files if p.suffix == ".so"] or files
    if not objects:
        return "nothing to damage"
    target = rng.choice(objects)
    data = bytearray(target.read_bytes())
    if op == "flip" and data:
        for _ in range(rng.choice((1, 1, 4, 64))):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        target.write_bytes(data)
    elif op == "cut":
        target.write_bytes(data[: rng.randrange(max(1, len(data)))])
    elif op == "zero" and data:
        at = rng.randrange(len(data))
        n = rng.choice((16, 256, 4096))
        data[at : at + n] = bytes(len(data[at : at + n]))
        target.write_bytes(data)
    elif op == "empty":
        target.write_bytes(b"")
    elif op == "garbage":
        target.write_bytes(data + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 512))))
    elif op == "folder":
        target.unlink()
        target.mkdir()
    elif op == "dangling":
        target.unlink()
        target.symlink_to(folder / "nowhere" / target.name)
    elif op == "swap" and others:
        shutil.copyfile(rng.choice(others), target)
    elif op == "source":
        for c in folder.rglob("*.c"):
            c.write_text("int presk_entry(void) { return 0; }\n")
    elif op == "root-file":
        shutil.rmtree(folder)
        folder.write_bytes(b"not a folder")
    elif op == "root-dangling":
        shutil.rmtree(folder)
        folder.symlink_to(folder.parent / "nowhere-cache")
    elif op == "lock-folder":
        for lock in folder.rglob("*.lock"):
            lock.unlink()
            lock.mkdir()
        os.chmod(target, 0o000)
    return op


SERVE = "tests/examples/minigpt/minigpt.psk"
SERVE_CONSTS = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")
WEIGHTS = "serve/final.psk.d"  # written by fuzz.py in every work folder: 2 native steps
VOCAB = tuple(" .0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
TEMPERATURES = ("0", "1", "0.5", "nan", "inf", "-0", "1e-320", "5e-324", "1e308", "1e400",
                "-1", "x", "", "0x1p-1074", "١")  # fmt: skip
SEEDS = ("0", "1", "-1", str(2**63), str(2**64), str(2**70), "x", "", "²", "1e3")


def _prompt(rng: random.Random) -> str:
    op = rng.choice(("vocab", "vocab", "long", "outside", "empty", "mixed"))
    if op == "vocab":
        return "".join(rng.choice(VOCAB) for _ in range(rng.randrange(1, 12)))
    if op == "long":
        return "".join(rng.choice(VOCAB) for _ in range(rng.choice((9, 64, 2000))))
    if op == "outside":
        return rng.choice(("é", "\x00", "ℝ", "\n", "abc\td", "\ud800", "🙂", "\x7f"))
    if op == "empty":
        return ""
    return "ab" + chr(rng.randrange(0x20, 0x3000)) + "cd"


VOCABULARIES = (b"", b"[]", b"{}", b"[1, 2]", b'["a", "a"]', b'["ab", "c"]', b"not json",
                b"[" * 100_000 + b"]" * 100_000, b'["a"' + b', "b"' * 70 + b"]",
                b"\xff\xfe[]", b'[""]', b'["a", null]')  # fmt: skip


def serve_case(rng: random.Random) -> Case:
    """`presk serve` of the tiny MiniGPT: a prompt, a handful of tokens, and some of its
    flags given values of their domain and outside it; or its weights or vocabulary
    damaged."""
    argv = ["serve", SERVE, *SERVE_CONSTS, "--tokens", rng.choice(("1", "2", "3"))]
    files: dict[str, bytes] = {}
    weights = WEIGHTS
    op = rng.choice(("flags", "flags", "weights", "weights", "vocabulary", "consts"))
    if op == "weights":
        which = rng.choice(("corrupt", "corrupt", "corrupt", "pairs", "missing", "folder"))
        if which == "corrupt":
            weights = "bad_weights.psk.d"
            files[weights] = b"CORRUPT"  # made by the worker from the real weights (below)
        else:
            weights = {"pairs": PAIRS, "missing": "nope.psk.d", "folder": "serve"}[which]
    elif op == "vocabulary":
        text = (ROOT / SERVE).read_text(encoding="utf-8")
        name = "tests/examples/minigpt/fuzz_serve.psk"
        text = text.replace('"data/tiny_vocab.json"', '"data/fuzz_vocab.json"')
        files[name] = text.encode("utf-8")
        files["tests/examples/minigpt/data/fuzz_vocab.json"] = rng.choice(VOCABULARIES)
        argv[1] = name
    elif op == "consts":
        argv[2:10] = rng.choice(
            (["--const", "V=64", "--const", "D=8", "--const", "H=2", "--const", "L=2"],
             ["--const", "V=32", "--const", "D=16", "--const", "H=2", "--const", "L=2"],
             ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=1"],
             ["--const", "V=64", "--const", "D=16", "--const", "H=4", "--const", "L=2"],
             ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2",
              "--dim", rng.choice(("T=4", "T=8", "T=4096", "T=0", "B=2"))])
        )  # fmt: skip
    argv += ["--weights", weights]
    if rng.random() < 0.8:
        argv += ["--prompt", _prompt(rng)]
    if op == "flags" or rng.random() < 0.3:
        if rng.random() < 0.5:
            argv += ["--temperature", rng.choice(TEMPERATURES)]
        if rng.random() < 0.3:
            argv += ["--seed", rng.choice(SEEDS)]
        if rng.random() < 0.3:
            argv += ["--tokens", rng.choice(("0", "-1", "x", "1e3", "²", "2"))]
    backend = rng.choice(("interp", "interp", "kernel", "native"))
    argv += ["--backend", backend]
    if backend != "interp" and rng.random() < 0.5:
        argv += ["--realize", rng.choice(("f32", "bf16")), "--threads", rng.choice(("1", "2"))]
    if backend == "interp" and rng.random() < 0.2:
        argv += ["--bits", rng.choice(("2", "24", "53", "64"))]
    return Case("serve", "presk", argv, files, prepare=("weights", rng.randrange(2**32)))


PROFILE_RUNS = [
    ["run", "tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2"],
    ["train", "tutorial/07_train.psk", "--steps", "1", "--log-every", "0", "--ckpt", "ckpt"],
    ["train", "tutorial/07_train.psk", "--steps", "1", "--log-every", "0", "--ckpt", "ckpt",
     "--backend", "native"],
]  # fmt: skip
JSON_VALUES = (None, True, 0, -1, 1.5, 1e308, 2**64, 10**400, "", "x", [], {}, [1, "a"],
               {"@": 1}, "NaN", "1e309")  # fmt: skip


def profile_text() -> dict:
    """A valid profile, as presk_opt.roofline writes it (one sample, a fit)."""
    return {
        "presk_profile": 1,
        "machine": {"os": "linux", "arch": "x86_64", "cpu": "fuzz", "type": "f64"},
        "samples": [
            {
                "kernel": "kernel add (%0) -> %1",
                "site": "loss/%3",
                "operations": 1,
                "work": 64,
                "bytes": 1024,
                "us": 0.25,
                "calls": 9,
                "source": "f.psk:loss",
                "digest": "0" * 16,
            },
        ],  # fmt: skip
        "fit": {"pi": 1e9, "beta": 1e10, "lambda": 1e-7},
    }


def profile_case(rng: random.Random) -> Case:
    import json

    doc = profile_text()
    op = rng.choice(("field", "field", "field", "number", "cut", "bytes", "deep", "nofit"))
    if op in ("field", "number"):
        node = rng.choice((doc, doc["machine"], doc["samples"][0], doc["fit"]))
        key = rng.choice(sorted(node))
        if op == "number":
            value = rng.choice((1e309, -1e309, float("nan"), 10**400, -0.0, 5e-324, -1))
        else:
            value = rng.choice(JSON_VALUES)
        node[key] = value
        blob = json.dumps(doc).encode()
    elif op == "cut":
        text = json.dumps(doc).encode()
        blob = text[: rng.randrange(len(text))]
    elif op == "bytes":
        blob = rng.choice((b"", b"\xff\xfe\x00", bytes(rng.randrange(256) for _ in range(64))))
    elif op == "deep":
        blob = b"[" * 100_000 + b"]" * 100_000
    else:
        doc["fit"] = None
        doc["samples"] = rng.choice(([], doc["samples"] * 3))
        blob = json.dumps(doc).encode()
    argv = [*rng.choice(PROFILE_RUNS), "--opt", "--profile", "bad_profile.json"]
    return Case("profile", "presk", argv, {"bad_profile.json": blob})


DECODERS = {"ast": "presk-elab", "elab": "presk-lower", "core": "presk-ad", "kernel": "presk-dump"}
BIG = (2**64 - 1, -(2**63), 2**63, 1e308, float("nan"), float("-inf"))
BIG_SOURCES = (
    "fn f() -> ℝ = 18446744073709551616\n",
    "fn f() -> ℝ = 99999999999999999999999999999999999999 * 2\n",
    "const N : nat = 340282366920938463463374607431768211456\nfn f() -> ℝ = N\n",
    "fn f() -> ℝ = -18446744073709551617\n",
    "fn f(x : ℝ[n: 18446744073709551616]) -> ℝ[] = mean(x)\n",
    "fn f() -> ℝ = 1e99999\n",
)


def document_case(rng: random.Random, documents: dict[str, bytes]) -> Case:
    """A document of each kind (ast, elab, core, kernel) damaged, through the program that
    decodes it (presk-dump reads any kind); or a source with big integers through
    presk-parse, whose document must carry them."""
    import msgpack

    kind = rng.choice(sorted(DECODERS))
    program = DECODERS[kind] if rng.random() < 0.7 else "presk-dump"
    if kind == "kernel" and rng.random() < 0.5:
        program = "presk-c"  # the C of a schedule that decodes
    op = rng.choice(("confuse", "confuse", "big", "cut", "bytes", "version", "deep", "drop",
                     "parse"))  # fmt: skip
    doc = documents[kind]
    if op == "parse":
        text = rng.choice(BIG_SOURCES).encode("utf-8")
        return Case("documents", "presk-parse", ["big.psk"], {"big.psk": text})
    if op in ("confuse", "big", "version", "drop"):
        value = msgpack.unpackb(doc, strict_map_key=False)
        if op == "confuse":
            value = confuse(value, rng)
        elif op == "big":
            value = _replace_a_number(value, rng)
        elif op == "version":
            value["version"] = rng.choice((0, -1, 2**64 - 1, "1", None, 1.0, [1]))
        else:
            keys = [k for k in value if k not in ("presk", "version")]
            value.pop(rng.choice(keys))
        doc = msgpack.packb(value)
    elif op == "cut":
        doc = doc[: rng.randrange(len(doc))]
    elif op == "bytes":
        doc = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    else:  # a node nested deeply inside the document's first map entry after the header
        value = msgpack.unpackb(doc, strict_map_key=False)
        deep: object = {"@": "Nope"}
        for _ in range(rng.choice((200, 2000))):
            deep = rng.choice(([deep], {"@": "Call", "fn": deep}))
        keys = [k for k in value if k not in ("presk", "version", "files")]
        value[rng.choice(keys)] = deep
        try:
            doc = msgpack.packb(value)
        except ValueError:  # deeper than msgpack writes
            doc = msgpack.packb(value["files"])
    return Case("documents", program, [], {}, doc)


def _replace_a_number(value, rng: random.Random):
    """One number somewhere in a msgpack value replaced by an extreme one."""
    spots = []

    def walk(x):
        items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
        for k, v in items:
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "version":
                spots.append((x, k))
            walk(v)

    walk(value)
    if spots:
        x, k = rng.choice(spots)
        x[k] = rng.choice(BIG)
    return value


DOMAIN = (
    "0",
    "1",
    "2",
    "-1",
    "-0",
    "+3",
    " 2",
    "2 ",
    "²",
    "١",
    "٣",
    "𝟠",
    "৩",
    "Ⅻ",
    "½",
    "1e400",
    "1e-400",
    "nan",
    "inf",
    "-inf",
    "1/0",
    "1/2",
    "0x10",
    "0b1",
    "2^64",
    str(2**64),
    str(2**1000),
    "9" * 5000,
    "",
    " ",
    "1_000",
    "3.0",
    "1e3",
    "x",
    "=",
    "\x00",
)
# fmt: skip
VALUE_RUNS = {  # a command, the flags it takes and the names its --dim / --const know
    "run": (["run", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1",
             "--dim", "T=2"], ("--dim", "--const", "--bits", "--digits", "--seed"),
            ("B", "T", "D", "H", "batch", "nope", "")),
    "native": (["run", "tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--dim", "B=2",
                "--backend", "native"], ("--dim", "--threads", "--digits", "--seed"),
               ("B", "batch", "N", "")),
    "train": (["train", "tutorial/07_train.psk", "--steps", "1", "--log-every", "0", "--ckpt",
               "ckpt"], ("--const", "--bits", "--seed", "--steps", "--log-every"),
              ("B", "D", "lr", "nope")),
    "serve": (["serve", SERVE, *SERVE_CONSTS, "--weights", WEIGHTS, "--tokens", "1",
               "--prompt", "ab"], ("--temperature", "--seed", "--tokens", "--dim", "--const",
                                   "--threads"), ("T", "B", "V", "D")),
    "check": (["check", "tutorial/06_tower.psk"], ("--const",), ("L", "D", "N", "")),
    "data": (["data", "info", PAIRS], ("--limit",), ()),
}  # fmt: skip


def values_case(rng: random.Random) -> Case:
    """One flag of a command given a value of its domain or outside it: unicode digits,
    huge numbers, NaN, fractions, empty strings."""
    base, flags, names = VALUE_RUNS[rng.choice(sorted(VALUE_RUNS))]
    flag = rng.choice(flags)
    value = rng.choice(DOMAIN)
    if flag in ("--dim", "--const"):
        value = f"{rng.choice(names) if names else 'B'}={value}"
    argv = [*base, flag, value]
    if base[0] == "serve" and flag == "--threads":
        argv += ["--backend", "native"]
    # a horizon of more steps than the timeout allows is a training that runs until stopped:
    # each step logged, so that one that never reaches its first step is still a hang
    endless = flag == "--steps" and value.isascii() and value.isdigit() and len(value) > 4
    if endless:
        argv += ["--log-every", "1"]
    return Case("values", "presk", argv, endless=endless)
