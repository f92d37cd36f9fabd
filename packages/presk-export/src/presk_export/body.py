"""A PSK-Core function's body as Python statements that read like the source.

The PSK-Core of a function is a flat list of instructions; the source it came from is
nested expressions with `let`s. The body is written back in that form: a `let` is an
assignment (its type as a comment), a value used once is written inside its user, a value
used more than once gets a temporary. A parameter tree is a `Tree`: an `nn.Module` that
holds its parameters (`self.proj`), or a module with a dict of tensors standing for them
(`net`, `θ`), called through `torch.func.functional_call`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from presk_core.ir import Function, Instr, Lit, Operand, Value
from presk_types.presburger import Lin
from presk_types.shapes import alignment
from presk_types.types import ModuleT, ParamsT, Shape, TupleT, Type, shape_of

from presk_export.pyexpr import (
    ATOM,
    MUL,
    UNARY,
    ExportError,
    Expr,
    axis_index,
    call,
    identifier,
    lin,
    placed,
)
from presk_export.torch_rules import RULES

if TYPE_CHECKING:
    from presk_export.pytorch import FileWriter


@dataclass(frozen=True, slots=True)
class Tree:
    """A parameter tree in Python: `module`, whose parameters are `params` when given."""

    module: str
    params: str | None = None


Py = Expr | Tree | tuple


def explicit(t: Type) -> Shape:
    s = shape_of(t)
    if s is None:
        raise ExportError(f"`{t}` is not a tensor type")
    return s


class Body:
    """The statements of one function (or λ) body, and the expression of its result."""

    def __init__(
        self,
        writer: FileWriter,
        fn: Function,
        bound: dict[int, Py],
        dims: dict[str, str],
        indent: str = "",
    ) -> None:
        self.writer = writer
        self.fn = fn
        self.env: dict[int, Py] = dict(bound)
        self.dims = dims  # dimension -> the Python expression it is bound to
        self.lines: list[str] = []
        self.indent = indent
        self.imports = writer.imports
        self.taken: set[str] = {str(e) for e in bound.values() if isinstance(e, Expr)}
        self.stacks = 0
        self.needed: list[str] = []
        self.defs: dict[int, Instr] = {ins.out.id: ins for ins in fn.body}
        self.uses: Counter[int] = Counter(
            a.id for ins in fn.body for a in ins.args if isinstance(a, Value)
        )
        if isinstance(fn.ret, Value):
            self.uses[fn.ret.id] += 1

    # ---- what rules ask --------------------------------------------------------------------

    def value(self, a: Operand) -> Py:
        if isinstance(a, Lit):
            return _literal(a.text, self)
        if a.id not in self.env:
            raise ExportError(f"`{a}` is used before it is computed")
        return self.env[a.id]

    def operands(self, ins: Instr) -> list[Expr]:
        out = []
        for a in ins.args:
            v = self.value(a)
            if not isinstance(v, Expr):
                raise ExportError(f"`{ins.op}` of a parameter tree or a tuple", span=ins.span)
            out.append(v)
        return out

    def type(self, a: Operand) -> Type:
        return a.type

    def shape(self, a: Operand) -> Shape:
        return explicit(a.type)

    def rank(self, a: Operand) -> int:
        return explicit(a.type).rank

    def axis(self, ins: Instr, k: int = 0, name: str | None = None) -> int:
        """The data index of the axis an instruction names, in its k-th operand."""
        s = explicit(ins.args[k].type)
        name = name if name is not None else ins.attr("axes")[0]
        i = s.axis(name)
        if i is None:
            raise ExportError(f"no axis `{name}` in `{ins.args[k].type}`", span=ins.span)
        return axis_index(s, i)

    def length(self, e: Lin) -> str:
        """A length in Python. A dimension of the function that no argument's shape holds
        (`fn positions() -> ℝ[seq: T]`) becomes a parameter of the Python function (or, in
        a method, an attribute the constructor keeps): `needed` lists them."""
        for d in (name for name, _ in e.coeffs):
            if d not in self.dims:
                if d not in self.fn.dims:
                    raise ExportError(f"the dimension `{d}` has no value here")
                self.needed.append(d)
                self.dims[d] = d
        return lin(Lin(tuple((self.dims[d], c) for d, c in e.coeffs), e.constant))

    def dim_arguments(self, callee: str, ins: Instr) -> list[str]:
        """`T=T`: the dimensions a callee takes as parameters, as this call binds them."""
        binds = dict(ins.attr("dims", ()))
        return [f"{d}={self.length(binds[d])}" for d in self.writer.export.dim_params(callee)]

    def placed(self, x: Expr, a: Operand, against: Operand | Type, where=None) -> Expr:
        """Operand `a` laid out on the axes of `against` (a value, or the result type)."""
        t = against if not isinstance(against, Value | Lit) else against.type
        if x.scalar or shape_of(a.type) is None or shape_of(a.type).is_scalar:
            return x
        src, dst = explicit(a.type), explicit(t)
        where = where if where is not None else alignment(src, dst)
        return placed(x, src, tuple(where), dst.rank)

    def aligned(self, ins: Instr) -> list[Expr]:
        maps = ins.attr("_align")
        xs = self.operands(ins)
        return [
            self.placed(x, a, ins.out.type, maps[i] if maps is not None else None)
            for i, (x, a) in enumerate(zip(xs, ins.args, strict=True))
        ]

    # ---- statements --------------------------------------------------------------------------

    def emit(self, line: str) -> None:
        self.lines.append(self.indent + line)

    def fresh(self, name: str) -> str:
        base = identifier(name)
        out, n = base, 1
        while out in self.taken:
            n += 1
            out = f"{base}_{n}"
        self.taken.add(out)
        return out

    def check_shape(self, name: str, t: Type) -> None:
        s = shape_of(t)
        if not self.writer.options.check_shapes or s is None or s.prefix:
            return
        if any(d not in self.dims for a in s.axes for d, _ in a.length.coeffs):
            return  # a length no argument gives: no assertion
        lengths = [self.length(a.length) for a in s.axes]
        tup = f"({lengths[0]},)" if len(lengths) == 1 else f"({', '.join(lengths)})"
        self.emit(f"assert {name}.shape == {tup}")

    def bind(self, ins: Instr, value: Py) -> None:
        out = ins.out
        if not isinstance(value, Expr) or ins.op == "fold":  # a fold's loop bound it already
            self.env[out.id] = value
            return
        if out.name is not None:
            name = self.fresh(out.name)
            self.emit(f"{name} = {value}  # {out.type}")
            self.check_shape(name, out.type)
            self.env[out.id] = Expr(name, ATOM, value.scalar)
        elif self.uses[out.id] > 1:
            name = self.fresh(f"_t{out.id}")
            self.emit(f"{name} = {value}")
            self.env[out.id] = Expr(name, ATOM, value.scalar)
        else:
            self.env[out.id] = value

    def run(self) -> Py:
        body = self.fn.body
        k = 0
        while k < len(body):
            ins = body[k]
            if ins.op == "get":
                k = self.unpack(body, k)
                continue
            if self.uses[ins.out.id] == 0 and ins.out.name is None and ins.op not in ("fold",):
                k += 1
                continue  # read by nobody (a field the checker resolved eagerly)
            value = self.instruction(ins)
            if isinstance(value, Expr) and self._unpacked_next(body, k):
                self.env[ins.out.id] = value  # `q1, q2 = rotate(…)`: no temporary
            else:
                self.bind(ins, value)
            k += 1
        return self.value(self.fn.ret)

    def _unpacked_next(self, body: tuple[Instr, ...], k: int) -> bool:
        """Whether the tuple body[k] makes is read only by the named gets that follow it."""
        out = body[k].out
        if not isinstance(out.type, TupleT) or out.name is not None:
            return False
        n = len(out.type.elements)
        gets = body[k + 1 : k + 1 + n]
        return self.uses[out.id] == n and [
            (g.op, g.args[0], g.out.name is not None, g.attr("index")) for g in gets
        ] == [("get", out, True, i) for i in range(n)]

    def unpack(self, body: tuple[Instr, ...], k: int) -> int:
        """`let (x, y) = batch`: the gets of every element of a tuple, each named, as one
        unpacking; any other get as an index."""
        ins = body[k]
        t = ins.args[0]
        whole = self.value(t)
        run = []
        while k + len(run) < len(body):
            nxt = body[k + len(run)]
            if nxt.op != "get" or nxt.args[0] != t or nxt.out.name is None:
                break
            run.append(nxt)
        n = len(t.type.elements) if isinstance(t.type, TupleT) else -1
        if isinstance(whole, tuple):
            self.bind(ins, whole[ins.attr("index")])
            return k + 1
        if [g.attr("index") for g in run] == list(range(n)):
            names = [self.fresh(g.out.name) for g in run]
            self.emit(f"{', '.join(names)} = {whole}")
            for g, name in zip(run, names, strict=True):
                self.env[g.out.id] = Expr(name)
            return k + len(run)
        self.bind(ins, Expr(f"{whole.at(ATOM)}[{ins.attr('index')}]"))
        return k + 1

    # ---- one instruction -------------------------------------------------------------------

    def instruction(self, ins: Instr) -> Py:
        match ins.op:
            case "field":
                return self.field(ins)
            case "call":
                return self.call(ins)
            case "fold":
                return self.fold(ins)
            case "scan":
                return self.scan(ins)
            case "grad":
                return self.grad(ins)
            case "tuple":
                return tuple(self.value(a) for a in ins.args)
            case "cast":
                return self.value(ins.args[0])
            case op if op in RULES:
                return RULES[op](self, ins)
        raise ExportError(f"`{ins.op}` has no PyTorch export here", span=ins.span)

    def field(self, ins: Instr) -> Py:
        tree = self.value(ins.args[0])
        path = ins.attr("path")
        if not isinstance(tree, Tree):
            raise ExportError("a field of something that is not a parameter tree")
        if isinstance(ins.out.type, ParamsT):
            if tree.params is not None:
                raise ExportError(
                    "a sub-module of a parameter tree passed as a dict", span=ins.span
                )
            return Tree(f"{tree.module}.{path}")
        if tree.params is None:
            return Expr(f"{tree.module}.{path}")
        return Expr(f'{tree.params}["{path}"]')

    def call(self, ins: Instr) -> Expr:
        name = ins.attr("fn")
        left_out = self.writer.export.left_out.get(name)
        if left_out is not None:
            raise ExportError(
                f"`{name}` is not exported ({left_out}), and this calls it", span=ins.span
            )
        callee = self.writer.core.function(name)
        info = self.writer.infos.get(name)
        if info is not None and info.module is not None:
            tree, *rest = [self.value(a) for a in ins.args]
            args = self.arguments(callee, callee.params[1:], rest) + self.dim_arguments(name, ins)
            method_name = name.rsplit(".", 1)[1]
            if tree.params is None:
                target = tree.module if method_name == "apply" else f"{tree.module}.{method_name}"
                return call(target, *args)
            if method_name != "apply":
                raise ExportError(
                    f"`{name}` on a parameter tree passed as a dict: only `apply` is a forward",
                    span=ins.span,
                )
            inner = ", ".join(str(a) for a in args)
            return call("torch.func.functional_call", tree.module, tree.params, f"({inner},)")
        values = [self.value(a) for a in ins.args]
        args = self.source_arguments(callee, info, values, ins) + self.dim_arguments(name, ins)
        return call(self.writer.ref(name), *args)

    def arguments(self, callee: Function, params, values: list[Py]) -> list[str]:
        """Tensors positionally; a hyperparameter by keyword, left out at its default."""
        defaults = dict(callee.defaults)
        out = []
        for p, v in zip(params, values, strict=True):
            if not isinstance(v, Expr):
                raise ExportError(f"a parameter tree passed as `{p.name}` of `{callee.name}`")
            if p.name in defaults:
                if isinstance(v, Expr) and v.text == _literal(defaults[p.name], self).text:
                    continue
                out.append(f"{identifier(p.name)}={v}")
            else:
                out.append(str(v))
        return out

    def source_arguments(self, callee: Function, info, values: list[Py], ins: Instr) -> list[str]:
        """A free function's arguments in its source's order: a module argument (which
        PSK-Core erased) is the module of the tree passed for its `params`."""
        if info is None:
            return [str(v) for v in values]
        by_name = {p.name: v for p, v in zip(callee.params, values, strict=True)}
        linked = linked_modules(info.params)
        out: list[str] = []
        defaults = dict(callee.defaults)
        for pname, t in info.params:
            if isinstance(t, ModuleT):
                tree = next(
                    (by_name[q] for q, m in linked.items() if m == pname and q in by_name), None
                )
                if not isinstance(tree, Tree):
                    raise ExportError(f"no module for `{pname}` of `{callee.name}`", span=ins.span)
                out.append(tree.module)
                continue
            v = by_name[pname]
            if isinstance(v, Tree):
                if pname in linked:
                    out.append(v.params or f"dict({v.module}.named_parameters())")
                elif v.params is None:
                    out.append(v.module)
                else:
                    raise ExportError(
                        f"`{callee.name}` takes `{pname}` as a module; a dict is passed here",
                        span=ins.span,
                    )
            elif isinstance(v, tuple):
                out.append(_tuple_text(v))
            elif pname in defaults:
                if v.text != _literal(defaults[pname], self).text:
                    out.append(f"{identifier(pname)}={v}")
            else:
                out.append(str(v))
        return out

    def fold(self, ins: Instr) -> Expr:
        """`stack{L}(Block)`: a loop over the ModuleList (or, unrolled, the L calls)."""
        tree, x, *rest = [self.value(a) for a in ins.args]
        if not isinstance(tree, Tree) or tree.params is not None:
            raise ExportError("a stack whose parameters are passed as a dict", span=ins.span)
        callee = self.writer.core.function(ins.attr("fn"))
        extra = self.arguments(callee, callee.params[2:], rest)
        extra += self.dim_arguments(callee.name, ins)
        count = ins.attr("count")
        state = self.fresh(ins.out.name or f"_stack{self.stacks}")
        self.stacks += 1
        args = ", ".join([state, *extra])
        if self.writer.options.unroll:
            n = int(self.length(count)) if not count.coeffs else None
            if n is None:
                raise ExportError("--stack=unroll of a stack of symbolic height", span=ins.span)
            current = str(x)
            for i in range(n):
                self.emit(f"{state} = {tree.module}[{i}]({', '.join([current, *extra])})")
                current = state
        else:
            leaf = tree.module.rsplit(".", 1)[-1]
            item = self.fresh(leaf[:-1] if leaf.endswith("s") and len(leaf) > 1 else "layer")
            self.emit(f"{state} = {x}")
            self.emit(f"for {item} in {tree.module}:  # stack{{{count}}}")
            self.emit(f"    {state} = {item}({args})")
            self.taken.discard(item)
        if ins.out.name is not None:
            self.check_shape(state, ins.out.type)
        return Expr(state)

    def scan(self, ins: Instr) -> tuple:
        """`scan{n}[t] F(pre…, c, xs)` (issue 29): a Python loop over the n steps, each a
        call of F on the carry and xs's element (`xs.select(t, k)`; a λ step a local
        function), the outputs stacked by `torch.stack` on a new first axis; the pair (the
        last carry, the outputs). Each statement one assignment, as pyformat lays it out."""
        m, t, count = ins.attr("scanned"), ins.attr("axes")[0], ins.attr("count")
        if m != 1 or ins.attr("reverse", False):
            raise ExportError("a scan that differentiation wrote", span=ins.span)
        *pre, c, xs = ins.args
        carry = self.fresh(f"_carry{ins.out.id}")
        ys, k, y = self.fresh(f"_ys{ins.out.id}"), self.fresh("_k"), self.fresh("_y")
        step = Value(-1 - ins.out.id, ins.out.type.elements[0])  # stand-ins for the call
        x = Value(-2 - ins.out.id, ins.out.type.elements[1])  # (types not read)
        self.env[step.id] = Expr(carry)
        at = self.axis(ins, len(ins.args) - 1, t)
        self.env[x.id] = Expr(f"{self.value(xs).at(ATOM)}.select({at}, {k})")
        attrs = (("fn", ins.attr("fn")), ("dims", ins.attr("dims", ())))
        fake = Instr(Value(-3 - ins.out.id, ins.out.type), "call", (*pre, step, x), attrs)
        lam = self.writer.core.function(ins.attr("fn"))
        if ".lambda" in lam.name:  # a λ step: a local function of the carry and the element
            local = self.fresh("_" + lam.name.rsplit(".", 1)[1])
            names = [identifier(p.name or f"_p{p.id}") for p in lam.params[-2:]]
            bound = {p.id: self.value(a) for p, a in zip(lam.params[:-2], pre, strict=True)}
            bound |= {p.id: Expr(n) for p, n in zip(lam.params[-2:], names, strict=True)}
            sub = Body(self.writer, lam, bound, dict(self.dims), self.indent + "    ")
            sub.taken |= self.taken | set(names)
            result = sub.run()
            for d in sub.needed:
                if d not in self.dims:
                    self.needed.append(d)
                    self.dims[d] = d
            self.lines.append("")  # a blank line around a nested def, as ruff writes it
            self.emit(f"def {local}({', '.join(names)}):")
            self.lines.extend(sub.lines)
            text = _tuple_text(result) if isinstance(result, tuple) else str(result)
            self.emit(f"    return {text}")
            self.lines.append("")
            step_call = f"{local}({carry}, {self.env[x.id]})"
        else:
            step_call = str(self.call(fake))
        self.emit(f"{carry} = {self.value(c)}")
        self.emit(f"{ys} = []")
        self.emit(f"for {k} in range({self.length(count)}):  # scan{{{count}}} along `{t}`")
        self.emit(f"    {carry}, {y} = {step_call}")
        self.emit(f"    {ys}.append({y})")
        self.emit(f"{ys} = {self._stacked(ys, count, ins.out.type.elements[1], xs)}")
        self.imports.add("torch")
        self.taken -= {k, y}
        return (Expr(carry), Expr(ys))

    def _stacked(self, ys: str, count: Lin, t: Type, xs: Operand) -> str:
        """The scan's outputs `ys` (a list) stacked on their new axis (first, or after an
        open prefix: the type's place), by `torch.stack`, which takes no empty list: where
        the scan may run no step, the outputs of 0 steps when the list is empty, zeros of
        shape 0 × the step's output's (from `t`, their type; an open prefix's lengths
        xs's)."""
        s = shape_of(t)
        stack = f"torch.stack({ys}, {-len(s.axes)})" if s and s.prefix else f"torch.stack({ys})"
        if (count.is_const and count.constant > 0) or s is None:
            return stack
        sizes = ["0", *(self.length(a.length) for a in s.axes[1:])]
        if s.prefix:
            sx = shape_of(xs.type)
            if sx is None or not sx.prefix:
                return stack  # no operand holds the prefix's lengths
            x = self.value(xs).at(ATOM)
            sizes.insert(0, f"*{x}.shape[: {x}.dim() - {len(sx.axes)}]")
        return f"{stack} if {ys} else {call('torch.zeros', *sizes)}"

    def grad(self, ins: Instr) -> Expr:
        """`grad(λ θ. body)(θ)` as `torch.func.grad((lambda θ: body))(θ)`; a λ whose body
        needs statements becomes a local function."""
        lam = self.writer.core.function(ins.attr("fn"))
        values = [self.value(a) for a in ins.args]
        point, last = values[-1], lam.params[-1]
        pname = identifier(last.name)
        if isinstance(point, Tree):
            at = point.params or f"dict({point.module}.named_parameters())"
            inner: Py = Tree(point.module, pname)
        elif isinstance(point, Expr):
            at, inner = str(point), Expr(pname)
        else:
            raise ExportError("grad at a tuple", span=ins.span)
        bound = {p.id: v for p, v in zip(lam.params[:-1], values[:-1], strict=True)}
        bound[last.id] = inner
        if ".lambda" not in lam.name:
            raise ExportError("grad of a named function: write it as a λ", span=ins.span)
        sub = Body(self.writer, lam, bound, dict(self.dims), self.indent + "    ")
        sub.taken |= self.taken | {pname}
        result = sub.run()
        for d in sub.needed:  # a dimension the λ reads (`(N : ℝ)`): the function's too
            if d not in self.dims:
                self.needed.append(d)
                self.dims[d] = d
        if not isinstance(result, Expr):
            raise ExportError("a λ under grad must return a tensor", span=ins.span)
        if not sub.lines:
            return Expr(f"torch.func.grad((lambda {pname}: {result}))({at})")
        local = self.fresh("_" + lam.name.rsplit(".", 1)[1])
        self.emit(f"def {local}({pname}):")
        self.lines.extend(sub.lines)
        self.emit(f"    return {result}")
        return Expr(f"torch.func.grad({local})({at})")


def linked_modules(params: list[tuple[str, Type]]) -> dict[str, str]:
    """Each `θ : params net` parameter and the module argument `net` it belongs to."""
    modules = [(n, t.instance) for n, t in params if isinstance(t, ModuleT)]
    out = {}
    for n, t in params:
        if isinstance(t, ParamsT):
            owner = next((m for m, inst in modules if inst == t.instance), None)
            if owner is not None:
                out[n] = owner
    return out


def _tuple_text(v: tuple) -> str:
    items = [str(e) for e in v]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _literal(text: str, body: Body) -> Expr:
    """An exact number as written (`2`, `1e-6`, `1/3`), or a dimension."""
    if text.isidentifier():
        return Expr(body.length(Lin(((text, 1),), 0)), ATOM, scalar=True)
    if "/" in text:
        num, den = text.split("/", 1)
        return Expr(f"{num.strip()} / {den.strip()}", MUL, scalar=True)
    if text.startswith("-"):
        return Expr(text, UNARY, scalar=True)
    return Expr(text, ATOM, scalar=True)


__all__ = ["Body", "Tree", "explicit"]
