"""presk_kernel.error_rules (the bound's rules), one operation at a time, against exact
arithmetic: for an exact operand anywhere in its interval and a computed one anywhere within
its error (absolute or relative), the operation computed in f32 or f64 (numpy: IEEE) is
within the rule's bound of the exact result. The rule table covers every scalar operation
(docs/precision.md)."""

from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from presk_kernel.error_rules import SCALAR_RULES, A, Ctx
from presk_kernel.ir import SCALAR_TABLE, Kernel

NP = {"f64": np.float64, "f32": np.float32}


def test_the_rules_cover_every_scalar_operation():
    assert set(SCALAR_RULES) == set(SCALAR_TABLE)


def ctx(compute: str) -> Ctx:
    return Ctx(Kernel("k", "k/%1", (), (), (), compute), {}, {}, {}, {}, {}, None, {})


@st.composite
def operand(draw, compute: str, positive: bool = False, relative: bool = False):
    """(A, the computed value, the exact value as a Fraction)."""
    dt = NP[compute]
    lo_hi = (1e-3, 50.0) if positive else (-50.0, 50.0)
    computed = float(dt(draw(st.floats(*lo_hi))))
    mag = abs(computed)
    if relative:
        rho = draw(st.sampled_from([0.0, 2.0**-30, 2.0**-20, 2.0**-10]))
        theta = Fraction(draw(st.floats(-1, 1))) * Fraction(rho)
        exact = Fraction(computed) / (1 + theta)  # computed = exact·(1 + θ), |θ| ≤ ρ
        err = math.nextafter(rho * (mag * 1.01), math.inf) if rho and mag else 0.0  # up: a
        # subnormal's ρ·|x| underflows to 0 while its exact value is not the computed one
        tri = (rho, 0.0, 0.0)
    else:
        err = draw(st.sampled_from([0.0, 1e-9, 1e-6, 1e-3])) * max(mag, 1e-3)
        exact = Fraction(computed) - Fraction(draw(st.floats(-1, 1))) * Fraction(err)
        tri = None
    wl, wh = draw(st.floats(0, 5)), draw(st.floats(0, 5))
    lo, hi = float(exact) - wl - abs(float(exact)) * 1e-15, float(exact) + wh
    if positive:
        lo = max(lo, float(exact) / 2)
    return A(lo, hi, err, tri=tri), computed, exact


def within(a: A, got: float, exact: Fraction) -> None:
    gap = abs(Fraction(got) - exact)
    assert gap <= Fraction(a.err), (float(gap), a.err)
    if a.tri is not None:
        r, s, b = a.tri
        y = abs(float(exact))
        assert float(gap) <= (r * y + s * math.sqrt(y) + b) * (1 + 1e-12), (float(gap), a.tri)


BINARY = {
    "add": (lambda x, y: x + y, lambda x, y: x + y),
    "sub": (lambda x, y: x - y, lambda x, y: x - y),
    "mul": (lambda x, y: x * y, lambda x, y: x * y),
    "div": (lambda x, y: x / y, lambda x, y: x / y),
    "max": (np.maximum, max),
    "min": (np.minimum, min),
}


@pytest.mark.parametrize("compute", ["f64", "f32"])
@pytest.mark.parametrize("op", list(BINARY))
@given(data=st.data())
def test_a_binary_rule_bounds_the_computed_result(compute, op, data):
    relative = data.draw(st.booleans())
    a, ca, xa = data.draw(operand(compute, relative=relative))
    b, cb, xb = data.draw(operand(compute, positive=op == "div", relative=relative))
    if op == "div":
        assume(b.lo - b.err > 0)
    f, exact = BINARY[op]
    with np.errstate(all="ignore"):
        got = float(f(NP[compute](ca), NP[compute](cb)))
    within(SCALAR_RULES[op](ctx(compute), a, b, None), got, exact(xa, xb))


@pytest.mark.parametrize("compute", ["f64", "f32"])
@given(data=st.data())
def test_the_square_root_and_the_square(compute, data):
    a, ca, xa = data.draw(operand(compute, positive=True, relative=data.draw(st.booleans())))
    c = ctx(compute)
    root = SCALAR_RULES["sqrt"](c, a, None)
    got = float(np.sqrt(NP[compute](ca)))
    with gmpy2.context(precision=300):
        exact = Fraction(*gmpy2.sqrt(gmpy2.mpq(xa.numerator, xa.denominator)).as_integer_ratio())
    within(replace_err(root, 2.0**-290), got, exact)
    square = SCALAR_RULES["pow"](c, a, 2)
    within(square, float(NP[compute](ca) * NP[compute](ca)), xa * xa)


def replace_err(a: A, slack: float) -> A:
    """`a` with room for the exact value's own 300-bit rounding."""
    from dataclasses import replace

    return replace(a, err=a.err + slack)


def test_a_divisor_that_may_be_zero_is_refused():
    from presk_kernel.error_rules import BoundError

    with pytest.raises(BoundError, match="holds 0"):
        SCALAR_RULES["div"](ctx("f64"), A(1, 2), A(0.5, 1.0, 0.6), None)


def test_a_square_is_never_negative_computed():
    a = SCALAR_RULES["pow"](ctx("f32"), A(-1e-3, 1e-3, 1.0), 2)
    assert a.computed[0] == 0.0
    root = SCALAR_RULES["sqrt"](ctx("f32"), a, None)  # defined: the square is ≥ 0
    assert root.err < 1.01  # √(the square's error)
