"""`presk export FILE --target c --serve -o DIR`: the generation loop of `presk serve` as a C
program beside the exported model (presk_cback.export_serve, docs/export-c.md).

The block's generation function is exported as `--entry` would export it, at B = 1 and the
window T its weights fix (as presk serve reads them), on the weights as its θ; beside it
`generate.c` (./generate: the loop), `weights.psk.d` (a copy of the weights: the program
stands alone), and `conformance/serve.sh` with what presk serve prints on a prompt of the
vocabulary, greedy and sampled, which `make check` compares with ./generate's output byte
for byte. The codes are presk serve's for the block, its weights and its vocabulary
(E7020–E7023, E7009, E7004), E7171–E7172 for the program's own.
"""

from __future__ import annotations

import os
from pathlib import Path

from presk_cli.export_c import ExportCError

CHECK_TOKENS = 24  # at most this many tokens a conformance run generates (T + 4 below it)
CHECK_TEMPERATURE = 1.0  # and the temperature of its sampled run, seed 0


def conformance_prompt(vocab: list[str], window: int) -> str:
    """A prompt of the vocabulary for the conformance runs: its characters from the second
    on (the first is often a pad or a space), half a window long, so the generated tokens
    make the window slide."""
    n = max(1, min(window // 2, len(vocab) - 1))
    return "".join(vocab[1 : 1 + n]) if len(vocab) > 1 else vocab[0]


def export_serve(
    file: str,
    ctx,
    dims: dict,
    seed: int,
    realize: str,
    threads: int,
    out: str,
    weights: str | None,
    plan: str | None,
    given: bool,
) -> str:
    """Write the model and its generation loop into `out`; the summary lines."""
    import numpy as np
    from presk_cback.export_serve import generate_c
    from presk_core.data import DataError, read_reals
    from presk_core.normal_c import link
    from presk_core.text import decode, encode
    from presk_syntax.diagnostics import DiagnosticError

    from presk_cli.export_c import check_out, export_c, makefile
    from presk_cli.native import NativeError
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_cli.serve import (
        TOKENS,
        ServeError,
        _temperature,
        generate,
        load_vocabulary,
        load_weights,
        logits_function,
    )

    check_out(out)
    elaborated = PIPELINE.run("elab", file, ctx)
    errors = [d for d in ctx.diagnostics if d.is_error]
    if errors:
        raise DiagnosticError(errors)
    if not elaborated.serves:
        raise ServeError("E7020", f"`{file}` has no `inference serve` to serve")
    block = elaborated.serves[0]
    core = PIPELINE.run(RUN, file, ctx, start=elaborated, first="elab")
    folder = os.path.dirname(file)
    fn = core.function(block.generate)
    ids_type = fn.params[1].type
    vocab = load_vocabulary(
        os.path.normpath(os.path.join(folder, block.vocabulary)), ids_type.bound.constant
    )
    path = weights or os.path.normpath(os.path.join(folder, block.weights))
    theta, fixed = load_weights(core, block.model, path, dims)
    batch, seq = (a.length for a in ids_type.shape.axes)
    known = {**fixed, **dims, **{n: 1 for n in batch.names}}
    missing = sorted((batch.names | seq.names) - set(known))
    if missing:
        raise ServeError("E7021", f"the window's length needs --dim {missing[0]}=N")
    window = seq.value(known)
    call_dims = {d: known[d] for d in fn.dims if d in known}
    tokens = block.max_tokens or TOKENS
    heat = float(block.temperature or 0)
    why = _temperature(heat, "the block's `temperature`")
    if why is not None:
        raise ServeError("E7023", why)
    mpfr = link()
    if mpfr is None:
        raise ExportCError(
            "E7172",
            "the generation loop samples in MPFR, which cannot be loaded here (gmpy2's; or"
            " PRESK_INTERP_C=0)",
        )
    # what presk serve prints, on the native backend (whose bits the model's are)
    prompt = conformance_prompt(vocab, window)
    count = min(window + 4, CHECK_TOKENS)
    effective = realize
    if plan is not None:
        from presk_cli.plans import PlanError, plan_realize

        try:
            effective = plan_realize(plan, realize, given)[1]
        except PlanError as e:
            raise NativeError(e.code, str(e), e.help) from None
    options = ("native", effective, threads)
    logits = logits_function(core, fn.name, theta, window, call_dims, options, 256)
    ids = encode(prompt, vocab).tolist()
    said = []
    for heat_i in (0.0, CHECK_TEMPERATURE):
        made = generate(logits, ids, window, count, heat_i, 0, lambda _: None)
        said.append(prompt + decode(made, vocab) + "\n")

    def files(schedule, program, leaves_in, written) -> dict:
        held = np.concatenate([np.asarray(x, dtype=np.float64).reshape(-1) for x in leaves_in[:-1]])
        try:
            stored = read_reals(path)
        except DataError as e:
            raise ServeError(e.code, f"the weights: {e}") from None
        if held.tobytes() != np.asarray(stored, dtype=np.float64).tobytes():
            raise ExportCError(
                "E7171",
                f"the inputs of `{fn.name}` are not the leaves of `{path}` in their order:"
                " ./generate would read the weights at the wrong places",
            )
        try:
            source = generate_c(
                schedule,
                program.entry,
                program.cname,
                vocab,
                window,
                (tokens, heat),
                effective,
            )
        except ValueError as e:
            raise ExportCError("E7171", f"the generation loop of `{fn.name}`: {e}") from None
        readme = written["README.md"] + SERVE_README.format(
            model=block.model, window=window, vocab=len(vocab), tokens=tokens, n=count
        )
        return {
            "README.md": readme,
            "generate.c": source,
            "weights.psk.d": Path(path),  # copied
            "Makefile": makefile(program.split > 0, program.mpfr or mpfr, serve=True),
            "conformance/prompt.txt": prompt,
            "conformance/greedy.txt": said[0],
            "conformance/sampled.txt": said[1],
            "conformance/serve.sh": SERVE_CHECK.format(n=count, t=f"{CHECK_TEMPERATURE:g}"),
        }

    line = export_c(core, fn.name, call_dims, seed, realize, threads, out, path, plan, given, files)
    how = "greedy" if heat == 0 else f"temperature {heat:g}"
    return (
        f"{line}\npresk export: the generation loop of `inference serve` ({block.model},"
        f" window {window}, {len(vocab)} tokens, {tokens} a run by default, {how}) into"
        f" {os.path.join(out, 'generate')}, with the weights beside it; `{out}/generate"
        " PROMPT` prints what presk serve prints"
    )


SERVE_README = """
## The generation loop (`presk export --serve`)

`./generate [-n N] [-t T] [-s SEED] [-w WEIGHTS] (PROMPT | -f FILE | -i ID,ID,...)` (built
by `make generate`) is `presk serve`'s loop over this model ({model}, a window of {window}
tokens of {vocab}): the last {window} tokens of the text so far, padded with token 0, give
the logits at the last real position; the next token is their argmax (`-t 0`) or
presk_core.random.sample's draw from softmax(logits / T) with the key of token i
`fold_in(fold_in_name(root_key(SEED), "serve"), i)`, in MPFR at 256 bits (linked: the
Makefile's `MPFR_CFLAGS`, `MPFR_LIBS`). It reads θ from `weights.psk.d` beside it (`-w`
another of the same size), generates {tokens} tokens by default (`-n`), and prints the
prompt, each token as it comes and a newline: what `presk serve` prints on the native
backend. `make check` also runs it on `conformance/prompt.txt` for {n} tokens, greedy and at
temperature 1 with seed 0, and compares with what presk serve printed
(`conformance/greedy.txt`, `sampled.txt`).
"""

SERVE_CHECK = """\
#!/bin/sh
# Runs the generation loop on the conformance prompt, greedy and sampled, and compares what
# it prints with what presk serve printed (--backend native), byte for byte.
cd "$(dirname "$0")/.." || exit 1
./generate -n {n} -t 0 -f conformance/prompt.txt > out.txt 2>/dev/null || exit 1
cmp -s out.txt conformance/greedy.txt || {{ echo "the generation loop's greedy tokens are not presk serve's"; exit 1; }}
./generate -n {n} -t {t} -s 0 -f conformance/prompt.txt > out.txt 2>/dev/null || exit 1
cmp -s out.txt conformance/sampled.txt || {{ echo "the generation loop's sampled tokens are not presk serve's"; exit 1; }}
echo "the generation loop prints presk serve's tokens, greedy and sampled ({n} tokens, temperature {t}, seed 0)"
"""


__all__ = ["export_serve"]
