"""Gradients against `torch.func.grad` of the exported loss (issue 5), in float64 on the same
inputs: an external oracle that no one here wrote.

For each loss, the reference is the interpreter at 256 bits running the loss's gradient,
`grad(λ θ. loss(…))(θ)` (the example's own `*_grad`, or a wrapper in programs/), which
presk-ad differentiates. The oracle is `torch.func.grad` of the loss as `presk export`
writes it, in float64: a function of the dict θ where a module argument carries the
architecture (04_grad's loss, mlp's mse), or, where θ is the model itself (07_train's and
train_minigpt's loss), of its parameters through `torch.func.functional_call`.

The inputs are those `presk run` synthesizes (seed 0), every leaf of θ then moved off its
initialization by 0.1·N(0, 1) in float64 (MiniGPT's head starts at 0, which would make every
other gradient 0; so does the bias of a linear layer's). Every leaf, each block of a stack
apart (`blocks.norm.γ` row i is `blocks.i.norm.γ`), must agree to a norm-wise relative
1e-9, and none may be zero but the one that is 0 in exact arithmetic: MiniGPT's key bias
(softmax along seq2 ignores q·b_k, the same for every key), whose reference is the
interpreter's rounding at 256 bits (~1e-79) and whose torch gradient, float64 noise, is
compared with the norm of the whole gradient. `pytest -s` prints the worst gap of each loss.

A float64 oracle catches a wrong rule, not a rule that loses precision: an adjoint computed
at 53 bits passes here, and is caught by presk-ad's finite differences at 512 bits.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

TOL = 1e-9  # ‖g_torch − g_ref‖₂ / ‖g_ref‖₂ for each leaf
ZERO = 1e-60  # below this fraction of the whole gradient's norm, a leaf's gradient is 0
TINY_GPT = (("V", "64"), ("D", "16"), ("H", "2"), ("L", "2"))


def off_init(θ: dict[str, np.ndarray], seed: int = 1) -> dict[str, np.ndarray]:
    """θ + 0.1·N(0, 1), leaf by leaf, in float64: doubles both sides read exactly."""
    rng = np.random.default_rng(seed)
    return {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in θ.items()}


def state_of(module: nn.Module, tree: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """A Presk parameter tree (paths `blocks.norm.γ`, a stack's leaves stacked on a leading
    axis) as the module's parameters (`blocks.0.norm.γ`): the conformance test's mapping."""
    state: dict[str, torch.Tensor] = {}
    for path, leaf in tree.items():
        _place(module, path.split("."), torch.as_tensor(leaf), "", state)
    return state


def _place(module, parts, value, prefix, state):
    head, *rest = parts
    if not rest:
        state[prefix + head] = value
        return
    child = getattr(module, head)
    if isinstance(child, nn.ModuleList):
        for i, block in enumerate(child):
            _place(block, rest, value[i], f"{prefix}{head}.{i}.", state)
    else:
        _place(child, rest, value, f"{prefix}{head}.", state)


def as_torch(value):
    if isinstance(value, tuple):
        return tuple(as_torch(v) for v in value)
    return torch.from_numpy(np.ascontiguousarray(value))


class Bound(nn.Module):
    """`fn(model, *args)` as a module whose parameters are the model's (`model.…`), so that
    `functional_call` can run an exported loss that takes the model as θ."""

    def __init__(self, fn, model: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        self.model = model

    def forward(self, *args):
        return self.fn(self.model, *args)


def compare(
    name: str, model: nn.Module, got: dict, ref: dict[str, np.ndarray], zero: tuple = ()
) -> None:
    """Leaf by leaf; a leaf of `zero` (a Presk path) has the gradient 0 exactly: the
    interpreter's is its rounding at 256 bits, and torch's is compared with the norm of
    the whole gradient."""
    want = state_of(model, ref)
    zeros = set(state_of(model, {k: v for k, v in ref.items() if k in zero}))
    assert sorted(got) == sorted(want), f"{name}: leaves {sorted(got)} != {sorted(want)}"
    assert sorted(want) == sorted(n for n, _ in model.named_parameters())
    whole = np.sqrt(sum(float(np.sum(v**2)) for v in ref.values()))
    gaps = {}
    for leaf, w in want.items():
        norm = torch.linalg.vector_norm(w).item()
        g = got[leaf]
        assert g.shape == w.shape, f"{name}: `{leaf}` of shape {tuple(g.shape)} != {w.shape}"
        if leaf in zeros:
            assert norm <= ZERO * whole, f"{name}: the gradient of `{leaf}` is not 0 ({norm:.3e})"
            gaps[leaf] = torch.linalg.vector_norm(g).item() / whole
            continue
        assert norm > ZERO * whole, f"{name}: the gradient of `{leaf}` is 0: it tests nothing"
        gaps[leaf] = torch.linalg.vector_norm(g - w).item() / norm
    worst = max(gaps, key=gaps.get)
    print(f"\n{name}: {len(gaps)} leaves, worst {worst} {gaps[worst]:.2e}", end="")
    bad = sorted((k for k, v in gaps.items() if not v <= TOL), key=gaps.get, reverse=True)
    shown = ", ".join(f"{k} {gaps[k]:.3e}" for k in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    assert not bad, f"{name}: torch.func.grad disagrees with the interpreter on {shown}{more}"


# ---- θ a dict, the architecture a module argument ------------------------------------------


@pytest.mark.parametrize(
    ("program", "file", "loss", "grad", "net"),
    [
        # mean((x·w + b − y)²) of Linear{3, 1}
        ("tutorial/04_grad.psk", "_04_grad", "loss", "loss_grad", lambda m: m["_01_linear"].Linear(3, 1)),
        # mean((MLP(x) − y)²) of MLP{3, 12}: relu between two linear layers
        ("tests/examples/mlp/mlp.psk", "mlp", "mse", "mse_grad", lambda m: m["mlp"].MLP(3, 12)),
    ],
    ids=["04_grad loss", "mlp mse"],
)  # fmt: skip
def test_gradient_of_a_loss_of_a_module_argument(
    exported, reference, program, file, loss, grad, net
):
    dims = {"D": 3, "B": 4}
    θ, x, y = reference.synthesize(program, grad, dims)
    θ = off_init(θ)
    ref = reference.run(program, grad, dims, [θ, x, y])
    modules = exported(program)
    model, f = net(modules), getattr(modules[file], loss)
    xt, yt = as_torch(x), as_torch(y)
    got = torch.func.grad(lambda p: f(model, p, xt, yt))(state_of(model, θ))
    compare(f"{program} {loss}", model, got, ref)


# ---- θ the model itself ----------------------------------------------------------------------


def _model_gradient(model: nn.Module, loss, θ: dict[str, np.ndarray], batch) -> dict:
    """torch.func.grad of `loss(model, batch)` in the model's parameters, named as the
    model names them."""
    bound = Bound(loss, model)
    params = {f"model.{k}": v for k, v in state_of(model, θ).items()}
    got = torch.func.grad(lambda p: torch.func.functional_call(bound, p, (batch,)))(params)
    return {k.removeprefix("model."): v for k, v in got.items()}


def test_gradient_of_the_tower_loss(exported, reference):
    """tutorial/07_train.psk's loss: two stacked modules (06_tower's Tower, three Blocks of
    RMSNorm, gelu and Linear, then a final RMSNorm) and a mean square error."""
    dims = {"B": 4}
    θ, batch = reference.synthesize("tower_grad.psk", "loss_grad", dims)
    θ = off_init(θ)
    ref = reference.run("tower_grad.psk", "loss_grad", dims, [θ, batch])
    modules = exported("tutorial/07_train.psk")
    model = modules["_06_tower"].Tower()
    got = _model_gradient(model, modules["_07_train"].loss, θ, as_torch(batch))
    compare("07_train loss (Tower)", model, got, ref)


def test_gradient_of_the_minigpt_loss(exported, reference):
    """train_minigpt.psk's loss (next-token cross-entropy) at V = 64, D = 16, H = 2, L = 2,
    B = 2, T = 8."""
    dims = {"B": 2, "T": 8}
    θ, batch = reference.synthesize("minigpt_grad.psk", "loss_grad", dims, TINY_GPT)
    assert not θ["head"].any()  # at its initialization: moved off it below
    θ = off_init(θ)
    ref = reference.run("minigpt_grad.psk", "loss_grad", dims, [θ, batch], TINY_GPT)
    modules = exported("tests/examples/minigpt/train_minigpt.psk", TINY_GPT)
    model = modules["minigpt"].MiniGPT(8)
    got = _model_gradient(model, modules["train_minigpt"].loss, θ, as_torch(batch))
    # softmax along seq2 ignores q·b_k, the same for every key: the key bias gets exactly 0
    compare("train_minigpt loss (MiniGPT)", model, got, ref, zero=("blocks.attn.wk.b",))
