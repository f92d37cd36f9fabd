"""A day of measurement (`presk autotune --out DIR`) as `presk rank` and `presk reprice`
read it: `DIR/day.json` and one `DIR/<nest>.jsonl` per nest (docs/plans.md, "The day
directory"). A day that cannot be read is E7124; two days that do not measure the same
points of the same entry, or a day of another entry, E7125.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from presk_kernel.layout_model import ModelError, check_counts

DAY_KIND = "autotune-day"
DAY_VERSION = 1
POINT_FIELDS = ("point", "decisions", "text", "layout", "predicted_us", "counts", "times_us")


@dataclass
class Point:
    index: int
    decisions: dict
    predicted_us: float
    times_us: list[float]
    warmup: int
    launches: int
    same_bits: bool
    raw: dict

    @property
    def median(self) -> float:
        return statistics.median(self.times_us)

    @property
    def mad(self) -> float:
        m = self.median
        return statistics.median(abs(t - m) for t in self.times_us)


@dataclass
class Nest:
    name: str
    file: str
    operands: list
    kind: str
    points: list[Point]
    raw: dict
    default_060: Point | None = None  # the 0.6.0 default, timed beside the space (P)


@dataclass
class Day:
    path: str
    doc: dict
    nests: list[Nest]

    @property
    def entry(self) -> str:
        return self.doc["entry"]

    @property
    def config(self) -> str:
        """`B=16,T=256`: the dimensions as the report names a configuration."""
        return ",".join(f"{k}={v}" for k, v in self.doc["dims"].items())

    @property
    def realize(self) -> str:
        return str(self.doc["realize"])

    @property
    def u(self) -> float:
        return float(self.doc["profile"].get("u", 0.0))  # checked when the day is read


def nest_file(nest: str) -> str:
    """`scores/%2` → `scores__2.jsonl` (R17.23)."""
    return nest.replace("/%", "__") + ".jsonl"


def _bad(path: str, why: str) -> ModelError:
    return ModelError("E7124", f"`{path}` is not a day of `presk autotune`: {why}")


def _number(v, what: str, positive: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{what} is not a finite number")
    if v < 0 or (positive and v <= 0):
        raise ValueError(f"{what} is not {'positive' if positive else 'a natural amount'}")
    return float(v)


def _count(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{what} is not a natural number")
    return v


def _point(line: str, where: str) -> Point:
    try:
        d = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{where} is not JSON: {e}") from None
    if not isinstance(d, dict) or any(f not in d for f in POINT_FIELDS):
        raise ValueError(f"{where} is not a point ({', '.join(POINT_FIELDS)})")
    if not isinstance(d["decisions"], dict):
        raise ValueError(f"{where}: `decisions` is not a map")
    times = d["times_us"]
    if not isinstance(times, list) or not times:
        raise ValueError(f"{where}: `times_us` is not a list of times")
    times = [_number(t, f"{where}: a time", positive=True) for t in times]
    check_counts(d["counts"])
    return Point(
        _count(d["point"], f"{where}: `point`"),
        d["decisions"],
        _number(d["predicted_us"], f"{where}: `predicted_us`"),
        times,
        _count(d.get("warmup", 0), f"{where}: `warmup`"),
        _count(d.get("launches", len(times)), f"{where}: `launches`"),
        d.get("same_bits", True) is True,
        d,
    )


def _kind(n: dict, points: list[Point]) -> str:
    kind = n.get("kind")
    if isinstance(kind, str):
        return kind
    return "contraction" if any(p.decisions.get("tile") is not None for p in points) else "other"


def read_day(path: str) -> Day:
    """The day in the folder `path` (E7124 when it is not one)."""
    folder = Path(path)
    try:
        doc = json.loads((folder / "day.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _bad(path, "no day.json in it") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _bad(path, f"day.json cannot be read ({e})") from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise _bad(path, f"day.json is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("presk") != DAY_KIND:
        raise _bad(path, 'day.json is not {"presk": "autotune-day", …}')
    if doc.get("version") != DAY_VERSION:
        raise _bad(
            path, f"day.json is of version {str(doc.get('version'))[:20]}, not {DAY_VERSION}"
        )
    try:
        for f in ("entry", "dims", "realize", "space", "profile", "nests"):
            if f not in doc:
                raise ValueError(f"day.json has no field `{f}`")
        if not isinstance(doc["entry"], str) or not isinstance(doc["nests"], list):
            raise ValueError("`entry` is a string and `nests` a list")
        dims = doc["dims"]
        if not isinstance(dims, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in dims.values()
        ):
            raise ValueError("`dims` is not a map of dimensions to naturals")
        if not isinstance(doc["profile"], dict):
            raise ValueError("`profile` is not a map")
        _number(doc["profile"].get("u", 0.0), "the profile's `u`")
        for f in ("sweep_s", "costed_s", "captured_s"):
            _number(doc.get(f, 0.0), f"`{f}`")
        for f in ("checked_interp", "differing"):
            _count(doc.get(f, 0), f"`{f}`")
        nests = []
        for i, n in enumerate(doc["nests"]):
            if not isinstance(n, dict) or not isinstance(n.get("nest"), str):
                raise ValueError(f"nest {i} of day.json is not a nest")
            file = n.get("file") or nest_file(n["nest"])
            if not isinstance(file, str) or "/" in file.replace(str(folder) + "/", "", 1):
                file = nest_file(n["nest"])
            jsonl = folder / Path(file).name
            try:
                lines = jsonl.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as e:
                raise ValueError(f"`{jsonl.name}` cannot be read ({e})") from None
            points = [_point(s, f"{jsonl.name}:{k + 1}") for k, s in enumerate(lines) if s.strip()]
            if [p.index for p in points] != list(range(len(points))):
                raise ValueError(f"`{jsonl.name}`'s points are not numbered 0, 1, … in order")
            if "points" in n and n["points"] != len(points):
                raise ValueError(
                    f"`{n['nest']}` has {len(points)} points in {jsonl.name}, day.json says "
                    f"{str(n['points'])[:20]}"
                )
            ops = n.get("operands", [])
            nest = Nest(n["nest"], jsonl.name, ops, _kind(n, points), points, n)
            if "default_060" in n:  # statement P's side (autotune, docs/plans.md)
                d = n["default_060"]
                if not isinstance(d, dict):
                    raise ValueError(f"`{n['nest']}`'s `default_060` is not a point")
                d = dict(d, point=0, decisions=d.get("decisions", {}))
                nest.default_060 = _point(json.dumps(d), f"`{n['nest']}`'s `default_060`")
            nests.append(nest)
    except ValueError as e:
        raise _bad(path, str(e)) from None
    return Day(path, doc, nests)


def check_days(one: Day, two: Day, entry: str) -> None:
    """E7125 unless both days measure the same points of `entry` at the same configuration."""
    for d in (one, two):
        if d.entry != entry:
            raise ModelError(
                "E7125", f"`{d.path}` measures `{d.entry}`, not `{entry}`", "give --entry the days'"
            )
    for f in ("dims", "realize", "space"):
        if one.doc[f] != two.doc[f]:
            raise ModelError(
                "E7125",
                f"the days differ in `{f}`: {json.dumps(one.doc[f])[:60]} in `{one.path}`, "
                f"{json.dumps(two.doc[f])[:60]} in `{two.path}`",
            )
    a = [(n.name, len(n.points)) for n in one.nests]
    b = [(n.name, len(n.points)) for n in two.nests]
    if a != b:
        raise ModelError(
            "E7125",
            f"the days measure other nests: {_nests(a)} in `{one.path}`, {_nests(b)} in "
            f"`{two.path}`",
        )
    for n1, n2 in zip(one.nests, two.nests, strict=True):
        for p1, p2 in zip(n1.points, n2.points, strict=True):
            if p1.decisions != p2.decisions:
                raise ModelError(
                    "E7125",
                    f"point {p1.index} of `{n1.name}` is another layout in the two days",
                )


def _nests(items) -> str:
    return ", ".join(f"{n} ({k} points)" for n, k in items) or "none"


__all__ = ["Day", "Nest", "Point", "check_days", "nest_file", "read_day"]
