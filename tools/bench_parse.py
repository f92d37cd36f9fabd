"""Time the parser on a generated program of 10,000 lines: the tree alone, then the AST.

    .venv/bin/python tools/bench_parse.py [--lines N] [--repeat R]

The program repeats the tutorial's constructs (modules with params, uses and stacks; fns with
type parameters, lets, ein, λ and grad; constants, dims, types; optimizer and training
blocks) under fresh names until it has N lines. `parse_tree` gives the tree-sitter tree,
`parse_source` the tree and the AST; each time is the best of R runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from presk_syntax.parse import parse_source, parse_tree
from presk_syntax.span import Source

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import best_of  # noqa: E402

# One unit of the program, formatted with a fresh index `i`; its lines cover the grammar.
UNIT = """\
-- unit {i}: a layer, a norm, a tower and their losses
const D{i} : nat = {d}
const H{i} : nat = 2
static assert D{i} % H{i} == 0
dim B{i}
dim T{i} <= 1024
type Q{i} = ℝ[batch: B{i}, heads: H{i}, seq: T{i}, hd: D{i} / H{i}]

module Linear{i}{{In Out : dim}} {{
  param w : ℝ[In, Out]  init = xavier_uniform
  param b : ℝ[Out]      init = zeros

  fn apply(x : ℝ[..., In]) -> ℝ[..., Out] =
    x · w + b
}}

module Norm{i}{{D : dim}} {{
  param γ : ℝ[D]  init = normal(std = 0.02)

  fn apply(x : ℝ[..., model: D], eps : f64 = 1e-6) -> ℝ[..., model: D] =
    let ms = mean(axis model, x^2)        -- the `model` axis is reduced
    x / sqrt(ms + real(eps)) * γ
}}

module Block{i} {{
  use norm : Norm{i}{{D{i}}}
  use proj : Linear{i}{{D{i}, D{i}}}
  use deep : stack{{3}}(Linear{i}{{D{i}, D{i}}})

  fn apply(x : ℝ[..., model: D{i}]) -> ℝ[..., model: D{i}] =
    x + proj.apply(gelu(norm.apply(x)))
}}

fn scores{i}(q : Q{i}, k : Q{i}) -> ℝ[batch: B{i}, heads: H{i}, seq: T{i}, seq2: T{i}] =
  ein[batch, heads, seq, seq2](q * k) / sqrt((D{i} : ℝ))

fn attend{i}(q : Q{i}, k : Q{i}, v : Q{i}) -> Q{i} =
  let s = scores{i}(q, k)
  let a = softmax(axis seq2, s, where = causal_mask(seq: T{i}))
  ein[batch, heads, seq, hd](a * v)

fn loss{i}{{D B : dim}}(net : Linear{i}{{D, 1}}, θ : params net,
                   x : ℝ[batch: B, D], y : ℝ[batch: B, 1]) -> ℝ[] =
  let ŷ = net.apply(θ, x)
  let (e, f) = (ŷ - y, -y^2)
  mean((e + f)^2)

fn loss_grad{i}{{D B : dim}}(net : Linear{i}{{D, 1}}, θ : params net,
                        x : ℝ[batch: B, D], y : ℝ[batch: B, 1]) -> params net =
  grad(λ θ. loss{i}(net, θ, x, y))(θ)

fn pick{i}(key : key, logits : ℝ[batch: B{i}, vocab: 8]) -> idx[8][batch: B{i}] uses Rand =
  sample(key, logits)

"""

TAIL = """\
optimizer adamw {
  lr           : f64 = 0.01
  weight_decay : f64 = 0.0
  schedule     : cosine(warmup = 20)
}

training run {
  model     = Block0
  objective = loss0
  optimizer = adamw
  data      = stream "data/pairs.psk.d" |> shuffle(seed = 3) |> batch(B = 8)
  epochs    : nat = 10
  checkpoint every 50 steps to "ckpt/"
}
"""


def program(lines: int) -> str:
    """A program of exactly `lines` lines (units, the blocks, then comment lines to fill)."""
    tail = TAIL.count("\n")
    units, i = [], 0
    while True:
        unit = UNIT.format(i=i, d=4 * (i % 8 + 1))
        if sum(u.count("\n") for u in units) + unit.count("\n") + tail > lines:
            break
        units.append(unit)
        i += 1
    text = "".join(units) + TAIL
    return text + "".join(f"-- filler {n}\n" for n in range(lines - text.count("\n")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    text = program(args.lines)
    data = text.encode("utf-8")
    source = Source("bench.psk", text)
    if parse_tree(data).root_node.has_error:
        raise SystemExit("bench_parse: the generated program has a syntax error")
    tree = best_of(args.repeat, lambda: parse_tree(data))
    full = best_of(args.repeat, lambda: parse_source(source))
    lines = text.count("\n")
    print(f"parse {lines} lines ({len(data)} bytes): tree {tree:.2f} s, AST {full:.2f} s")


if __name__ == "__main__":
    main()
