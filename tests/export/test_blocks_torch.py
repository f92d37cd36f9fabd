"""The exported blocks against PyTorch's own (issue 6): an oracle that no one here wrote.

Each block is exported (`--shapes=check`), imported, and run in float64 on random inputs;
the interpreter runs its source at 256 bits on the same inputs. Both must agree with
PyTorch's function to a norm-wise (max-norm) relative 1e-12:

- tutorial/02_norm.psk's RMSNorm against `F.rms_norm` with its weight and eps;
- `gelu` (programs/blocks.psk's act, and 06_tower's Block, which applies it between an
  RMSNorm and a Linear) against `F.gelu`'s default, erf form;
- a softmax over a named axis that is not the last (programs/blocks.psk's probs) against
  `torch.softmax`;
- causal attention, tutorial/03_attention.psk's attend and MiniGPT's SelfAttention at tiny
  constants, against `F.scaled_dot_product_attention(is_causal=True)` at the same scale.

So that a wrong formula cannot pass, each case also lists near misses (tanh's gelu, eps
outside the square root, the mask left out, another axis, …): each must be rejected, by
far, on the same inputs. `pytest -s` prints the gaps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOL = 1e-12  # max-norm relative: float64 against float64, or against the exact reals
MISS = 1e3 * TOL  # a near miss must be rejected by far: a thousand times the tolerance
# MiniGPT at constants the interpreter affords (the Makefile's run-examples)
TINY_GPT = (("V", "64"), ("D", "16"), ("H", "2"), ("L", "2"))


def gap(got, want) -> float:
    """‖got − want‖∞ / ‖want‖∞."""
    got, want = torch.as_tensor(got), torch.as_tensor(want)
    assert got.shape == want.shape, f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    return ((got - want).abs().max() / want.abs().max()).item()


def tensors(tree: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(v) for k, v in tree.items()}


@dataclass
class Case:
    """The exported block, the interpreter's result and PyTorch's, on the same inputs."""

    name: str
    got: torch.Tensor  # the export, in float64
    ref: np.ndarray  # the interpreter at 256 bits, rounded to float64
    want: torch.Tensor  # PyTorch's own function
    misses: dict[str, Callable[[], torch.Tensor]] = field(default_factory=dict)

    def check(self) -> None:
        export, interp = gap(self.got, self.want), gap(self.ref, self.want)
        print(f"\n{self.name}: export {export:.2e}, interpreter {interp:.2e}", end="")
        assert export <= TOL, f"{self.name}: the export is {export:.3e} from PyTorch's"
        assert interp <= TOL, f"{self.name}: the interpreter is {interp:.3e} from PyTorch's"
        for label, wrong in self.misses.items():
            far = gap(wrong(), self.want)
            print(f"; {label} {far:.1e}", end="")
            assert far > MISS, f"{self.name}: the near miss `{label}` passes ({far:.3e})"


# ---- RMSNorm -----------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [None, 0.25], ids=["eps=default", "eps=0.25"])
def test_rmsnorm_is_torch_rms_norm(exported, reference, eps):
    rng = np.random.default_rng(1)
    x, γ = rng.standard_normal((3, 5, 8)), rng.standard_normal(8)
    extra = [] if eps is None else [eps]  # the export's default, or eps given
    model = exported("tutorial/02_norm.psk")["_02_norm"].RMSNorm(8)
    model.load_state_dict({"γ": torch.from_numpy(γ)})
    xt, γt = torch.from_numpy(x), torch.from_numpy(γ)
    e = 1e-6 if eps is None else eps  # 02_norm.psk's default
    ref = reference.run(
        "tutorial/02_norm.psk", "RMSNorm{8}.apply", {"batch": 3, "seq": 5}, [{"γ": γ}, x, e]
    )
    ms = (xt**2).mean(-1, keepdim=True)
    Case(
        f"RMSNorm ({'default eps' if eps is None else f'eps {eps}'})",
        got=model(xt, *extra),
        ref=ref,
        want=F.rms_norm(xt, (8,), weight=γt, eps=e),
        misses={
            "eps outside the root": lambda: xt / (ms.sqrt() + e) * γt,
            "no weight": lambda: F.rms_norm(xt, (8,), eps=e),
            "layer norm": lambda: F.layer_norm(xt, (8,), weight=γt, eps=e),
        },
    ).check()


# ---- gelu --------------------------------------------------------------------------------


def test_gelu_is_torch_gelu(exported, reference):
    """On [−9, 9] and normal draws: the erf form, whose tail tanh's does not follow."""
    rng = np.random.default_rng(2)
    x = np.concatenate([np.linspace(-9, 9, 48), 2 * rng.standard_normal(48)]).reshape(2, 6, 8)
    act = exported("blocks.psk")["blocks"].act
    xt = torch.from_numpy(x)
    Case(
        "gelu",
        got=act(xt),
        ref=reference.run("blocks.psk", "act", {"D": 8, "batch": 2, "seq": 6}, [x]),
        want=F.gelu(xt),
        misses={
            "tanh form": lambda: F.gelu(xt, approximate="tanh"),
            "x·σ(1.702x)": lambda: xt * torch.sigmoid(1.702 * xt),
            "silu": lambda: F.silu(xt),
        },
    ).check()


def test_tower_block_is_torch_rms_norm_gelu_linear(exported, reference):
    """06_tower's Block: x + proj(gelu(norm(x))), with torch's rms_norm, gelu and linear."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5, 4))
    θ = {
        "norm.γ": rng.standard_normal(4),
        "proj.w": rng.standard_normal((4, 4)),
        "proj.b": rng.standard_normal(4),
    }
    model = exported("tutorial/06_tower.psk")["_06_tower"].Block()
    model.load_state_dict(tensors(θ))
    p, xt = tensors(θ), torch.from_numpy(x)

    def block(act=F.gelu, eps=1e-6):
        h = F.rms_norm(xt, (4,), weight=p["norm.γ"], eps=eps)
        return xt + F.linear(act(h), p["proj.w"].T, p["proj.b"])

    Case(
        "06_tower Block",
        got=model(xt),
        ref=reference.run("tutorial/06_tower.psk", "Block.apply", {"batch": 3, "seq": 5}, [θ, x]),
        want=block(),
        misses={
            "tanh gelu": lambda: block(act=lambda h: F.gelu(h, approximate="tanh")),
            "no residual": lambda: block() - xt,
            "relu": lambda: block(act=F.relu),
        },
    ).check()


# ---- softmax -----------------------------------------------------------------------------


def test_softmax_over_a_named_axis_is_torch_softmax(exported, reference):
    """probs(x : ℝ[..., vocab: V, pos: P]) = softmax(axis vocab, x): dim 1 of (2, 6, 5)."""
    rng = np.random.default_rng(4)
    x = 4 * rng.standard_normal((2, 6, 5))
    probs = exported("blocks.psk")["blocks"].probs
    xt = torch.from_numpy(x)
    Case(
        "softmax(axis vocab)",
        got=probs(xt),
        ref=reference.run("blocks.psk", "probs", {"V": 6, "P": 5, "batch": 2}, [x]),
        want=torch.softmax(xt, dim=1),
        misses={
            "the last axis": lambda: torch.softmax(xt, dim=2),
            "the first axis": lambda: torch.softmax(xt, dim=0),
        },
    ).check()


# ---- causal attention --------------------------------------------------------------------


def test_causal_attention_is_torch_sdpa(exported, reference):
    """tutorial/03_attention.psk's attend: H = 2 heads of HD = 4, scale 1/√HD."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 2, 6, 4)) for _ in range(3))
    attend = exported("tutorial/03_attention.psk")["_03_attention"].attend
    qt, kt, vt = (torch.from_numpy(a) for a in (q, k, v))
    scale = 1 / math.sqrt(4)  # 1/√HD, HD = 4

    def sdpa(causal=True, scale=scale):
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)

    Case(
        "03_attention attend",
        got=attend(qt, kt, vt),
        ref=reference.run("tutorial/03_attention.psk", "attend", {"B": 2, "T": 6}, [q, k, v]),
        want=sdpa(),
        misses={
            "not causal": lambda: sdpa(causal=False),
            "scale 1/HD": lambda: sdpa(scale=1 / 4),
            "the mask transposed": lambda: F.scaled_dot_product_attention(
                qt, kt, vt, attn_mask=torch.ones(6, 6, dtype=torch.bool).triu(), scale=scale
            ),
        },
    ).check()


def test_minigpt_self_attention_is_torch_sdpa(exported, reference):
    """MiniGPT's SelfAttention at V = 64, D = 16, H = 2 (so HD = 8), L = 2: the projections
    as `F.linear`, the heads as GPT-2's `view(B, T, H, HD).transpose(1, 2)`, then sdpa."""
    B, T, D, H, HD = 2, 8, 16, 2, 8
    rng = np.random.default_rng(6)
    x = rng.standard_normal((B, T, D))
    θ = {}
    for proj in ("wq", "wk", "wv", "wo"):
        θ[f"{proj}.w"] = 0.3 * rng.standard_normal((D, D))
        θ[f"{proj}.b"] = 0.1 * rng.standard_normal(D)
    module = exported("tests/examples/minigpt/minigpt.psk", TINY_GPT)["minigpt"]
    model = module.SelfAttention()
    model.load_state_dict(tensors(θ))
    p, xt = tensors(θ), torch.from_numpy(x)

    def linear(proj, h):
        return F.linear(h, p[f"{proj}.w"].T, p[f"{proj}.b"])

    scale = 1 / math.sqrt(HD)

    def attention(causal=True, scale=scale, heads=(H, HD)):
        q, k, v = (linear(w, xt).view(B, T, *heads).transpose(1, 2) for w in ("wq", "wk", "wv"))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        return linear("wo", o.transpose(1, 2).reshape(B, T, D))

    ref = reference.run(
        "tests/examples/minigpt/minigpt.psk",
        "SelfAttention.apply",
        {"B": B, "T": T},
        [θ, x],
        TINY_GPT,
    )
    Case(
        "MiniGPT SelfAttention",
        got=model(xt),
        ref=ref,
        want=attention(),
        misses={
            "not causal": lambda: attention(causal=False),
            "scale 1/√D": lambda: attention(scale=1 / math.sqrt(D)),
            "heads cut hd-major": lambda: attention(heads=(HD, H)),
        },
    ).check()
