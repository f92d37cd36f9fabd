"""A file's `training run` in PyTorch: `train.py`, and with `train:K` its K-step conformance.

`train.py` is the run as a PyTorch loop over the exported model and objective: the run's
`.psk.d` file read by a reader of its own (numpy and struct: the script needs torch and
numpy, not presk), shuffled each epoch by a seeded `torch.randperm`, cut into batches of
B, `torch.optim.AdamW` with the block's hyperparameters and the block's schedule as a
`LambdaLR`. It logs and closes as `presk train` does (docs/training.md).

`--conformance-entry train:K` also writes `test_conformance.py` and
`conformance/train.json`: K steps of the interpreter (presk train's loop, at `bits`) from
θ drawn at `seed`, on the batches of its own shuffle; the batches' indices into the data
file, the learning rates, and the losses and θ after each step. The test replays those K
steps with train.py's own functions in float64 on the same samples and asserts every
parameter within 1e-12 (norm-wise relative) after every step.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
from presk_ad.step import Trainer
from presk_core import data as D
from presk_core.layout import training_of
from presk_core.optim import adamw_of
from presk_core.run import EntryError
from presk_syntax.diagnostics import DiagnosticError
from presk_types.driver import checked
from presk_types.presburger import Lin
from presk_types.training import Run, replace_data
from presk_types.types import Bool, Idx, KeyT, Real, TupleT, Type

from presk_export.pyexpr import ExportError, identifier
from presk_export.pyformat import py_literal
from presk_export.pytorch import TEMPLATES, Export

TRAIN_ENTRY = re.compile(r"^\s*train\s*:(.*)$")

# the names train.py defines or binds where it calls the model and the objective: an
# imported class or function of the same name is imported as `name_`
TRAIN_NAMES = {
    "argparse", "math", "os", "re", "statistics", "struct", "sys", "tempfile", "time",
    "Path", "np", "torch", "HERE", "DATA", "SAMPLE", "SAMPLE_TYPE", "BATCH_AXES", "TUPLE",
    "DIMS", "B", "SHUFFLE_SEED", "EPOCHS", "CKPT", "CKPT_EVERY", "LR", "BETAS", "EPS",
    "WEIGHT_DECAY", "WARMUP", "MAGIC", "VERSION", "FIXED", "LEAF", "DTYPES", "DataError",
    "read_psk_d", "match_sample", "Data", "data_path", "build_model", "lr_factor",
    "make_optimizer", "train_step", "save", "main", "_positive",
    # the parameters of the functions that call the model or the objective
    "dims", "model", "optimizer", "schedule", "batch", "value", "p",
}  # fmt: skip


def train_steps(entry: str) -> int | None:
    """K of a `train:K` entry, None for any other entry; a usage error for a bad K."""
    m = TRAIN_ENTRY.match(entry)
    if m is None:
        return None
    k = m.group(1).strip()
    if re.fullmatch(r"[0-9]+", k) is None or int(k) == 0:
        raise EntryError(
            f"`{entry.strip()}` is not a training entry: write `train:K`, K the number of"
            " steps to replay (a positive integer)",
            usage=True,
        )
    return int(k)


def training_run(export: Export, data: str | None = None) -> Run:
    """The main file's training run, its data file (or `data`, which replaces it) opened and
    matched (presk check's)."""
    header = lambda path: D.read_header(path).type_text  # noqa: E731
    done = checked(export.program, data_header=None if data else header)
    if done.runs and data:
        problem = replace_data(done.runs[0], export.program.main, data, header)
        if problem is not None:
            done.diagnostics.append(problem)
    errors = [d for d in done.diagnostics if d.is_error]
    if errors:
        raise DiagnosticError(errors)
    if not done.runs:
        name = os.path.basename(export.program.main.path)
        raise EntryError(f"`{name}` has no `training run` to export", usage=True)
    return done.runs[0]


def train_files(
    export: Export,
    steps: int,
    dims: dict[str, int] | None = None,
    seed: int = 0,
    bits: int = 256,
    out: str | None = None,
    data: str | None = None,
) -> dict[str, str]:
    """`train.py`, `test_conformance.py` and `conformance/train.json` of the main file's run,
    the test replaying `steps` interpreter steps. With `out` (the export's folder), train.py
    names the data file relative to it; otherwise by its absolute path. `data` replaces the
    run's data file."""
    run = training_run(export, data)
    export.refuse_if_left_out(run.objective.key)  # E8001: train.py would import nothing
    objective = export.core.function(run.objective.key)
    keys = [p.name for p in objective.params if isinstance(p.type, KeyT)]
    script = Script(export, run, out, keys[0] if keys else None)
    for d, v in (dims or {}).items():
        if run.dims().get(d, v) != v:
            raise EntryError(f"--dim {d}={v}: the training run fixes {d} = {run.dims()[d]}")
    record = replay(export, run, steps, seed, bits)
    test = TEMPLATES.get_template("test_train_conformance.py.j2").render(
        source=script.source, steps=steps, seed=seed, bits=bits, keyed=bool(keys)
    )
    return {
        "train.py": script.render(),
        "test_conformance.py": test,
        "conformance/train.json": _json(record),
    }


def _json(doc: dict) -> str:
    """A key a line, and a step a line: readable, and a diff of two exports shows the step."""

    def dump(value: object) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = []
    for key, value in doc.items():
        if key == "steps":
            steps = ",\n  ".join(dump(s) for s in value)
            lines.append(f" {dump(key)}: [\n  {steps}\n ]")
        else:
            lines.append(f" {dump(key)}: {dump(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


# ---- train.py ------------------------------------------------------------------------------


def _length(e: Lin) -> int | str | None:
    """A length as train.py matches it: a number, a dimension's name (which the file binds),
    or None (an expression of dimensions: not checked)."""
    if e.is_const:
        return e.constant
    if len(e.coeffs) == 1 and e.coeffs[0][1] == 1 and e.constant == 0:
        return e.coeffs[0][0]
    return None


def _leaf(t: Type) -> tuple[str, int | str | None, tuple]:
    """(kind, the bound of an index, the lengths) of one leaf of the sample type."""
    match t:
        case Real(s) if not s.prefix:
            return ("ℝ", None, tuple(_length(a.length) for a in s.axes))
        case Bool(s) if not s.prefix:
            return ("bool", None, tuple(_length(a.length) for a in s.axes))
        case Idx(bound, s) if not s.prefix:
            return ("idx", _length(bound), tuple(_length(a.length) for a in s.axes))
    raise ExportError(f"a training run's sample of type `{t}` has no train.py export")


class Script:
    """What train.py is made of: the run's model, objective, data and optimizer."""

    def __init__(self, export: Export, run: Run, out: str | None, key: str | None = None) -> None:
        self.export = export
        self.run = run
        self.out = out
        self.key = key  # the objective's key parameter: train.py draws step t's key
        main = export.program.main
        self.source = os.path.basename(main.path)
        block = main.optimizers.get(run.optimizer)
        if block is None or block.name != "adamw":
            raise ExportError("the optimizer of the training run is not an `adamw` block")
        self.opt = adamw_of(block)
        (self.batch_size,) = run.batch.values() if len(run.batch) == 1 else (None,)
        if self.batch_size is None or self.batch_size <= 0:
            raise ExportError("the run's `batch(B = n)` must give one batch size")
        types = run.batch_type.elements if isinstance(run.batch_type, TupleT) else (run.batch_type,)
        samples = (
            run.sample_type.elements if isinstance(run.sample_type, TupleT) else (run.sample_type,)
        )
        self.batch_axes = []
        for t in types:
            axis = t.shape.axis("batch") if hasattr(t, "shape") else None
            if axis is None:
                raise ExportError(f"the batch element `{t}` has no `batch` axis")
            self.batch_axes.append(axis)
        self.sample = [_leaf(t) for t in samples]
        self.data_dims = {x for _, b, ls in self.sample for x in (b, *ls) if isinstance(x, str)}
        self.ctor = export.ctor_dims(run.model)
        for d in self.ctor:
            if d not in self.data_dims and d not in run.batch:
                raise ExportError(
                    f"train.py cannot build `{run.model}`: its constructor takes `{d}`, which"
                    " neither the run nor its data file fix"
                )

    def imports(self, names: list[str]) -> tuple[list[str], list[str]]:
        """The `from M import X[ as Y]` lines of classes and functions of the export, and the
        name train.py calls each by (with a `_` where train.py has one of its own)."""
        wanted: dict[str, list[str]] = {}
        local = []
        for name in names:
            owner = self.export.owner.get(name, self.export.program.main.path)
            py = identifier(name)
            here = f"{py}_" if py in TRAIN_NAMES else py
            wanted.setdefault(self.export.modules[owner], []).append(
                py if here == py else f"{py} as {here}"
            )
            local.append(here)
        order = [self.export.modules[env.path] for env in self.export.program.files]
        lines = [
            f"from {module} import {', '.join(wanted[module])}"
            for module in sorted(wanted, key=order.index)
        ]
        return lines, local

    def render(self) -> str:
        run, opt = self.run, self.opt
        imports, (model, objective) = self.imports([run.model, run.objective.key])
        ctor = ", ".join(f"dims[{py_literal(d)}]" for d in self.ctor)
        epochs = run.epochs or 1
        ckpt = run.checkpoint
        return TEMPLATES.get_template("train.py.j2").render(
            source=self.source,
            model_name=run.model,
            objective_name=run.objective.key,
            imports=imports,
            model=model,
            objective=objective,
            build=f"{model}({ctor})",
            data=py_literal(self.export.beside(self.run.data, self.out)),
            data_shown=run.data,
            sample=py_literal([(k, b, ls) for k, b, ls in self.sample]),
            sample_type=py_literal(str(run.sample_type)),
            batch_axes=py_literal(tuple(self.batch_axes)),
            tuple=isinstance(run.batch_type, TupleT),
            dims=py_literal(dict(run.batch)),
            batch=self.batch_size,
            shuffle=run.shuffle or 0,
            epochs=epochs,
            ckpt=py_literal(ckpt.dir if ckpt is not None else None),
            ckpt_every=py_literal(ckpt.every if ckpt is not None else None),
            key_name=self.key,
            key_name_literal=py_literal(self.key),
            lr=py_literal(float(opt.lr)),
            betas=py_literal((float(opt.beta1), float(opt.beta2))),
            eps=py_literal(float(opt.eps)),
            weight_decay=py_literal(float(opt.weight_decay)),
            warmup=py_literal(opt.warmup),
            schedule=f"cosine(warmup = {opt.warmup})" if opt.warmup is not None else "constant",
        )


# ---- the interpreter's K steps ---------------------------------------------------------------


def _doubles(x: object) -> object:
    """Reals (MPFR) rounded to the nearest double, as nested lists; others as they are."""
    a = np.asarray(x)
    if a.dtype == object:
        return a.astype(float).tolist()
    return a.tolist()


def _schedule_points(k: int, horizon: int, warmup: int | None) -> list[int]:
    """The steps whose rate the test compares: the first K, the warm-up's end, and 33 points
    across the horizon (its last included): the cosine beyond the K steps too."""
    points = set(range(1, k + 1)) | {round(i * horizon / 32) for i in range(33)}
    if warmup is not None:
        points |= {warmup - 1, warmup, warmup + 1}
    return sorted(t for t in points if 1 <= t <= horizon)


def replay(export: Export, run: Run, steps: int, seed: int, bits: int) -> dict:
    """K steps of presk train's loop on the interpreter, as the test's JSON document."""
    main = export.program.main
    folder = os.path.dirname(main.path)
    trainer = Trainer(export.core, training_of(run), folder, seed, bits, None)
    horizon = trainer.horizon
    if steps > horizon:
        raise EntryError(
            f"`train:{steps}`: the run has {horizon} steps ({run.epochs or 1} epochs of"
            f" {trainer.per_epoch} batches)",
            usage=True,
        )
    doc: dict = {
        "run": os.path.basename(main.path),
        "model": run.model,
        "objective": trainer.objective,
        "data": run.data,
        "seed": seed,
        "bits": bits,
        "shuffle": run.shuffle or 0,
        "batch": trainer.batch_size,
        "dims": trainer.dims,
        "horizon": horizon,
        "theta0": {k: _doubles(x) for k, x in trainer.theta.items()},
    }
    opt = adamw_of(main.optimizers[run.optimizer])
    points = _schedule_points(steps, horizon, opt.warmup)
    doc["lr"] = [[t, float(trainer.lr(t).item())] for t in points]
    doc["steps"] = [
        {
            "step": s.t,
            "epoch": s.epoch + 1,
            "indices": s.indices,
            "batch": [x.tolist() for x in (s.batch if isinstance(s.batch, tuple) else (s.batch,))],
            "loss": float(np.asarray(s.loss).item()),
            "lr": float(s.lr.item()),
            "theta": {k: _doubles(x) for k, x in s.theta.items()},
        }
        for s in trainer.steps(steps)
    ]
    return doc


__all__ = ["train_files", "train_steps", "training_run"]
