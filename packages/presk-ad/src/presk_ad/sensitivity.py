"""Sensitivities from one reverse sweep (spec L908, docs/precision.md "Sensitivities"):
for every site of an entry, (∂y/∂v) ⊙ v, the output's first-order move per unit relative
rounding of each element of v, read off the adjoints of the entry's `.vjp`.

The `.vjp` is the `--remat recompute` form (presk_ad.vjp.AD), asked for the adjoints of
every real parameter of the entry (so that every real value computed from an input is
active and gets one), and kept whole: no dead code removed, so that every forward value
and every adjoint is computed. It runs on the exact interpreter with an observer that
pairs, within each call of a `G.vjp`, the forward value of each site `G/%n` (computed
again there) with its adjoint, and adds their product's squared norm to the site's sum
over calls. An adjoint that is the cotangent itself (a returned value's, or a value's
that only an addition to the result reads) is copied by a `cast` so that it is observed.

S = maxⱼ (Σ_calls ‖(∂yⱼ/∂v) ⊙ v‖₂²)^½ over the output's elements j (each call rounds
independently, as each forward probe draws its signs again at each call): one sweep per element
(the cotangent eⱼ). Entries whose result is not one real tensor, or has more than
`MAX_SWEEPS` elements, are refused (the forward probes of presk_core.sensitivity remain).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from presk_core.ir import Function, Value
from presk_types.types import Real, TupleT

from presk_ad.vjp import AD, Sweep, differentiable

MAX_SWEEPS = 64
"""The most output elements swept, one reverse sweep each."""


class SensitivityError(Exception):
    """An entry this module does not sweep (its result is not one small real tensor)."""


class EverySweep(Sweep):
    """A sweep in which every value is active: a value computed from constants alone (an
    RMSNorm's `real(eps)`) gets its adjoint too, as a rounding there moves the output."""

    def __init__(self, ad, fn, needed, target) -> None:
        super().__init__(ad, fn, needed, target)
        self.active = {p.id for p in fn.params} | {i.out.id for i in fn.body}


class SiteAD(AD):
    """`AD` whose `.vjp`s keep every instruction, and record for each forward value of a
    real type the id of its adjoint (`adjoint[vjp name][value id]`) and its site."""

    def __init__(self, program) -> None:
        super().__init__(program)
        self.adjoint: dict[str, dict[int, int]] = {}
        self.origin: dict[str, dict[int, str]] = {}

    def swept(self, name: str, with_value: bool) -> Function:
        key = f"{name}.value_vjp" if with_value else f"{name}.vjp"
        if key not in self.made:
            fn = self.program.function(name)
            self.made[key] = None
            needed = sorted(self.needed.get(name, set()))
            sweep = EverySweep(self, fn, needed, key)
            ct = sweep.new(fn.result, "ct")
            ret = sweep.run(ct)
            if with_value:
                ret = sweep.emit("tuple", [fn.ret, ret], TupleT((fn.result, ret.type)))
            params = {p.id for p in (*fn.params, ct)}
            adjoint, origin = {}, {}
            for ins in fn.body:
                a = sweep.adj.get(ins.out.id)
                if isinstance(ins.out.type, Real) and isinstance(a, Value) and a.id in params:
                    # an adjoint that is the cotangent itself: a copy in the body, observed
                    a = sweep.emit("cast", [a], ins.out.type)
                if isinstance(ins.out.type, Real) and isinstance(a, Value):
                    adjoint[ins.out.id] = a.id
                    origin[ins.out.id] = ins.site
            body = tuple(sweep.body)  # whole: every forward value and every adjoint computed
            self.made[key] = Function(
                key, fn.dims, (*fn.params, ct), ret.type, body, ret, (), fn.span
            )
            self.adjoint[key] = adjoint
            self.origin[key] = origin
        return self.made[key]


class Pairs:
    """The observer of one sweep: each forward value kept until its adjoint comes, their
    product added to the site's (and a call's callee's returned site's) sum."""

    def __init__(self, ad: SiteAD) -> None:
        self.forward: dict[str, dict[int, str]] = {}
        self.adjoint_of: dict[str, dict[int, list[int]]] = {}
        for key, adj in ad.adjoint.items():
            self.forward[key] = {n: ad.origin[key][n] for n in adj}
            back: dict[int, list[int]] = {}
            for n, m in adj.items():
                back.setdefault(m, []).append(n)
            self.adjoint_of[key] = back
        self.last: dict[tuple[str, int], object] = {}
        self.sums: dict[str, object] = {}

    def __call__(self, site: str, value: object, abs_sum: object = None) -> None:
        fn, _, n = site.rpartition("/%")
        if fn not in self.forward or not n.isdigit():
            return
        n = int(n)
        if n in self.forward[fn]:
            self.last[(fn, n)] = value
        for v in self.adjoint_of[fn].get(n, ()):
            x = self.last.get((fn, v))
            if x is None:
                continue
            product = np.asarray(value, dtype=object) * np.asarray(x, dtype=object)
            square = sum(float(p) ** 2 for p in np.ravel(product))
            s = self.forward[fn][v]  # calls round independently: their squares add
            self.sums[s] = self.sums.get(s, 0.0) + square


def sweep_program(program, name: str) -> tuple[SiteAD, object]:
    """(the SiteAD, the program with `name.vjp` and its callees' added) of the entry
    `name`, its adjoints taken in every real parameter."""
    ad = SiteAD(program)
    fn = ad.program.function(name)
    wanted = {i for i, p in enumerate(fn.params) if differentiable(p.type)}
    if not isinstance(fn.result, Real):
        raise SensitivityError(f"`{name}` returns {fn.result}, not one real tensor")
    ad.need(name, wanted)
    ad.vjp(name)
    made = tuple(f for f in ad.made.values() if f is not None)
    return ad, replace(ad.program, functions=ad.program.functions + made)


def reverse_sensitivities(program, entry, args: list, bits: int = 256) -> tuple[list, int]:
    """([(site, S)] for every site of `entry` whose adjoint the sweep computes, in the
    order the sweeps first meet them; the number of sweeps: one per output element)."""
    from presk_core import mpfr as M
    from presk_core.interp import Interpreter

    name, dims = entry.function.name, entry.dims
    ad, swept = sweep_program(program, name)
    value = Interpreter(program, bits).run(name, args, dims)
    out = np.asarray(value, dtype=object)
    if out.size > MAX_SWEEPS:
        raise SensitivityError(f"`{name}` returns {out.size} reals, more than {MAX_SWEEPS}")
    best: dict[str, float] = {}
    order: dict[str, None] = {}
    for j in range(max(out.size, 1)):
        one = np.zeros(out.shape)
        one.reshape(-1)[j] = 1.0
        with M.precision(bits):
            ct = M.real(one)
        pairs = Pairs(ad)
        Interpreter(swept, bits, pairs).run(f"{name}.vjp", [*args, ct], dims)
        for s, total in pairs.sums.items():
            order.setdefault(s, None)
            best[s] = max(best.get(s, 0.0), math.sqrt(total))
    return [(s, best[s]) for s in order], max(out.size, 1)


__all__ = ["MAX_SWEEPS", "SensitivityError", "SiteAD", "reverse_sensitivities", "sweep_program"]
