"""Where a precision budget should go (spec L487): each site's first-order effect on an
entry's output when its values are rounded, measured on the exact interpreter
(docs/precision.md, "Sensitivities"). presk-ad computes it from one reverse sweep
(presk_ad.sensitivity); the forward probes here are what remains for an entry it does not
sweep (a result that is not one real tensor), and the reference its test compares with.

A rounding at a site multiplies each of its elements vᵢ by (1 + δᵢ), |δᵢ| ≤ u, at every
call. To first order the output y moves by Σᵢ (∂y/∂vᵢ)·vᵢ·δᵢ. The sensitivity of the site
is the size of that sum for independent δᵢ of unit size: S = max over outputs j of
‖(∂yⱼ/∂v) ⊙ v‖₂, so that a site rounded at u moves the output by about u·S. It is
estimated here by `probes` forward runs per site (the interpreter's observer replacing the
site's value by v ⊙ (1 + h·r), r random signs, h = 2⁻⁴⁰ at 256 bits): the root mean square
of ‖Δy‖∞/h over the probes. (The specification's comes from one reverse sweep of the
derivative; ours costs a run per probe and site, and is exact to first order in
expectation.)
"""

from __future__ import annotations

import math

import gmpy2
import numpy as np

H = 2.0**-40
"""The probes' relative perturbation: far above 256 bits' rounding, far below second order."""


class Probe:
    """The observer of one probe: the site's value at every call, perturbed."""

    replaces = True

    def __init__(self, site: str, rng: np.random.Generator, h: float = H) -> None:
        self.site, self.rng, self.h = site, rng, h

    def __call__(self, site: str, value: object, abs_sum: object = None) -> object:
        if site != self.site or not isinstance(value, np.ndarray) or value.dtype != object:
            return value
        signs = self.rng.choice((-1, 1), size=value.shape)
        moved = value * (1 + self.h * signs.astype(object))
        return np.asarray(moved, dtype=object).reshape(value.shape)  # a 0-d array stays one


class Sites:
    """The observer that lists the sites whose values are real tensors, in order."""

    def __init__(self) -> None:
        self.found: dict[str, None] = {}

    def __call__(self, site: str, value: object, abs_sum: object = None) -> None:
        if isinstance(value, np.ndarray) and value.dtype == object and value.size:
            self.found.setdefault(site, None)


def _leaves(value: object) -> list[np.ndarray]:
    from presk_core.envelope import _reals

    return [np.asarray(a, dtype=object) for a in _reals(value)]


def sensitivities(program, entry, args: list, bits: int = 256, probes: int = 4, seed: int = 0):
    """[(site, S)] for every site of `entry` whose value is a real tensor, in order."""
    from presk_core.interp import Interpreter

    name, dims = entry.function.name, entry.dims
    sites = Sites()
    base = _leaves(Interpreter(program, bits, sites).run(name, args, dims))
    out = []
    for k, site in enumerate(sites.found):
        total = 0.0
        for p in range(probes):
            rng = np.random.default_rng((seed, k, p))
            got = _leaves(Interpreter(program, bits, Probe(site, rng)).run(name, args, dims))
            with gmpy2.context(precision=bits):
                moved = max(
                    (
                        float(np.max(np.abs(g - b), initial=0))
                        for g, b in zip(got, base, strict=True)
                    ),
                    default=0.0,
                )
            total += (moved / H) ** 2
        out.append((site, math.sqrt(total / probes)))
    return out


def format_sensitivities(entry, found: list, how: int | str) -> str:
    """The table `presk dump --stage sensitivity` prints: sites by sensitivity, descending,
    each with what f32 and bf16 would move the output by (u·S); `how` the method (a number
    of probes a site, or the text that says how the adjoints were swept)."""
    from presk_core.show import format_exp

    at = ", ".join(f"{k} = {v}" for k, v in {**entry.dims, **dict(entry.prefix)}.items())
    lines = [
        f"sensitivity of `{entry.shown}`{' at ' + at if at else ''}: {len(found)} sites,"
        f" {how if isinstance(how, str) else f'{how} probes a site'}"
        " (the output's first-order move per unit relative rounding)",
        f"  {'site':<28} {'S':>11} {'f32 u·S':>11} {'bf16 u·S':>11}",
    ]
    for site, s in sorted(found, key=lambda kv: -kv[1]):
        cells = (format_exp(x, 3) for x in (s, s * 2.0**-24, s * 2.0**-8))
        lines.append(f"  {site:<28} " + " ".join(f"{c:>11}" for c in cells))
    return "\n".join(lines) + "\n"


def sensitivity_pass(core, ctx, sweep=None):
    """The pass `sensitivity`: the table of an entry's sites (--entry, --dim), its inputs
    synthesized from seed 0 as `presk run` draws them. `sweep(core, entry, args)`, when
    given (presk-ad's reverse sweep), returns (found, how), or None for an entry it does not
    sweep: the forward probes then."""
    from presk_syntax.diagnostics import DiagnosticError, error
    from presk_syntax.pipeline import Text

    from presk_core.interp import Interpreter
    from presk_core.run import EntryError, RunError, entry_inputs, parse_entry

    where = ctx.entry
    if where is None or where.entry is None:
        raise DiagnosticError([error("E7001", "--stage sensitivity needs --entry E")])
    try:
        entry = parse_entry(where.entry, core, None, dict(where.dims))
        args = [v for _, _, v in entry_inputs(entry, Interpreter(core, 256), 0, 256)]
        swept = sweep(core, entry, args) if sweep is not None else None
        found, how = swept if swept is not None else (sensitivities(core, entry, args), 4)
    except (EntryError, RunError) as e:
        raise DiagnosticError([error(getattr(e, "code", "E7001") or "E7001", str(e))]) from None
    return Text(format_sensitivities(entry, found, how))


__all__ = ["Probe", "format_sensitivities", "sensitivities", "sensitivity_pass"]
