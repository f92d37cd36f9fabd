"""The generation function with a cache of the values later positions read (docs/serve.md,
"Generation with a cache"): presk_core.prefix derives a fill (the prompt's window in one
call, its cached values kept) and a step (one position from the cached rows); here each is
compiled once on `presk serve`'s backend and wrapped as `Cached`."""

from __future__ import annotations

from presk_cli.native import NativeError


class Cached:
    """The generation function with a cache (presk_core.prefix, docs/serve.md): `fill(ids)`
    the logits of a whole window ([T, V] doubles), its cached values kept; `step(token, t)`
    the logits at position t ([V]) from the token there and the cached rows before it."""

    def __init__(self, fill, step) -> None:
        self.fill, self.step = fill, step


def cached_function(core, name: str, theta: dict, window: int, dims, options, bits: int):
    """The fill and the step of the generation function on the backend of `options`, each
    compiled once; or the reason (a string) the prefix analysis gives for none."""
    import numpy as np
    from presk_core.flatten import FlattenError, flat_arguments, flatten
    from presk_core.prefix import NoCache, incremental
    from presk_core.specialize import SpecializeError, specialize
    from presk_core.unroll import unroll_stack

    fn = core.function(name)
    ids0 = np.zeros((1, window), dtype=np.int64)
    try:
        flat = flatten(unroll_stack(specialize(core, name, dims)))
        head = flat.functions[0]
        inc = incremental(flat, head.name, len(head.params) - 1, 1)
    except (NoCache, FlattenError, SpecializeError) as e:
        return str(e)
    leaves = flat_arguments(flat, [p.type for p in fn.params], [theta, ids0])[:-1]
    caches = [np.zeros(shape) for shape, _ in inc.caches]
    backend, realize, threads = options

    def step_inputs(token: int, t: int) -> list:
        out = []
        for kind, *rest in inc.inputs:
            if kind == "ids":
                out.append(np.full((1, 1), token, dtype=np.int64))
            elif kind == "leaf":
                i, axis = rest
                leaf = leaves[i]
                out.append(leaf if axis is None else np.take(leaf, [t], axis=axis))
            elif kind == "mask":
                out.append((np.arange(rest[0]) <= t).reshape(1, -1))
            elif kind == "onehot":
                out.append(np.arange(rest[0]) == t)
            else:
                out.append(caches[rest[0]])
        return out

    def put(k: int, row, t: int) -> None:
        axis = inc.caches[k][1]
        index = (slice(None),) * axis + (t,)
        caches[k][index] = row

    if backend == "interp":
        from presk_core.interp import Interpreter
        from presk_core.run import interp_real

        interp = Interpreter(inc.program, bits)
        leaves = [interp_real(np.asarray(v, dtype=np.float64), bits) for v in leaves]
        caches = [np.asarray(c, dtype=object) for c in caches]

        def fill(ids: np.ndarray) -> np.ndarray:
            logits, *values = interp.run(inc.fill, [*leaves, ids.reshape(1, -1)], {})
            caches[:] = [np.asarray(v, dtype=object) for v in values]
            return np.asarray(logits, dtype=object)[0].astype(np.float64)

        def step(token: int, t: int) -> np.ndarray:
            logits, *rows = interp.run(inc.step, step_inputs(token, t), {})
            for k, row in enumerate(rows):
                put(k, np.asarray(row, dtype=object), t)
            return np.asarray(logits, dtype=object).reshape(-1).astype(np.float64)

        return Cached(fill, step)
    from presk_kernel.interp import KernelError, from_storage, run_schedule, to_storage

    from presk_cli.native import compiled, lower, storage

    try:  # what the kernels cannot lower of the derived functions leaves the whole window
        fill_s = lower(inc.program, inc.fill, {}, [*leaves, ids0], realize, threads)
        step_s = lower(inc.program, inc.step, {}, step_inputs(0, 0), realize, threads)
    except NativeError as e:
        return f"the fill and the step do not lower ({e.code}: {e})"
    if backend == "kernel":
        fill_in = storage(fill_s, [*leaves, ids0])

        def run(schedule, values):
            try:
                return run_schedule(schedule, values, laid=True)
            except KernelError as e:
                raise NativeError("E7003", str(e)) from None

        def fill(ids: np.ndarray) -> np.ndarray:
            fill_in[-1] = ids.reshape(1, -1)
            logits, *values = run(fill_s, fill_in)
            caches[:] = [np.array(v, dtype=np.float64) for v in values]
            return np.asarray(logits, dtype=np.float64).reshape(window, -1)

        def step(token: int, t: int) -> np.ndarray:
            logits, *rows = run(step_s, storage(step_s, step_inputs(token, t)))
            for k, row in enumerate(rows):
                put(k, np.asarray(row, dtype=np.float64), t)
            return np.asarray(logits, dtype=np.float64).reshape(-1)

        return Cached(fill, step)
    from presk_cback.load import pointer

    fill_e, step_e = compiled(fill_s), compiled(step_s)
    for entry, schedule, values in (
        (fill_e, fill_s, [*leaves, ids0]),
        (step_e, step_s, step_inputs(0, 0)),
    ):
        types = {b.id: b.dtype for b in schedule.buffers}
        for buf, value in zip(schedule.inputs, storage(schedule, values), strict=True):
            view = entry.view(buf)
            view[...] = to_storage(np.asarray(value), types[buf]).reshape(view.shape)
    fill_types = {b.id: b.dtype for b in fill_s.buffers}
    step_types = {b.id: b.dtype for b in step_s.buffers}
    fill_ids = fill_e.view(fill_s.inputs[-1])
    fill_out = [fill_e.view(b) for b in fill_s.outputs]
    step_out = [step_e.view(b) for b in step_s.outputs]
    step_in = dict(enumerate(step_e.view(b) for b in step_s.inputs))
    kinds = list(enumerate(inc.inputs))
    rows_in = [(i, rest) for i, (kind, *rest) in kinds if kind == "leaf" and rest[1] is not None]
    cache_in = {rest[0]: step_in[i] for i, (kind, *rest) in kinds if kind == "cache"}
    (ids_in,) = (step_in[i] for i, (kind, *_) in kinds if kind == "ids")
    masks_in = [step_in[i] for i, (kind, *_) in kinds if kind == "mask"]
    onehots_in = [step_in[i] for i, (kind, *_) in kinds if kind == "onehot"]
    positions = np.arange(window)

    def call(entry, schedule) -> None:
        if entry.module.lib.presk_entry(pointer(entry.arena, "char")):
            raise NativeError("E7003", f"an index out of range in `{schedule.entry}`")

    def fill(ids: np.ndarray) -> np.ndarray:
        fill_ids[...] = ids.reshape(fill_ids.shape)
        call(fill_e, fill_s)
        for k, view in enumerate(fill_out[1:]):  # the cached values, in their storage type
            cache_in[k][...] = view.reshape(cache_in[k].shape)
        widened = from_storage(fill_out[0], fill_types[fill_s.outputs[0]])
        return np.array(widened, dtype=np.float64).reshape(window, -1)

    def step(token: int, t: int) -> np.ndarray:
        ids_in[...] = token
        for m in masks_in:
            m[...] = (positions <= t).reshape(m.shape)
        for m in onehots_in:
            m[...] = (positions == t).reshape(m.shape)
        for i, (leaf, axis) in rows_in:
            row = np.take(leaves[leaf], [t], axis=axis)
            step_in[i][...] = to_storage(row, step_types[step_s.inputs[i]]).reshape(
                step_in[i].shape
            )
        call(step_e, step_s)
        for k, view in enumerate(step_out[1:]):
            shape, axis = inc.caches[k]
            at = cache_in[k].reshape(shape)[(slice(None),) * axis + (t,)]
            at[...] = view.reshape(at.shape)
        widened = from_storage(step_out[0], step_types[step_s.outputs[0]])
        return np.array(widened, dtype=np.float64).reshape(-1)

    return Cached(fill, step)
