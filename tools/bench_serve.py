"""Generation speed: `presk serve --backend native` with its cache of keys and values and
without it (`--no-cache`: the whole window each token), against the exported serve.py's
PyTorch loops with and without a cache, on the same weights, prompt and threads
(docs/serve.md).

    .venv/bin/python tools/bench_serve.py [--tokens N] [--threads T] [--float64] [--tiny]
                                          [--weights FILE] [--pairs P] [--const NAME=V …]

The model is the course GPT (corpus/nlp/05_gpt.psk: V 86, D 384, 6 heads, 6 blocks,
T 256), its weights `corpus/nlp/ckpt/final.psk.d` when `make gpt-trained` wrote them, else
weights drawn here at the checkpoint's shapes (normal, std 0.02: the speed does not depend
on them; `--const D=128` for a reduced width); `--tiny`, the tiny MiniGPT of
tests/examples/minigpt instead. Every side generates greedily from the same prompt; f32 by
default (`presk serve --realize f32` against `serve.py --float32`), f64 with `--float64`.
The sides run in turn (presk cached, presk whole window, PyTorch cached, PyTorch whole
window), `--pairs` rounds, after one untimed presk run of each kind that compiles into a
fresh cache (the timed runs compile nothing). Each figure is the tokens per second the
program prints on its last line (its loop only: the front end, lowering and loading the
weights excluded), the median over the rounds, and each ratio the median of the rounds'
ratios; the tokens are compared too (equal in f64; in f32 an argmax may differ at a near
tie).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PRESK = [sys.executable, "-m", "presk_cli.main"]
RATE = re.compile(
    r"^(?:presk serve|serve\.py): (\d+) tokens in [0-9.]+ s, ([0-9.]+) tokens/s.*?(no cache)?"
    r"(?:;[^;]*)?\)$",
    re.M,
)
GPT = ROOT / "corpus" / "nlp" / "05_gpt.psk"
TINY = ROOT / "tests" / "examples" / "minigpt" / "minigpt.psk"
TINY_CONSTS = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]


def draw_weights(psk: Path, consts: list[str], window: int, path: Path) -> None:
    """Weights of the file's served model at T = `window`, drawn (normal, std 0.02)."""
    from presk_cli.pipeline import run_pipeline
    from presk_core.data import write_tree
    from presk_syntax.pipeline import Context

    pairs = dict(c.split("=") for c in consts[1::2])
    ctx = Context(consts=pairs, check=True)
    elaborated = run_pipeline("elab", str(psk), ctx)
    core = run_pipeline("core", str(psk), ctx, start=elaborated, first="elab")
    block = elaborated.serves[0]
    layout = core.layout(block.model)
    rng = np.random.default_rng(0)
    arrays = []
    for leaf in layout.leaves:
        lins = [c for _, c in leaf.stack] + [a.length for a in leaf.type.shape.axes]
        shape = tuple(lin.value({"T": window}) for lin in lins)
        arrays.append(rng.normal(0.0, 0.02, size=shape))
    write_tree(str(path), f"params {block.model}", arrays)


def with_vocabulary(psk: Path, folder: Path, size: int) -> Path:
    """A copy of `psk` in `folder` beside a vocabulary of `size` characters of its own
    (printable ASCII then Latin-1 letters): the speed does not depend on which."""
    import json

    (folder / "data").mkdir(parents=True)
    chars = [chr(c) for c in range(32, 127)] + [chr(c) for c in range(192, 256)]
    (folder / "data" / "civil_vocab.json").write_text(json.dumps(chars[:size]))
    copy = folder / psk.name
    copy.write_text(psk.read_text(encoding="utf-8"), encoding="utf-8")
    return copy


def run(cmd: list[str], cwd: Path, env: dict) -> tuple[str, int, float]:
    """The text, the tokens and the tokens per second of a run; it stops the bench when a
    side meant to have a cache generated without one (its last line says `no cache`)."""
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        sys.exit(f"bench_serve: {' '.join(cmd[:4])} … failed:\n{r.stderr}")
    m = RATE.search(r.stderr)
    if m is None:
        sys.exit(f"bench_serve: no tokens per second in:\n{r.stderr}")
    if m.group(3) and "--no-cache" not in cmd:
        sys.exit(f"bench_serve: the side with a cache generated without one:\n{r.stderr}")
    return r.stdout, int(m.group(1)), float(m.group(2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--float64", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--weights", type=Path)
    parser.add_argument("--prompt", default="Article 1. ")
    parser.add_argument("--const", action="append", default=[], metavar="NAME=V")
    args = parser.parse_args()
    psk, consts, window = (TINY, TINY_CONSTS, 8) if args.tiny else (GPT, [], 256)
    consts = consts + [x for c in args.const for x in ("--const", c)]
    prompt = "Presk serves " if args.tiny and args.prompt == "Article 1. " else args.prompt
    with tempfile.TemporaryDirectory(prefix="bench_serve_") as tmp:
        folder = Path(tmp)
        if not args.tiny and not (GPT.parent / "data" / "civil_vocab.json").exists():
            psk = with_vocabulary(GPT, folder / "gpt", 86)  # `make corpus-data` not run
        weights = args.weights
        trained = GPT.parent / "ckpt" / "final.psk.d"
        if weights is None and not args.tiny and not args.const and trained.exists():
            weights = trained
        if weights is None:
            weights = folder / "weights.psk.d"
            draw_weights(psk, consts, window, weights)
        export = folder / "export"
        subprocess.run(
            [*PRESK, "export", str(psk), "--target", "pytorch", *consts, "--serve",
             "-o", str(export)],
            check=True, capture_output=True, cwd=ROOT,
        )  # fmt: skip
        env = {
            **os.environ,
            "XDG_CACHE_HOME": str(folder / "cache"),
            "OMP_NUM_THREADS": str(args.threads),
        }
        realize = "f64" if args.float64 else "f32"
        serve_args = ["--prompt", prompt, "--tokens", str(args.tokens), "--temperature", "0"]
        presk_cmd = [
            *PRESK, "serve", str(psk), *consts, "--weights", str(weights), *serve_args,
            "--backend", "native", "--realize", realize, "--threads", str(args.threads),
        ]  # fmt: skip
        torch_cmd = [
            sys.executable, "serve.py", "--weights", str(weights), *serve_args,
            "--threads", str(args.threads), *([] if args.float64 else ["--float32"]),
        ]  # fmt: skip
        sides = {
            "presk serve native, cache": (presk_cmd, ROOT),
            "presk serve native, whole window": ([*presk_cmd, "--no-cache"], ROOT),
            "serve.py PyTorch, cache": (torch_cmd, export),
            "serve.py PyTorch, whole window": ([*torch_cmd, "--no-cache"], export),
        }
        for cmd, cwd in list(sides.values())[:2]:
            run(cmd, cwd, env)  # compiles into the fresh cache
        rates: dict[str, list[float]] = {k: [] for k in sides}
        texts = set()
        for _ in range(args.pairs):
            for side, (cmd, cwd) in sides.items():
                text, n, rate = run(cmd, cwd, env)
                rates[side].append(rate)
                texts.add(text)
    same = len(texts) == 1
    name = "tiny MiniGPT (V 64, D 16, 2 heads, 2 blocks, T 8)" if args.tiny else psk.name
    if args.const:
        name += f" at {', '.join(args.const)}"
    print(f"bench_serve: {name}, {n} tokens greedy, {realize}, {args.threads} thread(s)")
    for side, got in rates.items():
        print(f"  {side:34}: {statistics.median(got):9.1f} tokens/s")
    keys = list(sides)

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(rates[a], rates[b], strict=True))

    print(f"  native cache / native whole window : {ratio(keys[0], keys[1]):9.2f}")
    print(f"  native cache / PyTorch cache       : {ratio(keys[0], keys[2]):9.2f}")
    print(f"  native whole / PyTorch whole       : {ratio(keys[1], keys[3]):9.2f}")
    print(
        f"  the same tokens on every side      : "
        f"{'yes' if same else 'no (a near tie in ' + realize + ')'}"
    )


if __name__ == "__main__":
    main()
