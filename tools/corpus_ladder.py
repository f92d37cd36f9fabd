"""`make corpus`: the NLP course's ladder in corpus/nlp/, each rung run to its check.

Run after `make corpus-data` (the data under corpus/nlp/data/, from ../shared/data/civil.md).
Every rung is `presk check`ed; then
- 01 (the counting bigram): its loss on the pairs of data/bigrams.psk.d on the reference
  interpreter, natively (f64) and in NumPy, to ten digits: the three must be the same text;
- 02 (the neural bigram): trained natively in f64, one batch the whole list of pairs, so that
  every logged loss is the closed form's objective at the current table: each must be above
  01's loss, and the last within `CLOSE` of it;
- 03 (the MLP, contexts of three) and 04 (one attention head, windows of 32): trained natively
  in f32 for the epochs their runs state; the mean of their last `TAIL` batch losses must be
  below the bigram's loss on the whole text (NumPy), and 04's is compared with 03's.

It prints a table `rung, steps, final batch loss, check` and exits 1 if a check fails
(docs/corpus.md says what each number is, beside the specification's).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NLP = ROOT / "corpus" / "nlp"
DATA = NLP / "data"
PRESK = ROOT / ".venv" / "bin" / "presk"
CLOSE = 0.01  # 02's last loss is within this of 01's
TAIL = 100  # steps whose batch losses are averaged for 03 and 04


CPU: dict[str, float] = {}  # the CPU seconds of each command's process, by its first words


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def presk(*args: str) -> tuple[str, float]:
    """presk's standard output and its wall time (its CPU time in `CPU`, since the machine
    may be shared); the ladder stops where a command fails."""
    start, before = time.perf_counter(), cpu()
    r = subprocess.run([str(PRESK), *args], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    CPU[" ".join(args[:2])] = cpu() - before
    if r.returncode:
        sys.exit(f"corpus: `presk {' '.join(args)}` failed (exit {r.returncode}):\n{r.stderr}")
    return r.stdout, seconds


def rung(name: str) -> str:
    return str((NLP / name).relative_to(ROOT))


def result(stdout: str) -> str:
    """The digits of `ℝ[] = 2.245316935`."""
    return stdout.strip().rsplit("= ", 1)[1]


def train(
    name: str, log_every: int, steps: int | None, realize: str = "f32"
) -> tuple[list[tuple[int, float]], float]:
    """Train a rung natively: the (step, batch loss) of every `log_every`-th step, from its
    `--metrics` file (corpus/nlp/ckpt/NAME.jsonl, presk_cli.metrics), and the wall time."""
    from presk_cli.metrics import read_metrics

    metrics = NLP / "ckpt" / f"{Path(name).stem}.jsonl"
    args = ["train", rung(name), "--backend", "native", "--realize", realize]
    args += ["--log-every", str(log_every)] + (["--steps", str(steps)] if steps else [])
    out, seconds = presk(*args, "--metrics", str(metrics))
    rows = read_metrics(str(metrics))[1]
    losses = [(row["step"], row["loss"]) for row in rows if row["step"] % log_every == 0]
    print("\n".join(line for line in out.splitlines() if line.startswith("presk train")))
    return losses, seconds


def tokens(path: Path) -> np.ndarray:
    return np.array(path.read_text().split(), dtype=np.int64)


def bigram_loss(x: np.ndarray, y: np.ndarray, v: int) -> float:
    """01's loss in NumPy: the counts, each row normalised, the negative mean log-probability
    of each pair (math.fsum: the sum as exact as a double allows)."""
    c = np.zeros((v, v))
    np.add.at(c, (x, y), 1.0)
    p = c / np.maximum(c.sum(axis=1, keepdims=True), 1.0)
    return -math.fsum(np.log(p[x, y])) / len(x)


def read_pairs(path: Path) -> tuple[np.ndarray, np.ndarray]:
    from presk_core.data import read_header

    header = read_header(str(path))
    blob = path.read_bytes()[header.header_size :]
    pairs = np.frombuffer(blob, dtype="<i8").reshape(header.count, 2)
    return pairs[:, 0], pairs[:, 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, help="Train 03 and 04 this many steps only.")
    parser.add_argument("--json", type=Path, help="Also write the figures to this file.")
    args = parser.parse_args()
    if not (DATA / "bigrams.psk.d").exists():
        print("corpus: corpus/nlp/data/ is not there (make corpus-data, which needs the text)")
        return 0
    vocab = json.loads((DATA / "civil_vocab.json").read_text(encoding="utf-8"))
    rows, ok, figures = [], True, {}

    for name in ("01_bigram_count.psk", "02_bigram_neural.psk", "03_mlp.psk", "04_attention.psk"):
        presk("check", rung(name))
    summary, _ = presk("check", rung("01_bigram_count.psk"), "--summary")
    print(summary.split("-- regularity")[0], end="")

    # 01: the same ten digits three ways
    data = str((DATA / "bigrams.psk.d").relative_to(ROOT))
    run = ["run", rung("01_bigram_count.psk"), "--entry", "loss", "--data", data, "--digits", "10"]
    interp, t_interp = presk(*run)
    c_interp = CPU[" ".join(run[:2])]
    native, t_native = presk(*run, "--backend", "native")
    c_native = CPU[" ".join(run[:2])]
    x, y = read_pairs(DATA / "bigrams.psk.d")
    l01 = bigram_loss(x, y, len(vocab))
    three = (result(interp), result(native), f"{l01:.10g}")
    print(
        f"01: interp {three[0]} ({t_interp:.1f} s, {c_interp:.1f} s CPU),"
        f" native {three[1]} ({t_native:.1f} s, {c_native:.1f} s CPU),"
    )
    print(f"    NumPy {three[2]}, over {len(x)} pairs of a vocabulary of {len(vocab)}")
    same = len(set(three)) == 1
    ok &= same
    rows.append(("01_bigram_count", "-", three[0], "3 × same digits" if same else "DIFFER"))

    # the bigram on every pair of the text: what 03 and 04 must beat
    stream = tokens(DATA / "civil_tokens.txt")
    whole = bigram_loss(stream[:-1], stream[1:], len(vocab))
    print(f"the counting bigram on all {len(stream) - 1} pairs of the text: {whole:.6f}")

    # 02: closing on 01 from above
    # in f64: an f32 mean of 10,000 losses is off by 1e-4 (docs/corpus.md), a third of the gap
    losses, t02 = train("02_bigram_neural.psk", 10, None, "f64")
    above = all(loss > l01 for _, loss in losses)
    gap = losses[-1][1] - l01
    closes = above and 0 <= gap < CLOSE and losses[-1][1] < losses[0][1]
    ok &= closes
    c02 = CPU["train " + rung("02_bigram_neural.psk")]
    shown = [*losses[:: max(1, len(losses) // 3)][:3], losses[-1]]
    print("02: " + ", ".join(f"step {t} {loss:.6f}" for t, loss in shown))
    print(
        f"02: {len(losses)} logged losses all above 01's {l01:.6f}: {above};"
        f" the last {losses[-1][1]:.6f} (+{gap:.6f}), {t02:.0f} s ({c02:.0f} s CPU)"
    )
    rows.append(
        (
            "02_bigram_neural",
            str(losses[-1][0]),
            f"{losses[-1][1]:.6f}",
            f"> {l01:.4f}, +{gap:.4f}" if closes else "NOT CLOSING FROM ABOVE",
        )
    )

    tails = {}
    for name, below in (("03_mlp.psk", whole), ("04_attention.psk", None)):
        losses, seconds = train(name, 1, args.steps)
        tail = float(np.mean([loss for _, loss in losses[-TAIL:]]))
        tails[name] = tail
        bound = whole if below is not None else tails["03_mlp.psk"]
        what = "the bigram's" if below is not None else "03's"
        check = tail < bound
        if below is not None:
            ok &= check
        print(
            f"{name[:2]}: {losses[-1][0]} steps, last {losses[-1][1]:.6f}, mean of the last"
            f" {TAIL} {tail:.6f} ({what} {bound:.6f}), {seconds:.0f} s"
            f" ({CPU['train ' + rung(name)]:.0f} s CPU)"
        )
        rows.append(
            (
                name[:-4],
                str(losses[-1][0]),
                f"{losses[-1][1]:.6f}",
                f"{'<' if check else '≥'} {what} {bound:.4f} (mean {tail:.4f})",
            )
        )
        figures[name] = {
            "steps": losses[-1][0],
            "last": losses[-1][1],
            "tail": tail,
            "seconds": round(seconds, 1),
            "cpu": round(CPU["train " + rung(name)], 1),
        }

    print()
    head = ("rung", "steps", "final batch loss", "check")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    if args.json:
        figures.update(l01=l01, whole=whole, three=three, t_interp=t_interp, t_native=t_native)
        from presk_core.data import write_text

        write_text(str(args.json), json.dumps(figures, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
