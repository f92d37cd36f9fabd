"""Day directories of `presk autotune` built from Python data, for rank's and reprice's
tests (docs/plans.md, "The day directory"): the recorded fixture's generator
(`python tests/plans/days.py` writes tests/plans/fixtures/rank) and the small days each
statement's test builds to make it hold or fail."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RULES = ("lines,overhead", "lines", "overhead", "none")


def counts(work: float, group: str = "f32+lanes1+w1") -> dict:
    """A counts map under every rule set (made up: work, a third of it in loads, bytes)."""
    one = {"work": work, "loads": work / 3, "l2": work * 2, "l3": work, "mem": work / 2,
           "group": group, "workers": int(group.rsplit("w", 1)[1])}  # fmt: skip
    return {r: dict(one) for r in RULES}


def point(i: int, decisions: dict, predicted: float, times: list[float], launches: int = 7,
          warmup: int = 1, same: bool = True) -> dict:  # fmt: skip
    return {
        "point": i, "decisions": decisions, "text": json.dumps(decisions), "layout": f"p{i}",
        "predicted_us": predicted, "counts": counts(predicted * 1e3), "times_us": times,
        "warmup": warmup, "launches": launches, "same_bits": same,
    }  # fmt: skip


def write_day(folder: Path, nests: list[tuple[str, str, list[dict]]], *, entry: str = "attend",
              dims: dict | None = None, realize: str = "f32", sweep_s: float = 2.0,
              costed_s: float = 0.01, captured_s: float = 0.005, checked: int | None = None,
              differing: int = 0, u: float = 0.1) -> Path:  # fmt: skip
    """A day folder: day.json and a `<nest>.jsonl` per nest (kind, points)."""
    folder.mkdir(parents=True, exist_ok=True)
    total = sum(len(p) for _, _, p in nests)
    doc = {
        "presk": "autotune-day", "version": 1, "entry": entry,
        "dims": dims if dims is not None else {"B": 16, "T": 256}, "realize": realize,
        "space": "small", "profile": {"path": "out/tut_layout.json", "machine": {}, "u": u},
        "sweep_s": sweep_s, "costed_s": costed_s, "captured_s": captured_s,
        "interp": checked is not None, "checked_interp": total if checked is None else checked,
        "differing": differing, "nests": [],
    }  # fmt: skip
    for name, kind, points in nests:
        file = name.replace("/%", "__") + ".jsonl"
        doc["nests"].append({"nest": name, "file": file, "operands": [], "points": len(points),
                             "kind": kind})  # fmt: skip
        (folder / file).write_text("".join(json.dumps(p) + "\n" for p in points))
    (folder / "day.json").write_text(json.dumps(doc, indent=1) + "\n")
    return folder


def _fixture(rng, day: int) -> list[tuple[str, str, list[dict]]]:
    """The recorded fixture's nests: made-up but plausible times around a hidden cost, and
    predictions that get most of its order right (the noise from `rng`)."""

    def cost(d: dict) -> float:
        tile = {"[1, 4]": 3.0, "[2, 8]": 1.6, "[4, 16]": 1.0, "[4, 4]": 1.2}[
            d.get("tile", "[4, 4]")
        ]
        t = 400.0 * tile
        t *= {1: 1.0, 4: 0.33}[d["lanes"]]
        t *= 0.55 if d["split"] != "none" else 1.0
        t *= 0.97 if d.get("order") == "JI" else 1.0
        t *= 0.9 if d.get("pack") else 1.0
        t *= 0.8 if d.get("passes") == 2 else 1.0
        return t

    def points(space: list[dict], scale: float) -> list[dict]:
        out = []
        for i, d in enumerate(space):
            true = cost(d) * scale
            times = [round(true * float(rng.lognormal(0.0, 0.02)), 2) for _ in range(7)]
            pred = round(cost(d) * scale * float(rng.lognormal(0.0, 0.15)) * 0.9, 2)
            out.append(point(i, d, pred, times, launches=int(rng.integers(7, 12))))
        return out

    scores = [
        {"tile": t, "order": o, "lanes": ln, "split": s, "pack": p}
        for t, o, ln, s, p in itertools.product(
            ("[1, 4]", "[2, 8]", "[4, 16]"), ("IJ", "JI"), (1, 4), ("none", "(0, 2)"),
            (False, True),
        )
    ]  # fmt: skip
    values = [{"tile": t, "lanes": ln, "split": "none"}
              for t, ln in itertools.product(("[1, 4]", "[4, 4]"), (1, 4))]  # fmt: skip
    softmax = [{"lanes": 1, "split": s, "passes": n}
               for s, n in itertools.product(("none", "(2, 2)"), (3, 2))]  # fmt: skip
    sqrt = [{"lanes": 1, "split": "none"}]
    return [
        ("scores/%2", "contraction", points(scores, 1.0)),
        ("scores/%5", "elementwise", points(sqrt, 0.002)),
        ("attend/%5", "softmax", points(softmax, 0.5)),
        ("attend/%6", "contraction", points(values, 0.3)),
    ]


def write_fixture(root: Path) -> None:
    import numpy as np

    rng = np.random.default_rng(17)
    write_day(root / "day1", _fixture(rng, 1), sweep_s=2.8, costed_s=0.009, captured_s=0.007)
    rng = np.random.default_rng(18)
    day2 = _fixture(rng, 2)
    # day 2's predictions are day 1's (the same profile): only the times are measured again
    one = {n: p for n, _, p in _fixture(np.random.default_rng(17), 1)}
    for name, _, pts in day2:
        for p, q in zip(pts, one[name], strict=True):
            p["predicted_us"] = q["predicted_us"]
            p["counts"] = q["counts"]
    write_day(root / "day2", day2, sweep_s=2.6, costed_s=0.009, captured_s=0.008, checked=0)


if __name__ == "__main__":
    write_fixture(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "fixtures" / "rank")
