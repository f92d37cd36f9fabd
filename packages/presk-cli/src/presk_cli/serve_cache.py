"""The generation function with a cache of the values later positions read (docs/serve.md,
"Generation with a cache"): presk_core.prefix derives a fill (a window in one call, its
cached values kept) and a step (one position from the cached rows); here each is compiled
once on `presk serve`'s backend and wrapped as `Cached`. The prompt's fill runs over the
first P positions of the window only, P the prompt's length rounded up to a power of two
(the function specialized at that window: its rows are the whole window's), when the
window's length is one dimension of the function; the whole window's fill is for a text
that has slid."""

from __future__ import annotations

from presk_cli.native import NativeError


class Cached:
    """The generation function with a cache (presk_core.prefix, docs/serve.md): `fill(ids,
    length)` the logits of a window ([T, V] doubles, or its first rows: at least `length`)
    whose first `length` tokens are real, its cached values kept; `step(token, t)` the
    logits at position t ([V]) from the token there and the cached rows before it."""

    def __init__(self, fill, step, prefill=None, short: int = 0) -> None:
        self.whole, self.step = fill, step
        self.prefill, self.short = prefill, short  # the fill of the first `short` positions

    def fill(self, ids, length: int | None = None):
        if self.prefill is not None and length is not None and length <= self.short:
            return self.prefill(ids[: self.short])
        return self.whole(ids)


def prefill_window(length: int, window: int, lowest: int = 1) -> int:
    """The positions a prompt of `length` tokens is filled over: the power of two from it
    (fewer compiled fills across prompts), at least 2 (at a window of one position a leaf
    read by row is of length 1 there, and the derivation differs), at least the
    dimension's lower bound, at most the window."""
    p = 1 << max(1, (length - 1).bit_length())
    return min(window, max(p, lowest))


def _derive(core, name: str, dims):
    from presk_core.flatten import flatten
    from presk_core.prefix import incremental
    from presk_core.specialize import specialize
    from presk_core.unroll import unroll_stack

    flat = flatten(unroll_stack(specialize(core, name, dims)))
    head = flat.functions[0]
    return head, incremental(flat, head.name, len(head.params) - 1, 1)


def _short(core, name: str, dims, inc, leaves: list, window: int, prompt: int):
    """(P, the incremental form at window P, its leaves) for a prompt of `prompt` tokens,
    or None: a prompt that fills the window, a window that is not one dimension alone, a
    derivation that fails or differs from the whole window's but in its length (the same
    cached values along the same axes; each leaf the same, or its first P rows where the
    step reads it by row)."""
    import numpy as np
    from presk_core.flatten import FlattenError
    from presk_core.prefix import NoCache
    from presk_core.specialize import SpecializeError

    seq = core.function(name).params[-1].type.shape.axes[1].length
    if len(seq.names) != 1:
        return None
    (d,) = seq.names
    p = prefill_window(prompt, window, dict(core.lowers).get(d, 1))
    if p >= window or seq.value({**dims, d: p}) != p:
        return None
    try:
        head, short = _derive(core, name, {**dims, d: p})
    except (NoCache, FlattenError, SpecializeError):
        return None
    kept = lambda inputs: [x for x in inputs if x[0] not in ("mask", "onehot")]  # noqa: E731
    if kept(short.inputs) != kept(inc.inputs) or len(short.caches) != len(inc.caches):
        return None
    for (shape, axis), (long, along) in zip(short.caches, inc.caches, strict=True):
        if axis != along or shape != long[:axis] + (p,) + long[axis + 1 :]:
            return None
    out = []
    for leaf, param, kind in zip(leaves, head.params, inc.inputs, strict=False):
        want = tuple(a.length.constant for a in param.type.shape.axes)
        if leaf.shape != want:
            axis = kind[2] if kind[0] == "leaf" else None
            if axis is None or leaf.shape[:axis] + (p,) + leaf.shape[axis + 1 :] != want:
                return None
            leaf = np.take(leaf, np.arange(p), axis=axis)
        out.append(leaf)
    return p, short, out


def cached_function(
    core, name: str, theta: dict, window: int, dims, options, bits: int, prompt: int = 0
):
    """The fill and the step of the generation function on the backend of `options`, each
    compiled once, and the fill over the first positions for a prompt of `prompt` tokens
    (0: none); or the reason (a string) the prefix analysis gives for none."""
    import numpy as np
    from presk_core.flatten import FlattenError, flat_arguments
    from presk_core.prefix import NoCache
    from presk_core.specialize import SpecializeError

    fn = core.function(name)
    ids0 = np.zeros((1, window), dtype=np.int64)
    try:
        _, inc = _derive(core, name, dims)
    except (NoCache, FlattenError, SpecializeError) as e:
        return str(e)
    leaves = flat_arguments(inc.program, [p.type for p in fn.params], [theta, ids0])[:-1]
    short = _short(core, name, dims, inc, leaves, window, prompt) if prompt else None
    fills = [(inc.program, inc.fill, leaves, window)]
    if short is not None:
        p, sinc, sleaves = short
        fills.append((sinc.program, sinc.fill, sleaves, p))
    caches = [np.zeros(shape) for shape, _ in inc.caches]
    backend, realize, threads = options

    def rows(k: int, n: int) -> tuple:
        """The index of a cached value's first n rows."""
        return (slice(None),) * inc.caches[k][1] + (slice(0, n),)

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

    def made(found: list) -> Cached:
        if len(found) == 1:
            return Cached(found[0], step)
        return Cached(found[0], step, found[1], fills[1][3])

    if backend == "interp":
        from presk_core.interp import Interpreter
        from presk_core.run import interp_real

        caches = [np.asarray(c, dtype=object) for c in caches]

        def interp_fill(program, entry: str, given: list, n: int):
            interp = Interpreter(program, bits)
            exact = [interp_real(np.asarray(v, dtype=np.float64), bits) for v in given]

            def fill(ids: np.ndarray) -> np.ndarray:
                logits, *values = interp.run(entry, [*exact, ids.reshape(1, -1)], {})
                for k, v in enumerate(values):
                    caches[k][rows(k, n)] = np.asarray(v, dtype=object)
                return np.asarray(logits, dtype=object)[0].astype(np.float64)

            return fill

        interp = Interpreter(inc.program, bits)
        leaves = [interp_real(np.asarray(v, dtype=np.float64), bits) for v in leaves]

        def step(token: int, t: int) -> np.ndarray:
            logits, *out = interp.run(inc.step, step_inputs(token, t), {})
            for k, row in enumerate(out):
                put(k, np.asarray(row, dtype=object), t)
            return np.asarray(logits, dtype=object).reshape(-1).astype(np.float64)

        return made([interp_fill(*f) for f in fills])
    from presk_kernel.interp import KernelError, from_storage, run_schedule, to_storage

    from presk_cli.native import compiled, lower, storage

    try:  # what the kernels cannot lower of the derived functions leaves the whole window
        lowered = [
            lower(prog, entry, {}, [*given, np.zeros((1, n), np.int64)], realize, threads)
            for prog, entry, given, n in fills
        ]
        step_s = lower(inc.program, inc.step, {}, step_inputs(0, 0), realize, threads)
    except NativeError as e:
        return f"the fill and the step do not lower ({e.code}: {e})"
    if backend == "kernel":

        def run(schedule, values):
            try:
                return run_schedule(schedule, values, laid=True)
            except KernelError as e:
                raise NativeError("E7003", str(e)) from None

        def kernel_fill(schedule, given: list, n: int):
            values = storage(schedule, [*given, np.zeros((1, n), np.int64)])

            def fill(ids: np.ndarray) -> np.ndarray:
                values[-1] = ids.reshape(1, -1)
                logits, *out = run(schedule, values)
                for k, v in enumerate(out):
                    caches[k][rows(k, n)] = np.asarray(v, dtype=np.float64)
                return np.asarray(logits, dtype=np.float64).reshape(n, -1)

            return fill

        def step(token: int, t: int) -> np.ndarray:
            logits, *out = run(step_s, storage(step_s, step_inputs(token, t)))
            for k, row in enumerate(out):
                put(k, np.asarray(row, dtype=np.float64), t)
            return np.asarray(logits, dtype=np.float64).reshape(-1)

        return made([kernel_fill(s, f[2], f[3]) for s, f in zip(lowered, fills, strict=True)])
    from presk_cback.load import pointer

    def loaded(schedule, values: list):
        """The compiled entry, its inputs written into its arena once (θ stays there)."""
        entry = compiled(schedule)
        types = {b.id: b.dtype for b in schedule.buffers}
        for buf, value in zip(schedule.inputs, storage(schedule, values), strict=True):
            view = entry.view(buf)
            view[...] = to_storage(np.asarray(value), types[buf]).reshape(view.shape)
        return entry

    step_e = loaded(step_s, step_inputs(0, 0))
    step_types = {b.id: b.dtype for b in step_s.buffers}
    step_out = [step_e.view(b) for b in step_s.outputs]
    step_in = dict(enumerate(step_e.view(b) for b in step_s.inputs))
    kinds = list(enumerate(inc.inputs))
    rows_in = [(i, rest) for i, (kind, *rest) in kinds if kind == "leaf" and rest[1] is not None]
    cache_in = {
        rest[0]: step_in[i].reshape(inc.caches[rest[0]][0])
        for i, (kind, *rest) in kinds
        if kind == "cache"
    }
    (ids_in,) = (step_in[i] for i, (kind, *_) in kinds if kind == "ids")
    masks_in = [step_in[i] for i, (kind, *_) in kinds if kind == "mask"]
    onehots_in = [step_in[i] for i, (kind, *_) in kinds if kind == "onehot"]
    positions = np.arange(window)
    # the rows of the leaves read by row, in the step's storage type, once
    by_row = {
        i: to_storage(np.moveaxis(leaves[leaf], axis, 0), step_types[step_s.inputs[i]])
        for i, (leaf, axis) in rows_in
    }

    def call(entry, schedule) -> None:
        if entry.module.lib.presk_entry(pointer(entry.arena, "char")):
            raise NativeError("E7003", f"an index out of range in `{schedule.entry}`")

    def native_fill(schedule, given: list, n: int):
        entry = loaded(schedule, [*given, np.zeros((1, n), np.int64)])
        ids_view = entry.view(schedule.inputs[-1])
        logits_view, *out = [entry.view(b) for b in schedule.outputs]
        logits_type = {b.id: b.dtype for b in schedule.buffers}[schedule.outputs[0]]
        shapes = [
            tuple(s if a != ax else n for a, s in enumerate(shape)) for shape, ax in inc.caches
        ]

        def fill(ids: np.ndarray) -> np.ndarray:
            ids_view[...] = ids.reshape(ids_view.shape)
            call(entry, schedule)
            for k, view in enumerate(out):  # the cached values, in their storage type
                cache_in[k][rows(k, n)] = view.reshape(shapes[k])
            widened = from_storage(logits_view, logits_type)
            return np.array(widened, dtype=np.float64).reshape(n, -1)

        return fill

    def step(token: int, t: int) -> np.ndarray:
        ids_in[...] = token
        for m in masks_in:
            m[...] = (positions <= t).reshape(m.shape)
        for m in onehots_in:
            m[...] = (positions == t).reshape(m.shape)
        for i, row in by_row.items():
            step_in[i][...] = row[t].reshape(step_in[i].shape)
        call(step_e, step_s)
        for k, view in enumerate(step_out[1:]):
            at = cache_in[k][(slice(None),) * inc.caches[k][1] + (t,)]
            at[...] = view.reshape(at.shape)
        widened = from_storage(step_out[0], step_types[step_s.outputs[0]])
        return np.array(widened, dtype=np.float64).reshape(-1)

    return made([native_fill(s, f[2], f[3]) for s, f in zip(lowered, fills, strict=True)])
