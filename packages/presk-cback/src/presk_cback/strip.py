"""Lanes across folds: a kernel whose loop in vector lanes holds folds or loops, written as
strips of W lanes, each statement of its body a short loop over the strip's lanes (the
`layout` pass decides which loops, `For.strip`: presk_kernel.strips; this renders them).

A nest whose innermost parallel loop is in lanes but whose body folds (a softmax's three
passes over a row, a `sum_to` down the rows of each column) does not vectorize as written:
the compiler will not vectorize a loop that holds other loops. Written as strips, the lane
loop moves inside the fold's loops:

    for (v_i_s = 0; v_i_s < n; v_i_s += W) {          // a strip of W lanes
        float v_s[W];                                 // one accumulator per lane
        for (v_k = ...) {                             // the fold, in its order
    #pragma omp simd
            for (lj = 0; lj < v_i_n; lj++) { const int64_t v_i = v_i_s + lj;
                v_s[lj] = v_s[lj] + term(v_i, v_k); }
        }
        ...
    }

Every lane computes what its iteration computed, with the same operations in the same
order: each fold stays a left fold over its own variables (lanes run over a parallel loop,
never over a fold's variable: DESIGN §11), so the bits are the same.
"""

from __future__ import annotations

import math

from presk_kernel import libm
from presk_kernel.ir import Affine, Let, Load, Loop, Op, Reduce, Store, Var, accesses, stored
from presk_kernel.strips import ROWS
from presk_kernel.strips import straight as _straight

# Every array of a strip is declared 64-byte aligned (a vector register of AVX-512): its
# lanes are read and written by vector moves, and C must never assume an alignment it has
# not declared (an aligned move at 8 mod 16 of an undeclared `double v_s3[8]` was a SIGSEGV).
ALIGN = 64
ALIGNED = f"_Alignas({ALIGN}) "

assert ROWS == 8, "PRESK_T8 (presk_cback.emit's prelude) transposes blocks of 8 rows"

TERMS_BYTES = 1 << 16  # the most a strip across rows keeps of its folds' terms
# A strip across rows holds one 64-byte vector of each fold's accumulators (a zmm of
# AVX-512): 16 f32 rows, 8 f64 (`c_rows`). The layout's strip (`For.strip`, strips.ROWS:
# 8 rows) is written as strips of that many rows, their folds as several vectors of ROWS
# lanes in one loop, independent chains whose latencies overlap; each row's fold is the
# same left fold, so the bits do not change.
VECTOR_BYTES = 64


def _keepable(r: Reduce, written: set[int], later: frozenset = frozenset()) -> list:
    """The values in a fold's term worth keeping for the statements after it: the
    transcendentals (a softmax's quotients divide the same exponentials its sum added), and
    the quotients that a later statement computes again (`later`: a softmax's scaled score
    s/√d, which its max and its sum each divide); those that read no buffer the strip's body
    stores (`written`: in a slice group, presk_kernel.slices, what an earlier member wrote
    is read as an input is), and no value the fold's body defines."""
    inner = {s.name for s in r.body if isinstance(s, Let)}
    found: list = []

    def pure(e) -> bool:
        match e:
            case Load(buf, index):
                return buf not in written and all(isinstance(i, Affine) or pure(i) for i in index)
            case Var(name):
                return name not in inner
            case Op(_, args, _):
                return all(pure(a) for a in args)
        return True

    def walk(e) -> None:
        if isinstance(e, Op):
            if (e.op in libm.FUNCTIONS or (e.op == "div" and e in later)) and pure(e):
                if e not in found:
                    found.append(e)
                return
            for a in e.args:
                walk(a)

    for t in r.terms:
        walk(t)
    return found


def _widened(body, buffers) -> dict[int, int]:
    """The row loops of a strip's body whose bound may round up to whole vectors, each with
    the lanes of a vector of its stores: a loop over [0, stop) storing one buffer, the
    statement after it a loop over [stop, extent) storing that buffer at the same index (a
    narrowed softmax's quotients, then its hidden zeros: presk_kernel.narrow). Its last
    iterations then run as one vector, not lane by lane, and what they store past the bound
    the next loop stores again; their loads are in bounds over the whole extent (affine, as
    the loop's before it was narrowed: no gather, no checked index), and neither loop reads
    the buffer they store. The same values stored last: the same bits."""
    from presk_cback.arena import ITEMSIZE

    out: dict[int, int] = {}
    for n, (a, b) in enumerate(zip(body, body[1:], strict=False)):
        if not (isinstance(a, Loop) and isinstance(b, Loop)) or a.start is not None:
            continue
        if a.stop is None or b.start != a.stop or b.stop is not None:
            continue
        if (a.var, a.extent) != (b.var, b.extent) or len(a.body) != 1 or len(b.body) != 1:
            continue
        sa, sb = a.body[0], b.body[0]
        if not (isinstance(sa, Store) and isinstance(sb, Store)) or sa.buf != sb.buf:
            continue
        if sa.index != sb.index or not all(isinstance(i, Affine) for i in sa.index):
            continue
        loads = _loaded(sa.expr) | _loaded(sb.expr)
        dtype = buffers[sa.buf].dtype
        if sa.buf in loads or None in loads or dtype not in ("f32", "f64"):
            continue
        out[n] = VECTOR_BYTES // ITEMSIZE[dtype]
    return out


def _loaded(e) -> set:
    """The buffers `e` loads; None among them where an index is not affine (a gather)."""
    found = list(accesses((Let("", e),)))
    gathers = any(not isinstance(i, Affine) for _, index, _ in found for i in index)
    return {b for b, _, _ in found} | ({None} if gathers else set())


def _quotients(body) -> list[frozenset]:
    """For each statement of a strip's body, the quotients of loaded values the statements
    after it compute (what an earlier fold may keep for them: `_keepable`)."""
    found = [_divs(s) for s in body]
    return [frozenset().union(*found[i + 1 :]) for i in range(len(found))]


def _divs(node) -> set:
    """The divisions reading a load under a statement or an expression."""
    match node:
        case Op("div", args, _) if any(_loaded(a) for a in args):
            return {node}.union(*(_divs(a) for a in args))
        case Op(_, args, _):
            return set().union(*(_divs(a) for a in args))
        case Load(_, index):
            return set().union(*(_divs(i) for i in index if not isinstance(i, Affine)))
        case Let(_, e) | Store(_, _, e):
            return _divs(e)
        case Loop():
            return set().union(*(_divs(b) for b in node.body))
        case Reduce():
            return set().union(*(_divs(b) for b in (*node.body, *node.terms)))
    return set()


def _folds(body):
    for s in body:
        if isinstance(s, Reduce):
            yield s
        elif isinstance(s, Loop):
            yield from _folds(s.body)


def c_rows(width: int, rows: bool, body) -> int:
    """The rows of a strip across rows as C writes it: as many as one 64-byte vector of its
    widest fold's accumulators holds (16 f32, 8 f64), when every fold's terms and its kept
    exponentials still fit TERMS_BYTES at that width (else the layout's `width`); lanes
    along the loop (not across rows) as the layout gave them."""
    from presk_cback.arena import ITEMSIZE

    folds = list(_folds(body))
    if not rows or width != ROWS or not folds:
        return width
    if any(r.dtype not in ("f32", "f64") for r in folds):
        return width
    wide = VECTOR_BYTES // max(ITEMSIZE[r.dtype] for r in folds)
    for r in folds:
        n = math.prod(n for _, _, n in r.vars)
        if len(r.vars) == 1 and n * wide * ITEMSIZE[r.dtype] * 2 > TERMS_BYTES:
            return width
    return max(width, wide)


def _neg(a: Affine) -> Affine:
    return Affine(tuple((v, -c) for v, c in a.terms), -a.const)


class Strip:
    """Writes a lane loop's body as strips, into a KernelC (`kc`)."""

    def __init__(self, kc, var: str, width: int, rows: bool = False, of: str = "") -> None:
        self.kc, self.v, self.width, self.rows = kc, var, width, rows
        self.v_var = of  # the loop variable (`var` is its C name)
        # transcendentals of a fold's terms kept for the loops after it (`kept`):
        # expression -> (the array holding it, its type, the fold's variable, its extent)
        self.kept: dict = {}
        self.written: set[int] = set()  # the buffers the strip's body stores
        self.after: frozenset = frozenset()  # the quotients the statements after this one compute
        self.widen = None  # (a row loop, the lanes its bound rounds up to: `_widened`)

    def emit(self, lo: str, hi: str, depth: int, body, parallel: str | None) -> None:
        self.width = c_rows(self.width, self.rows, body)
        kc, v, w = self.kc, self.v, self.width
        self.written = stored(body)
        if parallel:
            kc.emit(parallel, 0)
        kc.emit(f"for (int64_t {v}_s = {lo}; {v}_s < {hi}; {v}_s += {w}) {{", depth)
        kc.emit(f"const int64_t {v}_n = {hi} - {v}_s < {w} ? {hi} - {v}_s : {w};", depth + 1)
        widened = _widened(body, kc.k.buffers)
        for n, (s, after) in enumerate(zip(body, _quotients(body), strict=True)):
            self.after, self.widen = after, (s, widened[n]) if n in widened else None
            self.stmt(s, depth + 1)
        self.kept, self.after, self.widen = {}, frozenset(), None
        kc.emit("}", depth)

    def reuse(self, var: str, n: int, stop) -> dict:
        """The kept values (`kept`) a loop over `var`, of n points up to `stop`, reads where
        it computes them again: those kept over the same points."""
        from presk_cback.emit import _name

        return {
            e: (f"{a}[lj][{_name(var)}]", t)
            for e, (a, t, v, k, upto) in self.kept.items()
            if v == var and k == n and (upto is None or upto == stop)
        }

    def hull(self, a: Affine) -> str:
        """The largest value over the strip's lanes of an affine bound (the strip's variable
        runs over [v_s, v_s + v_n)), in C."""
        from presk_cback.emit import affine_c

        c = dict(a.terms).get(self.v_var, 0)
        if not c:
            return affine_c(a)
        rest = Affine(tuple((v, k) for v, k in a.terms if v != self.v_var), a.const)
        at = f"{self.v}_s + {self.v}_n - 1" if c > 0 else f"{self.v}_s"
        return f"({affine_c(rest)} + {c}*({at}))"

    def lanes(self, depth: int, inner) -> None:
        """A loop over the strip's lanes around what `inner(depth)` writes."""
        kc, v = self.kc, self.v
        if not self.rows:
            kc.emit("#pragma omp simd", 0)
        kc.emit(f"for (int64_t lj = 0; lj < {v}_n; lj++) {{", depth)
        kc.emit(f"const int64_t {v} = {v}_s + lj;", depth + 1)
        kc.emit(f"(void){v};", depth + 1)  # a let of lane values may not index (an epilogue)
        inner(depth + 1)
        kc.emit("}", depth)

    def stmt(self, s, depth: int) -> None:
        from presk_cback.emit import CTYPE, _name, affine_c, loop_range

        kc = self.kc
        match s:
            case Let(name, expr):
                code, t = kc.expr(expr)
                kc.types[name] = t
                kc.emit(f"{ALIGNED}{CTYPE[t]} {_name(name)}[{self.width}];", depth)
                self.lanes(depth, lambda d: kc.emit(f"{_name(name)}[lj] = {code};", d))
                kc.laned.add(name)
            case Store():
                self.lanes(depth, lambda d: kc.stmt(s, d))
            case Loop(var, _, extent, body, _, start, stop) if self.rows and _straight(body):

                def along(d: int) -> None:  # each row's loop in vector lanes (its own bounds)
                    lo, hi = loop_range(extent, start, stop)
                    if self.widen is not None and self.widen[0] is s:  # whole vectors
                        w = self.widen[1]
                        hi = f"presk_mini({extent}, ({affine_c(stop)} + {w - 1}) & -{w})"
                    outer = kc.gathers
                    if start is None and stop is None and extent > 0:
                        kc.gathers = kc.hoist(body, var, d)
                    kc.emit("#pragma omp simd", 0)
                    kc.emit(
                        f"for (int64_t {_name(var)} = {lo}; {_name(var)} < {hi}; "
                        f"{_name(var)}++) {{",
                        d,
                    )
                    kc.kept = self.reuse(var, extent, stop)  # a softmax's quotients: its
                    # exponentials computed once
                    kc.block(body, d + 1)
                    kc.kept = {}
                    kc.gathers = outer
                    kc.emit("}", d)

                self.lanes(depth, along)
            case Loop(var, _, extent, body, _, start, stop):
                n = _name(var)
                lo, hi = loop_range(extent, start, stop)
                if start is not None or stop is not None:  # the strip's hull, lanes guarded
                    lo = lo if start is None else f"presk_maxi(0, -{self.hull(_neg(start))})"
                    hi = hi if stop is None else f"presk_mini({extent}, {self.hull(stop)})"
                kc.emit(f"for (int64_t {n} = {lo}; {n} < {hi}; {n}++) {{", depth)
                if _straight(body) and (start is not None or stop is not None):
                    own = " && ".join(
                        f"{n} {op} {affine_c(b)}"
                        for b, op in ((start, ">="), (stop, "<"))
                        if b is not None
                    )

                    def guarded(d: int) -> None:
                        kc.emit(f"if ({own}) {{", d)
                        kc.block(body, d + 1)
                        kc.emit("}", d)

                    self.lanes(depth + 1, guarded)
                elif _straight(body):
                    self.lanes(depth + 1, lambda d: kc.block(body, d))
                else:
                    outer = dict(self.kept)  # arrays kept inside this loop end with it
                    for b in body:
                        self.stmt(b, depth + 1)
                    self.kept = outer
                kc.emit("}", depth)
            case Reduce():
                self.reduce(s, depth)
            case _:
                raise TypeError(f"not a kernel statement: {s!r}")

    def reduce(self, r: Reduce, depth: int) -> None:
        from presk_cback.emit import CTYPE, _name, fold_identity

        kc = self.kc
        acc, t = _name(r.acc), r.dtype
        kc.types[r.acc] = t
        ref = f"{acc}[lj]"
        kc.emit(f"{ALIGNED}{CTYPE[t]} {acc}[{self.width}];", depth)
        count = math.prod(n for _, _, n in r.vars)
        if count == 0:
            self.lanes(depth, lambda d: kc.emit(f"{ref} = {fold_identity(r.op, t)};", d))
        elif r.block is not None:  # one block of the fold, resumed from the partial sums stored
            ((v, _, n),) = r.vars
            lo, v = _name(r.block), _name(v)

            def resume(d: int) -> None:
                code, have = kc.expr(r.resume)
                kc.emit(f"{ref} = {kc.cast(code, have, t)};", d)

            kc.emit(f"if ({lo} == 0) {{ const int64_t {v} = 0;", depth)
            self.lanes(depth + 1, lambda d: kc.fold_step(r, d, True, ref))
            kc.emit("} else {", depth)
            self.lanes(depth + 1, resume)
            kc.emit("}", depth)
            hi = f"({lo} + {r.size} < {n} ? {lo} + {r.size} : {n})"
            kc.emit(f"for (int64_t {v} = {lo} == 0 ? 1 : {lo}; {v} < {hi}; {v}++) {{", depth)
            self.prefetch(r, depth + 1)
            self.lanes(depth + 1, lambda d: kc.fold_step(r, d, False, ref))
            kc.emit("}", depth)
        elif r.stop is not None:  # a narrowed fold: up to the largest stop of the strip's lanes
            ((v, _, n),) = r.vars
            hi = f"{acc}_n"
            kc.emit(f"const int64_t {hi} = presk_mini({n}, {self.hull(r.stop)});", depth)
            self.lanes(depth, lambda d: kc.emit(f"{ref} = {fold_identity(r.op, t)};", d))
            if not (self.rows and self.terms_first(r, count, depth, hi)):
                kc.emit(f"if ({hi} > 0) {{ const int64_t {_name(v)} = 0;", depth)
                self.lanes(depth + 1, lambda d: kc.fold_step(r, d, True, ref))
                kc.emit("}", depth)
                kc.emit(f"for (int64_t {_name(v)} = 1; {_name(v)} < {hi}; {_name(v)}++) {{", depth)
                self.lanes(depth + 1, lambda d: kc.fold_step(r, d, False, ref))
                kc.emit("}", depth)
        elif self.rows and self.terms_first(r, count, depth):
            pass
        elif not r.vars:  # one term
            self.lanes(depth, lambda d: kc.fold_step(r, d, True, ref))
        elif len(r.vars) == 1:  # the first term peeled
            (v, _, n) = r.vars[0]
            kc.emit(f"{{ const int64_t {_name(v)} = 0;", depth)
            self.lanes(depth + 1, lambda d: kc.fold_step(r, d, True, ref))
            kc.emit("}", depth)
            kc.emit(f"for (int64_t {_name(v)} = 1; {_name(v)} < {n}; {_name(v)}++) {{", depth)
            self.lanes(depth + 1, lambda d: kc.fold_step(r, d, False, ref))
            kc.emit("}", depth)
        else:  # the first point is the same for every lane: a branch outside the lanes
            first = " && ".join(f"{_name(v)} == 0" for v, _, _ in r.vars)
            for i, (v, _, n) in enumerate(r.vars):
                kc.emit(
                    f"for (int64_t {_name(v)} = 0; {_name(v)} < {n}; {_name(v)}++) {{", depth + i
                )
            inner = depth + len(r.vars)
            kc.emit(f"if ({first}) {{", inner)
            self.lanes(inner + 1, lambda d: kc.fold_step(r, d, True, ref))
            kc.emit("} else {", inner)
            self.lanes(inner + 1, lambda d: kc.fold_step(r, d, False, ref))
            kc.emit("}", inner)
            for i in reversed(range(len(r.vars))):
                kc.emit("}", depth + i)
        kc.laned.add(r.acc)

    def prefetch(self, r: Reduce, depth: int) -> None:
        """In a block of a fold in strips, at its variable's point k: a hint for the lines of
        the strip's lanes at k + the block's size (the next block's) of each load that runs
        down the fold and along the lanes (a matrix read a block of rows at a time, each
        across every strip: left to the hardware, those lines come late, a row apart)."""
        from presk_cback.arena import ITEMSIZE
        from presk_cback.emit import _name

        kc, ((var, _, n),) = self.kc, r.vars
        loads = {
            (buf, index)
            for buf, index, _ in accesses(tuple(Let(r.acc, t) for t in r.terms))
            if all(isinstance(i, Affine) for i in index)
            and {var, self.v_var} <= {v for i in index for v, c in i.terms if c}
        }
        if not loads:
            return
        v, line = _name(var), 64 // ITEMSIZE[kc.k.buffers[next(iter(loads))[0]].dtype]
        kc.emit(f"if ({v} + {r.size} < {n}) {{ const int64_t {v}_p = {v} + {r.size};", depth)
        kc.emit(f"{{ const int64_t {v} = {v}_p;", depth + 1)
        for at in range(0, self.width, line):
            kc.emit(f"{{ const int64_t {self.v} = {self.v}_s + {at};", depth + 2)
            for buf, index in sorted(loads, key=str):
                kc.emit(f"PRESK_PREFETCH(&{kc.expr(Load(buf, index))[0]});", depth + 3)
            kc.emit("}", depth + 2)
        kc.emit("} }", depth + 1)

    def terms_first(self, r: Reduce, n: int, depth: int, hi: str | None = None) -> bool:
        """A fold of one variable, across rows: each row's terms computed first, in vector
        lanes along the fold's variable (they are independent), then the rows' folds
        interleaved, each in its order over the same terms. False when `r` is not such a
        fold (the caller writes it row by row)."""
        from presk_cback.arena import ITEMSIZE
        from presk_cback.emit import CTYPE, _name

        kc, t = self.kc, r.dtype
        if len(r.vars) != 1 or r.op == "fma" or n < 8 or t not in ("f64", "f32"):
            return False
        if n * self.width * ITEMSIZE[t] > TERMS_BYTES:
            return False
        acc, v = _name(r.acc), _name(r.vars[0][0])
        upto = hi or str(n)  # a narrowed fold's terms: the prefix its strip folds
        kc.emit(f"{ALIGNED}{CTYPE[t]} {acc}_t[{self.width}][{n}];", depth)
        keep = [
            e
            for e in _keepable(r, self.written, self.after)
            if n * self.width * ITEMSIZE[t] * 2 <= TERMS_BYTES and e not in self.kept
        ]
        for j in range(len(keep)):
            kc.emit(f"{ALIGNED}{CTYPE[t]} {acc}_k{j}[{self.width}][{n}];", depth)

        def terms(d: int) -> None:
            outer = kc.gathers
            if hi is None:  # (a narrowed fold's prefix may be empty)
                kc.gathers = kc.hoist((*r.body, *r.terms, *keep), r.vars[0][0], d)
            if keep:  # the kept values first, a loop of their own: no bool load (a
                # mask's not read as its comparison, KernelC.mask_read) sets its vector
                # length to 64 lanes, whose f64 polynomials would not fit the registers; an
                # earlier fold's kept values read, not computed
                self.kept_loop(r, keep, acc, v, n, upto, d)
            kc.emit("#pragma omp simd", 0)
            kc.emit(f"for (int64_t {v} = 0; {v} < {upto}; {v}++) {{", d)
            kc.block(r.body, d + 1)
            kc.kept = self.reuse(r.vars[0][0], n, r.stop)
            ((x, tx),) = [kc.expr(e) for e in r.terms]
            kc.kept = {}
            kc.emit(f"{acc}_t[lj][{v}] = {kc.cast(x, tx, t)};", d + 1)
            kc.emit("}", d)
            kc.gathers = outer
            guard = f"if ({hi} > 0) " if hi else ""  # a narrowed fold: its identity if empty
            kc.emit(f"{guard}{acc}[lj] = {acc}_t[lj][0];", d)

        self.lanes(depth, terms)
        f = "f" if t == "f32" else ""
        if r.op == "add":
            value = f"{acc}[lj] + {acc}_t[lj][{v}]"
        else:
            value = f"presk_{r.op}{f}({acc}[lj], {acc}_t[lj][{v}])"
        done = "0"  # the rows folded in vectors
        if self.width % ROWS == 0:  # whole blocks of 8 rows: their folds in vectors
            done = f"{acc}_r"
            kc.emit(f"int64_t {done} = 0;", depth)
            for c in reversed(range(1, self.width // ROWS + 1)):
                kc.emit(
                    f"{'} else ' if c < self.width // ROWS else ''}if ({self.v}_n >= {c * ROWS}) {{",
                    depth,
                )
                self.vector_fold(r, c, upto, depth + 1)
                kc.emit(f"{done} = {c * ROWS};", depth + 1)
            kc.emit("}", depth)
            kc.emit(f"if ({done} < {self.v}_n) {{", depth)
            depth += 1
        kc.emit(f"for (int64_t {v} = 1; {v} < {upto}; {v}++) {{", depth)
        kc.emit(f"for (int64_t lj = {done}; lj < {self.v}_n; lj++) {acc}[lj] = {value};", depth + 1)
        kc.emit("}", depth)
        if self.width % ROWS == 0:
            kc.emit("}", depth - 1)
        return True

    def kept_loop(self, r: Reduce, keep: list, acc: str, v: str, n: int, upto: str, d: int):
        """The loop storing a fold's kept values (`_keepable`) for the row, `acc_kJ[lj][…]`.
        Where some are f32 exponentials (a softmax's, of s − max), a check first: if every
        such argument of the row lies in [−110, 0] (no NaN), the loop computes them by
        presk_expf_neg, presk_expf's bits there in two thirds of its steps; else as
        written. The same values either way."""
        kc = self.kc
        kc.kept = self.reuse(r.vars[0][0], n, r.stop)  # an earlier fold's, read not computed
        values = [kc.expr(e) for e in keep]
        exps = [e for e in keep if isinstance(e, Op) and e.op == "exp"]
        fast = {e: kc.cast(*kc.expr(e.args[0]), "f32") for e in exps if kc.k.compute == "f32"}
        kc.kept = {}

        def loop(depth: int, neg: bool) -> None:
            kc.emit("#pragma omp simd", 0)
            kc.emit(f"for (int64_t {v} = 0; {v} < {upto}; {v}++) {{", depth)
            for j, (e, (code, _)) in enumerate(zip(keep, values, strict=True)):
                code = f"presk_expf_neg({fast[e]})" if neg and e in fast else code
                kc.emit(f"{acc}_k{j}[lj][{v}] = {code};", depth + 1)
            kc.emit("}", depth)

        if not fast:
            loop(d, False)
        else:
            ok = f"{acc}_in"
            kc.emit(f"int {ok} = 1;", d)
            kc.emit(f"#pragma omp simd reduction(&:{ok})", 0)
            kc.emit(f"for (int64_t {v} = 0; {v} < {upto}; {v}++) {{", d)
            for x in fast.values():
                kc.emit(f"{ok} &= ({x} >= -110.0f) & ({x} <= 0.0f);", d + 1)
            kc.emit("}", d)
            kc.emit(f"if ({ok}) {{  /* every argument in [-110, 0]: presk_expf_neg */", d)
            loop(d + 1, True)
            kc.emit("} else {", d)
            loop(d + 1, False)
            kc.emit("}", d)
        for j, (e, (_, te)) in enumerate(zip(keep, values, strict=True)):
            self.kept[e] = (f"{acc}_k{j}", te, r.vars[0][0], n, r.stop)

    def vector_fold(self, r: Reduce, chains: int, upto: str, depth: int) -> None:
        """The folds of rows [0, 8·chains) of the strip as `chains` vectors of 8 lanes, each
        lane the left fold of its row over its terms `acc_t[row][1..upto)`, in one loop:
        independent chains, their latencies overlapping. The terms 8 steps at a time: an
        8×8 block of a vector's rows' terms transposed in registers (PRESK_T8), each column
        a step of its 8 folds, in the fold's order.

        A max or a min takes quick steps first (PRESK_QUICK_VSTEP, MAXPS's rule: a third of
        the IEEE step's instructions). They give the IEEE fold's bits wherever no term is
        NaN and the result is not zero; where a lane fails that, the block folds again by
        the IEEE step."""
        from presk_cback.emit import _name

        kc, t = self.kc, r.dtype
        acc, v = _name(r.acc), _name(r.vars[0][0])
        f = "f" if t == "f32" else ""
        vt, it = f"presk_{t}x{ROWS}", f"presk_i{t[1:]}x{ROWS}"
        hs = range(chains)

        def loop(fold, d: int) -> None:  # steps 1 .. upto of every chain, `fold(h, x)` each
            kc.emit("{", d)
            kc.emit(f"int64_t {v} = 1;", d + 1)
            kc.emit(f"for (; {v} + {ROWS} <= {upto}; {v} += {ROWS}) {{", d + 1)
            for h in hs:
                kc.emit(f"{vt} x{h}[{ROWS}];", d + 2)
                kc.emit(f"PRESK_T8({vt}, {it}, ({acc}_t + {h * ROWS}), {v}, x{h});", d + 2)
            steps = " ".join(fold(h, f"x{h}[q]") for h in hs)
            # unrolled whole, so the block's vectors stay in registers (-O2 leaves an array)
            kc.emit(f"#pragma GCC unroll {ROWS}", d + 2)
            kc.emit(f"for (int q = 0; q < {ROWS}; q++) {{ {steps} }}", d + 2)
            kc.emit("}", d + 1)
            kc.emit(f"for (; {v} < {upto}; {v}++) {{", d + 1)
            for h in hs:
                lanes = ", ".join(f"{acc}_t[{h * ROWS + j}][{v}]" for j in range(ROWS))
                kc.emit(f"const {vt} x{h} = {{{lanes}}};", d + 2)
            kc.emit(" ".join(fold(h, f"x{h}") for h in hs), d + 2)
            kc.emit("}", d + 1)
            kc.emit("}", d)

        def start(d: int) -> None:  # each chain from its rows' first terms
            for h in hs:
                kc.emit(f"memcpy(&{acc}_v{h}, {acc} + {h * ROWS}, sizeof {acc}_v{h});", d)

        kc.emit(f"{vt} {', '.join(f'{acc}_v{h}' for h in hs)};", depth)
        start(depth)
        if r.op == "add":
            loop(lambda h, x: f"{acc}_v{h} = {acc}_v{h} + {x};", depth)
        else:
            bits = t[1:]
            mags = ", ".join(f"{acc}_m{h} = ({it}){acc}_v{h} & PRESK_ABS{bits}" for h in hs)
            kc.emit(f"{it} {mags};", depth)
            loop(lambda h, x: f"presk_{r.op}{f}_q{ROWS}({acc}_v{h}, {acc}_m{h}, {x});", depth)
            kc.emit(f"int {acc}_q = 1;", depth)
            kc.emit(f"for (int l = 0; l < {ROWS}; l++) {{", depth)
            for h in hs:
                ok = f"({acc}_m{h}[l] <= PRESK_INF{bits}) & ({acc}_v{h}[l] != 0)"
                kc.emit(f"{acc}_q &= {ok};", depth + 1)
            kc.emit("}", depth)
            kc.emit(f"if (!{acc}_q) {{  /* a NaN or a zero: the IEEE steps */", depth)
            start(depth + 1)
            loop(lambda h, x: f"presk_{r.op}{f}_x{ROWS}({acc}_v{h}, {x});", depth + 1)
            kc.emit("}", depth)
        for h in hs:
            kc.emit(f"memcpy({acc} + {h * ROWS}, &{acc}_v{h}, sizeof {acc}_v{h});", depth)
