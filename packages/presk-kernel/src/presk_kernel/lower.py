"""Lowering: a PSK-Core entry at the shapes of a run, as the kernels it launches in order.

`lower_entry` specializes the entry (presk_core.specialize: every shape static), then walks
it as a host program would: calls inlined, structural operations (`field`, `record`,
`tuple`, `get`, `slice`, `cast`, …) resolved on the host as views of buffers, and each
tensor operation lowered to one kernel (or a few: an `ein` summing an axis of one operand
alone sums it first, as the reference does) at the site that computes it (`attend/%5`).
The kind of each operation (`KINDS`) says how: elementwise, reduction, contraction,
gather/scatter, layout, random, structural, tree.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

import gmpy2
import numpy as np
from presk_core.ir import Function, Instr, Lit, Program, Value
from presk_core.random import Key
from presk_core.specialize import SpecializeError, specialize
from presk_core.trees import record, under
from presk_core.unroll import unroll_scans
from presk_types.ops import OPS
from presk_types.presburger import Lin
from presk_types.shapes import alignment
from presk_types.types import (
    SCALAR,
    Bool,
    Idx,
    KeyT,
    Machine,
    ParamsT,
    Real,
    Shape,
    TupleT,
    Type,
    shape_of,
    subst,
    subst_lin,
)

from presk_kernel import nests as N
from presk_kernel.calls import Recorder, host_schedule
from presk_kernel.ir import (
    REAL_DTYPES,
    Affine,
    Arg,
    Axis,
    Buffer,
    Call,
    Const,
    Expr,
    HostBuffer,
    Kernel,
    Launch,
    Load,
    Schedule,
    Store,
    elements,
)
from presk_kernel.layout import natural_layout
from presk_kernel.realization import (
    Realization,
    RealizationError,
    as_realization,
    compute_type,
    convert_loads,
    function_of,
    narrowable_sites,
)
from presk_kernel.spec import verified

KINDS: dict[str, str] = {name: str(op.kind) for name, op in OPS.items()}
"""The kind of every operation of PSK-Core, from the registry (presk_types.ops)."""

F64_CONTEXT = {"precision": 53, "emin": -1073, "emax": 1024, "subnormalize": True}
F32_CONTEXT = {"precision": 24, "emin": -148, "emax": 128, "subnormalize": True}


class LowerError(Exception):
    """An entry that cannot be lowered to kernels (E7002), or under its realization (the
    realization's code: E7035-E7039)."""

    code = "E7002"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


@dataclass(frozen=True, slots=True)
class Tensor:
    """A host value: a tensor held in a host buffer from element `offset` on."""

    buf: int
    offset: int
    axes: tuple[Axis, ...]
    dtype: str

    @property
    def size(self) -> int:
        return elements(self.axes)

    def named(self, axes: tuple[Axis, ...]) -> Tensor:
        return Tensor(self.buf, self.offset, axes, self.dtype)


@dataclass(frozen=True, slots=True)
class Known:
    """A real number known when lowering: a literal, or a hyperparameter's value."""

    text: str


def constant(text: str | int | float, compute: str) -> Const:
    """`text` (a rational, `π`, `-inf`, `sqrt1/2`, `sqrt2pi`) rounded once to `compute`."""
    with gmpy2.context(**(F64_CONTEXT if compute == "f64" else F32_CONTEXT)):
        match text:
            case "π":
                v = gmpy2.const_pi()
            case "-inf" | "inf":
                v = gmpy2.mpfr(text)
            case "sqrt1/2" | "sqrt2pi":
                with gmpy2.context(precision=256):
                    exact = gmpy2.sqrt(
                        gmpy2.mpfr(1) / 2 if text == "sqrt1/2" else 2 * gmpy2.const_pi()
                    )
                v = gmpy2.mpfr(exact)
            case _:
                q = Fraction(str(text))
                v = gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))
        return Const(float(v), compute)


def axes_of(t: Type) -> tuple[Axis, ...]:
    s = shape_of(t) or SCALAR
    if s.prefix or any(not a.length.is_const for a in s.axes):
        raise LowerError(f"`{t}` is not a static shape: specialize the entry first")
    return tuple(Axis(a.name, a.length.constant) for a in s.axes)


def explicit(t: Type) -> Shape:
    return shape_of(t) or SCALAR


class Nest:
    """A kernel being built: its inputs (declared first), outputs, fresh names."""

    def __init__(self, lowering: Lowering, name: str, site: str) -> None:
        self.lowering, self.name, self.site = lowering, name, site
        self.compute = lowering.compute_at(site)
        self.buffers: list[Buffer] = []
        self.args: list[Arg] = []
        self.n_inputs: int | None = None
        self.result: Tensor | None = None
        self._names = itertools.count()

    def input(self, t: Tensor) -> int:
        assert self.n_inputs is None, "a nest declares its inputs before its outputs"
        for b, a in zip(self.buffers, self.args, strict=True):
            if a == Arg(t.buf, t.offset) and b.axes == t.axes:
                return b.id
        return self._add(t)

    def _add(self, t: Tensor) -> int:
        self.buffers.append(Buffer(len(self.buffers), t.dtype, t.axes))
        self.args.append(Arg(t.buf, t.offset))
        return len(self.buffers) - 1

    def output(self, axes: tuple[Axis, ...], dtype: str) -> int:
        if self.n_inputs is None:
            self.n_inputs = len(self.buffers)
        t = self.lowering.alloc(axes, dtype, self.site)
        self.result = t
        return self._add(t)

    def output_into(self, t: Tensor) -> int:
        if self.n_inputs is None:
            self.n_inputs = len(self.buffers)
        self.result = t
        return self._add(t)

    def var(self) -> str:
        return f"i{next(self._names)}"

    def vars(self, n: int) -> list[str]:
        return [self.var() for _ in range(n)]

    def temp(self) -> str:
        return f"s{next(self._names)}"

    def const(self, v) -> Const:
        return constant(v, self.compute)

    def load(self, buf: int, index: tuple) -> Expr:
        return Load(buf, index)

    def finish(self, body: list) -> Tensor:
        body = convert_loads(tuple(body), self.buffers, self.compute)
        k = Kernel(
            self.name,
            self.site,
            tuple(self.buffers[: self.n_inputs]),
            tuple(self.buffers[self.n_inputs :]),
            body,
            self.compute,
        )
        k = replace(k, layout=natural_layout(k))  # the `layout` pass chooses
        self.lowering.launches.append(Launch(k, tuple(self.args)))
        return self.result


@dataclass
class InstrLowering:
    """One instruction being lowered: its operands' host values and how to build kernels."""

    lowering: Lowering
    ins: Instr
    site: str
    values: list
    _input_ids: dict[int, int] = field(default_factory=dict)

    @property
    def compute(self) -> str:
        return self.lowering.compute_at(self.site)

    def nest(self, name: str | None = None) -> Nest:
        return Nest(self.lowering, name or kernel_name(self.ins), self.site)

    def out_axes(self, t: Type | None = None) -> tuple[Axis, ...]:
        return axes_of(self.ins.out.type if t is None else t)

    def out_dtype(self, t: Type | None = None) -> str:
        return self.lowering.dtype_of(self.ins.out.type if t is None else t, self.site)

    def like(self, dtype: str) -> str:
        """An operand's storage type as this step stores it: a real in the site's type."""
        return self.lowering.type_at(self.site) if dtype in REAL_DTYPES else dtype

    def tensor(self, i: int) -> Tensor:
        v = self.values[i]
        if not isinstance(v, Tensor):
            raise LowerError(f"`{self.ins.op}` needs a tensor as operand {i + 1}")
        return v

    def axis(self, i: int, name: str) -> int:
        return explicit(self.ins.args[i].type).axis(name)

    def operand(self, k: Nest, i: int, out_vars: list[str], out_axes, align=None) -> Expr:
        """Operand i read at the result's element `out_vars`, broadcast as the checker
        aligned it (by trailing position or by name; `_align` when given)."""
        v = self.values[i]
        if isinstance(v, Known):
            return k.const(v.text)
        src = explicit(self.ins.args[i].type)
        dst = Shape(False, tuple(explicit(self.ins.out.type).axes))
        where = align if align is not None else alignment(src, dst)
        idx = []
        for ax, p in zip(v.axes, where, strict=True):
            r = len(out_axes) + p
            idx.append(Affine.constant(0) if ax.length == 1 != out_axes[r].length else out_vars[r])
        return k.load(self._input_ids[i], N.at(idx))

    def inputs(self, k: Nest, which: list[int] | None = None) -> None:
        self._input_ids = {}
        for i, v in enumerate(self.values):
            if isinstance(v, Tensor) and (which is None or i in which):
                self._input_ids[i] = k.input(v)


def kernel_name(ins: Instr) -> str:
    match ins.op:
        case "ein":
            return f"ein[{', '.join(ins.attr('axes'))}]"
        case "pow" if isinstance(ins.args[1], Lit):
            return f"pow {ins.args[1]}"
        case "compare":
            return f"compare {ins.attr('op')}"
    axes = ins.attr("axes", ())
    return " ".join([ins.op, *(f"axis {a}" for a in axes)]) if axes else ins.op


@dataclass
class Lowering:
    """The host walk of an entry: `realize` the type of every real that `site_types` (a
    type per site) and `param_types` (per parameter path) do not give."""

    program: Program
    realize: str = "f64"
    buffers: list[HostBuffer] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    site_types: Mapping[str, str] = field(default_factory=dict)
    param_types: Mapping[str, str] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)  # the trees' parameter paths, in order
    recorder: Recorder = field(default_factory=Recorder)  # the calls made, kept or inlined
    calls: Call | None = None  # the last call recorded: the entry's, once lowered

    @property
    def compute(self) -> str:
        return compute_type(self.realize)

    def type_at(self, site: str) -> str:
        """The storage type of the reals computed at `site`."""
        return self.site_types.get(site, self.realize)

    def compute_at(self, site: str) -> str:
        """The type the nests of `site` compute in (bf16's is f32)."""
        return compute_type(self.type_at(site))

    def dtype_of(self, t: Type, site: str | None = None) -> str:
        match t:
            case Real():
                return self.realize if site is None else self.type_at(site)
            case Idx():
                return "i64"
            case Bool():
                return "bool"
        raise LowerError(f"`{t}` is not a tensor type")

    def alloc(self, axes, dtype: str, name: str, role: str = "temp") -> Tensor:
        self.buffers.append(HostBuffer(len(self.buffers), dtype, tuple(axes), name, role))
        return Tensor(len(self.buffers) - 1, 0, tuple(axes), dtype)

    # ---- the host walk ----

    def recorded(self, fn: Function, args: list) -> object:
        """`call`, recorded as a call of the host (presk_kernel.calls) or inlined."""
        rec = self.recorder
        rec.enter(fn.name, _args(args), len(self.launches), len(self.buffers))
        result = self.call(fn, args)
        known = isinstance(result, Known) or any(isinstance(v, Known) for v in _all(result))
        results = _args(result)
        sizes = [elements(b.axes) for b in self.buffers]
        self.calls = rec.leave(len(self.launches), results, known, sizes)
        return result

    def call(self, fn: Function, args: list) -> object:
        env: dict[int, object] = {p.id: a for p, a in zip(fn.params, args, strict=True)}

        def read(a):
            if isinstance(a, Lit):
                return Known(a.text)
            return env[a.id]

        for ins in fn.body:
            values = [read(a) for a in ins.args]
            site = site_in_source(fn, ins)
            env[ins.out.id] = self.instruction(ins, values, site)
        return read(fn.ret)

    def instruction(self, ins: Instr, values: list, site: str) -> object:
        kind = KINDS.get(ins.op, "unknown")
        host = HOST.get(ins.op)
        if host is not None:  # structural and tree operations: the host's work
            return host(self, ins, values)
        rule = RULES.get(ins.op)
        if rule is None:
            raise LowerError(f"`{ins.op}` ({kind}) has no loop nest in this presk-kernel")
        if ins.op == "real" and isinstance(values[0], Known):
            return values[0]
        return rule(InstrLowering(self, ins, site, values))


def site_in_source(fn: Function, ins: Instr) -> str:
    """The site of the program as written (`scores/%2`) that an instruction computes: a
    specialized copy's origin, else its own site."""
    origin = getattr(ins, "origin", None)
    if origin is not None and origin.rule == "specialize":
        return origin.site
    return getattr(ins, "site", "") or f"{fn.name}/%{ins.out.id}"


# ---- host work ---------------------------------------------------------------------------


def _rename(ins: Instr, v: object) -> object:
    if isinstance(v, Tensor) and shape_of(ins.out.type) is not None:
        axes = axes_of(ins.out.type)
        if [a.length for a in axes] != [a.length for a in v.axes]:
            raise LowerError(f"`{ins.op}` gives `{ins.out.type}` of data of shape {v.axes}")
        return v.named(axes)
    return v


def _field(lw: Lowering, ins: Instr, values: list) -> object:
    tree, path = values[0], ins.attr("path")
    if path in tree:
        return _rename(ins, tree[path])
    return under(tree, path)


def _record(lw: Lowering, ins: Instr, values: list) -> object:
    return record(ins.attr("keys"), values)


def _slice(lw: Lowering, ins: Instr, values: list) -> object:
    i = ins.attr("index")
    out = {}
    for path, t in values[0].items():
        inner = t.named(t.axes[1:])
        out[path] = Tensor(t.buf, t.offset + i * inner.size, t.axes[1:], t.dtype)
    return out


def _call(lw: Lowering, ins: Instr, values: list) -> object:
    fn = lw.program.function(ins.attr("fn"))
    return _rename(ins, lw.recorded(fn, values))


HOST: dict[str, Callable] = {
    "call": _call,
    "field": _field,
    "record": _record,
    "slice": _slice,
    "tuple": lambda lw, ins, values: tuple(values),
    "get": lambda lw, ins, values: _rename(ins, values[0][ins.attr("index")]),
    "cast": lambda lw, ins, values: _rename(ins, values[0]),
    "stop_grad": lambda lw, ins, values: _rename(ins, values[0]),  # elided: the identity
}


# ---- the entry ---------------------------------------------------------------------------


NO_VALUE = object()
"""An argument lowered from its type alone (`lower_entry` without `args`)."""


def tree_shapes(program: Program, t: ParamsT) -> dict[str, tuple[int, ...]]:
    """The leaves of a tree of type `params M{…}` as their paths and shapes, from the
    program's layout of M (`Program.layouts`): a leaf's stacks' counts, then its axes."""
    inst = t.instance
    if inst.stack is not None:
        raise LowerError(f"`{t}`: a stacked tree as an argument of the entry")
    layout = program.layout(inst.module)
    if layout is None:
        raise LowerError(f"`{t}`: the core document has no layout of `{inst.name}`")
    values = {d: Lin.const(a.value({})) for d, a in zip(layout.dims, inst.args, strict=True)}
    out: dict[str, tuple[int, ...]] = {}
    for leaf in layout.leaves:
        counts = [subst_lin(c, values) for _, c in leaf.stack]
        if any(not c.is_const for c in counts):
            raise LowerError(f"`{t}`: the stack of `{leaf.path}` has no static count")
        lead = tuple(c.constant for c in counts)
        out[leaf.path] = lead + tuple(a.length for a in axes_of(subst(leaf.type, values)))
    return out


def _inputs(lw: Lowering, name: str, t: Type, value: object, defaults: dict) -> object:
    """Host buffers for an argument of the entry, at the shapes of its type (a tree's from
    the program's layout of its module); a hyperparameter is its value when the run gives
    one, else its default. A given value of another shape is an error."""
    match t:
        case ParamsT():
            shapes = tree_shapes(lw.program, t)
            lw.paths.extend(k for k in shapes if k not in lw.paths)
            if value is not NO_VALUE:
                given = {k: tuple(np.shape(v)) for k, v in value.items()}
                if given != shapes:
                    raise LowerError(f"`{name}`: a tree of shapes {given}, not `{t}`'s {shapes}")
            return {
                k: lw.alloc(
                    tuple(Axis(None, n) for n in s),
                    lw.param_types.get(k, lw.realize),
                    f"{name}.{k}",
                    "input",
                )
                for k, s in shapes.items()
            }
        case TupleT(elements):
            parts = (NO_VALUE,) * len(elements) if value is NO_VALUE else value
            return tuple(
                _inputs(lw, f"{name}.{i}", e, v, defaults)
                for i, (e, v) in enumerate(zip(elements, parts, strict=True))
            )
        case Real() | Idx() | Bool():
            axes = axes_of(t)
            if value is not NO_VALUE and tuple(np.shape(value)) != tuple(a.length for a in axes):
                raise LowerError(f"`{name}`: data of shape {np.shape(value)}, not `{t}`")
            return lw.alloc(axes, lw.dtype_of(t), name, "input")
        case Machine():
            if value is NO_VALUE:
                if name not in defaults:
                    raise LowerError(f"`{name}`: a hyperparameter `{t}` needs a value or a default")
                text = defaults[name]
                value = float(Fraction(text)) if t.name == "f64" else int(text)
            if isinstance(value, int) and not isinstance(value, bool):
                return Known(str(value))
            return Known(str(Fraction(float(value))))
        case KeyT():  # its two uint32 words in an i64[2] buffer (presk_kernel.draws)
            if value is not NO_VALUE and (
                len(value) != 2 or not all(0 <= w < 2**32 for w in value)
            ):
                raise LowerError(f"`{name}`: a key is two uint32 words, not {value!r}")
            return lw.alloc((Axis(None, 2),), "i64", name, "input")
    raise LowerError(f"`{name}` of type `{t}` is not an input a kernel can read")


def _all(value: object) -> list:
    """Every leaf of a host value: tensors, numbers known when lowering, keys."""
    match value:
        case dict():
            return [x for v in value.values() for x in _all(v)]
        case tuple() | list():
            return [x for v in value for x in _all(v)]
    return [value]


def _args(values: object) -> list[tuple]:
    """The tensor leaves of a host value as the calls' recorder takes them."""
    return [(t.buf, t.offset, t.dtype, t.axes) for t in leaves(values)]


def leaves(value: object) -> list[Tensor]:
    match value:
        case dict():
            return [x for v in value.values() for x in leaves(v)]
        case tuple() | list():
            return [x for v in value for x in leaves(v)]
        case Tensor():
            return [value]
    return []


def argument_leaves(args: list) -> list:
    """The entry's arguments as the arrays its input buffers take, in the schedule's order
    (`Schedule.inputs`): trees and tuples flattened, a key as its two words (int64),
    machine numbers left out."""
    if isinstance(args, Key):
        return [np.array(args, dtype=np.int64)]
    match args:
        case dict():
            return [x for v in args.values() for x in argument_leaves(v)]
        case tuple() | list():
            return [x for v in args for x in argument_leaves(v)]
        case np.ndarray():
            return [args]
    return []


def lower_entry(
    program: Program,
    entry: str,
    dims: dict[str, int],
    args: list | None = None,
    realize: str | Realization = "f64",
) -> Schedule:
    """The kernels `entry` launches at `dims`, from the core document alone: the inputs'
    shapes from their types at `dims` (a parameter tree's from the program's layout of its
    module), a hyperparameter at its default. `args`, the run's inputs when the caller has
    them, give the hyperparameters' values and are checked against those shapes.
    `realize` is the realization: a type name (f64, f32, bf16: every real in it) or a
    `Realization` (a type per narrowable site, parameter path and function: see
    `realized_types`); a realization that does not fit the entry is a RealizationError."""
    try:
        r = as_realization(realize)
        if r == Realization.uniform(r.default):
            return verified(_lower(program, entry, dims, args, r.default)[0], "kernel")
        sites, params = realized_types(program, entry, dims, args, r)
    except RealizationError as e:
        raise LowerError(str(e), e.code) from None
    schedule = _lower(program, entry, dims, args, r.default, sites, params)[0]
    return verified(schedule, "kernel")  # PRESK_VERIFY=1: the verifier after lowering


def realized_types(
    program: Program, entry: str, dims: dict[str, int], args: list | None, r: Realization
) -> tuple[dict[str, str], dict[str, str]]:
    """The type of every site with a kernel and of every parameter path under `r`, checked
    against the entry: the entry lowered in one type, fused, and each fusion group's sites
    given its narrowable site's type (a member is computed in its root's type, L906)."""
    schedule, lw = _lower(program, entry, dims, args, r.default)
    sites = narrowable_sites(schedule)
    functions = {f.name for f in program.functions} | {function_of(s) for s in sites.root}
    r.check(sites.narrowable, sites.members, lw.paths, functions, sites.root)
    types = {site: r.site_type(root) for site, root in sites.root.items()}
    return types, {path: r.param_type(path) for path in lw.paths}


def _lower(
    program: Program,
    entry: str,
    dims: dict[str, int],
    args: list | None,
    realize: str,
    site_types: Mapping[str, str] | None = None,
    param_types: Mapping[str, str] | None = None,
) -> tuple[Schedule, Lowering]:
    try:
        spec = unroll_scans(specialize(program, entry, dims))  # a scan's steps, written out
    except SpecializeError as e:
        raise LowerError(str(e)) from None
    fn = spec.functions[0]
    lw = Lowering(spec, realize, site_types=site_types or {}, param_types=param_types or {})
    given = [NO_VALUE] * len(fn.params) if args is None else list(args)
    if len(given) != len(fn.params):
        raise LowerError(f"`{entry}` takes {len(fn.params)} arguments, not {len(given)}")
    defaults = dict(fn.defaults)
    values = [
        _inputs(lw, str(p), p.type, a, defaults) for p, a in zip(fn.params, given, strict=True)
    ]
    inputs = [t.buf for t in leaves(values)]
    result = lw.recorded(fn, values)
    body, called = lw.calls, len(lw.launches)
    outs = leaves(result)
    if isinstance(result, Known):
        step = InstrLowering(
            lw, Instr(Value(-1, Real(SCALAR)), "real", ()), f"{entry}/return", [result]
        )
        outs = [_fill(step, result)]
    results = tuple(Arg(t.buf, t.offset) for t in outs)
    body = replace(body, results=results, body=body.body + tuple(range(called, len(lw.launches))))
    schedule = Schedule(
        entry,
        tuple(sorted(dims.items())),
        tuple(lw.buffers),
        tuple(lw.launches),
        tuple(inputs),
        tuple(t.buf for t in outs),
    )
    if isinstance(result, Known):  # the entry's only launch is its fill: no call to keep
        return schedule, lw
    return host_schedule(schedule, body, lw.recorder), lw


def _fill(step: InstrLowering, value: Known) -> Tensor:
    k = step.nest("fill")
    out = k.output((), step.lowering.type_at(step.site))
    return k.finish([Store(out, (), k.const(value.text))])


__all__ = [
    "KINDS",
    "argument_leaves",
    "Known",
    "LowerError",
    "Lowering",
    "Tensor",
    "leaves",
    "lower_entry",
    "realized_types",
    "tree_shapes",
]

from presk_kernel.draws import DRAWS  # noqa: E402
from presk_kernel.moves import MOVES  # noqa: E402  (the rules use the classes above)
from presk_kernel.rules import NESTS  # noqa: E402

RULES = {**NESTS, **MOVES, **DRAWS}
"""The loop nest of every tensor operation (the structural ones are the host's: HOST)."""
