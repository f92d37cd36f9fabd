"""`make curve`: the ε-to-quality curve, scaled to this machine (docs/precision.md, "At
course scale").

The course GPT at a reduced width (--const D=16 H=2 L=1 by default, windows of T = 32):
a short f32 run gives the weights the envelope of its loss is taken at; then for each
budget ε a realization of the loss is solved (`presk solve`, measured against the exact
reference) and the model is trained from scratch under it: its `params` (θ's storage) as
solved, and each function's forward pass (`F.fwd` of the training step) in the widest type
the solver gave that function's sites — the reverse sweep and the optimizer stay f64, a
budget on the loss giving no licence over them (spec L920). f64, f32 and bf16 everywhere
are trained beside them. The quality is the mean training loss over the last quarter of
the run; the table and a PNG (loss against ε, the uniform types as lines) are written.

Without ../shared/data/civil.md, one line and nothing done.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from corpus_tool import GPT, PRESK, ROOT, absent

ORDER = {"f64": 0, "f32": 1, "bf16": 2}
STEP = re.compile(r"^step (\d+) .* loss (\S+) ")


def presk(*args: str) -> str:
    r = subprocess.run([PRESK, *args], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"$ presk {' '.join(args)}\n{r.stderr}", end="", file=sys.stderr)
        sys.exit(r.returncode)
    return r.stdout


FALLBACK = {".fwd": ".vjp", ".vjp": ""}
"""Where a function's forward pass is in the training step: its `.fwd` (the residual form),
else its `.vjp` (a function generic in its leading axes keeps its recomputing `.vjp`,
forward and reverse together), else the function itself."""


def train(consts, data, realize: str, steps: int, ckpt: Path) -> list[tuple[int, float]]:
    """The run's logged (step, loss); a run that stops on a loss that is not finite
    (E7008: bf16 everywhere does) ends its log with (its step, nan). A step realization
    naming a function the step does not have (E7039) has it replaced by FALLBACK's next."""
    args = ["train", GPT, *consts, "--data", data, "--backend", "native", "--realize",
            realize, "--steps", str(steps), "--log-every", "10", "--ckpt", str(ckpt)]  # fmt: skip
    r = subprocess.run([PRESK, *args], cwd=ROOT, capture_output=True, text=True)
    while r.returncode != 0 and realize.startswith("@"):
        missing = re.search(r"\[E7039\] Error: .*`functions` names `([^`]+)`", r.stderr)
        if missing is None:
            break
        path = Path(realize[1:])
        doc = json.loads(path.read_text())
        name = missing[1]
        t = doc["functions"].pop(name)
        for end, then in FALLBACK.items():
            if name.endswith(end):
                doc["functions"][name[: -len(end)] + then] = t
                break
        path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        r = subprocess.run([PRESK, *args], cwd=ROOT, capture_output=True, text=True)
    log = [(int(m[1]), float(m[2])) for m in map(STEP.match, r.stdout.splitlines()) if m]
    if r.returncode != 0:
        stopped = re.search(r"\[E7008\] Error: training stopped: step (\d+)", r.stderr)
        if stopped is None:
            print(f"$ presk {' '.join(args)}\n{r.stderr}", end="", file=sys.stderr)
            sys.exit(r.returncode)
        log.append((int(stopped[1]), float("nan")))
    return log


def quality(log: list[tuple[int, float]]) -> float:
    """The mean loss over the last quarter of the log (nan for a run that diverged)."""
    if not log or log[-1][1] != log[-1][1]:
        return float("nan")
    tail = log[-max(len(log) // 4, 1) :]
    return sum(x for _, x in tail) / len(tail)


def step_realization(solved: Path, listing: str, out: Path) -> dict:
    """The training step's realization of a solved loss realization (see the module)."""
    doc = json.loads(solved.read_text())
    widest: dict[str, str] = {}
    for line in listing.splitlines():
        m = re.match(r"^    (\S+) +(f64|f32|bf16) +\d+ bytes", line)
        if m and "/%" in m[1]:
            fn = m[1].rsplit("/", 1)[0]
            t = m[2]
            if fn not in widest or ORDER[t] < ORDER[widest[fn]]:
                widest[fn] = t
    functions = {f"{fn}.fwd": t for fn, t in widest.items() if t != "f64"}
    step = {"presk": "realization", "version": 1, "default": "f64",
            "params": doc.get("params", {}), "functions": functions}  # fmt: skip
    out.write_text(json.dumps(step, indent=1, ensure_ascii=False) + "\n")
    return step


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--consts", default="D=16,H=2,L=1")
    p.add_argument("--budgets", default="1e-1,1e-2,1e-3,1e-5")
    p.add_argument("--steps", type=int, default=300, help="steps of each run")
    p.add_argument("--warm", type=int, default=100, help="steps of the envelope's weights")
    p.add_argument("--out", default="out/curve")
    a = p.parse_args()
    data = "corpus/nlp/data/civil_T32.psk.d"
    if absent("curve", data):
        return 0
    consts = [x for kv in a.consts.split(",") if kv for x in ("--const", kv)]
    out = ROOT / a.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    train(consts, data, "f32", a.warm, out / "warm")
    env = out / "env.json"
    presk("calibrate", "--precision", GPT, *consts, "--entry", "loss", "--dim", "B=2",
          "--dim", "T=32", "--weights", str(out / "warm" / "final.psk.d"), "--data", data,
          "--out", str(env))  # fmt: skip
    rows = []
    for t in ("f64", "f32", "bf16"):
        log = train(consts, data, t, a.steps, out / t)
        rows.append((t, None, "every real", quality(log), log))
        print(f"curve: {t:<8} loss {rows[-1][3]:.4f}", flush=True)
    for eps in a.budgets.split(","):
        solved = out / f"solved_{eps}.json"
        listing = presk("solve", GPT, *consts, "--precision", str(env), "--budget", eps,
                        "--out", str(solved), "--sites", "1000")  # fmt: skip
        measured = float(re.search(r"^  measured +(\S+)", listing, re.M)[1])
        step_path = out / f"step_{eps}.json"
        step_realization(solved, listing, step_path)
        log = train(consts, data, f"@{step_path}", a.steps, out / f"run_{eps}")
        step = json.loads(step_path.read_text())  # as trained (FALLBACK's names)
        kinds = sorted(set(step["functions"].values()) | set(step["params"].values()))
        what = f"{len(step['functions'])} fwd, {len(step['params'])} params ({'/'.join(kinds) or 'f64'})"
        rows.append((f"ε={eps}", float(eps), what, quality(log), log, measured))
        print(
            f"curve: ε {eps:<6} loss {rows[-1][3]:.4f} ({what}; loss gap {measured:.3e})",
            flush=True,
        )
    table = [
        "realization    budget     loss gap     what                                 final loss   vs f64"
    ]
    base = rows[0][3]
    for r in rows:
        gap = f"{r[5]:.3e}" if len(r) > 5 else "-"
        eps = f"{r[1]:.0e}" if r[1] is not None else "-"
        table.append(
            f"{r[0]:<14} {eps:>6} {gap:>12}     {r[2]:<36} {r[3]:>10.4f} {r[3] - base:>+8.4f}"
        )
    text = "\n".join(table) + "\n"
    (out / "curve.txt").write_text(text)
    print(text, end="")
    plot(rows, out / "curve.png", a)
    print(
        f"curve: wrote {out / 'curve.txt'} and {out / 'curve.png'} ({time.monotonic() - t0:.0f} s)"
    )
    return 0


def plot(rows, path: Path, a) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    solved = [r for r in rows if r[1] is not None]
    left.plot([r[1] for r in solved], [r[3] for r in solved], "o-", color="C3", label="solved")
    for r, c in zip(rows[:3], ("C0", "C1", "C2"), strict=True):
        if r[3] == r[3]:
            left.axhline(r[3], color=c, ls="--", lw=1, label=f"all {r[0]}")
        else:
            left.plot([], [], color=c, ls="--", lw=1, label=f"all {r[0]}: diverged (nan)")
    left.set_xscale("log")
    left.invert_xaxis()
    left.set_xlabel("budget ε on the loss (relative)")
    left.set_ylabel(f"training loss, mean of the last quarter of {a.steps} steps")
    left.set_title(f"ε to quality: course GPT {a.consts.replace(',', ' ')}, T=32")
    left.legend(fontsize=8)
    for r in rows:
        finite = [(k, x) for k, x in r[4] if x == x]
        if finite:
            steps, losses = zip(*finite, strict=True)
            right.plot(steps, losses, lw=1, label=r[0])
        else:
            right.plot([], [], lw=1, label=f"{r[0]} (diverged at step {r[4][-1][0]})")
    right.set_xlabel("step")
    right.set_ylabel("training loss")
    right.set_title("the runs")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
