"""The PyTorch of each primitive: one rule per name of the registry
(`presk_types.rules.PRIMITIVES`) and of the operations differentiation writes
(`presk_types.ops.ADJOINT_OPS`, presk_export.adjoint_rules), as the interpreter has one
MPFR rule per name.

A rule takes the function's `Body` (for its operands, laid out for broadcasting, and the
imports it needs) and the instruction, and returns the Python expression of its value.
The choices follow the interpreter's semantics (presk-core's `mpfr.py`): gelu is the erf
form, a masked softmax excludes the masked positions, `max` over an axis is the value at
the first extremum (`.max(dim=…).values`), so that autograd gives it the cotangent.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from presk_core.ir import Instr
from presk_types.presburger import Lin
from presk_types.types import Machine, Shape, shape_of

from presk_export.adjoint_rules import (
    ADJOINT_TORCH_RULES,
    gathers_along,
    general_take,
    same_places,
    tree_record,
    tree_slice,
)
from presk_export.conv_export import conv1d
from presk_export.pyexpr import (
    ADD,
    ATOM,
    CMP,
    MUL,
    POW,
    UNARY,
    ExportError,
    Expr,
    axis_index,
    binary,
    call,
    lin,
    method,
)

if TYPE_CHECKING:
    from presk_export.body import Body

Rule = Callable[["Body", Instr], Expr]


def _binary(op: str, prec: int) -> Rule:
    def rule(b: Body, ins: Instr) -> Expr:
        x, y = b.aligned(ins)
        return binary(x, op, y, prec)

    return rule


def _pow(b: Body, ins: Instr) -> Expr:
    x, y = b.operands(ins)
    return binary(x, "**", y, POW, right_assoc=True)


def _neg(b: Body, ins: Instr) -> Expr:
    (x,) = b.operands(ins)
    return Expr(f"-{x.at(UNARY)}", UNARY, x.scalar)


def _dot(b: Body, ins: Instr) -> Expr:
    x, w = b.operands(ins)
    if b.rank(ins.args[1]) <= 2:
        return binary(x, "@", w, MUL)
    return call("torch.tensordot", x, w, "dims=1")


def _letters(names: list[tuple[str, ...]]) -> dict[str, str]:
    """A letter per axis name for einsum: its initial when free (`seq2`, a relabelled `seq`,
    takes the letter after `seq`'s), else one of its letters, else the first free one."""
    out: dict[str, str] = {}
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    for n in (n for group in names for n in group):
        if n in out:
            continue
        taken = set(out.values())
        own = [c for c in n.lower() if c in alphabet]
        after = alphabet[alphabet.index(own[0]) + 1 :] if own and n[-1].isdigit() else ""
        out[n] = next(c for c in [*own[:1], *after, *own, *alphabet] if c not in taken)
    return out


def _add(b: Body, ins: Instr) -> Expr:
    """`+`, or the `add` that ends a convolution's taps: `F.conv1d` (presk_export.conv_export)."""
    return conv1d(b, ins) or _binary("+", ADD)(b, ins)


def _ein(b: Body, ins: Instr) -> Expr:
    names: tuple[tuple[str, ...], ...] = ins.attr("_names")
    out: tuple[str, ...] = ins.attr("axes")
    xs = b.operands(ins)
    prefix = any(b.shape(a).prefix for a in ins.args)
    if len(xs) == 1 and sorted(names[0]) == sorted(out) and not prefix:
        perm = [names[0].index(n) for n in out]
        return xs[0] if perm == sorted(perm) else method(xs[0], "permute", *perm)
    letters = _letters([*names, out])
    dots = "..." if prefix else ""
    spec = ",".join(dots + "".join(letters[n] for n in group) for group in names)
    spec += "->" + dots + "".join(letters[n] for n in out)
    return call("torch.einsum", f'"{spec}"', *xs)


def _unary(torch_fn: str, math_fn: str | None = None) -> Rule:
    def rule(b: Body, ins: Instr) -> Expr:
        (x,) = b.operands(ins)
        if x.scalar and math_fn is not None:
            if math_fn.startswith("math."):
                b.imports.add("math")
            return call(math_fn, x, scalar=True)
        if x.scalar:
            x = call("torch.tensor", x)
        if torch_fn.startswith("F."):
            b.imports.add("F")
        return call(torch_fn, x)

    return rule


def _pair(torch_fn: str, number_fn: str) -> Rule:
    """`max(a, b)`: torch.maximum of two tensors; a number (`max(z, 0)`) made a tensor
    (torch.maximum takes no number, and clamp splits no gradient at a tie as the interpreter
    does); two numbers, Python's `max`."""

    def rule(b: Body, ins: Instr) -> Expr:
        x, y = b.aligned(ins)
        if x.scalar and y.scalar:
            return call(number_fn, x, y, scalar=True)
        x, y = (call("torch.tensor", v) if v.scalar else v for v in (x, y))
        return call(torch_fn, x, y)

    return rule


def _reduce(name: str, whole: str) -> Rule:
    def rule(b: Body, ins: Instr) -> Expr:
        (x,) = b.operands(ins)
        if not ins.attr("axes"):
            return method(x, whole)
        return method(x, name, f"dim={b.axis(ins)}")

    return rule


def _extremum(name: str) -> Rule:
    """`max`/`min` as the values of `torch.max(dim=…)`: their gradient goes to the index it
    returns, the first extremum, as Presk's (docs/language.md, "Kinks"), where `amax` and
    a whole `x.max()` split it among tied elements. Over every axis: of the flattened x."""

    def rule(b: Body, ins: Instr) -> Expr:
        (x,) = b.operands(ins)
        if not ins.attr("axes"):
            return Expr(f"{method(x, 'flatten').at(ATOM)}.{name}(dim=0).values")
        return Expr(f"{method(x, name, f'dim={b.axis(ins)}').at(ATOM)}.values")

    return rule


def _softmax(torch_fn: str, empty: str) -> Rule:
    """A masked softmax excludes the masked positions; a row that allows nothing is 0 (and
    its log_softmax −inf), as the interpreter and PyTorch's scaled_dot_product_attention
    (`_safe_softmax`) make it, not the NaN of softmax over −infs. A causal mask always
    allows the diagonal: no second fill."""

    def rule(b: Body, ins: Instr) -> Expr:
        xs = b.operands(ins)
        x = xs[0]
        if not ins.attr("where"):
            return call(torch_fn, x, f"dim={b.axis(ins)}")
        b.imports.add("math")
        mask = b.placed(xs[-1], ins.args[-1], ins.args[0])
        causal = _made_by(b, ins.args[-1]) == "causal_mask"
        if not causal and mask.prec < ATOM:
            name = b.fresh("_mask")
            b.emit(f"{name} = {mask}")
            mask = Expr(name)
        x = method(x, "masked_fill", f"~{mask.at(UNARY)}", "-math.inf")
        out = call(torch_fn, x, f"dim={b.axis(ins)}")
        return out if causal else method(out, "masked_fill", f"~{mask.at(UNARY)}", empty)

    return rule


def _made_by(b: Body, a) -> str | None:
    """The operation that computed operand `a` in the function (None: an argument)."""
    return next((ins.op for ins in b.fn.body if ins.out == a), None)


def _causal_mask(b: Body, ins: Instr) -> Expr:
    ((_, length),) = ins.attr("shapes")
    n = b.length(length)
    return method(call("torch.ones", n, n, "dtype=torch.bool"), "tril")


def _compare(b: Body, ins: Instr) -> Expr:
    x, y = b.aligned(ins)
    return binary(x, ins.attr("op"), y, CMP)


def _select(b: Body, ins: Instr) -> Expr:
    return call("torch.where", *b.aligned(ins))


def _real(b: Body, ins: Instr) -> Expr:
    (x,) = b.operands(ins)
    if x.scalar or isinstance(b.type(ins.args[0]), Machine):  # a hyperparameter: a number
        return Expr(x.text, x.prec, scalar=True)
    return method(x, "to", "torch.get_default_dtype()")


def _argmax(b: Body, ins: Instr) -> Expr:
    (x,) = b.operands(ins)
    return method(x, "argmax", f"dim={b.axis(ins) if ins.attr('axes') else -1}")


def _one_hot(b: Body, ins: Instr) -> Expr:
    (i,) = b.operands(ins)
    b.imports.add("F")
    bound = b.type(ins.args[0]).bound
    return method(call("F.one_hot", i, b.length(bound)), "to", "torch.get_default_dtype()")


def _embed(b: Body, ins: Instr) -> Expr:
    table, ids = b.operands(ins)
    return Expr(f"{table.at(ATOM)}[{ids}]")


def _take(b: Body, ins: Instr) -> Expr:
    x, i = b.operands(ins)
    d = b.axis(ins)
    if gathers_along(b, ins.args[0], ins.args[1], ins.attr("axes")[0]):
        return method(x, "gather", d, i)
    if not same_places(b, ins, 0):
        return general_take(b, ins, x, i)
    return method(method(x, "gather", d, method(i, "unsqueeze", d)), "squeeze", d)


def _top_k(b: Body, ins: Instr) -> Expr:
    """`top_k`'s indices in presk's order (argmax's: NaN first, +0 before −0, ties to the
    first index). torch.topk's order among equal values is unspecified, and torch.sort
    takes −0 == +0: a stable sort by the sign of the zeros first, then a stable sort by
    value, descending, of what it ordered."""
    (x,) = b.operands(ins)
    d = b.axis(ins)
    ((_, k),) = ins.attr("shapes")
    xa = x.at(ATOM)
    zeros = f"(torch.signbit({xa}) & ({xa} == 0)).to(torch.uint8).argsort(dim={d}, stable=True)"
    by_value = f"{xa}.gather({d}, {zeros}).sort(dim={d}, descending=True, stable=True).indices"
    return Expr(f"{zeros}.gather({d}, {by_value}).narrow({d}, 0, {b.length(k)})")


def _merge(b: Body, ins: Instr) -> Expr:
    (x,) = b.operands(ins)
    first, second = (b.axis(ins, k=0, name=n) for n in ins.attr("axes"))
    if second != first + 1:
        raise ExportError("`merge` of axes that are not adjacent", span=ins.span)
    return method(x, "flatten", first, second)


def _split(b: Body, ins: Instr) -> Expr:
    (x,) = b.operands(ins)
    lengths = ", ".join(b.length(n) for _, n in ins.attr("shapes"))
    return method(x, "unflatten", b.axis(ins), f"({lengths})")


def _crop(b: Body, ins: Instr) -> Expr:
    """`x[a: i .. j]`: `x.narrow(d, i, j - i)` (a view; autograd scatters into it)."""
    (x,) = b.operands(ins)
    start, stop = ins.attr("start"), ins.attr("stop")
    return method(x, "narrow", b.axis(ins), b.length(start), b.length(stop - start))


def _pad(b: Body, ins: Instr) -> Expr:
    """`pad(x, axis a, before: i, after: j)`: `F.pad` (its pairs from the last axis); with a
    fill c that is a tensor (differentiated), `torch.cat` of c expanded, x, c expanded."""
    x, *c = b.operands(ins)
    sides = dict(ins.attr("shapes", ()))
    before, after = (b.length(sides.get(k, Lin.const(0))) for k in ("before", "after"))
    s = shape_of(ins.args[0].type) or Shape(False, ())
    if c and not c[0].scalar:
        d = b.axis(ins)
        xs = x.at(ATOM)

        def fill(n: str) -> str:
            return f"{c[0].at(ATOM)}.expand({xs}.shape[:{d}] + (({n}),) + {xs}.shape[{d}:][1:])"

        return call("torch.cat", f"({fill(before)}, {x}, {fill(after)})", d)
    b.imports.add("F")
    pads = ("0, 0, " * (s.rank - 1 - s.axis(ins.attr("axes")[0]))) + f"{before}, {after}"
    value = f", value={c[0]}" if c else ""
    return Expr(f"F.pad({x}, ({pads}){value})", ATOM)


def _stack_axis(b: Body, ins: Instr) -> Expr:
    """`stack_axis(axis t, y0, …)`: `torch.stack((y0, …), d)`, d the new axis's place."""
    ys = b.operands(ins)
    out = shape_of(ins.out.type) or Shape(False, ())
    d = axis_index(out, out.axis(ins.attr("axes")[0]))
    return call("torch.stack", f"({', '.join(str(y) for y in ys)},)", d)


def _stop_grad(b: Body, ins: Instr) -> Expr:
    """`stop_grad(x)`: `x.detach()`, the same value with no gradient (a number is one)."""
    (x,) = b.operands(ins)
    return x if x.scalar else method(x, "detach")


def _filled(torch_fn: str) -> Rule:
    """`zeros(n: T, …)`: `torch.zeros(n, …)` (a 0-d tensor without axes)."""

    def rule(b: Body, ins: Instr) -> Expr:
        lengths = [str(b.length(length)) for _, length in ins.attr("shapes", ())]
        return call(torch_fn, *(lengths or ["()"]))

    return rule


def _pi(b: Body, ins: Instr) -> Expr:
    """π: its nearest double, written out (Python reads it back to the same bits)."""
    return Expr(repr(math.pi), ATOM, scalar=True)


def _iota(b: Body, ins: Instr) -> Expr:
    """`iota(n: T)`: `torch.arange(T)`, int64 as every index."""
    ((_, length),) = ins.attr("shapes")
    return call("torch.arange", b.length(length))


def _draw(b: Body, ins: Instr) -> Expr:
    """`uniform(key, n: T, …)`, `bernoulli(key, p, n: T, …)`, `split_key(key)`: the module's
    Threefry in torch (templates/_random.py.j2), the interpreter's numbers bit for bit."""
    b.imports.update({"math", "random"})
    lengths = [str(b.length(length)) for _, length in ins.attr("shapes", ())]
    operands = [str(x) for x in b.operands(ins)]
    return call(f"_{ins.op}", *operands, *lengths)


def _unsupported(why: str) -> Rule:
    def rule(b: Body, ins: Instr) -> Expr:
        raise ExportError(f"`{ins.op}` has no PyTorch export: {why}", span=ins.span)

    return rule


RULES: dict[str, Rule] = {
    "add": _add,
    "sub": _binary("-", ADD),
    "mul": _binary("*", MUL),
    "div": _binary("/", MUL),
    "pow": _pow,
    "neg": _neg,
    "dot": _dot,
    "ein": _ein,
    "sqrt": _unary("torch.sqrt", "math.sqrt"),
    "exp": _unary("torch.exp", "math.exp"),
    "log": _unary("torch.log", "math.log"),
    "tanh": _unary("torch.tanh", "math.tanh"),
    "sigmoid": _unary("torch.sigmoid"),
    "gelu": _unary("F.gelu"),
    "silu": _unary("F.silu"),
    "sin": _unary("torch.sin", "math.sin"),
    "cos": _unary("torch.cos", "math.cos"),
    "relu": _unary("torch.relu"),
    "abs": _unary("torch.abs", "abs"),
    "maximum": _pair("torch.maximum", "max"),
    "minimum": _pair("torch.minimum", "min"),
    "sum": _reduce("sum", "sum"),
    "mean": _reduce("mean", "mean"),
    "max": _extremum("max"),
    "min": _extremum("min"),
    "softmax": _softmax("torch.softmax", "0.0"),
    "log_softmax": _softmax("torch.log_softmax", "-math.inf"),
    "causal_mask": _causal_mask,
    "compare": _compare,
    "select": _select,
    "real": _real,
    "argmax": _argmax,
    "one_hot": _one_hot,
    "embed": _embed,
    "take": _take,
    "top_k": _top_k,
    "crop": _crop,
    "stack_axis": _stack_axis,
    "pad": _pad,
    "merge": _merge,
    "split": _split,
    "sample": _draw,
    "split_key": _draw,
    "uniform": _draw,
    "bernoulli": _draw,
    "normal": _draw,
    "stop_grad": _stop_grad,
    "zeros": _filled("torch.zeros"),
    "ones": _filled("torch.ones"),
    "pi": _pi,
    "iota": _iota,
    "slice": tree_slice,  # a block of a stack (unrolled stacks, differentiated code)
    "record": tree_record,
    **ADJOINT_TORCH_RULES,  # what differentiation writes (presk_export.adjoint_rules)
}

STRUCTURAL = frozenset({"grad", "field", "call", "fold", "scan", "tuple", "cast", "get"})
"""The operations the function body writes itself, not through a rule (presk_export.body)."""

ELSEWHERE = {
    "init": "a parameter's initializer: the module's constructor writes nn.Parameter(...)",
    "fold_init": "a stack's initializers: the constructor writes an nn.ModuleList",
    "fold_key": "the key of a parameter's draw: torch's own generator draws in the constructor",
    "value_grad": "the training step's loss and gradient: train.py's loop uses torch.autograd",
}
"""The operations no function body of an export holds, and where their PyTorch is: with
RULES and STRUCTURAL, the whole operation set (tests/test_export.py)."""

__all__ = ["ELSEWHERE", "RULES", "STRUCTURAL", "lin"]
