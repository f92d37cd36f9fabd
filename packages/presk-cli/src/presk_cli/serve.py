"""`presk serve`: text generated with a file's `inference serve` (docs/serve.md).

The block names a model, its weights (a one-sample `.psk.d` of `params M`, as `presk train`
writes it), a vocabulary (a JSON array of characters) and the generation function: the
logits of a window of T tokens, `ℝ[batch: B, seq: T, V]`, compiled once at B = 1 and the
weights' T. The loop is here: the last T tokens of the text so far (the prompt, then what
was generated), padded on the right with token 0, give the logits at the window's last
real position (the causal mask makes the padding irrelevant); the next token is their
argmax (temperature 0: greedy decoding, the first of equal logits) or a draw of
presk_core.random.sample from softmax(logits / temperature) with the key
`fold_in(fold_in_name(root_key(seed), "serve"), i)` for the i-th generated token (from 0).
Every backend's logits are rounded to doubles before they are compared or sampled, so the
tokens are a function of the logits' doubles, the temperature and the seed.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import click
from presk_syntax.diagnostics import DiagnosticError, emit, error

from presk_cli.commands import CONST, RUN, SEED, Count, _consts, _dims, _fail
from presk_cli.native import NativeError, backend_options
from presk_cli.native import fail as native_fail
from presk_cli.progress import on_terminal
from presk_cli.serve_cache import Cached, cached_function

if TYPE_CHECKING:
    import numpy as np

# numpy is imported where it is used: `presk --help` loads this module (tests/cli)

TOKENS = 32
"""Tokens generated when neither --tokens nor the block's `max_tokens` says."""
MAX_TOKENS = 1_000_000
"""The most tokens one `presk serve` generates (a bound, so that a mistyped count ends)."""


class ServeError(Exception):
    """Something presk serve cannot serve: its diagnostic's code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _stop(e: ServeError, sources) -> NoReturn:
    emit([error(e.code, str(e))], sources)
    sys.exit(1)


# ---- the weights and the vocabulary --------------------------------------------------------


def _shape(leaf, dims: dict[str, int]) -> tuple[int, ...]:
    return tuple(c.value(dims) for _, c in leaf.stack) + tuple(
        a.length.value(dims) for a in leaf.type.shape.axes
    )


def _lengths(leaf) -> list:
    return [c for _, c in leaf.stack] + [a.length for a in leaf.type.shape.axes]


def _text(shape: tuple[int, ...]) -> str:
    return f"ℝ[{', '.join(map(str, shape))}]"


def _layout_dims(layout, found, dims: dict[str, int], path: str, want: str) -> dict[str, int]:
    """The dimensions a checkpoint's recorded leaves fix (a length that is one dimension
    alone, or solved from one), each leaf checked against the program's at the constants
    given: E7021 naming the leaf, the shape expected and the shape found."""
    paths = [leaf.path for leaf in layout.leaves]
    if [p for p, _ in found] != paths:
        extra = [p for p, _ in found if p not in paths]
        lacking = [p for p in paths if p not in {q for q, _ in found}]
        what = (
            f"a leaf `{extra[0]}` that `{want}` does not have"
            if extra
            else f"no leaf `{lacking[0]}`"
            if lacking
            else "its leaves in another order"
        )
        raise ServeError("E7021", f"`{path}` holds {what} (the program's: {', '.join(paths)})")
    from presk_cli.arguments import solve

    lengths = [
        (lin, n)
        for leaf, (_, shape) in zip(layout.leaves, found, strict=True)
        for lin, n in zip(_lengths(leaf), shape, strict=False)
    ]
    known = solve(lengths, dims)  # as the Python API solves an entry's from its arguments
    for leaf, (p, shape) in zip(layout.leaves, found, strict=True):
        if any(d not in known for lin in _lengths(leaf) for d in lin.names):
            continue  # the size decides below (or asks for --dim)
        expected = _shape(leaf, known)
        if expected != tuple(shape):
            raise ServeError(
                "E7021",
                f"`{path}`: `{p}` is {_text(tuple(shape))} in the weights, and {_text(expected)}"
                f" in the program's `{want}` (weights of other constants or dimensions: give"
                " the ones they were trained with, --const or --dim)",
            )
    return {d: v for d, v in known.items() if d not in dims}


def _check_bounds(core, solved: dict[str, int], path: str, want: str) -> None:
    """The dimensions the weights fixed, against the program's `dim` bounds (E7021)."""
    from presk_types.presburger import Dim, DimContext, check_assignment

    bounds, lowers = dict(core.bounds), dict(core.lowers)
    ctx = DimContext(tuple(Dim(d, bounds.get(d), lowers.get(d, 0)) for d in sorted(solved)))
    violated = check_assignment(ctx, solved) if solved else None
    if violated is not None:
        raise ServeError(
            "E7021", f"`{path}` holds a `{want}` whose dimensions break a bound: {violated}"
        )


def load_weights(core, model: str, path: str, dims: dict[str, int]) -> tuple[dict, dict]:
    """θ from a one-sample `.psk.d` of `params model` (path -> doubles, in the layout's
    order), and the dimensions it fixes (the position table's T): from its recorded leaves,
    checked one by one against the program's, or from its size; then checked against the
    program's `dim` bounds."""
    import numpy as np

    given = dict(dims)
    from presk_core.data import DataError, read_header, read_reals

    try:
        header = read_header(path)
    except DataError as e:
        raise ServeError(e.code, f"the weights: {e}") from None
    want = f"params {model}"
    if header.type_text != want or header.count != 1:
        samples = "1 sample" if header.count == 1 else f"{header.count} samples"
        held = f"{samples} of `{header.type_text}`"
        raise ServeError("E7021", f"`{path}` holds {held}, not one `{want}`")
    layout = core.layout(model)
    try:
        reals = read_reals(path)
    except DataError as e:
        raise ServeError(e.code, f"the weights: {e}") from None
    dims = dict(dims)
    if header.layout is not None:  # the file says what it holds: leaf by leaf
        dims.update(_layout_dims(layout, header.layout, dims, path, want))
    free = sorted(
        {n for leaf in layout.leaves for lin in _lengths(leaf) for n in lin.names} - set(dims)
    )
    size = lambda d: sum(int(np.prod(_shape(leaf, d))) for leaf in layout.leaves)  # noqa: E731
    if len(free) > 1:
        raise ServeError(
            "E7021", f"`{want}` depends on {', '.join(free)}: give them with --dim NAME=N"
        )
    if free:  # the size is affine in it (T rows of a position table): solved, then checked
        d = free[0]
        s0, s1 = size({**dims, d: 0}), size({**dims, d: 1})
        step = s1 - s0
        value = (reals.size - s0) // step if step and (reals.size - s0) % step == 0 else 0
        if value < 1 or size({**dims, d: value}) != reals.size:
            raise ServeError(
                "E7021", f"`{path}` holds {reals.size} reals, which no {d} makes a `{want}`"
            )
        dims[d] = value
    if size(dims) != reals.size:
        at = ", ".join(f"{k} = {v}" for k, v in dims.items())
        raise ServeError(
            "E7021",
            f"`{path}` holds {reals.size} reals, and `{want}` at {at} has {size(dims)}",
        )
    _check_bounds(core, {d: dims[d] for d in set(dims) - set(given)}, path, want)
    theta, at = {}, 0
    for leaf in layout.leaves:
        shape = _shape(leaf, dims)
        n = int(np.prod(shape))
        theta[leaf.path] = reals[at : at + n].reshape(shape).copy()
        at += n
    return theta, dims


def load_vocabulary(path: str, size: int) -> list[str]:
    """The vocabulary's characters; E7009 when it is not a JSON array of `size` of them."""
    from presk_core.data import DataError
    from presk_core.text import CODE, parse_vocabulary

    try:
        with open(path, encoding="utf-8") as f:
            vocab = parse_vocabulary(f.read(), path)
    except OSError as e:
        raise ServeError(CODE, f"cannot read `{path}`: {(e.strerror or str(e)).lower()}") from None
    except UnicodeDecodeError:
        raise ServeError(CODE, f"`{path}` is not UTF-8 text") from None
    except DataError as e:
        raise ServeError(e.code, str(e)) from None
    if len(vocab) != size:
        raise ServeError(
            CODE, f"`{path}` has {len(vocab)} characters, and the model's tokens are idx[{size}]"
        )
    return vocab


def read_prompt(path: str) -> str:
    """A prompt from a file (`-`: standard input), UTF-8, one line end at its end left out
    (a file written by an editor or `echo` ends with one); E7004 when it cannot be read."""
    name = "standard input" if path == "-" else f"`{path}`"
    try:
        if path == "-":
            blob = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                blob = f.read()
    except OSError as e:
        raise ServeError("E7004", f"cannot read {name}: {(e.strerror or str(e)).lower()}") from None
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as e:
        line = blob.count(b"\n", 0, e.start) + 1
        raise ServeError(
            "E7004",
            f"{name} is not UTF-8 text: byte 0x{blob[e.start]:02x} at offset {e.start} (line {line})",
        ) from None
    for end in ("\r\n", "\n"):
        if text.endswith(end):
            return text[: -len(end)]
    return text


# ---- the generation function on a backend --------------------------------------------------


def logits_function(core, name: str, theta: dict, window: int, dims, options, bits: int):
    """A function from a window of `window` tokens (int64) to its logits (doubles, [T, V]),
    on the backend of `options` (backend, realize, threads): compiled once."""
    import numpy as np

    backend, realize, threads = options
    ids0 = np.zeros((1, window), dtype=np.int64)
    if backend == "interp":
        from presk_core.interp import Interpreter
        from presk_core.run import interp_real

        interp = Interpreter(core, bits)
        exact = {k: interp_real(v, bits) for k, v in theta.items()}

        def interpreted(ids: np.ndarray) -> np.ndarray:
            out = interp.run(name, [exact, ids.reshape(1, -1)], dims)
            return np.asarray(out, dtype=object)[0].astype(np.float64)

        return interpreted
    from presk_kernel.interp import KernelError, from_storage, run_schedule, to_storage
    from presk_kernel.lower import argument_leaves

    from presk_cli.native import compiled, lower, storage

    schedule = lower(core, name, dims, [theta, ids0], realize, threads)
    values = storage(schedule, argument_leaves([theta, ids0]))
    types = {b.id: b.dtype for b in schedule.buffers}
    last, out = schedule.inputs[-1], schedule.outputs[0]
    if backend == "kernel":

        def kernels(ids: np.ndarray) -> np.ndarray:
            values[-1] = to_storage(ids.reshape(1, -1), types[last])
            try:
                result = run_schedule(schedule, values, laid=True)  # as native lays it out
            except KernelError as e:
                raise NativeError("E7003", str(e)) from None
            return np.asarray(result[0], dtype=np.float64).reshape(window, -1)

        return kernels
    from presk_cback.load import pointer

    entry = compiled(schedule)
    for buf, value in zip(schedule.inputs, values, strict=True):  # θ stays in the arena
        view = entry.view(buf)
        view[...] = to_storage(np.asarray(value), types[buf]).reshape(view.shape)
    ids_view, out_view = entry.view(last), entry.view(out)

    def native(ids: np.ndarray) -> np.ndarray:
        ids_view[...] = to_storage(ids.reshape(1, -1), types[last]).reshape(ids_view.shape)
        if entry.module.lib.presk_entry(pointer(entry.arena, "char")):
            raise NativeError("E7003", f"an index out of range in `{schedule.entry}`")
        widened = from_storage(out_view, types[out])
        return np.array(widened, dtype=np.float64).reshape(window, -1)

    return native


# ---- the loop ------------------------------------------------------------------------------


def token_keys(seed: int):
    """The key of the i-th generated token: the seed's root key, `serve` folded in, then i."""
    from presk_core import random as R

    base = R.fold_in_name(R.root_key(seed), "serve")
    return lambda i: R.fold_in(base, i)


def scaled(row: np.ndarray, temperature: float) -> np.ndarray:
    """logits / temperature, in doubles; where that overflows (a tiny temperature), the logits
    shifted by their maximum first, which softmax does not change: the largest is 0, the
    others at most -inf, never +inf."""
    import numpy as np

    out = row / temperature
    if np.all(np.isfinite(out)):
        return out
    return (row - row.max()) / temperature


def _temperature(value: float, where: str) -> str | None:
    """Why a temperature cannot be used, or None: 0 (greedy) or a finite normal double."""
    if value != value or value in (float("inf"), float("-inf")):
        return f"{where} is {value}: a temperature is finite"
    if value < 0 or 0 < value < sys.float_info.min:
        return (
            f"{where} is {value:g}: a temperature is 0 (greedy) or a normal double from"
            f" {sys.float_info.min:g}"
        )
    return None


class Temperature(click.ParamType):
    """--temperature: 0, or a finite double of at least the smallest normal one."""

    name = "float"

    def convert(self, value, param, ctx):
        try:
            if isinstance(value, str) and not value.isascii():  # float reads `١.٥` as 1.5
                raise ValueError(value)
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number in ASCII digits", param, ctx)
        why = _temperature(number, f"`{value}`")
        if why is not None:
            self.fail(why, param, ctx)
        return number


def generate(
    logits: Callable[[np.ndarray], np.ndarray] | None,
    prompt: list[int],
    window: int,
    tokens: int,
    temperature: float,
    seed: int,
    emit_token: Callable[[int], None],
    cached: Cached | None = None,
) -> list[int]:
    """`tokens` tokens after `prompt`, each from the last `window` tokens of the text so far:
    with `cached`, the window's first call fills the cache and each next token is one step
    at its position, until the text is longer than the window (then every token is the
    whole window's, as without a cache: the positions have all moved, and the cache's fill
    of the whole window gives them; `logits`, the whole-window function, is for no cache)."""
    import numpy as np
    from presk_core import random as R

    key = token_keys(seed)
    text = list(prompt)
    out = []
    filled = False
    for i in range(tokens):
        if filled and len(text) <= window:
            row = cached.step(text[-1], len(text) - 1)
        else:
            context = text[-window:]
            ids = np.zeros(window, dtype=np.int64)
            ids[: len(context)] = context
            if cached is not None:  # the cache filled (over the prompt's first positions)
                row = cached.fill(ids, len(context))[len(context) - 1]
            else:
                row = logits(ids)[len(context) - 1]
            filled = cached is not None and len(text) < window
        if not np.all(np.isfinite(row)):
            raise ServeError("E7022", f"the logits of generated token {i} are not all finite")
        if temperature == 0:
            token = int(np.argmax(row))
        else:
            token = int(R.sample(key(i), scaled(row, temperature)))
        text.append(token)
        out.append(token)
        emit_token(token)
    return out


@click.command(
    short_help="Generate tokens with the file's `inference serve`: its model, weights and"
    " generation function"
)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--prompt", default="", help="The text to continue (characters of the vocabulary).")
@click.option(
    "--prompt-file",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE",
    help="The text to continue from a UTF-8 file, `-` for standard input (one line end at its"
    " end left out).",
)
@click.option(
    "--tokens",
    type=Count(1, MAX_TOKENS),
    help="How many tokens (default: the block's max_tokens; at most a million).",
)
@click.option(
    "--temperature",
    type=Temperature(),
    help="0: greedy decoding (argmax); above (a finite normal double): sampling from"
    " softmax(logits / T)."
    " Default: the block's temperature, else 0.",
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="The root of the draws.")
@click.option(
    "--weights", type=click.Path(dir_okay=False), help="These weights instead of the block's."
)
@click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="A dimension of the model.")
@CONST
@click.option(
    "--bits",
    type=Count(2, 100000),
    default=256,
    show_default=True,
    help="MPFR precision of the reference interpreter.",
)
@click.option(
    "--cache/--no-cache",
    default=True,
    show_default=True,
    help="Each next token from the cached keys and values of the tokens before it (derived"
    " from the function's causal structure), or from the whole window again.",
)
@backend_options
def serve(
    file,
    prompt,
    prompt_file,
    tokens,
    temperature,
    seed,
    weights,
    dims,
    consts,
    bits,
    cache,
    **native,
) -> None:
    """Generate text with FILE's `inference serve`: the prompt encoded with the block's
    vocabulary, each next token from the generation function's logits at the last position
    of the text's last T tokens; the text printed as it comes, then tokens per second on
    standard error (docs/serve.md)."""
    from presk_core.data import DataError
    from presk_core.run import RunError
    from presk_core.text import decode, encode
    from presk_syntax.pipeline import Context

    from presk_cli.pipeline import PIPELINE

    ctx = Context(consts=_consts(consts), check=True)
    sources = ctx.sources
    try:
        elaborated = PIPELINE.run("elab", file, ctx)
    except DiagnosticError as e:
        _fail(e, sources)
    emit(ctx.diagnostics, sources)
    if any(d.is_error for d in ctx.diagnostics):
        sys.exit(1)
    serves = elaborated.serves
    if not serves:
        _stop(ServeError("E7020", f"`{file}` has no `inference serve` to serve"), sources)
    if prompt_file is not None:
        if prompt:
            raise click.BadParameter(
                "give --prompt or --prompt-file, not both", param_hint="--prompt"
            )
        try:
            prompt = read_prompt(prompt_file)
        except ServeError as e:
            _stop(e, sources)
    if not prompt:
        raise click.BadParameter(
            "the text to continue: at least one character",
            param_hint="--prompt-file" if prompt_file is not None else "--prompt",
        )
    try:
        block = serves[0]
        try:
            core = PIPELINE.run(RUN, file, ctx, start=elaborated, first="elab")
        except DiagnosticError as e:
            _fail(e, sources)
        folder = os.path.dirname(file)
        fn = core.function(block.generate)
        ids_type = fn.params[1].type
        vocab = load_vocabulary(
            os.path.normpath(os.path.join(folder, block.vocabulary)), ids_type.bound.constant
        )
        path = (
            weights
            if weights is not None
            else os.path.normpath(os.path.join(folder, block.weights))
        )
        shown = on_terminal("serve")
        shown.phase(f"reading the weights `{os.path.basename(path)}`")
        theta, fixed = load_weights(core, block.model, path, _dims(dims))
        batch, seq = (a.length for a in ids_type.shape.axes)
        known = {**fixed, **{n: 1 for n in batch.names}}
        missing = sorted((batch.names | seq.names) - set(known))
        if missing:
            raise ServeError("E7021", f"the window's length needs --dim {missing[0]}=N")
        window = seq.value(known)
        call_dims = {d: known[d] for d in fn.dims if d in known}
        try:
            ids = encode(prompt, vocab, "the prompt", os.path.basename(block.vocabulary))
        except DataError as e:
            raise ServeError(e.code, str(e)) from None
        count = tokens or block.max_tokens or TOKENS
        if count > MAX_TOKENS:  # only the block's can be: --tokens is checked as a flag
            raise ServeError("E7023", f"the block's `max_tokens` is {count}, at most {MAX_TOKENS}")
        heat = float(temperature if temperature is not None else (block.temperature or 0))
        why = _temperature(heat, "the block's `temperature`")
        if why is not None:
            raise ServeError("E7023", why)
        options = (native["backend"], native["realize"], native["threads"])
        cached, why, logits = None, "--no-cache", None
        if cache and str(options[1]).startswith("@"):
            why = "a realization file types the sites of the whole-window function"
        elif cache:
            shown.phase(f"deriving `{fn.name}` with a cache on the {options[0]} backend")
            found = cached_function(
                core, fn.name, theta, window, call_dims, options, bits, len(ids), count
            )
            cached, why = (None, found) if isinstance(found, str) else (found, None)
        if cached is None:  # (with a cache, a window that slides is the whole fill's)
            shown.phase(f"preparing `{fn.name}` on the {options[0]} backend")
            logits = logits_function(core, fn.name, theta, window, call_dims, options, bits)
        shown.end_phase()

        def shown(token: int) -> None:
            sys.stdout.write(decode([token], vocab))
            sys.stdout.flush()

        sys.stdout.write(prompt)
        sys.stdout.flush()
        start = time.perf_counter()
        made = generate(logits, ids.tolist(), window, count, heat, seed, shown, cached)
        seconds = time.perf_counter() - start
        sys.stdout.write("\n")
        sys.stdout.flush()
    except ServeError as e:
        _stop(e, sources)
    except NativeError as e:
        native_fail(e, sources)
    except RunError as e:
        _stop(ServeError(e.code, str(e)), sources)
    backend = options[0] if options[0] == "interp" else f"{options[0]} {options[1]}"
    threads = f", {options[2]} threads" if options[0] == "native" and options[2] > 1 else ""
    how = "greedy" if heat == 0 else f"temperature {heat:g}, seed {seed}"
    rate = len(made) / seconds if seconds > 0 else float("inf")
    kept = "cache" if cached is not None else "no cache"
    click.echo(
        f"presk serve: {len(made)} tokens in {seconds:.3f} s, {rate:.1f} tokens/s"
        f" ({backend}{threads}, {how}, window {window}, {kept}; compiling excluded)",
        err=True,
    )
    if cached is None and why != "--no-cache":
        click.echo(f"presk serve: no cache: {why}", err=True)


__all__ = ["ServeError", "generate", "load_vocabulary", "load_weights", "serve", "token_keys"]
