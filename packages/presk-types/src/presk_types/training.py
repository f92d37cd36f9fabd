"""The `training run` block: checked against its schema, and the `-- training --` summary.

```
training run {
  model     = t.Tower                     -- a module
  objective = loss                        -- fn (θ : params model, [key : key,] batch : (…)) -> ℝ[]
  optimizer = adamw                       -- an `optimizer` block of the program
  data      = stream "data/pairs.psk.d" |> shuffle(seed = 3) |> batch(B = 8)
  epochs    : nat = 10
  checkpoint every 50 steps to "ckpt/"
}
```

The sample type is the objective's batch type without its `batch` axes. Opening the
data file and matching its sample type (and binding B from it) come with `.psk.d`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from presk_syntax import ast as A
from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Label, Severity
from presk_syntax.span import Span

from presk_types.check import Checker, FnInfo
from presk_types.constants import keep
from presk_types.elab import (
    ConstError,
    FileEnv,
    eval_const,
    file_dim,
    lookup_module,
    type_from_text,
)
from presk_types.numbers import NAT_MAX, SEED_LIMIT, check_double, check_natural, literal_value
from presk_types.presburger import DimContext, check_assignment
from presk_types.types import Bool, Idx, KeyT, ParamsT, Real, Shape, TupleT, Type

FIELDS = {"model", "objective", "optimizer", "data", "epochs"}
REQUIRED = ("model", "objective", "optimizer", "data")


@dataclass
class Run:
    """A checked training run."""

    model: str
    objective: FnInfo
    optimizer: str
    data: str
    shuffle: int | None
    batch: dict[str, int]
    epochs: int | None
    checkpoint: A.Checkpoint | None
    batch_type: Type
    sample_type: Type
    diagnostics: list[Diagnostic] = field(default_factory=list)
    span: Span | None = None  # the `data` field
    file_type: str | None = None  # what the data file holds, once opened
    bound: dict[str, int] = field(default_factory=dict)  # dimensions the file binds (T = 256)

    def dims(self) -> dict[str, int]:
        return {**self.batch, **self.bound}


def match_sample(expected: Type, held: Type, bound: dict[str, int] | None = None) -> dict | None:
    """The dimensions that make the objective's sample type the file's, or None."""
    bound = dict(bound or {})
    match expected, held:
        case TupleT(es), TupleT(hs) if len(es) == len(hs):
            for e, h in zip(es, hs, strict=True):
                bound = match_sample(e, h, bound)
                if bound is None:
                    return None
            return bound
        case (Real(se), Real(sh)) | (Bool(se), Bool(sh)) | (Idx(_, se), Idx(_, sh)):
            if isinstance(expected, Idx) and _length(expected.bound, held.bound, bound) is None:
                return None
            if se.prefix or sh.prefix or se.rank != sh.rank:
                return None
            for x, y in zip(se.axes, sh.axes, strict=True):
                if (x.name or y.name) and x.name != y.name:
                    return None
                if _length(x.length, y.length, bound) is None:
                    return None
            return bound
    return None


def _length(e, h, bound: dict[str, int]) -> dict | None:
    if not h.is_const:
        return None
    if e.is_const:
        return bound if e.constant == h.constant else None
    if len(e.coeffs) == 1 and e.constant == 0 and e.coeffs[0][1] == 1:
        name = e.coeffs[0][0]
        if bound.get(name, h.constant) != h.constant:
            return None
        bound[name] = h.constant
        return bound
    return None


def _error(message: str, span: Span, text: str = "") -> Diagnostic:
    return Diagnostic("E1010", Severity.ERROR, message, (Label(span, text),))


def without_batch(t: Type) -> Type:
    """The type of one sample: each tensor's `batch` axis removed."""
    match t:
        case TupleT(elements):
            return TupleT(tuple(without_batch(e) for e in elements))
        case Real(s) | Bool(s) | Idx(_, s):
            axes = tuple(a for a in s.axes if a.name != "batch")
            return (
                type(t)(Shape(s.prefix, axes))
                if not isinstance(t, Idx)
                else Idx(t.bound, Shape(s.prefix, axes))
            )
    return t


def _natural(
    e: A.Expr, env: FileEnv, what: str, limit: int = NAT_MAX + 1, kind: str = "nat"
) -> int:
    """A natural written as a constant expression (`3`, `2^10`, `S`), below `limit`."""
    return check_natural(eval_const(e, env), e.span, what, limit, kind)


def _pipeline(
    e: A.Expr, env: FileEnv
) -> tuple[str | None, int | None, dict[str, int], list[Diagnostic]]:
    """`stream "f" |> shuffle(seed = s) |> batch(B = n)`: the file, the seed, the batch dims."""
    stages: list[A.Expr] = []
    while isinstance(e, A.Binary) and e.op == "|>":
        stages.insert(0, e.right)
        e = e.left
    diags: list[Diagnostic] = []
    if not isinstance(e, A.Stream):
        return None, None, {}, [_error('`data` starts with `stream "FILE"`', e.span)]
    seed, batch = None, {}
    for stage in stages:
        match stage:
            case A.Call(A.Var("shuffle"), (A.KeywordArg("seed", value),)):
                try:  # a seed is a 64-bit integer (presk_core.random.root_key)
                    seed = _natural(value, env, "the seed", SEED_LIMIT, "seed")
                except ConstError as err:
                    keep(diags, err.diagnostic)
            case A.Call(A.Var("batch"), args) if all(isinstance(a, A.KeywordArg) for a in args):
                try:
                    batch = {a.name: _natural(a.value, env, f"`{a.name}`") for a in args}
                except ConstError as err:
                    keep(diags, err.diagnostic)
            case _:
                diags.append(
                    _error(
                        "unknown stage of a data pipeline",
                        stage.span,
                        "expected `shuffle(seed = N)` or `batch(B = N)`",
                    )
                )
    return e.path, seed, batch, diags


def replace_data(
    run: Run, env: FileEnv, path: str, header: Callable[[str], str]
) -> Diagnostic | None:
    """The run with its data file replaced by `path` (as given on the command line: `presk
    train --data`, `presk export --data`), opened and matched as `open_data` does."""
    folder = os.path.dirname(os.path.abspath(env.path))
    run.data = os.path.relpath(os.path.abspath(path), folder)
    return open_data(run, env, header)


def open_data(run: Run, env: FileEnv, header: Callable[[str], str]) -> Diagnostic | None:
    """Open the run's data file (relative to the file of the run) with `header`, a reader of
    its sample type's text, and match that type against the objective's sample type,
    binding the dimensions the file fixes (T = 256). A diagnostic when they do not match."""
    path = os.path.join(os.path.dirname(env.path), run.data)
    try:
        text = header(path)
    except Exception as e:  # the reader's own error says what is wrong with the file
        return Diagnostic(
            "E1011", Severity.ERROR, f"training run: {e}", (Label(run.span, "the data"),)
        )
    run.file_type = text
    try:
        held = type_from_text(text)
    except (DiagnosticError, ConstError):
        held = None
    bound = None if held is None else match_sample(run.sample_type, held, dict(run.batch))
    if bound is None:
        return Diagnostic(
            "E1011",
            Severity.ERROR,
            f"training run: `{run.data}` holds `{text}`, and the objective's sample is"
            f" `{run.sample_type}`",
            (Label(run.span, "this data does not fit the objective"),),
        )
    run.bound = {k: v for k, v in bound.items() if k not in run.batch}
    return _within_bounds(run, env, bound)


def _within_bounds(run: Run, env: FileEnv, values: dict[str, int]) -> Diagnostic | None:
    """E1011 when the data or the batch gives a file dimension a value outside its
    bounds (`dim T >= 2` and samples of length 1)."""
    dims = tuple(file_dim(env, n) for n in values if n in env.dims)
    violated = check_assignment(DimContext(dims), values)
    if violated is None:
        return None
    return Diagnostic(
        "E1011",
        Severity.ERROR,
        f"training run: `{run.data}` and the batch give {violated.at}, outside the"
        f" bounds: `{violated.constraint}`",
        (Label(run.span, "the data"),),
    )


OPTIMIZERS = {"adamw": {"lr", "weight_decay", "betas", "eps", "schedule"}}


def check_optimizer(block: A.Optimizer) -> list[Diagnostic]:
    """An optimizer block against its algorithm's schema: `adamw` and its hyperparameters,
    numbers, `betas = (b1, b2)`, `schedule : cosine(warmup = N)` or `constant`."""
    if block.name not in OPTIMIZERS:
        return [_error(f"unknown optimizer `{block.name}`", block.span, "presk has `adamw`")]
    out = []
    for f in block.fields:
        if isinstance(f, A.Checkpoint) or f.name not in OPTIMIZERS[block.name]:
            name = "checkpoint" if isinstance(f, A.Checkpoint) else f.name
            fields = ", ".join(sorted(OPTIMIZERS[block.name]))
            out.append(
                _error(
                    f"unknown field `{name}` of `optimizer {block.name}`",
                    f.span,
                    f"the fields are {fields}",
                )
            )
            continue
        value = f.value if f.value is not None else f.type
        ok = {
            "schedule": isinstance(value, A.Var)
            and value.name == "constant"
            or isinstance(value, A.Call)
            and isinstance(value.function, A.Var)
            and value.function.name == "cosine"
            and len(value.args) == 1
            and isinstance(value.args[0], A.KeywordArg)
            and value.args[0].name == "warmup"
            and isinstance(value.args[0].value, A.IntLit),
            "betas": isinstance(value, A.TupleExpr)
            and len(value.elements) == 2
            and all(isinstance(e, A.FloatLit | A.IntLit) for e in value.elements),
        }.get(f.name, isinstance(value, A.FloatLit | A.IntLit))
        if not ok:
            out.append(
                _error(
                    f"`{f.name}` of `optimizer {block.name}` is not of its form",
                    f.span,
                    "see docs/training.md",
                )
            )
            continue
        try:  # its numbers are f64 (warmup a nat): each must be one (presk_types.numbers)
            for e in _numbers(value):
                if f.name == "schedule":
                    check_natural(literal_value(e), e.span, "`warmup`")
                else:
                    check_double(literal_value(e), e.span, "f64")
        except ConstError as err:
            out.append(err.diagnostic)
    return out


def _numbers(e: A.Expr) -> list[A.IntLit | A.FloatLit]:
    """The number literals of an optimizer field's value (`0.01`, `(0.9, 0.95)`, `cosine(…)`)."""
    match e:
        case A.IntLit() | A.FloatLit():
            return [e]
        case A.TupleExpr(elements):
            return [x for el in elements for x in _numbers(el)]
        case A.Call(_, args):
            return [x for a in args if isinstance(a, A.KeywordArg) for x in _numbers(a.value)]
    return []


def check_training(block: A.Training, env: FileEnv, checker: Checker) -> Run | list[Diagnostic]:
    """The run of a `training run` block, or the diagnostics that say what is wrong with it."""
    fields: dict[str, A.Field] = {}
    checkpoint = None
    diags: list[Diagnostic] = []
    for f in block.fields:
        if isinstance(f, A.Checkpoint):
            checkpoint = f
        elif f.name not in FIELDS:
            diags.append(
                _error(
                    f"unknown field `{f.name}` in a training run",
                    f.span,
                    f"the fields are {', '.join(sorted(FIELDS))}",
                )
            )
        else:
            fields[f.name] = f
    missing = [n for n in REQUIRED if n not in fields]
    if missing:
        diags.append(_error(f"a training run needs `{missing[0]}`", block.span, "missing"))
    for f in fields.values():  # `data : stream …` parses as a type and no value
        if f.value is None:
            form = "epochs : nat = N" if f.name == "epochs" else f"{f.name} = …"
            diags.append(_error(f"`{f.name}` has no value", f.span, f"written `{form}`"))
    if diags:
        return diags
    model = fields["model"].value
    name = _qualname(model)
    info = lookup_module(name, env) if name is not None else None
    if info is None:
        return [_error("`model` must name a module", model.span, "not a module")]
    objective = fields["objective"].value
    fn = None
    if isinstance(objective, A.Var) and objective.name in env.fns:
        fn = checker.info(env, env.fns[objective.name], None)
    if fn is None or not fn.ok:
        return [_error("`objective` must name a checked function of this file", objective.span)]
    optimizer = fields["optimizer"].value
    if not (isinstance(optimizer, A.Var) and optimizer.name in env.optimizers):
        return [_error("`optimizer` must name an `optimizer` block of this file", optimizer.span)]
    params = [t for _, t in fn.params]
    if (
        len(params) not in (2, 3)
        or not isinstance(params[0], ParamsT)
        or params[0].instance.name != info.decl.name
        or (len(params) == 3 and not isinstance(params[1], KeyT))
    ):
        return [
            _error(
                f"the objective must take `params {info.decl.name}`, a key or not, and a batch",
                objective.span,
                f"`{fn.key}` takes ({', '.join(str(t) for t in params)})",
            )
        ]
    path, seed, batch, more = _pipeline(fields["data"].value, env)
    if more:
        return more
    unstacked = _without_batch_axis(params[-1], fields["data"].span)
    if unstacked is not None:
        return [unstacked]
    epochs = fields.get("epochs")
    epochs_value = None
    if epochs is not None:
        try:
            epochs_value = _natural(epochs.value, env, "`epochs`")
        except ConstError as err:
            return [d for d in [err.diagnostic] if d.code != "E1000"]
    return Run(
        info.decl.name,
        fn,
        optimizer.name,
        path,
        seed,
        batch,
        epochs_value,
        checkpoint,
        params[-1],
        without_batch(params[-1]),
        span=fields["data"].span,
    )


def _without_batch_axis(t: Type, span: Span) -> Diagnostic | None:
    """E1011 on the `data` field when a tensor of the objective's batch has no `batch` axis:
    the data's samples are stacked on each one's (train time stopped there, E7008)."""
    elements = t.elements if isinstance(t, TupleT) else (t,)
    for i, e in enumerate(elements):
        if isinstance(e, Real | Bool | Idx) and e.shape.axis("batch") is not None:
            continue
        where = f"element {i + 1} of the batch, `{e}`," if isinstance(t, TupleT) else f"`{e}`"
        return Diagnostic(
            "E1011",
            Severity.ERROR,
            f"training run: {where} has no `batch` axis to stack the samples on",
            (Label(span, "the samples are stacked on each tensor's `batch` axis"),),
            help="give every tensor of the objective's batch a `batch` axis (`ℝ[batch: B, …]`)",
        )
    return None


def _qualname(e: A.Expr) -> A.QualName | None:
    parts = []
    while isinstance(e, A.FieldAccess):
        parts.insert(0, e.name)
        e = e.object
    if not isinstance(e, A.Var):
        return None
    return A.QualName((e.name, *parts), e.span)


def training_summary(run: Run) -> list[str]:
    lines = [
        "-- training --",
        f"training run: model {run.model}, objective {run.objective.key}, optimizer {run.optimizer}",
        f"    batch   : {run.batch_type}",
        f"    sample  : {run.sample_type}",
    ]
    how = ", ".join(
        ([f"shuffle {run.shuffle}"] if run.shuffle is not None else [])
        + [f"batch {n}" for n in run.batch.values()]
    )
    held = f" — file holds {run.file_type}" if run.file_type is not None else ""
    lines.append(f"    data    : {run.data}" + (f" ({how})" if how else "") + held)
    if run.epochs is not None:
        lines.append(f"    epochs  : {run.epochs}")
    if run.checkpoint is not None:
        lines.append(f"    ckpt    : every {run.checkpoint.every} steps to {run.checkpoint.dir}")
    if run.dims():
        lines.append("    dims    : " + ", ".join(f"{k} = {v}" for k, v in run.dims().items()))
    return lines
