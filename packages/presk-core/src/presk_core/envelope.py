"""The magnitude envelope of an entry (spec L868–L884): what its values are, measured on the
exact interpreter, for a bound to have a scale.

`calibrate` runs the entry on the reference interpreter with an observer
(presk_core.interp: `observer(site, value[, Σ|terms|])`) over one or more samples of its
inputs, and keeps, for every site, the range of its reals over elements, calls and samples
(`lo`, `hi`: the smallest and largest value; `max`: the largest |value|), and at every sum
and contraction (`interp.ABS_SUMS`) the largest Σ|terms| and the worst condition number
Σ|xᵢwᵢ| / |Σxᵢwᵢ| (an empty sum, 0/0, has condition 1; a sum that cancels to exactly 0, ∞).
The entry's arguments are sites too (`loss/θ`, `loss/batch`), and each of their tensors
is recorded by the name the kernels' host buffers give it (`θ.blocks.proj.w`, `batch.0`).

A site the program as written has once but the core program twice (a `fold` of blocks
unrolled into calls, its copies' origin `unroll of fold`) is counted once, under its fold's
site, as the spec counts 30 sites for 07_train's `loss` (docs/precision.md).

The envelope is a JSON document (`Envelope.to_json`, docs/precision.md "The envelope"):
versioned, and recording the digest of the core program it was taken from, so that an
envelope of another program is refused (E7101) rather than silently used.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

VERSION = 1
KIND = "envelope"


class EnvelopeError(Exception):
    """An envelope that cannot be read or does not fit the program: its code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def program_digest(program) -> str:
    """The digest of a core program: SHA-256 of its printed form (sites and types, not the
    source spans, so that moving a comment keeps the envelope)."""
    from presk_core.ir import format_program

    return hashlib.sha256(format_program(program, True).encode()).hexdigest()


@dataclass
class Stat:
    """What one site's reals did over elements, calls and samples."""

    lo: float = math.inf
    hi: float = -math.inf
    kind: str = "tensor"  # tensor, tree or tuple: only tensors are listed by magnitude
    abs_sum: float | None = None  # the largest Σ|terms| (sums and contractions)
    cond: float | None = None  # the worst Σ|terms| / |Σ terms|

    @property
    def max(self) -> float:
        return max(abs(self.lo), abs(self.hi)) if self.lo <= self.hi else 0.0

    def take(self, lo: float, hi: float) -> None:
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)

    def take_sum(self, abs_sum: float, cond: float) -> None:
        self.abs_sum = abs_sum if self.abs_sum is None else max(self.abs_sum, abs_sum)
        self.cond = cond if self.cond is None else max(self.cond, cond)

    def to_json(self) -> dict:
        out = {"kind": self.kind, "lo": _num(self.lo), "hi": _num(self.hi), "max": self.max}
        if self.abs_sum is not None:
            out |= {"abs_sum": _num(self.abs_sum), "cond": _num(self.cond)}
        return out

    @staticmethod
    def from_json(doc: dict) -> Stat:
        s = Stat(_float(doc["lo"]), _float(doc["hi"]), str(doc["kind"]))
        if "abs_sum" in doc:
            s.abs_sum, s.cond = _float(doc["abs_sum"]), _float(doc["cond"])
        return s


@dataclass
class Envelope:
    """The envelope of one entry (see the module)."""

    program: str  # program_digest of the core program
    file: str
    entry: str
    dims: dict[str, int]
    bits: int
    samples: int
    seed: int
    weights: str | None  # the checkpoint θ came from; None: the initializers at `seed`
    output: float  # the largest |value| of the entry's result
    sites: dict[str, Stat] = field(default_factory=dict)  # in the order first observed
    inputs: dict[str, Stat] = field(default_factory=dict)  # by host buffer name
    written: dict[str, str] = field(default_factory=dict)  # a site -> the site it counts as
    source: str | None = None  # the file it was read from (not written)
    data: str | None = None  # the `.psk.d` whose windows were the samples' last argument

    # ---- what `presk calibrate` prints --------------------------------------------------

    def counted(self) -> dict[str, Stat]:
        """The sites of the program as written: an unrolled copy merged into its fold's."""
        out: dict[str, Stat] = {}
        for site, s in self.sites.items():
            name = self.written.get(site, site)
            have = out.get(name)
            if have is None:
                out[name] = Stat(s.lo, s.hi, s.kind, s.abs_sum, s.cond)
                continue
            have.take(s.lo, s.hi)
            if s.kind == "tensor":
                have.kind = "tensor"
            if s.abs_sum is not None:
                have.take_sum(s.abs_sum, s.cond)
        return out

    def largest(self, n: int = 5) -> list[tuple[str, float]]:
        """The `n` tensor sites of largest magnitude, descending (ties: first observed)."""
        tensors = [(k, s.max) for k, s in self.counted().items() if s.kind == "tensor"]
        return sorted(tensors, key=lambda kv: -kv[1])[:n]

    def sums(self) -> list[tuple[str, float]]:
        """Every sum and contraction with its worst condition number, descending."""
        found = [(k, s.cond) for k, s in self.counted().items() if s.cond is not None]
        return sorted(found, key=lambda kv: -kv[1])

    @property
    def weights_text(self) -> str:
        return "initial weights" if self.weights is None else f"weights {self.weights}"

    # ---- the JSON form ------------------------------------------------------------------

    def to_json(self) -> dict:
        return {
            "presk": KIND,
            "version": VERSION,
            "program": self.program,
            "file": self.file,
            "entry": self.entry,
            "dims": dict(self.dims),
            "bits": self.bits,
            "samples": self.samples,
            "seed": self.seed,
            "weights": self.weights,
            "data": self.data,
            "output": _num(self.output),
            "sites": {k: s.to_json() for k, s in self.sites.items()},
            "inputs": {k: s.to_json() for k, s in self.inputs.items()},
            "written": dict(self.written),
        }

    @staticmethod
    def from_json(doc: object, source: str | None = None) -> Envelope:
        w = f"{source}: " if source else ""
        if not isinstance(doc, dict) or doc.get("presk") != KIND:
            raise EnvelopeError(
                "E7100", f'{w}not an envelope: a JSON object with "presk": "envelope"'
            )
        if doc.get("version") != VERSION:
            raise EnvelopeError(
                "E7100",
                f"{w}an envelope of version {doc.get('version')!r}: this presk reads version"
                f" {VERSION} (take it again with `presk calibrate --precision`)",
            )
        try:
            return Envelope(
                str(doc["program"]),
                str(doc["file"]),
                str(doc["entry"]),
                {str(k): int(v) for k, v in doc["dims"].items()},
                int(doc["bits"]),
                int(doc["samples"]),
                int(doc["seed"]),
                None if doc["weights"] is None else str(doc["weights"]),
                _float(doc["output"]),
                {str(k): Stat.from_json(v) for k, v in doc["sites"].items()},
                {str(k): Stat.from_json(v) for k, v in doc["inputs"].items()},
                {str(k): str(v) for k, v in doc["written"].items()},
                source,
                None if doc.get("data") is None else str(doc["data"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise EnvelopeError(
                "E7100", f"{w}a corrupt envelope ({type(e).__name__}: {e})"
            ) from None

    @staticmethod
    def read(path: str) -> Envelope:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise EnvelopeError("E7100", f"cannot read the envelope `{path}`: {why}") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise EnvelopeError(
                "E7100", f"`{path}` is not JSON: {e.msg} at line {e.lineno}, column {e.colno}"
            ) from None
        except RecursionError:
            raise EnvelopeError("E7100", f"`{path}` nests too deeply to be an envelope") from None
        return Envelope.from_json(doc, path)

    def write(self, path: str) -> None:
        """The JSON form into `path`, through a temporary file renamed (presk_core.data)."""
        from presk_core.data import atomic

        text = json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n"
        with atomic(path) as f:
            f.write(text.encode())

    def check_program(self, program) -> None:
        """E7101 unless this envelope was taken from `program`."""
        if program_digest(program) != self.program:
            where = f"`{self.source}`" if self.source else "the envelope"
            raise EnvelopeError(
                "E7101",
                f"{where} was taken from another program (`{self.file}` as it was then, or"
                " other --const values): take the envelope again with `presk calibrate"
                " --precision`",
            )


# ---- observing a run -----------------------------------------------------------------------


class Observer:
    """The interpreter's observer: each site's range, and Σ|terms| at sums."""

    wants_abs_sums = True

    def __init__(self, widen: float) -> None:
        self.stats: dict[str, Stat] = {}
        self.widen = widen  # the interpreter's own relative error at its precision, allowed

    def __call__(self, site: str, value: object, abs_sum: object = None) -> None:
        arrays = list(_reals(value))
        if not arrays:
            return
        stat = self.stats.get(site)
        if stat is None:
            kind = "tensor" if isinstance(value, np.ndarray) else _kind(value)
            stat = self.stats[site] = Stat(kind=kind)
        for a in arrays:
            lo, hi = outward(a, self.widen)
            stat.take(lo, hi)
        if abs_sum is not None and isinstance(value, np.ndarray):
            stat.take_sum(*condition(value, abs_sum, self.widen))


def _kind(value: object) -> str:
    return "tree" if isinstance(value, dict) else "tuple"


def _reals(value: object):
    """The real tensors in a value (a tree's, a tuple's), as object arrays of mpfr."""
    match value:
        case np.ndarray() if value.dtype == object:
            yield value
        case dict():
            for v in value.values():
                yield from _reals(v)
        case tuple() | list():
            for v in value:
                yield from _reals(v)


def _doubles(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=object).astype(np.float64).reshape(-1)


def outward(a: np.ndarray, widen: float) -> tuple[float, float]:
    """The smallest and largest element of `a` as doubles rounded outward, and widened by a
    relative `widen` (the interpreter's own error at its precision): an empty tensor gives
    (inf, -inf), which changes no range."""
    d = _doubles(a)
    if d.size == 0:
        return math.inf, -math.inf
    lo, hi = float(d.min()), float(d.max())
    lo = float(np.nextafter(lo - abs(lo) * widen, -np.inf))
    hi = float(np.nextafter(hi + abs(hi) * widen, np.inf))
    return lo, hi


def condition(value: np.ndarray, abs_sum: np.ndarray, widen: float) -> tuple[float, float]:
    """(the largest Σ|terms|, rounded up; the worst Σ|terms| / |Σ terms|) over elements."""
    s, v = _doubles(abs_sum), np.abs(_doubles(value))
    if s.size == 0:
        return 0.0, 1.0
    top = float(np.nextafter(float(s.max()) * (1 + widen), np.inf))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(s == 0, 1.0, s / v)  # 0/0: an empty sum, condition 1
    return top, float(ratio.max())


def written_sites(program) -> dict[str, str]:
    """Each site of an unrolled copy (origin `unroll of fold`), by its fold's site."""
    out = {}
    for fn in program.functions:
        for ins in fn.body:
            o = ins.origin
            if o is not None and o.rule.startswith("unroll") and ins.site:
                out[ins.site] = o.site
    return out


def calibrate(
    program,
    entry,
    inputs: Callable[[int], list],
    samples: int,
    bits: int,
    file: str,
    seed: int,
    weights: str | None = None,
    progress: Callable[[int], None] | None = None,
    results: list | None = None,
    data: str | None = None,
) -> Envelope:
    """The envelope of `entry` (a presk_core.run.Entry of `program`) over `samples` runs,
    `inputs(i)` giving the arguments (name, type, value) of sample i; each run's result
    appended to `results` when given (the exact reference a realization is measured
    against)."""
    from presk_core.interp import Interpreter

    widen = 2.0 ** (20 - bits)
    observer = Observer(widen)
    interp = Interpreter(program, bits, observer)
    fn = entry.function
    inputs_stats: dict[str, Stat] = {}
    param_stats: dict[str, Stat] = {}
    output = 0.0
    for i in range(samples):
        args = inputs(i)
        for name, _, value in args:
            for leaf, a in _named_leaves(name, value):
                stat = inputs_stats.setdefault(leaf, Stat())
                stat.take(*outward(a, widen))
            if any(True for _ in _reals(value)):
                kind = "tensor" if isinstance(value, np.ndarray) else _kind(value)
                stat = param_stats.setdefault(f"{fn.name}/{name}", Stat(kind=kind))
                for a in _reals(value):
                    stat.take(*outward(a, widen))
        result = interp.run(fn.name, [v for _, _, v in args], entry.dims)
        if results is not None:
            results.append(result)
        for a in _reals(result):
            lo, hi = outward(a, widen)
            if lo <= hi:
                output = max(output, abs(lo), abs(hi))
        if progress is not None:
            progress(i + 1)
    sites = {**param_stats, **observer.stats}
    return Envelope(
        program_digest(program),
        file,
        entry.shown,
        dict(entry.dims) | dict(entry.prefix),
        bits,
        samples,
        seed,
        weights,
        output,
        sites,
        inputs_stats,
        written_sites(program),
        data=data,
    )


def _named_leaves(name: str, value: object):
    """An argument's real tensors by the names the kernels' host buffers give them
    (presk_kernel.lower: `θ.blocks.proj.w`, `batch.0`, `x`)."""
    match value:
        case np.ndarray() if value.dtype == object:
            yield name, value
        case dict():
            for k, v in value.items():
                yield from _named_leaves(f"{name}.{k}", v)
        case tuple() | list():
            for i, v in enumerate(value):
                yield from _named_leaves(f"{name}.{i}", v)


def _num(x: float | None):
    """A number for JSON: a float, or "inf"/"-inf"/"nan" (not JSON numbers)."""
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _float(x: object) -> float:
    if isinstance(x, str) and x in ("inf", "-inf", "nan"):
        return float(x)
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise ValueError(f"{x!r} is not a number")
    return float(x)


__all__ = [
    "Envelope",
    "EnvelopeError",
    "Observer",
    "Stat",
    "calibrate",
    "program_digest",
    "written_sites",
]
