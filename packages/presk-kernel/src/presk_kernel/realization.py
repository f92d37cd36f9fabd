"""A realization: the machine type of every real of a run, as a value the lowering applies.

A `Realization` gives a type to each narrowable site (`sites`: the roots of the entry's
fusion groups and the other values its kernels store; a member of a fused group is computed
in its group's root's type, spec L906), a storage type to each parameter path (`params`: a
parameter is stored once in that type and every nest reads it from there), a type to each
function (`functions`: a training step's, spec L978; every site of the function not named
in `sites`), and a `quant` map that `presk quantize` reads (a path to int8 or int4: checked here;
the pass `kernel` stores those parameters as integers: presk_kernel.quant.integer_weights). Whatever is not named takes `default`. `f64`, `f32` and `bf16` are its uniform cases.

Its JSON form (docs/ir.md, "Realizations"):

    {"presk": "realization", "version": 1, "default": "f64",
     "sites": {"loss/%6": "f32"}, "params": {"w": "bf16"},
     "functions": {"adamw.step": "f32"}, "quant": {"w": "int8"}}

A site's type is, in order: its own in `sites`, its function's in `functions`, `default`.
A bad file is a diagnostic: E7035 (not a realization: unreadable, not JSON, another kind
or version, a misspelt key), E7036 (an unknown type), E7037 (a site that is not a
narrowable site of the entry), E7038 (a parameter path the entry's trees do not have),
E7039 (a function the program does not have).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from presk_core.data import write_text

from presk_kernel.ir import REAL_DTYPES, Affine, Buffer, Let, Load, Loop, Op, Reduce, Store

TYPES = ("f64", "f32", "bf16")
"""The machine types of a real: IEEE binary64 and binary32, and bf16 (stored as the 16 high
bits of a binary32, computed in f32, rounded to nearest even at every store: DESIGN §11)."""

QUANT_TYPES = ("int8", "int4")
"""The integer weights of `presk quantize` (spec L67, L1266; presk_kernel.quant)."""

VERSION = 1
KEYS = ("presk", "version", "default", "sites", "params", "functions", "quant")

Pairs = tuple[tuple[str, str], ...]


class RealizationError(Exception):
    """A realization that cannot be read or does not fit the entry: its code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def compute_type(t: str) -> str:
    """The type a value of storage type `t` is computed in (bf16 in f32)."""
    return "f64" if t == "f64" else "f32"


def function_of(site: str) -> str:
    """The function a site is in: `Linear.apply` of `Linear.apply/%3`."""
    return site.rsplit("/", 1)[0]


@dataclass(frozen=True, slots=True)
class Realization:
    """A type per narrowable site, per parameter path and per function (see the module)."""

    default: str = "f64"
    sites: Pairs = ()
    params: Pairs = ()
    functions: Pairs = ()
    quant: Pairs = ()
    source: str | None = None  # the file it was read from, for messages (not compared)

    def __post_init__(self) -> None:
        _check_type(self.default, "`default`", self.source)
        for name, table in (("sites", self.sites), ("params", self.params)):
            for key, t in table:
                _check_type(t, f"`{name}` of `{key}`", self.source)
        for key, t in self.functions:
            _check_type(t, f"`functions` of `{key}`", self.source)
        for key, t in self.quant:
            if t not in QUANT_TYPES:
                raise RealizationError(
                    "E7036",
                    f"{_where(self.source)}`quant` of `{key}` is `{t}`: a quantized weight is "
                    f"one of {', '.join(QUANT_TYPES)}",
                )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Realization):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        return (self.default, *(tuple(sorted(t)) for t in self._tables()))

    def _tables(self) -> tuple[Pairs, ...]:
        return (self.sites, self.params, self.functions, self.quant)

    @staticmethod
    def uniform(t: str) -> Realization:
        """Every real in `t` (f64, f32, bf16)."""
        return Realization(t)

    @property
    def is_uniform(self) -> bool:
        """Every site and parameter in `default` (whatever `quant` says: not applied)."""
        return all(t == self.default for _, t in (*self.sites, *self.params, *self.functions))

    def site_type(self, site: str) -> str:
        """The type of `site`: its own, else its function's, else the default."""
        own = dict(self.sites).get(site)
        if own is not None:
            return own
        return dict(self.functions).get(function_of(site), self.default)

    def param_type(self, path: str) -> str:
        """The storage type of the parameter at `path`."""
        return dict(self.params).get(path, self.default)

    def __str__(self) -> str:
        if self.source is not None:
            return f"@{self.source}"
        return self.default if self.is_uniform and not self.quant else "mixed"

    # ---- the JSON form -------------------------------------------------------------------

    def to_json(self) -> dict:
        return {
            "presk": "realization",
            "version": VERSION,
            "default": self.default,
            "sites": dict(self.sites),
            "params": dict(self.params),
            "functions": dict(self.functions),
            "quant": dict(self.quant),
        }

    @staticmethod
    def from_json(doc: object, source: str | None = None) -> Realization:
        """A realization from its JSON form (a parsed document); E7035/E7036 when it is not
        one."""
        w = _where(source)
        if not isinstance(doc, dict) or doc.get("presk") != "realization":
            raise RealizationError(
                "E7035", f'{w}not a realization: a JSON object with "presk": "realization"'
            )
        if doc.get("version") != VERSION:
            raise RealizationError(
                "E7035",
                f"{w}a realization of version {doc.get('version')!r}: this presk reads version"
                f" {VERSION}",
            )
        unknown = [k for k in doc if k not in KEYS]
        if unknown:
            raise RealizationError(
                "E7035",
                f"{w}unknown key `{unknown[0]}` in a realization (its keys: {', '.join(KEYS)})",
            )
        tables = [_table(doc.get(k, {}), k, w) for k in ("sites", "params", "functions", "quant")]
        default = doc.get("default", "f64")
        if not isinstance(default, str):
            raise RealizationError("E7036", f"{w}`default` is {default!r}: one of {_types()}")
        return Realization(default, *tables, source=source)

    @staticmethod
    def read(path: str) -> Realization:
        """The realization in the file at `path`."""
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise RealizationError(
                "E7035", f"cannot read the realization `{path}`: {why}"
            ) from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise RealizationError(
                "E7035", f"`{path}` is not JSON: {e.msg} at line {e.lineno}, column {e.colno}"
            ) from None
        except RecursionError:
            raise RealizationError(
                "E7035", f"`{path}` nests too deeply to be a realization"
            ) from None
        return Realization.from_json(doc, path)

    def write(self, path: str) -> None:
        """The JSON form into `path`, whole (presk_core.data.atomic)."""
        write_text(path, json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n")

    # ---- against an entry ----------------------------------------------------------------

    def check(
        self,
        narrowable: Iterable[str],
        members: Mapping[str, str],
        paths: Iterable[str],
        functions: Iterable[str],
        stored: Iterable[str] = (),
    ) -> None:
        """E7037–E7039 for a site, a path or a function the entry does not have:
        `narrowable` its narrowable sites, `members` each fused member's root, `paths` its
        trees' parameter paths, `functions` the program's functions, `stored` every site
        with a kernel."""
        stored = set(stored)
        w = _where(self.source)
        sites = set(narrowable)
        for site, _ in self.sites:
            if site in sites:
                continue
            if site in members:
                raise RealizationError(
                    "E7037",
                    f"{w}`{site}` is not a narrowable site: fused into `{members[site]}`, it is"
                    " computed in its group's root's type (give the root its type)",
                )
            if site in stored:
                raise RealizationError(
                    "E7037",
                    f"{w}`{site}` is not a narrowable site: it stores no real (an index or a"
                    " truth value has no type to choose)",
                )
            raise RealizationError(
                "E7037",
                f"{w}no narrowable site `{site}` in this entry (`presk dump --stage sched`"
                " lists them)",
            )
        known = set(paths)
        for table in ("params", "quant"):
            for path, _ in getattr(self, table):
                if path not in known:
                    have = ", ".join(sorted(known)) or "none"
                    raise RealizationError(
                        "E7038",
                        f"{w}`{table}` names `{path}`, not a parameter path of this entry's"
                        f" trees (its paths: {have})",
                    )
        names = set(functions)
        for fn, _ in self.functions:
            if fn not in names:
                raise RealizationError(
                    "E7039", f"{w}`functions` names `{fn}`, not a function of the program"
                )


@dataclass(frozen=True, slots=True)
class Sites:
    """An entry's narrowable sites, in the order of its launches after fusion, and the site
    each kernel's site takes its type from (`root`: a narrowable site its own)."""

    narrowable: tuple[str, ...]
    root: Mapping[str, str]

    @property
    def members(self) -> dict[str, str]:
        """Each site computed in another's type: a member of a fused group, by its root."""
        return {s: r for s, r in self.root.items() if s != r}


def narrowable_sites(schedule, fused=None, groups=None) -> Sites:
    """The narrowable sites of a schedule before fusion (presk_kernel.ir.Schedule): each
    real a kernel stores that is not fused into another, one per fusion group (its root's
    site: the members are computed in its type, spec L906; a site that stores only indices
    or truth values has no type to choose, and computes in its function's or the default). Sites fused together (a site
    whose kernels are in two groups joins them) are one class, named by its first fused
    kernel's site (a group's root), else its first launch's; listed in launch order.
    `fused` and `groups`: `fuse(schedule)`, when the caller has it."""
    if fused is None or groups is None:
        from presk_kernel.fuse import fuse

        fused, groups = fuse(schedule)
    parent: dict[str, str] = {}

    def find(s: str) -> str:
        parent.setdefault(s, s)
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    for launch in schedule.launches:
        find(launch.kernel.site)
    for g in groups:
        for step in g.steps:
            a, b = find(g.site), find(step)
            if a != b:
                parent[b] = a
    names: dict[str, str] = {}  # a class's representative -> its narrowable site
    for launch in sorted(fused.launches, key=lambda lc: not lc.kernel.steps):
        names.setdefault(find(launch.kernel.site), launch.kernel.site)  # a group's root first
    real = {find(lc.kernel.site) for lc in schedule.launches if _stores_real(lc.kernel)}
    order: list[str] = []
    for launch in fused.launches:
        top = find(launch.kernel.site)
        if top in real and names[top] not in order:
            order.append(names[top])
    root = {s: names[find(s)] for s in parent}
    return Sites(tuple(order), root)


def _stores_real(kernel) -> bool:
    return any(b.dtype in REAL_DTYPES for b in kernel.outputs)


def convert_loads(body: tuple, buffers: list[Buffer], compute: str) -> tuple:
    """`body` with each load of a real of another type than `compute` converted to it
    (`real`: f64 rounded to f32 to nearest even, f32 and bf16 widened exactly), so that a
    nest computes in its site's type whatever the types of what it reads (a realization's
    sites and parameters: DESIGN §11). A store rounds to its buffer's type, as always."""
    other = {b.id for b in buffers if b.dtype in REAL_DTYPES and compute_type(b.dtype) != compute}
    if not other:
        return body

    def expr(e):
        match e:
            case Load(buf, index):
                load = Load(buf, tuple(i if isinstance(i, Affine) else expr(i) for i in index))
                return Op("real", (load,)) if buf in other else load
            case Op(name, args, attr):
                return Op(name, tuple(expr(a) for a in args), attr)
        return e

    def index(ix: tuple) -> tuple:
        return tuple(i if isinstance(i, Affine) else expr(i) for i in ix)

    def stmt(st):
        match st:
            case Let(name, e):
                return Let(name, expr(e))
            case Store(buf, ix, e):
                return Store(buf, index(ix), expr(e))
            case Loop(var, axis, extent, inner, serial):
                return Loop(var, axis, extent, tuple(stmt(b) for b in inner), serial)
            case Reduce(acc, op, vs, inner, terms, dtype):
                return Reduce(
                    acc, op, vs, tuple(stmt(b) for b in inner), tuple(expr(t) for t in terms), dtype
                )
        raise TypeError(f"not a kernel statement: {st!r}")

    return tuple(stmt(st) for st in body)


def parse_realization(text: str) -> Realization:
    """`--realize T`: a type name (uniform) or `@FILE` (a realization file)."""
    if text.startswith("@"):
        return Realization.read(text[1:])
    _check_type(text, "`--realize`", None)
    return Realization.uniform(text)


def as_realization(value: str | Realization) -> Realization:
    return value if isinstance(value, Realization) else parse_realization(value)


def _types() -> str:
    return ", ".join(TYPES)


def _where(source: str | None) -> str:
    return f"{source}: " if source else ""


def _check_type(t: object, what: str, source: str | None) -> None:
    if t not in TYPES:
        raise RealizationError(
            "E7036",
            f"{_where(source)}{what} is {json.dumps(t)}: a real's type is one of {_types()}",
        )


def _table(value: object, name: str, where: str) -> Pairs:
    if not isinstance(value, dict):
        raise RealizationError(
            "E7035", f"{where}`{name}` is not an object of names to types in a realization"
        )
    for k, v in value.items():
        if not isinstance(v, str):
            raise RealizationError("E7036", f"{where}`{name}` of `{k}` is {json.dumps(v)}")
    return tuple(value.items())


__all__ = [
    "QUANT_TYPES",
    "TYPES",
    "Realization",
    "RealizationError",
    "Sites",
    "as_realization",
    "compute_type",
    "convert_loads",
    "function_of",
    "narrowable_sites",
    "parse_realization",
]
