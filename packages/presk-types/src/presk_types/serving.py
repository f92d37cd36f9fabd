"""The `inference serve` block: checked against its schema (docs/serve.md).

```
inference serve {
  model       = MiniGPT            -- a module
  weights     = "ckpt/final.psk.d" -- a one-sample .psk.d of `params model`, relative to the file
  generate    = MiniGPT.apply      -- fn (θ : params model, ids : idx[V][batch: B, seq: T])
                                   --      -> ℝ[batch: B, seq: T, V]: a window's logits
  vocabulary  = "data/vocab.json"  -- a JSON array of V one-character strings
  max_tokens  : nat = 64           -- optional: how many tokens `presk serve` generates
  temperature : f64 = 0.8          -- optional: 0 is greedy decoding
}
```

The checker reads the block and the generation function's signature; the files it names
are opened by `presk serve` (presk_cli.serve), not by `presk check`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from presk_syntax import ast as A
from presk_syntax.diagnostics import Diagnostic, Label, Severity
from presk_syntax.span import Span

from presk_types.check import Checker
from presk_types.elab import ConstError, FileEnv, lookup_module
from presk_types.numbers import check_double, check_natural, literal_value
from presk_types.types import Idx, ParamsT, Real

CODE = "E1012"
FIELDS = ("model", "weights", "generate", "vocabulary", "max_tokens", "temperature")
REQUIRED = ("model", "weights", "generate", "vocabulary")


@dataclass
class Serve:
    """A checked `inference serve`: names as the core program has them (`MiniGPT`,
    `MiniGPT.apply`), paths relative to the main file's folder."""

    model: str
    generate: str
    weights: str
    vocabulary: str
    max_tokens: int | None
    temperature: Fraction | None
    span: Span


def _error(message: str, span: Span, text: str = "") -> Diagnostic:
    return Diagnostic(CODE, Severity.ERROR, message, (Label(span, text),))


def _parts(e: A.Expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(e, A.FieldAccess):
        parts.insert(0, e.name)
        e = e.object
    return [e.name, *parts] if isinstance(e, A.Var) else None


def _function(e: A.Expr, env: FileEnv, checker: Checker):
    """The checked function `f`, `M.f` or `lib.M.f` names, or None."""
    parts = _parts(e)
    if parts is None:
        return None
    if len(parts) == 1 and parts[0] in env.fns:
        return checker.info(env, env.fns[parts[0]], None)
    if len(parts) >= 2:
        module = lookup_module(A.QualName(tuple(parts[:-1]), e.span), env)
        if module is not None and parts[-1] in module.fns:
            return checker.info(module.file, module.fns[parts[-1]], module)
        owner = env
        for name in parts[:-1]:
            owner = owner.imports.get(name) if owner is not None else None
        if owner is not None and parts[-1] in owner.fns:
            return checker.info(owner, owner.fns[parts[-1]], None)
    return None


def _signature(fn, model: str) -> str | None:
    """What is wrong with the generation function's signature, or None."""
    params = [t for _, t in fn.params]
    if len(params) != 2 or not isinstance(params[0], ParamsT):
        return f"it must take `params {model}` and a window of tokens"
    if params[0].instance.name != model:
        return f"its parameters are `{params[0]}`, not `params {model}`"
    ids, out = params[1], fn.result
    if not isinstance(ids, Idx) or ids.shape.prefix or len(ids.shape.axes) != 2:
        return f"its window is `{ids}`, not `idx[V][batch: B, seq: T]`"
    if ids.shape.axes[0].name != "batch":
        return f"its window `{ids}` has no leading `batch` axis"
    if not isinstance(out, Real) or out.shape.prefix or len(out.shape.axes) != 3:
        return f"it returns `{out}`, not the logits `ℝ[batch: B, seq: T, V]`"
    same = all(
        a.length == b.length for a, b in zip(out.shape.axes[:2], ids.shape.axes, strict=True)
    )
    if not same or out.shape.axes[2].length != ids.bound:
        return f"it returns `{out}` for a window `{ids}`: the logits must be `[batch, seq, V]`"
    return None


def _number(f: A.Field, kind: str) -> tuple[object, Diagnostic | None]:
    value = f.value
    try:  # a machine number its type holds (presk_types.numbers)
        if kind == "nat":
            if isinstance(value, A.IntLit) and value.value >= 1:
                return check_natural(literal_value(value), value.span, f"`{f.name}`"), None
            return None, _error(f"`{f.name}` is a natural number from 1", f.span, "not of its form")
        if isinstance(value, A.IntLit | A.FloatLit):
            check_double(literal_value(value), value.span, "f64")
            return Fraction(literal_value(value)), None
    except ConstError as e:
        return None, e.diagnostic
    return None, _error(f"`{f.name}` is a number (0 for greedy decoding)", f.span)


def check_serve(block: A.Serve, env: FileEnv, checker: Checker) -> Serve | list[Diagnostic]:
    """The serve of an `inference serve` block, or the diagnostics that say what is wrong."""
    fields: dict[str, A.Field] = {}
    diags: list[Diagnostic] = []
    for f in block.fields:
        name = "checkpoint" if isinstance(f, A.Checkpoint) else f.name
        if name not in FIELDS:
            diags.append(
                _error(
                    f"unknown field `{name}` in an inference serve",
                    f.span,
                    f"the fields are {', '.join(sorted(FIELDS))}",
                )
            )
        elif name in fields:
            diags.append(_error(f"`{name}` is given twice", f.span, "again"))
        else:
            fields[name] = f
    missing = [n for n in REQUIRED if n not in fields]
    if missing:
        diags.append(_error(f"an inference serve needs `{missing[0]}`", block.span, "missing"))
    for name, f in fields.items():  # `weights : "w.psk.d"` parses as a type and no value
        if not isinstance(f, A.Checkpoint) and f.value is None:
            diags.append(_error(f"`{name}` has no value", f.span, f"written `{name} = …`"))
    if diags:
        return diags
    model = fields["model"].value
    parts = _parts(model)
    info = lookup_module(A.QualName(tuple(parts), model.span), env) if parts else None
    if info is None:
        return [_error("`model` must name a module", model.span, "not a module")]
    paths = {}
    for name in ("weights", "vocabulary"):
        value = fields[name].value
        if not isinstance(value, A.StrLit):
            return [_error(f'`{name}` is a file: `{name} = "PATH"`', value.span, "not a string")]
        paths[name] = value.value
    generate = fields["generate"].value
    fn = _function(generate, env, checker)
    if fn is None or not fn.ok:
        return [_error("`generate` must name a checked function", generate.span)]
    wrong = _signature(fn, info.decl.name)
    if wrong is not None:
        return [_error(f"`{fn.key}` cannot generate: {wrong}", generate.span, "the function")]
    numbers = {}
    for name, kind in (("max_tokens", "nat"), ("temperature", "f64")):
        if name in fields:
            numbers[name], problem = _number(fields[name], kind)
            if problem is not None:
                diags.append(problem)
    if diags:
        return diags
    return Serve(
        info.decl.name,
        fn.key,
        paths["weights"],
        paths["vocabulary"],
        numbers.get("max_tokens"),
        numbers.get("temperature"),
        block.span,
    )


def check_serves(env: FileEnv, checker: Checker) -> tuple[list[Serve], list[Diagnostic]]:
    """The main file's `inference serve` blocks: at most one."""
    blocks = [d for d in env.ast.decls if isinstance(d, A.Serve)]
    serves: list[Serve] = []
    diags: list[Diagnostic] = []
    for i, block in enumerate(blocks):
        if i:
            diags.append(_error("a file has one inference serve", block.span, "a second one"))
            continue
        got = check_serve(block, env, checker)
        if isinstance(got, Serve):
            serves.append(got)
        else:
            diags.extend(got)
    return serves, diags


__all__ = ["Serve", "check_serve", "check_serves"]
