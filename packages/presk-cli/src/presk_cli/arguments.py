"""The arguments of an entry called from Python (presk.Entry): each value checked against its
parameter's type, the dimensions solved from the arrays' shapes, and the values put in the
form the reference interpreter or the kernels take.

A real is any array of numbers (as doubles, exactly for floats of 64 bits or fewer), an
index an array of integers below its bound, a truth value an array of bools, a parameter
tree a dict of its leaves (nested by the dots of their paths, or flat with dotted keys), a
tuple a tuple or list, a hyperparameter a Python number (its default when left out), a key
a `presk_core.random.Key`, a pair of words or a seed. A length that is one dimension (`B`)
or an affine function of one (`2·B + 1`) fixes it; every length is then checked against the
dimensions fixed, as `presk run` checks them (E7001; a tree's leaves, as `--weights`: E7060).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from presk_types.presburger import Lin
from presk_types.types import Bool, Idx, KeyT, Machine, ParamsT, Real, TupleT, Type, subst_lin


class ArgumentError(Exception):
    """An argument that does not fit its parameter: its diagnostic's code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Shaped:
    """The arguments checked so far: each parameter's value (numpy for tensors, a flat tree
    in the layout's order for a tree), each length with the dimensions' expression it must
    equal, and the lengths of the open prefix `...` (None: no parameter has one)."""

    values: list = field(default_factory=list)
    lengths: list[tuple[Lin, int, str, str]] = field(default_factory=list)  # (lin, n, where, of)
    prefix: tuple[int, ...] | None = None
    indices: list[tuple[np.ndarray, Lin, str]] = field(default_factory=list)


# ---- binding: positional and keyword arguments to the entry's parameters --------------------

OMITTED = object()
"""A hyperparameter left out: its default."""


def bind(fn, args: tuple, kwargs: dict) -> list:
    """The value of each of `fn`'s parameters, from positional then keyword arguments; a
    hyperparameter with a default may be left out (OMITTED)."""
    params = fn.params
    names = [p.name for p in params]
    shown = ", ".join(names)
    if len(args) > len(params):
        raise ArgumentError(
            "E7001", f"`{fn.name}` takes {len(params)} arguments ({shown}), not {len(args)}"
        )
    values = list(args) + [OMITTED] * (len(params) - len(args))
    for key, value in kwargs.items():
        if key not in names:
            raise ArgumentError("E7001", f"`{fn.name}` has no parameter `{key}`; its: {shown}")
        i = names.index(key)
        if values[i] is not OMITTED:
            raise ArgumentError("E7001", f"`{fn.name}`: `{key}` given twice")
        values[i] = value
    defaults = dict(fn.defaults)
    for p, v in zip(params, values, strict=True):
        if v is OMITTED and not (isinstance(p.type, Machine) and p.name in defaults):
            raise ArgumentError("E7001", f"`{fn.name}`: no value for `{p.name} : {p.type}`")
    return values


# ---- shapes ----------------------------------------------------------------------------------


def shape_arguments(core, fn, values: list) -> Shaped:
    """The values of `fn`'s parameters checked against their types, their lengths noted."""
    shaped = Shaped()
    for p, v in zip(fn.params, values, strict=True):
        shaped.values.append(_shape(core, p.name, p.type, v, shaped))
    return shaped


def _array(name: str, t: Type, value) -> np.ndarray:
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as e:  # a ragged list
        raise ArgumentError("E7001", f"`{name}`: not an array of `{t}`: {e}") from None
    kinds = {Real: "fiub", Idx: "iu", Bool: "b"}[type(t)]
    if arr.dtype.kind not in kinds:
        what = {Real: "numbers", Idx: "integers", Bool: "bools"}[type(t)]
        raise ArgumentError("E7001", f"`{name}`: {arr.dtype} data, and `{t}` takes {what}")
    dtype = {Real: np.float64, Idx: np.int64, Bool: np.bool_}[type(t)]
    return np.ascontiguousarray(arr, dtype=dtype)


def _shape(core, name: str, t: Type, value, shaped: Shaped):
    match t:
        case Real(shape) | Idx(_, shape) | Bool(shape):
            arr = _array(name, t, value)
            rank = len(shape.axes)
            if arr.ndim < rank or (arr.ndim != rank and not shape.prefix):
                raise ArgumentError(
                    "E7001",
                    f"`{name}`: data of shape {_text(arr.shape)}, and `{t}` has"
                    f" {'at least ' if shape.prefix else ''}{rank} axes",
                )
            lead = arr.shape[: arr.ndim - rank]
            if shape.prefix:
                if shaped.prefix is not None and shaped.prefix != lead:
                    raise ArgumentError(
                        "E7001",
                        f"`{name}`: an open prefix `...` of {_text(lead)}, and the arguments"
                        f" before give it {_text(shaped.prefix)}",
                    )
                shaped.prefix = lead
            for i, (axis, n) in enumerate(zip(shape.axes, arr.shape[len(lead) :], strict=True)):
                where = f"`{name}`'s axis {len(lead) + i} (`{axis}`)"
                shaped.lengths.append((axis.length, n, where, f"`{t}`"))
            if isinstance(t, Idx):
                shaped.indices.append((arr, t.bound, name))
            return arr
        case ParamsT():
            return _tree(core, name, t, value, shaped)
        case TupleT(elements):
            if not isinstance(value, (tuple, list)) or len(value) != len(elements):
                raise ArgumentError(
                    "E7001", f"`{name}`: a tuple of {len(elements)} values for `{t}`"
                )
            return tuple(
                _shape(core, f"{name}.{i}", e, v, shaped)
                for i, (e, v) in enumerate(zip(elements, value, strict=True))
            )
        case Machine(kind):
            if value is OMITTED:
                return value
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
                value, (bool, np.bool_)
            )
            if not ok or (kind == "nat" and (int(value) != value or value < 0)):
                raise ArgumentError("E7001", f"`{name}`: `{value!r}` is not a `{kind}`")
            return int(value) if kind == "nat" else float(value)
        case KeyT():
            from presk_core import random as R

            if isinstance(value, R.Key):
                return value
            if isinstance(value, int) and not isinstance(value, bool):
                return R.root_key(value)
            if isinstance(value, (tuple, list)) and len(value) == 2:
                return R.Key(int(value[0]), int(value[1]))
            raise ArgumentError("E7001", f"`{name}`: `{value!r}` is not a key (or a seed)")
    raise ArgumentError("E7001", f"`{name}` of type `{t}` cannot be given from Python")


def flat(tree, path: str = "") -> dict:
    """A tree as its leaves by dotted path: nested dicts flattened, dotted keys kept."""
    out = {}
    for k, v in tree.items():
        key = f"{path}.{k}" if path else str(k)
        if isinstance(v, dict):
            out.update(flat(v, key))
        else:
            out[key] = v
    return out


def nested(tree: dict) -> dict:
    """A flat tree (dotted paths) as nested dicts."""
    out: dict = {}
    for path, v in tree.items():
        *heads, last = path.split(".")
        at = out
        for h in heads:
            at = at.setdefault(h, {})
        at[last] = v
    return out


def _tree(core, name: str, t: ParamsT, value, shaped: Shaped) -> dict:
    inst = t.instance
    if inst.stack is not None:
        raise ArgumentError("E7060", f"`{name} : {t}` is a stacked tree")
    layout = core.layout(inst.module)
    if not isinstance(value, dict):
        raise ArgumentError("E7060", f"`{name}`: a {type(value).__name__}, and `{t}` is a tree")
    given = flat(value)
    paths = [leaf.path for leaf in layout.leaves]
    extra = [p for p in given if p not in paths]
    lacking = [p for p in paths if p not in given]
    if extra or lacking:
        what = f"a leaf `{extra[0]}` that" if extra else f"no leaf `{lacking[0]}`, which"
        raise ArgumentError(
            "E7060",
            f"`{name}` has {what} `{t}` has (its leaves: {', '.join(paths)})",
        )
    values = dict(zip(layout.dims, inst.args, strict=False))
    out = {}
    for leaf in layout.leaves:
        arr = _array(f"{name}.{leaf.path}", leaf.type, given[leaf.path])
        lengths = [subst_lin(c, values) for _, c in leaf.stack]
        lengths += [subst_lin(a.length, values) for a in leaf.type.shape.axes]
        if arr.ndim != len(lengths):
            raise ArgumentError(
                "E7060",
                f"`{name}.{leaf.path}` is {_text(arr.shape)}, and the leaf of `{t}` has"
                f" {len(lengths)} axes",
            )
        for i, (lin, n) in enumerate(zip(lengths, arr.shape, strict=True)):
            shaped.lengths.append((lin, n, f"`{name}.{leaf.path}`'s axis {i}", TREE))
        out[leaf.path] = arr
    return out


def _text(shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


# ---- dimensions ------------------------------------------------------------------------------


TREE = "the tree's leaf"


def solve(lengths: list[tuple], known: dict[str, int]) -> dict[str, int]:
    """The dimensions the lengths, each `(lin, n, …)`, fix beside `known`: a length whose
    expression has one dimension not yet known gives it when it divides out to a natural;
    repeated until none is fixed. Lengths that contradict are left for `check` (`presk
    serve`'s checkpoint leaves are solved here too)."""
    known = dict(known)
    while True:
        fixed = False
        for lin, n, *_ in lengths:
            unknown = [(d, c) for d, c in lin.coeffs if d not in known]
            if len(unknown) != 1:
                continue
            (d, c), rest = unknown[0], lin.constant
            rest += sum(k * known[e] for e, k in lin.coeffs if e != d)
            if (n - rest) % c == 0 and (n - rest) // c >= 0:
                known[d] = (n - rest) // c
                fixed = True
        if not fixed:
            return known


def check(shaped: Shaped, dims: dict[str, int]) -> None:
    """Every length against the dimensions (E7001, a tree's leaf E7060), every index below
    its bound (E7003, as the kernels' gathers say it)."""
    at = ", ".join(f"{d} = {v}" for d, v in dims.items())
    for lin, n, where, of in shaped.lengths:
        if lin.names - set(dims):
            continue  # a dimension the entry does not need (a tree's own): its data decide
        expected = lin.value(dims)
        if expected != n:
            code = "E7060" if of is TREE else "E7001"
            raise ArgumentError(
                code, f"{where} is {n} long, and {of} has {expected} at {at or 'its sizes'}"
            )
    for arr, bound, name in shaped.indices:
        n = bound.value(dims)
        if arr.size and (arr.min() < 0 or arr.max() >= n):
            bad = arr.max() if arr.max() >= n else arr.min()
            raise ArgumentError("E7003", f"`{name}`: index {bad} out of range for `idx[{n}]`")


# ---- the values each executor takes -----------------------------------------------------------


def interp_values(fn, values: list, bits: int) -> list:
    """The arguments as the reference interpreter takes them: reals as mpfr at `bits`."""
    import gmpy2
    from presk_core.run import interp_real

    defaults = dict(fn.defaults)

    def conv(name: str, t: Type, v):
        match t:
            case Real():
                return interp_real(v, bits)
            case ParamsT():
                return {k: interp_real(x, bits) for k, x in v.items()}
            case TupleT(elements):
                return tuple(conv(name, e, x) for e, x in zip(elements, v, strict=True))
            case Machine(kind) if v is OMITTED:  # as `presk run` draws it
                text = defaults[name]
                return gmpy2.mpfr(text) if kind == "f64" else int(text)
            case Machine(kind):
                return gmpy2.mpfr(v) if kind == "f64" else v
        return v

    return [conv(p.name, p.type, v) for p, v in zip(fn.params, values, strict=True)]


def kernel_values(fn, values: list) -> list:
    """The arguments as the kernels' lowering takes them (a hyperparameter left out: its
    default, which the lowering reads)."""
    from presk_kernel.lower import NO_VALUE

    return [NO_VALUE if v is OMITTED else v for v in values]


def to_numpy(value):
    """A result as Python gets it: reals as float64 arrays (the interpreter's rounded to the
    nearest double, a realization's widened exactly), trees as nested dicts."""
    match value:
        case dict():
            return nested({k: to_numpy(v) for k, v in value.items()})
        case tuple():
            return tuple(to_numpy(v) for v in value)
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind == "f":
        return arr.astype(np.float64)
    return arr


__all__ = [
    "ArgumentError",
    "OMITTED",
    "Shaped",
    "bind",
    "check",
    "flat",
    "interp_values",
    "kernel_values",
    "nested",
    "shape_arguments",
    "solve",
    "to_numpy",
]
