"""`--weights CKPT` on `presk run` and `presk bench`: the entry's parameter tree bound from a
checkpoint, a one-sample `.psk.d` of `params M` as `presk train` writes it (docs/cli.md).

The argument bound is the entry's one argument of type `params M` for the checkpoint's M;
the checkpoint is read and checked leaf by leaf as `presk serve` reads its weights
(presk_cli.serve.load_weights). Every mismatch is E7060 naming the path (a file that
cannot be read keeps its data code, E7004 to E7006).
"""

from __future__ import annotations

from presk_core.run import Entry, EntryError
from presk_types.types import ParamsT

READING = {"E7004", "E7005", "E7006"}  # the file itself: its data diagnostics


def _argument(core, entry: Entry, path: str, model: str) -> tuple[str, ParamsT]:
    """The entry's argument that the checkpoint's `params model` binds."""
    trees = [(p.name, p.type) for p in entry.function.params if isinstance(p.type, ParamsT)]
    if not trees:
        raise EntryError(
            f"`{path}`: `{entry.shown}` takes no parameter tree for the weights to bind",
            code="E7060",
        )
    matching = [(n, t) for n, t in trees if _layout(core, t) is not None]
    matching = [(n, t) for n, t in matching if _layout(core, t).name == model]
    if len(matching) != 1:
        took = ", ".join(f"`{n} : {t}`" for n, t in trees)
        what = "takes none" if not matching else "takes more than one"
        raise EntryError(
            f"`{path}` holds a `params {model}`, and `{entry.shown}` {what} (its trees: {took})",
            code="E7060",
        )
    name, t = matching[0]
    if t.instance.stack is not None:
        raise EntryError(
            f"`{path}`: `{name} : {t}` is a stacked tree; the weights bind a module's tree",
            code="E7060",
        )
    return name, t


def _layout(core, t: ParamsT):
    inst = t.instance.inner if t.instance.stack is not None else t.instance
    return core.layout(inst.module)


def _model(path: str) -> str:
    from presk_core.data import DataError, read_header

    try:
        text = read_header(path).type_text
    except DataError as e:
        raise EntryError(f"the weights: {e}", code=e.code) from None
    if not text.startswith("params "):
        raise EntryError(
            f"`{path}` holds samples of `{text}`, not the weights of a `params M`",
            code="E7060",
        )
    return text.removeprefix("params ")


def bind_weights(core, entry: Entry, path: str, bits: int) -> dict[str, object]:
    """{argument name: θ} for `entry` from the checkpoint at `path`, θ's reals rounded to
    `bits` (the interpreter's values; the kernels read the same doubles). The module's
    dimensions are its arguments at the entry's dimensions (`--dim`); the checkpoint's
    leaves must have the shapes they give."""
    from presk_core.run import interp_real

    from presk_cli.serve import ServeError, load_weights

    model = _model(path)
    name, t = _argument(core, entry, path, model)
    layout = _layout(core, t)
    known = {
        d: arg.value(entry.dims)
        for d, arg in zip(layout.dims, t.instance.args, strict=False)
        if all(n in entry.dims for n in arg.names)
    }
    try:
        theta, _ = load_weights(core, layout.name, path, known)
    except ServeError as e:
        raise EntryError(str(e), code=e.code if e.code in READING else "E7060") from None
    return {name: {p: interp_real(v, bits) for p, v in theta.items()}}


__all__ = ["bind_weights"]
