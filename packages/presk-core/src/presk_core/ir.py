"""PSK-Core: a program as functions, each a flat list of typed instructions.

An instruction binds one value (`%4 : ℝ[batch: B, 1] = sub ŷ, y`): an operation — a
primitive of the registry (`presk_types.rules.PRIMITIVES`) or a structural one below —
of operands (values, or literals), with attributes. Parameter trees are explicit: a
module function takes its tree `θ` first, reads its leaves with `field`, and passes its
sub-modules' subtrees to their functions. Dimensions stay symbolic in the types; a call
says how the callee's dimensions are bound (`call Linear.apply{In = D, Out = 1}(θ, x)`).

Structural operations:
- `call F{bindings}(args)`: a function of the program;
- `fold F{bindings}(tree, x, …)`: `stack{L}(Block)`, the L blocks in sequence, each with
  its slice of the stacked tree (attribute `count`);
- `slice tree, i`: the i-th block's tree of a stacked tree (`--unroll-stack`);
- `field tree.path`: a leaf or a subtree of a parameter tree;
- `tuple a, b`, `get t, i`: tuples;
- `record {w = a, b = c}`: a parameter tree from its leaves and subtrees;
- `fold_key key, "name"`: a key derived from a key and a name (DESIGN §5);
- `cast x`: the same data under another type (an ascription that names axes);
- `init NAME key` (attributes `init`, `std`): a parameter's initializer;
- `grad F(args)`: the gradient of F in its last argument, until differentiation
  (presk-ad) replaces it by generated functions.

Every instruction has a site, `F/%id`: the function that holds it and the id of the value
it binds, unique in the program and kept by every pass (`presk_core.build`). An instruction
a pass made has an origin: the site (or the function) it was made from and the rule that
made it (`vjp of mul`); it carries the span of what it was made from.
"""

from __future__ import annotations

from dataclasses import dataclass

from presk_syntax.span import Span
from presk_types.presburger import Lin
from presk_types.types import Type


@dataclass(frozen=True, slots=True)
class Value:
    id: int
    type: Type
    name: str | None = None

    def __str__(self) -> str:
        return self.name if self.name is not None else f"%{self.id}"


@dataclass(frozen=True, slots=True)
class Lit:
    """A literal operand: an exact number as written (`2`, `1e-6`, `1/3`), or a dimension."""

    text: str
    type: Type

    def __str__(self) -> str:
        return self.text


Operand = Value | Lit


def site_of(function: str, out: Value) -> str:
    """The site of the instruction of `function` that binds `out`: `loss/%6`."""
    return f"{function}/%{out.id}"


@dataclass(frozen=True, slots=True)
class Origin:
    """What a pass made an instruction from: a site (`loss/%5`), or a function's name for
    what it made from the function as a whole, and the rule (`vjp of pow`)."""

    site: str
    rule: str

    def __str__(self) -> str:
        return f"{self.rule}, from {self.site}"


@dataclass(frozen=True, slots=True)
class Instr:
    out: Value
    op: str
    args: tuple[Operand, ...]
    attrs: tuple[tuple[str, object], ...] = ()
    span: Span | None = None
    site: str = ""  # `F/%id`, given by the builder (presk_core.build)
    origin: Origin | None = None  # None for what lowering wrote from the source

    def attr(self, name: str, default: object = None) -> object:
        for k, v in self.attrs:
            if k == name:
                return v
        return default


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    dims: tuple[str, ...]  # the dimensions a call binds
    params: tuple[Value, ...]
    result: Type
    body: tuple[Instr, ...]
    ret: Operand
    effects: tuple[str, ...] = ()
    span: Span | None = None
    defaults: tuple[tuple[str, str], ...] = ()  # hyperparameters' defaults, as written


@dataclass(frozen=True, slots=True)
class Leaf:
    """A leaf of a parameter tree: its path (`blocks.proj.w`), its type in the module's
    dimensions, and the stacks it is in, outermost first, each as the path of the stacked
    sub-module and its count (`("blocks", 3)`): its data has those leading axes."""

    path: str
    type: Type
    stack: tuple[tuple[str, Lin], ...] = ()


@dataclass(frozen=True, slots=True)
class ParamLayout:
    """The parameter tree of a module: `params Linear{In, Out}` is `w`, then `b`."""

    module: str  # the module's key (`Instance.module`: `01_linear.psk:Linear`)
    name: str  # as printed: `Linear`
    dims: tuple[str, ...]  # its dimension parameters
    leaves: tuple[Leaf, ...]


@dataclass(frozen=True, slots=True)
class Training:
    """A checked `training run` of the main file (docs/training.md), as `presk train` runs
    it from the core program: `data` is relative to the main file's folder; `file_type` and
    `bound` are what the data file holds and the dimensions it fixes (T = 256) once the
    checker opened it (else None and empty: the trainer opens it)."""

    model: str  # the model's module, as written
    objective: str  # the objective's function
    optimizer: str
    data: str
    shuffle: int | None
    batch: tuple[tuple[str, int], ...]  # `batch(B = 32)`
    epochs: int | None
    checkpoint: tuple[str, int] | None  # its folder and every how many steps
    batch_type: Type
    sample_type: Type
    file_type: str | None = None
    bound: tuple[tuple[str, int], ...] = ()

    def dims(self) -> dict[str, int]:
        return {**dict(self.batch), **dict(self.bound)}


@dataclass(frozen=True, slots=True)
class Program:
    """The functions, and what the program's consumers need besides them (the checker's
    knowledge, kept): each module's parameter tree, the bounds of the dimensions (`dim T
    <= 1024`; None for none) and the main file's training runs, so that a core document
    is self-contained."""

    functions: tuple[Function, ...]
    layouts: tuple[ParamLayout, ...] = ()
    bounds: tuple[tuple[str, int | None], ...] = ()
    trainings: tuple[Training, ...] = ()
    lowers: tuple[tuple[str, int], ...] = ()  # `dim T >= 2`: the lower bounds above 0

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)

    def layout(self, name: str) -> ParamLayout | None:
        """The layout of the module `name` (its name as written, or its key)."""
        for layout in self.layouts:
            if name in (layout.name, layout.module):
                return layout
        return None


# ---- printing ----------------------------------------------------------------------------


def _bindings(b: tuple[tuple[str, Lin], ...]) -> str:
    return "{" + ", ".join(f"{k} = {v}" for k, v in b) + "}" if b else ""


_LAID_OUT = frozenset({"axes", "shapes", "where", "_align", "_names"})


def _attr(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return "(" + ", ".join(_attr(x) for x in v) + ")"
    return str(v)


def _axes_of(t: Type) -> tuple[bool, tuple]:
    s = getattr(t, "shape", None)
    return (s.prefix, s.axes) if s is not None else (False, ())


def _placed(ins: Instr) -> str:
    """An elementwise instruction's placement of its operands (`_align`), printed when an
    operand does not have the result's axes: ` on [..., Out], [Out]`, each operand's axes as
    the result's axes they go to (a name, or a length, or `@i` for the result's i-th axis
    where two have the same)."""
    maps = ins.attr("_align")
    if maps is None:
        return ""
    prefix, axes = _axes_of(ins.out.type)
    if ins.op == "sum_to":  # x placed among ct's axes
        maps, prefix, axes = (maps,), *_axes_of(ins.args[0].type)
        operands = (ins.args[1],)
    elif ins.op in ("softmax", "log_softmax"):  # the mask among the operand's axes
        maps, operands = (maps,), (ins.args[-1],)
    else:
        operands = ins.args
    labels = [x.name or str(x.length) for x in axes]
    labels = [n if labels.count(n) == 1 else f"@{i}" for i, n in enumerate(labels)]
    if not isinstance(maps, tuple) or len(maps) != len(operands):
        return f" _align {maps!r}"  # malformed (the verifier says so): printed as it is
    shown, trivial = [], True
    for a, where in zip(operands, maps, strict=True):
        own_prefix, own = _axes_of(a.type)
        if where is None or not isinstance(where, tuple):
            shown.append(repr(where))
            trivial = False
            continue
        if own and (own_prefix != prefix or tuple(where) != tuple(range(-len(axes), 0))):
            trivial = False
        names = [_label(labels, p) for p in where]
        if len(where) != len(own):
            trivial = False
        shown.append("[" + ", ".join((["..."] if own_prefix else []) + names) + "]")
    return "" if trivial else " on " + ", ".join(shown)


def _label(labels: list[str], p: object) -> str:
    """The result's axis at placement p; `@p?` where p is not one (an ill-typed instruction,
    which the printer prints all the same)."""
    if isinstance(p, int) and -len(labels) <= p < 0:
        return labels[p]
    return f"@{p}?"


def _relabelled(ins: Instr) -> str:
    """An `ein`'s operands' axes as it names them, printed when they are not the names their
    types give (` as [i, k], [k, j]`); a `spread`'s, its cotangent's then its operand's."""
    names = ins.attr("_names") or ()
    own = [tuple(a.name for a in _axes_of(x.type)[1]) for x in ins.args]
    if ins.op == "spread":
        own = []
    if [tuple(n) for n in names] == own:
        return ""
    return " as " + ", ".join("[" + ", ".join(n) + "]" for n in names)


def format_instr(ins: Instr, sites: bool = False) -> str:
    """One instruction as `presk dump --stage core` prints it; with `sites`, followed by a
    comment with its site and origin (`-- loss.bwd/%9 (vjp of pow, from loss/%5)`). Any
    instruction prints: one whose attributes do not fit its operation (which the verifier
    refuses) as `op operands` then each attribute as it is."""
    try:
        rhs = _rhs(ins)
    except (IndexError, KeyError, TypeError, ValueError, AttributeError):
        args = ", ".join(str(a) for a in ins.args)
        rhs = f"{ins.op} {args}".rstrip() + "".join(f" {k}={v!r}" for k, v in ins.attrs)
    line = f"  {ins.out} : {ins.out.type} = {rhs}"
    if sites:
        line += f"  -- {ins.site}" + (f" ({ins.origin})" if ins.origin is not None else "")
    return line


def _rhs(ins: Instr) -> str:
    args = ", ".join(str(a) for a in ins.args)
    match ins.op:
        case "call" | "grad" | "value_grad":
            rhs = f"{ins.op} {ins.attr('fn')}{_bindings(ins.attr('dims', ()))}({args})"
        case "fold" | "fold_init":
            fn, count = ins.attr("fn"), ins.attr("count")
            rhs = f"{ins.op}{{{count}}} {fn}{_bindings(ins.attr('dims', ()))}({args})"
        case "scan":
            head = f"scan{{{ins.attr('count')}}}[{ins.attr('axes')[0]}"
            head += f", {ins.attr('scanned')} scanned" if ins.attr("scanned") != 1 else ""
            head += ", reverse]" if ins.attr("reverse", False) else "]"
            rhs = f"{head} {ins.attr('fn')}{_bindings(ins.attr('dims', ()))}({args})"
        case "ein":
            rhs = f"ein[{', '.join(ins.attr('axes'))}] {args}{_relabelled(ins)}"
        case "field":
            rhs = f"field {ins.args[0]}.{ins.attr('path')}"
        case "get" | "slice":
            rhs = f"{ins.op} {ins.args[0]}, {ins.attr('index')}"
        case "record":
            rhs = (
                "record {"
                + ", ".join(f"{k} = {a}" for k, a in zip(ins.attr("keys"), ins.args, strict=True))
                + "}"
            )
        case "fold_key":
            rhs = f'fold_key {ins.args[0]}, "{ins.attr("name")}"'
        case "init":
            extra = "".join(f", {k} = {v}" for k, v in ins.attrs if k not in ("init",))
            rhs = f"init {ins.attr('init')}({ins.args[0]}{extra})"
        case "pow" if isinstance(ins.args[1], Lit):
            rhs = f"pow {ins.args[1]} {ins.args[0]}"
        case _:
            shown = [f"axis {a}" for a in ins.attr("axes", ())]
            shown += [f"{k} {_attr(v)}" for k, v in ins.attrs if k not in _LAID_OUT]
            shapes = [f"{n}: {length}" for n, length in ins.attr("shapes", ())]
            operands = [str(a) for a in ins.args]
            if ins.attr("where"):
                operands[-1] = f"where {operands[-1]}"
            head = " ".join([ins.op, *shown])
            rhs = f"{head} {', '.join(shapes + operands)}".rstrip() + _placed(ins)
            rhs += _relabelled(ins) if ins.op == "spread" else ""
    return rhs


def format_function(fn: Function, sites: bool = False) -> str:
    dims = f"{{{' '.join(fn.dims)}}}" if fn.dims else ""
    defaults = dict(fn.defaults)  # a hyperparameter's default, as the source writes it
    params = ", ".join(
        f"{p} : {p.type}" + (f" = {defaults[p.name]}" if p.name in defaults else "")
        for p in fn.params
    )
    uses = f" uses {', '.join(fn.effects)}" if fn.effects else ""
    lines = [f"fn {fn.name}{dims}({params}) -> {fn.result}{uses} {{"]
    lines.extend(format_instr(i, sites) for i in fn.body)
    lines.append(f"  return {fn.ret}")
    lines.append("}")
    return "\n".join(lines)


def format_program(program: Program, sites: bool = False) -> str:
    return "\n".join(format_function(f, sites) for f in program.functions) + "\n"
