"""Each rule by the reference interpreter: the function it rewrites (tests/programs/
rules.psk, and the gradients of tutorial/04_grad.psk for the rules that clean adjoints)
run at 512 bits before and after, on random inputs, agree exactly, or within the bound
docs/optimizer.md derives for a rule that rounds differently (distributivity)."""

import json
from fractions import Fraction
from pathlib import Path

import pytest
from egglog import BigRat, EGraph, eq, union
from presk_ad.passes import UP_TO_AD
from presk_core.run import run_entry
from presk_opt.optimize import optimize
from presk_opt.rules import REWRITES, RULES, SCALAR, TYPING
from presk_opt.terms import Made, Term
from presk_syntax.pipeline import Context, Pipeline

run_pipeline = Pipeline(UP_TO_AD).run  # the passes up to differentiation

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
BITS = 512


@pytest.fixture(scope="module")
def rules_program():
    core = run_pipeline("core-after-ad", str(HERE / "programs" / "rules.psk"), Context())
    return core, optimize(core)[0]


def _run(core, entry: str, dims: dict[str, int], seed: int) -> dict:
    return json.loads(run_entry(core, None, entry, dims, seed, BITS, as_json=True))


def _reals(value) -> list[Fraction]:
    if isinstance(value, list):
        return [q for v in value for q in _reals(v)]
    if isinstance(value, dict):
        return [q for v in value.values() for q in _reals(v)]
    return [Fraction(value)]


def _function(program, name: str):
    return next(f for f in program.functions if f.name == name)


def _rules_in(fn) -> set[str]:
    return {ins.origin.rule for ins in fn.body if ins.origin is not None}


EXACT = {  # function of rules.psk: what the rule leaves of its body
    "add0exp": 1,  # exp(x): never −0, so + 0 goes
    "sub0": 0,
    "mul1": 0,
    "mul1l": 0,
    "div1": 0,
    "pow1": 0,
    "fold": 1,  # x · 65/28
    "scales": 1,  # x · 3/2
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_an_exact_rule_gives_the_same_bits(rules_program, name: str) -> None:
    before, after = rules_program
    assert len(_function(after, name).body) == EXACT[name] < len(_function(before, name).body)
    for seed in range(3):
        a, b = _run(before, name, {"B": 5}, seed), _run(after, name, {"B": 5}, seed)
        assert a["inputs"] == b["inputs"] and a["result"] == b["result"]


def test_distributing_is_in_the_e_graph_but_not_extracted(rules_program) -> None:
    before, after = rules_program
    # (x + y) · 0.3 = x · 0.3 + y · 0.3 costs an operation more: the program's form stays
    assert _function(after, "distribute") == _function(before, "distribute")
    t, name = "t1", "a · x + a · y = a · (x + y)"
    x, y = Term.param("f/0", t), Term.param("f/1", t)
    scale = Term.num(BigRat(3, 10), SCALAR)
    made = Made.at("f/%3")
    lhs = Term.n2("mul", "", t, made, Term.n2("add", "", t, Made.at("f/%2"), x, y), scale)
    by = Made.by(made, name)
    rhs = Term.n2("add", "", t, by, Term.n2("mul", "", t, by, x, scale),
                  Term.n2("mul", "", t, by, y, scale))  # fmt: skip
    egraph = EGraph()
    egraph.register(lhs)
    egraph.run(TYPING.saturate())
    egraph.run(REWRITES)
    egraph.check(eq(lhs).to(rhs))


def test_folding_is_exact_in_q(rules_program) -> None:
    _, after = rules_program
    (ins,) = _function(after, "fold").body
    assert [str(a) for a in ins.args] == ["x", "65/28"]  # (1 - 1/4) · 3 / 7 + 2


def test_factoring_a_scale_agrees_within_the_bound(rules_program) -> None:
    before, after = rules_program
    assert _rules_in(_function(after, "factor")) == {"a · x + a · y = a · (x + y)"}
    u = Fraction(1, 2**BITS)  # the unit roundoff at 512 bits, round to nearest
    for seed in range(3):
        a, b = _run(before, "factor", {"B": 7}, seed), _run(after, "factor", {"B": 7}, seed)
        xs, ys = _reals(a["inputs"]["x"]), _reals(a["inputs"]["y"])
        scale = Fraction("0.3")
        for lhs, rhs, x, y in zip(_reals(a["result"]), _reals(b["result"]), xs, ys, strict=True):
            bound = 5 * u * (abs(scale * x) + abs(scale * y))  # docs/optimizer.md
            assert abs(lhs - rhs) <= bound


@pytest.fixture(scope="module")
def grad_program():
    core = run_pipeline("core-after-ad", str(ROOT / "tutorial" / "04_grad.psk"), Context())
    return core, optimize(core)


def test_the_adjoint_of_linear_apply_loses_its_summed_records_of_zeros(grad_program) -> None:
    core, (after, report) = grad_program
    before, bwd = _function(core, "Linear.apply.bwd"), _function(after, "Linear.apply.bwd")
    assert [i.op for i in before.body].count("put") == 2 and "accum" in [i.op for i in before.body]
    ops = [i.op for i in bwd.body]
    assert "put" not in ops and "accum" not in ops and ops.count("record") == 1
    assert "puts of zeros summed = record" in _rules_in(bwd)
    assert next(f for f in report.functions if f.name == "Linear.apply.bwd").changed


def test_loss_bwd_loses_its_pow_1(grad_program) -> None:
    core, (after, _) = grad_program
    pows = [i for i in _function(core, "loss.bwd").body if i.op == "pow"]
    assert [str(i.args[1]) for i in pows] == ["1"]
    assert not [i for i in _function(after, "loss.bwd").body if i.op == "pow"]


def test_the_gradient_is_the_same_to_the_last_bit(grad_program) -> None:
    core, (after, _) = grad_program
    dims = {"D": 3, "B": 2}
    for seed in range(2):
        assert _run(core, "loss_grad", dims, seed) == _run(after, "loss_grad", dims, seed)


def test_every_rule_has_a_name_a_reason_and_rewrites() -> None:
    names = [r.name for r in RULES]
    assert len(set(names)) == len(names)
    assert all(r.why and r.rewrites for r in RULES)


def test_the_report_names_the_bound_that_stopped_saturation(grad_program) -> None:
    core, _ = grad_program
    from presk_opt.optimize import Bounds

    _, report = optimize(core, Bounds(iterations=1))
    assert {f.stop for f in report.functions} == {"stopped at 1 iterations"}
    lines = report.lines()
    assert len(lines) > 1 and all(line.endswith(" (stopped at 1 iterations)") for line in lines[1:])
    _, report = optimize(core, Bounds(enodes=10))
    (stop,) = {f.stop for f in report.functions}
    assert stop.startswith("stopped at ") and stop.endswith(" e-nodes")
    _, report = optimize(core, Bounds(seconds=0))
    assert {f.stop for f in report.functions} == {"stopped at 0 s"}


def test_a_scale_moves_onto_the_smaller_operand_under_the_roofline(rules_program) -> None:
    """(x · w) · s: operation counts price the three forms the same (the program's stays);
    the roofline at B = 7 scales w (3 × 5) rather than x (7 × 3) or the product (7 × 5).
    At 512 bits the two agree within 2(n + 3)u |s| Σⱼ|xᵢⱼ wⱼₖ| (docs/optimizer.md)."""
    from presk_opt import roofline as R
    from presk_opt.price import roofline_model
    from presk_opt.rules import SCALE

    before, after = rules_program
    assert _function(after, "scaled") == _function(before, "scaled")
    profile = R.Profile(R.machine("f64"), [], R.Roofline(1e9, 1e10, 1e-7))
    moved, _ = optimize(before, model=roofline_model(profile, before, [("scaled", {"B": 7})]))
    fn = _function(moved, "scaled")
    assert [i.op for i in fn.body] == ["mul", "dot"] and _rules_in(fn) == {SCALE}
    assert fn.body[0].args[0].name == "w"
    u, n = Fraction(1, 2**BITS), 3
    for seed in range(3):
        a, b = _run(before, "scaled", {"B": 7}, seed), _run(moved, "scaled", {"B": 7}, seed)
        assert a["inputs"] == b["inputs"]
        x, w = a["inputs"]["x"], a["inputs"]["w"]
        s = abs(Fraction(a["inputs"]["s"]))
        for i, (row_a, row_b) in enumerate(zip(a["result"], b["result"], strict=True)):
            for k, (p, q) in enumerate(zip(row_a, row_b, strict=True)):
                mag = sum(abs(Fraction(x[i][j]) * Fraction(w[j][k])) for j in range(n))
                assert abs(Fraction(p) - Fraction(q)) <= 2 * (n + 3) * u * s * mag


@pytest.mark.parametrize("name", ["add0", "add0l", "zero_sign"])
def test_adding_0_stays_where_it_can_turn_a_minus_0_into_plus_0(rules_program, name) -> None:
    """x + 0 is x but for x = −0 (IEEE gives +0): the rule needs x never −0 (SIGNS), and a
    parameter, or x · 0 (−0 for a negative x), may be. The printed result is the same."""
    before, after = rules_program
    assert _function(after, name) == _function(before, name)
    a = run_entry(before, None, name, {"B": 6}, 1, BITS, 12, False)
    assert a == run_entry(after, None, name, {"B": 6}, 1, BITS, 12, False)
    if name == "zero_sign":  # x · 0 alone prints its −0s: x · 0 + 0 = x · 0 would too
        assert "-0" not in a and "-0" in run_entry(before, None, "mul0", {"B": 6}, 1, BITS, 12)


def test_the_signs_of_zero_prove_what_they_say() -> None:
    """no_minus_zero on the e-graph of rules.psk: exp(x) and (x · 0) + 0 are never −0; a
    parameter and x · 0 may be."""
    from egglog import EGraph
    from presk_opt.terms import Tables, no_minus_zero, to_terms

    core = run_pipeline("core-after-ad", str(HERE / "programs" / "rules.psk"), Context())
    tables, egraph = Tables(), EGraph()
    terms = {}
    for name in ("add0exp", "zero_sign"):
        enc = to_terms(_function(core, name), tables)
        terms[name] = enc
        egraph.register(enc.ret)
        for lit, num in enc.rationals:
            egraph.register(union(lit).with_(num))
    egraph.run(TYPING.saturate())
    exp_x, sum_ = terms["add0exp"], terms["zero_sign"]
    egraph.check(no_minus_zero(exp_x.terms[_function(core, "add0exp").body[0].out.id]))
    egraph.check(no_minus_zero(sum_.ret))
    body = _function(core, "zero_sign").body
    egraph.check_fail(no_minus_zero(sum_.terms[body[0].out.id]))  # x · 0
    egraph.check_fail(no_minus_zero(sum_.terms[_function(core, "zero_sign").params[0].id]))


def test_scales_multiplied_only_by_a_power_of_two(rules_program) -> None:
    """(x · 3) · 0.1 rounds twice where x · 0.3 rounds once: not rewritten. (x · 0.1) · 0.25
    is x · 0.025 to the last bit (· 2⁻² is exact): rewritten, the same bits."""
    before, after = rules_program
    assert _function(after, "scales_rounded") == _function(before, "scales_rounded")
    (ins,) = _function(after, "scales_halved").body
    assert [str(a) for a in ins.args] == ["x", "1/40"]
    assert _rules_in(_function(after, "scales_halved")) == {"scales multiplied"}
    for seed in range(3):
        a = _run(before, "scales_halved", {"B": 5}, seed)
        assert a == _run(after, "scales_halved", {"B": 5}, seed)


@pytest.mark.parametrize("name", ["minus0_mul", "minus0_mul2", "minus0_div", "minus0_neg"])
def test_folding_keeps_a_minus_0(rules_program, name: str) -> None:
    """(−1) · 0, 0 · (−1), 0 / (−2) and −(1 − 1) are −0 in IEEE arithmetic: folded in ℚ to
    0 (+0), x · 0 + it would print 0 where the program prints -0 for a negative x."""
    before, after = rules_program
    printed = run_entry(before, None, name, {"B": 6}, 1, BITS, 12, False)
    assert "-0" in printed
    assert printed == run_entry(after, None, name, {"B": 6}, 1, BITS, 12, False)


def test_folding_to_plus_0_is_kept(rules_program) -> None:
    """(1 − 1) · 3 is +0 in IEEE arithmetic as in ℚ: folded (x · 0 + 0 keeps its addition)."""
    before, after = rules_program
    fn = _function(after, "plus0_fold")
    assert [i.op for i in fn.body] == ["mul", "add"] and str(fn.body[1].args[1]) == "0"
    for seed in range(2):
        a = run_entry(before, None, "plus0_fold", {"B": 6}, seed, BITS, 12, False)
        assert a == run_entry(after, None, "plus0_fold", {"B": 6}, seed, BITS, 12, False)


def test_a_sum_over_an_axis_of_length_1_is_a_reshape(rules_program) -> None:
    """The adjoint of x : ℝ[batch: B] broadcast into ℝ[1, batch: B] sums its cotangent over
    the axis of length 1: one term a sum, the same elements (`reshape_like`, a view
    natively). The gradient is the same to the last bit."""
    from presk_opt.squeeze import NAME

    before, after = rules_program
    ops = [i.op for i in _function(before, "onesum_loss.bwd").body]
    assert ops.count("sum_to") == 2 and "reshape_like" not in ops
    bwd = _function(after, "onesum_loss.bwd")
    ops = [i.op for i in bwd.body]
    assert "sum_to" not in ops and ops.count("reshape_like") == 2 and _rules_in(bwd) >= {NAME}
    for seed in range(3):
        a, b = (
            _run(before, "onesum_grad", {"B": 5}, seed),
            _run(after, "onesum_grad", {"B": 5}, seed),
        )
        assert a["inputs"] == b["inputs"] and a["result"] == b["result"]


def test_a_sum_over_a_batch_too_stays(rules_program) -> None:
    """v : ℝ[1] broadcast over ℝ[1, batch: B]: its adjoint sums over the batch, not only
    over length-1 axes: not a reshape."""
    before, after = rules_program
    assert _function(after, "bsum_loss.bwd") == _function(before, "bsum_loss.bwd")
