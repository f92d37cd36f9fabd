"""Layout plans (step 17, L1040–L1078): the entry captured, every nest's layout space
costed (`presk plan`), a plan read back (`--plan @FILE` on run, bench, train), every point
measured (`presk autotune`).

- Capture (R17.10): the entry lowered from its shapes alone (the pipeline's `kernel` pass:
  no input, no kernel run); its nests are the launches that read an operand, one per site,
  named as `presk dump --stage core` names their bindings (`scores/%2`).
- A plan (JSON, docs/ir.md "plan"): the entry, its dims, the realization it carries and a
  layout per nest, in the spec's words and as the layout's fields.
- Codes E7110–E7119 (docs/diagnostics.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass

PLAN_KIND = "plan"
PLAN_VERSION = 1
DAY_KIND = "autotune-day"
DAY_VERSION = 1
DEFAULT_MARK = " (the default)"
"""After the text of a nest's default layout, a plan's row where no point of the space is
priced below it and no point is it (the nest is then left out of the plan: a run lays it
out by default)."""
HEADER = (
    "nest                         operands                        space     predicted"
    "          undecided  layout"
)


class PlanError(Exception):
    """A plan that cannot be made or used (E7110–E7119)."""

    def __init__(self, code: str, message: str, help: str | None = None) -> None:
        super().__init__(message)
        self.code, self.help = code, help


@dataclass(frozen=True)
class Nest:
    """A nest of the entry: its site, its kernel (fused, before the layout pass), its
    operands' shapes and how many times the entry launches it; `narrowed`: the run's kernel
    when the `kernel` pass narrowed the product to its live triangle (`kernel` is then the
    whole product, the space's nest), else None."""

    site: str
    kernel: object
    operands: tuple[tuple[int, ...], ...]
    launches: int
    narrowed: object = None

    @property
    def operands_text(self) -> str:
        return " ".join("[" + ", ".join(str(n) for n in shape) + "]" for shape in self.operands)

    @property
    def file(self) -> str:
        return self.site.replace("/%", "__").replace("#", "_") + ".jsonl"


# ---- capture --------------------------------------------------------------------------------


def fused_schedule(core, name: str, dims: dict, realize, args=None):
    """The entry's kernels after fusion, before the layout pass (the pipeline's `kernel`)."""
    from presk_syntax.diagnostics import DiagnosticError
    from presk_syntax.pipeline import Context, EntryOptions

    from presk_cli.native import NativeError, entry_text
    from presk_cli.pipeline import PIPELINE, RUN

    given = None if args is None else tuple(args)
    entry = EntryOptions(entry_text(core, name, dims), tuple(dims.items()), realize, 1, given)
    try:
        return PIPELINE.run("kernel", "", Context(entry=entry), core, first=RUN)
    except DiagnosticError as e:
        d = e.diagnostics[0]
        raise NativeError(d.code, d.message) from None


def nests_of(schedule) -> list[Nest]:
    """The nests of a schedule: each site whose kernel reads an operand, in launch order
    (a kernel that reads nothing, a mask filled from its indices, is no nest: U11); a
    product narrowed to its live triangle as the whole product (`contract.unbanded`)."""
    from presk_kernel.contract import unbanded
    from presk_kernel.layout import nest_names

    out: dict[str, Nest] = {}
    for launch, name in zip(schedule.launches, nest_names(schedule.launches), strict=True):
        k = unbanded(launch.kernel)  # a narrowed product is planned whole (the spec's nests)
        if not k.inputs:
            continue
        if name in out:
            n = out[name]
            out[name] = dataclasses.replace(n, launches=n.launches + 1)
            continue
        narrowed = launch.kernel if k is not launch.kernel else None
        out[name] = Nest(name, k, tuple(b.shape for b in k.inputs), 1, narrowed)
    return list(out.values())


def capture(core, name: str, dims: dict, realize, args=None) -> tuple[object, list[Nest], float]:
    """(the fused schedule, its nests, the seconds it took): from the shapes alone (and a
    training step's hyperparameters, `args`)."""
    t0 = time.perf_counter()
    schedule = fused_schedule(core, name, dims, realize, args)
    nests = nests_of(schedule)
    return schedule, nests, time.perf_counter() - t0


def step_entry(file: str, consts: dict, realize: str):
    """(program, entry name, dims, args) of FILE's training step as `presk train --backend
    native` lowers it (presk_cli.native_train.NativeTrainer: objective, reverse sweep and
    AdamW in one entry), at its first batch."""
    import os

    from presk_ad.step import Trainer
    from presk_syntax.diagnostics import DiagnosticError

    from presk_cli.native import NativeError
    from presk_cli.native_train import NativeTrainer
    from presk_cli.pipeline import PIPELINE, TRAIN
    from presk_cli.train import checked_training, training_context

    ctx = training_context(consts, None)
    try:
        elaborated = checked_training(file, ctx, None)
        errors = [d for d in ctx.diagnostics if d.is_error]
        if errors:
            raise NativeError(errors[0].code, errors[0].message)
        if not elaborated.runs:
            raise PlanError("E7117", f"`{file}` has no `training run`: give --entry")
        core = PIPELINE.run(TRAIN, file, ctx, start=elaborated, first="elab")
    except DiagnosticError as e:
        d = e.diagnostics[0]
        raise NativeError(d.code, d.message) from None
    trainer = Trainer(core, core.trainings[0], os.path.dirname(file), 0, 64, None)
    native = NativeTrainer(trainer, "kernel", realize, 1)
    return native.program, native.name, dict(trainer.dims), native.args


# ---- layouts as JSON ------------------------------------------------------------------------


def layout_fields(layout) -> dict:
    """A Layout's fields as JSON (its GEMM statement left out: the layout pass finds it
    again from the pack)."""
    return {
        "order": list(layout.order),
        "tiles": [[v, n] for v, n in layout.tiles],
        "lanes": layout.lanes,
        "width": layout.width,
        "split": layout.split,
        "threads": layout.threads,
        "depth": layout.depth,
        "pack": list(layout.pack),
        "kblock": layout.kblock,
        "blocks": list(layout.blocks),
        "passes": layout.passes,
    }


def _strs(x) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) for v in x)


def _int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def layout_from_fields(d) -> object:
    """The Layout of `layout_fields`' map; ValueError when it is not one."""
    from presk_kernel.ir import Layout

    keys = set(layout_fields(Layout()))
    if not isinstance(d, dict) or set(d) != keys:
        raise ValueError(f"a layout has the fields {', '.join(sorted(keys))}")
    if not (_strs(d["order"]) and _strs(d["blocks"])):
        raise ValueError("a layout's order and blocks are lists of loop variables")
    tiles = d["tiles"]
    if not isinstance(tiles, list) or not all(
        isinstance(t, list) and len(t) == 2 and isinstance(t[0], str) and _int(t[1]) for t in tiles
    ):
        raise ValueError("a layout's tiles are [variable, size] pairs")
    for f in ("lanes", "split"):
        if d[f] is not None and not isinstance(d[f], str):
            raise ValueError(f"a layout's {f} is a loop variable or null")
    if not all(_int(d[f]) for f in ("width", "threads", "depth", "kblock", "passes")):
        raise ValueError("a layout's width, threads, depth, kblock and passes are integers")
    if not isinstance(d["pack"], list) or not all(_int(i) for i in d["pack"]):
        raise ValueError("a layout's pack is a list of operand numbers")
    return Layout(
        order=tuple(d["order"]),
        tiles=tuple((v, n) for v, n in tiles),
        lanes=d["lanes"],
        width=d["width"],
        split=d["split"],
        threads=d["threads"],
        pack=tuple(d["pack"]),
        kblock=d["kblock"],
        blocks=tuple(d["blocks"]),
        depth=d["depth"],
        passes=d["passes"],
    )


# ---- the plan file --------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    path: str
    entry: str
    dims: dict
    realize: str
    space: str
    workers: int
    nests: list  # {"nest", "operands", "layout", "decisions", "fields", ...}

    def layouts(self) -> dict:
        return {n["nest"]: layout_from_fields(n["fields"]) for n in self.nests}


def read_plan(text: str) -> Plan:
    """The plan of `@FILE` (or FILE); PlanError E7111 when it cannot be read or is not a
    plan of this version."""
    path = text[1:] if text.startswith("@") else text
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise PlanError("E7111", f"the plan `{path}`: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PlanError("E7111", f"the plan `{path}` cannot be read: {e}") from None
    except (json.JSONDecodeError, RecursionError) as e:
        raise PlanError("E7111", f"the plan `{path}` is not JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("presk") != PLAN_KIND:
        raise PlanError("E7111", f"`{path}` is not a plan (presk plan writes one)")
    if doc.get("version") != PLAN_VERSION:
        raise PlanError(
            "E7111",
            f"the plan `{path}` is of version {doc.get('version')!r}; this presk reads"
            f" version {PLAN_VERSION}: make it again with presk plan",
        )
    try:
        entry, dims, realize = doc["entry"], doc["dims"], doc["realize"]
        space, workers, nests = doc["space"], doc["workers"], doc["nests"]
        if not isinstance(entry, str) or not isinstance(realize, str):
            raise ValueError("the entry and the realization are strings")
        if not isinstance(dims, dict) or not all(_int(v) for v in dims.values()):
            raise ValueError("the dims map names to integers")
        if realize not in ("f64", "f32", "bf16"):
            raise ValueError(f"the realization `{realize}` is not f64, f32 or bf16")
        if not isinstance(space, str) or not _int(workers) or not isinstance(nests, list):
            raise ValueError("the space, the workers and the nests")
        for n in nests:
            if not isinstance(n, dict) or not isinstance(n.get("nest"), str):
                raise ValueError("each nest names its site")
            if not isinstance(n.get("decisions"), dict):
                raise ValueError(f"the nest `{n['nest']}` has no decisions")
            layout_from_fields(n.get("fields"))
    except (KeyError, ValueError, TypeError) as e:
        raise PlanError("E7111", f"the plan `{path}` is not well formed: {e}") from None
    return Plan(path, entry, dims, realize, space, workers, nests)


def plan_for(plan: Plan, core, name: str, dims: dict, args=None) -> dict:
    """The plan's layouts by site, for `name` at `dims` (E7112: a plan for another entry
    or other dims; E7110: a nest's layout that is not the point of its space its decisions
    name, or a nest the entry does not have)."""
    from presk_kernel.layout_space import SpaceError, find_point

    if plan.entry != name or {k: int(v) for k, v in plan.dims.items()} != dict(dims):
        have = ",".join(f"{k}={v}" for k, v in plan.dims.items())
        want = ",".join(f"{k}={v}" for k, v in dims.items())
        raise PlanError(
            "E7112",
            f"the plan `{plan.path}` is for `{plan.entry}` at {have or 'no dims'}, not"
            f" `{name}` at {want or 'no dims'}",
            "make a plan for this entry and these dims with presk plan",
        )
    schedule = fused_schedule(core, name, dims, plan.realize, args)
    nests = {n.site: n for n in nests_of(schedule)}
    out = {}
    for n in plan.nests:
        site = n["nest"]
        if site not in nests:
            raise PlanError("E7110", f"the plan lays out `{site}`, not a nest of `{name}`")
        try:
            pt = find_point(nests[site].kernel, n["decisions"], plan.space, plan.workers)
        except SpaceError as e:
            raise PlanError("E7110", f"the plan `{plan.path}`: {e}") from None
        layout = layout_from_fields(n["fields"])
        if layout != dataclasses.replace(pt.layout, gemm=None):
            raise PlanError(
                "E7110",
                f"the plan `{plan.path}` lays out `{site}` as {layout}, not as its decisions"
                f" say ({pt.text}: {pt.layout})",
            )
        out[site] = layout
    return out


def plan_realize(plan_text: str | None, realize: str, given: bool) -> tuple[object, str]:
    """(the plan read, the realization the run takes): the plan's, or --realize when it
    agrees (E7113 when --realize names another)."""
    if plan_text is None:
        return None, realize
    plan = read_plan(plan_text)
    if given and realize != plan.realize:
        raise PlanError(
            "E7113",
            f"--realize {realize} and the plan `{plan.path}`, which carries {plan.realize}:"
            " a plan runs under its own realization",
            "leave --realize out: the plan carries it",
        )
    return plan, plan.realize


# ---- costing --------------------------------------------------------------------------------


def costed(nest: Nest, pts, machine, model) -> list[float]:
    """Each point's predicted seconds for the nest's launches (ill-formed points: inf)."""
    return [
        math.inf if pt.why is not None else priced(nest, pt.layout, machine, model) for pt in pts
    ]


def priced(nest: Nest, layout, machine, model) -> float:
    """A layout's predicted seconds for the nest's launches."""
    from presk_kernel.layout_model import counts

    laid = laid_as_run(nest, layout)
    return model.predict(counts(laid, machine, model.rules)) * nest.launches


def laid_as_run(nest: Nest, layout):
    """The nest laid out as a run under a plan lays it out (presk_kernel.layout.lay_out): a
    narrowed product's live triangle where the layout applies to it or is its GEMM
    statement (`layout.narrowed_gemm`), else the whole product; so a point is priced for
    what it computes."""
    from presk_kernel.layout import apply_layout, check_layout, narrowed_gemm, with_gemm

    k = nest.kernel
    if nest.narrowed is not None:
        lay = layout if layout.gemm is not None else with_gemm(nest.narrowed, layout)
        if check_layout(nest.narrowed, lay) is None:
            return apply_layout(nest.narrowed, lay)
        narrow = narrowed_gemm(nest.narrowed, lay)
        if narrow is not None:
            return apply_layout(nest.narrowed, narrow)
    if layout.pack and layout.gemm is None:
        layout = with_gemm(k, layout)
    return apply_layout(k, layout)


def the_default(nest: Nest, pts, workers: int, machine, model) -> tuple[int | None, float]:
    """(the point whose kernel is the default layout's at `workers`, the layout a run
    compiles without a plan, or None when no point is; its predicted seconds): a plan never
    takes a layout its model prices slower than that (docs/plans.md, issue 23)."""
    from presk_kernel.layout import apply_layout, run_layout
    from presk_kernel.layout_model import counts

    run_k = nest.kernel if nest.narrowed is None else nest.narrowed  # what a run compiles
    laid = apply_layout(run_k, run_layout(run_k, workers))
    price = model.predict(counts(laid, machine, model.rules)) * nest.launches
    for i, pt in enumerate(pts):  # the point a run under the plan lays out as the default
        if pt.why is None and laid_as_run(nest, pt.layout).body == laid.body:
            return i, price
    return None, price


def measured_gemms(samples: list[dict]) -> dict[tuple, list[float]]:
    """The profile's timed GEMM statements: their product and workers
    (`layout_model.gemm_shape`) → their calls' times in seconds (the latest sample of a
    product where several are)."""
    out: dict[tuple, list[float]] = {}
    for smp in samples:
        shape = smp.get("gemm")
        if isinstance(shape, list) and smp.get("times_us"):
            out[tuple(shape)] = [t * 1e-6 for t in smp["times_us"]]
    return out


def departs_measured(nest: Nest, layout, workers: int, measured: dict[tuple, list[float]]) -> bool:
    """Whether a plan may take `layout` for the nest where a run compiles its default at
    `workers`, as far as the profile's measurements go (issue 23: a plan never takes what its
    own measurement says is slower). When both are the GEMM statement of one product on
    different workers (what the model prices by rates per worker count), only if the profile
    timed both and the layout's calls are faster beyond their noise: the medians apart by
    more than twice the larger median absolute deviation, as `presk rank` distinguishes a
    pair (so an unmeasured worker count, or one measured within the noise, keeps the
    default); any other layout, yes (the model's rule decides)."""
    import statistics

    from presk_kernel.layout import apply_layout, run_layout
    from presk_kernel.layout_model import gemm_shape

    run_k = nest.kernel if nest.narrowed is None else nest.narrowed
    mine = gemm_shape(laid_as_run(nest, layout))
    theirs = gemm_shape(apply_layout(run_k, run_layout(run_k, workers)))
    if mine is None or theirs is None or mine[:5] != theirs[:5] or mine == theirs:
        return True
    a, b = measured.get(tuple(mine)), measured.get(tuple(theirs))
    if not a or not b:
        return False
    ma, mb = statistics.median(a), statistics.median(b)

    def mad(xs: list[float], m: float) -> float:
        return statistics.median(abs(x - m) for x in xs)

    return mb - ma > 2 * max(mad(a, ma), mad(b, mb))


def choose(seconds: list[float], u: float, default: tuple[int | None, float] | None = None):
    """(the best point, the points within 1 + u of the choice's price, the choice included):
    with `default` (`the_default`'s), None for the default layout itself when no point is it
    (the space cannot express it, and its price is an extrapolation: an elementwise nest's
    lanes, priced by rates fitted on contractions); else the default's point unless the best
    point is priced below it by more than the model's uncertainty (its price times 1 + u
    below the default's: within 1 + u the model cannot tell them apart, and the default is
    what a run measured)."""
    best = min(range(len(seconds)), key=lambda i: (seconds[i], i))
    chosen = seconds[best]
    if default is not None and (default[0] is None or not seconds[best] * (1 + u) < default[1]):
        best = default[0] if default[0] is not None else None
        chosen = seconds[best] if best is not None else default[1]
    within = sum(1 for s in seconds if s <= chosen * (1 + u))
    return best, max(1, within)


def row(nest: Nest, points: int, predicted_s: float, undecided: int, text: str) -> str:
    """R17.12's row."""
    return (
        f"{nest.site:<28} {nest.operands_text:<24}{points:>6} points"
        f"{predicted_s * 1e6:>12.2f} µs{undecided:>5} within 1 + u  {text}"
    )


__all__ = [
    "DEFAULT_MARK",
    "HEADER",
    "Nest",
    "Plan",
    "PlanError",
    "capture",
    "choose",
    "costed",
    "layout_fields",
    "layout_from_fields",
    "departs_measured",
    "measured_gemms",
    "priced",
    "the_default",
    "nests_of",
    "plan_for",
    "plan_realize",
    "read_plan",
    "row",
]


# ---- make plan-check ------------------------------------------------------------------------


def default_plan(schedule, threads: int = 1) -> dict:
    """A plan stating every nest's default layout (the layout a run compiles at `threads`,
    presk_kernel.layout.run_layout), through the plan file's fields and back."""
    from presk_kernel.layout import nest_names, run_layout

    sites = {nest.site for nest in nests_of(schedule)}
    out = {}
    for launch, site in zip(schedule.launches, nest_names(schedule.launches), strict=True):
        if site in sites and site not in out:  # the run's own kernel (a narrowed one too)
            doc = json.loads(json.dumps(layout_fields(run_layout(launch.kernel, threads))))
            out[site] = layout_from_fields(doc)
    return out


def plan_check(core, name: str, dims: dict, realize: str = "f64", threads: int = 1, args=None):
    """(kernels, the same bytes): the entry lowered without a plan and under `default_plan`,
    compared as the `kernel` document encodes them and as the C emitter writes them."""
    from presk_cback.host import entry_source
    from presk_kernel.codec import encode_kernel
    from presk_kernel.layout import lay_out

    fused = fused_schedule(core, name, dims, realize, args)
    plain = lay_out(fused, threads)
    planned = lay_out(fused, threads, default_plan(fused, threads))
    same = encode_kernel(plain) == encode_kernel(planned)
    same = same and entry_source(plain) == entry_source(planned)
    return len(plain.launches), same
