"""The `training run` block: checked against its schema, and the `-- training --` summary.

```
training run {
  model     = t.Tower                     -- a module
  objective = loss                        -- fn (θ : params model, batch : (…)) -> ℝ[]
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

from dataclasses import dataclass, field

from presk_syntax import ast as A
from presk_syntax.diagnostics import Diagnostic, Label, Severity
from presk_syntax.span import Span

from presk_types.check import Checker, FnInfo
from presk_types.elab import FileEnv, lookup_module
from presk_types.types import Bool, Idx, ParamsT, Real, Shape, TupleT, Type

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


def _pipeline(e: A.Expr) -> tuple[str | None, int | None, dict[str, int], list[Diagnostic]]:
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
            case A.Call(A.Var("shuffle"), (A.KeywordArg("seed", A.IntLit(value)),)):
                seed = value
            case A.Call(A.Var("batch"), args) if all(
                isinstance(a, A.KeywordArg) and isinstance(a.value, A.IntLit) for a in args
            ):
                batch = {a.name: a.value.value for a in args}
            case _:
                diags.append(
                    _error(
                        "unknown stage of a data pipeline",
                        stage.span,
                        "expected `shuffle(seed = N)` or `batch(B = N)`",
                    )
                )
    return e.path, seed, batch, diags


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
        len(params) != 2
        or not isinstance(params[0], ParamsT)
        or params[0].instance.name != info.decl.name
    ):
        return [
            _error(
                f"the objective must take `params {info.decl.name}` and a batch",
                objective.span,
                f"`{fn.key}` takes ({', '.join(str(t) for t in params)})",
            )
        ]
    path, seed, batch, more = _pipeline(fields["data"].value)
    if more:
        return more
    epochs = fields.get("epochs")
    epochs_value = epochs.value.value if epochs and isinstance(epochs.value, A.IntLit) else None
    return Run(
        info.decl.name,
        fn,
        optimizer.name,
        path,
        seed,
        batch,
        epochs_value,
        checkpoint,
        params[1],
        without_batch(params[1]),
    )


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
    lines.append(f"    data    : {run.data}" + (f" ({how})" if how else ""))
    if run.epochs is not None:
        lines.append(f"    epochs  : {run.epochs}")
    if run.checkpoint is not None:
        lines.append(f"    ckpt    : every {run.checkpoint.every} steps to {run.checkpoint.dir}")
    if run.batch:
        lines.append("    dims    : " + ", ".join(f"{k} = {v}" for k, v in run.batch.items()))
    return lines
