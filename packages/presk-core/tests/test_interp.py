"""The interpreter: functions prepared once, the observer hook (every instruction's value at
its site; Σ|terms| at sums and contractions), and the contraction's fold in C, bit for bit
numpy's."""

from __future__ import annotations

from pathlib import Path

import gmpy2
import numpy as np
import pytest
from presk_core import fold_c
from presk_core import mpfr as M
from presk_core.interp import ABS_SUMS, Interpreter
from presk_core.lower import lower_program
from presk_types.elab import load_program
from presk_types.ops import OPS, Kind, kind

ROOT = Path(__file__).resolve().parents[3]


def linear():
    return lower_program(load_program(str(ROOT / "tutorial" / "01_linear.psk"), {}))


def inputs():
    with M.precision(64):
        theta = {"w": M.real([[0.5], [0.25], [-1]]), "b": M.real([0.125])}
        x = M.real([[1, -2, 3], [4, 0, -8]])
    return theta, x


class Recorder:
    def __init__(self, wants_abs_sums: bool) -> None:
        self.wants_abs_sums = wants_abs_sums
        self.seen: list[tuple[str, object, object]] = []

    def __call__(self, site: str, value: object, abs_sum: object = None) -> None:
        self.seen.append((site, value, abs_sum))


def test_the_observer_sees_every_instruction_at_its_site_and_abs_sums_at_a_dot():
    core = linear()
    theta, x = inputs()
    seen = Recorder(True)
    got = Interpreter(core, 64, seen).run("Linear.apply", [theta, x], {"In": 3, "Out": 1})
    fn = core.function("Linear.apply")
    assert [s for s, _, _ in seen.seen] == [ins.site for ins in fn.body]
    assert [s for s, _, a in seen.seen if a is not None] == [
        ins.site for ins in fn.body if ins.op in ABS_SUMS
    ]
    (dot,) = [(v, a) for s, v, a in seen.seen if a is not None]
    # x·w by hand: 0.5 − 0.5 − 3 = −3 and 2 + 0 + 8 = 10; Σ|terms|: 0.5 + 0.5 + 3, 2 + 0 + 8
    assert [float(v) for v in dot[0].reshape(-1)] == [-3.0, 10.0]
    assert [float(v) for v in dot[1].reshape(-1)] == [4.0, 10.0]
    assert [float(v) for v in got.reshape(-1)] == [-2.875, 10.125]
    assert seen.seen[-1][1] is got  # the value of the last instruction is the result


def test_an_observer_without_abs_sums_is_called_with_two_arguments_and_changes_nothing():
    core = linear()
    theta, x = inputs()
    calls = []
    plain = Interpreter(core, 64).run("Linear.apply", [theta, x], {"In": 3, "Out": 1})
    watched = Interpreter(core, 64, lambda *a: calls.append(a)).run(
        "Linear.apply", [theta, x], {"In": 3, "Out": 1}
    )
    assert all(len(a) == 2 for a in calls) and len(calls) == 4
    assert [v.digits(2) for v in plain.reshape(-1)] == [v.digits(2) for v in watched.reshape(-1)]


def test_the_operations_with_abs_sums_are_the_sums_and_contractions():
    contractions = {op for op in OPS if kind(op) is Kind.CONTRACTION}
    assert {"sum", "mean", "sum_to"} | contractions == ABS_SUMS


def test_a_function_is_prepared_once_for_each_binding_of_its_dimensions():
    core = linear()
    theta, x = inputs()
    interp = Interpreter(core, 64)
    for _ in range(3):
        interp.run("Linear.apply", [theta, x], {"In": 3, "Out": 1})
    assert len(interp._prepared) == 1
    with M.precision(64):
        x1 = M.real([[1, 2, 3]])
    interp.run("Linear.apply", [theta, x1], {"In": 3, "Out": 1})  # another batch, same dims
    assert len(interp._prepared) == 1
    interp.run("Linear.apply", [theta, x], {"Out": 1, "In": 3})
    interp.run("Linear.apply", [theta, x], {"In": 3, "Out": 1})
    assert len(interp._prepared) == 2  # the binding as given (another order is another key)


def _bits(x: np.ndarray) -> list:
    return [
        ("nan",) if gmpy2.is_nan(v) else (v.digits(2), v.precision, gmpy2.is_signed(v))
        for v in np.asarray(x, dtype=object).reshape(-1)
    ]


@pytest.mark.parametrize("bits", [24, 53, 256])
def test_the_fold_in_c_is_numpys_matmul_bit_for_bit(bits):
    if not fold_c.available():
        pytest.skip("no C compiler here: the interpreter keeps numpy's loop")
    rng = np.random.default_rng(bits)
    with M.precision(bits + 7):  # operands with more bits than the context
        a = M.div(M.real(rng.standard_normal((2, 9, 7))), M.real(3))
        b = M.div(M.real(rng.standard_normal((2, 7, 5))), M.real(7))
    a[0, 0, 0], b[0, 0, 0] = gmpy2.mpfr("-0"), gmpy2.mpfr(0)  # −0·+0 first: −0 survives?
    a[0, 1, :] = gmpy2.mpfr("-0")
    a[1, 2, 3], b[1, 0, 1] = gmpy2.mpfr("inf"), gmpy2.mpfr("nan")
    a[1, 4, 0], a[1, 4, 1] = gmpy2.mpfr("1e300"), gmpy2.mpfr("-1e300")  # cancellation
    a[0, 5, 0], b[0, 0, 2] = gmpy2.mpfr("1e200000000"), gmpy2.mpfr("1e200000000")  # overflow
    a[0, 6, 0], b[0, 0, 3] = gmpy2.mpfr("1e-200000000"), gmpy2.mpfr("-1e-200000000")  # underflow
    with M.precision(bits):
        want, got = np.matmul(a, b), fold_c.fold(a, b)
    assert got is not None and got.shape == want.shape
    assert _bits(got) == _bits(want)
    assert gmpy2.is_infinite(got[0, 5, 2]) and gmpy2.is_finite(got[0, 6, 3])
    assert len({id(v) for v in got.reshape(-1)}) == got.size  # each output its own object


def test_the_fold_in_c_declines_what_is_not_an_mpfr():
    with M.precision(53):
        a = M.real(np.ones((1, 600)))
        a[0, 599] = 2  # an int among the reals: numpy's loop takes it
        b = M.real(np.full((600, 1), 1.5))
        assert fold_c.fold(M.real(np.ones((1, 3))), M.real(np.ones((3, 1)))) is None  # small
        assert fold_c.fold(a, b) is None
        assert [float(v) for v in M.contract(a, b, [1], [0]).reshape(-1)] == [901.5]
