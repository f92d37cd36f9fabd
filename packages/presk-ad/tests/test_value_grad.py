"""`value_grad F(args)`: F's value and its gradient in its last parameter, in one call.

Each case is an entry E whose body is `grad F(args)` (tutorial/04_grad.psk, the tower, tiny
MiniGPT, callers.psk, value_grad/flat.psk). Beside it the tests write `E.value`, the same
body with `value_grad F(args)`, and `E.forward`, with `call F(args)`, and differentiate the
program in both forms (`--remat residuals` and `recompute`). On the same inputs, at 256 bits:

- the value `E.value` returns is `E.forward`'s, bit for bit, and its gradient is `E`'s
  (through `F.grad`), bit for bit, in the program with `E.value` and in the one without it
  (where `F.fwd` need not return F's value);
- the forward pass runs once: in the residual form (the default, which training uses) the
  calls a run of `E.value` makes are those of a run of `E`, with `F.value_grad` and
  `F.value_vjp` for `F.grad` and `F.vjp`, so the value costs no call; `F.fwd` runs once
  and F not at all (F once, and no `.fwd`, when F's sweep reads only its parameters). In
  the recomputing form `F.value_vjp` holds each forward instruction of F once and calls
  neither F nor `F.vjp`; the value costs at most the calls of F's forward pass, which
  `F.vjp` drops since its callees' `.vjp`s compute their forward pass again;
- `value_grad` prints as `grad` does, and none is left after differentiation.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from presk_ad import differentiate
from presk_ad.vjp import DIFFERENTIATED
from presk_core import mpfr as M
from presk_core.interp import Interpreter
from presk_core.ir import Function, Instr, Program, Value, format_instr
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize
from presk_types.elab import load_program
from presk_types.types import TupleT

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROGRAMS = HERE / "programs"
GRAD = ROOT / "tutorial" / "04_grad.psk"
TINY_GPT = (("V", "16"), ("D", "8"), ("H", "2"), ("L", "1"))
BITS = 256
REMATS = ("residuals", "recompute")

CASES = [
    pytest.param(GRAD, "loss_grad", {"D": 3, "B": 4}, (), id="04_grad"),
    pytest.param(PROGRAMS / "residuals" / "tower_grad.psk", "tower_grad", {"B": 2}, (), id="tower"),
    pytest.param(
        PROGRAMS / "residuals" / "minigpt_grad.psk",
        "minigpt_grad",
        {"B": 1, "T": 4},
        TINY_GPT,
        id="minigpt",
    ),
    pytest.param(PROGRAMS / "residuals" / "callers.psk", "g_dx", {}, (), id="callers-g"),
    pytest.param(PROGRAMS / "residuals" / "callers.psk", "h_dx", {}, (), id="callers-h"),
    pytest.param(PROGRAMS / "value_grad" / "flat.psk", "flat_dx", {}, (), id="flat"),
    pytest.param(PROGRAMS / "value_grad" / "flat.psk", "curved_dx", {}, (), id="curved"),
]


@dataclass(frozen=True)
class Compiled:
    """An entry's program differentiated with and without its `value_grad` sibling."""

    f: Function  # the differentiated function F
    plain: dict[str, Program]  # by remat: the program as written
    valued: dict[str, Program]  # by remat: with `E.value` and `E.forward`
    args: list = field(default_factory=list)
    dims: dict[str, int] = field(default_factory=dict)


def with_siblings(core: Program, entry_name: str) -> tuple[Program, Function]:
    """The program with `E.value` (`value_grad F(args)`) and `E.forward` (`call F(args)`)
    beside E, whose body is `grad F(args)`; and F."""
    entry = core.function(entry_name)
    (site,) = entry.body
    assert site.op == "grad" and entry.ret == site.out
    f = core.function(site.attr("fn"))
    count = max([p.id for p in entry.params], default=-1) + 1
    pair = Value(count, TupleT((f.result, site.out.type)))
    value = Instr(pair, "value_grad", site.args, site.attrs, site.span)
    out = Value(count, f.result)
    forward = Instr(out, "call", site.args, site.attrs, site.span)
    made = (
        Function(f"{entry_name}.value", entry.dims, entry.params, pair.type, (value,), pair),
        Function(f"{entry_name}.forward", entry.dims, entry.params, f.result, (forward,), out),
    )
    return Program(core.functions + made), f


@functools.cache
def compiled(path: Path, entry: str, dims: tuple, consts: tuple) -> Compiled:
    elab = load_program(str(path), dict(consts))
    core = lower_program(elab)
    program, f = with_siblings(core, entry)
    plain = {remat: differentiate(core, remat) for remat in REMATS}
    valued = {remat: differentiate(program, remat) for remat in REMATS}
    interp = Interpreter(plain["residuals"], BITS)
    spec = parse_entry(entry, plain["residuals"], elab, dict(dims))
    args = [v for _, _, v in synthesize(spec, interp, 0)]
    with M.precision(BITS):  # off the initialization: no zero leaf (MiniGPT's head)
        rng = np.random.default_rng(1)
        args = [
            {k: M.add(leaf, M.real(rng.standard_normal(np.shape(leaf)))) for k, leaf in a.items()}
            if isinstance(a, dict)
            else a
            for a in args
        ]
    return Compiled(f, plain, valued, args, spec.dims)


def bits(value: object, path: str = "") -> list[tuple[str, str, int, int]]:
    """Every number of a value, exactly: where it is, its binary digits (with the sign, so
    -0 is not 0), its exponent and its precision."""
    match value:
        case dict():
            return [b for k in sorted(value) for b in bits(value[k], f"{path}.{k}")]
        case tuple():
            return [b for i, v in enumerate(value) for b in bits(v, f"{path}[{i}]")]
    return [(path, *x.digits(2)) for x in np.asarray(value, dtype=object).reshape(-1)]


@dataclass
class Counting(Interpreter):
    """The interpreter, counting the calls of each function."""

    calls: Counter = field(default_factory=Counter)

    def call(self, name: str, args: list, dims: dict[str, int]) -> object:
        self.calls[name] += 1
        return super().call(name, args, dims)


def run(program: Program, name: str, c: Compiled) -> tuple[object, Counter]:
    interp = Counting(program, BITS)
    out = interp.run(name, c.args, c.dims)
    return out, interp.calls


# ---- the same bits -----------------------------------------------------------------------------


@pytest.mark.parametrize("remat", REMATS)
@pytest.mark.parametrize(("path", "entry", "dims", "consts"), CASES)
def test_the_value_and_the_gradient_are_the_same_bits(path, entry, dims, consts, remat) -> None:
    c = compiled(path, entry, tuple(dims.items()), consts)
    program = c.valued[remat]
    value, grad = run(program, f"{entry}.value", c)[0]
    forward = run(program, f"{entry}.forward", c)[0]
    assert bits(value) == bits(forward)
    assert bits(grad) == bits(run(program, entry, c)[0])  # F.grad beside it
    assert bits(grad) == bits(run(c.plain[remat], entry, c)[0])  # F.grad alone
    assert all(precision == BITS for *_, precision in bits((value, grad)))
    assert any(digits.strip("-") != "0" for _, digits, _, _ in bits(grad))


# ---- the forward pass once --------------------------------------------------------------------


@pytest.mark.parametrize(("path", "entry", "dims", "consts"), CASES)
def test_the_value_costs_no_call_in_the_residual_form(path, entry, dims, consts) -> None:
    c = compiled(path, entry, tuple(dims.items()), consts)
    name, program = c.f.name, c.valued["residuals"]
    _, with_value = run(program, f"{entry}.value", c)
    expected = renamed(run(c.plain["residuals"], entry, c)[1], entry, name)
    has_fwd = f"{name}.fwd" in {f.name for f in program.functions}
    if not has_fwd:
        expected[name] += 1  # no `.fwd`: F's own call is the forward pass, which .bwd skips
    assert with_value == expected
    assert with_value[f"{name}.fwd"] == (1 if has_fwd else 0)
    assert with_value[name] == (0 if has_fwd else 1)
    assert with_value[f"{name}.vjp"] == 0


@pytest.mark.parametrize(("path", "entry", "dims", "consts"), CASES)
def test_the_value_costs_at_most_one_forward_pass_when_recomputing(
    path, entry, dims, consts
) -> None:
    """`F.vjp` drops the forward values its sweep does not read (F's value among them: the
    callees' `.vjp`s compute their forward pass again); `F.value_vjp` keeps what F's value
    needs, so it may call what F's forward pass calls once more, and nothing else."""
    c = compiled(path, entry, tuple(dims.items()), consts)
    name, program = c.f.name, c.valued["recompute"]
    _, with_value = run(program, f"{entry}.value", c)
    expected = renamed(run(c.plain["recompute"], entry, c)[1], entry, name)
    forward = run(program, f"{entry}.forward", c)[1] - Counter({f"{entry}.forward": 1, name: 1})
    assert not expected - with_value
    assert with_value - expected <= forward
    assert with_value[name] == 0 and with_value[f"{name}.vjp"] == 0


def renamed(calls: Counter, entry: str, name: str) -> Counter:
    """The calls of a run of E, named as those of E.value: F.value_grad for F.grad, …"""
    names = {entry: f"{entry}.value", f"{name}.grad": f"{name}.value_grad"}
    names[f"{name}.vjp"] = f"{name}.value_vjp"
    return Counter({names.get(k, k): n for k, n in calls.items()})


@pytest.mark.parametrize(("path", "entry", "dims", "consts"), CASES)
def test_the_residual_value_vjp_is_its_fwd_then_its_bwd(path, entry, dims, consts) -> None:
    c = compiled(path, entry, tuple(dims.items()), consts)
    program, name = c.valued["residuals"], c.f.name
    value_vjp = program.function(f"{name}.value_vjp")
    calls = [i.attr("fn") for i in value_vjp.body if i.op == "call"]
    if f"{name}.fwd" in {f.name for f in program.functions}:
        assert calls == [f"{name}.fwd", f"{name}.bwd"]
        fwd = program.function(f"{name}.fwd")
        assert fwd.result.elements[0] == c.f.result  # (value, residuals)
        (get,) = [i for i in value_vjp.body if i.op == "get" and i.attr("index") == 0]
        assert get.out == value_vjp.body[-1].args[0]  # the value returned is F.fwd's
    else:
        assert calls == [f"{name}.bwd", name]
    assert value_vjp.result == TupleT((c.f.result, program.function(f"{name}.vjp").result))


@pytest.mark.parametrize(("path", "entry", "dims", "consts"), CASES)
def test_the_recomputing_value_vjp_runs_the_forward_once(path, entry, dims, consts) -> None:
    c = compiled(path, entry, tuple(dims.items()), consts)
    program, name = c.valued["recompute"], c.f.name
    value_vjp = program.function(f"{name}.value_vjp")
    forward = {i.out.id for i in c.f.body}
    ids = [i.out.id for i in value_vjp.body if i.out.id in forward]
    assert len(ids) == len(set(ids))  # each forward instruction once
    returned = value_vjp.body[-1]
    assert returned.out == value_vjp.ret and returned.args[0] == c.f.ret  # F's own value
    callees = {i.attr("fn") for i in value_vjp.body if i.op == "call"}
    assert name not in callees and f"{name}.vjp" not in callees


# ---- the instruction -------------------------------------------------------------------------


def test_value_grad_prints_as_grad_does_and_none_is_left() -> None:
    elab = load_program(str(GRAD), {})
    program, f = with_siblings(lower_program(elab), "loss_grad")
    site = program.function("loss_grad.value").body[0]
    assert format_instr(site) == (
        "  %3 : (ℝ[], params Linear{D, 1}) = value_grad loss_grad.lambda0{D = D, B = B}(x, y, θ)"
    )
    for remat in REMATS:
        out = differentiate(program, remat)
        assert not [i for g in out.functions for i in g.body if i.op in DIFFERENTIATED]
        (call,) = out.function("loss_grad.value").body
        assert call.op == "call" and call.attr("fn") == f"{f.name}.value_grad"
        value_grad = out.function(f"{f.name}.value_grad")
        assert [p.name for p in value_grad.params] == ["x", "y", "θ"]
        assert str(value_grad.result) == "(ℝ[], params Linear{D, 1})"


def test_without_value_grad_the_fwd_returns_no_value() -> None:
    """The specification's loss_grad.lambda0.fwd returns only its residuals; asked for its
    value too, it returns (value, residuals), and its `.vjp` reads the residuals after it."""
    c = compiled(GRAD, "loss_grad", (("D", 3), ("B", 4)), ())
    plain = c.plain["residuals"].function("loss_grad.lambda0.fwd")
    valued = c.valued["residuals"].function("loss_grad.lambda0.fwd")
    assert len(plain.result.elements) == 1
    assert valued.result.elements == (c.f.result, *plain.result.elements)
    vjp = c.valued["residuals"].function("loss_grad.lambda0.vjp")
    assert [i.attr("index") for i in vjp.body if i.op == "get"] == [1]
