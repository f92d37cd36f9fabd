"""The roofline cost model: a kernel's work and traffic from its loop nest, the fit of
λ + max(W/π, Q/β) to measured times, rank correlations, and the machine profile as JSON
(docs/optimizer.md, "The roofline").

- Work W: the scalar operations the nest executes, each `Op` of an expression once per
  iteration of the loops around it (`fma` two: a multiply and an add; a libm function,
  `exp` … `erfc`, eight: `OP_WORK`), and each iteration
  of a `Reduce` its combining operation (add, max, min one, fma two). Loads, stores,
  constants and loop variables are not work.
- Traffic Q: the bytes of every buffer the kernel reads or writes, each once (its
  elements times the size of its type): what a kernel that keeps its operands in cache
  between uses moves from memory.
- The fit: the three constants minimise Σ (log t − log(λ + max(W/π, Q/β)))² over a grid
  (log₁₀ π from 5 to 13 and log₁₀ β from 6 to 13 in steps of 0.1, λ in 64 steps from 0 to
  the smallest time), refined once around the best point at a tenth of the steps; numpy
  only.
"""

from __future__ import annotations

import json
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from presk_core.data import write_text

TRANSCENDENTAL_WORK = 8
OP_WORK = {"fma": 2, **dict.fromkeys(("exp", "log", "tanh", "erf", "erfc", "sin", "cos", "powf"),
                                     TRANSCENDENTAL_WORK)}  # fmt: skip
"""The work of a scalar operation that is not one: fma two, a libm function eight (a
polynomial of about eight multiply-adds after its argument's reduction); others one."""
ITEMSIZE = {"f64": 8, "f32": 4, "bf16": 2, "i64": 8, "bool": 1, "i8": 1}
REAL_TYPES = ("f64", "f32", "bf16")  # what a profile can have timed
RATES = (1.0, 1e30)  # the rates a profile's π and β may have, in operations or bytes a second
LATENCY = 1e3  # the largest λ, in seconds
VERSION = 1


# ---- work and traffic ----------------------------------------------------------------------


def _expr_ops(e) -> int:
    from presk_kernel.ir import Load, Op

    if isinstance(e, Op):
        return OP_WORK.get(e.op, 1) + sum(_expr_ops(a) for a in e.args)
    if isinstance(e, Load):
        return sum(_expr_ops(i) for i in e.index if not hasattr(i, "terms"))
    return 0


def _stmts_ops(body) -> int:
    from presk_kernel.ir import Let, Loop, Reduce, Store

    total = 0
    for s in body:
        if isinstance(s, Let):
            total += _expr_ops(s.expr)
        elif isinstance(s, Store):
            total += _expr_ops(s.expr) + sum(
                _expr_ops(i) for i in s.index if not hasattr(i, "terms")
            )
        elif isinstance(s, Loop):
            total += s.extent * _stmts_ops(s.body)
        elif isinstance(s, Reduce):
            n = math.prod(extent for _, _, extent in s.vars)
            each = _stmts_ops(s.body) + sum(_expr_ops(t) for t in s.terms)
            total += n * (each + (2 if s.op == "fma" else 1))
    return total


def work(kernel) -> int:
    """W: the scalar operations of the kernel's nest (module docstring)."""
    from presk_kernel.ir import plain

    return _stmts_ops(plain(kernel.body))  # a laid-out body: the nest it lays out


def traffic(kernel) -> int:
    """Q: the bytes of its buffers, each read or written once."""
    return sum(b.size * ITEMSIZE[b.dtype] for b in kernel.buffers)


# ---- the model and its fit -----------------------------------------------------------------


@dataclass(frozen=True)
class Roofline:
    """λ + max(W/π, Q/β) seconds: π operations a second, β bytes a second, λ a launch."""

    pi: float
    beta: float
    lam: float

    def seconds(self, w, q):
        return self.lam + np.maximum(
            np.asarray(w, float) / self.pi, np.asarray(q, float) / self.beta
        )


def _loss(t: np.ndarray, w: np.ndarray, q: np.ndarray, lp, lb, lam) -> np.ndarray:
    """Σ (log t − log model) over the samples, for arrays of candidates (broadcast)."""
    pred = lam[..., None] + np.maximum(w / 10.0 ** lp[..., None], q / 10.0 ** lb[..., None])
    return ((np.log(t) - np.log(pred)) ** 2).sum(axis=-1)


def fit(w, q, t) -> Roofline:
    """π, β, λ minimising the squared error of the logarithms (module docstring); the
    samples' work `w`, bytes `q` and seconds `t` (every t > 0)."""
    w, q, t = (np.asarray(a, float) for a in (w, q, t))
    lo = float(t.min())
    best = None
    lps, lbs = np.arange(5.0, 13.0001, 0.1), np.arange(6.0, 13.0001, 0.1)
    lams = np.linspace(0.0, lo * 0.999, 64)
    for step in (1, 2):
        LP, LB, LAM = np.meshgrid(lps, lbs, lams, indexing="ij")
        loss = np.stack([_loss(t, w, q, LP[i], LB[i], LAM[i]) for i in range(len(lps))])
        i = np.unravel_index(int(np.argmin(loss)), loss.shape)
        best = (float(LP[i]), float(LB[i]), float(LAM[i]))
        if step == 1:  # refine around the best point, a tenth of the steps
            lps = best[0] + np.arange(-0.1, 0.10001, 0.01)
            lbs = best[1] + np.arange(-0.1, 0.10001, 0.01)
            dl = lams[1] - lams[0]
            lams = np.clip(best[2] + np.linspace(-dl, dl, 21), 0.0, lo * 0.999)
    assert best is not None
    return Roofline(10.0 ** best[0], 10.0 ** best[1], best[2])


def ranks(x) -> np.ndarray:
    """The ranks of x from 1, ties at their average rank."""
    x = np.asarray(x, float)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        same = x == v
        if same.sum() > 1:
            r[same] = r[same].mean()
    return r


def spearman(x, y) -> float:
    """Spearman's rank correlation (Pearson's of the ranks, ties averaged); nan when either
    side is constant or there are fewer than two samples."""
    if len(x) < 2:
        return float("nan")
    a, b = ranks(x), ranks(y)
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den else float("nan")


# ---- the profile ---------------------------------------------------------------------------


class ProfileError(Exception):
    """A profile file that cannot be used: the message says why."""


def machine(realize: str) -> dict:
    """The machine a profile describes: OS, architecture, CPU model, the type timed."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.split(":")[0].strip() in ("model name", "Model", "Hardware"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "os": platform.system().lower(),
        "arch": platform.machine().lower(),
        "cpu": cpu,
        "type": realize,
    }


@dataclass
class Sample:
    """One kernel, timed: its header, the site that launched it, its operation count (the
    PSK-Core operations it computes: a fused kernel's steps), work, bytes, the median of
    its calls in µs, the calls, where it came from (`FILE:ENTRY`), and the digest of its
    nest (the kernel's text but its site: two samples of one digest are one kernel)."""

    kernel: str
    site: str
    operations: int
    work: int
    bytes: int
    us: float
    calls: int
    source: str
    digest: str


@dataclass
class Profile:
    machine: dict
    samples: list[Sample] = field(default_factory=list)
    fit: Roofline | None = None

    def label(self) -> str:
        """`profile linux aarch64 f64`, as the report prints it."""
        m = self.machine
        return f"profile {m['os']} {m['arch']} {m['type']}"

    def to_json(self) -> str:
        doc = {
            "presk_profile": VERSION,
            "machine": self.machine,
            "samples": [vars(s) for s in self.samples],
            "fit": None
            if self.fit is None
            else {"pi": self.fit.pi, "beta": self.fit.beta, "lambda": self.fit.lam},
        }
        return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def write(profile: Profile, path: str) -> None:
    """The profile as JSON, whole (presk_core.data.atomic: a temporary file beside it,
    renamed), created as `open` creates a file (0666 less the umask)."""
    write_text(path, profile.to_json())


def read(path: str) -> Profile:
    """A profile written by `write`; ProfileError saying what is wrong otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(f"`{path}`: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError(f"`{path}` cannot be read: {e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProfileError(f"`{path}` is not JSON: {e}") from None
    except RecursionError:
        raise ProfileError(f"`{path}` is nested too deeply to be a profile") from None
    if not isinstance(doc, dict) or doc.get("presk_profile") != VERSION:
        raise ProfileError(
            f"`{path}` is not a presk machine profile (version {VERSION}): "
            "no `presk_profile` field of that version"
        )
    try:
        m = doc["machine"]
        if not isinstance(m, dict):
            raise TypeError("`machine` is not a map")
        if not all(isinstance(m[k], str) for k in ("os", "arch", "cpu", "type")):
            raise TypeError("a field of `machine` is not a string")
        if m["type"] not in REAL_TYPES:
            raise ValueError(f"the type timed, `{m['type'][:20]}`, is not one of {REAL_TYPES}")
        if not isinstance(doc["samples"], list):
            raise TypeError("`samples` is not a list")
        samples = [
            Sample(
                _text(s, "kernel"),
                _text(s, "site"),
                _count(s, "operations"),
                _count(s, "work"),
                _count(s, "bytes"),
                _real(s, "us"),
                _count(s, "calls"),
                _text(s, "source"),
                _text(s, "digest"),
            )
            for s in doc["samples"]
        ]
        f = doc["fit"]
        roof = None
        if f is not None:
            if not isinstance(f, dict):
                raise TypeError("`fit` is not a map")
            roof = Roofline(_real(f, "pi"), _real(f, "beta"), _real(f, "lambda"))
            if not (RATES[0] <= roof.pi <= RATES[1] and RATES[0] <= roof.beta <= RATES[1]):
                raise ValueError(
                    f"π and β are rates from {RATES[0]:g} to {RATES[1]:g} a second (a price"
                    " W/π of a rate below would overflow)"
                )
            if not 0 <= roof.lam <= LATENCY:
                raise ValueError(f"λ is a latency from 0 to {LATENCY:g} s")
    except (KeyError, TypeError, ValueError) as e:
        what = f"no field {e}" if isinstance(e, KeyError) else str(e)
        raise ProfileError(f"`{path}` is a malformed profile: {what}") from None
    if any(s.us <= 0 or s.work < 0 or s.bytes < 0 for s in samples):
        raise ProfileError(f"`{path}` is a malformed profile: a sample's time is not positive")
    return Profile(m, samples, roof)


def _field(record, name: str):
    if not isinstance(record, dict):
        raise TypeError("a sample is not a map")
    return record[name]


def _text(record, name: str) -> str:
    value = _field(record, name)
    if not isinstance(value, str):
        raise TypeError(f"`{name}` is not a string")
    return value


def _count(record, name: str) -> int:
    """A natural number written as a JSON integer (not 1.5, not 1e309, not true)."""
    value = _field(record, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"`{name}` is not a natural number: {str(value)[:40]}")
    return value


def _real(record, name: str) -> float:
    """A finite real: JSON's 1e309 reads as infinity, and NaN is no time or rate."""
    value = _field(record, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` is not a number")
    try:
        value = float(value)
    except OverflowError:  # an integer of 400 digits
        raise ValueError(f"`{name}` is out of the double range") from None
    if not math.isfinite(value):
        raise ValueError(f"`{name}` is not a finite number (1e309 is out of the double range)")
    return value


# ---- printing ------------------------------------------------------------------------------


def sci(x: float) -> str:
    """`8.321e8`: four significant digits, the exponent without sign or zeros."""
    mant, exp = f"{x:.3e}".split("e")
    return f"{mant}e{int(exp)}"


def kernel_name(header: str) -> str:
    """A kernel's header cut to the table's column (43 characters and `…`)."""
    return header if len(header) <= 44 else header[:43] + "…"


def table(samples: list[Sample], roof: Roofline) -> str:
    lines = [f"{'kernel':<44}{'work':>13}{'bytes':>13}{'measured µs':>12}{'predicted µs':>13}"]
    for s in samples:
        pred = float(roof.seconds(s.work, s.bytes)) * 1e6
        lines.append(
            f"{kernel_name(s.kernel):<44}{s.work:>13}{s.bytes:>13}{s.us:>12.2f}{pred:>12.2f}"
        )
    return "\n".join(lines) + "\n"
