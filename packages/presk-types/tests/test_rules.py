"""The primitives' typing: the table covers the registry, and each rule types a tiny program.

Each program is written to a temporary file and checked with `check_file`; the function
under test is `f`, without a declared result, so that its type is the one inferred.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from presk_types.driver import Checked, check_file
from presk_types.rules import CALL_NAMES, OPERATORS, PRIMITIVES, Cls, type_rules

# Typed by the checker itself (check.py), not by `type_rules`: the operators, `ein`,
# comparisons, `grad(f)(θ)`, and `max`/`min` of two operands (`maximum`, `minimum`).
CHECKER_TYPED = {"add", "sub", "mul", "div", "pow", "neg", "dot", "ein", "compare", "grad"}
CHECKER_TYPED |= {"maximum", "minimum", "pi"}  # pi: a name (check.py), not a call
CHECKER_TYPED |= {"crop"}  # a slice `x[a: i .. j]` (check.py)

PRELUDE = "dim B\ndim T\n"


def check(tmp_path: Path, source: str, name: str = "t.psk") -> Checked:
    path = tmp_path / name
    path.write_text(PRELUDE + textwrap.dedent(source).lstrip(), encoding="utf-8")
    return check_file(str(path))


def info(c: Checked, key: str = "f"):
    (found,) = [i for i in c.checker.order if i.key == key]
    return found


def codes(c: Checked) -> list[str]:
    return [d.code for d in c.diagnostics]


# ---- the table covers the registry -----------------------------------------------------------


def test_every_primitive_is_typed_somewhere() -> None:
    assert set(type_rules) | CHECKER_TYPED == set(PRIMITIVES)
    assert not set(type_rules) & CHECKER_TYPED


def test_operators_name_primitives() -> None:
    assert set(OPERATORS.values()) <= set(PRIMITIVES)
    assert set(CALL_NAMES) <= set(PRIMITIVES)


def test_regularity_classes_of_the_registry() -> None:
    """docs/language.md: relu, abs and max are C⁰⁺; argmax, comparisons and samples Disc."""
    assert PRIMITIVES["exp"].cls(0) == Cls.SMOOTH
    assert PRIMITIVES["relu"].cls(0) == Cls.KINK
    assert PRIMITIVES["abs"].cls(0) == Cls.KINK
    assert PRIMITIVES["maximum"].cls(1) == Cls.KINK
    assert PRIMITIVES["argmax"].cls(0) == Cls.DISC
    assert PRIMITIVES["compare"].cls(0) == Cls.DISC
    assert [PRIMITIVES["sample"].cls(i) for i in range(3)] == [Cls.SMOOTH, Cls.DISC, Cls.DISC]
    assert PRIMITIVES["sample"].effect == "Rand"
    assert [str(c) for c in Cls] == ["C∞", "C⁰⁺", "Disc"]


# ---- each rule on a tiny program -------------------------------------------------------------

X = "x : ℝ[batch: B, model: 4]"
I8 = "i : idx[8][batch: B]"

# primitive: (parameters, `uses` clause, body, inferred type, classes of the parameters)
TYPINGS: dict[str, tuple[str, str, str, str, str]] = {
    "sqrt": (X, "", "sqrt(x)", "ℝ[batch: B, model: 4]", "x C∞"),
    "exp": (X, "", "exp(x)", "ℝ[batch: B, model: 4]", "x C∞"),
    "log": (X, "", "log(x)", "ℝ[batch: B, model: 4]", "x C∞"),
    "tanh": (X, "", "tanh(x)", "ℝ[batch: B, model: 4]", "x C∞"),
    "sigmoid": (X, "", "sigmoid(x)", "ℝ[batch: B, model: 4]", "x C∞"),
    "gelu": (X, "", "gelu(x)", "ℝ[batch: B, model: 4]", "x C∞"),
    "silu": (X, "", "silu(x)", "ℝ[batch: B, model: 4]", "x C∞"),
    "sin": (X, "", "sin(x)", "ℝ[batch: B, model: 4]", "x C∞"),
    "cos": (X, "", "cos(x)", "ℝ[batch: B, model: 4]", "x C∞"),
    "relu": (X, "", "relu(x)", "ℝ[batch: B, model: 4]", "x C⁰⁺"),
    "abs": (X, "", "abs(x)", "ℝ[batch: B, model: 4]", "x C⁰⁺"),
    "sum": (X, "", "sum(axis batch, x)", "ℝ[model: 4]", "x C∞"),
    "mean": (X, "", "mean(axis model, x)", "ℝ[batch: B]", "x C∞"),
    "max": (X, "", "max(axis model, x)", "ℝ[batch: B]", "x C⁰⁺"),
    "min": (X, "", "min(x)", "ℝ[]", "x C⁰⁺"),
    "softmax": (
        "s : ℝ[batch: B, seq: T, seq2: T]",
        "",
        "softmax(axis seq2, s, where = causal_mask(seq: T))",
        "ℝ[batch: B, seq: T, seq2: T]",
        "s C∞",
    ),
    "log_softmax": (X, "", "log_softmax(axis model, x)", "ℝ[batch: B, model: 4]", "x C∞"),
    "causal_mask": ("", "", "causal_mask(seq: T)", "bool[seq: T, seq2: T]", ""),
    "select": (
        "a : ℝ[batch: B], b : ℝ[batch: B, model: 4]",
        "",
        "select(a < 0, a, b)",
        "ℝ[batch: B, model: 4]",
        "a Disc, b C∞",
    ),
    "real": (I8, "", "real(i)", "ℝ[batch: B]", "i Disc"),
    "argmax": (X, "", "argmax(x)", "idx[4][batch: B]", "x Disc"),
    "top_k": (
        X,
        "",
        "top_k(axis model, x, k: 2)",
        "(ℝ[batch: B, model: 2], idx[4][batch: B, model: 2])",
        "x Disc",
    ),
    "one_hot": (I8, "", "one_hot(i)", "ℝ[batch: B, 8]", "i Disc"),
    "embed": (
        f"table : ℝ[8, model: 4], {I8}",
        "",
        "embed(table, i)",
        "ℝ[batch: B, model: 4]",
        "table C∞, i Disc",
    ),
    "take": (
        f"x : ℝ[batch: B, vocab: 8], {I8}",
        "",
        "take(axis vocab, x, i)",
        "ℝ[batch: B]",
        "x C∞, i Disc",
    ),
    "merge": (
        "x : ℝ[batch: B, ctx: 3, emb: 4]",
        "",
        "merge(axis ctx, axis emb, x)",
        "ℝ[batch: B, 12]",
        "x C∞",
    ),
    "split": (
        "x : ℝ[batch: B, model: 8]",
        "",
        "split(axis model, x, heads: 2, hd: 4)",
        "ℝ[batch: B, heads: 2, hd: 4]",
        "x C∞",
    ),
    "sample": (
        "k : key, logits : ℝ[batch: B, vocab: 8]",
        " uses Rand",
        "sample(k, logits)",
        "idx[8][batch: B]",
        "k C∞, logits Disc",
    ),
    "split_key": ("k : key", "", "split_key(k)", "(key, key)", "k C∞"),
    "uniform": (
        "k : key",
        " uses Rand",
        "uniform(k, batch: B, model: 4)",
        "ℝ[batch: B, model: 4]",
        "k C∞",
    ),
    "normal": (
        "k : key",
        " uses Rand",
        "normal(k, batch: B, latent: 2)",
        "ℝ[batch: B, latent: 2]",
        "k C∞",
    ),
    "bernoulli": (
        "k : key, p : ℝ[]",
        " uses Rand",
        "bernoulli(k, p, batch: B)",
        "ℝ[batch: B]",
        "k C∞, p Disc",  # a step in p, as sample in its logits
    ),
    "stop_grad": (X, "", "stop_grad(relu(x))", "ℝ[batch: B, model: 4]", "x C∞"),
    "zeros": ("", "", "zeros(batch: B, model: 4)", "ℝ[batch: B, model: 4]", ""),
    "ones": ("", "", "ones(seq: T)", "ℝ[seq: T]", ""),
    "iota": ("", "", "iota(seq: T)", "idx[T][seq: T]", ""),
    "pad": (
        "x : ℝ[batch: B, seq: T], c : ℝ[]",
        "",
        "pad(x, c, axis seq, before: 2, after: T)",
        "ℝ[batch: B, seq: 2*T + 2]",
        "x C∞, c C∞",
    ),
}


def test_typings_cover_the_type_rules() -> None:
    assert set(TYPINGS) == set(type_rules)
    for name, (_, _, body, _, _) in TYPINGS.items():
        assert body.startswith(f"{name}(")


@pytest.mark.parametrize("name", sorted(TYPINGS))
def test_type_rule(tmp_path: Path, name: str) -> None:
    params, uses, body, expected, classes = TYPINGS[name]
    c = check(tmp_path, f"fn f({params}){uses} =\n  {body}\n")
    assert c.diagnostics == [], [d.message for d in c.diagnostics]
    f = info(c)
    assert str(f.result) == expected
    assert ", ".join(f"{n} {k}" for n, k, _ in f.classes) == classes
    assert list(f.effects) == (["Rand"] if uses else [])


def test_mean_without_an_axis_is_a_scalar(tmp_path: Path) -> None:
    c = check(tmp_path, f"fn f({X}) = mean(x^2)\n")
    assert str(info(c).result) == "ℝ[]"


def test_reduction_keeps_the_prefix(tmp_path: Path) -> None:
    """Step 2: `mean(axis model, x^2)` of `ℝ[..., model: D]` is `ℝ[...]`."""
    c = check(tmp_path, "fn f{D : dim}(x : ℝ[..., model: D]) = mean(axis model, x^2)\n")
    assert str(info(c).result) == "ℝ[...]"


def test_argmax_by_name_and_max_of_two(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        f"""
        fn f({X}) = argmax(axis batch, x)
        fn g(a : ℝ[batch: B], b : ℝ[batch: B]) = max(a, b)
        fn h(a : ℝ[batch: B]) = min(a, 0)
        """,
    )
    assert str(info(c).result) == "idx[B][model: 4]"
    assert str(info(c, "g").result) == "ℝ[batch: B]"
    assert [(n, str(k)) for n, k, _ in info(c, "g").classes] == [("a", "C⁰⁺"), ("b", "C⁰⁺")]
    assert str(info(c, "h").result) == "ℝ[batch: B]"


def test_real_of_a_hyperparameter_and_of_a_mask(tmp_path: Path) -> None:
    c = check(
        tmp_path,
        """
        fn f(x : ℝ[batch: B], eps : f64 = 1e-6) = x + real(eps)
        fn g(x : ℝ[batch: B]) = real(x < 0)
        """,
    )
    assert str(info(c).result) == "ℝ[batch: B]"
    assert [(n, str(k)) for n, k, _ in info(c, "g").classes] == [("x", "Disc")]


def test_sample_needs_uses_rand(tmp_path: Path) -> None:
    c = check(tmp_path, "fn f(k : key, l : ℝ[batch: B, vocab: 8]) = sample(k, l)\n")
    assert codes(c) == ["E4001"]
    assert not c.ok


# ---- indices and reals do not mix (E2009) ----------------------------------------------------

MIXES = [
    f"fn f({I8}, x : ℝ[batch: B]) = i + x",
    f"fn f({I8}, x : ℝ[batch: B]) = x * i",
    f"fn f({I8}) = sqrt(i)",
    f"fn f({I8}) = mean(i)",
    "fn f(x : ℝ[batch: B]) = one_hot(x)",
    "fn f(t : ℝ[8, model: 4], x : ℝ[batch: B]) = embed(t, x)",
    "fn f(x : ℝ[batch: B], eps : f64 = 1e-6) = x + eps",
]


@pytest.mark.parametrize("source", MIXES)
def test_idx_and_reals_mix_only_through_real(tmp_path: Path, source: str) -> None:
    c = check(tmp_path, source + "\n")
    assert codes(c) == ["E2009"]


def test_real_makes_the_mix_legal(tmp_path: Path) -> None:
    c = check(tmp_path, f"fn f({I8}, x : ℝ[batch: B]) = real(i) + x\n")
    assert c.ok and str(info(c).result) == "ℝ[batch: B]"
    assert [(n, str(k)) for n, k, _ in info(c).classes] == [("i", "Disc"), ("x", "C∞")]


# ---- errors of the rules ---------------------------------------------------------------------

RULE_ERRORS = [
    (f"fn f({X}) = mean(axis seq, x)", "E2005"),  # no such axis
    (f"fn f({X}) = softmax(x)", "E2004"),  # softmax needs its axis
    (f"fn f({X}) = exp(x, x)", "E2004"),
    (f"fn f({X}) = softmax(axis model, x, where = x)", "E2008"),  # a mask is bool
    ("fn f(x : ℝ[a: 2, b: 3, c: 4]) = merge(axis a, axis c, x)", "E2005"),  # not adjacent
    ("fn f(x : ℝ[batch: B, model: 8]) = split(axis model, x, h: 3, d: 4)", "E2006"),
    (f"fn f(t : ℝ[7, model: 4], {I8}) = embed(t, i)", "E2006"),  # 7 rows, indices < 8
    (f"fn f(x : ℝ[batch: B, vocab: 5], {I8}) = take(axis vocab, x, i)", "E2006"),
    ("fn f(l : ℝ[batch: B, vocab: 8]) uses Rand = sample(l, l)", "E2008"),  # not a key
    (f"fn f({X}) = select(x, x, x)", "E2008"),  # not a mask
    ("fn f(a : ℝ[batch: B], b : ℝ[time: B]) = max(a, b)", "E2003"),
]


@pytest.mark.parametrize(("source", "code"), RULE_ERRORS)
def test_rule_errors(tmp_path: Path, source: str, code: str) -> None:
    c = check(tmp_path, source + "\n")
    assert codes(c) == [code]


def test_a_slice_is_typed_and_its_bounds_proved(tmp_path: Path) -> None:
    """`x[a: i .. j]` (issue 29): the axis's length j - i, 0 <= i <= j <= n for every value of
    the dimensions, else E2020/E2021 with the smallest counterexample."""
    c = check(
        tmp_path, "fn f(x : ℝ[batch: B, seq: T + 2]) =\n  x[seq: 1 .. T + 1, batch: 0 .. B]\n"
    )
    assert c.diagnostics == [], [d.message for d in c.diagnostics]
    assert str(info(c).result) == "ℝ[batch: B, seq: T]"
    c = check(tmp_path, "fn f(x : ℝ[batch: B, seq: T]) =\n  x[seq: 1 .. T]\n")
    assert codes(c) == ["E2020"]  # T = 0: the slice 1 .. 0
    assert "for T = 0" in c.diagnostics[0].labels[0].text
    c = check(tmp_path, "fn f(x : ℝ[batch: B, seq: T]) =\n  x[seq: 1 .. T + 1]\n")
    assert codes(c) == ["E2021"]
    assert "for T = 0" in c.diagnostics[0].labels[0].text
    c = check(tmp_path, "fn f(x : ℝ[batch: B, seq: T]) =\n  x[seq: B .. T]\n")
    assert codes(c) == ["E2020"]
    assert "for B = 1, T = 0" in c.diagnostics[0].labels[0].text
