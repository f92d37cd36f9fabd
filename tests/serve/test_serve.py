"""`presk serve` on the tiny MiniGPT (minigpt.psk's `inference serve` at V=64, D=16, H=2,
L=2) from a checkpoint `presk train` writes in 2 steps (conftest.py): greedy tokens
equal on every backend, seeded sampling equal on every backend and different across
seeds, the sliding context, the diagnostics, and the exported serve.py's greedy tokens."""

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import presk, python_run

ROOT = Path(__file__).resolve().parents[2]
MINIGPT = "tests/examples/minigpt/minigpt.psk"
TINY = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")
RATE = re.compile(r"^presk serve: (\d+) tokens in [0-9.]+ s, [0-9.]+ tokens/s \(.*\)$")


def serve(ckpt, *args, ok=True) -> subprocess.CompletedProcess:
    r = presk("serve", MINIGPT, *TINY, "--weights", ckpt, *args)
    if ok:
        assert r.returncode == 0, r.stderr
        assert RATE.match(r.stderr.splitlines()[-1]), r.stderr
    return r


def test_greedy_tokens_are_the_same_on_every_backend(ckpt):
    outs = {
        b: serve(ckpt, "--prompt", "abc", "--tokens", 4, "--backend", b).stdout
        for b in ("interp", "kernel", "native")
    }
    assert outs["interp"].startswith("abc") and len(outs["interp"]) == 3 + 4 + 1
    assert outs["kernel"] == outs["interp"] and outs["native"] == outs["interp"]


def test_a_seed_fixes_the_sampled_text_on_every_backend(ckpt):
    args = ("--prompt", "abc", "--tokens", 8, "--temperature", 1)
    interp = serve(ckpt, *args, "--seed", 3).stdout
    native = serve(ckpt, *args, "--seed", 3, "--backend", "native").stdout
    other = serve(ckpt, *args, "--seed", 4, "--backend", "native").stdout
    assert native == interp
    assert other != native  # 8 draws from ~64 near-equal tokens: another seed, other tokens
    assert "temperature 1, seed 3" in serve(ckpt, *args, "--seed", 3).stderr


def test_the_context_slides_over_the_last_t_tokens(ckpt):
    long = "ABCDEFGHIJKLmnop"  # 16 characters, the model's T is 8
    full = serve(ckpt, "--prompt", long, "--tokens", 5, "--backend", "native").stdout
    last = serve(ckpt, "--prompt", long[-8:], "--tokens", 5, "--backend", "native").stdout
    assert full[len(long) :] == last[8:]
    assert "window 8" in serve(ckpt, "--prompt", "a", "--tokens", 1).stderr


@pytest.fixture(scope="module")
def tiny(ckpt):
    """The tiny MiniGPT's core program and weights, in this process."""
    from presk_cli.pipeline import PIPELINE, RUN
    from presk_cli.serve import load_weights
    from presk_syntax.pipeline import Context

    ctx = Context(consts=dict(c.split("=") for c in TINY[1::2]), check=True)
    core = PIPELINE.run(RUN, MINIGPT, ctx)
    return core, load_weights(core, "MiniGPT", str(ckpt), {})[0]


def functions(tiny, options, prompt: int = 0, tokens: int | None = None):
    from presk_cli.serve import cached_function, logits_function

    core, theta = tiny
    dims = {"B": 1, "T": 8}
    whole = logits_function(core, "MiniGPT.apply", theta, 8, dims, options, 256)
    cached = cached_function(core, "MiniGPT.apply", theta, 8, dims, options, 256, prompt, tokens)
    return whole, cached


@pytest.mark.parametrize(
    "backend, prompt, tokens",
    [
        ("native", [1, 2, 3, 4, 5], 6),
        ("interp", [9] * 7, 3),
        ("native", [1, 2, 3], 7),
        ("interp", [1, 2], 4),
        ("kernel", [1, 2], 4),
    ],
)
def test_the_cache_gives_the_whole_windows_tokens(tiny, backend, prompt, tokens):
    """Greedy and sampled, the prompt filling the cache (over its first 4 positions for a
    prompt of 3, two for a prompt of 2), steps (at a window of 4 for positions 2
    and 3) to the window's end, then the window sliding: the tokens of the whole-window
    loop (docs/serve.md)."""
    from presk_cli.serve import generate

    whole, cached = functions(tiny, (backend, "f64", 1), len(prompt), tokens)
    assert cached.short == {2: 2, 3: 4}.get(len(prompt), 0)
    assert cached.windows == ((4,) if len(prompt) < 4 else ())
    assert (cached.whole is None) == (len(prompt) + tokens - 1 <= 8)  # no slide: no whole fill
    for heat in (0.0, 1.0):
        want = generate(whole, prompt, 8, tokens, heat, 5, lambda t: None)
        assert generate(whole, prompt, 8, tokens, heat, 5, lambda t: None, cached) == want


def test_the_step_is_the_windows_row_bit_for_bit(tiny):
    """The fill's logits are the whole window's, the prompt's fill over its first two
    positions gives their rows, and each step's row t is the whole window's row t, to the
    bit (presk_core.prefix), natively in f32: at positions 2 and 3 the step over the
    cache's first 4 rows, then the whole window's (8 tokens after 2: the text slides, so
    the whole window's fill is compiled too)."""
    whole, cached = functions(tiny, ("native", "f32", 1), 2, 8)
    assert cached.windows == (4,) and cached.whole is not None
    ids = np.zeros(8, dtype=np.int64)
    ids[:2] = [7, 30]
    assert np.array_equal(cached.fill(ids), whole(ids))
    assert cached.short == 2 and np.array_equal(cached.fill(ids, 2), whole(ids)[:2])
    for t, token in zip(range(2, 8), [4, 63, 0, 12, 12, 50], strict=True):
        ids[t] = token
        assert np.array_equal(cached.step(token, t), whole(ids)[t]), t


def test_without_a_count_of_tokens_the_cache_has_the_whole_windows_fill_and_step(tiny):
    """`cached_function` told no count of tokens keeps the whole window's fill and its step
    (any position), beside the prompt's fill; told one, a step it was not told of is an
    error, not a wrong row."""
    whole, cached = functions(tiny, ("interp", "f64", 1), 2)
    assert (cached.short, cached.windows) == (2, ()) and cached.whole is not None
    ids = np.zeros(8, dtype=np.int64)
    ids[:3] = [7, 30, 4]
    cached.fill(ids)
    assert np.array_equal(cached.step(4, 2), whole(ids)[2])
    _, told = functions(tiny, ("interp", "f64", 1), 2, 2)  # one step: position 2
    told.fill(ids, 2)
    with pytest.raises(ValueError, match="no step for position 4"):
        told.step(0, 4)


def test_the_prefix_analysis_caches_each_blocks_keys_and_values(tiny):
    """presk_core.prefix on the tiny MiniGPT at T = 4: the keys and values of its 2 blocks
    cached ([batch, heads, seq, hd], rows on seq), the position table read by row."""
    from presk_core.flatten import flatten
    from presk_core.prefix import incremental
    from presk_core.specialize import specialize
    from presk_core.unroll import unroll_stack

    core, _ = tiny
    flat = flatten(unroll_stack(specialize(core, "MiniGPT.apply", {"B": 1, "T": 4})))
    head = flat.functions[0]
    inc = incremental(flat, head.name, len(head.params) - 1, 1)
    assert inc.caches == (((1, 2, 4, 8), 2),) * 4
    kinds = [k for k, *_ in inc.inputs]
    assert kinds.count("cache") == 4 and kinds.count("ids") == 1 and "mask" in kinds
    rows = [
        head.params[i].name
        for k, i, axis in (x for x in inc.inputs if x[0] == "leaf")
        if axis is not None
    ]
    assert rows == ["θ.pos"]
    step = inc.program.function(inc.step)
    assert str(step.result.elements[0]) == "ℝ[batch: 1, seq: 1, 64]"


CAUSAL = """
const V : nat = 4
dim B
dim T <= 16
module M {{
  param w : ℝ[V, V]
  param pos : ℝ[seq: T, V]
  fn apply(ids : idx[V][batch: B, seq: T]) -> ℝ[batch: B, seq: T, V] =
    {body}
}}
inference serve {{
  model = M
  weights = "w.psk.d"
  generate = M.apply
  vocabulary = "v.json"
}}
"""


def test_a_function_without_the_prefix_property_keeps_the_whole_window(tmp_path):
    """A softmax over the positions: row i reads every token. presk serve says why it has
    no cache, and generates from the whole window (the loop of --no-cache)."""
    from presk_core.data import write_tree

    body = "softmax(axis seq, embed(w, ids) + pos)"
    (tmp_path / "s.psk").write_text(CAUSAL.format(body=body), encoding="utf-8")
    (tmp_path / "v.json").write_text('["a", "b", "c", "d"]', encoding="utf-8")
    rng = np.random.default_rng(1)
    leaves = [rng.normal(size=(4, 4)), rng.normal(size=(5, 4))]
    write_tree(str(tmp_path / "w.psk.d"), "params M", leaves)
    r = presk("serve", tmp_path / "s.psk", "--prompt", "ab", "--tokens", 4)
    assert r.returncode == 0 and r.stdout.startswith("ab") and len(r.stdout) == 2 + 4 + 1
    assert "window 5, no cache;" in r.stderr
    assert "no cache: `" in r.stderr and "`softmax` over the positions" in r.stderr


def test_sampling_draws_as_presk_core_random_sample():
    """The host's loop: the i-th token drawn by `sample` with the key of token i."""
    from presk_cli.serve import generate, token_keys
    from presk_core import random as R

    rng = np.random.default_rng(0)
    table = rng.normal(size=(5, 8, 6))
    calls = iter(range(5))
    logits = lambda ids: table[next(calls)]  # noqa: E731
    made = generate(logits, [1, 2], 8, 5, 0.5, 11, lambda t: None)
    key = token_keys(11)
    want = [int(R.sample(key(i), table[i][1 + i] / 0.5)) for i in range(5)]
    assert made == want
    assert key(0) == R.fold_in(R.fold_in_name(R.root_key(11), "serve"), 0)
    calls = iter(range(5))
    greedy = generate(logits, [1, 2], 8, 5, 0.0, 11, lambda t: None)
    assert greedy == [int(np.argmax(table[i][1 + i])) for i in range(5)]


# ---- diagnostics ---------------------------------------------------------------------------


def test_a_file_without_inference_serve():
    r = presk("serve", "tutorial/07_train.psk", "--prompt", "a")
    assert r.returncode == 1 and "[E7020]" in r.stderr and "no `inference serve`" in r.stderr


def test_a_character_outside_the_vocabulary_is_named_with_its_position(ckpt):
    r = serve(ckpt, "--prompt", "abcé", ok=False)
    assert r.returncode == 1 and r.stdout == ""
    assert "[E7009]" in r.stderr and "column 4: `é` (U+00E9)" in r.stderr


def test_weights_of_another_type(ckpt):
    r = serve("tests/examples/minigpt/data/tiny_T8.psk.d", "--prompt", "a", ok=False)
    assert r.returncode == 1 and "[E7021]" in r.stderr and "not one `params MiniGPT`" in r.stderr


def test_weights_of_another_size(ckpt, tmp_path):
    from presk_core.data import read_reals, write_tree

    cut = tmp_path / "cut.psk.d"
    write_tree(str(cut), "params MiniGPT", [read_reals(str(ckpt))[:-3]])
    r = serve(cut, "--prompt", "a", ok=False)
    assert r.returncode == 1 and "[E7021]" in r.stderr and "which no T makes" in r.stderr


def test_a_missing_weights_file(tmp_path):
    r = serve(tmp_path / "none.psk.d", "--prompt", "a", ok=False)
    assert r.returncode == 1 and "[E7004]" in r.stderr and "no such file" in r.stderr


def test_a_vocabulary_that_is_not_the_models(ckpt):
    r = presk("serve", MINIGPT, "--weights", ckpt, "--prompt", "a")  # V = 50257
    assert r.returncode == 1 and "[E7009]" in r.stderr and "idx[50257]" in r.stderr


def test_zero_tokens_and_an_empty_prompt_are_usage_errors(ckpt):
    for args in (("--prompt", "a", "--tokens", 0), ("--prompt", ""), ("--temperature", -1)):
        r = serve(ckpt, *args, ok=False)
        assert r.returncode == 2 and "Invalid value" in r.stderr, args


BLOCK = """
module M {{
  param w : ℝ[V, V]
  fn apply(ids : idx[V][batch: B, seq: T]) -> ℝ[batch: B, seq: T, V] = embed(w, ids)
  fn bad(x : ℝ[batch: B, seq: T, V]) -> ℝ[batch: B, seq: T, V] = x
}}
const V : nat = 4
dim B
dim T
inference serve {{
{fields}
}}
"""
GOOD = 'model = M\n  weights = "w.psk.d"\n  generate = M.apply\n  vocabulary = "v.json"'


@pytest.mark.parametrize(
    "fields, message",
    [
        (GOOD + "\n  speed = 3", "unknown field `speed` in an inference serve"),
        ('model = M\n  weights = "w.psk.d"\n  vocabulary = "v.json"', "needs `generate`"),
        (GOOD.replace("M.apply", "M.bad"), "`M.bad` cannot generate"),
        (GOOD.replace("model = M", "model = N"), "`model` must name a module"),
        (GOOD.replace('"w.psk.d"', "3"), "`weights` is a file"),
        (GOOD + "\n  max_tokens : nat = 0", "`max_tokens` is a natural number from 1"),
    ],
)
def test_the_block_is_checked_against_its_schema(tmp_path, fields, message):
    src = tmp_path / "s.psk"
    src.write_text(BLOCK.format(fields="  " + fields), encoding="utf-8")
    r = presk("check", src)
    assert r.returncode == 1 and "[E1012]" in r.stderr and message in r.stderr, r.stderr


def test_a_good_block_checks(tmp_path):
    src = tmp_path / "s.psk"
    src.write_text(BLOCK.format(fields="  " + GOOD), encoding="utf-8")
    r = presk("check", src)
    assert r.returncode == 0 and r.stderr == ""


# ---- the export ----------------------------------------------------------------------------


def test_serve_py_gives_presk_serves_greedy_tokens(ckpt, tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "export"
    r = presk("export", MINIGPT, "--target", "pytorch", *TINY, "--serve", "-o", out)
    assert r.returncode == 0, r.stderr
    # the prompt fills serve.py's cache of keys and values in one call (the derived fill
    # in PyTorch), each token a step (the derived step) to the window's end, then the
    # window slides: the whole window
    assert "\ndef serve_fill(" in (out / "serve.py").read_text(encoding="utf-8")
    args = ("--prompt", "abc", "--tokens", 7)
    mine = serve(ckpt, *args, "--backend", "native").stdout
    py = python_run("serve.py", *args, "--weights", ckpt, "--threads", "1", cwd=out, timeout=120)
    assert py.returncode == 0, py.stderr
    assert py.stdout == mine
    assert re.search(r"serve.py: 7 tokens in .* tokens/s .*window 8, cache\)", py.stderr)


def test_the_prompts_fill_runs_over_a_power_of_two_of_positions():
    """The prompt's fill (docs/serve.md, item 2): its length rounded up to a power of two,
    at least 2 and the window dimension's lower bound, at most the window (then the whole
    window's fill is the prompt's)."""
    from presk_cli.serve_cache import prefill_window

    lengths = (1, 2, 3, 5, 11, 16, 17, 200, 300)
    assert [prefill_window(n, 256) for n in lengths] == [2, 2, 4, 8, 16, 16, 32, 256, 256]
    assert prefill_window(3, 8, lowest=6) == 6
