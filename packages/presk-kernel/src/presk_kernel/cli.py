"""`presk-kernel --entry E --dim N=V… [--realize T]`: a `core` document on standard input,
the `kernel` document of the entry on standard output (the stage program of the passes
`kernel` and `layout`, presk_kernel.passes: the laid-out kernels `presk dump --stage
kernel` prints); the text of the stage `sched`."""

from __future__ import annotations

import sys

from presk_kernel.fuse import Group
from presk_kernel.ir import Schedule


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
    lines += narrowable_lines(schedule, fused, groups)
    return "\n".join(lines) + "\n"


def narrowable_lines(schedule: Schedule, fused: Schedule, groups: list[Group]) -> list[str]:
    """The entry's narrowable sites, the names a realization's `sites` gives types to
    (presk_kernel.realization), each with the sites fused into it."""
    from presk_kernel.realization import narrowable_sites

    sites = narrowable_sites(schedule, fused, groups)
    members: dict[str, list[str]] = {}
    for site, root in sites.members.items():
        members.setdefault(root, []).append(site)
    lines = [f"-- {len(sites.narrowable)} narrowable sites (a realization's `sites`)"]
    for site in sites.narrowable:
        fused_in = members.get(site)
        lines.append(f"   {site}" + (f"  (with {', '.join(fused_in)})" if fused_in else ""))
    return lines


def kernel_main(argv: list[str] | None = None) -> int:
    from presk_ad.passes import UP_TO_AD
    from presk_syntax.pipeline import Pipeline, stage_main

    from presk_kernel import passes as kernel

    return stage_main(Pipeline(UP_TO_AD + kernel.PASSES), "presk-kernel", argv)


if __name__ == "__main__":
    sys.exit(kernel_main())
