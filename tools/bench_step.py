"""The course GPT's native training step: one against two threads, and the host's time a
step around the compiled call, in one run: sides of their own processes, interleaved.

    .venv/bin/python tools/bench_step.py [--const D=192]… [--repeat 5] [--data FILE]
        [--sides 1 2 2:spin=N …]

Each side (`T` threads, or `T:spin=N`: libgomp's GOMP_SPINCOUNT set to N) is a process
that builds presk_cli.native_train.NativeTrainer on the run's first batch (θ₀ drawn by
numpy, N(0, 0.02²): the step's time does not depend on the values) and answers each
order with four times: the step as `presk train --backend native` makes it
(`NativeTrainer.step` and its finite check), the compiled call alone (`presk_entry_io`,
`NativeTrainer.call_seconds`), the host's time (the step's beyond the call: the batch in,
the outputs swapped, the finite check), and the host's work as it was before issue 26
beside it (θ', m', v' copied onto θ, m, v, and presk_ad.step.finite on the gradient, in
numpy), measured on the same arrays. The rounds
go round the sides in turn; before each order the other sides must be idle (their CPU
time still for 50 ms: OpenMP's pool spins after a call). Prints each side's medians and
the ratio of the one-thread side's call to each side's. The machine may be shared: only
ratios taken in the same run mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from experiment_gpt import GPT, load  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "corpus" / "nlp" / "data" / "civil_T256.psk.d"


def side(consts: dict, data: str, threads: int) -> None:
    from experiment_gpt import drawn_theta, light_trainer
    from presk_ad.step import finite
    from presk_cback.load import pointer
    from presk_cli.native_train import NativeTrainer, _tree

    core, run = load(GPT, consts, data)
    theta = drawn_theta(core, run)
    trainer = light_trainer(core, run, str(GPT.parent), theta)
    native = NativeTrainer(trainer, "native", "f32", threads)
    indices, batch = native.batch(1)
    n = len(native.keys)
    lib, arena = native.entry.module.lib, pointer(native.entry.arena, "char")
    print(json.dumps({"launches": len(native.schedule.launches)}), flush=True)

    def step():
        loss, grads, _ = native.step(batch, 1, 1e-4)
        native.check(1, indices, loss, grads)

    def call():
        lib.presk_entry_io(arena, native.entry.table)

    def old_host():  # what the host did a step before: copies and numpy's finite check
        for k in range(3 * n):
            np.copyto(native.ins[native.n_batch + k], native.outs[1 + n + k])
        grads = [native.read(1 + i) for i in range(n)]
        finite(1, indices, float(native.read(0)), _tree(native, grads, copy=False))

    for line in sys.stdin:
        if line.strip() == "quit":
            return
        start = time.perf_counter()
        step()
        took = time.perf_counter() - start
        host = took - native.call_seconds
        start = time.perf_counter()
        old_host()
        old = time.perf_counter() - start
        print(
            json.dumps([took * 1e3, native.call_seconds * 1e3, host * 1e3, old * 1e3]), flush=True
        )


def ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def settle(pids: list[int], window: float = 0.05, limit: float = 3.0) -> None:
    end, before = time.perf_counter() + limit, [ticks(p) for p in pids]
    while time.perf_counter() < end:
        time.sleep(window)
        now = [ticks(p) for p in pids]
        if now == before:
            return
        before = now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--const", action="append", default=[])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--sides", nargs="+", default=["1", "2"])
    parser.add_argument("--side", help=argparse.SUPPRESS)
    args = parser.parse_args()
    consts = dict(c.split("=", 1) for c in args.const)
    if args.side:
        side(consts, args.data, int(args.side))
        return
    procs = {}
    for name in args.sides:
        threads, _, spin = name.partition(":spin=")
        env = dict(os.environ)
        if spin:
            env["GOMP_SPINCOUNT"] = spin
        cmd = [sys.executable, __file__, "--side", threads, "--data", args.data]
        cmd += [f"--const={c}" for c in args.const]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        procs[name] = (p, json.loads(p.stdout.readline()))
    print(f"course GPT {consts or '(full width)'}, f32, {args.repeat} rounds after one untimed;"
          f" {next(iter(procs.values()))[1]['launches']} launches a step")  # fmt: skip
    times: dict[str, list] = {name: [] for name in procs}
    for r in range(args.repeat + 1):
        names = list(procs)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            settle([q.pid for k, (q, _) in procs.items() if k != name])
            p = procs[name][0]
            p.stdin.write("go\n")
            p.stdin.flush()
            got = json.loads(p.stdout.readline())
            if r:
                times[name].append(got)
    for p, _ in procs.values():
        p.stdin.write("quit\n")
        p.stdin.close()
        p.wait()
    first = args.sides[0]
    print(f"{'side':>14}{'step ms':>10}{'call ms':>10}{'host ms':>10}{'old host':>10}"
          f"{'x call':>8}{'x step':>8}")  # fmt: skip
    for name, rows in times.items():
        step, call, host, old = (statistics.median(r[i] for r in rows) for i in range(4))
        speed = statistics.median(a[1] / b[1] for a, b in zip(times[first], rows, strict=True))
        sstep = statistics.median(a[0] / b[0] for a, b in zip(times[first], rows, strict=True))
        print(f"{name:>14}{step:10.1f}{call:10.1f}{host:10.1f}{old:10.1f}{speed:8.2f}{sstep:8.2f}")


if __name__ == "__main__":
    main()
