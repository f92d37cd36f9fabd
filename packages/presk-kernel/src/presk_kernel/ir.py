"""PSK-Kernel: a kernel is one loop nest over static shapes, as plain data.

A `Kernel` reads its input buffers and writes its output buffers (numbered `%0, %1, …`
inside the kernel, inputs first), through a body of statements:

- `Loop(var, axis, extent, body)`: `var` runs over `0 … extent-1` (or, with `start` and
  `stop`, affine maps of the enclosing loops' variables, over `[start, stop)`: a triangular
  nest); the iterations are independent (each writes other elements), so a layout may
  reorder, tile, vectorize or split them over threads;
- `Reduce(acc, op, vars, body, terms)`: an accumulator folded over the row-major order of
  `vars`, left to right in increasing index, starting from the first term (DESIGN §4/§11):
  `op` is add, max, min (IEEE maximum: NaN wins, +0 over −0) or fma (a contraction: the
  first term is the rounded product, then `acc = fma(a, b, acc)`). Over no iteration the
  accumulator is the op's identity (+0, −inf, +inf);
- `Let(name, expr)`: a scalar temporary; `Store(buf, index, expr)`: one element written.

Expressions are scalar: `Const`, `Load(buf, index)`, `Var(name)`, `Index(var)` (a loop
variable as an integer) and `Op(op, args, attr)` over the scalar operations of `SCALAR_OPS`.
An index is a tuple of `Affine` maps of the loop variables, or, to gather, of expressions
whose value is an integer. Reals are computed in the kernel's `compute` type (f64, or f32
for f32 and bf16 storage: bf16 is widened at each load and rounded at each store).

A `Layout` says how the nest is executed (tiles, loop order, the axis in vector lanes, the
split over threads, packed operands); it never changes a bit (DESIGN §11).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

DTYPES = ("f64", "f32", "bf16", "i64", "bool", "i8")  # i8: integer weights (quant)
REAL_DTYPES = ("f64", "f32", "bf16")


@dataclass(frozen=True, slots=True)
class ScalarOp:
    """A scalar operation as every executor reads it: its arity, the kinds of its operands
    and of its result (`real`: the compute type or a promoted one, `int`, `bool`, `any`:
    a real or an integer, `same`: the operands' promoted kind), whether it is presk libm's
    (a transcendental), and what its `attr` holds (None: no attr)."""

    name: str
    arity: int
    operands: tuple[str, ...]
    result: str
    transcendental: bool = False
    attr: str | None = None


def _table(*ops: ScalarOp) -> dict[str, ScalarOp]:
    return {op.name: op for op in ops}


# The table of record: the kernel interpreter's rules (presk_kernel.interp.OP_RULES), the C
# emitter's (presk_cback.scalar_c.C_RULES) and the verifier (presk_kernel.spec) are keyed by
# it, and a test asserts each covers every entry.
SCALAR_TABLE: dict[str, ScalarOp] = _table(
    # arithmetic: numpy's promotion (an integer with a real is the real's type)
    ScalarOp("add", 2, ("any", "any"), "same"),
    ScalarOp("sub", 2, ("any", "any"), "same"),
    ScalarOp("mul", 2, ("any", "any"), "same"),
    ScalarOp("div", 2, ("any", "any"), "real"),  # true division: integers give a real
    ScalarOp("fma", 3, ("real", "real", "real"), "real"),  # rounded once
    ScalarOp("neg", 1, ("any",), "same"),
    ScalarOp("abs", 1, ("any",), "same"),
    ScalarOp("max", 2, ("any", "any"), "same"),  # IEEE 754-2019 maximum: NaN wins, +0 over −0
    ScalarOp("min", 2, ("any", "any"), "same"),
    # choices and tests
    ScalarOp("select", 3, ("bool", "any", "any"), "same"),  # cond ? a : b
    ScalarOp("compare", 2, ("any", "any"), "bool", attr="< <= > >= == !="),
    ScalarOp("same", 2, ("any", "any"), "bool"),  # equal bit for bit (NaN is NaN, −0 not +0)
    ScalarOp("and", 2, ("bool", "bool"), "bool"),
    ScalarOp("or", 2, ("bool", "bool"), "bool"),
    ScalarOp("not", 1, ("bool",), "bool"),
    ScalarOp("isnan", 1, ("real",), "bool"),
    ScalarOp("real", 1, ("any",), "real"),  # an integer or a truth value as a real
    # functions: sqrt is IEEE's, the transcendentals presk libm's
    ScalarOp("sqrt", 1, ("real",), "real"),
    ScalarOp("exp", 1, ("real",), "real", transcendental=True),
    ScalarOp("log", 1, ("real",), "real", transcendental=True),
    ScalarOp("tanh", 1, ("real",), "real", transcendental=True),
    ScalarOp("erf", 1, ("real",), "real", transcendental=True),
    ScalarOp("erfc", 1, ("real",), "real", transcendental=True),
    ScalarOp("sin", 1, ("real",), "real", transcendental=True),
    ScalarOp("cos", 1, ("real",), "real", transcendental=True),
    ScalarOp("pow", 1, ("real",), "real", attr="the integer exponent"),  # binary powering
    ScalarOp("powf", 2, ("real", "real"), "real", transcendental=True),  # the libm's pow
    ScalarOp("bf16", 1, ("real",), "real"),  # an f32 rounded to bf16 (nearest even): a fused store
    # an integer weight q (i8) times its binary32 scale s, as a load of the parameter's type
    # (attr) gives it: f64 exactly, f32 rounded once, bf16 rounded to f32 then to bf16
    ScalarOp("dequant", 2, ("int", "real"), "real", attr="f64 f32 bf16"),
    # counter-based draws (docs/randomness.md): a key is two uint32 words held as i64
    ScalarOp("key_word", 4, ("int", "int", "int", "int"), "int"),  # word w of hash(key, c)
    ScalarOp("uniform", 3, ("int", "int", "int"), "real"),  # draw c's 53 high bits · 2^-53
    ScalarOp("bernoulli", 4, ("int", "int", "int", "real"), "bool"),  # uniform < p, exactly
    ScalarOp("normal", 3, ("int", "int", "int"), "real"),  # Box–Muller at 256 bits, rounded
    # the initializers that draw (issue 29): value c of presk_core.random's, rounded once
    ScalarOp("xavier", 3, ("int", "int", "int"), "real", attr="fan_in + fan_out"),
    ScalarOp("normal_std", 3, ("int", "int", "int"), "real", attr="the std's decimal text"),
)
SCALAR_OPS: dict[str, int] = {name: op.arity for name, op in SCALAR_TABLE.items()}
TRANSCENDENTAL = frozenset(name for name, op in SCALAR_TABLE.items() if op.transcendental)


@dataclass(frozen=True, slots=True)
class Axis:
    name: str | None
    length: int

    def __str__(self) -> str:
        return f"{self.name}: {self.length}" if self.name else str(self.length)


def elements(axes: Iterable[Axis]) -> int:
    """The number of elements of a tensor of these axes (1 of none)."""
    return math.prod(a.length for a in axes)


@dataclass(frozen=True, slots=True)
class Buffer:
    """A kernel's operand: its number in the kernel, element type and static shape."""

    id: int
    dtype: str
    axes: tuple[Axis, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.length for a in self.axes)

    @property
    def size(self) -> int:
        return elements(self.axes)

    def __str__(self) -> str:
        return f"%{self.id} : {self.dtype}[{', '.join(str(a) for a in self.axes)}]"


@dataclass(frozen=True, slots=True)
class Affine:
    """Σ coeff·var + const over loop variables."""

    terms: tuple[tuple[str, int], ...]
    const: int = 0

    @staticmethod
    def var(name: str) -> Affine:
        return Affine(((name, 1),))

    @staticmethod
    def constant(c: int) -> Affine:
        return Affine((), c)

    def __str__(self) -> str:
        parts = [v if c == 1 else f"{c}*{v}" for v, c in self.terms if c]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


# ---- expressions -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Const:
    value: float | int | bool
    dtype: str  # f64 / f32 (the value already rounded to it), i64 or bool

    def __str__(self) -> str:
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        text = repr(self.value)
        finite = text not in ("inf", "-inf", "nan")
        return f"{text}f" if self.dtype == "f32" and finite else text


@dataclass(frozen=True, slots=True)
class Load:
    buf: int
    index: tuple[Affine | Expr, ...]

    def __str__(self) -> str:
        return f"%{self.buf}[{', '.join(str(i) for i in self.index)}]"


@dataclass(frozen=True, slots=True)
class Var:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Index:
    var: str

    def __str__(self) -> str:
        return f"index {self.var}"


@dataclass(frozen=True, slots=True)
class Op:
    op: str
    args: tuple[Expr, ...]
    attr: str | int | None = None

    def __str__(self) -> str:
        head = self.op if self.attr is None else f"{self.op} {self.attr}"
        return f"{head}({', '.join(str(a) for a in self.args)})"


Expr = Const | Load | Var | Index | Op


# ---- statements --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Let:
    name: str
    expr: Expr


@dataclass(frozen=True, slots=True)
class Store:
    buf: int
    index: tuple[Affine | Expr, ...]
    expr: Expr


@dataclass(frozen=True, slots=True)
class Loop:
    var: str
    axis: str | None  # the axis it runs over, for the printer and the layout
    extent: int
    body: tuple[Stmt, ...]
    serial: bool = False  # iterations in order (a scatter that adds into its output)
    # Bounds in the enclosing loops' variables (issue 26, a triangular nest): `var` runs
    # over [start, stop), within [0, extent] wherever the enclosing loops run (verified);
    # None: 0 and `extent`. Never on a serial loop; a bounded loop is body, not layout.
    start: Affine | None = None
    stop: Affine | None = None


@dataclass(frozen=True, slots=True)
class Reduce:
    acc: str
    op: str  # add, max, min, fma
    vars: tuple[tuple[str, str | None, int], ...]  # (var, axis, extent), row-major
    body: tuple[Stmt, ...]
    terms: tuple[Expr, ...]  # one term; two (a, b) for fma
    dtype: str = "f64"  # the accumulator's type (i64 for an index)
    # A block of the fold (a layout's kblock, laid out only): its one variable runs over
    # [block, min(block + size, extent)) where `block` is the enclosing `Tile` over it; the
    # accumulator starts from the first term in the first block, from `resume` (the partial
    # sum the previous block stored) in the others: the same fold, in the same order.
    block: str | None = None
    size: int = 0
    resume: Expr | None = None
    # A narrowed fold (presk_kernel.narrow, issue 26): its one variable runs over
    # [0, min(extent, stop)), `stop` affine in the enclosing loops' variables. The terms past
    # it are exact no-ops of the fold (masked terms, its identity at every accumulator it can
    # hold), so an executor may fold any longer prefix (a strip of rows folds up to the
    # largest stop among its rows): the same bits.
    stop: Affine | None = None
    # A contraction whose terms from `zeros` on have an operand that is ±0 or not finite
    # (presk_kernel.narrow's zero operands, issue 26: the softmax's weights past the causal
    # bound, its adjoint's a·(g − Σ)): its value is the whole fold's, and an executor may
    # fold its one variable over [0, min(extent, zeros)) only — or any longer prefix —
    # continuing the fold over the rest where the accumulator is −0 there or a term past it
    # is not finite (elsewhere the rest are no-ops: x + ±0 = x for x not zero, +0 + ±0 = +0).
    # `zeros_first`: the terms before `zeros` are those, and an executor may fold from
    # `zeros` (or any earlier point) to the end, folding the whole again where the result
    # is −0 or a term it skipped is not finite. An executor that ignores both folds the
    # whole: the same bits.
    zeros: Affine | None = None
    zeros_first: bool = False
    # `zeros_finite`: that operand is ±0 there, never NaN or infinite (a ±0 stored, not a
    # product of one): an executor need not look at it for a value that is not finite.
    zeros_finite: bool = False


@dataclass(frozen=True, slots=True)
class Tile:
    """A tile loop of a laid-out nest (the `layout` pass writes it): `var`, the tile's first
    index, runs over 0, size, 2·size, … below `extent` (of the loop variable `of`, whose
    `For` inside it runs within the tile); `threads` > 1: its iterations split among that
    many threads (OpenMP's static schedule), each tile computed by one."""

    var: str
    of: str
    extent: int
    size: int
    body: tuple[Stmt, ...]
    threads: int = 1


@dataclass(frozen=True, slots=True)
class For:
    """A loop of a laid-out nest (the `layout` pass writes it from a parallel `Loop`): `var`
    runs over [0, extent), or, inside the `Tile` whose variable is `tile`, over [tile,
    min(tile + size, extent)). Its iterations are independent. `threads` > 1: split among
    that many threads (OpenMP's static schedule); `lanes` > 0: in vector lanes of that
    width (0: none); `strip` > 0: the lanes written as strips of `strip` lanes across the folds of its
    body (`rows`: lanes across rows, each fold's terms in lanes along the fold)."""

    var: str
    axis: str | None
    extent: int
    body: tuple[Stmt, ...]
    tile: str | None = None
    size: int = 0
    threads: int = 1
    lanes: int = 0
    strip: int = 0
    rows: bool = False


# ---- kernels -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gemm:
    """A contraction executed as the generated GEMM (the `layout` pass recognised it,
    presk_kernel.contract): for each point of the `batch` loops, C[m, n] = fold fma over k
    of A[m, k]·B[k, n], `rows` × `cols` outputs of `depth` terms, k running over the fold's
    points in its order (so the bits are the loops'). `strides` gives, for A, B and C, each
    variable's stride in the row-major buffer (`k`'s the fold's innermost, the batch loops'
    for the offset of each call), `offsets` their constant offsets."""

    a: int
    b: int
    c: int
    m: str
    n: str
    k: str
    rows: int
    cols: int
    depth: int
    batch: tuple[tuple[str, int], ...]
    strides: tuple[tuple[tuple[str, int], ...], ...]
    offsets: tuple[int, ...]
    # An epilogue (fusion, presk_kernel.fuse): the statements the nest runs after its fold
    # for each output element, `acc` the fold's accumulator, holding the finished sum that C
    # holds there; they store the element of C again (its final value). Empty: C is the sum.
    acc: str = ""
    epilogue: tuple[Stmt, ...] = ()
    # Prologues (presk_kernel.epilogue, at emission): for A then B, the fold's term when it
    # is computed from loads rather than one load (a dequantised weight, a norm's scaled
    # row), which the GEMM writes into its packed panels; None: the operand's buffer `a` or
    # `b`, read. Empty: both read.
    prologue: tuple[Expr | None, ...] = ()

    def stride(self, operand: int, var: str) -> int:
        return dict(self.strides[operand]).get(var, 0)

    def __str__(self) -> str:
        batch = "".join(f" x{n}" for _, n in self.batch)
        epilogue = " with epilogue" if self.epilogue else ""
        prologue = " with prologue" if any(p is not None for p in self.prologue) else ""
        return f"gemm {self.rows}x{self.cols}x{self.depth}{batch}{prologue}{epilogue}"


@dataclass(frozen=True, slots=True)
class GemmStmt:
    """A nest executed as the generated GEMM (the `layout` pass writes it where the layout
    asks for one): `gemm` says how (presk_kernel.contract), `threads` how many threads share
    its columns, and `nest` is the loop nest it computes, the same fold in the same order
    (so the same bits: an executor may run either). `batched`: the threads share the points
    of its batch loops instead (OpenMP's static schedule over them, in one parallel region),
    each call of the GEMM whole on one thread. `bound`: its first `bound` batch loops are
    the loops around it (a slice group's, presk_kernel.slices), its nest what they hold:
    a call for each point of the others."""

    gemm: Gemm
    threads: int
    nest: tuple[Stmt, ...]
    batched: bool = False
    bound: int = 0


@dataclass(frozen=True, slots=True)
class TwoPass:
    """A softmax in two passes over its input (the `layout` pass writes it where the layout
    says `passes 2`): `body` runs the max, then one pass that stores each term to the output
    and adds it, then divides the output in place; `nest` is the three-pass nest it computes,
    the same values in the same order (so the same bits: an executor may run either)."""

    body: tuple[Stmt, ...]
    nest: tuple[Stmt, ...]


Stmt = Let | Store | Loop | Reduce | Tile | For | GemmStmt | TwoPass


@dataclass(frozen=True, slots=True)
class Layout:
    """How a nest executes. `order`: the parallel loops, outermost first; `tiles`: a tile
    size per loop variable; `lanes`: the loop in vector lanes (never a reduction's) and their
    count; `split`: the loop divided among `threads`; `pack`: inputs copied to panels;
    `gemm`: the nest as a call of the generated GEMM over its packed operands; `kblock`: a
    block over a contraction's summed axis (0: none); `blocks`: the order of the block loops
    (the tiled loops and the summed axis's block; empty: the tiles in `order`'s order);
    `depth`: the position, among the laid-out loops (block loops first), of the loop split
    among `threads`; `passes`: a softmax's passes over its input (2 or 3; 0: the nest's
    own); `parts`: a slice group's (presk_kernel.slices): the nest is `order`'s loops around
    statements, each laid out by its part (a layout of the statement inside those loops),
    `split` the first loop's threads; `scratch`: outputs of a slice group each accessed at
    its own point only, kept as one slice for each point of the split loop (one in all at
    one thread): their accesses leave out the terms of the group's other loops, so a point
    reuses the slice the point before it wrote, in cache. What such a buffer holds after the
    kernel is not the plain nest's: the pass that keeps one (presk_kernel.slices) does so
    only where nothing else reads it and nothing reads what a point leaves unstored."""

    order: tuple[str, ...] = ()
    tiles: tuple[tuple[str, int], ...] = ()
    lanes: str | None = None
    width: int = 1
    split: str | None = None
    threads: int = 1
    pack: tuple[int, ...] = ()
    gemm: Gemm | None = None
    kblock: int = 0
    blocks: tuple[str, ...] = ()
    depth: int = 0
    passes: int = 0
    parts: tuple[Layout, ...] = ()
    scratch: tuple[int, ...] = ()

    def __str__(self) -> str:
        parts = [f"order {' '.join(self.order) or '-'}"]
        if self.tiles:
            parts.append("tile [" + ", ".join(f"{v}: {n}" for v, n in self.tiles) + "]")
        if self.kblock:
            parts.append(f"kblock {self.kblock}")
        if self.blocks:
            parts.append(f"blocks {' '.join(self.blocks)}")
        parts.append(f"lanes {self.lanes} x{self.width}" if self.lanes else "lanes 1")
        at = f" at {self.depth}" if self.depth else ""
        parts.append(f"split ({self.split}, {self.threads}){at}" if self.split else "split none")
        if self.passes:
            parts.append(f"passes {self.passes}")
        parts.append("pack " + ", ".join(f"%{i}" for i in self.pack) if self.pack else "no pack")
        if self.gemm is not None:
            parts.append(str(self.gemm))
        if self.parts:
            parts.append("slices [" + "; ".join(str(p) for p in self.parts) + "]")
        if self.scratch:
            parts.append("scratch " + ", ".join(f"%{i}" for i in self.scratch))
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Kernel:
    name: str  # the operation (`ein[batch, heads, seq, seq2]`) or `fused 3 steps`
    site: str  # the site that launches it: `attend/%5`
    inputs: tuple[Buffer, ...]
    outputs: tuple[Buffer, ...]
    body: tuple[Stmt, ...]
    compute: str = "f64"  # the arithmetic of its reals: f64 or f32
    layout: Layout = field(default_factory=Layout)
    steps: tuple[str, ...] = ()  # the sites a fused kernel computes, in order

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        return self.inputs + self.outputs


@dataclass(frozen=True, slots=True)
class Arg:
    """A host buffer (`buf`), from element `offset` on: the slice of a stacked parameter."""

    buf: int
    offset: int = 0


@dataclass(frozen=True, slots=True)
class HostBuffer:
    id: int
    dtype: str
    axes: tuple[Axis, ...]
    name: str  # the value it holds: `θ.blocks.proj.w`, `attend/%5`
    role: str = "temp"  # input, output, temp


@dataclass(frozen=True, slots=True)
class Launch:
    kernel: Kernel
    args: tuple[Arg, ...]  # one per kernel buffer, inputs then outputs


@dataclass(frozen=True, slots=True)
class Inlined:
    """A call the lowering (or fusion) inlined into its caller's body, and why."""

    function: str
    why: str


@dataclass(frozen=True, slots=True)
class Call:
    """A host function called: `function` (its name as the specialized Core program names
    it, `Block.apply[batch: 2]`), its arguments and results as the caller's host buffers
    (one per tensor leaf, in order), and its body in this call: the launches it runs
    (indices into `Schedule.launches`) and the calls it makes, in order; `inlined`, the calls
    of its body that were not kept as calls (their launches are in this body)."""

    function: str
    args: tuple[Arg, ...]
    results: tuple[Arg, ...]
    body: tuple[int | Call, ...]
    inlined: tuple[Inlined, ...] = ()


@dataclass(frozen=True, slots=True)
class HostFunction:
    """A Presk function the entry reaches, as the host runs it: the types of its parameters
    and of its results (a buffer per tensor leaf, numbered `%0…` as a kernel's, parameters
    first), and how many times the schedule calls it."""

    name: str
    params: tuple[Buffer, ...]
    results: tuple[Buffer, ...]
    calls: int = 1


@dataclass(frozen=True, slots=True)
class Schedule:
    """An entry's host program: its buffers, the kernels it launches in order (`launches`,
    the flattened view every executor runs), and the host functions around them: one per
    Presk function the entry reaches (`functions`, the entry's first) and the entry's call
    (`body`), whose tree of calls holds every launch once, in order. A schedule built
    without them (`body` None) is the entry's function alone, every launch in it."""

    entry: str
    dims: tuple[tuple[str, int], ...]
    buffers: tuple[HostBuffer, ...]
    launches: tuple[Launch, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    functions: tuple[HostFunction, ...] = ()
    body: Call | None = None


NODE_TYPES = (
    Axis,
    Buffer,
    Affine,
    Const,
    Load,
    Var,
    Index,
    Op,
    Let,
    Store,
    Loop,
    Reduce,
    Tile,
    For,
    Gemm,
    GemmStmt,
    TwoPass,
    Layout,
    Kernel,
    Arg,
    HostBuffer,
    Launch,
    Inlined,
    Call,
    HostFunction,
    Schedule,
)


def stored(body: tuple) -> set[int]:
    """The buffers a plain body stores."""
    out: set[int] = set()
    for s in body:
        if isinstance(s, Store):
            out.add(s.buf)
        elif isinstance(s, Loop | Reduce):
            out |= stored(s.body)
    return out


def subexpressions(e):
    """`e` and every expression inside it (a gather's index too), outermost first."""
    yield e
    match e:
        case Load(_, index):
            for i in index:
                if not isinstance(i, Affine):
                    yield from subexpressions(i)
        case Op(_, args, _):
            for a in args:
                yield from subexpressions(a)


def accesses(body):
    """(buffer, index, is a store) of every load and store under `body`."""

    def expr(e):
        for x in subexpressions(e):
            if isinstance(x, Load):
                yield x.buf, x.index, False

    for s in body:
        match s:
            case Let(_, e):
                yield from expr(e)
            case Store(buf, index, e):
                yield buf, index, True
                for i in index:
                    if not isinstance(i, Affine):
                        yield from expr(i)
                yield from expr(e)
            case Loop():
                yield from accesses(s.body)
            case Reduce():
                yield from accesses(s.body)
                for t in s.terms:
                    yield from expr(t)
                if s.resume is not None:
                    yield from expr(s.resume)


def plain(body: tuple) -> tuple:
    """A laid-out body as the nest it lays out: each `For` its `Loop`, a `Tile` its body, a
    GEMM statement its nest (a body not laid out is itself)."""
    out: list = []
    for s in body:
        match s:
            case Tile():
                out.extend(plain(s.body))
            case For():
                out.append(Loop(s.var, s.axis, s.extent, plain(s.body)))
            case GemmStmt() | TwoPass():
                out.extend(s.nest)
            case Reduce() if s.block is not None:
                out.append(
                    Reduce(
                        s.acc,
                        s.op,
                        s.vars,
                        plain(s.body),
                        s.terms,
                        s.dtype,
                        stop=s.stop,
                        zeros=s.zeros,
                        zeros_first=s.zeros_first,
                        zeros_finite=s.zeros_finite,
                    )  # fmt: skip
                )
            case _:
                out.append(s)
    return tuple(out)


# ---- printing ----------------------------------------------------------------------------


def header(k: Kernel) -> str:
    """`kernel ein[…] (%0 : f64[…], %1 : …) -> %2 : f64[…] {`, the spec's header."""
    ins = ", ".join(str(b) for b in k.inputs)
    outs = ", ".join(str(b) for b in k.outputs)
    if len(k.outputs) != 1:
        outs = f"({outs})"
    return f"kernel {k.name} ({ins}) -> {outs} {{"


def _index(index: tuple) -> str:
    return ", ".join(str(i) for i in index)


def _on(axis: str | None) -> str:
    return f" ({axis})" if axis else ""


def _bounds(start: Affine | None, stop: Affine | None, extent: int) -> str:
    """A triangular bound, `for i4 < 5 in 0 .. i2 + 1`: the range [start, stop) within
    [0, extent)."""
    if start is None and stop is None:
        return ""
    return f" in {start if start is not None else 0} .. {stop if stop is not None else extent}"


def _stmt(s: Stmt, indent: str) -> list[str]:
    match s:
        case Let(name, expr):
            return [f"{indent}{name} = {expr}"]
        case Store(buf, index, expr):
            return [f"{indent}%{buf}[{_index(index)}] = {expr}"]
        case Loop(var, axis, extent, body, serial, start, stop):
            kw = "for serial" if serial else "for"
            lines = [f"{indent}{kw} {var} < {extent}{_bounds(start, stop, extent)}{_on(axis)} {{"]
            for b in body:
                lines.extend(_stmt(b, indent + "  "))
            return [*lines, f"{indent}}}"]
        case Reduce(
            acc, op, vs, body, terms, dtype, block, size, resume, stop, zeros, first, finite
        ):
            over = ", ".join(f"{v} < {n}{_bounds(None, stop, n)}{_on(a)}" for v, a, n in vs)
            if zeros is not None:  # a contraction whose terms from (before) `zeros` are ±0
                over += f", {'finite ' if finite else ''}zeros"
                over += f" {'before' if first else 'from'} {zeros}"
            if block is not None:
                over += f" in {block} + {size}, resuming {resume}"
            lines = [f"{indent}{acc} : {dtype} = fold {op} over {over} {{"]
            for b in body:
                lines.extend(_stmt(b, indent + "  "))
            return [*lines, f"{indent}}} of {', '.join(str(t) for t in terms)}"]
        case Tile(var, of, extent, size, body, threads):
            on = f" threads {threads}" if threads > 1 else ""
            lines = [f"{indent}tile {var} < {extent} by {size} ({of}){on} {{"]
            for b in body:
                lines.extend(_stmt(b, indent + "  "))
            return [*lines, f"{indent}}}"]
        case For(var, axis, extent, body, tile, size, threads, lanes, strip, rows):
            where = f" in {tile} + {size}" if tile else ""
            marks = [f"threads {threads}"] if threads > 1 else []
            marks += [f"lanes {lanes}"] if lanes > 0 else []
            marks += [f"strip {strip}{' rows' if rows else ''}"] if strip else []
            head = f"{indent}for {var} < {extent}{where}{f' ({axis})' if axis else ''}"
            lines = [f"{head}{''.join(f', {m}' for m in marks)} {{"]
            for b in body:
                lines.extend(_stmt(b, indent + "  "))
            return [*lines, f"{indent}}}"]
        case GemmStmt(gemm, threads, nest, batched, bound):
            g = gemm
            on = f"threads {threads}{' over its batch' if batched else ''}"
            on += f", {bound} batch loops around it" if bound else ""
            lines = [f"{indent}{g} (a %{g.a}, b %{g.b}, c %{g.c}), {on}, of {{"]
            for b in nest:
                lines.extend(_stmt(b, indent + "  "))
            return [*lines, f"{indent}}}"]
        case TwoPass(body, _):
            lines = [f"{indent}two passes {{"]
            for b in body:
                lines.extend(_stmt(b, indent + "  "))
            return [*lines, f"{indent}}}"]
    raise TypeError(f"not a kernel statement: {s!r}")


def format_kernel(k: Kernel) -> str:
    lines = [header(k), f"  // site {k.site}, {k.compute}, {k.layout}"]
    if k.steps:
        lines.append(f"  // steps {', '.join(k.steps)}")
    for s in k.body:
        lines.extend(_stmt(s, "  "))
    lines.append("}")
    return "\n".join(lines)


def format_launch(launch: Launch, buffers: dict[int, HostBuffer]) -> str:
    args = ", ".join(
        buffers[a.buf].name + (f"+{a.offset}" if a.offset else "") for a in launch.args
    )
    return f"launch {launch.kernel.name} at {launch.kernel.site} ({args})"


def format_schedule(s: Schedule) -> str:
    dims = ", ".join(f"{k} = {v}" for k, v in s.dims)
    out = [f"entry {s.entry}{f' at {dims}' if dims else ''}: {len(s.launches)} launches"]
    for launch in s.launches:
        out.append(format_kernel(launch.kernel))
    if s.body is not None:
        out.extend(format_host(s))
    return "\n".join(out) + "\n"


def format_host(s: Schedule) -> list[str]:
    """Each host function: its signature, then the body of its first call: its launches
    under their sites, its calls, the calls inlined into it and why."""
    buffers = {b.id: b for b in s.buffers}
    first: dict[str, Call] = {}
    stack = [s.body]
    while stack:
        call = stack.pop()
        first.setdefault(call.function, call)
        stack.extend(reversed([c for c in call.body if isinstance(c, Call)]))

    def names(args: tuple[Arg, ...]) -> str:
        return ", ".join(buffers[a.buf].name + (f"+{a.offset}" if a.offset else "") for a in args)

    out = []
    for f in s.functions:
        ins = ", ".join(str(b) for b in f.params)
        outs = ", ".join(str(b) for b in f.results)
        times = "inlined at every call" if f.calls == 0 else f"called {f.calls}"
        out.append(f"host {f.name} ({ins}) -> ({outs}), {times} {{")
        call = first.get(f.name)
        for item in call.body if call is not None else ():
            if isinstance(item, Call):
                out.append(
                    f"  call {item.function} ({names(item.args)}) -> ({names(item.results)})"
                )
            else:
                out.append(f"  {item}: {format_launch(s.launches[item], buffers)}")
        for i in call.inlined if call is not None else ():
            out.append(f"  // inlined {i.function}: {i.why}")
        out.append("}")
    return out
