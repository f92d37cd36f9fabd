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

import functools
import itertools
import math
import os
import signal
import statistics
import time

import numpy as np
from presk_ad.step import NATIVE_STEP, Trainer, finite, native_step
from presk_core.ir import Program, Training
from presk_kernel.fuse import unfused_launches
from presk_kernel.lower import argument_leaves

from presk_cli import resume as R
from presk_cli.native import NativeError, compiled, lower, planned, refuse_quant, storage
from presk_cli.progress import Progress
from presk_cli.resume import ResumeError
from presk_cli.train import (
    Keeping,
    StoppedAfter,
    checkpoints,
    finish,
    interrupted,
    resumed,
    save,
    step_line,
)


class NativeTrainer:
    """The steps of a training run on the kernels: the batches, rates and initial θ of
    presk_ad.step.Trainer (the same order of samples), each step one call."""

    def __init__(
        self, trainer: Trainer, backend: str, realize: str, threads: int, plan=None
    ) -> None:
        self.trainer = trainer
        objective = trainer.objective
        program = native_step(trainer.interp.program, objective)
        self.keys = list(trainer.theta)
        first = self.batch(1)[1]
        zero = np.zeros((), dtype=np.float64)
        m, v = trainer.m, trainer.v
        if m is trainer.fresh[0] and v is trainer.fresh[1]:  # their +0s (presk_ad.step)
            m = {k: np.zeros(np.shape(x)) for k, x in m.items()}
            v = {k: np.zeros(np.shape(x)) for k, x in v.items()}
        args = [first, trainer.theta, m, v, zero, zero]
        self.keyed = trainer.key is not None  # a key last: step t's fold_in(key, t)
        if self.keyed:
            args.append(self.key_of(1))
        name = NATIVE_STEP.format(objective)
        self.program, self.name, self.args = program, name, args  # what `presk plan --train` plans
        layouts = planned(plan, program, name, trainer.dims, args)  # --plan: the step's
        refuse_quant(realize)
        self.schedule = lower(program, name, trainer.dims, args, realize, threads, layouts)
        leaves = storage(self.schedule, argument_leaves(args))
        n = len(self.keys)
        self.n_tail = 2 + self.keyed  # t, lr and the key after the moments
        self.n_batch = len(leaves) - 3 * n - self.n_tail
        self.backend = backend
        self.call_seconds = 0.0  # the last step's compiled call alone (natively)
        types = {buf.id: buf.dtype for buf in self.schedule.buffers}
        self.in_types = [types[buf] for buf in self.schedule.inputs]
        self.out_types = [types[buf] for buf in self.schedule.outputs]
        if len(self.schedule.outputs) != 1 + 4 * n:
            raise ValueError("the native step's outputs are not (loss, g, θ, m, v)")
        self.rate_entry = rate_entry(trainer.interp.program, realize, backend)
        if backend == "native":
            self.entry = compiled(self.schedule)
            self.ins = [self.entry.view(buf) for buf in self.schedule.inputs]
            self.outs = [self.entry.view(buf) for buf in self.schedule.outputs]
            for buf in self.entry.io:  # each input and output in its own space of the arena
                self.entry.bind(buf, self.entry.view(buf))
            self.feed(range(len(leaves)), leaves)
            # θ', m', v' computed where the next step reads θ, m, v: their spaces swapped
            # after each step instead of copied (where both have one type, and no launch
            # writes the input)
            self.swapped = [
                (self.n_batch + k, 1 + n + k)
                for k in range(3 * n)
                if self.in_types[self.n_batch + k] == self.out_types[1 + n + k]
                and self.schedule.inputs[self.n_batch + k] in self.entry.direct
            ]
        else:
            self.values = leaves

    def rate(self, t: int) -> float:
        """Step t's rate: `adamw.lr` on the reference interpreter, or where the realization's
        `functions` map gives `adamw.lr` a type (a step realization: presk solve --step), on
        the kernels in that type."""
        if self.rate_entry is None:
            return float(self.trainer.lr(t))
        return rate_of(self.rate_entry, t, self.trainer.horizon)

    def key_of(self, t: int):
        """Step t's key, as the interpreter's Trainer draws it (presk_ad.step)."""
        from presk_core import random as R

        return R.fold_in(self.trainer.key, t)

    def scalars(self, t: int, lr: float) -> list:
        """The leaves after the moments at step t: t, the rate, and the key of a keyed step."""
        out = [np.asarray(float(t)), np.asarray(lr)]
        return out + argument_leaves([self.key_of(t)]) if self.keyed else out

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

    def check(self, t: int, indices: list[int], loss: float, grads: list) -> None:
        """presk_ad.step.finite on the step's loss and gradient (E7008 when one is not
        finite): natively a scan in C of the arena's leaves, the diagnostic's positions
        found by `finite` only when one is bad."""
        if self.backend == "native" and math.isfinite(loss):
            if all(self.entry.nonfinite(g) < 0 for g in grads):
                return
        finite(t, indices, loss, _tree(self, grads, copy=False))

    def norm(self, grads: list) -> float:
        """|g|: each square rounded to a double, their sum exact (math.fsum), as the
        interpreter's; natively summed in C (NativeEntry.square_sum)."""
        if self.backend == "native":
            return math.sqrt(self.entry.square_sum(grads))
        squares = (np.square(np.ravel(g), dtype=np.float64).tolist() for g in grads)
        return math.sqrt(math.fsum(itertools.chain.from_iterable(squares)))

    def batch(self, t: int) -> tuple[list[int], object]:
        """The indices and stacked doubles of step t's batch (presk_ad.step.Trainer.batch,
        the interpreter's order)."""
        _, indices, value = self.trainer.batch(t)
        return indices, value

    def carry(self, n: int) -> None:
        """θ', m' and v' onto θ, m and v: their spaces swapped (`swapped`), else a copy, or
        where a realization stores an input in another type than the step computes it
        (`params`), a rounding to it."""
        from presk_kernel.interp import from_storage, to_storage

        swapped = dict(self.swapped)
        inputs, outputs = self.schedule.inputs, self.schedule.outputs
        for i, j in self.swapped:  # no copy: the next step reads where this one wrote
            self.ins[i], self.outs[j] = self.outs[j], self.ins[i]
            self.entry.bind(inputs[i], self.ins[i])
            self.entry.bind(outputs[j], self.outs[j])
        at = range(self.n_batch, self.n_batch + 3 * n)
        for i, new, have in zip(at, self.outs[1 + n :], self.out_types[1 + n :], strict=True):
            if i in swapped:
                continue
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
        scalars = self.scalars(t, lr)
        tail = self.n_tail
        if self.backend == "native":
            from presk_cback.load import pointer

            self.feed(range(self.n_batch), parts)
            self.feed(range(len(self.ins) - tail, len(self.ins)), scalars)
            lib, arena = self.entry.module.lib, pointer(self.entry.arena, "char")
            start = time.perf_counter()
            if lib.presk_entry_io(arena, self.entry.table):
                raise NativeError("E7003", f"an index out of range in `{self.schedule.entry}`")
            self.call_seconds = time.perf_counter() - start
            grads = [self.read(1 + i) for i in range(n)]
            loss, theta = float(self.read(0)), [self.read(1 + n + i) for i in range(n)]
            self.carry(n)
            return loss, grads, theta
        from presk_kernel.interp import KernelError, run_schedule

        self.values = parts + self.values[self.n_batch : -tail] + scalars
        try:
            outs = run_schedule(self.schedule, self.values, laid=True)  # as native lays it out
        except KernelError as e:
            raise NativeError("E7003", str(e)) from None
        self.values[self.n_batch : -tail] = [np.asarray(x, np.float64) for x in outs[1 + n :]]
        return float(outs[0]), outs[1 : 1 + n], outs[1 + n : 1 + 2 * n]


def rate_entry(program, realize, backend: str = "native"):
    """`adamw.lr` lowered in the type a realization's `functions` map gives it (compiled
    natively, else run by the kernel interpreter), or None when the map does not name it."""
    from presk_kernel.lower import lower_entry
    from presk_kernel.realization import Realization, as_realization

    from presk_cli.native import compiled

    t = dict(as_realization(realize).functions).get("adamw.lr")
    if t is None:
        return None
    from presk_kernel.lower import LowerError

    from presk_cli.native import NativeError

    zero = np.zeros((), np.float64)
    try:
        schedule = lower_entry(program, "adamw.lr", {}, [zero, zero], Realization.uniform(t))
    except LowerError as e:
        raise NativeError(e.code or "E7002", f"`adamw.lr` in {t}: {e}") from None
    return compiled(schedule) if backend == "native" else schedule


def rate_of(entry, t: int, horizon: int) -> float:
    """The rate at step t of `horizon` from rate_entry's entry."""
    from presk_kernel.interp import run_schedule

    args = [np.asarray(float(t)), np.asarray(float(horizon))]
    if hasattr(entry, "run"):
        (lr,) = entry.run(args)
    else:
        (lr,) = run_schedule(entry, args)
    return float(lr)


class ArenaState:
    """θ, m and v of a NativeTrainer as a state holds them (presk_cli.resume): the arena's
    input buffers in their storage types, or the kernel interpreter's values."""

    @staticmethod
    def snapshot(native: NativeTrainer):
        """A function giving the (θ, m, v) trees of the step just completed: natively read
        from the arena when called (signals are held during a step, so the arena is that
        step's until the next begins); on the kernel interpreter the arrays of now (each
        step makes new ones)."""
        n = len(native.keys)
        at = slice(native.n_batch, native.n_batch + 3 * n)
        if native.backend == "native":
            return lambda: ArenaState._trees(native, [np.array(x) for x in native.ins[at]])
        leaves = list(native.values[at])
        return lambda: ArenaState._trees(native, leaves)

    @staticmethod
    def _trees(native: NativeTrainer, leaves: list) -> tuple[dict, dict, dict]:
        n = len(native.keys)
        return tuple(
            dict(zip(native.keys, leaves[k * n : (k + 1) * n], strict=True)) for k in range(3)
        )

    @staticmethod
    def restore(native: NativeTrainer, theta: dict, m: dict, v: dict) -> None:
        """A state's θ, m and v into the arena (or the kernel interpreter's values): E7071
        when a leaf's type or shape is not the arena's (another realization's state)."""
        leaves = [np.asarray(tree[k]) for tree in (theta, m, v) for k in native.keys]
        n_batch = native.n_batch
        if native.backend != "native":
            native.values[n_batch : n_batch + len(leaves)] = leaves
            return
        for i, leaf in enumerate(leaves):
            view = native.ins[n_batch + i]
            if leaf.dtype != view.dtype or leaf.size != view.size:
                raise ResumeError(
                    "E7071",
                    f"the state's `{native.keys[i % len(native.keys)]}` is {leaf.dtype}"
                    f" {leaf.shape}, the step's {view.dtype} {view.shape}: resume with the"
                    " realization it was trained with",
                )
            view[...] = leaf.reshape(view.shape)


class StepSignals:
    """Natively, a signal (SIGINT, SIGTERM, SIGHUP) waits for the end of the step it lands in
    (its update copied into the arena, its log line, its checkpoint), so that the arena holds
    a completed step when the run stops. A handler notes the signal; `check()` at the end of
    a step raises what the signal raises elsewhere (presk_cli.main). Masking the signals
    would not do: a signal sent to the process goes to any thread that does not mask it
    (numpy's BLAS threads). Off the main thread, or on the other backends, signals are as
    they are."""

    def __init__(self, native: NativeTrainer) -> None:
        self.on = native.backend == "native"
        self.pending: int | None = None
        self.before: dict = {}

    def __enter__(self) -> StepSignals:
        import threading

        from presk_cli.main import STOPS

        if self.on and threading.current_thread() is threading.main_thread():
            for signum in STOPS:
                handler = signal.getsignal(signum)
                if handler is not signal.SIG_IGN:  # `nohup` keeps SIGHUP ignored
                    self.before[signum] = handler
                    signal.signal(signum, self._note)
        return self

    def _note(self, signum: int, frame) -> None:
        self.pending = signum

    def check(self) -> None:
        """At the end of a step: the signal that came during it, raised now."""
        if self.pending is None:
            return
        from presk_cli.main import Interrupted

        signum, self.pending = self.pending, None
        self.__exit__()
        raise KeyboardInterrupt() if signum == signal.SIGINT else Interrupted(signum)

    def __exit__(self, *exc) -> None:
        for signum, handler in self.before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self.before = {}


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
    keeping: Keeping | None = None,
    progress: Progress | None = None,
) -> None:
    """presk_cli.train.train on the kernels: `options` is (backend, realize, threads);
    `rewrite` a pass the step's program goes through before it is lowered (`--opt`);
    `keeping` what the run keeps beside its log (presk_cli.train.Keeping); `progress` what
    a terminal shows (presk_cli.progress)."""
    backend, realize, threads, *_ = options
    keeping, shown = keeping or Keeping(), progress or Progress(None)
    state, horizon = resumed(keeping, steps)
    trainer = Trainer(core, run, folder, seed, bits, horizon, rewrite, shown.phase)
    native = _built(trainer, options, shown)
    horizon = trainer.horizon
    # the settings, the data's digest among them, when a state or metrics record them
    recorded = functools.cache(
        lambda: R.settings(trainer, backend, realize, bits, seed, rewrite is not None)
    )
    first, loss = 0, 0.0
    if state is not None:
        R.check(state, keeping.resume, recorded(), keeping.stop_after)
        ArenaState.restore(native, state.theta, state.m, state.v)
        first, loss = state.t, float(state.settings.get("loss") or 0.0)
    ckpt_dir, every = checkpoints(run, folder, ckpt)
    metrics = None
    times: list[float] = []
    theta: list = []  # θ's leaves after the last step (the resumed checkpoint's before one)
    if state is not None:
        theta = list(R.checkpoint_tree(keeping.resume, trainer.theta).values())
    written: set[int] = set()
    done = R.Completed(first, loss, saved=keeping.resume)
    try:
        metrics = keeping.writer(recorded, first)
        shown.steps(first, horizon)
        with StepSignals(native) as signals:
            for t in range(first + 1, horizon + 1):
                loss, theta = _one_step(native, trainer, t, echo, log_every, metrics, times, shown)
                shown.step(t, loss)
                if ckpt_dir is not None and every and t % every == 0 and t != horizon:
                    path = os.path.join(ckpt_dir, f"step_{t}.psk.d")
                    save(path, run.model, _tree(native, theta))
                    written.add(t)
                leaves = theta  # this step's, for its checkpoint
                done = R.Completed(
                    t,
                    loss,
                    ArenaState.snapshot(native),
                    lambda leaves=leaves: _tree(native, leaves),
                )
                if keeping.resumable and t in written:  # the state beside the checkpoint
                    R.keep(done, ckpt_dir, run.model, recorded, written, save)
                signals.check()
                if keeping.stop_after == t and t != horizon:
                    where = R.keep(done, ckpt_dir or folder, run.model, recorded, written, save)
                    raise StoppedAfter(t, where)
    except KeyboardInterrupt as e:  # SIGINT, SIGTERM, SIGHUP: the last completed step saved
        interrupted(e, done, ckpt_dir or folder, run.model, recorded, written)
        raise
    finally:
        if metrics is not None:
            metrics.close()
    shown.clear()
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
    keeping.draw(metrics, echo)


def _built(trainer: Trainer, options: tuple[str, str, int], shown: Progress) -> NativeTrainer:
    """The NativeTrainer, its lowering and compiling shown as one phase, which says how many
    launches a step makes and whether its object was compiled or found in the cache."""
    from presk_core.cc import cache

    backend, realize, threads, *plan = options
    shown.phase(
        f"lowering the step to kernels ({realize})"
        + (" and compiling it" if backend == "native" else "")
    )
    before = cache.compiled_count
    native = NativeTrainer(trainer, backend, realize, threads, *plan)
    launches = len(native.schedule.launches)
    if backend == "native":
        how = "compiled" if cache.compiled_count > before else "its object from the cache"
        shown.end_phase(f"{launches} kernel launches, {how}")
    else:
        shown.end_phase(f"{launches} kernel launches")
    return native


def _one_step(native: NativeTrainer, trainer: Trainer, t: int, echo, log_every: int, metrics,
              times: list[float], shown: Progress) -> tuple[float, list]:  # fmt: skip
    """Step t on the kernels, its log line and metrics: (the loss, θ's leaves after it)."""
    epoch = (t - 1) // trainer.per_epoch
    rate = native.rate(t)  # each rate when its step runs: step 1 starts at once
    start = time.perf_counter()
    indices, batch = native.batch(t)
    loss, grads, theta = native.step(batch, t, rate)
    native.check(t, indices, loss, grads)  # θ updated, never saved
    times.append(time.perf_counter() - start)
    logged = log_every and t % log_every == 0
    if logged or metrics is not None:
        norm = native.norm(grads)
    if logged:
        shown.clear()
        echo(step_line(t, epoch, loss, rate, norm))
    if metrics is not None:
        metrics.step(t, epoch, loss, rate, norm, times[-1])
    return loss, theta


def _tree(native: NativeTrainer, leaves: list, copy: bool = True) -> dict:
    """θ's tree of `leaves` (a step's gradient or θ): doubles, copied out of the arena, or
    with `copy=False` the leaves as they are (to look at before the next step)."""
    shapes = {k: np.shape(v) for k, v in native.trainer.theta.items()}
    return {
        k: (np.array(x, np.float64) if copy else np.asarray(x)).reshape(shapes[k])
        for k, x in zip(native.keys, leaves, strict=True)
    }


__all__ = ["NATIVE_STEP", "NativeTrainer", "native_step", "rate_entry", "rate_of", "train_native"]
