"""A file's `inference serve` in PyTorch: `serve.py` (`presk export --serve`, docs/serve.md).

serve.py is presk serve's loop over the exported model: the weights read from the block's
`.psk.d` (a reader of its own: the script needs torch and numpy, not presk) into the
model's parameters, the vocabulary from its JSON array, the window of the last T tokens
padded on the right, the logits at its last real position; greedy decoding is
`torch.argmax` (the first of equal logits, as presk serve), sampling `torch.multinomial`
from softmax(logits / temperature) with a seeded `torch.Generator`. Greedy tokens in
float64 are presk serve's from the same weights; sampled ones are not presk's draws (torch
has no Threefry): the same distribution, and a seed fixes them for one torch on one device.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from presk_core.ir import Function
from presk_core.run import EntryError
from presk_syntax.diagnostics import DiagnosticError
from presk_types.driver import checked
from presk_types.serving import Serve

from presk_export.pyexpr import ExportError, identifier
from presk_export.pyformat import py_literal
from presk_export.pytorch import TEMPLATES, Export

# the names serve.py defines or binds; an imported class or function of the same name is
# imported as `name_`
SERVE_NAMES = {
    "argparse", "json", "struct", "sys", "time", "Path", "np", "torch", "nn", "HERE",
    "WEIGHTS", "VOCABULARY", "MODEL", "LEAVES", "SIZE0", "SIZE_STEP", "MAX_TOKENS",
    "TEMPERATURE", "MAGIC", "VERSION", "FIXED", "ServeError", "read_weights",
    "read_vocabulary", "state_of", "_place", "build_model", "logits_of", "generate", "main",
    "_positive", "model", "ids", "dims", "window", "text", "tokens", "F", "serve_step",
    "Cache", "CACHES", "STEP_INPUTS", "cache", "serve_fill", "FILL_INPUTS",
}  # fmt: skip


def serve_of(export: Export) -> Serve:
    """The main file's checked `inference serve`."""
    done = checked(export.program)
    errors = [d for d in done.diagnostics if d.is_error]
    if errors:
        raise DiagnosticError(errors)
    if not done.serves:
        name = os.path.basename(export.program.main.path)
        raise EntryError(f"`{name}` has no `inference serve` to export", usage=True)
    return done.serves[0]


def serve_files(export: Export, out: str | None = None) -> dict[str, str]:
    """`serve.py` of the main file's `inference serve`, naming the weights and the
    vocabulary relative to `out` (the export's folder) when given."""
    block = serve_of(export)
    layout = export.core.layout(block.model)
    ctor = export.ctor_dims(block.model)
    if len(ctor) > 1:
        raise ExportError(
            f"serve.py builds `{block.model}` from its weights' size, and its constructor"
            f" takes {', '.join(ctor)}: one dimension at most"
        )

    def size(dims: dict[str, int]) -> int:
        total = 0
        for leaf in layout.leaves:
            n = 1
            for lin in [c for _, c in leaf.stack] + [a.length for a in leaf.type.shape.axes]:
                n *= lin.value(dims)
            total += n
        return total

    names = {n for leaf in layout.leaves for a in leaf.type.shape.axes for n in a.length.names}
    if names - set(ctor):
        raise ExportError(f"the parameters of `{block.model}` depend on {sorted(names)}")
    d = ctor[0] if ctor else None
    s0 = size({d: 0} if d else {})
    step = size({d: 1}) - s0 if d else 0
    owner = export.owner.get(block.model, export.program.main.path)
    module = export.modules[owner]
    model_py = identifier(block.model)
    model_here = f"{model_py}_" if model_py in SERVE_NAMES else model_py
    imports = [
        f"from {module} import {model_py}" + ("" if model_here == model_py else f" as {model_here}")
    ]
    head, _, method = block.generate.rpartition(".")
    if head == block.model:  # a function of the model: forward, or a method
        call = "model(ids)" if method == "apply" else f"model.{identifier(method)}(ids)"
    else:
        fn_owner = export.modules[export.owner.get(block.generate, export.program.main.path)]
        fn_py = identifier(block.generate)
        fn_here = f"{fn_py}_" if fn_py in SERVE_NAMES else fn_py
        imports.append(
            f"from {fn_owner} import {fn_py}" + ("" if fn_here == fn_py else f" as {fn_here}")
        )
        call = f"{fn_here}(model, ids)"
    seq = export.core.function(block.generate).params[1].type.shape.axes[1].length
    if not seq.is_const and seq.names != {d}:
        raise ExportError(f"the window of `{block.generate}` is {seq} tokens: not the model's {d}")
    leaves = [(leaf.path, bool(leaf.stack)) for leaf in layout.leaves]
    text = TEMPLATES.get_template("serve.py.j2").render(
        step=cached_step(export, block, d),
        source=os.path.basename(export.program.main.path),
        model_name=block.model,
        generate_name=block.generate,
        imports=imports,
        build=f"{model_here}({'window' if d else ''})",
        call=call,
        weights=py_literal(export.beside(block.weights, out)),
        weights_shown=block.weights,
        vocabulary=py_literal(export.beside(block.vocabulary, out)),
        vocabulary_shown=block.vocabulary,
        leaves=py_literal(leaves),
        size0=s0,
        size_step=step,
        dim=repr(d),  # in a comment: as Python prints it
        window=seq.constant if seq.is_const else None,
        max_tokens=block.max_tokens or 32,
        temperature=py_literal(float(block.temperature or 0)),
    )
    return {"serve.py": text}


_COMMENT = re.compile(r"  # .*$")


def cached_step(export: Export, block: Serve, dim: str | None) -> dict | None:
    """The step of the generation function with a cache (presk_core.prefix: row t from the
    cached keys and values), as the lines of a Python function, when the prefix analysis
    derives one and its code does not depend on the window's length T: derived at two
    lengths, the same statements (the type comments aside). None otherwise: serve.py then
    has the whole-window loop only. With it, under `fill`, the fill (the function over a
    window, returning its logits and the cached values' rows) with its causal masks as
    arguments, when its code does not depend on T either: serve.py fills the prompt's
    positions in one call with it (else one step each)."""
    from presk_core.flatten import FlattenError, flatten
    from presk_core.prefix import NoCache, incremental
    from presk_core.specialize import SpecializeError, specialize
    from presk_core.unroll import unroll_stack

    from presk_export.pytorch import FileWriter

    fn = export.core.function(block.generate)
    seq = fn.params[-1].type.shape.axes[1].length
    batch = fn.params[-1].type.shape.axes[0].length
    if not batch.names and batch.constant != 1 or dim is None or seq.names != {dim}:
        return None
    lows = dict(export.core.lowers)
    lengths = (max(lows.get(dim, 0), 2) + 3, max(lows.get(dim, 0), 2) + 4)
    writer = FileWriter(export, export.program.files[0])

    def written(f) -> tuple[list[str], list[str]] | None:
        names = [_py_name(p.name or f"x{i}") for i, p in enumerate(f.params)]
        f = replace(
            f, params=tuple(replace(p, name=m) for p, m in zip(f.params, names, strict=True))
        )
        try:
            lines = writer.body(f, {}, [(p.name, p.type) for p in f.params])
        except (ExportError, KeyError, TypeError, ValueError):  # not in PyTorch
            return None
        return [_COMMENT.sub("", line) for line in lines if not line.startswith("#")], names

    found, fills = [], []
    for n in lengths:
        try:
            dims = {d: 1 for d in batch.names} | {dim: n}
            flat = flatten(unroll_stack(specialize(export.core, block.generate, dims)))
            head = flat.functions[0]
            inc = incremental(flat, head.name, len(head.params) - 1, 1)
        except (NoCache, FlattenError, SpecializeError, KeyError):
            return None
        step = written(inc.program.function(inc.step))
        if step is None:  # no step in PyTorch: no cache
            return None
        code, names = step
        caches = [  # T for the rows' length alone (another axis may be as long: H heads)
            [*shape[:axis], "T", *shape[axis + 1 :], axis] for shape, axis in inc.caches
        ]
        inputs = [
            (kind, head.params[rest[0]].name.removeprefix("θ."), rest[1])
            if kind == "leaf"
            else (kind, "T")
            if kind in ("mask", "onehot")
            else (kind, *rest)
            for kind, *rest in inc.inputs
        ]
        found.append((code, caches, inputs, names))
        fill, masks = _masks_as_arguments(inc.program.function(inc.fill))
        fill_code = written(fill)
        fills.append(
            None
            if fill_code is None
            else (*fill_code, inputs[: len(head.params)] + [("tril", "T")] * masks)
        )
    if found[0] != found[1]:
        return None
    code, caches, inputs, names = found[0]
    out = {
        "params": names,
        "lines": code,
        "caches": py_literal([tuple(c) for c in caches]),
        "inputs": py_literal([tuple(i) for i in inputs]),
        "fill": None,
    }
    if fills[0] is not None and fills[0] == fills[1]:
        lines, params, fill_inputs = fills[0]
        out["fill"] = {
            "params": params,
            "lines": lines,
            "inputs": py_literal([tuple(i) for i in fill_inputs]),
        }
    return out


def _masks_as_arguments(fill: Function) -> tuple[Function, int]:
    """The fill with each causal mask an argument (after the others, as many as the masks):
    the window's length then appears in no statement."""
    masks = tuple(ins.out for ins in fill.body if ins.op == "causal_mask")
    body = tuple(ins for ins in fill.body if ins.op != "causal_mask")
    return replace(fill, params=fill.params + masks, body=body), len(masks)


def _py_name(name: str) -> str:
    return identifier(name.removeprefix("θ.").replace(".", "_"))


__all__ = ["cached_step", "serve_files", "serve_of"]
