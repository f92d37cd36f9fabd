"""`presk run`: an entry point, its inputs synthesized from the types, evaluated and printed.

An entry is a function of the program (`loss`), a module's function with its dimension
arguments (`Linear{3, 2}.apply`) or without when the module has none (`Tower.apply`).
The dimensions a call needs come from `--dim NAME=V`; the other `--dim` names are the axes
of an open prefix (`--dim batch=4`), in the order given. Inputs derive from `--seed`
(DESIGN §5): θ from the module's initializers, each parameter from its own key; reals
standard normal, indices uniform, keys folded from the root key, each from the
argument's name; hyperparameters at their defaults.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import gmpy2
import numpy as np
from presk_syntax.diagnostics import Diagnostic, Severity
from presk_types.elab import Program as Elab
from presk_types.presburger import Dim, DimContext, Lin, check_assignment
from presk_types.types import (
    AxisT,
    Bool,
    Idx,
    KeyT,
    Machine,
    ParamsT,
    Real,
    Shape,
    TupleT,
    Type,
    subst,
)

from presk_core import random as R
from presk_core.interp import Interpreter, RunError
from presk_core.ir import Function, Program
from presk_core.reach import needed_dims, tree_dims
from presk_core.room import make_room
from presk_core.show import format_number, format_tensor, format_tree

ENTRY = re.compile(r"^\s*([^\s{}.]+)\s*(?:\{([^}]*)\})?\s*(?:\.\s*([^\s{}.]+))?\s*$")


class EntryError(Exception):
    """A run that cannot start: a diagnostic (E7001) or, with `usage`, a usage error."""

    def __init__(self, message: str, usage: bool = False, code: str = "E7001") -> None:
        super().__init__(message)
        self.usage = usage
        self.code = code  # a data file's own code for `--data` (E7004 to E7010)

    def diagnostic(self) -> Diagnostic:
        return Diagnostic(self.code, Severity.ERROR, str(self))


@dataclass
class Entry:
    function: Function
    shown: str  # as the user wrote it, normalized: `Linear{3, 2}.apply`
    dims: dict[str, int]
    prefix: tuple[tuple[str, int], ...]
    module_dims: tuple[tuple[str, int], ...] = ()
    bounds: dict[str, int | None] = field(default_factory=dict)
    lowers: dict[str, int] = field(default_factory=dict)  # `dim T >= 2`
    trees: tuple[str, ...] = ()  # dimensions only its trees need (reach.tree_dims)


GENERATED = (
    ".init",
    ".vjp",
    ".fwd",
    ".bwd",
    ".grad",
    ".value_vjp",
    ".value_grad",
    ".train",
    ".train_value_grad",
)


def entry_names(core: Program) -> list[str]:
    """What `--entry` lists: the functions a user wrote (not initializers, λs, the
    functions differentiation or training write, nor the optimizer's)."""
    return [
        f.name
        for f in core.functions
        if not f.name.endswith(GENERATED)
        and ".lambda" not in f.name
        and not f.name.startswith("adamw.")
    ]


def _runnable(core: Program) -> list[str]:
    """Every function an entry may name: the user's, and the generated ones too."""
    return [f.name for f in core.functions if ".lambda" not in f.name]


def parse_entry(text: str, core: Program, elab: Elab | None, dims: dict[str, int]) -> Entry:
    """The entry `text` of `core` at `dims`: the modules' dimensions and the bounds come from
    the program's metadata (`Program.layouts`, `Program.bounds`); `elab` is read only for a
    program that has none (one put together by hand), and may be None."""
    m = ENTRY.match(text)
    if m is None:
        raise EntryError(f"`{text}` is not an entry: write `f`, `M.f` or `M{{3, 2}}.f`", usage=True)
    head, args, tail = m.groups()
    name = f"{head}.{tail}" if tail else head
    if name not in _runnable(core):
        names = ", ".join(entry_names(core))
        raise EntryError(f"no function `{name}`; functions: {names}", usage=True)
    fn = core.function(name)
    values = dict(dims)
    module_dims: list[tuple[str, int]] = []
    if tail:
        mdims = _module_dims(core, elab, head)
        given = [a.strip() for a in args.split(",")] if args and args.strip() else []
        if len(given) != len(mdims):
            raise EntryError(
                f"`{head}` takes {len(mdims)} dimension argument(s): `{head}{{{', '.join(mdims)}}}`",
                usage=True,
            )
        for d, v in zip(mdims, given, strict=True):
            if not (v.isascii() and v.isdigit()):  # `²` and `١` are digits to str.isdigit
                raise EntryError(f"`{v}` is not a natural number in `{text}`", usage=True)
            values[d] = int(v)
            module_dims.append((d, int(v)))
    shown = f"{head}{{{', '.join(str(v) for _, v in module_dims)}}}.{tail}" if module_dims else name
    needed = needed_dims(core, name)
    missing = [d for d in fn.dims if d not in values and d in needed]
    if missing:
        raise EntryError(
            f"no value for the dimension `{missing[0]}` of `{name}`: give it with"
            f" `--dim {missing[0]}=N`"
        )
    prefix = tuple((k, v) for k, v in dims.items() if k not in fn.dims)
    bounds, lowers = _bounds(core, elab)
    for d in fn.dims:  # one the entry does not need: any allowed value, the least
        values.setdefault(d, lowers.get(d, 0))
    ctx = DimContext(tuple(Dim(d, bounds.get(d), lowers.get(d, 0)) for d in fn.dims))
    violated = check_assignment(ctx, {d: values[d] for d in fn.dims})
    if violated is not None:
        raise EntryError(f"`dim` bound violated: {violated}")
    trees = tuple(sorted(tree_dims(core, name)))
    return Entry(
        fn,
        shown,
        {d: values[d] for d in fn.dims},
        prefix,
        tuple(module_dims),
        bounds,
        lowers,
        trees,
    )


def check_dim_names(entry: Entry) -> None:
    """E7001 for a `--dim` that names no dimension of the entry when it has no open prefix
    `...` to take it, or that looks like one of them (`--dim b=2` for `B`): a mistyped name
    is not silently an axis (issue 16). `presk run` asks it; a caller of parse_entry that
    passes one set of dimensions to several entries does not."""
    fn, name, prefix = entry.function, entry.function.name, entry.prefix
    given = {d for d, _ in entry.module_dims}
    known = ", ".join(d for d in fn.dims if d not in given) or "none"
    open_ = any(getattr(getattr(p.type, "shape", None), "prefix", False) for p in fn.params)
    for axis, _ in prefix:
        if axis in entry.trees:  # a dimension of an argument's tree (an imported file's)
            continue
        alike = [d for d in fn.dims if d.lower() == axis.lower()]
        if not open_ or alike:
            hint = f"; did you mean `{alike[0]}`?" if alike else ""
            raise EntryError(
                f"`--dim {axis}`: `{name}` has no dimension `{axis}`"
                + ("" if open_ else " and no open prefix `...`")
                + f" (its dimensions: {known}){hint}"
            )


def _module_dims(core: Program, elab: Elab | None, name: str) -> tuple[str, ...]:
    layout = core.layout(name)
    if layout is not None or elab is None:
        return layout.dims if layout is not None else ()
    for env in elab.files:
        if name in env.modules:
            return env.modules[name].dims
    return ()


def _bounds(core: Program, elab: Elab | None) -> tuple[dict[str, int | None], dict[str, int]]:
    """The dimensions' upper bounds (None for none) and their lower bounds above 0."""
    if core.layouts or elab is None:
        return dict(core.bounds), dict(core.lowers)
    upper: dict[str, int | None] = {}
    lower: dict[str, int] = {}
    for env in elab.files:
        upper.update(env.dim_bounds)
        lower.update(env.dim_lowers)
    return upper, lower


# ---- inputs ------------------------------------------------------------------------------


def _lengths(shape: Shape, dims: dict[str, int]) -> tuple[int, ...]:
    return tuple(a.length.value(dims) for a in shape.axes)


def _prefix_shape(entry: Entry, t: Type, name: str) -> tuple[int, ...]:
    shape = t.shape
    if shape.prefix and not entry.prefix:
        raise EntryError(
            f"cannot synthesize `{name}`: cannot materialize a shape with an open prefix `...`"
            " (give its axes to `presk run` with extra `--dim` names)"
        )
    lead = tuple(v for _, v in entry.prefix) if shape.prefix else ()
    return lead + _lengths(shape, entry.dims)


def synthesize(
    entry: Entry,
    interp: Interpreter,
    seed: int,
    skip_last: bool = False,
    bound: dict[str, object] | None = None,
) -> list[tuple[str, Type, object]]:
    """The entry's arguments, drawn from `seed` (DESIGN §5); the last one left to the caller
    (None) with `skip_last`; those `bound` names (`--weights`' trees) taken from it."""
    root = R.root_key(seed)
    out = []
    defaults = dict(entry.function.defaults)
    params = entry.function.params
    for i, p in enumerate(params):
        if skip_last and i == len(params) - 1:
            out.append((p.name, p.type, None))
            continue
        if bound and p.name in bound:
            out.append((p.name, p.type, bound[p.name]))
            continue
        try:
            value = _draw(entry, interp, root, p.name, p.type, defaults)
        except R.SizeError as e:
            raise EntryError(f"cannot synthesize `{p.name}`: {e}", code="E7011") from None
        except MemoryError as e:  # under 2^31 elements, and still more than the machine holds
            why = f" ({e})" if str(e) else ""
            raise EntryError(
                f"cannot synthesize `{p.name}` of type `{p.type}`: more memory than there is{why}",
                code="E7011",
            ) from None
        out.append((p.name, p.type, value))
    return out


def entry_inputs(
    entry: Entry,
    interp: Interpreter,
    seed: int,
    bits: int,
    given: object = None,
    bound: dict[str, object] | None = None,
) -> list[tuple[str, Type, object]]:
    """The entry's arguments as `presk run` makes them (name, type, value): drawn from `seed`
    by `interp` (at `bits`), the last one `given` (a `--data` sample's doubles) when not
    None, rounded to `bits`, and those `bound` by name (`--weights`) as they are."""
    inputs = synthesize(entry, interp, seed, skip_last=given is not None, bound=bound)
    if given is not None:
        name, t, _ = inputs[-1]
        reals = tuple(
            interp_real(v, bits) if v.dtype == np.float64 else v
            for v in (given if isinstance(given, tuple) else (given,))
        )
        inputs[-1] = (name, t, reals if isinstance(given, tuple) else reals[0])
    return inputs


def draw(entry: Entry, interp: Interpreter, seed: int, name: str, t: Type) -> object:
    """The value `presk run --seed` draws for an argument `name` of type `t` of `entry`
    (a parameter tree: from its module's initializers, with the key of its name)."""
    return _draw(entry, interp, R.root_key(seed), name, t, dict(entry.function.defaults))


def _draw(entry: Entry, interp: Interpreter, root, name: str, t: Type, defaults: dict) -> object:
    key = R.fold_path(root, name)
    match t:
        case ParamsT(inst):
            target = inst.inner if inst.stack is not None else inst
            fn = interp.program.function(f"{target.name}.init")
            args = [a.value(entry.dims) for a in target.args]
            dims = dict(zip(fn.dims, args, strict=False))
            given = {**dict(entry.prefix), **entry.dims}  # the trees' own dimensions too
            dims.update({d: given[d] for d in fn.dims[len(args) :] if d in given})
            needed = needed_dims(interp.program, fn.name)
            for d in fn.dims:  # one the tree does not need: its least allowed value
                if d not in dims and d not in needed:
                    dims[d] = entry.lowers.get(d, 0)
            own = [
                Dim(d, entry.bounds.get(d), entry.lowers.get(d, 0))
                for d in entry.trees
                if d in given
            ]
            violated = check_assignment(DimContext(tuple(own)), given) if own else None
            if violated is not None:
                raise EntryError(f"`dim` bound violated: {violated}")
            missing = [d for d in fn.dims if d not in dims]
            if missing:
                raise EntryError(
                    f"cannot synthesize `{name}`: its tree needs `--dim {missing[0]}=N`"
                )
            tree = interp.run(fn.name, [key], dims)
            if inst.stack is not None:
                raise EntryError(f"cannot synthesize `{name}`: a stacked tree as an argument")
            return tree
        case Real():
            shape = _prefix_shape(entry, t, name)
            if math.prod(shape) <= R.MAX_ELEMENTS:  # else R.SizeError says it
                make_room(shape, interp.bits)  # before the draw (10^8 normals: 12 s)
            return interp_real(R.normal(key, shape), interp.bits)
        case Idx(bound, _):
            shape, n = _prefix_shape(entry, t, name), bound.value(entry.dims)
            if n == 0 or math.prod(shape) == 0:  # idx[0] has no index: only an empty tensor
                if math.prod(shape):
                    raise EntryError(
                        f"cannot synthesize `{name}` of type `{concrete(entry, t)}`: `idx[0]`"
                        " has no index to draw (its bound is 0)",
                        code="E7011",
                    )
                return np.zeros(shape, dtype=np.int64)
            return R.randint(key, n, shape)
        case Bool():
            return R.uniform(key, _prefix_shape(entry, t, name)) < 0.5
        case KeyT():
            return key
        case Machine(kind):
            if name in defaults:
                return gmpy2.mpfr(defaults[name]) if kind == "f64" else int(defaults[name])
            raise EntryError(
                f"cannot synthesize `{name}`: a hyperparameter `{kind}` needs a default"
            )
        case TupleT(elements):
            return tuple(
                _draw(entry, interp, root, f"{name}.{i}", e, defaults)
                for i, e in enumerate(elements)
            )
    raise EntryError(f"cannot synthesize `{name}` of type `{t}`")


def interp_real(doubles: np.ndarray, bits: int) -> np.ndarray:
    from presk_core import mpfr as M

    with M.precision(bits):
        return M.real(doubles)


# ---- printing ----------------------------------------------------------------------------


def concrete(entry: Entry, t: Type) -> Type:
    """A type at the run's dimensions, its prefix given its axes."""
    values = {d: Lin.const(v) for d, v in entry.dims.items()}
    prefix = Shape(False, tuple(AxisT(n, Lin.const(v)) for n, v in entry.prefix))
    return subst(t, values, prefix)


def _axes(t: Type) -> list[tuple[str | None, int]]:
    return [(a.name, a.length.constant) for a in t.shape.axes]


def show(entry: Entry, t: Type, value: object, digits: int, label: str | None = None) -> str:
    t = concrete(entry, t)
    match t:
        case ParamsT():
            leaves = [(path, v, [(None, n) for n in np.shape(v)]) for path, v in value.items()]
            return format_tree(leaves, digits, f"{label} : params" if label else "params")
        case Real() | Idx() | Bool():
            text = format_tensor(value, _axes(t), digits)
            return f"{label + ' : ' if label else ''}{t} = {text}"
        case TupleT(elements):
            parts = [show(entry, e, v, digits) for e, v in zip(elements, value, strict=True)]
            return f"{label + ' = ' if label else ''}(" + ", ".join(parts) + ")"
        case KeyT():
            return f"{label + ' : ' if label else ''}key = ({value.k0}, {value.k1})"
    return f"{label + ' : ' if label else ''}{t} = {format_number(value, digits)}"


def header(entry: Entry, bits: int, seed: int) -> str:
    dims = [f"{d} = {v}" for d, v in entry.dims.items()]
    with_ = f" with {', '.join(dims)}" if dims else ""
    return f"-- entry {entry.shown}{with_} at {bits} bits, seed {seed}"


def to_json(entry: Entry, t: Type, value: object) -> object:
    """Full precision: reals as strings of their exact decimal expansion at their precision."""
    match value:
        case R.Key():  # before tuple(): a key is a NamedTuple of its two words
            return [value.k0, value.k1]
        case dict():
            return {k: to_json(entry, t, v) for k, v in value.items()}
        case tuple():
            return [to_json(entry, t, v) for v in value]
        case np.ndarray() if value.dtype == object:
            return np.vectorize(lambda x: format(x, ".80g"), otypes=[object])(value).tolist()
        case np.ndarray():
            return value.tolist()
    return str(value)


def data_argument(core: Program, entry_text: str, path: str) -> tuple[dict[str, int], object]:
    """The entry's last argument read from a `.psk.d` file, its samples stacked on the
    argument's `batch` axis, and the dimensions that fixes (the batch's, and any length of
    the sample type: T = 256)."""
    from presk_types.training import match_sample, without_batch

    from presk_core import data as D

    m = ENTRY.match(entry_text)
    name = f"{m.group(1)}.{m.group(3)}" if m and m.group(3) else (m.group(1) if m else "")
    if name not in _runnable(core):
        raise EntryError(f"no function `{name}`", usage=True)
    last = core.function(name).params[-1]
    try:
        header = D.read_header(path)
        held = D.type_of(header.type_text, path)
        columns = D.read_columns(path, held)
    except D.DataError as e:
        raise EntryError(str(e), code=e.code) from None
    bound = match_sample(without_batch(last.type), held)
    if bound is None:
        raise EntryError(
            f"`{path}` holds `{header.type_text}`, and `{last.name}` takes samples of"
            f" `{without_batch(last.type)}`"
        )
    try:
        axes = _batch_axes(last.type)
    except RunError as e:  # E7008: a tensor without one
        raise EntryError(f"`{last.name}`: {e}", code=e.code) from None
    types = list(last.type.elements) if isinstance(last.type, TupleT) else [last.type]
    for t, axis in zip(types, axes, strict=True):
        length = t.shape.axes[axis].length
        if len(length.coeffs) == 1 and length.constant == 0:
            bound[length.coeffs[0][0]] = header.count
    return bound, take_samples(last.type, columns, np.arange(header.count))


def stack_samples(t: Type, samples: list[list[np.ndarray]]) -> object:
    """Samples (each a list of leaves, at least one) as a value of the batch type t: each
    leaf stacked on its tensor's `batch` axis; a tuple for a tuple type."""
    leaves = [np.stack([s[i] for s in samples], axis=a) for i, a in enumerate(_batch_axes(t))]
    return tuple(leaves) if isinstance(t, TupleT) else leaves[0]


def take_samples(t: Type, columns: list[np.ndarray], indices) -> object:
    """The samples at `indices` of a file's columns (presk_core.data.read_columns) as a
    value of the batch type t: `stack_samples` of those samples, one `np.take` a leaf (a
    training step's batch of 10,000 scalar pairs: 18 ms -> 1.3 ms); no index, a batch of
    length 0 (a file of no sample)."""
    leaves = [
        np.ascontiguousarray(np.moveaxis(np.take(c, indices, axis=0), 0, axis))
        for c, axis in zip(columns, _batch_axes(t), strict=True)
    ]
    return tuple(leaves) if isinstance(t, TupleT) else leaves[0]


def _batch_axes(t: Type) -> list[int]:
    """The `batch` axis of each tensor of the batch type t; E7008 where one has none."""
    types = list(t.elements) if isinstance(t, TupleT) else [t]
    axes = []
    for i, lt in enumerate(types):
        axis = lt.shape.axis("batch") if isinstance(lt, (Real, Idx, Bool)) else None
        if axis is None:
            where = f"element {i + 1} of the batch, `{lt}`," if isinstance(t, TupleT) else f"`{t}`"
            raise RunError(
                "E7008",
                f"{where} has no `batch` axis to stack the samples on (a batch type's"
                " every tensor has one)",
            )
        axes.append(axis)
    return axes


def run_entry(
    core: Program,
    elab: Elab,
    entry_text: str,
    dims: dict[str, int],
    seed: int = 0,
    bits: int = 256,
    digits: int = 12,
    verbose: bool = False,
    as_json: bool = False,
    data: str | None = None,
    weights=None,
) -> str:
    """The text `presk run` prints; EntryError or RunError when it cannot. `weights`, a
    function of the entry giving the arguments it binds (`--weights`), or None."""
    given = None
    if data is not None:
        bound, given = data_argument(core, entry_text, data)
        dims = {**bound, **dims}
    entry = parse_entry(entry_text, core, elab, dims)
    interp = Interpreter(core, bits)
    trees = weights(entry) if weights is not None else None
    inputs = entry_inputs(entry, interp, seed, bits, given, trees)
    result = interp.run(entry.function.name, [v for _, _, v in inputs], entry.dims)
    return result_text(entry, inputs, result, seed, bits, digits, verbose, as_json)


def result_text(
    entry: Entry,
    inputs: list,
    result: object,
    seed: int,
    bits: int,
    digits: int,
    verbose: bool,
    as_json: bool,
    backend: tuple[str, str] | None = None,
) -> str:
    """The text `presk run` prints of an entry's inputs and result, on every backend:
    `backend`, (backend, realize) of a run on the kernels (None on the interpreter, whose
    JSON says its `bits` instead)."""
    rtype = entry.function.result
    if as_json:
        if backend is None:
            ran = {"bits": bits}
        else:
            ran = {"backend": backend[0], "realize": backend[1]}
        doc = {
            "entry": entry.shown,
            "dims": entry.dims,
            "prefix": dict(entry.prefix),
            **ran,
            "seed": seed,
            "inputs": {n: to_json(entry, t, v) for n, t, v in inputs},
            "result": to_json(entry, rtype, result),
        }
        return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
    lines = []
    if verbose:
        way = "" if backend is None else ", " + " ".join(backend)
        lines.append(header(entry, bits, seed) + way)
        lines.extend(show(entry, t, v, digits, label=n) for n, t, v in inputs)
        lines.append("-- result")
    lines.append(show(entry, rtype, result, digits))
    return "\n".join(lines) + "\n"


__all__ = [
    "Entry",
    "EntryError",
    "RunError",
    "draw",
    "entry_inputs",
    "entry_names",
    "result_text",
    "run_entry",
]
