"""`presk run` and `presk dump --stage core`, through the command, against the specification
and against float64 recomputations of what the interpreter printed with --json."""

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import presk

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT.parent / "shared" / "spec" / "presk-tutorial-0.16.0.txt"
TINY = ["--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2"]


# ---- PSK-Core -------------------------------------------------------------------------------

LOSS = """\
fn loss{D B}(θ : params Linear{D, 1}, x : ℝ[batch: B, D], y : ℝ[batch: B, 1]) -> ℝ[] {
  ŷ : ℝ[batch: B, 1] = call Linear.apply{In = D, Out = 1}(θ, x)
  %4 : ℝ[batch: B, 1] = sub ŷ, y
  %5 : ℝ[batch: B, 1] = pow 2 %4
  %6 : ℝ[] = mean %5
  return %6
}
"""


def test_the_core_of_loss_is_the_specifications():
    out = presk("dump", "tutorial/04_grad.psk", "--stage", "core").stdout
    block = re.search(r"^fn loss\{.*?^}\n", out, re.M | re.S).group(0)
    assert block == LOSS


def test_the_signatures_before_differentiation_are_the_specifications():
    out = presk("dump", "tutorial/04_grad.psk", "--stage", "core").stdout
    heads = [line for line in out.splitlines() if line.startswith("fn ")]
    assert heads == [
        "fn Linear.apply{In Out}(θ : params Linear{In, Out}, x : ℝ[..., In]) -> ℝ[..., Out] {",
        "fn loss{D B}(θ : params Linear{D, 1}, x : ℝ[batch: B, D], y : ℝ[batch: B, 1]) -> ℝ[] {",
        "fn loss_grad{D B}(θ : params Linear{D, 1}, x : ℝ[batch: B, D], y : ℝ[batch: B, 1])"
        " -> params Linear{D, 1} {",
        "fn Linear.init{In Out}(key : key) -> params Linear{In, Out} uses Rand {",
        "fn loss_grad.lambda0{D B}(x : ℝ[batch: B, D], y : ℝ[batch: B, 1], θ : params"
        " Linear{D, 1}) -> ℝ[] {",
    ]


def test_the_pipeline_of_stage_programs_prints_the_core_dump():
    b = ROOT / ".venv" / "bin"
    piped = subprocess.run(
        f"{b}/presk-parse tutorial/06_tower.psk | {b}/presk-elab | {b}/presk-lower | {b}/presk-dump",
        shell=True, cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == presk("dump", "tutorial/06_tower.psk", "--stage", "core").stdout


def test_unroll_stack_calls_each_block():
    out = presk("dump", "tutorial/06_tower.psk", "--stage", "core", "--unroll-stack").stdout
    tower = re.search(r"^fn Tower\.apply.*?^}", out, re.M | re.S).group(0)
    assert tower.count("call Block.apply") == 3 and "fold" not in tower


# ---- runs -----------------------------------------------------------------------------------

FORM = re.compile(
    r"^ℝ\[batch: 4, 2\] = \[batch: 4, 2\] \[(\[-?[0-9.e-]+, -?[0-9.e-]+\](, )?){4}\]$"
)


def test_linear_prints_in_the_specifications_form():
    r = presk("run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4")
    assert r.returncode == 0, r.stderr
    assert FORM.match(r.stdout.strip()), r.stdout


def test_verbose_has_the_header_the_tree_and_the_inputs():
    r = presk(
        "run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4",
        "--verbose",
    )  # fmt: skip
    lines = r.stdout.splitlines()
    assert lines[0] == "-- entry Linear{3, 2}.apply with In = 3, Out = 2 at 256 bits, seed 0"
    assert lines[1] == "θ : params = {"
    assert lines[2].startswith("  w = [3, 2] [[") and lines[3] == "  b = [2] [0, 0]"
    assert lines[5].startswith("x : ℝ[batch: 4, 3] = [batch: 4, 3] [[")
    assert lines[6] == "-- result" and lines[7].startswith("ℝ[batch: 4, 2] = ")


def test_the_same_command_prints_the_same_bytes_and_another_seed_changes_them():
    args = ("run", "tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=2")
    first, again = presk(*args).stdout, presk(*args).stdout
    other = presk(*args, "--seed", "1").stdout
    assert first == again and first != other


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply"),
            "[E7001] Error: cannot synthesize `x`: cannot materialize a shape with an open prefix"
            " `...` (give its axes to `presk run` with extra `--dim` names)\n",
        ),
        (
            ("tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=1", "--dim", "T=2000"),
            "[E7001] Error: `dim` bound violated: `T <= 1024` is false for T = 2000\n",
        ),
    ],
)
def test_run_time_errors_are_the_specifications(args, message):
    r = presk("run", *args)
    assert (r.returncode, r.stderr, r.stdout) == (1, message, "")


def test_without_an_entry_the_functions_are_listed():
    r = presk("run", "tutorial/01_linear.psk")
    assert (r.returncode, r.stderr) == (
        2,
        "presk run: --entry is required; functions: Linear.apply\n",
    )


def test_a_file_with_a_training_run_points_to_presk_train():
    r = presk("run", "tests/examples/minigpt/train_minigpt.psk")
    assert r.returncode == 2
    assert r.stderr == (
        "presk run: this file has a `training run`: use `presk train` to execute it, or --entry"
        " to evaluate one function\n"
    )


def test_tiny_minigpt_logits_are_zero_and_its_loss_is_ln_64():
    dims = ["--dim", "B=2", "--dim", "T=8"]
    logits = presk(
        "run", "tests/examples/minigpt/minigpt.psk", "--entry", "MiniGPT.apply", *TINY, *dims
    )
    assert logits.stdout.startswith("ℝ[batch: 2, seq: 8, 64] = [batch: 2, seq: 8, 64] [[[0, 0, 0, ")
    assert set(re.findall(r"-?[0-9.]+(?:e-?[0-9]+)?", logits.stdout.split("] [", 1)[1])) == {"0"}
    loss = presk("run", "tests/examples/minigpt/train_minigpt.psk", "--entry", "loss", *TINY, *dims)
    assert loss.stdout == "ℝ[] = 4.15888308336\n"


def test_sample_draws_indices_in_range_and_changes_with_the_seed():
    a = presk("run", "tutorial/05_sample.psk", "--entry", "pick", "--dim", "B=5").stdout
    b = presk(
        "run", "tutorial/05_sample.psk", "--entry", "pick", "--dim", "B=5", "--seed", "3"
    ).stdout
    for out in (a, b):
        assert re.fullmatch(r"idx\[8\]\[batch: 5\] = \[batch: 5\] \[([0-7], ){4}[0-7]\]\n", out)
    assert a != b


# ---- against float64: the inputs and the result of --json ------------------------------------


def _json(*args: str) -> dict:
    r = presk("run", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _f(x) -> np.ndarray:
    return np.array(x, dtype=object).astype(float)


def test_linear_is_x_w_plus_b():
    doc = _json("tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "batch=4")
    w, b, x = _f(doc["inputs"]["θ"]["w"]), _f(doc["inputs"]["θ"]["b"]), _f(doc["inputs"]["x"])
    np.testing.assert_allclose(_f(doc["result"]), x @ w + b, rtol=1e-13)


def test_rmsnorm_is_its_formula():
    doc = _json("tutorial/02_norm.psk", "--entry", "RMSNorm{4}.apply", "--dim", "batch=2")
    g, x = _f(doc["inputs"]["θ"]["γ"]), _f(doc["inputs"]["x"])
    want = x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(_f(doc["result"]), want, rtol=1e-13)


def test_causal_attention_is_its_formula():
    doc = _json("tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=2", "--dim", "T=5")
    q, k, v = (_f(doc["inputs"][n]) for n in "qkv")
    s = np.einsum("bhsd,bhtd->bhst", q, k) / np.sqrt(4.0)
    s = np.where(np.tril(np.ones((5, 5), dtype=bool)), s, -np.inf)
    a = np.exp(s - s.max(axis=-1, keepdims=True))
    a /= a.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(_f(doc["result"]), np.einsum("bhst,bhtd->bhsd", a, v), rtol=1e-12)


def test_the_tower_is_three_blocks_and_a_norm():
    doc = _json("tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=3")
    tree, x = doc["inputs"]["θ"], _f(doc["inputs"]["x"])

    def norm(x, g):
        return x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + 1e-6) * g

    def gelu(x):
        from math import erf, sqrt

        return x * (1 + np.vectorize(erf)(x / sqrt(2))) / 2

    for i in range(3):
        g = _f(tree["blocks.norm.γ"])[i]
        w, b = _f(tree["blocks.proj.w"])[i], _f(tree["blocks.proj.b"])[i]
        x = x + gelu(norm(x, g)) @ w + b
    want = norm(x, _f(tree["final.γ"]))
    np.testing.assert_allclose(_f(doc["result"]), want, rtol=1e-12, atol=1e-14)


def test_every_primitive_has_an_evaluation_rule():
    from presk_core.interp import eval_rules
    from presk_types.rules import PRIMITIVES

    assert set(PRIMITIVES) - set(eval_rules) == set()


def test_bs_gradient_is_twice_the_mean_residual():
    doc = _json("tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2")
    tree, x, y = doc["inputs"]["θ"], _f(doc["inputs"]["x"]), _f(doc["inputs"]["y"])
    residual = x @ _f(tree["w"]) + _f(tree["b"]) - y
    np.testing.assert_allclose(_f(doc["result"]["b"]), [2 * residual.mean()], rtol=1e-13)
    np.testing.assert_allclose(
        _f(doc["result"]["w"]).ravel(), (2 * x * residual).mean(axis=0), rtol=1e-13
    )


def test_the_derivatives_signatures_are_the_specifications():
    out = presk("dump", "tutorial/04_grad.psk", "--stage", "core-after-ad").stdout
    heads = {line for line in out.splitlines() if line.startswith("fn ")}
    for line in [
        "fn loss.vjp{D B}(θ : params Linear{D, 1}, x : ℝ[batch: B, D], y : ℝ[batch: B, 1],"
        " ct : ℝ[]) -> (params Linear{D, 1}) {",
        "fn Linear.apply.vjp{In Out}(θ : params Linear{In, Out}, x : ℝ[..., In], ct :"
        " ℝ[..., Out]) -> (params Linear{In, Out}) {",
        "fn loss_grad.lambda0.grad{D B}(x : ℝ[batch: B, D], y : ℝ[batch: B, 1], θ : params"
        " Linear{D, 1}) -> params Linear{D, 1} {",
    ]:
        assert line in heads


@pytest.mark.parametrize(
    ("args", "head"),
    [
        (("tests/examples/mlp/mlp.psk", "--entry", "mse", "--dim", "D=3", "--dim", "B=2"), "ℝ[] = "),
        (
            ("tests/examples/bert/bert.psk", "--entry", "MaskedLM.apply", "--const", "V=32",
             "--const", "D=8", "--const", "H=2", "--const", "L=2", "--dim", "B=1", "--dim", "T=4"),
            "ℝ[batch: 1, seq: 4, 32] = [batch: 1, seq: 4, 32] [[[",
        ),
        (
            ("tests/examples/llama/llama.psk", "--entry", "block", "--const", "D=8", "--const",
             "H=2", "--const", "F=12", "--dim", "B=1", "--dim", "T=3"),
            "ℝ[batch: 1, seq: 3, 8] = [batch: 1, seq: 3, 8] [[[",
        ),
    ],
)  # fmt: skip
def test_the_reference_examples_run_at_tiny_constants(args, head):
    r = presk("run", *args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(head)


def test_the_pipeline_through_presk_ad_prints_the_derivatives():
    b = ROOT / ".venv" / "bin"
    piped = subprocess.run(
        f"{b}/presk-parse tutorial/04_grad.psk | {b}/presk-elab | {b}/presk-lower | {b}/presk-ad"
        f" | {b}/presk-dump",
        shell=True, cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == presk("dump", "tutorial/04_grad.psk", "--stage", "core-after-ad").stdout


@pytest.mark.parametrize(
    ("entry", "dim", "message"),
    [
        (
            "Linear{3, 2}.apply",
            "batch=1000000000000",
            "[E7011] Error: cannot synthesize `x`: a tensor of 1000000000000 × 3 = 3000000000000"
            " elements, more than presk draws at once (2^31 = 2147483648)\n",
        ),
        (
            "Linear{100000000, 100000000}.apply",
            "batch=1",
            "[E7011] Error: a tensor of 100000000 × 100000000 = 10000000000000000 elements, more"
            " than presk draws at once (2^31 = 2147483648)\n",
        ),
    ],
)
def test_a_huge_shape_to_draw_is_e7011_with_its_size(entry, dim, message):
    r = presk("run", "tutorial/01_linear.psk", "--entry", entry, "--dim", dim)
    assert (r.returncode, r.stderr, r.stdout) == (1, message, "")


def test_a_chain_of_modules_deeper_than_python_recursion_is_e7012(tmp_path):
    chain = ["module M0 {\n  param w : ℝ[2] init = ones\n  fn apply(x : ℝ[2]) -> ℝ[2] = x * w\n}\n"]
    for i in range(1, 400):
        chain.append(
            f"module M{i} {{\n  use a : M{i - 1}\n  fn apply(x : ℝ[2]) -> ℝ[2] = a.apply(x)\n}}\n"
        )
    (tmp_path / "deep.psk").write_text("".join(chain))
    r = presk("run", "deep.psk", "--entry", "M399.apply", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.startswith(
        "[E7012] Error: `M399.init` nests calls deeper than the interpreter can follow (about "
    ), r.stderr
    (tmp_path / "ok.psk").write_text("".join(chain[:50]))  # 50 levels run
    assert presk("run", "ok.psk", "--entry", "M49.apply", cwd=tmp_path).returncode == 0
