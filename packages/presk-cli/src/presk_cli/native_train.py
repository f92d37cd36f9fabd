"""`presk train --backend native|kernel`: a training step as one call of compiled kernels.

The step is one PSK-Core function, presk_ad.step.native_step, over the training step
program (`obj.train_value_grad`) and the optimizer's `adamw.step`:

    obj.native_step(batch, θ, m, v, t, lr) -> (loss, g, θ', m', v')

lowered to kernels at the run's shapes (objective, reverse sweep and AdamW in one
schedule), fused, compiled: one native call a step. θ, m and v stay in the entry's arena
between steps (each step's outputs copied onto its inputs); the batches, the step number
and the rate (`adamw.lr`, on the reference interpreter) are fed from the host. The log is
the interpreter's (presk_cli.train), its numbers from the native outputs; then the kernel
launches a step, with and without fusion, and the step's time.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import time

import numpy as np
from presk_ad.step import NATIVE_STEP, Trainer, finite, native_step
from presk_core.ir import Program, Training
from presk_kernel.fuse import unfused_launches
from presk_kernel.lower import argument_leaves

from presk_cli.native import NativeError, compiled, lower, storage
from presk_cli.train import checkpoints, finish, save, step_line


class NativeTrainer:
    """The steps of a training run on the kernels: the batches, rates and initial θ of
    presk_ad.step.Trainer (the same order of samples), each step one call."""

    def __init__(self, trainer: Trainer, backend: str, realize: str, threads: int) -> None:
        self.trainer = trainer
        objective = trainer.objective
        program = native_step(trainer.interp.program, objective)
        self.keys = list(trainer.theta)
        first = self.batch(1)[1]
        zero = np.zeros((), dtype=np.float64)
        args = [first, trainer.theta, trainer.m, trainer.v, zero, zero]
        name = NATIVE_STEP.format(objective)
        self.schedule = lower(program, name, trainer.dims, args, realize, threads)
        leaves = storage(self.schedule, argument_leaves(args))
        n = len(self.keys)
        self.n_batch = len(leaves) - 3 * n - 2
        self.backend = backend
        types = {buf.id: buf.dtype for buf in self.schedule.buffers}
        self.in_types = [types[buf] for buf in self.schedule.inputs]
        self.out_types = [types[buf] for buf in self.schedule.outputs]
        if len(self.schedule.outputs) != 1 + 4 * n:
            raise ValueError("the native step's outputs are not (loss, g, θ, m, v)")
        if backend == "native":
            self.entry = compiled(self.schedule)
            self.ins = [self.entry.view(buf) for buf in self.schedule.inputs]
            self.outs = [self.entry.view(buf) for buf in self.schedule.outputs]
            self.feed(range(len(leaves)), leaves)
        else:
            self.values = leaves

    def feed(self, at, values) -> None:
        """Host values into the arena's input buffers `at`, in their storage types."""
        from presk_kernel.interp import to_storage

        for i, value in zip(at, values, strict=True):
            view = self.ins[i]
            view[...] = to_storage(np.asarray(value), self.in_types[i]).reshape(view.shape)

    def read(self, j: int) -> np.ndarray:
        """Output j as it is in the arena (bf16 widened to float32): a view until the next
        step overwrites it, read without a copy (at the course GPT's size, widening the
        gradient and θ to doubles each step cost ~60 ms)."""
        from presk_kernel.interp import from_storage

        return from_storage(self.outs[j], self.out_types[j])

    def batch(self, t: int) -> tuple[list[int], object]:
        """The indices and stacked doubles of step t's batch (presk_ad.step.Trainer.batch,
        the interpreter's order)."""
        _, indices, value = self.trainer.batch(t)
        return indices, value

    def carry(self, n: int) -> None:
        """θ', m' and v' onto θ, m and v in the arena: a copy, or where a realization stores
        an input in another type than the step computes it (`params`), a rounding to it."""
        from presk_kernel.interp import from_storage, to_storage

        at = range(self.n_batch, self.n_batch + 3 * n)
        for i, new, have in zip(at, self.outs[1 + n :], self.out_types[1 + n :], strict=True):
            view, into = self.ins[i], self.in_types[i]
            if into == have:
                view[...] = new
            else:
                view[...] = to_storage(from_storage(new, have), into).reshape(view.shape)

    def step(self, batch, t: int, lr: float) -> tuple[float, list, list]:
        """One step: (loss, the gradient's leaves, θ's leaves after the update); natively the
        leaves are the arena's, valid until the next step (`_tree` copies them)."""
        n = len(self.keys)
        parts = list(batch) if isinstance(batch, tuple) else [batch]
        scalars = [np.asarray(float(t)), np.asarray(lr)]
        if self.backend == "native":
            from presk_cback.load import pointer

            self.feed(range(self.n_batch), parts)
            self.feed(range(len(self.ins) - 2, len(self.ins)), scalars)
            if self.entry.module.lib.presk_entry(pointer(self.entry.arena, "char")):
                raise NativeError("E7003", f"an index out of range in `{self.schedule.entry}`")
            self.carry(n)
            grads = [self.read(1 + i) for i in range(n)]
            return float(self.read(0)), grads, [self.read(1 + n + i) for i in range(n)]
        from presk_kernel.interp import KernelError, run_schedule

        self.values = parts + self.values[self.n_batch : -2] + scalars
        try:
            outs = run_schedule(self.schedule, self.values, laid=True)  # as native lays it out
        except KernelError as e:
            raise NativeError("E7003", str(e)) from None
        self.values[self.n_batch : -2] = [np.asarray(x, np.float64) for x in outs[1 + n :]]
        return float(outs[0]), outs[1 : 1 + n], outs[1 + n : 1 + 2 * n]


def train_native(
    core: Program,
    run: Training,
    folder: str,
    steps: int | None,
    log_every: int,
    ckpt: str | None,
    seed: int,
    bits: int,
    echo,
    options: tuple[str, str, int],
    rewrite=None,
) -> None:
    """presk_cli.train.train on the kernels: `options` is (backend, realize, threads);
    `rewrite` a pass the step's program goes through before it is lowered (`--opt`)."""
    backend, realize, threads = options
    trainer = Trainer(core, run, folder, seed, bits, steps, rewrite)
    native = NativeTrainer(trainer, backend, realize, threads)
    horizon = trainer.horizon
    ckpt_dir, every = checkpoints(run, folder, ckpt)
    times: list[float] = []
    loss = 0.0
    theta: list = []
    for t in range(1, horizon + 1):
        epoch = (t - 1) // trainer.per_epoch
        rate = float(trainer.lr(t))  # each rate when its step runs: step 1 starts at once
        start = time.perf_counter()
        indices, batch = native.batch(t)
        loss, grads, theta = native.step(batch, t, rate)
        finite(t, indices, loss, _tree(native, grads, copy=False))  # θ updated, never saved
        times.append(time.perf_counter() - start)
        if log_every and t % log_every == 0:
            # each square rounded to a double, their sum exact (fsum), as the interpreter's
            squares = (np.square(np.ravel(g), dtype=np.float64).tolist() for g in grads)
            norm = math.sqrt(math.fsum(itertools.chain.from_iterable(squares)))
            echo(step_line(t, epoch, loss, rate, norm))
        if ckpt_dir is not None and every and t % every == 0 and t != horizon:
            save(os.path.join(ckpt_dir, f"step_{t}.psk.d"), run.model, _tree(native, theta))
    fused, unfused = len(native.schedule.launches), unfused_launches(native.schedule)
    removed = round(100 * (unfused - fused) / unfused) if unfused else 0
    echo(
        f"presk train: {fused} kernel launches a step, {unfused} without fusion"
        f" ({removed}% removed)"
    )
    if len(times) > 1:
        median = statistics.median(times[1:]) * 1000
        shown = f"{median:.1f}" if median >= 0.1 else f"{median:.2g}"
        echo(f"presk train: {shown} ms a step, median of {len(times) - 1} (the first excluded)")
    finish(run, ckpt_dir or folder, horizon, loss, _tree(native, theta), echo)


def _tree(native: NativeTrainer, leaves: list, copy: bool = True) -> dict:
    """θ's tree of `leaves` (a step's gradient or θ): doubles, copied out of the arena, or
    with `copy=False` the leaves as they are (to look at before the next step)."""
    shapes = {k: np.shape(v) for k, v in native.trainer.theta.items()}
    return {
        k: (np.array(x, np.float64) if copy else np.asarray(x)).reshape(shapes[k])
        for k, x in zip(native.keys, leaves, strict=True)
    }


__all__ = ["NATIVE_STEP", "NativeTrainer", "native_step", "train_native"]
