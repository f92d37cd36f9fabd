"""The passes `sched` and `kernel` of `presk dump` (presk_core.passes.PASSES): an entry's
fusion groups and the launches they remove, and the kernels it launches.

Both lower the entry named by `--entry` at the dimensions of `--dim`, as `presk run`
takes them, from the core document alone (the shapes of θ from the program's layouts, no
interpreter run), in the realization `--realize` (f64 by default). The context carries
them in `ctx.options` (`entry`, `dims`, `realize`).
"""

from __future__ import annotations

from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Severity

from presk_kernel.fuse import Group, fuse
from presk_kernel.ir import Schedule, format_schedule


def _error(code: str, message: str) -> DiagnosticError:
    return DiagnosticError(Diagnostic(code, Severity.ERROR, message))


def entry_schedule(core, ctx) -> Schedule:
    """The schedule of the entry in `ctx.options`, before fusion."""
    from presk_core.run import EntryError, parse_entry

    from presk_kernel.lower import LowerError, lower_entry

    options = ctx.options
    entry = options.get("entry")
    if not entry:
        raise _error("E7001", "`presk dump --stage sched|kernel` needs an entry: give `--entry F`")
    try:
        e = parse_entry(entry, core, None, dict(options.get("dims", {})))
        dims = dict(e.dims) | dict(e.prefix)
        return lower_entry(core, e.function.name, dims, None, options.get("realize", "f64"))
    except EntryError as err:
        raise _error("E7001", str(err)) from None
    except LowerError as err:
        raise _error(err.code, f"cannot lower `{entry}` to kernels: {err}") from None


def format_groups(schedule: Schedule, fused: Schedule, groups: list[Group]) -> str:
    """The `sched` stage: every launch after fusion, what each fused kernel computes, and
    the count of launches fusion removes."""
    before, after = len(schedule.launches), len(fused.launches)
    removed = before - after
    share = round(100 * removed / before) if before else 0
    dims = ", ".join(f"{k} = {v}" for k, v in schedule.dims)
    lines = [
        f"-- entry {schedule.entry}{f' at {dims}' if dims else ''}: {after} kernel launches,"
        f" {before} without fusion ({share}% removed), {len(groups)} fusion groups"
    ]
    by_site = {g.site: g for g in groups}
    for i, launch in enumerate(fused.launches):
        k = launch.kernel
        lines.append(f"k{i:<4} {k.name:<32} {k.site}")
        g = by_site.get(k.site) if k.steps else None
        if g is not None:
            for name, site in zip(g.names, g.steps, strict=True):
                lines.append(f"        {name:<30} {site}")
    return "\n".join(lines) + "\n"


def sched_pass(core, ctx) -> str:
    schedule = entry_schedule(core, ctx)
    fused, groups = fuse(schedule)
    return format_groups(schedule, fused, groups)


def kernel_pass(core, ctx) -> str:
    """The laid-out kernels a native run compiles (one thread: `presk run`'s default)."""
    from presk_kernel.layout import lay_out

    fused, _ = fuse(entry_schedule(core, ctx))
    return format_schedule(lay_out(fused, ctx.options.get("threads", 1)))
