"""The generation function with a cache of the values later positions read (docs/serve.md,
"Generation with a cache"): presk_core.prefix derives a fill (a window in one call, its
cached values kept) and a step (one position from the cached rows); here each is compiled
once on `presk serve`'s backend and wrapped as `Cached`. When the window's length is one
dimension of the function, the function is also derived at shorter windows, powers of two
(its rows are the whole window's): the prompt's fill runs over the first P positions only,
P its length rounded up, and the step of position t over the first P rows of the cache, P
the power of two past t, for the positions the generation reaches (so its folds over the
positions read P rows, not T). The whole window's fill is for a text that has slid."""

from __future__ import annotations

from presk_cli.native import NativeError


class Cached:
    """The generation function with a cache (presk_core.prefix, docs/serve.md): `fill(ids,
    length)` the logits of a window ([T, V] doubles, or its first rows: at least `length`)
    whose first `length` tokens are real, its cached values kept; `step(token, t)` the
    logits at position t ([V]) from the token there and the cached rows before it.
    `short` is the window of the prompt's fill (0: the whole window's), `windows` those of
    the steps below the whole window; `whole`, the whole window's fill, None where the
    generation it was made for needs none."""

    def __init__(self, fill, step, prefill=None, short: int = 0, windows=()) -> None:
        self.whole, self.step = fill, step
        self.prefill, self.short = prefill, short  # the fill of the first `short` positions
        self.windows = tuple(windows)

    def fill(self, ids, length: int | None = None):
        if self.prefill is not None and length is not None and length <= self.short:
            return self.prefill(ids[: self.short])
        if self.whole is None:
            raise ValueError("no fill of the whole window: cached_function(…, tokens) said none")
        return self.whole(ids)


def prefill_window(length: int, window: int, lowest: int = 1) -> int:
    """The positions a prompt of `length` tokens is filled over (and a step at position
    length − 1 reads): the power of two from it (fewer compiled entries across prompts), at
    least 2 (at a window of one position a leaf read by row is of length 1 there, and the
    derivation differs), at least the dimension's lower bound, at most the window."""
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


def _window_dimension(core, name: str):
    """The window's length when it is one dimension alone (its Lin and name), else None."""
    seq = core.function(name).params[-1].type.shape.axes[1].length
    return (seq, next(iter(seq.names))) if len(seq.names) == 1 else None


def _shorter(core, name: str, dims, inc, leaves: list, p: int):
    """(the incremental form at window p, its leaves), or None: a derivation that fails or
    differs from the whole window's but in its length (the same cached values along the
    same axes; each leaf the same, or its first p rows where the step reads it by row)."""
    import numpy as np
    from presk_core.flatten import FlattenError
    from presk_core.prefix import NoCache
    from presk_core.specialize import SpecializeError

    seq, d = _window_dimension(core, name)
    if seq.value({**dims, d: p}) != p:
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
    return short, out


def cached_function(
    core, name: str, theta: dict, window: int, dims, options, bits: int, prompt: int = 0,
    tokens: int | None = None,
):  # fmt: skip
    """The fill and the step of the generation function on the backend of `options`, each
    compiled once, or the reason (a string) the prefix analysis gives for none. For a
    generation of `tokens` tokens after a prompt of `prompt` (`generate`), those it runs:
    the prompt's fill over its first positions (the whole window's where there is none, or
    where the text will slide) and the steps of the windows its positions reach. Without
    `tokens`: the whole window's fill and step, and the prompt's fill (`prompt` > 0)."""
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
    forms = {window: (inc, leaves)}  # window -> (its incremental form, its leaves)
    found = _window_dimension(core, name)
    lowest = dict(core.lowers).get(found[1], 1) if found is not None else 1

    def shortest(length: int) -> int:
        """The window of a fill of `length` positions (a step at length − 1): the power of
        two from it where the function derives there, else the whole window."""
        p = prefill_window(length, window, lowest)
        if found is not None and p < window and p not in forms:
            forms[p] = _shorter(core, name, dims, inc, leaves, p)
        return p if forms.get(p) is not None else window

    short = shortest(prompt) if prompt else window
    if tokens is None:
        fills, steps = {window, short}, [window]
    else:  # positions prompt … last stepped; the text slides past the window's length
        last = min(prompt + tokens - 2, window - 1)
        steps = sorted({shortest(t + 1) for t in range(prompt, last + 1)})
        fills = {short} | ({window} if prompt + tokens - 1 > window else set())
    backend, realize, threads = options
    caches = [np.zeros(shape) for shape, _ in inc.caches]  # the T rows of each cached value

    def row(k: int, t) -> tuple:
        """The index of a cached value's row t (an int, or a slice of rows) along its axis."""
        return (slice(None),) * inc.caches[k][1] + (t,)

    def rows(k: int, n: int) -> tuple:
        """The index of a cached value's first n rows."""
        return row(k, slice(0, n))

    def window_of(t: int) -> int:
        """The window of the step at position t: the shortest compiled past t."""
        p = next((p for p in steps if p > t), None)
        if p is None:
            raise ValueError(f"no step for position {t}: cached_function(…, tokens) said none")
        return p

    def step_inputs(p: int, token: int, t: int) -> list:
        out = []
        for kind, *rest in forms[p][0].inputs:
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
                out.append(caches[rest[0]][rows(rest[0], p)])
        return out

    def fill_inputs(n: int) -> list:
        return [*forms[n][1], np.zeros((1, n), np.int64)]

    def put(k: int, value, t: int) -> None:
        caches[k][row(k, t)] = value

    def made(fill: dict, step) -> Cached:
        below = short if short < window else 0
        windows = tuple(p for p in steps if p < window)
        return Cached(fill.get(window), step, fill.get(below), below, windows)

    if backend == "interp":
        from presk_core.interp import Interpreter
        from presk_core.run import interp_real

        caches = [np.asarray(c, dtype=object) for c in caches]

        def exact(given: list) -> list:
            return [interp_real(np.asarray(v, dtype=np.float64), bits) for v in given]

        leaves = exact(leaves)  # the steps' (rows of) leaves
        interps = {p: Interpreter(forms[p][0].program, bits) for p in {*fills, *steps}}

        def interp_fill(n: int):
            form, given = forms[n][0], exact(forms[n][1])

            def fill(ids: np.ndarray) -> np.ndarray:
                logits, *values = interps[n].run(form.fill, [*given, ids.reshape(1, -1)], {})
                for k, v in enumerate(values):
                    caches[k][rows(k, n)] = np.asarray(v, dtype=object)
                return np.asarray(logits, dtype=object)[0].astype(np.float64)

            return fill

        def step(token: int, t: int) -> np.ndarray:
            p = window_of(t)
            given = step_inputs(p, token, t)
            logits, *out = interps[p].run(forms[p][0].step, given, {})
            for k, value in enumerate(out):
                put(k, np.asarray(value, dtype=object), t)
            return np.asarray(logits, dtype=object).reshape(-1).astype(np.float64)

        return made({n: interp_fill(n) for n in fills}, step)
    from presk_kernel.interp import KernelError, from_storage, run_schedule, to_storage

    from presk_cli.native import compiled, lower, storage

    def lower_form(n: int, function: str, given: list):
        form = forms[n][0]
        return lower(form.program, getattr(form, function), {}, given, realize, threads)

    try:  # what the kernels cannot lower of the derived functions leaves the whole window
        fill_s = {n: lower_form(n, "fill", fill_inputs(n)) for n in fills}
        step_s = {p: lower_form(p, "step", step_inputs(p, 0, 0)) for p in steps}
    except NativeError as e:
        return f"the fill and the step do not lower ({e.code}: {e})"
    if backend == "kernel":

        def run(schedule, values):
            try:
                return run_schedule(schedule, values, laid=True)
            except KernelError as e:
                raise NativeError("E7003", str(e)) from None

        def kernel_fill(n: int):
            values = storage(fill_s[n], fill_inputs(n))

            def fill(ids: np.ndarray) -> np.ndarray:
                values[-1] = ids.reshape(1, -1)
                logits, *out = run(fill_s[n], values)
                for k, v in enumerate(out):
                    caches[k][rows(k, n)] = np.asarray(v, dtype=np.float64)
                return np.asarray(logits, dtype=np.float64).reshape(n, -1)

            return fill

        def step(token: int, t: int) -> np.ndarray:
            p = window_of(t)
            logits, *out = run(step_s[p], storage(step_s[p], step_inputs(p, token, t)))
            for k, value in enumerate(out):
                put(k, np.asarray(value, dtype=np.float64), t)
            return np.asarray(logits, dtype=np.float64).reshape(-1)

        return made({n: kernel_fill(n) for n in fills}, step)
    from presk_cback.native import aligned_zeros

    shared: dict = {}  # (id, type) -> (a leaf of θ, in that storage type): one for all

    def loaded(schedule, values: list, theta):
        """The compiled entry, its inputs written into its arena once, but the leaves of θ
        at the positions `theta`, read where they lie: one array for every entry, those an
        entry brings new in one block (aligned as the arena's spaces, and as large: its
        pages huge as the arena's, which the product of one row streams)."""
        entry = compiled(schedule)
        entry.held_in_arena()
        types = {b.id: b.dtype for b in schedule.buffers}
        given = storage(schedule, values)
        theta = theta if len(given) == len(values) else ()  # integer weights: their own
        bound, new = {}, {}
        for j, (buf, value) in enumerate(zip(schedule.inputs, given, strict=True)):
            if j in theta and buf in entry.direct:
                key = bound[buf] = (id(values[j]), types[buf])
                if key not in shared and key not in new:
                    new[key] = (values[j], to_storage(value, types[buf]))
                continue
            view = entry.view(buf)
            view[...] = to_storage(np.asarray(value), types[buf]).reshape(view.shape)
        sizes = [-(-stored.nbytes // 64) * 64 for _, stored in new.values()]
        block, at = aligned_zeros(sum(sizes)), 0
        for (key, (leaf, stored)), size in zip(new.items(), sizes, strict=True):
            place = block[at : at + stored.nbytes].view(stored.dtype)
            place[...] = stored.reshape(-1)
            shared[key], at = (leaf, place), at + size
        for buf, key in bound.items():
            entry.bind(buf, shared[key][1].reshape(entry.view(buf).shape))
        return entry

    def call(entry) -> None:
        try:
            entry.call_io()
        except KernelError as e:
            raise NativeError("E7003", str(e)) from None

    positions = np.arange(window)

    class Step:
        """The native step at window p: its entry, and views of its inputs in its arena
        (each cached value's first p rows among them: the cache these steps keep)."""

        def __init__(self, p: int) -> None:
            form, schedule = forms[p][0], step_s[p]
            self.p, self.schedule = p, schedule
            whole = {j for j, how in enumerate(form.inputs) if how[0] == "leaf" and how[2] is None}
            self.entry = loaded(schedule, step_inputs(p, 0, 0), whole)
            self.types = {b.id: b.dtype for b in schedule.buffers}
            self.out = [self.entry.view(b) for b in schedule.outputs]
            given = [self.entry.view(b) for b in schedule.inputs]
            kinds = list(zip(form.inputs, given, strict=True))
            self.caches = {
                how[1]: view.reshape(form.caches[how[1]][0])
                for how, view in kinds
                if how[0] == "cache"
            }
            (self.ids,) = (view for how, view in kinds if how[0] == "ids")
            self.masks = [view for how, view in kinds if how[0] == "mask"]
            self.onehots = [view for how, view in kinds if how[0] == "onehot"]
            # the rows of the leaves read by row, in the step's storage type, once
            self.by_row = [
                (view, to_storage(np.moveaxis(leaves[how[1]], how[2], 0), self.types[buf]))
                for (how, view), buf in zip(kinds, schedule.inputs, strict=True)
                if how[0] == "leaf" and how[2] is not None
            ]

        def keep(self, k: int, values, n: int) -> None:
            """The first n rows of cached value k (n ≤ p)."""
            self.caches[k][rows(k, n)] = values[rows(k, n)]

        def __call__(self, token: int, t: int) -> np.ndarray:
            self.ids[...] = token
            for m in self.masks:
                m[...] = (positions[: self.p] <= t).reshape(m.shape)
            for m in self.onehots:
                m[...] = (positions[: self.p] == t).reshape(m.shape)
            for view, table in self.by_row:
                view[...] = table[t].reshape(view.shape)
            call(self.entry)
            for k, view in enumerate(self.out[1:]):
                for other in native_steps.values():  # each window past t keeps row t
                    if other.p > t:
                        at = other.caches[k][row(k, t)]
                        at[...] = view.reshape(at.shape)
            widened = from_storage(self.out[0], self.types[self.schedule.outputs[0]])
            return np.array(widened, dtype=np.float64).reshape(-1)

    native_steps = {p: Step(p) for p in steps}

    def native_fill(n: int):
        schedule = fill_s[n]
        entry = loaded(schedule, fill_inputs(n), range(len(forms[n][1])))
        ids_view = entry.view(schedule.inputs[-1])
        logits_view, *out = [entry.view(b) for b in schedule.outputs]
        logits_type = {b.id: b.dtype for b in schedule.buffers}[schedule.outputs[0]]
        shapes = [
            tuple(s if a != ax else n for a, s in enumerate(shape)) for shape, ax in inc.caches
        ]

        def fill(ids: np.ndarray) -> np.ndarray:
            ids_view[...] = ids.reshape(ids_view.shape)
            call(entry)
            for k, view in enumerate(out):  # the cached values, in their storage type
                for s in native_steps.values():
                    s.keep(k, view.reshape(shapes[k]), min(n, s.p))
            widened = from_storage(logits_view, logits_type)
            return np.array(widened, dtype=np.float64).reshape(n, -1)

        return fill

    return made(
        {n: native_fill(n) for n in fills},
        lambda token, t: native_steps[window_of(t)](token, t),
    )
