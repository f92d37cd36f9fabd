"""`presk explain --format html`: explain.html, the pipeline view and the Network tab, one
self-contained page (its CSS and script inline, nothing fetched; docs/explain.md).

**The pipeline view.** The stages as columns: the source, PSK-Core (the functions the entry
reaches), the program after differentiation, and the kernels. Every element carries the
sites it stands for (`data-sites`): a source line the sites whose span starts on it, a Core
instruction its own, an instruction after differentiation its own and the chain of sites it
was made from, a kernel the sites of its steps and what they were made from. A click on an
element highlights, in every column, the elements that share a site with it: what it was
made from and what it became. Each element also links to them (`made from`, `became`). A
kernel shows its PSK-Kernel text, its C and its machine code (the kernel's function
compiled on its own, `-O2 -fno-inline`, and disassembled with `objdump -d`).

**The Network tab.** The entry's calls as boxes (the schedule's call tree), each opening in
place: its formula (the function's signature), its parameters, its work (kernels launched,
bytes of temporaries) and a link to the function in the columns; "Expand all" opens every
box; "Memory" colours each box by its function's share of the peak of live bytes
(presk_cback.memory).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from html import escape
from importlib import resources

from presk_kernel.calls import entry_call
from presk_kernel.ir import Call, Schedule, format_kernel


class Ids:
    """HTML ids for sites: `core-loss_4`, unique however sites look."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}
        self.used: set[str] = set()

    def __call__(self, prefix: str, key: str) -> str:
        full = f"{prefix}:{key}"
        if full not in self.seen:
            base = f"{prefix}-" + re.sub(r"[^A-Za-z0-9_-]", "_", key)
            name, n = base, 1
            while name in self.used:
                n += 1
                name = f"{base}-{n}"
            self.used.add(name)
            self.seen[full] = name
        return self.seen[full]


def _origins(program) -> dict[str, str]:
    """Each site after differentiation -> the site it was made from (when it is a site)."""
    out = {}
    for fn in program.functions:
        for ins in fn.body:
            if ins.origin is not None and "/%" in ins.origin.site:
                out[ins.site] = ins.origin.site
    return out


def _chain(site: str, origins: dict[str, str]) -> list[str]:
    out = [site]
    while out[-1] in origins and origins[out[-1]] not in out:
        out.append(origins[out[-1]])
    return out


def kernel_sources(c: str) -> dict[int, str]:
    """Each `presk_kernel_N`'s C (its comment line and its body) from the entry's C."""
    starts = [
        m.start() for m in re.finditer(r"^/\* .* \*/\nstatic void presk_kernel_\d+\(", c, re.M)
    ]
    out = {}
    for i, at in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else c.find("\nint presk_entry", at)
        text = c[at : end if end > 0 else len(c)].rstrip()
        n = int(re.search(r"presk_kernel_(\d+)\(", text).group(1))
        out[n] = text
    return out


def machine_code(c: str) -> dict[int, str] | str:
    """Each kernel's disassembly (`presk_kernel_N` compiled without inlining), or why
    there is none (no compiler, no objdump)."""
    cc = shutil.which("gcc") or shutil.which("cc")
    objdump = shutil.which("objdump")
    if cc is None or objdump is None:
        return "no machine code: " + ("no C compiler" if cc is None else "objdump is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        src, obj = os.path.join(tmp, "entry.c"), os.path.join(tmp, "entry.o")
        with open(src, "w", encoding="utf-8") as f:
            f.write(c)
        flags = ["-std=c11", "-O2", "-fno-inline", "-ffp-contract=off", "-fPIC", "-c"]
        built = subprocess.run([cc, *flags, src, "-o", obj], capture_output=True, text=True)
        if built.returncode != 0:
            return f"no machine code: {cc} failed: {built.stderr.strip().splitlines()[:1]}"
        dump = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", obj], capture_output=True, text=True
        ).stdout
    out: dict[int, str] = {}
    for m in re.finditer(r"^[0-9a-f]+ <presk_kernel_(\d+)>:\n(.*?)(?=\n\n|\Z)", dump, re.M | re.S):
        out[int(m.group(1))] = m.group(2).rstrip()
    return out


def _el(id_: str, sites: list[str], text: str, links: list[tuple[str, str]] = ()) -> str:
    extra = ""
    if links:
        extra = (
            '<div class="links">'
            + "".join(f'<a href="#{h}">{escape(label)}</a>' for label, h in links)
            + "</div>"
        )
    return (
        f'<div class="el" id="{id_}" data-sites="{escape(" ".join(sites))}">'
        f"{escape(text)}{extra}</div>"
    )


def page(
    file: str,
    entry: str,
    core,
    after,
    ctx,
    reached_core: list[str],
    reached_ad: list[str],
    schedule: Schedule,
    c: str,
    shares: dict[str, float],
) -> str:
    """explain.html's text (the module's docstring): `core` the program before
    differentiation, `after` after it, `ctx` their sources, `c` the entry's C, `shares` each
    function's share of the peak of live bytes."""
    from presk_core.ir import format_instr

    ids = Ids()
    origins = _origins(after)
    became: dict[str, list[tuple[str, str]]] = {}  # site -> (label, id) of what it became
    kernel_of: dict[str, list[int]] = {}
    for i, launch in enumerate(schedule.launches):
        for s in launch.kernel.steps or (launch.kernel.site,):
            kernel_of.setdefault(s, []).append(i)

    # after differentiation: each instruction, what it was made from
    ad_cols = []
    for name in reached_ad:
        fn = after.function(name)
        rows = [
            f'<div class="fn" id="{ids("fn-ad", name)}"><div class="head">{escape(_head(fn))}</div>'
        ]
        for ins in fn.body:
            chain = _chain(ins.site, origins)
            links = []
            if ins.site in origins:
                src = origins[ins.site]
                where = (
                    "core"
                    if any(src == i.site for f in reached_core for i in core.function(f).body)
                    else "ad"
                )
                links.append((f"made from {src}", ids(where, src)))
            for k in kernel_of.get(ins.site, []):
                links.append((f"k{k}", ids("k", str(k))))
            for s in chain[1:]:
                became.setdefault(s, []).append((f"{ins.site}", ids("ad", ins.site)))
            rows.append(_el(ids("ad", ins.site), chain, format_instr(ins).strip(), links))
        rows.append("</div>")
        ad_cols.append("\n".join(rows))

    # PSK-Core: each instruction, what it became
    core_cols, source_sites = [], {}
    for name in reached_core:
        fn = core.function(name)
        rows = [
            f'<div class="fn" id="{ids("fn-core", name)}"><div class="head">{escape(_head(fn))}</div>'
        ]
        for ins in fn.body:
            links = [(f"became {label}", h) for label, h in became.get(ins.site, [])[:6]]
            if ins.span is not None:
                line = _line(ctx, ins.span)
                if line is not None:
                    source_sites.setdefault(line, []).append(ins.site)
                    links.insert(0, ("source", ids("src", f"{line[0]}:{line[1]}")))
            rows.append(_el(ids("core", ins.site), [ins.site], format_instr(ins).strip(), links))
        rows.append("</div>")
        core_cols.append("\n".join(rows))
    for name in reached_ad:  # a site made by differentiation, on its source line too
        for ins in after.function(name).body:
            if ins.span is not None and (line := _line(ctx, ins.span)) is not None:
                source_sites.setdefault(line, []).append(ins.site)

    # the source: a line an element
    src_rows = []
    for path in dict.fromkeys(p for p, _ in source_sites):
        source = ctx.sources.get(path)
        if source is None:
            continue
        src_rows.append(f'<div class="fn"><div class="head">{escape(path)}</div>')
        for n in range(1, source.line_count + 1):
            sites = source_sites.get((path, n), [])
            text = f"{n:>3}  {source.line_text(n)}"
            src_rows.append(_el(ids("src", f"{path}:{n}"), sites, text))
        src_rows.append("</div>")

    # the kernels: their text, C and machine code
    sources = kernel_sources(c)
    code = machine_code(c)
    k_rows = []
    for i, launch in enumerate(schedule.launches):
        k = launch.kernel
        steps = list(k.steps or (k.site,))
        sites = sorted({s for step in steps for s in _chain(step, origins)})
        links = [(step, ids("ad", step)) for step in steps]
        asm = code.get(i, "not found in the object") if isinstance(code, dict) else code
        body = (
            f'<div class="el kernel" id="{ids("k", str(i))}" data-sites="{escape(" ".join(sites))}">'
            f"<b>k{i}</b> {escape(k.name)} at {escape(k.site)}"
            '<div class="links">'
            + "".join(f'<a href="#{h}">{escape(s)}</a>' for s, h in links)
            + "</div>"
            f"<details><summary>PSK-Kernel</summary><pre>{escape(format_kernel(k))}</pre></details>"
            f"<details><summary>C</summary><pre>{escape(sources.get(i, ''))}</pre></details>"
            f"<details><summary>machine code</summary><pre>{escape(asm)}</pre></details></div>"
        )
        k_rows.append(body)

    columns = [
        ("Source", src_rows),
        ("PSK-Core", core_cols),
        ("After differentiation", ad_cols),
        (f"Kernels ({len(schedule.launches)} launches)", k_rows),
    ]
    pipeline = "\n".join(
        f'<div class="col"><h2>{escape(title)}</h2>\n' + "\n".join(rows) + "\n</div>"
        for title, rows in columns
    )
    network = _network(after, schedule, ids, shares)
    css = resources.files("presk_cli").joinpath("page", "explain.css").read_text()
    js = resources.files("presk_cli").joinpath("page", "explain.js").read_text()
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>presk explain: {escape(entry)} of {escape(file)}</title>
<style>
{css}</style></head>
<body>
<header><h1>presk explain: <code>{escape(entry)}</code> of <code>{escape(file)}</code></h1>
<nav><button data-tab="pipeline" class="on">Pipeline</button><button data-tab="network">Network</button></nav></header>
<main>
<section id="pipeline" class="tab on">
{pipeline}
</section>
<section id="network" class="tab">
<div class="tools"><button id="expand-all">Expand all</button><button id="memory">Memory</button></div>
{network}
</section>
</main>
<script>
{js}</script>
</body></html>
"""


def _head(fn) -> str:
    dims = f"{{{' '.join(fn.dims)}}}" if fn.dims else ""
    params = ", ".join(f"{p} : {p.type}" for p in fn.params)
    return f"fn {fn.name}{dims}({params}) -> {fn.result}"


def _line(ctx, span) -> tuple[str, int] | None:
    source = ctx.sources.get(span.file)
    if source is None:
        return None
    return (span.file, source.line_col(span.start)[0])


def _network(after, schedule: Schedule, ids: Ids, shares: dict[str, float]) -> str:
    from presk_cback.network import temporaries

    names = {f.name for f in after.functions}

    def base(name: str) -> str:  # `Block.apply[batch: 4]` -> `Block.apply`
        return re.split(r"[{\[]", name, maxsplit=1)[0]

    def box(call: Call) -> str:
        launches = sum(1 for item in call.body if not isinstance(item, Call))
        fn = base(call.function)
        formula = _head(after.function(fn)) if fn in names else call.function
        link = f'<a href="#{ids("fn-ad", fn)}">in the columns</a>' if fn in names else ""
        inner = "".join(box(item) for item in call.body if isinstance(item, Call))
        return (
            f'<details class="box" data-fn="{escape(fn)}" data-share="{shares.get(call.function, 0):.4f}">'
            f"<summary>{escape(call.function)}</summary>"
            f'<div class="formula">{escape(formula)}</div>'
            f'<div class="work">{len(call.args)} arguments, {len(call.results)} results;'
            f" {launches} kernel{'s' if launches != 1 else ''} launched here,"
            f" {temporaries(schedule, call):,} B of temporaries; {link}</div>{inner}</details>"
        )

    return box(entry_call(schedule))


__all__ = ["kernel_sources", "machine_code", "page"]
