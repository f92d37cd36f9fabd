"""The decision procedure for dimensions: unit cases from the tutorial, then brute force."""

from __future__ import annotations

import itertools
import operator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from presk_types.presburger import (
    FALSE,
    TRUE,
    And,
    Assignment,
    Cmp,
    Dim,
    DimContext,
    Divides,
    Eq,
    Formula,
    Ge,
    Gt,
    Le,
    Lin,
    Lt,
    ModZero,
    Ne,
    Not,
    Or,
    Undecidable,
    check_assignment,
    dims_of,
    evaluate,
    holds_for_all,
    is_satisfiable,
    witness,
)

A, B, C, D, H, T = map(Lin.var, ["A", "B", "C", "D", "H", "T"])
In, Out = Lin.var("In"), Lin.var("Out")
IN_OUT = DimContext.of("In", "Out")
DH = DimContext.of("D", "H")


# --- the tutorial's cases --------------------------------------------------------------------


def test_in_vs_out_differ_for_in_1_out_0() -> None:
    cex = holds_for_all(IN_OUT, Eq(In, Out))
    assert cex == {"In": 1, "Out": 0}
    assert list(cex) == ["In", "Out"]
    assert str(cex) == "In = 1, Out = 0"


def test_a_bounded_dimension_proves_what_an_unbounded_one_cannot() -> None:
    bounded = DimContext.of("B").with_dim("T", 1024)
    assert holds_for_all(bounded, Lt(T, 2000)) is None
    assert holds_for_all(bounded, Le(T, 1024)) is None
    assert str(holds_for_all(bounded, Lt(T, 1024))) == "T = 1024"
    assert str(holds_for_all(DimContext.of("B", "T"), Lt(T, 2000))) == "T = 2000"


def test_linear_identities() -> None:
    assert holds_for_all(DH, Eq(4 * D, D + D + D + D)) is None
    assert holds_for_all(DH, Gt(D + 1, D)) is None
    assert holds_for_all(DH, Ge(2 * D, D)) is None
    assert holds_for_all(DH, Ne(D + D, 2 * D + 1)) is None
    assert holds_for_all(DH, Le(D, D + H)) is None
    assert str(holds_for_all(DH, Eq(4 * D, D + 3))) == "D = 0"
    assert str(holds_for_all(DH, Eq(D, D + 1))) == "D = 0"


def test_parity_is_refuted_with_d_1() -> None:
    assert str(holds_for_all(DH, Divides(2, D))) == "D = 1"
    assert str(holds_for_all(DH, ModZero(D, Lin.const(2)))) == "D = 1"
    assert str(holds_for_all(DH, ModZero(D, Lin.const(-2)))) == "D = 1"


def test_divisibility_with_constant_moduli() -> None:
    even = DH.assume(Divides(4, D))
    assert holds_for_all(even, Divides(2, D)) is None
    assert holds_for_all(even, Divides(8, D)) == {"D": 4}
    assert holds_for_all(DH.assume(Divides(2, D), Divides(3, D)), Divides(6, D)) is None
    assert holds_for_all(DH, Divides(3, 2 * D + 1)) == {"D": 0}
    assert holds_for_all(DH, Divides(3, 3 * D + 6)) is None
    assert holds_for_all(DH, Divides(1, D)) is None
    assert holds_for_all(DH, Divides(0, D)) == {"D": 0}  # a modulus of zero is undefined
    assert holds_for_all(DH.assume(Eq(D, 2 * H)), Divides(2, D)) is None


def test_constant_left_side_enumerates_divisors() -> None:
    eight = ModZero(Lin.const(8), H)
    assert holds_for_all(DH, eight) == {"H": 0}
    assert holds_for_all(DH.assume(Ge(H, 1)), eight) == {"H": 3}
    assert holds_for_all(DH.assume(Or(*(Eq(H, d) for d in (1, 2, 4, 8)))), eight) is None
    assert holds_for_all(DH.assume(Gt(H, 0)), ModZero(Lin.const(0), H)) is None
    assert witness(DH.assume(Ge(H, 5)), eight) == {"H": 8}
    assert not is_satisfiable(DH.assume(Ge(H, 9)), eight)


def test_closed_formulas_the_constants_of_a_file() -> None:
    assert holds_for_all(DH, ModZero(Lin.const(8), Lin.const(2))) is None
    cex = holds_for_all(DH, ModZero(Lin.const(8), Lin.const(3)))
    assert cex == {} and str(cex) == ""
    assert holds_for_all(DH, FALSE) == {}
    assert holds_for_all(DH, TRUE) is None


def test_a_symbolic_modulus_is_undecidable() -> None:
    with pytest.raises(Undecidable, match="`D % H == 0` is outside Presburger arithmetic"):
        holds_for_all(DH, ModZero(D, H))
    with pytest.raises(Undecidable):
        is_satisfiable(DH, And(Ge(D, 1), ModZero(D + 1, H)))
    assert evaluate(ModZero(D, H), {"D": 8, "H": 2})
    assert not evaluate(ModZero(D, H), {"D": 8, "H": 0})


def test_a_contradictory_context_proves_everything() -> None:
    for ctx in (
        DH.assume(Divides(2, D), Divides(2, D + 1)),
        DimContext((Dim("T", -1),)),
        DH.assume(Lt(D + H, 0)),
    ):
        assert not is_satisfiable(ctx, TRUE)
        assert holds_for_all(ctx, FALSE) is None
        assert witness(ctx, TRUE) is None
    assert is_satisfiable(DH, TRUE)


def test_the_counterexample_rule() -> None:
    # smallest sum first: least Out first, then least In, would give In = 5, Out = 0
    assert str(holds_for_all(IN_OUT, And(Lt(In, 5), Lt(Out, 1)))) == "In = 0, Out = 1"
    # among equal sums, the last-declared dimension is smallest, then the one before
    abc = DimContext.of("A", "B", "C")
    assert str(holds_for_all(abc, Ne(A + B + C, 1))) == "A = 1, B = 0, C = 0"
    assert str(holds_for_all(abc, Ne(A + B + C, 2))) == "A = 2, B = 0, C = 0"
    assert str(holds_for_all(abc, Or(Lt(C, 1), Ne(A + B + C, 2)))) == "A = 1, B = 0, C = 1"
    # dimensions the formula does not mention are left out, but respected
    halves = DH.with_dim("K", 3).assume(Eq(D, 2 * Lin.var("K")))
    assert holds_for_all(halves, Le(D, 4)) == {"D": 6}
    assert holds_for_all(DimContext.of("In", "X", "Out"), Eq(Out, In)) == {"In": 1, "Out": 0}


def test_witnesses() -> None:
    assert str(witness(IN_OUT, Eq(In, Out + 3))) == "In = 3, Out = 0"
    assert witness(IN_OUT, Not(Ge(In + Out, 0))) is None
    bounded = DimContext((Dim("T", 1024),))
    assert not is_satisfiable(bounded, Gt(T, 1024))
    assert witness(bounded, Gt(T, 1000)) == {"T": 1001}


def test_any_identifier_and_large_constants() -> None:
    ctx = DimContext.of("γ", "seq_len", "d0")
    g, s = Lin.var("γ"), Lin.var("seq_len")
    assert str(holds_for_all(ctx, Eq(g, s))) == "γ = 1, seq_len = 0"
    big = 2**70
    assert holds_for_all(ctx.assume(Le(g, big)), Lt(g, big + 1)) is None
    assert holds_for_all(ctx, Lt(g, big)) == {"γ": big}


def test_check_assignment() -> None:
    ctx = DimContext.of("B").with_dim("T", 1024).assume(Divides(2, B))
    assert str(check_assignment(ctx, {"B": 2, "T": 2000})) == "`T <= 1024` is false for T = 2000"
    assert str(check_assignment(ctx, {"B": -2, "T": 3})) == "`B >= 0` is false for B = -2"
    assert str(check_assignment(ctx, {"B": 3, "T": 3})) == "`B % 2 == 0` is false for B = 3"
    assert check_assignment(ctx, {"B": 2, "T": 1024, "other": 5}) is None
    with pytest.raises(ValueError, match="no value for dimension T"):
        check_assignment(ctx, {"B": 1})


def test_unknown_and_repeated_dimensions_are_errors() -> None:
    with pytest.raises(ValueError, match="`X`, which is not a dimension in scope"):
        holds_for_all(DH, Eq(Lin.var("X"), 1))
    with pytest.raises(ValueError, match="twice"):
        DimContext.of("D", "D")
    with pytest.raises(ValueError, match="not a dimension in scope"):
        DH.assume(Eq(T, 1))


def test_lin_normalizes_and_prints_as_written() -> None:
    assert 4 * D == D + D + D + D == Lin((("D", 1), ("D", 3)))
    assert D - D == Lin.const(0) and (D - D).is_const
    assert Lin((("H", 1), ("D", 0), ("D", 2)), 1) == 2 * D + H + 1
    assert D * Lin.const(3) == Lin.const(3) * D == 3 * D
    with pytest.raises(ValueError, match="not linear"):
        _ = D * H
    cases = {
        4 * D: "4*D",
        D + 1: "D + 1",
        In: "In",
        D - H: "D - H",
        3 - D: "-D + 3",
        -2 * D - 1: "-2*D - 1",
        Lin.const(0): "0",
        Lin.const(-7): "-7",
        0 * D: "0",
    }
    for e, text in cases.items():
        assert str(e) == text


def test_formulas_print_as_written() -> None:
    cases: dict[Formula, str] = {
        Eq(In, Out): "In == Out",
        Le(T, 1024): "T <= 1024",
        Ne(2 * D, D + 1): "2*D != D + 1",
        Divides(2, D + 1): "(D + 1) % 2 == 0",
        ModZero(D, H): "D % H == 0",
        ModZero(Lin.const(8), -H): "8 % (-H) == 0",
        And(Eq(D, 1), Or(Lt(D, 2), Gt(H, 0))): "D == 1 and (D < 2 or H > 0)",
        Not(Eq(D, H)): "not (D == H)",
        Not(Not(Eq(D, H))): "not not (D == H)",
        TRUE: "true",
        FALSE: "false",
    }
    for f, text in cases.items():
        assert str(f) == text
    assert Eq(D, 1) == Cmp("==", D, Lin.const(1))
    assert dims_of(And(Eq(D, 1), Divides(2, T))) == {"D", "T"}


# --- brute force over small boxes ------------------------------------------------------------

NAMES = ("A", "B", "C")
OPS = {"==": operator.eq, "!=": operator.ne, "<=": operator.le, "<": operator.lt}
OPS |= {">=": operator.ge, ">": operator.gt}


def _truth(f: Formula, env: dict[str, int]) -> bool:
    """An evaluator written apart from the module's, as the oracle."""

    def val(e: Lin) -> int:
        return e.constant + sum(c * env[n] for n, c in e.coeffs)

    if isinstance(f, Cmp):
        return OPS[f.op](val(f.a), val(f.b))
    if isinstance(f, Divides):
        return f.k != 0 and val(f.a) % f.k == 0
    if isinstance(f, ModZero):
        return val(f.m) != 0 and val(f.a) % val(f.m) == 0
    if isinstance(f, Not):
        return not _truth(f.f, env)
    if isinstance(f, And):
        return all(_truth(g, env) for g in f.parts)
    return any(_truth(g, env) for g in f.parts)


def _names(f: Formula) -> set[str]:
    if isinstance(f, Cmp | ModZero):
        return {n for e in (f.a, f.b if isinstance(f, Cmp) else f.m) for n, _ in e.coeffs}
    if isinstance(f, Divides):
        return {n for n, _ in f.a.coeffs}
    if isinstance(f, Not):
        return _names(f.f)
    return set().union(*map(_names, f.parts))


def _formulas(names: tuple[str, ...]) -> st.SearchStrategy[Formula]:
    coeffs = st.lists(st.integers(-3, 3), min_size=len(names), max_size=len(names))
    lins = st.builds(
        lambda cs, k: Lin(tuple(zip(names, cs, strict=True)), k), coeffs, st.integers(-6, 6)
    )
    consts = st.integers(-12, 12).map(Lin.const)
    atoms = st.one_of(
        st.builds(Cmp, st.sampled_from(list(OPS)), lins, lins),
        st.builds(Divides, st.integers(-4, 5), lins),
        st.builds(ModZero, lins, consts),
        st.builds(ModZero, consts, lins),
    )
    return st.recursive(
        atoms,
        lambda sub: st.one_of(
            st.builds(Not, sub),
            st.lists(sub, max_size=3).map(lambda ps: And(*ps)),
            st.lists(sub, max_size=3).map(lambda ps: Or(*ps)),
        ),
        max_leaves=4,
    )


FORMULAS = {n: _formulas(NAMES[:n]) for n in (1, 2, 3)}


@st.composite
def problems(draw: st.DrawFn) -> tuple[DimContext, Formula, list[dict[str, int]]]:
    """A context of 1-3 dimensions, each bounded by 6 or less, a formula and the domain."""
    n = draw(st.integers(1, 3))
    names, formulas = NAMES[:n], FORMULAS[n]
    uppers = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    facts = tuple(draw(st.lists(formulas, max_size=2)))
    ctx = DimContext(tuple(Dim(n, u) for n, u in zip(names, uppers, strict=True)), facts)
    box = itertools.product(*(range(u + 1) for u in uppers))
    envs = [dict(zip(names, p, strict=True)) for p in box]
    domain = [env for env in envs if all(_truth(fact, env) for fact in facts)]
    return ctx, draw(formulas), domain


def _expected(ctx: DimContext, f: Formula, points: list[dict[str, int]]) -> dict[str, int]:
    """The counterexample rule by enumeration: least sum, then the last dimension least, ..."""
    mentioned = [n for n in ctx.names if n in _names(f)]
    values = {tuple(env[n] for n in mentioned) for env in points}
    best = min(values, key=lambda v: (sum(v), v[::-1]))
    return dict(zip(mentioned, best, strict=True))


SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(problems())
def test_holds_for_all_agrees_with_brute_force(problem) -> None:
    ctx, f, domain = problem
    violations = [env for env in domain if not _truth(f, env)]
    assert all(evaluate(f, env) == _truth(f, env) for env in domain)
    cex = holds_for_all(ctx, f)
    if not violations:
        assert cex is None
        return
    assert cex is not None
    assert list(cex) == [n for n in ctx.names if n in _names(f)]
    completions = [env for env in violations if all(env[n] == v for n, v in cex.items())]
    assert completions, f"{cex} is not a counterexample of {f} in {ctx}"
    assert dict(cex) == _expected(ctx, f, violations)


@SETTINGS
@given(problems())
def test_witness_agrees_with_brute_force(problem) -> None:
    ctx, f, domain = problem
    models = [env for env in domain if _truth(f, env)]
    assert is_satisfiable(ctx, f) == bool(models)
    found = witness(ctx, f)
    assert (found is None) == (not models)
    if found is not None:
        assert isinstance(found, Assignment)
        assert dict(found) == _expected(ctx, f, models)


@given(
    st.lists(st.tuples(st.sampled_from(NAMES), st.integers(-5, 5)), max_size=5),
    st.lists(st.tuples(st.sampled_from(NAMES), st.integers(-5, 5)), max_size=5),
    st.integers(-9, 9),
    st.tuples(*(st.integers(-9, 9) for _ in NAMES)),
)
def test_lin_arithmetic_is_arithmetic(xs, ys, k, point) -> None:
    env = dict(zip(NAMES, point, strict=True))
    a, b = Lin(tuple(xs), k), Lin(tuple(ys))
    assert (a + b).value(env) == a.value(env) + b.value(env)
    assert (a - b).value(env) == a.value(env) - b.value(env)
    assert (k * a).value(env) == k * a.value(env)
    assert (a - b) + b == a and -a + a == Lin.const(0)
