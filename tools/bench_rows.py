"""The course GPT's row kernels fused (issue 26, presk_kernel.rows) against apart: each launch
on the calling thread's CPU clock, natively, at the run's shapes (B 16, T 256).

    .venv/bin/python tools/bench_rows.py [--const D=192]… [--threads 1] [--steps 3]
        [--rounds 2] [--forward] [--top N] [--data FILE]

The step (`--forward`: the objective alone) is lowered at `--threads` as the native run
lowers it (presk_cli.native.lower), its GEMM statements given their epilogues and
prologues (presk_kernel.epilogue, as the untimed entry compiles them), then compiled twice
with a clock around each launch (`NativeEntry(timed="cpu")`: a timed entry fuses nothing
itself): the schedule as it is, and with `fuse_rows` applied. The sides alternate for
`--rounds` rounds, each `--steps` calls after one untimed; each launch's time is its
smallest over the rounds. Printed: each side's total and launches, every fused group's
members and time apart against its kernel's (the groups sorted by their gain), and their
sums, and the other launches' (`--top N`: the N whose time moved most); whether the
outputs have the same bits. CPU clocks count work, so the figures hold
on a loaded machine where wall clocks do not.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--const", action="append", default=[], help="NAME=VALUE (D=192)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--forward", action="store_true", help="the objective alone")
    p.add_argument("--top", type=int, default=0, help="the other launches that moved most")
    p.add_argument("--data", default=str(ROOT / "corpus/nlp/data/civil_T256.psk.d"))
    a = p.parse_args()
    if not Path(a.data).is_file():
        print(f"bench_rows: no {a.data} (make corpus-data)")
        return

    from experiment_gpt import course_call
    from presk_cback.native import NativeEntry
    from presk_cli.native import lower, storage
    from presk_kernel.epilogue import gemm_epilogues
    from presk_kernel.lower import argument_leaves
    from presk_kernel.rows import fuse_rows, row_groups

    consts = dict(c.split("=", 1) for c in a.const)
    trainer, step, name, args = course_call(consts, a.data, a.forward)
    apart = gemm_epilogues(lower(step, name, trainer.dims, args, "f32", a.threads))
    groups = row_groups(apart)
    fused = fuse_rows(apart)
    inputs = storage(apart, argument_leaves(args), stored=True)
    # each compiled as given (NativeEntry would fuse the rows of `apart` too)
    sides = [NativeEntry(s, timed="cpu", epilogues=False, rows=False) for s in (apart, fused)]
    best = [np.full(len(s.launches) + 1, np.inf) for s in (apart, fused)]
    outs = []
    for _ in range(a.rounds):
        for entry, low in zip(sides, best, strict=True):
            ns = np.zeros(low.size)
            out = entry.run_timed(inputs, ns)
            ns[:] = 0
            for _ in range(a.steps):
                entry.run_timed(inputs, ns)
            low[:] = np.minimum(low, ns / a.steps / 1e6)
        outs = out
    same = all(x.tobytes() == y.tobytes() for x, y in zip(sides[0].run(inputs), outs, strict=True))
    what = "forward" if a.forward else "step"
    print(f"bench_rows: the course GPT's {what} at {consts or 'its constants'}, ", end="")
    print(f"{a.threads} thread(s), CPU ms a call, the least of {a.rounds} rounds")
    for label, s, low in (("apart", apart, best[0]), ("fused", fused, best[1])):
        print(f"  {label}: {low[:-1].sum():8.1f} ms  {len(s.launches)} launches")
    seeds = {seed: at for seed, at in groups}
    merged = {i for _, at in groups for i in at if i not in seeds}
    kept = [i for i in range(len(apart.launches)) if i not in merged]
    rows = []
    for new, old in enumerate(kept):
        if old in seeds:
            before = sum(best[0][i] for i in seeds[old])
            names = ", ".join(apart.launches[i].kernel.name for i in seeds[old])
            rows.append((before, best[1][new], fused.launches[new].kernel.site, names))
    for before, after, site, names in sorted(rows, key=lambda r: r[1] - r[0]):
        print(f"  {before:7.3f} -> {after:7.3f} ms  {site}: {names}")
    total = (sum(r[0] for r in rows), sum(r[1] for r in rows))
    print(f"  the {len(rows)} groups: {total[0]:.1f} ms apart, {total[1]:.1f} ms fused")
    rest = (best[0][:-1].sum() - total[0], best[1][:-1].sum() - total[1])
    print(f"  the other launches: {rest[0]:.1f} ms apart, {rest[1]:.1f} ms fused")
    moved = sorted(
        ((best[1][new] - best[0][old], apart.launches[old].kernel) for new, old in enumerate(kept)
         if old not in seeds),
        key=lambda d: -abs(d[0]),
    )  # fmt: skip
    for d, k in moved[: a.top]:
        print(f"    {d:+7.3f} ms  {k.name} at {k.site}")
    print(f"  the same bits: {same}")


if __name__ == "__main__":
    main()
