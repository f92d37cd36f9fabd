"""The verifier of PSK-Kernel: a schedule is well formed and every kernel executable as written.

`problems(kernel)` lists what is wrong with a kernel, `schedule_problems(schedule)` with a
schedule and each kernel it launches:

- buffers: numbered `%0, %1, …` inputs first, each of a type of `DTYPES` with lengths ≥ 0;
  a load reads a buffer of the kernel, a store writes an output, each with one index per
  axis, an integer or a truth value stores one of its kind (an integer or a truth value
  may be stored as a real: the conversion is exact or IEEE's rounding);
- indices in bounds: an affine index, over the ranges of its loop variables, stays inside
  its axis (a gather's computed index is checked when it runs: E7003), and a gather's index
  is an integer;
- bound variables: every `Var` is a `Let` or a fold's accumulator defined before it in an
  enclosing block, every `Index` and affine variable a loop's or a fold's variable around
  it, and no loop variable is bound twice in one nest;
- operations: each `Op` is in `SCALAR_TABLE`, with its arity, its operands of the kinds the
  table gives (a truth value where one is wanted, a number elsewhere) and its attr;
- folds: an op of add, max, min, fma (with two terms, one otherwise), an accumulator of the
  kernel's compute type (or i64, for an index), the compute type f64 or f32;
- the layout: legal for the nest (presk_kernel.layout.check_layout); a laid-out body
  (`Tile`, `For`, `GemmStmt`: the `layout` pass's) is exactly its layout applied to the nest
  it lays out (`apply_layout`), and a body that is not laid out has a layout that says no
  more than a loop order (a tiled, laned, split, packed or GEMM layout is applied);
- a GEMM statement's epilogue and prologues (`gemm_problems`, presk_kernel.epilogue's
  forms, checked from the nest by rules of their own): the epilogue is the statements after
  the fold, lets and stores ending with a store, C's first at the element the GEMM
  finished, each output stored once per point and none read; a prologue is the fold's
  term, exact arithmetic on loads of inputs, not varying along the other operand's axis.

For a schedule, also: each launch binds one host buffer of the same type per kernel buffer,
the slice inside it, and the entry's inputs and outputs are host buffers.

`verified(schedule, after)` runs it when `PRESK_VERIFY=1` (the tests set it) and raises
`KernelVerifyError` naming the pass that made the schedule, the kernel and its site: a
kernel pass that breaks a kernel is stopped there, as presk_core.passes.verified stops a Core
pass.
"""

from __future__ import annotations

import dataclasses
import os

from presk_kernel.contract import COMPUTED, gemm_stop, linear
from presk_kernel.ir import (
    DTYPES,
    REAL_DTYPES,
    SCALAR_TABLE,
    Affine,
    Const,
    For,
    Gemm,
    GemmStmt,
    Index,
    Kernel,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    Tile,
    TwoPass,
    Var,
    elements,
    plain,
    subexpressions,
)
from presk_kernel.layout import applies, apply_layout, check_layout, is_laid

COMPARES = frozenset({"<", "<=", ">", ">=", "==", "!="})
FOLDS = frozenset({"add", "max", "min", "fma"})
KIND = {"f64": "real", "f32": "real", "bf16": "real", "i64": "int", "bool": "bool", "i8": "int"}


class KernelVerifyError(Exception):
    """A schedule that is not well formed: every failure, the first in the message."""

    code = "E7042"

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems[0] if len(problems) == 1 else "\n".join(problems))
        self.problems = problems


class _Check:
    """One kernel's walk: the scope (loop variables with their extents, scalars with their
    kinds) and the problems found."""

    def __init__(self, k: Kernel) -> None:
        self.k = k
        self.out: list[str] = []

    def bad(self, what: str) -> None:
        self.out.append(f"`{self.k.name}` at {self.k.site}: {what}")

    # ---- expressions ---------------------------------------------------------------------

    def expr(self, e, loops: dict[str, int], scalars: dict[str, str]) -> str:
        """The kind of `e` (real, int, bool), its problems recorded."""
        match e:
            case Const(value, dtype):
                if dtype not in DTYPES or dtype == "bf16":
                    self.bad(f"the constant {value!r} is of type `{dtype}`")
                    return "real"
                return KIND[dtype]
            case Load(buf, index):
                if not 0 <= buf < len(self.k.buffers):
                    self.bad(f"a load reads %{buf}, not a buffer of the kernel")
                    return "real"
                self.index(buf, index, loops, scalars, "load")
                return KIND[self.k.buffers[buf].dtype]
            case Var(name):
                if name not in scalars:
                    self.bad(f"`{name}` is read where no let or fold defines it")
                    return "real"
                return scalars[name]
            case Index(var):
                if var not in loops:
                    self.bad(f"`index {var}` is not a loop variable around it")
                return "int"
            case Op(_, args, _):
                return self.op(e, [self.expr(a, loops, scalars) for a in args])
        self.bad(f"not a kernel expression: {e!r}")
        return "real"

    def op(self, e: Op, kinds: list[str]) -> str:
        spec = SCALAR_TABLE.get(e.op)
        if spec is None:
            self.bad(f"`{e.op}` is not a scalar operation (presk_kernel.ir.SCALAR_TABLE)")
            return "real"
        if len(kinds) != spec.arity:
            self.bad(f"`{e}`: `{e.op}` takes {spec.arity} operands, not {len(kinds)}")
            return "real"
        for i, (want, have) in enumerate(zip(spec.operands, kinds, strict=True)):
            if (want == "bool") != (have == "bool") and want != "any":
                self.bad(f"`{e}`: operand {i + 1} of `{e.op}` is a {have}, not a {want}")
        if e.op == "compare" and e.attr not in COMPARES:
            self.bad(f"`{e}`: a comparison's attr is one of < <= > >= == !=, not {e.attr!r}")
        elif e.op == "pow" and (not isinstance(e.attr, int) or isinstance(e.attr, bool)):
            self.bad(f"`{e}`: `pow` takes its integer exponent as attr, not {e.attr!r}")
        elif e.op == "xavier" and (not isinstance(e.attr, int) or e.attr < 1):
            self.bad(f"`{e}`: `xavier` takes fan_in + fan_out (at least 1) as attr, not {e.attr!r}")
        elif e.op == "normal_std" and not isinstance(e.attr, str):
            self.bad(f"`{e}`: `normal_std` takes its std's decimal text as attr, not {e.attr!r}")
        elif e.op == "dequant" and e.attr not in ("f64", "f32", "bf16"):
            self.bad(f"`{e}`: `dequant` takes the parameter's type as attr, not {e.attr!r}")
        elif spec.attr is None and e.attr is not None:
            self.bad(f"`{e}`: `{e.op}` takes no attr")
        match spec.result:
            case "same":
                rest = kinds[1:] if e.op == "select" else kinds
                return "real" if "real" in rest else ("int" if "int" in rest else rest[0])
            case "real" | "bool" | "int":
                return spec.result
        return "real"

    def index(self, buf: int, index: tuple, loops, scalars, what: str) -> None:
        b = self.k.buffers[buf]
        if len(index) != len(b.axes):
            self.bad(f"a {what} of %{buf} has {len(index)} indices for its {len(b.axes)} axes")
            return
        for ax, (i, axis) in enumerate(zip(index, b.axes, strict=True)):
            if isinstance(i, Affine):
                lo = hi = i.const
                empty = False
                for v, c in i.terms:
                    if v not in loops:
                        self.bad(f"the index `{i}` of %{buf} reads `{v}`, not a loop variable")
                        return
                    n = loops[v]
                    empty |= n == 0
                    lo, hi = lo + min(0, c * (n - 1)), hi + max(0, c * (n - 1))
                if not empty and (lo < 0 or hi >= axis.length):
                    self.bad(
                        f"the index `{i}` of %{buf} runs over {lo} … {hi}, outside axis {ax}"
                        f" of length {axis.length}"
                    )
            elif self.expr(i, loops, scalars) != "int":
                self.bad(f"the gathered index `{i}` of %{buf} is not an integer")

    # ---- statements ----------------------------------------------------------------------

    def block(self, body, loops: dict[str, int], scalars: dict[str, str]) -> dict[str, str]:
        """The scalars defined at the block's end (a let is seen by what follows it)."""
        scalars = dict(scalars)
        for s in body:
            match s:
                case Let(name, expr):
                    scalars[name] = self.expr(expr, loops, scalars)
                case Store(buf, index, expr):
                    if not len(self.k.inputs) <= buf < len(self.k.buffers):
                        self.bad(f"a store writes %{buf}, not an output of the kernel")
                        self.expr(expr, loops, scalars)
                        continue
                    self.index(buf, index, loops, scalars, "store")
                    kind, dtype = self.expr(expr, loops, scalars), self.k.buffers[buf].dtype
                    if KIND[dtype] != "real" and kind != KIND[dtype]:  # a real is never cut
                        self.bad(f"a store of a {kind} into %{buf} : {dtype}")
                case Loop(var, _, extent, inner, serial, start, stop):
                    if extent < 0:
                        self.bad(f"the loop over `{var}` has extent {extent}")
                    if var in loops:
                        self.bad(f"the loop variable `{var}` is bound twice")
                    if serial and (start is not None or stop is not None):
                        self.bad(f"the serial loop over `{var}` has bounds")
                    self.bounds(var, (start, stop), loops, extent)
                    self.block(inner, loops | {var: extent}, scalars)
                case Reduce():
                    scalars[s.acc] = self.reduce(s, loops, scalars)
                case Tile() | For() | GemmStmt() | TwoPass():  # laid out: what it lays out
                    self.block(plain((s,)), loops, scalars)
                case _:
                    self.bad(f"not a kernel statement: {s!r}")
        return scalars

    def bounds(self, var: str, bounds: tuple, loops: dict[str, int], extent: int) -> None:
        """A triangular bound reads only the variables of the loops around it, and stays
        within [0, extent] wherever they run (so C writes it as it is, a SCoP's bound)."""
        for b in bounds:
            if b is None:
                continue
            if not isinstance(b, Affine):
                self.bad(f"the bound `{b}` of `{var}` is not affine")
                continue
            lo = hi = b.const
            for v, c in b.terms:
                if v not in loops:
                    self.bad(f"the bound `{b}` of `{var}` reads `{v}`, not an enclosing loop's")
                    return
                lo, hi = lo + min(0, c * (loops[v] - 1)), hi + max(0, c * (loops[v] - 1))
            if lo < 0 or hi > extent:
                self.bad(f"the bound `{b}` of `{var}` runs over {lo} … {hi}, outside 0 … {extent}")

    def reduce(self, r: Reduce, loops: dict[str, int], scalars: dict[str, str]) -> str:
        if r.op not in FOLDS:
            self.bad(f"the fold `{r.acc}` folds by `{r.op}`, not add, max, min or fma")
        if len(r.terms) != (2 if r.op == "fma" else 1):
            self.bad(f"the fold `{r.acc}` by `{r.op}` has {len(r.terms)} terms")
        real = r.dtype in REAL_DTYPES
        if (real and r.dtype != self.k.compute) or (not real and r.dtype != "i64"):
            self.bad(
                f"the accumulator `{r.acc}` is of type `{r.dtype}`: a fold adds in the "
                f"kernel's compute type ({self.k.compute}) or in i64"
            )
        if r.op == "fma" and not real:
            self.bad(f"the contraction `{r.acc}` accumulates in `{r.dtype}`")
        if r.stop is not None:
            if len(r.vars) != 1 or r.block is not None:
                self.bad(f"the fold `{r.acc}` is bounded: one variable and no block")
            self.bounds(r.acc, (r.stop,), loops, r.vars[0][2] if r.vars else 0)
        if r.zeros is None and (r.zeros_first or r.zeros_finite):
            self.bad(f"the fold `{r.acc}` marks zero terms without their bound")
        if r.zeros is not None:
            one = len(r.vars) == 1 and r.block is None and r.stop is None and not r.body
            if r.op != "fma" or not one:
                self.bad(f"the fold `{r.acc}` has zero terms: a contraction over one variable")
            self.bounds(r.acc, (r.zeros,), loops, r.vars[0][2] if r.vars else 0)
        inner = dict(loops)
        for v, _, n in r.vars:
            if v in inner:
                self.bad(f"the fold variable `{v}` is bound twice")
            if n < 0:
                self.bad(f"the fold over `{v}` has extent {n}")
            inner[v] = n
        body_scalars = self.block(r.body, inner, scalars)  # the terms see the body's lets
        for t in r.terms:
            self.expr(t, inner, body_scalars)
        return KIND.get(r.dtype, "real")


def problems(k: Kernel) -> list[str]:
    """Every way `k` is not a well-formed kernel (none: it is)."""
    c = _Check(k)
    for i, b in enumerate(k.buffers):
        if b.id != i:
            c.bad(f"buffer {i} is numbered %{b.id}")
        if b.dtype not in DTYPES:
            c.bad(f"%{b.id} is of type `{b.dtype}`, not one of {', '.join(DTYPES)}")
        if any(a.length < 0 for a in b.axes):
            c.bad(f"%{b.id} has a negative length")
    if k.compute not in ("f64", "f32"):
        c.bad(f"the kernel computes in `{k.compute}`, not f64 or f32")
    if c.out:
        return c.out
    c.block(k.body, {}, {})
    why = check_layout(k, k.layout)
    if why is not None:
        c.bad(f"its layout ({k.layout}) is illegal: {why}")
    elif is_laid(k):
        if apply_layout(dataclasses.replace(k, body=plain(k.body))) != k:
            c.bad(f"its laid-out body is not its layout ({k.layout}) applied")
    elif applies(k.layout):
        c.bad(f"its layout ({k.layout}) is not applied to its body (the `layout` pass)")
    if k.layout.gemm is not None:
        for p in gemm_problems(k, k.layout.gemm):
            c.bad(p)
    return c.out


# ---- a GEMM statement's epilogue and prologues -----------------------------------------------


def gemm_problems(k: Kernel, g: Gemm) -> list[str]:
    """Every way the GEMM statement `g` of `k` would run its nest's epilogue or prologues
    otherwise than the nest: the epilogue runs on each element once the GEMM finished its
    sum, reading it from C (presk_cback.gemm's `presk_gemm_epi_*`), a prologue computes a
    fold's term into a packed panel, once per row of A or column of B. The rules are the
    verifier's own, read from the nest (presk_kernel.contract recognises the forms and
    presk_kernel.epilogue writes them; `check_layout` compares the record with the first)."""
    loops, body = [], plain(k.body)
    while len(body) == 1 and isinstance(body[0], Loop):
        loops.append(body[0])
        body = body[0].body
    if not body or not isinstance(body[0], Reduce) or g.c >= len(k.buffers):
        return []  # no contraction: `check_layout` says so
    fold, after = body[0], tuple(body[1:])
    out: list[str] = []
    plain_c = len(after) == 1 and isinstance(after[0], Store) and after[0].expr == Var(fold.acc)
    if (g.acc, g.epilogue) != (("", ()) if plain_c else (fold.acc, after)):
        out.append("its epilogue is not the statements after its fold")
    points = {lp.var: lp.extent for lp in loops}
    out += _epilogue_problems(k, g, fold.acc, points) if g.epilogue else []
    out += _prologue_problems(k, g, fold)
    if (g.epilogue or any(t is not None for t in g.prologue)) and gemm_stop(g, k.body) is not None:
        out.append("a narrowed GEMM statement takes no epilogue or prologue")
    return out


def _epilogue_problems(k: Kernel, g: Gemm, acc: str, points: dict[str, int]) -> list[str]:
    """The epilogue's rules: lets and stores, the last a store; C's store first, at the
    element the GEMM leaves its sum in; each output stored once, at affine indices, one
    element per point of the GEMM (its threads and tiles run the points in another order);
    no output read (C holds partial sums until the GEMM ends, the others are the epilogue's
    own); the product read."""
    out = [
        f"the epilogue holds a `{type(s).__name__}`: only lets and stores run on an element"
        for s in g.epilogue
        if not isinstance(s, Let | Store)
    ]
    if not isinstance(g.epilogue[-1], Store):
        out.append("the epilogue's last statement is not a store")
    stores = [s for s in g.epilogue if isinstance(s, Store)]
    if stores and stores[0].buf != g.c:
        out.append(f"the epilogue's first store is to %{stores[0].buf}, not C (%{g.c})")
    elif stores:
        at = linear(k.buffers[g.c], stores[0].index)
        if at != (dict(g.strides[2]), g.offsets[2]):
            where = ", ".join(map(str, stores[0].index))
            out.append(
                f"the epilogue stores C (%{g.c}) at `{where}`, not where the GEMM leaves the"
                " element"
            )
    seen: set[int] = set()
    for s in stores:
        if s.buf in seen:
            out.append(f"the epilogue stores %{s.buf} twice")
        seen.add(s.buf)
        if not 0 <= s.buf < len(k.buffers):
            continue  # not a buffer: the walk says so
        at = linear(k.buffers[s.buf], s.index)
        if at is None:
            out.append(f"the epilogue stores %{s.buf} at a gathered index")
        elif not _one_each(at[0], points):
            where = ", ".join(map(str, s.index))
            out.append(
                f"the epilogue stores %{s.buf} at `{where}`: one element for several of the"
                " GEMM's points"
            )
    outputs = {b.id for b in k.outputs}
    exprs = [x for s in g.epilogue if isinstance(s, Let | Store) for x in _exprs(s)]
    for buf in sorted(
        {e.buf for x in exprs for e in subexpressions(x) if isinstance(e, Load)} & outputs
    ):
        out.append(f"the epilogue reads %{buf}, an output (C holds partial sums until the end)")
    if not any(e == Var(acc) for x in exprs for e in subexpressions(x)):
        out.append(f"the epilogue does not read the product `{acc}`")
    return out


def _prologue_problems(k: Kernel, g: Gemm, fold: Reduce) -> list[str]:
    """The prologues' rules: each the fold's term of its operand (None where the term is a
    load, the operand read in place); computed by contract.COMPUTED from loads of inputs at
    affine indices in the compute type (a dequant's integers and scales aside); over a fold
    of one variable; not varying along C's columns (A's) or rows (B's), as its panel is computed
    once for all of them."""
    if len(fold.terms) != 2:
        return []  # not a contraction: `check_layout` says so
    ta, tb = fold.terms
    if (_first_buf(ta), _first_buf(tb)) != (g.a, g.b):
        ta, tb = tb, ta
    rows = {v for v, _ in g.strides[2]} - {g.n} - {v for v, _ in g.batch}
    out: list[str] = []
    for w, (name, term, across) in enumerate((("A", ta, {g.n}), ("B", tb, rows))):
        have = g.prologue[w] if len(g.prologue) == 2 else None
        if have != (None if isinstance(term, Load) else term):
            out.append(f"its prologue of {name} is not its fold's term")
        if have is None:
            continue
        if len(fold.vars) != 1:
            out.append(f"its prologue of {name} is over a fold of {len(fold.vars)} variables")
        out += _panel_problems(k, f"its prologue of {name}", have, across)
    return out


def _panel_problems(k: Kernel, what: str, e, across: set[str], dequant: bool = False) -> list:
    """A prologue's expression's problems: contract.COMPUTED over constants and loads of
    inputs at affine indices, of the compute type (but a dequant's operands), reading none
    of the variables its panel is shared `across`."""
    match e:
        case Const():
            return []
        case Op(op, args, _):
            out = [] if op in COMPUTED else [f"{what} computes `{op}`, not a panel's arithmetic"]
            for a in args:
                out += _panel_problems(k, what, a, across, op == "dequant")
            return out
        case Load(buf, index) if 0 <= buf < len(k.buffers):
            pass
        case Load():
            return []  # not a buffer: the walk says so
        case _:
            return [f"{what} reads `{e}`, neither a load nor a constant"]
    out: list[str] = []
    if buf >= len(k.inputs):
        out.append(f"{what} reads %{buf}, an output")
    if not all(isinstance(i, Affine) for i in index):
        out.append(f"{what} reads %{buf} at a gathered index")
    dtype = k.buffers[buf].dtype
    if not dequant and dtype != k.compute:
        out.append(f"{what} reads %{buf} : {dtype}, not its compute type")
    used = {v for i in index if isinstance(i, Affine) for v, c in i.terms if c}
    out += [f"{what} reads `{v}`, along which its panel is shared" for v in sorted(used & across)]
    return out


def _one_each(coefs: dict[str, int], points: dict[str, int]) -> bool:
    """Whether the offsets Σ c·v over the points (each v in [0, extent)) are one element per
    point: every variable of more than one point has a stride, and each stride, smallest
    first, passes the reach of those before it (a row-major index at the loops' variables
    does, in any order of its axes)."""
    reach = 0
    for v, n in sorted(points.items(), key=lambda vn: abs(coefs.get(vn[0], 0))):
        if n <= 1:
            continue
        c = abs(coefs.get(v, 0))
        if c <= reach:
            return False
        reach += c * (n - 1)
    return True


def _exprs(s) -> list:
    """A let's or a store's expressions: its value, and a store's gathered indices."""
    if isinstance(s, Let):
        return [s.expr]
    return [s.expr, *(i for i in s.index if not isinstance(i, Affine))]


def _first_buf(t) -> int | None:
    """The buffer of a term's first load (an operand's, presk_kernel.contract's `a` or `b`)."""
    return next((e.buf for e in subexpressions(t) if isinstance(e, Load)), None)


def schedule_problems(s: Schedule) -> list[str]:
    """Every way `s` is not a well-formed schedule, its kernels' problems included."""
    out: list[str] = []
    hosts = {b.id: b for b in s.buffers}
    for which, ids in (("input", s.inputs), ("output", s.outputs)):
        out += [f"the entry's {which} {i} is not a host buffer" for i in ids if i not in hosts]
    for n, launch in enumerate(s.launches):
        k = launch.kernel
        where = f"launch {n} (`{k.name}` at {k.site})"
        if len(launch.args) != len(k.buffers):
            out.append(f"{where} binds {len(launch.args)} buffers to {len(k.buffers)}")
        for b, arg in zip(k.buffers, launch.args, strict=False):
            h = hosts.get(arg.buf)
            if h is None:
                out.append(f"{where} binds %{b.id} to {arg.buf}, not a host buffer")
            elif h.dtype != b.dtype:
                out.append(f"{where} binds %{b.id} : {b.dtype} to `{h.name}` : {h.dtype}")
            elif not 0 <= arg.offset <= elements(h.axes) - b.size:
                out.append(
                    f"{where} binds %{b.id} ({b.size} elements) from element {arg.offset} of "
                    f"`{h.name}` ({elements(h.axes)})"
                )
        out += problems(k)
    return out + host_problems(s)


def host_problems(s: Schedule) -> list[str]:
    """Every way the host functions of `s` are ill formed: each call of a host function
    that exists, its buffers of its parameters' and results' number and types, the entry's
    call first, and every launch in exactly one function, in order."""
    from presk_kernel.calls import call_launches, calls_in

    if s.body is None:
        return ["host functions without the entry's call"] if s.functions else []
    out: list[str] = []
    functions = {f.name: f for f in s.functions}
    if len(functions) != len(s.functions):
        out.append("two host functions of one name")
    if not s.functions or s.functions[0].name != s.body.function:
        out.append(f"the entry's call is of `{s.body.function}`, not the first host function")
    if [a.buf for a in s.body.args] != list(s.inputs):
        out.append("the entry's call does not take the entry's inputs")
    if [a.buf for a in s.body.results] != list(s.outputs):
        out.append("the entry's call does not give the entry's outputs")
    hosts = {b.id: b for b in s.buffers}
    for call in (s.body, *calls_in(s.body)):
        f = functions.get(call.function)
        if f is None:
            out.append(f"a call of `{call.function}`, not a host function")
            continue
        for what, args, bufs in (
            ("argument", call.args, f.params),
            ("result", call.results, f.results),
        ):
            if len(args) != len(bufs):
                out.append(f"a call of `{f.name}` with {len(args)} {what}s, not {len(bufs)}")
            for a, b in zip(args, bufs, strict=False):
                h = hosts.get(a.buf)
                if h is None:
                    out.append(f"a call of `{f.name}` passes {a.buf}, not a host buffer")
                elif h.dtype != b.dtype or not 0 <= a.offset <= elements(h.axes) - b.size:
                    out.append(
                        f"a call of `{f.name}` passes `{h.name}` : {h.dtype}[{elements(h.axes)}] from element {a.offset} as its {what} {b}"
                    )
    order = list(call_launches(s.body))
    if order != list(range(len(s.launches))):
        missing = sorted(set(range(len(s.launches))) - set(order))
        if missing:
            out.append(f"launch {missing[0]} is outside every host function")
        else:
            out.append("the host functions run the launches out of order, or one twice")
    return out


def verify_schedule(s: Schedule, after: str) -> Schedule:
    """`s`, or KernelVerifyError naming the pass `after` which made it ill formed."""
    found = schedule_problems(s)
    if found:
        raise KernelVerifyError([f"after the kernel pass `{after}`: {p}" for p in found])
    return s


def verified(s: Schedule, after: str) -> Schedule:
    """`s`, verified when `PRESK_VERIFY=1` (as presk_core.passes.verified is for Core)."""
    if os.environ.get("PRESK_VERIFY", "") in ("", "0"):
        return s
    return verify_schedule(s, after)
