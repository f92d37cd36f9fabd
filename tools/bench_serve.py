"""Generation speed: `presk serve --backend native` against the exported serve.py in
PyTorch, on the same weights, the same prompt and the same threads (docs/serve.md).

    .venv/bin/python tools/bench_serve.py [--tokens N] [--threads T] [--float64] [--tiny]
                                          [--weights FILE] [--pairs P]

The model is the course GPT (corpus/nlp/05_gpt.psk: V 86, D 384, 6 heads, 6 blocks,
T 256), its weights `corpus/nlp/ckpt/final.psk.d` when `make gpt-trained` wrote them, else
weights drawn here (normal, std 0.02: the speed does not depend on them); `--tiny`, the
tiny MiniGPT of tests/examples/minigpt instead. Both generate greedily from the same prompt,
each token from the logits of the whole window (no cache of keys and values, on either
side); f32 by default (`presk serve --realize f32` against `serve.py --float32`), f64 with
`--float64`. The runs alternate, presk then PyTorch, `--pairs` times, after one untimed
presk run that compiles the entry into a fresh cache (the timed runs compile nothing).
Each figure is the tokens per second the program prints on its last line (its loop only:
the front end, lowering and loading the weights excluded), the median over the pairs; the
tokens are compared too (equal in f64; in f32 an argmax may differ at a near tie).
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
    r"^(?:presk serve|serve\.py): (\d+) tokens in [0-9.]+ s, ([0-9.]+) tokens/s", re.M
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


def run(cmd: list[str], cwd: Path, env: dict) -> tuple[str, int, float]:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        sys.exit(f"bench_serve: {' '.join(cmd[:4])} … failed:\n{r.stderr}")
    m = RATE.search(r.stderr)
    if m is None:
        sys.exit(f"bench_serve: no tokens per second in:\n{r.stderr}")
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
    args = parser.parse_args()
    psk, consts, window = (TINY, TINY_CONSTS, 8) if args.tiny else (GPT, [], 256)
    prompt = "Presk serves " if args.tiny and args.prompt == "Article 1. " else args.prompt
    with tempfile.TemporaryDirectory(prefix="bench_serve_") as tmp:
        folder = Path(tmp)
        weights = args.weights
        trained = GPT.parent / "ckpt" / "final.psk.d"
        if weights is None and not args.tiny and trained.exists():
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
        run(presk_cmd, ROOT, env)  # compiles into the fresh cache
        mine, theirs, texts = [], [], set()
        for _ in range(args.pairs):
            text, n, rate = run(presk_cmd, ROOT, env)
            mine.append(rate)
            texts.add(("presk", text))
            text, _, rate = run(torch_cmd, export, env)
            theirs.append(rate)
            texts.add(("torch", text))
    same = len({t for _, t in texts}) == 1
    name = "tiny MiniGPT (V 64, D 16, 2 heads, 2 blocks, T 8)" if args.tiny else psk.name
    print(f"bench_serve: {name}, {n} tokens greedy, {realize}, {args.threads} thread(s)")
    print(f"  presk serve --backend native : {statistics.median(mine):8.1f} tokens/s")
    print(f"  serve.py (PyTorch eager)     : {statistics.median(theirs):8.1f} tokens/s")
    ratio = statistics.median(m / t for m, t in zip(mine, theirs, strict=True))
    print(f"  native / PyTorch             : {ratio:8.2f}")
    print(
        f"  the same tokens              : {'yes' if same else 'no (a near tie in ' + realize + ')'}"
    )


if __name__ == "__main__":
    main()
