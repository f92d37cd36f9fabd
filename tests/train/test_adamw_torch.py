"""presk's AdamW and its cosine schedule against the real `torch.optim.AdamW` (issue 7).

The optimizer blocks are lowered as `presk train` lowers them (`adamw.lr`, `adamw.step`:
PSK-Core, run by the interpreter at 256 bits); the oracle is `torch.optim.AdamW` with a
`LambdaLR` whose lambda is the schedule as docs/training.md writes it, in float64. From one
state, 20 steps on the same fixed gradients: after each, every leaf of θ (and of m and v,
torch's `exp_avg` and `exp_avg_sq`) within 1e-12 of torch's, norm-wise relative, and the
learning rates equal. `pytest -s` prints the worst gaps.
"""

import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from presk_core import mpfr as M  # noqa: E402
from presk_core.interp import Interpreter  # noqa: E402
from presk_core.lower import lower_program  # noqa: E402
from presk_types.elab import instance_tree, load_program  # noqa: E402
from presk_types.types import ParamsT  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-12
STEPS = 20

# tutorial/07_train.psk's block: lr 0.01, weight_decay 0.0, cosine(warmup = 20), and the
# defaults (docs/training.md) betas (0.9, 0.999), eps 1e-8
TUTORIAL = {"lr": 0.01, "weight_decay": 0.0, "betas": (0.9, 0.999), "eps": 1e-8, "warmup": 20}
# a block of our own, every field away from its default (written out in `_own_file`)
OWN = {"lr": 0.03, "weight_decay": 0.1, "betas": (0.8, 0.99), "eps": 1e-6, "warmup": 5}


def _own_file(folder: Path) -> Path:
    path = folder / "own_adamw.psk"
    path.write_text(
        textwrap.dedent(f"""\
        import "{ROOT / "tutorial" / "06_tower.psk"}" as t
        dim B

        fn loss(θ : params t.Tower, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
          let (x, y) = batch
          mean((t.Tower.apply(θ, x) - y)^2)

        optimizer adamw {{
          lr           : f64 = 0.03
          weight_decay : f64 = 0.1
          betas        = (0.8, 0.99)
          eps          : f64 = 1e-6
          schedule     : cosine(warmup = 5)
        }}

        training run {{
          model     = t.Tower
          objective = loss
          optimizer = adamw
          data      = stream "{ROOT / "tutorial" / "data" / "pairs.psk.d"}" |> batch(B = 8)
        }}
        """),
        encoding="utf-8",
    )
    return path


def cosine_with_warmup(w: int, horizon: int):
    """docs/training.md: lr·t/w for t ≤ w, then lr·(1 + cos(π(t − w)/(T − w)))/2, as the
    factor of lr at step t."""

    def factor(t: int) -> float:
        if t <= w:
            return t / w
        return (1 + math.cos(math.pi * (t - w) / (horizon - w))) / 2

    return factor


def _gap(got: np.ndarray, ref: np.ndarray) -> float:
    """‖got − ref‖ / ‖ref‖ (the absolute gap where ref is all zeros)."""
    scale = np.linalg.norm(ref)
    diff = np.linalg.norm(got - ref)
    return float(diff / scale) if scale > 0 else float(diff)


def _floats(x) -> np.ndarray:
    return np.asarray(x, dtype=object).astype(float)


# (block, the step the state is at, the horizon T); 20 steps from there
CASES = [
    # the tutorial's block, from its start: 20 steps of warm-up up to the peak rate
    pytest.param("tutorial", 0, 20, id="tutorial-from-start"),
    # mid-run (m, v nonzero, bias correction from step 11): the end of the warm-up, the decay
    pytest.param("tutorial", 10, 40, id="tutorial-mid-run"),
    # wd 0.1, betas (0.8, 0.99), eps 1e-6: warm-up for 5 steps, then down to 0 at step 20
    pytest.param("own", 0, 20, id="own-from-start"),
    pytest.param("own", 7, 27, id="own-mid-run"),
]


@pytest.mark.parametrize(("block", "t0", "horizon"), CASES)
def test_adamw_equals_torch_optim_adamw(block, t0, horizon, tmp_path):
    hyper = TUTORIAL if block == "tutorial" else OWN
    path = ROOT / "tutorial" / "07_train.psk" if block == "tutorial" else _own_file(tmp_path)
    elab = load_program(str(path))
    core = lower_program(elab)
    step_fn = core.function("adamw.step")
    assert step_fn.dims == ()
    (tree,) = {p.type for p in step_fn.params[:4]}
    assert isinstance(tree, ParamsT)
    leaves = instance_tree(tree.instance, elab)
    shapes = {k: tuple(a.length.constant for a in t.shape.axes) for k, t in leaves}
    assert sum(math.prod(s) for s in shapes.values()) == 76  # the tower's 4 leaves

    # one state: θ, and (mid-run) m, v as after t0 steps; then 20 fixed gradients
    rng = np.random.default_rng(7 + t0)
    theta0 = {k: rng.normal(size=s) for k, s in shapes.items()}
    m0 = {k: (rng.normal(size=s) * 0.1 if t0 else np.zeros(s)) for k, s in shapes.items()}
    v0 = {k: (rng.normal(size=s) ** 2 * 0.01 if t0 else np.zeros(s)) for k, s in shapes.items()}
    grads = [
        {k: rng.normal(size=s) * rng.choice([1e-3, 1.0, 30.0]) for k, s in shapes.items()}
        for _ in range(STEPS)
    ]

    # torch.optim.AdamW in float64, its rate from LambdaLR
    params = {k: torch.tensor(x, dtype=torch.float64) for k, x in theta0.items()}
    opt = torch.optim.AdamW(
        list(params.values()),
        lr=hyper["lr"],
        betas=hyper["betas"],
        eps=hyper["eps"],
        weight_decay=hyper["weight_decay"],
    )
    if t0:
        for k, p in params.items():
            opt.state[p] = {
                "step": torch.tensor(float(t0), dtype=torch.float64),
                "exp_avg": torch.tensor(m0[k], dtype=torch.float64),
                "exp_avg_sq": torch.tensor(v0[k], dtype=torch.float64),
            }
    for group in opt.param_groups:
        group["initial_lr"] = hyper["lr"]
    # LambdaLR's epoch is the number of steps taken; resuming at t0, it moves to t0 + 1 at
    # once, so the rate of step t is lr·factor(t), as in presk
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, cosine_with_warmup(hyper["warmup"], horizon), last_epoch=t0
    )

    interp = Interpreter(core, 256)
    with M.precision(256):
        theta = {k: M.real(x) for k, x in theta0.items()}
        m = {k: M.real(x) for k, x in m0.items()}
        v = {k: M.real(x) for k, x in v0.items()}
        total = M.real(horizon)
    worst = {"θ": 0.0, "m": 0.0, "v": 0.0}
    worst_ulps = 0.0
    for i, g in enumerate(grads):
        t = t0 + 1 + i
        with M.precision(256):
            step, gm = M.real(t), {k: M.real(x) for k, x in g.items()}
        lr = interp.run("adamw.lr", [step, total], {})
        theta, m, v = interp.run("adamw.step", [theta, m, v, gm, step, lr], {})

        # the rates: presk's exact, then rounded once; torch's lr·factor(t) in float64, whose
        # 1 + cos(…) is off by a few units of 2⁻⁵³ (a few ulps of the peak rate, not of the
        # rate itself, which goes to 0)
        (torch_lr,) = sched.get_last_lr()
        ulps = abs(float(lr.item()) - torch_lr) / math.ulp(hyper["lr"])
        worst_ulps = max(worst_ulps, ulps)
        assert ulps <= 4, f"step {t}: rate {float(lr.item())!r}, torch's {torch_lr!r}"
        for k, p in params.items():
            p.grad = torch.tensor(g[k], dtype=torch.float64)
        opt.step()
        if i + 1 < STEPS:  # (the rate after the last step: T − w may be 0)
            sched.step()

        for k, p in params.items():
            state = opt.state[p]
            for name, ours, theirs in (
                ("θ", theta, p.detach()),
                ("m", m, state["exp_avg"]),
                ("v", v, state["exp_avg_sq"]),
            ):
                gap = _gap(_floats(ours[k]), theirs.numpy())
                worst[name] = max(worst[name], gap)
                assert gap <= TOL, f"step {t}, {name}[{k}]: relative gap {gap:.3e}"
        assert int(opt.state[params[next(iter(params))]]["step"].item()) == t
    print(
        f"\n{block} from step {t0}, T = {horizon}: worst relative gap over {STEPS} steps"
        f"  θ {worst['θ']:.3e}  m {worst['m']:.3e}  v {worst['v']:.3e};"
        f" rates {worst_ulps:g} ulp (of lr) apart at most"
    )
