"""Gradients against central finite differences at 512 bits (DESIGN §7), one row a case.

Each case is a scalar function f of a program (tests/programs/*.psk, or an example of the
repository) and a function g that computes its gradient with `grad`, in one parameter x of
f. The program goes through the whole pipeline: `load_program` → `lower_program` →
`differentiate` → the MPFR interpreter at 512 bits. Its inputs are synthesized from the
types as `presk run` does (seed 0). For a few random directions d of x, the directional
derivative the program computes, ⟨g(x), d⟩, must match the central difference quotient

    D = (f(x + h·d) − f(x − h·d)) / 2h,   h = 1e-40,

both evaluated by the interpreter at 512 bits, to a relative 1e-30. Why those numbers:

- truncation: D − ⟨∇f, d⟩ = h²/6 · f'''(x)[d, d, d] + O(h⁴), about 1.7e-81 · |f'''|;
- rounding: f(x ± h·d) carries a relative error of about n · 2⁻⁵¹² ≈ n · 7.5e-155 (n the
  length of the chain of operations, ≪ 1e6 here), and x ± h·d rounds to 2⁻⁵¹² relative;
  divided by 2h that is about n · |f| · 4e-115 in D. ⟨g, d⟩ has the same n · 2⁻⁵¹²;
- so a correct rule agrees to ~1e-75 even with third derivatives of 1e5, while a wrong
  rule disagrees at O(1), and a rule that loses precision (a float64 constant or step,
  a 53-bit intermediate) disagrees at ~1e-16. 1e-30 is between the two, with more than
  ten orders of magnitude of margin on either side. Measured on these cases: below 5e-114
  where f is linear in x (the rounding term alone), below 3e-78 elsewhere; a silu′ or a
  gelu′ computed at 53 bits is caught (~1e-17), and so is any wrong rule.

The discrepancy is measured against S = ‖g‖₂‖d‖₂ + |D|, a bound of the terms of the inner
product, so that a direction nearly orthogonal to the gradient does not make a correct
gradient fail. A parameter tree (or a tuple) gets random directions over all its leaves,
then one direction per leaf, so that a wrong adjoint names the parameter it reaches.

Parameter trees are moved off their initialization (by 0.5·N(0, 1) per entry), so that no
leaf is zero: MiniGPT's head starts at 0, which would make every other gradient 0.

Cases whose gradient is wrong or missing today are written as they should be and marked
`xfail(strict=True)`, with the reason.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import gmpy2
import numpy as np
import pytest
from presk_ad import ADError, differentiate
from presk_ad.vjp import vjp_rules
from presk_core import mpfr as M
from presk_core.interp import Interpreter
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize
from presk_types.elab import load_program
from presk_types.rules import PRIMITIVES

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROGRAMS = HERE / "programs"
BITS = 512
H = "1e-40"  # the step of the difference quotient (see the module docstring)
TOL = "1e-30"  # relative to S = ‖g‖₂‖d‖₂ + |D|
DIRECTIONS = 3  # random directions of x (and, for a tree or a tuple, one more per tensor)
TINY_GPT = (("V", "16"), ("D", "8"), ("H", "2"), ("L", "1"))  # also BERT's
TINY_LLAMA = (("D", "8"), ("H", "2"), ("F", "16"))


@dataclass(frozen=True)
class Case:
    program: str  # a file of tests/programs, or a path from the repository's root
    f: str  # the scalar function
    wrt: str  # the parameter of f that g differentiates in
    g: str = ""  # the gradient function: f"{f}_d{wrt}" unless named
    dims: tuple[tuple[str, int], ...] = ()  # the entry's dimensions and prefix axes
    consts: tuple[tuple[str, str], ...] = ()  # --const overrides
    positive: tuple[str, ...] = ()  # real arguments moved to |v| + 1/2 (log, sqrt, x^1.5)

    @property
    def path(self) -> Path:
        local = PROGRAMS / self.program
        return local if local.exists() else ROOT / self.program

    @property
    def grad(self) -> str:
        return self.g or f"{self.f}_d{self.wrt}"

    def __str__(self) -> str:
        return f"{Path(self.program).stem}:{self.grad}"


def xfail(case: Case, reason: str, raises: type[BaseException] = ADError) -> object:
    """A case whose gradient is wrong or missing today: run it, expect it to fail so."""
    mark = pytest.mark.xfail(strict=True, raises=raises, reason=reason)
    return pytest.param(case, marks=mark, id=str(case))


def broadcasting(op: str) -> list[Case]:
    """The rows of add.psk, sub.psk, mul.psk, div.psk: each broadcasting, each operand."""
    prefix = (("batch", 2),)
    return [
        *(Case(f"{op}.psk", f, x) for f in ("pos", "name", "swap", "one") for x in ("x", "y")),
        *(Case(f"{op}.psk", "prefix", x, dims=prefix) for x in ("x", "y")),
        *(Case(f"{op}.psk", "scalar", x) for x in ("x", "s")),
    ]


UNARY = ["sqrt", "exp", "log", "tanh", "sigmoid", "gelu", "silu", "sin", "cos", "relu", "abs"]
POSITIVE = {"sqrt", "log"}

CASES = [
    *(c for op in ("add", "sub", "mul", "div") for c in broadcasting(op)),
    Case("pow.psk", "int", "x"),
    Case("pow.psk", "square", "x"),
    Case("pow.psk", "frac", "x", positive=("x",)),
    Case("pow.psk", "tenth", "x", positive=("x",)),
    Case("neg.psk", "f", "x"),
    Case("dot.psk", "mat", "x", dims=(("batch", 2),)),
    Case("dot.psk", "mat", "m", dims=(("batch", 2),)),
    *(Case("dot.psk", f, x) for f, x in [("vec", "x"), ("vec", "y"), ("wide", "x"), ("wide", "m")]),
    *(Case("ein.psk", f, x) for f, x in [("scores", "q"), ("scores", "k")]),
    *(Case("ein.psk", f, x) for f, x in [("values", "a"), ("values", "v"), ("reorder", "o")]),
    *(Case(f"{u}.psk", "f", "x", positive=("x",) if u in POSITIVE else ()) for u in UNARY),
    *(
        Case(f"{r}.psk", f, "x", dims=(("batch", 2),))
        for r in ("sum", "mean")
        for f in ("all", "axis", "prefix", "whole")
    ),
    *(
        Case(f"{s}.psk", f, "x", dims=(("T", 4),))
        for s in ("softmax", "log_softmax")
        for f in ("last", "first", "causal")
    ),
    *(Case("select.psk", f, x) for f in ("same", "spread") for x in ("x", "y")),
    Case("embed.psk", "f", "table"),
    Case("take.psk", "logp", "x"),
    Case("take.psk", "lead", "x"),
    Case("take.psk", "top", "x"),  # issue 29: top_k's values, a take of indices with an axis
    Case("take.psk", "wide", "x"),  # indices with an axis x lacks
    Case("merge.psk", "f", "x"),
    Case("window.psk", "f", "x", dims=(("T", 5),)),  # issue 29: slices and padding
    Case("window.psk", "lead", "x", dims=(("T", 4),)),
    *(Case("window.psk", "p", x, dims=(("T", 3),)) for x in ("x", "v")),
    Case("window.psk", "zero", "x", dims=(("batch", 2),)),
    *(Case("window.psk", "cv", x, dims=(("T", 3),)) for x in ("x", "w")),  # conv
    *(Case("window.psk", "cs", x, dims=(("T", 3),)) for x in ("x", "w")),  # conv's stride
    *(Case("window.psk", "sc", x, dims=(("T", 3),)) for x in ("h", "xs")),  # scan
    *(Case("window.psk", "lam", x, dims=(("T", 3),)) for x in ("w", "h")),  # a λ step
    # a scan over a symbolic number of steps (issue 29): scan{T}'s reverse scan
    *(Case("scan_n.psk", "sc", x, dims=(("T", 3),)) for x in ("h", "xs")),
    *(Case("scan_n.psk", "lam", x, dims=(("T", 3),)) for x in ("w", "h")),
    Case("scan_n.psk", "cell", "θ", dims=(("T", 3),)),
    Case("scan_n.psk", "pre", "xs", dims=(("T", 2), ("batch", 2))),
    *(Case("scan_n.psk", "tup", x, dims=(("T", 3),)) for x in ("a", "xs")),
    *(Case("scan_n.psk", "nest", x, dims=(("T", 2), ("U", 3))) for x in ("c", "xss")),
    Case("scan_n.psk", "ic", "w", dims=(("T", 3),)),
    Case("split.psk", "f", "x"),
    Case("cast.psk", "f", "x"),
    # draws (issue 29): the reparameterised normal, a dropout mask
    Case("draws.psk", "reparam", "mu"),
    Case("draws.psk", "reparam", "s"),
    Case("draws.psk", "dropout", "x"),
    # structure: calls of one helper with different active arguments, tuples
    Case("calls.psk", "f", "x"),
    Case("calls.psk", "f", "y"),
    Case("tuple.psk", "f", "p"),
    # models: a linear layer, a two-layer MLP, stacked modules, a transformer
    Case("tutorial/04_grad.psk", "loss", "θ", g="loss_grad", dims=(("D", 3), ("B", 4))),
    Case("tests/examples/mlp/mlp.psk", "mse", "θ", g="mse_grad", dims=(("D", 3), ("B", 2))),
    Case("tower.psk", "tower_loss", "θ", g="tower_loss_grad"),
    Case(
        "minigpt_grad.psk",
        "minigpt_loss",
        "θ",
        g="minigpt_loss_grad",
        dims=(("B", 1), ("T", 4)),
        consts=TINY_GPT,
    ),
    *(
        Case("llama_grad.psk", "block_loss", x, g, dims=(("B", 1), ("T", 3)), consts=TINY_LLAMA)
        for x, g in [("θ", "block_loss_dtheta"), ("x", "block_loss_dx")]
    ),
    # fixed in presk-ad: powers of real exponents, an `ein` summing an axis alone
    Case("max.psk", "f", "x"),
    Case("min.psk", "f", "x"),
    Case("maximum.psk", "f", "x"),
    Case("minimum.psk", "f", "x"),
    Case("pow_negative.psk", "f", "x"),
    Case("pow_dim.psk", "f", "x", dims=(("N", 3),), positive=("x",)),
    Case("pow_real.psk", "f", "x", positive=("x",)),
    Case("pow_real.psk", "f", "y", positive=("x",)),
    Case("ein_alone.psk", "f", "x"),
    Case("ein_sum.psk", "f", "x"),
    # fixed in the lowering: functions of two files with one name, θ of a module's λ
    Case("same_name.psk", "loss", "x", g="loss_grad"),
    Case("module_grad.psk", "Scorer.score", "x", g="Scorer.score_dx"),
    Case(
        "bert_grad.psk",
        "mlm_loss",
        "θ",
        g="mlm_loss_dtheta",
        dims=(("B", 1), ("T", 4)),
        consts=TINY_GPT,
    ),
]

KNOWN_BUGS: list = []  # each gradient found wrong is a case here, xfail, until it is fixed


# ---- the pipeline --------------------------------------------------------------------------


@functools.cache
def compiled(path: Path, consts: tuple[tuple[str, str], ...]):
    """The program elaborated, lowered and differentiated, and its interpreter at 512 bits."""
    elab = load_program(str(path), dict(consts))
    core = differentiate(lower_program(elab))
    return elab, core, Interpreter(core, BITS)


def inputs(case: Case) -> tuple[list, dict[str, int], int]:
    """f's arguments as `presk run` synthesizes them (seed 0), its dimensions, x's index."""
    elab, core, interp = compiled(case.path, case.consts)
    entry = parse_entry(case.f, core, elab, dict(case.dims))
    named = synthesize(entry, interp, 0)
    names = [n for n, _, _ in named]
    args = [v for _, _, v in named]
    with M.precision(BITS):
        half = gmpy2.mpfr("0.5")
        for name in case.positive:
            i = names.index(name)
            args[i] = M.add(M.abs(args[i]), M.real(half))
        rng = np.random.default_rng(1)
        for i, v in enumerate(args):
            if isinstance(v, dict):  # off the initialization: no zero leaf (MiniGPT's head)
                args[i] = {k: M.add(leaf, _normal(rng, leaf, 0.5)) for k, leaf in v.items()}
    return args, entry.dims, names.index(case.wrt)


def _normal(rng: np.random.Generator, like: np.ndarray, scale: float = 1.0) -> np.ndarray:
    return M.real(rng.standard_normal(np.shape(like)) * scale)


# ---- trees of tensors ----------------------------------------------------------------------


def leaves(x: object, path: str = "") -> dict[str, np.ndarray]:
    """x's tensors by path: a tree's leaves, a tuple's elements (`0.`, `1.`), or x itself."""
    if isinstance(x, dict):
        return {f"{path}{k}": v for k, v in x.items()}
    if isinstance(x, tuple):
        return {k: v for i, e in enumerate(x) for k, v in leaves(e, f"{path}{i}.").items()}
    return {path: x}


def rebuild(like: object, parts: dict[str, np.ndarray], path: str = "") -> object:
    """A value of like's structure with the tensors of `parts` (as `leaves` names them)."""
    if isinstance(like, dict):
        return {k: parts[f"{path}{k}"] for k in like}
    if isinstance(like, tuple):
        return tuple(rebuild(e, parts, f"{path}{i}.") for i, e in enumerate(like))
    return parts[path]


def axpy(x: object, t: gmpy2.mpfr, d: dict[str, np.ndarray]) -> object:
    """x + t·d, leaf by leaf, rounded at the current precision."""
    return rebuild(x, {k: M.add(v, M.mul(M.real(t), d[k])) for k, v in leaves(x).items()})


def inner(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> gmpy2.mpfr:
    return sum((gmpy2.mpfr(M.sum(M.mul(a[k], b[k]))[()]) for k in a), gmpy2.mpfr(0))


def directions(x: object) -> list[tuple[str, dict[str, np.ndarray]]]:
    """Random normal directions over all of x, then, for a tree or a tuple, one for each of
    its tensors alone."""
    rng = np.random.default_rng(2)
    parts = leaves(x)
    out = [
        (f"random {i}", {k: _normal(rng, v) for k, v in parts.items()}) for i in range(DIRECTIONS)
    ]
    if len(parts) > 1:
        for name in parts:
            d = {
                k: _normal(rng, v) if k == name else M.zeros(np.shape(v)) for k, v in parts.items()
            }
            out.append((name, d))
    return out


# ---- the check ------------------------------------------------------------------------------


def check_gradient(case: Case) -> None:
    _, core, interp = compiled(case.path, case.consts)
    args, dims, i = inputs(case)
    g = interp.run(case.grad, args, dims)
    x = args[i]
    assert set(leaves(g)) == set(leaves(x)), "the gradient is not a value of x's type"
    for k, v in leaves(x).items():
        assert np.shape(leaves(g)[k]) == np.shape(v), f"the gradient's `{k}` has another shape"

    def f(point: object) -> gmpy2.mpfr:
        value = interp.run(case.f, [point if j == i else a for j, a in enumerate(args)], dims)
        return gmpy2.mpfr(np.asarray(value)[()])

    failures, largest = [], gmpy2.mpfr(0)
    with M.precision(BITS):
        h, tol = gmpy2.mpfr(H), gmpy2.mpfr(TOL)
        for label, d in directions(x):
            dq = (f(axpy(x, h, d)) - f(axpy(x, -h, d))) / (2 * h)
            ad = inner(leaves(g), d)
            scale = gmpy2.sqrt(inner(leaves(g), leaves(g)) * inner(d, d)) + abs(dq)
            largest = max(largest, abs(dq))
            if abs(ad - dq) > tol * scale:
                failures.append(
                    f"{label}: ⟨∇f, d⟩ = {ad:.25g}, difference quotient {dq:.25g}"
                    f" (relative {abs(ad - dq) / scale:.3g})"
                )
    assert not failures, f"{case}: the gradient disagrees with f's differences\n" + "\n".join(
        failures
    )
    assert largest > 1e-6, f"{case}: every directional derivative is ~0: the case tests nothing"


@pytest.mark.parametrize("case", [*CASES, *KNOWN_BUGS], ids=str)
def test_gradient_matches_finite_differences(case: Case) -> None:
    check_gradient(case)


# ---- 04_grad: b's gradient is twice the mean residual ---------------------------------------


def test_the_gradient_of_the_bias_is_twice_the_mean_residual() -> None:
    """loss = mean((x·w + b − y)²), so ∂loss/∂b = 2·mean(x·w + b − y)."""
    case = Case("tutorial/04_grad.psk", "loss", "θ", g="loss_grad", dims=(("D", 3), ("B", 4)))
    _, _, interp = compiled(case.path, case.consts)
    (θ, x, y), dims, _ = inputs(case)
    g = interp.run("loss_grad", [θ, x, y], dims)
    with M.precision(BITS):
        residual = M.sub(M.add(M.dot(x, θ["w"]), θ["b"]), y)
        expected = M.mul(M.mean(residual), M.real(2))
        assert np.shape(g["b"]) == (1,)
        error = abs(gmpy2.mpfr(g["b"][0]) - gmpy2.mpfr(expected[()]))
        assert error <= gmpy2.mpfr("1e-140") * abs(gmpy2.mpfr(expected[()]))


# ---- the table covers the registry -----------------------------------------------------------

# Primitives without an adjoint, deliberately: a new primitive must get a rule or a line here.
WITHOUT_ADJOINT = {
    "grad": "second order: a `.vjp` of a function that takes a gradient raises ADError "
    "(test_rules.py pins it)",
}

# Primitives whose adjoint is nothing: their results are discrete, or have no real operand.
NOTHING_FLOWS = {"real", "one_hot", "causal_mask", "compare", "argmax", "sample", "split_key"}
NOTHING_FLOWS |= {"top_k"}  # its indices; its values are a take
NOTHING_FLOWS |= {
    "uniform",
    "normal",
    "bernoulli",
    "stop_grad",
    "zeros",
    "ones",
    "pi",
    "iota",
}  # stop_grad: tests/run/test_stop_grad_*


def test_every_primitive_has_an_adjoint_or_is_listed_without() -> None:
    missing = set(PRIMITIVES) - set(vjp_rules) - set(WITHOUT_ADJOINT)
    assert not missing, f"primitives without an adjoint rule: {sorted(missing)}"
    assert not set(WITHOUT_ADJOINT) & set(vjp_rules), "a listed primitive has a rule now"
    assert set(WITHOUT_ADJOINT) <= set(PRIMITIVES)


def test_every_differentiable_primitive_has_a_gradient_case() -> None:
    """Each primitive with an adjoint that flows occurs in a program of a passing case, as
    written (before differentiation, whose adjoints use primitives too: sin′ is cos)."""
    seen: set[str] = set()
    for case in CASES:
        elab, _, _ = compiled(case.path, case.consts)
        seen |= {ins.op for fn in lower_program(elab).functions for ins in fn.body}
    wanted = (set(vjp_rules) & set(PRIMITIVES)) - NOTHING_FLOWS
    assert not wanted - seen, f"no gradient case for {sorted(wanted - seen)}"
