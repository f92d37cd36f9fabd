"""The Python API (`import presk`, docs/python.md): a file loaded once, its entries called on
numpy arrays as `presk run` runs them, compiled once per shape as `jax.jit` compiles.

`load` runs the pipeline up to the pass `presk run` runs last (presk_cli.pipeline.RUN);
`Program.entry` names a function with its options; calling the `Entry` checks the
arguments (presk_cli.arguments: the dimensions solved from their shapes), then evaluates it
on the reference interpreter or lowers it through the native passes (presk_cli.native.lower)
and runs the laid-out kernels or the compiled C, keeping the schedule and the compiled
object of each shape. Every error is a `PreskError` carrying the diagnostic's code and its
text as `presk` renders it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from presk_syntax.diagnostics import Diagnostic, DiagnosticError, error, render

from presk_cli.arguments import ArgumentError
from presk_cli.native import BACKENDS, REALIZES, NativeError
from presk_cli.pipeline import PIPELINE, RUN


class PreskError(Exception):
    """A diagnostic of Presk raised in Python: `code` (`E7001`), `message` (its text as the
    command line renders it, without colour) and `diagnostics` (every one, as data)."""

    def __init__(self, diagnostics: list[Diagnostic], sources=None) -> None:
        self.diagnostics = list(diagnostics)
        self.code = self.diagnostics[0].code
        self.message = "".join(render(d, sources or {}, False) for d in self.diagnostics)
        super().__init__(self.message.rstrip("\n"))

    @classmethod
    def of(cls, code: str, message: str) -> PreskError:
        return cls([error(code, message)])

    def __reduce__(self):  # pickled whole (a worker process's error): its rendered text too
        return (_unpickled, (self.diagnostics, self.message))


def _unpickled(diagnostics: list[Diagnostic], message: str) -> PreskError:
    e = PreskError(diagnostics)
    e.message = message
    e.args = (message.rstrip("\n"),)
    return e


def _raised(e: Exception, sources=None) -> PreskError:
    """The PreskError of an exception of the stages: its diagnostics, or its code."""
    if isinstance(e, DiagnosticError):
        return PreskError(e.diagnostics, sources)
    if getattr(e, "diagnostic", None) is not None and callable(e.diagnostic):
        return PreskError([e.diagnostic()], sources)  # EntryError
    return PreskError([error(getattr(e, "code", None) or "E7002", str(e))], sources)


def _options(backend: str, realize: str, threads: int) -> None:
    """The options of an entry, checked as `presk run` checks its flags (E7080; a
    realization file's own codes, E7035 and E7036)."""
    if backend not in BACKENDS:
        raise PreskError.of("E7080", f"backend={backend!r}: one of {', '.join(BACKENDS)}")
    if not isinstance(realize, str) or (realize not in REALIZES and not realize.startswith("@")):
        raise PreskError.of(
            "E7080", f"realize={realize!r}: one of {', '.join(REALIZES)} or '@FILE' (a realization)"
        )
    if realize.startswith("@"):
        from presk_kernel.realization import RealizationError, parse_realization

        try:
            parse_realization(realize)
        except RealizationError as e:
            raise PreskError.of(e.code, str(e)) from None
    if backend == "interp" and realize != "f64":
        raise PreskError.of(
            "E7080",
            f"realize={realize!r} is for the kernels: the reference interpreter is exact (at"
            " `bits`), and every realization is measured against it",
        )
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= 256:
        raise PreskError.of("E7080", f"threads={threads!r}: a count from 1 to 256")


def _consts(const: dict | None) -> dict[str, str]:
    """`const={"D": 8, "lr": Fraction(1, 50)}` as `--const NAME=V` takes them: exact numbers."""
    from presk_types.constants import read_number

    out = {}
    for name, value in (const or {}).items():
        text = f"{value.numerator}/{value.denominator}" if isinstance(value, Fraction) else value
        text = str(text).strip()
        ok = isinstance(value, (int, float, str, Fraction)) and not isinstance(value, bool)
        try:
            read_number(text)
        except ZeroDivisionError:  # `1/0`: elaboration's E1003 says it
            pass
        except ValueError:
            ok = False
        if not ok:
            raise PreskError.of("E7080", f"const {name}={value!r}: not a number")
        out[str(name)] = text
    return out


def load(path: str | os.PathLike, const: dict | None = None, remat: str = "residuals") -> Program:
    """The program of the file at `path`, checked and lowered as `presk run` lowers it, with
    its constants overridden by `const` (`--const`) and its reverse mode `remat`."""
    from presk_syntax.pipeline import Context

    if remat not in ("residuals", "recompute"):
        raise PreskError.of("E7080", f"remat={remat!r}: residuals or recompute")
    path = os.fspath(path)
    ctx = Context(consts=_consts(const), remat=remat)
    try:
        elaborated = PIPELINE.run("elab", path, ctx)
        core = PIPELINE.run(RUN, path, ctx, start=elaborated, first="elab")
    except DiagnosticError as e:
        raise PreskError(e.diagnostics, ctx.sources) from None
    return Program(path, core, ctx.consts, remat)


class Program:
    """A loaded file: `functions` names what `entry` may call; `init` draws a tree;
    `train` runs the file's `training run`."""

    def __init__(self, path: str, core, consts: dict[str, str], remat: str) -> None:
        from presk_core.run import entry_names

        self.path, self.core, self.consts, self.remat = path, core, consts, remat
        self.functions = entry_names(core)

    def __repr__(self) -> str:
        return f"presk.Program({self.path!r}, functions={self.functions})"

    def entry(
        self,
        name: str,
        dims: dict[str, int] | None = None,
        backend: str = "native",
        realize: str = "f64",
        threads: int = 1,
        bits: int = 256,
    ) -> Entry:
        """The function `name` (`loss`, `Linear.apply`, `Linear{3, 2}.apply`, a declared
        gradient such as `loss_grad`) as a Python callable on `backend`: `native` (compiled
        C), `kernel` (the kernel interpreter) or `interp` (the reference interpreter, exact
        at `bits`). `dims` fixes dimensions the arguments' shapes do not."""
        _options(backend, realize, threads)
        return Entry(self, name, dict(dims or {}), backend, realize, threads, bits)

    def init(self, model: str, seed: int = 0, dims: dict[str, int] | None = None,
             name: str = "θ", bits: int = 256) -> dict:  # fmt: skip
        """θ₀ of `model` (`Tower`, `Linear{3, 1}`) from its initializers, as `presk run
        --seed --bits` draws an argument `name` of type `params model` (and `presk train` its
        objective's first argument): a nested dict of float64 arrays. `dims`: the
        dimensions of an imported file the tree needs (`--dim T=…`)."""
        from presk_core.interp import Interpreter
        from presk_core.run import EntryError, draw, parse_entry

        head, brace, rest = model.partition("{")
        text = f"{head}{brace}{rest}.init"
        if self.core.layout(head.strip()) is None:
            modules = ", ".join(layout.name for layout in self.core.layouts if layout.leaves)
            raise PreskError.of("E7001", f"no module `{head.strip()}` with parameters; {modules}")
        try:
            entry = parse_entry(text, self.core, None, _dims(dims))
            init = self.core.function(entry.function.name)
            tree = draw(entry, Interpreter(self.core, bits), seed, name, init.result)
        except EntryError as e:
            raise _raised(e) from None
        from presk_cli.arguments import to_numpy

        return to_numpy(tree)

    def train(self, steps: int | None = None, backend: str = "native", realize: str = "f64",
              threads: int = 1, seed: int = 0, bits: int = 256, callback: Callable | None = None,
              ckpt: str | None = None, log: Callable[[str], None] | None = None,
              log_every: int = 10, data: str | None = None, metrics: str | None = None,
              resume: str | None = None, opt: bool = False,
              profile: str | None = None) -> dict:  # fmt: skip
        """The file's `training run` as `presk train` runs it, its flags as arguments
        (`--steps`, `--backend`, `--realize`, `--threads`, `--seed`, `--bits`, `--ckpt`,
        `--log-every`, `--data`, `--metrics`, `--resume`, `--opt`, `--profile`: the step
        rewritten by the exact rules, its report on standard error): `callback(record)` after each
        step, with its `--metrics` line as a dict (step, epoch, loss, lr, grad_norm,
        seconds); `log(line)` each line of its log (none without it). The final θ, as a
        nested dict of float64 arrays (also written to `final.psk.d` in `ckpt`)."""
        from presk_cli.training import Run, train_file

        _options(backend, realize, threads)
        if profile is not None and not opt:
            raise PreskError.of("E7080", "profile= prices opt=True's rewriting: give opt=True")
        run = Run(steps, (backend, realize, threads), seed, bits, ckpt, data, metrics, resume,
                  log_every, opt, profile)  # fmt: skip
        return train_file(self, run, callback, log)


def _dims(dims: dict | None) -> dict[str, int]:
    out = {}
    for d, v in (dims or {}).items():
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not 0 <= v < 2**63:
            raise PreskError.of("E7080", f"dims: {d}={v!r} is not a natural number")
        out[str(d)] = int(v)
    return out


class Entry:
    """An entry of a program as a callable: `f(θ, batch)` or `f(θ=θ, batch=(x, y))` on numpy
    arrays and nested dicts; the result as float64 arrays (and nested dicts, tuples). The
    schedule and compiled object of each shape are kept (`compilations` counts them)."""

    def __init__(self, program: Program, name: str, dims: dict, backend: str, realize: str,
                 threads: int, bits: int) -> None:  # fmt: skip
        from presk_core.reach import tree_dims
        from presk_core.run import ENTRY, entry_names

        m = ENTRY.match(name)
        head, tail = (m.group(1), m.group(3)) if m else (name, None)
        function = f"{head}.{tail}" if tail else head
        if function not in [f.name for f in program.core.functions] or ".lambda" in function:
            names = ", ".join(entry_names(program.core))
            raise PreskError.of("E7001", f"no function `{function}`; functions: {names}")
        self.program, self.name, self.backend = program, name, backend
        self.realize, self.threads, self.bits = realize, threads, bits
        self.function = program.core.function(function)
        self.dims = _dims(dims)
        known = set(self.function.dims) | tree_dims(program.core, function)
        unknown = [d for d in self.dims if d not in known]
        if unknown:
            raise PreskError.of(
                "E7001",
                f"dims: `{function}` has no dimension `{unknown[0]}` (its dimensions:"
                f" {', '.join(self.function.dims) or 'none'})",
            )
        self.params = [p.name for p in self.function.params]
        self._cache: dict[tuple, tuple] = {}  # (dims, prefix, scalars) -> schedule, executor
        self._entries: dict[tuple, object] = {}  # (dims, prefix) -> presk_core.run.Entry
        self._lock = threading.Lock()
        self._interp = None

    @property
    def compilations(self) -> int:
        """How many shapes this entry was lowered (and, natively, compiled) for."""
        return len(self._cache)

    def __repr__(self) -> str:
        return (
            f"presk.Entry({self.name!r}, params={self.params}, backend={self.backend!r},"
            f" realize={self.realize!r})"
        )

    def inputs(self, seed: int = 0, dims: dict[str, int] | None = None,
               prefix: tuple[int, ...] = ()) -> dict:  # fmt: skip
        """The arguments `presk run --seed` draws for this entry at `dims` (with the entry's
        own) and the axes `prefix` of an open prefix `...`, by name, as this entry takes
        them (hyperparameters left to their defaults): `f(**f.inputs(seed=0))` is `presk run
        --entry E --seed 0`'s result."""
        from presk_core.run import EntryError, parse_entry

        from presk_cli.native import entry_inputs

        given = {**self.dims, **_dims(dims)}
        axes = {f"…{i}": n for i, n in enumerate(_dims(dict(enumerate(prefix))).values())}
        try:
            entry = parse_entry(self.name, self.program.core, None, {**given, **axes})
            drawn = entry_inputs(self.program.core, entry, seed, self.bits)
        except EntryError as e:
            raise _raised(e) from None
        from presk_types.types import Machine

        # a hyperparameter is drawn as its default: left out, the call takes that default
        return {name: _python(v) for name, t, v in drawn if not isinstance(t, Machine)}

    def __call__(self, *args, **kwargs):
        try:
            return self._call(args, kwargs)
        except ArgumentError as e:
            raise PreskError.of(e.code, str(e)) from None

    def _entry(self, shaped):
        """presk_core.run's Entry at the dimensions the arguments fix."""
        from presk_core.reach import needed_dims
        from presk_core.run import EntryError, parse_entry

        from presk_cli.arguments import solve

        fn = self.function
        dims = solve(shaped.lengths, self.dims)
        key = (tuple(sorted(dims.items())), shaped.prefix)
        if key in self._entries:  # parse_entry and the reach of the body: once a shape
            return self._entries[key]
        needed = needed_dims(self.program.core, fn.name)
        for d in fn.dims:
            if d not in dims and d in needed:
                raise PreskError.of(
                    "E7001",
                    f"no value for the dimension `{d}` of `{fn.name}`: no argument's shape"
                    f" gives it; give it with dims={{{d!r}: N}}",
                )
        prefix = {f"…{i}": n for i, n in enumerate(shaped.prefix or ())}
        try:
            entry = parse_entry(self.name, self.program.core, None, {**dims, **prefix})
        except EntryError as e:
            raise _raised(e) from None
        self._entries[key] = entry
        return entry

    def _call(self, args: tuple, kwargs: dict):
        from presk_cli.arguments import bind, check, shape_arguments

        core, fn = self.program.core, self.function
        values = bind(fn, args, kwargs)
        shaped = shape_arguments(core, fn, values)
        if shaped.prefix == () and self.backend != "interp":
            raise PreskError.of(
                "E7001",
                f"`{fn.name}` takes an open prefix `...`, which the kernels need one axis of at"
                " least (an array of one more axis), or backend='interp'",
            )
        entry = self._entry(shaped)
        check(shaped, {**entry.dims, **{d: v for d, v in self.dims.items()}})
        if self.backend == "interp":
            return self._interpreted(entry, shaped.values)
        return self._native(entry, shaped.values)

    def _interpreted(self, entry, values: list):
        from presk_core.interp import Interpreter, RunError

        from presk_cli.arguments import interp_values, to_numpy

        if self._interp is None:
            self._interp = Interpreter(self.program.core, self.bits)
        inputs = interp_values(self.function, values, self.bits)
        try:
            result = self._interp.run(self.function.name, inputs, entry.dims)
        except RunError as e:
            raise _raised(e) from None
        return to_numpy(result)

    def _native(self, entry, values: list):
        from presk_kernel.lower import argument_leaves

        from presk_cli.arguments import kernel_values, nested
        from presk_cli.native import executor, lower, result_of, storage

        args = kernel_values(self.function, values)
        all_dims = dict(entry.dims) | dict(entry.prefix)
        scalars = tuple(v for v in args if not isinstance(v, (np.ndarray, dict, tuple)))
        key = (tuple(all_dims.items()), tuple(str(s) for s in scalars))
        core = self.program.core
        with self._lock:  # one arena per compiled entry: one call at a time
            try:
                if key not in self._cache:
                    schedule = lower(core, entry.function.name, all_dims, args, self.realize,
                                     self.threads)  # fmt: skip
                    self._cache[key] = (schedule, executor(schedule, self.backend))
                schedule, run = self._cache[key]
                outputs = run(storage(schedule, argument_leaves(args)))
                result = result_of(core, entry, outputs, real=lambda x: x)
            except NativeError as e:
                raise PreskError([error(e.code, str(e), help=e.help)]) from None
        return _nested(result, nested)


def _python(value):
    """A drawn argument as the API takes it: numpy arrays, nested dicts (a key as it is)."""
    from presk_cli.arguments import to_numpy

    return to_numpy(value) if isinstance(value, np.ndarray | dict | tuple) else value


def _nested(value, nested):
    match value:
        case dict():
            return nested(value)
        case tuple():
            return tuple(_nested(v, nested) for v in value)
    return value


__all__ = ["Entry", "PreskError", "Program", "load"]
