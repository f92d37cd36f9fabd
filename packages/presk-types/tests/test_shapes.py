"""The shape algebra: broadcasting, contraction, `ein`, and equality of lengths.

Shapes are written as the checker prints them (`[..., batch: B, model: 4]`) and parsed by
`sh`; every length is a constant or one dimension of `CTX`. The cases follow the tutorial
(steps 1 to 3) and docs/language.md, "Shapes"; the property tests check that broadcasting
does not depend on the order of its operands.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from presk_syntax.span import Span
from presk_types.presburger import Dim, DimContext, Lin
from presk_types.shapes import Lengths, TypeErr, broadcast, contract, ein
from presk_types.types import AxisT, Shape

CTX = DimContext.of("B", "T", "D", "In", "Out")
LENGTHS = Lengths(CTX)
SPAN = Span("t.psk", 0, 5)


def length(text: str) -> Lin:
    return Lin.const(int(text)) if text.isdigit() else Lin.var(text)


def sh(text: str) -> Shape:
    """`[..., batch: B, 4]` as a Shape."""
    inner = text.strip()[1:-1].strip()
    parts = [p.strip() for p in inner.split(",")] if inner else []
    axes = []
    for p in parts:
        if p == "...":
            continue
        name, _, n = p.rpartition(":")
        axes.append(AxisT(name.strip() or None, length(n.strip())))
    return Shape("..." in parts, tuple(axes))


def code(e: pytest.ExceptionInfo[TypeErr]) -> str:
    return e.value.diagnostics[0].code


def label(e: pytest.ExceptionInfo[TypeErr]) -> str:
    return e.value.diagnostics[0].labels[0].text


def test_sh_round_trips() -> None:
    for text in ["[]", "[...]", "[..., model: D]", "[batch: B, 4]", "[3, x: 1]"]:
        assert str(sh(text)) == text


# ---- broadcasting ----------------------------------------------------------------------------

BROADCASTS = [
    # by position, from the last axis
    ("[batch: B, model: 4]", "[model: 4]", "[batch: B, model: 4]"),
    ("[batch: B, 4]", "[model: 4]", "[batch: B, model: 4]"),  # a positional axis takes the name
    ("[..., model: D]", "[D]", "[..., model: D]"),  # γ aligns on the last axis (step 2)
    ("[In, Out]", "[Out]", "[In, Out]"),
    # a scalar broadcasts to anything
    ("[]", "[batch: B, model: 4]", "[batch: B, model: 4]"),
    ("[..., model: D]", "[]", "[..., model: D]"),
    # prefixes align with prefixes: ms : ℝ[...] against x : ℝ[..., model: D] (step 2)
    ("[...]", "[..., model: D]", "[..., model: D]"),
    ("[..., model: D]", "[...]", "[..., model: D]"),
    ("[..., model: D]", "[..., model: D]", "[..., model: D]"),
    # by name, when every axis of the smaller operand is named
    ("[batch: B, seq: T, model: 4]", "[batch: B, model: 4]", "[batch: B, seq: T, model: 4]"),
    ("[batch: B, model: 4]", "[batch: B, seq: T, model: 4]", "[batch: B, seq: T, model: 4]"),
    ("[heads: 2, seq: T, hd: 4]", "[heads: 2]", "[heads: 2, seq: T, hd: 4]"),
    # length 1 broadcasts
    ("[batch: B, 1]", "[batch: B, 4]", "[batch: B, 4]"),
    ("[batch: B, 4]", "[batch: B, 1]", "[batch: B, 4]"),
    ("[1]", "[model: 4]", "[model: 4]"),
    ("[B]", "[1]", "[B]"),
    ("[x: 1]", "[x: 5, y: 3]", "[x: 5, y: 3]"),  # by name, the smaller's axis of length 1
]


@pytest.mark.parametrize(("a", "b", "expected"), BROADCASTS)
def test_broadcast(a: str, b: str, expected: str) -> None:
    assert str(broadcast(sh(a), sh(b), LENGTHS, SPAN)) == expected


NO_ALIGNMENT = [
    ("[batch: B, model: 4]", "[time: B, model: 4]"),  # bad_axis.psk: same length, other name
    ("[batch: B, seq: T, model: 4]", "[batch: B, 4]"),  # not all named: no alignment by name
    ("[batch: B, seq: T]", "[model: 4]"),  # by name: `model` is not an axis of the larger
    ("[...]", "[model: 4]"),  # the prefix could be any leading axes of the other
    ("[..., 4]", "[3, 4]"),
    ("[..., x: 2]", "[y: 3, x: 2]"),
]


@pytest.mark.parametrize(("a", "b"), NO_ALIGNMENT)
def test_broadcast_fails_with_none(a: str, b: str) -> None:
    assert broadcast(sh(a), sh(b), LENGTHS, SPAN) is None
    assert broadcast(sh(b), sh(a), LENGTHS, SPAN) is None


def test_broadcast_of_different_lengths_is_e2006_with_a_counterexample() -> None:
    with pytest.raises(TypeErr) as e:
        broadcast(sh("[In]"), sh("[Out]"), LENGTHS, SPAN)
    assert code(e) == "E2006"
    assert e.value.diagnostics[0].message == "dimension mismatch: `In` vs `Out`"
    # not In = 1, Out = 0: a length 1 would read as a broadcast (issue 16)
    assert label(e) == "differ for In = 3, Out = 2"
    assert e.value.diagnostics[0].labels[0].span == SPAN


def test_broadcast_of_different_constants_is_e2006_without_values() -> None:
    with pytest.raises(TypeErr) as e:
        broadcast(sh("[batch: B, 3]"), sh("[batch: B, 4]"), LENGTHS, SPAN)
    assert (code(e), label(e)) == ("E2006", "differ")


def test_broadcast_by_name_lengths_are_checked() -> None:
    with pytest.raises(TypeErr) as e:
        broadcast(sh("[batch: B, seq: T, model: 4]"), sh("[batch: D, model: 4]"), LENGTHS, SPAN)
    assert code(e) == "E2006"


def test_broadcast_by_name_length_one_in_the_larger_operand() -> None:
    # [x: 1] with [x: 5, y: 3] gives [x: 5, y: 3]; the same with the ones swapped must too
    assert str(broadcast(sh("[x: 5]"), sh("[x: 1, y: 3]"), LENGTHS, SPAN)) == "[x: 5, y: 3]"


def outcome(a: Shape, b: Shape, lengths: Lengths = LENGTHS) -> object:
    """What broadcasting gives, up to the order of the axes: a set of axes, None, or a code."""
    try:
        r = broadcast(a, b, lengths, SPAN)
    except TypeErr as e:
        return e.diagnostics[0].code
    return None if r is None else (r.prefix, r.rank, frozenset(r.axes))


ASYMMETRIC = [
    # by name, with operands of equal rank, the first is taken as the smaller one
    pytest.param("[x: 1, y: 3]", "[y: 3, x: 2]", id="length-1-first"),
    pytest.param("[x: 2, y: 3]", "[..., y: 3, x: 2]", id="prefix-on-one-side"),
    # lengths are compared before every name of the smaller is found in the larger
    pytest.param("[2, x: 3]", "[x: 2, y: 3]", id="e2006-before-missing-name"),
]


@pytest.mark.parametrize(("a", "b"), ASYMMETRIC)
def test_broadcast_is_symmetric(a: str, b: str) -> None:
    assert outcome(sh(a), sh(b)) == outcome(sh(b), sh(a))


# ---- contraction -----------------------------------------------------------------------------

CONTRACTIONS = [
    ("[..., In]", "[In, Out]", "[..., Out]"),  # Linear.apply
    ("[batch: B, 3]", "[3, 5]", "[batch: B, 5]"),
    ("[batch: B, model: 4]", "[4, hidden: D]", "[batch: B, hidden: D]"),
    ("[In]", "[In, Out]", "[Out]"),
    ("[In, Out]", "[Out]", "[In]"),
]


@pytest.mark.parametrize(("a", "b", "expected"), CONTRACTIONS)
def test_contract(a: str, b: str, expected: str) -> None:
    assert str(contract(sh(a), sh(b), LENGTHS, SPAN)) == expected


def test_contract_of_different_lengths_is_e2006() -> None:
    with pytest.raises(TypeErr) as e:
        contract(sh("[..., In]"), sh("[Out, In]"), LENGTHS, SPAN)
    assert (code(e), label(e)) == ("E2006", "differ for In = 1, Out = 0")


@pytest.mark.parametrize(("a", "b"), [("[]", "[3, 5]"), ("[3]", "[]"), ("[3]", "[..., 3]")])
def test_contract_needs_an_axis_on_each_side_and_no_prefix_on_the_right(a: str, b: str) -> None:
    with pytest.raises(TypeErr) as e:
        contract(sh(a), sh(b), LENGTHS, SPAN)
    assert code(e) == "E2003"


# ---- ein -------------------------------------------------------------------------------------

Q = "[batch: B, heads: 2, seq: T, hd: 4]"
SCORES = "[batch: B, heads: 2, seq: T, seq2: T]"


def test_ein_scores_relabel_the_keys_axis() -> None:
    """ein[batch, heads, seq, seq2](q * k): k's `seq` becomes `seq2` (step 3)."""
    out = ("batch", "heads", "seq", "seq2")
    assert str(ein(out, sh(Q), sh(Q), LENGTHS, SPAN)) == SCORES


def test_ein_values_relabel_seq_to_the_left_operands_seq2() -> None:
    """ein[batch, heads, seq, hd](a * v): v's `seq` meets a's `seq2` and is summed."""
    out = ("batch", "heads", "seq", "hd")
    assert str(ein(out, sh(SCORES), sh(Q), LENGTHS, SPAN)) == Q


def test_ein_does_not_relabel_when_the_right_operand_has_both() -> None:
    right = sh("[seq: T, seq2: T]")
    assert str(ein(("seq", "seq2"), sh("[seq: T]"), right, LENGTHS, SPAN)) == "[seq: T, seq2: T]"


@pytest.mark.parametrize(
    ("out", "x", "expected"),
    [
        (("b", "a"), "[a: 2, b: 3]", "[b: 3, a: 2]"),  # reorders
        (("a",), "[a: 2, b: 3]", "[a: 2]"),  # sums `b`
        ((), "[a: 2, b: 3]", "[]"),  # sums everything
        (("model",), "[..., model: D]", "[..., model: D]"),  # keeps the prefix
    ],
)
def test_ein_of_one_operand(out: tuple[str, ...], x: str, expected: str) -> None:
    assert str(ein(out, sh(x), None, LENGTHS, SPAN)) == expected


def test_ein_contracts_a_shared_axis() -> None:
    out = ("batch", "hidden")
    got = ein(out, sh("[batch: B, model: D]"), sh("[model: D, hidden: 8]"), LENGTHS, SPAN)
    assert str(got) == "[batch: B, hidden: 8]"


@pytest.mark.parametrize(
    ("out", "a", "b"),
    [
        (("x",), "[x: 2, 3]", "[x: 2]"),  # a positional axis
        (("x",), "[x: 2]", "[3]"),
        (("z",), "[x: 2]", "[y: 3]"),  # an output axis in neither operand
    ],
)
def test_ein_errors_are_e2007(out: tuple[str, ...], a: str, b: str) -> None:
    with pytest.raises(TypeErr) as e:
        ein(out, sh(a), sh(b), LENGTHS, SPAN)
    assert code(e) == "E2007"


def test_ein_shared_axis_of_different_lengths_is_e2006() -> None:
    with pytest.raises(TypeErr) as e:
        ein(("x",), sh("[x: In]"), sh("[x: Out]"), LENGTHS, SPAN)
    assert (code(e), label(e)) == ("E2006", "differ for In = 1, Out = 0")


# ---- lengths ---------------------------------------------------------------------------------


def test_lengths_differ() -> None:
    In, Out, D = Lin.var("In"), Lin.var("Out"), Lin.var("D")
    assert LENGTHS.differ(In, In) is None
    assert LENGTHS.differ(D * 2, D + D) is None
    assert LENGTHS.differ(In, Out) == "In = 1, Out = 0"
    assert LENGTHS.differ(Lin.const(3), Lin.const(4)) == "these constants"
    assert LENGTHS.differ(D, Lin.const(4)) == "D = 0"


def test_lengths_differ_within_bounds() -> None:
    """A bound does not make two dimensions equal; `T <= 0` does make T equal to 0."""
    bounded = Lengths(DimContext((Dim("B"), Dim("T", 1024))))
    assert bounded.differ(Lin.var("B"), Lin.var("T")) == "B = 1, T = 0"
    assert Lengths(DimContext((Dim("T", 0),))).differ(Lin.var("T"), Lin.const(0)) is None


# ---- properties of broadcasting --------------------------------------------------------------

NAMES = [None, "x", "y", "z"]


def _shapes(lengths: list[int], prefix: bool = False) -> st.SearchStrategy[Shape]:
    axis = st.tuples(st.sampled_from(NAMES), st.sampled_from(lengths))
    axes = st.lists(axis, max_size=3).filter(
        lambda xs: len([n for n, _ in xs if n]) == len({n for n, _ in xs if n})
    )
    return st.builds(
        lambda p, xs: Shape(p, tuple(AxisT(n, Lin.const(k)) for n, k in xs)),
        st.booleans() if prefix else st.just(False),
        axes,
    )


def _consistent(a: Shape, b: Shape) -> None:
    """When a and b broadcast, b and a give the same axes, and every axis of the larger
    operand is in the result (its length when that is not 1)."""
    try:
        r = broadcast(a, b, LENGTHS, SPAN)
    except TypeErr:
        return
    if r is None:
        return
    assert outcome(b, a) == (r.prefix, r.rank, frozenset(r.axes))
    larger = a if a.rank >= b.rank else b
    assert r.rank == larger.rank
    names = {x.name for x in r.axes}
    for x in larger.axes:
        assert x.name is None or x.name in names
        assert x.length == Lin.const(1) or x.name is None or x in r.axes
    for x in r.axes:
        assert x.length.is_const and x.length.constant in {1, 2, 3}


@settings(max_examples=400, deadline=None)
@given(_shapes([2, 3]), _shapes([2, 3]))
def test_broadcast_property_without_length_one(a: Shape, b: Shape) -> None:
    _consistent(a, b)


@settings(max_examples=400, deadline=None)
@given(_shapes([1, 2, 3]), _shapes([1, 2, 3]))
@example(sh("[x: 1, y: 3]"), sh("[y: 3, x: 2]"))
def test_broadcast_property(a: Shape, b: Shape) -> None:
    _consistent(a, b)


def test_ein_over_many_axes_is_linear():
    # issue 16: the fuzzer's `ein` of ~200,000 names; a test of each name against those
    # before it (quadratic) takes minutes at 50,000, the linear check a fraction of a second
    import time

    n = 50_000
    names = tuple(f"a{i}" for i in range(n))
    s = Shape(False, tuple(AxisT(x, Lin.var("N")) for x in names))
    lengths = Lengths(DimContext.of("N"))
    start = time.perf_counter()
    out = ein(names[::-1], s, s, lengths, Span("t.psk", 0, 1))
    assert time.perf_counter() - start < 3.0  # about 0.25 s on the development machine
    assert out.names() == list(names[::-1])
    with pytest.raises(TypeErr, match="appears twice"):
        ein((*names, "a7"), s, None, lengths, Span("t.psk", 0, 1))
