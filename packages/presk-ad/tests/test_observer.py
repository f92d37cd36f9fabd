"""The interpreter's observer on a differentiated program (04_grad's `loss_grad`): every
instruction executed is seen once at its own site, in the order it runs, its value the one
the program goes on with; Σ|terms| comes at the sums and contractions only (presk
calibrate --precision reads these)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from presk_ad import differentiate
from presk_core import mpfr as M
from presk_core.interp import ABS_SUMS, Interpreter
from presk_core.lower import lower_program
from presk_core.run import parse_entry, synthesize
from presk_types.elab import load_program

ROOT = Path(__file__).resolve().parents[3]
DIMS = {"D": 3, "B": 4}


@dataclass
class Recorder:
    wants_abs_sums: bool = True
    seen: list = field(default_factory=list)

    def __call__(self, site, value, abs_sum=None):
        self.seen.append((site, value, abs_sum))


@dataclass
class Counting(Interpreter):
    calls: Counter = field(default_factory=Counter)

    def call(self, name, args, dims):
        self.calls[name] += 1
        return super().call(name, args, dims)


def run_observed():
    elab = load_program(str(ROOT / "tutorial" / "04_grad.psk"), {})
    core = differentiate(lower_program(elab))
    entry = parse_entry("loss_grad", core, elab, DIMS)
    args = [v for _, _, v in synthesize(entry, Interpreter(core, 128), 0)]
    plain = Interpreter(core, 128).run("loss_grad", args, entry.dims)
    recorder = Recorder()
    interp = Counting(core, 128, recorder)
    observed = interp.run("loss_grad", args, entry.dims)
    return core, args, plain, observed, recorder.seen, interp.calls


def test_every_instruction_run_is_seen_once_a_call_at_its_site():
    core, _, plain, observed, seen, calls = run_observed()
    sites = Counter(site for site, _, _ in seen)
    want = Counter()
    for fn in core.functions:
        for ins in fn.body:
            want[ins.site] += calls[fn.name]
    assert sites == +want
    assert seen[-1][0] == "loss_grad/%3" and seen[-1][1] is observed
    assert {k: v.tolist() for k, v in observed.items()} == {k: v.tolist() for k, v in plain.items()}


def test_abs_sums_come_at_the_sums_and_contractions_and_bound_their_values():
    core, args, _, _, seen, _ = run_observed()
    op = {ins.site: ins.op for fn in core.functions for ins in fn.body}
    summed = [(site, v, a) for site, v, a in seen if a is not None]
    assert [site for site, _, _ in summed] == [site for site, _, _ in seen if op[site] in ABS_SUMS]
    assert {op[site] for site, _, _ in summed} >= {"dot", "dot_right", "sum_to"}
    with M.precision(128):
        for site, value, abs_sum in summed:
            assert np.shape(value) == np.shape(abs_sum), site
            assert all(
                abs(v) <= a for v, a in zip(np.ravel(value), np.ravel(abs_sum), strict=True)
            ), site
        # the forward's x·w: Σ|x_bd · w_d| by hand
        (dot,) = [a for site, _, a in summed if site == "Linear.apply/%3"]
        theta, x, _ = args
        by_hand = M.sum(M.abs(M.mul(x, M.real(np.ravel(theta["w"])))), 1)
        assert [v.digits(2) for v in np.ravel(dot)] == [v.digits(2) for v in np.ravel(by_hand)]
