"""The rules, exact over ℝ, each written once with its name (docs/optimizer.md, "Rules").

A rule is a `Rule`: the name an instruction it makes carries as its origin's rule, a line
saying why it is exact, and its egglog rewrites. A rewrite's left side matches operations
by name and attribute key, whatever made them (`m`, a `Made`); its right side writes new
operations made by this rule from the matched one (`Made.by(m, name)`), with a type
the shape rules give (a condition on `type_of` where the operands' types decide it).

`TYPING` gives every term its type; `RULES` are the rewrites; `SCALAR` is the type key of a
literal (`ℝ[]`), registered first in every function's tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from egglog import BigInt, BigRat, String, Vec, eq, ne, rewrite, rule, ruleset, set_, vars_

from presk_opt import records, squeeze, terms
from presk_opt.terms import Made, Term, no_minus_zero, type_of

SCALAR = terms.SCALAR  # the type key of ℝ[], a literal's type (Tables registers it first)

op, at, at2, t, t2, t3, n, k, rk, r1, r2 = vars_("op at at2 t t2 t3 n k rk r1 r2", String)
m, m2, m3 = vars_("m m2 m3", Made)
x, y, z, w = vars_("x y z w", Term)
(vs,) = vars_("vs", Vec[Term])
p, q = vars_("p q", BigRat)


@dataclass(frozen=True)
class Rule:
    name: str  # the origin's rule of what it makes: `x ^ 1 = x`
    why: str  # why it is exact over ℝ
    rewrites: tuple


def _zero() -> Term:
    return Term.num(BigRat(0, 1), t3)


def _one() -> Term:
    return Term.num(BigRat(1, 1), t3)


def power_of_two(r: BigRat) -> tuple:
    """r = ±2ᵏ (k an integer of either sign): |numerator| and denominator both powers of
    two (a reduced fraction: one of them is 1), r ≠ 0."""
    num, den = abs(r).numer, r.denom
    one, none = BigInt(1), BigInt(0)
    return (
        ne(num).to(none),
        eq(num & (num - one)).to(none),
        eq(den & (den - one)).to(none),
    )


def _n2(name: str, o: str, a: Term, b: Term, ty=t) -> Term:
    return Term.n2(o, "", ty, Made.by(m, name), a, b)


def _rules() -> list[Rule]:
    out: list[Rule] = []

    def add(name: str, why: str, *rws) -> None:
        out.append(Rule(name, why, rws))

    same = eq(type_of(x)).to(t)  # x has the result's type: replacing the result by x types
    signed = no_minus_zero(x)  # x + (+0) is x but for x = −0, which it makes +0
    add(
        "x + 0 = x",
        "0 is the neutral element of addition (either side), when x is never −0 (SIGNS)",
        rewrite(Term.n2("add", at, t, m, x, _zero())).to(x, same, signed),
        rewrite(Term.n2("add", at, t, m, _zero(), x)).to(x, same, signed),
    )
    add(
        "x - 0 = x",
        "subtracting 0 is the identity",
        rewrite(Term.n2("sub", at, t, m, x, _zero())).to(x, same),
    )
    add(
        "x · 1 = x",
        "1 is the neutral element of multiplication (either side)",
        rewrite(Term.n2("mul", at, t, m, x, _one())).to(x, same),
        rewrite(Term.n2("mul", at, t, m, _one(), x)).to(x, same),
    )
    add(
        "x / 1 = x",
        "dividing by 1 is the identity",
        rewrite(Term.n2("div", at, t, m, x, _one())).to(x, same),
    )
    add(
        "x ^ 1 = x",
        "the first power is the identity",
        rewrite(Term.n2("pow", at, t, m, x, _one())).to(x, same),
    )
    name = "x ^ 2 = x · x"
    add(
        name,
        "the square is the product with itself (both directions: the cost model chooses)",
        rewrite(Term.n2("pow", at, t, m, x, Term.num(BigRat(2, 1), t3))).to(
            _n2(name, "mul", x, x), same
        ),
        rewrite(Term.n2("mul", at, t, m, x, x)).to(
            _n2(name, "pow", x, Term.num(BigRat(2, 1), SCALAR)), same
        ),
    )
    fold = "constant folding"
    zero = BigRat(0, 1)
    nonzero = ne(p).to(zero)  # p ≠ 0
    add(
        fold,
        "two rational literals computed in exact ℚ (ℚ ⊂ ℝ: no rounding); a zero result only "
        "where IEEE gives +0 (a rational literal is never −0: ZERO SIGNS)",
        # p + q and p − q: an exact zero is +0 in IEEE (x − x, x + (−x) round to nearest)
        rewrite(Term.n2("add", at, t, m, Term.num(p, t2), Term.num(q, t3))).to(Term.num(p + q, t)),
        rewrite(Term.n2("sub", at, t, m, Term.num(p, t2), Term.num(q, t3))).to(Term.num(p - q, t)),
        # p · q: 0 · q is −0 for q < 0, p · 0 for p < 0; fold a zero product of signs ≥ 0
        rewrite(Term.n2("mul", at, t, m, Term.num(p, t2), Term.num(q, t3))).to(
            Term.num(p * q, t), nonzero, ne(q).to(zero)
        ),
        rewrite(Term.n2("mul", at, t, m, Term.num(p, t2), Term.num(q, t3))).to(
            Term.num(p * q, t), p >= zero, q >= zero
        ),
        # p / q, q ≠ 0: 0 / q is −0 for q < 0
        rewrite(Term.n2("div", at, t, m, Term.num(p, t2), Term.num(q, t3))).to(
            Term.num(p / q, t), ne(q).to(zero), nonzero
        ),
        rewrite(Term.n2("div", at, t, m, Term.num(p, t2), Term.num(q, t3))).to(
            Term.num(p / q, t), q > zero
        ),
        # −p: −0 for p = 0
        rewrite(Term.n1("neg", at, t, m, Term.num(p, t2))).to(Term.num(-p, t), nonzero),
    )
    name = "scales multiplied"
    add(
        name,
        "(x · p) · q = x · (p q) for rational p, q, one of them ±2ᵏ: multiplying by ±2ᵏ is "
        "exact (but for overflow and subnormals), so both sides round x p q once",
        *(
            rewrite(lhs).to(_n2(name, "mul", *rhs), same, ne(p * q).to(BigRat(0, 1)), *cond)
            for cond in (power_of_two(p), power_of_two(q))
            for lhs, rhs in (
                (
                    Term.n2(
                        "mul",
                        at,
                        t,
                        m,
                        Term.n2("mul", at2, t2, m2, x, Term.num(p, t3)),
                        Term.num(q, t3),
                    ),
                    (x, Term.num(p * q, SCALAR)),
                ),
                (
                    Term.n2(
                        "mul",
                        at,
                        t,
                        m,
                        Term.num(q, t3),
                        Term.n2("mul", at2, t2, m2, Term.num(p, t3), x),
                    ),
                    (Term.num(p * q, SCALAR), x),
                ),
            )
        ),  # fmt: skip
    )
    name = "a · x + a · y = a · (x + y)"
    add(
        name,
        "distributivity of a rational scale over a sum, factoring and distributing (the "
        "cost model chooses; it rounds differently: docs/optimizer.md bounds it)",
        rewrite(
            Term.n2(
                "add",
                at,
                t,
                m,
                Term.n2("mul", at2, t2, m2, x, Term.num(p, t3)),
                Term.n2("mul", k, n, m3, y, Term.num(p, t3)),
            )
        ).to(
            _n2(name, "mul", _n2(name, "add", x, y), Term.num(p, SCALAR)),
            eq(type_of(x)).to(t),
            eq(type_of(y)).to(t),
        ),
        rewrite(Term.n2("mul", at, t, m, Term.n2("add", at2, t2, m2, x, y), Term.num(p, t3))).to(
            _n2(
                name,
                "add",
                _n2(name, "mul", x, Term.num(p, SCALAR)),
                _n2(name, "mul", y, Term.num(p, SCALAR)),
            ),
            eq(type_of(x)).to(t),
            eq(type_of(y)).to(t),
        ),
    )
    add(SCALE, *_scale_rewrites())
    add(
        "cast of cast = cast",
        "a relabelling of a relabelling is one relabelling: the data is the same",
        rewrite(Term.n1("cast", at, t, m, Term.n1("cast", at2, t2, m2, x))).to(
            Term.n1("cast", "", t, Made.by(m, "cast of cast = cast"), x)
        ),
    )
    add(
        "layout between equal types = identity",
        "a cast, or a sum_to, to the type its operand already has changes nothing",
        rewrite(Term.n1("cast", at, t, m, x)).to(x, same),
        rewrite(Term.n2("sum_to", at, t, m, x, y)).to(x, same),
    )
    add(
        "x + zeros = x",
        "adding a tree, or a tensor, of zeros is the identity, when x is never −0 (SIGNS)",
        *(
            rewrite(Term.n2(o, at, t, m, *pair)).to(x, same, signed)
            for o in ("accum", "add")
            for zeros in [Term.n1("zeros_like", at2, t2, m2, y)]
            for pair in ((x, zeros), (zeros, x))
        ),
    )
    add(records.NAME, records.WHY, *records.REWRITES)
    add(squeeze.NAME, squeeze.WHY, *squeeze.REWRITES)
    return out


SCALE = "a scale on the smaller operand"


def _scale_rewrites() -> tuple:
    """(a ⋆ b) · s = (a · s) ⋆ b = a ⋆ (b · s), and / s alike, for a contraction ⋆ (`ein`,
    `dot`) and a scalar s: every form in the e-graph, the cost model chooses (operation
    counts price them the same; the roofline prices the scaled tensor's size)."""
    why = (
        "a contraction is linear in each operand: a scalar factor moves onto either one "
        "(it rounds differently: docs/optimizer.md bounds it)"
    )
    by = Made.by(m, SCALE)
    scalar = eq(type_of(z)).to(SCALAR)
    out = []
    for c in ("ein", "dot"):
        for op_, left in (("mul", False), ("mul", True), ("div", False)):

            def scaled(a, ty, op_=op_, left=left):
                return Term.n2(op_, "", ty, by, z, a) if left else Term.n2(op_, "", ty, by, a, z)

            product = Term.n2(c, at2, t, m2, x, y)
            whole = (
                Term.n2(op_, at, t, m, z, product) if left else Term.n2(op_, at, t, m, product, z)
            )
            out += [  # the scale onto the left operand, onto the right one
                rewrite(whole).to(
                    Term.n2(c, at2, t, by, scaled(x, t2), y), scalar, eq(type_of(x)).to(t2)
                ),
                rewrite(whole).to(
                    Term.n2(c, at2, t, by, x, scaled(y, t2)), scalar, eq(type_of(y)).to(t2)
                ),
            ]
            # and back: a scaled operand's scale onto the contraction's result
            on_x = Term.n2(c, at2, t, m2, Term.n2(op_, at, t2, m, z, x) if left
                           else Term.n2(op_, at, t2, m, x, z), y)  # fmt: skip
            on_y = Term.n2(c, at2, t, m2, x, Term.n2(op_, at, t2, m, z, y) if left
                           else Term.n2(op_, at, t2, m, y, z))  # fmt: skip
            back = (
                Term.n2(op_, "", t, by, z, Term.n2(c, at2, t, by, x, y))
                if left
                else Term.n2(op_, "", t, by, Term.n2(c, at2, t, by, x, y), z)
            )
            out += [rewrite(on_x).to(back, scalar), rewrite(on_y).to(back, scalar)]
    return (why, *out)


RULES: list[Rule] = _rules()


def _signs() -> list:
    """`no_minus_zero(x)`: x is never −0, in IEEE arithmetic rounded to nearest. A rational
    literal (a `-0` literal is no rational: presk_opt.terms), zeros, an exponential, a
    softmax, a sigmoid, an absolute value or a relu (relu(−0) = +0) never are; a sum
    a + b is −0 only when both are, a − b only when a is; `put` of such a value in zeros,
    and its sum or mean over axes, neither."""
    nz = no_minus_zero
    out = [rule(eq(x).to(Term.num(p, t))).then(nz(x))]
    for o in ("zeros_like", "exp", "abs", "relu", "softmax", "sigmoid"):
        out.append(rule(eq(x).to(Term.n1(o, at, t, m, y))).then(nz(x)))
    out.append(rule(eq(x).to(Term.n2("softmax", at, t, m, y, z))).then(nz(x)))
    for o in ("add", "accum"):
        out.append(rule(eq(x).to(Term.n2(o, at, t, m, y, z)), nz(y)).then(nz(x)))
        out.append(rule(eq(x).to(Term.n2(o, at, t, m, y, z)), nz(z)).then(nz(x)))
    for o in ("sub", "sum_to"):
        out.append(rule(eq(x).to(Term.n2(o, at, t, m, y, z)), nz(y)).then(nz(x)))
    out.append(rule(eq(x).to(Term.n2("put", at, t, m, y, z)), nz(z)).then(nz(x)))
    for o in ("sum", "mean"):
        out.append(rule(eq(x).to(Term.n1(o, at, t, m, y)), nz(y)).then(nz(x)))
    return out


TYPING = ruleset(
    rule(eq(x).to(Term.param(n, t))).then(set_(type_of(x)).to(t)),
    rule(eq(x).to(Term.lit(n, t))).then(set_(type_of(x)).to(t)),
    rule(eq(x).to(Term.num(p, t))).then(set_(type_of(x)).to(t)),
    rule(eq(x).to(Term.n0(op, at, t, m))).then(set_(type_of(x)).to(t)),
    rule(eq(x).to(Term.n1(op, at, t, m, y))).then(set_(type_of(x)).to(t)),
    rule(eq(x).to(Term.n2(op, at, t, m, y, z))).then(set_(type_of(x)).to(t)),
    rule(eq(x).to(Term.n3(op, at, t, m, y, z, w))).then(set_(type_of(x)).to(t)),
    rule(eq(x).to(Term.nv(op, at, t, m, vs))).then(set_(type_of(x)).to(t)),
    *_signs(),
    name="typing",
)


def rewrites(rules: list[Rule], name: str = "rules"):
    """The ruleset of `rules`' rewrites (`REWRITES`: all of them)."""
    return ruleset(
        *(rw for ru in rules for rw in ru.rewrites),
        # what a rule makes from what a rule made is made by the last rule, at the first site
        rewrite(Made.by(Made.by(m, r1), r2)).to(Made.by(m, r2)),
        name=name,
    )


REWRITES = rewrites(RULES)
