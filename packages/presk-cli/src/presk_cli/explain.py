"""`presk explain FILE --entry E --dim … --out DIR [--budget ε] [--profile P]` (L517–L540):
one compilation as a document, DIR/explain.md, every stage's representation under the
specification's headings, each section with the command that prints it.

Each section runs its command in this process (`presk_cli.main.main`, its output captured):
the listing under the command is that command's output, so a reader can run it again and
compare. A command that cannot run for this entry (a stage that refuses it, a training run
the file does not have) leaves its section a sentence saying why, with the diagnostic's
first line. A listing longer than `LONG` lines goes to `DIR/listings/` and the section shows
its head. Beside it, `DIR/network.svg`: the entry's calls as boxes and arrows
(presk_cli.network). Nothing is written outside DIR; DIR is written whole or not at all (a
temporary folder renamed).
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import sys
import tempfile
from dataclasses import dataclass, field

import click

from presk_cli.commands import CONST, _consts, _dims

LONG = 120  # lines: a longer listing goes to listings/, the section shows its head
HEAD = 40


@dataclass
class Document:
    """What explain writes: the sections' markdown, the listings, the commands."""

    folder: str  # where listings are written while the document is made (a temporary)
    out: str  # DIR as the user named it (what the commands say)
    sections: list[str] = field(default_factory=list)
    listings: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)  # each listing's text, by name

    def section(self, heading: str, *parts: str) -> None:
        self.sections.append("\n\n".join([f"## {heading}", *(p for p in parts if p)]))

    def listing(self, argv: list[str], name: str, keep=None, errors=False) -> tuple[int, str]:
        """`presk ARGV` run here; its output as a fenced block (its head, and the whole in
        listings/NAME.txt, when long), or the sentence of why it failed; `errors`: what it
        prints on standard error first (a report), then its output."""
        command = "presk " + shlex.join(argv)
        self.commands.append(command)
        code, out, err = capture(argv)
        text = out if keep is None else keep(out)
        if errors:
            text = err + text
        self.facts[name] = text
        shown = f"```sh\n{command}\n```"
        if code != 0:
            why = (err.strip().splitlines() or [f"exit {code}"])[0]
            return code, f"{shown}\n\nThis stage cannot run for this entry: `{why}`."
        if err.strip() and not out.strip():
            text = err
        lines = text.rstrip("\n").splitlines()
        if len(lines) > LONG:
            path = os.path.join("listings", f"{name}.txt")
            os.makedirs(os.path.join(self.folder, "listings"), exist_ok=True)
            with open(os.path.join(self.folder, path), "w", encoding="utf-8") as f:
                f.write(text)
            self.listings.append(path)
            head = "\n".join(lines[:HEAD])
            more = f"… {len(lines) - HEAD} more lines: the whole listing is [{path}]({path})."
            return code, f"{shown}\n\n```text\n{head}\n```\n\n{more}"
        return code, f"{shown}\n\n```text\n{text.rstrip()}\n```" if text.strip() else shown


def capture(argv: list[str]) -> tuple[int, str, str]:
    """`presk ARGV` in this process: its exit status, standard output and error."""
    from presk_cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def reached(program, entry: str) -> list[str]:
    """The functions `entry` reaches in `program` (calls, folds, grads), in program order."""
    names = {f.name for f in program.functions}
    seen, todo = set(), [entry]
    while todo:
        name = todo.pop()
        if name in seen or name not in names:
            continue
        seen.add(name)
        for ins in program.function(name).body:
            callee = ins.attr("fn")
            if isinstance(callee, str):
                todo.append(callee)
    return [f.name for f in program.functions if f.name in seen]


def _functions(text: str, names: list[str]) -> str:
    """The `fn` blocks of a core dump whose function is one of `names`."""
    out, keep = [], False
    for line in text.splitlines():
        if line.startswith("fn "):
            head = line[3:].split("(", 1)[0].split("{", 1)[0]
            keep = head in names
        if keep:
            out.append(line)
    return "\n".join(out) + "\n"


@click.command(
    short_help="One compilation as a document: every stage's representation and the reasons"
    " for its decisions, in DIR/explain.md"
)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--entry", required=True, help="The function: `f`, `M.f` or `M{3, 2}.f`.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="A dimension.")
@CONST
@click.option("--out", required=True, type=click.Path(file_okay=False), help="The folder DIR.")
@click.option("--budget", type=float, metavar="EPS", help="Solve a realization under EPS (§6).")
@click.option(
    "--profile",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A machine profile (presk bench --calibrate): the plan of §8.",
)
@click.option(
    "--format",
    "form",
    type=click.Choice(["md", "html"]),
    default="md",
    show_default=True,
    help="`html`: also explain.html, the pipeline view and the Network tab (one page).",
)
def explain(file, entry, dims, consts, out, budget, profile, form) -> None:
    """Compile the entry E of FILE and write every stage of it as one document,
    DIR/explain.md, each section with the command that prints it (docs/explain.md)."""
    from presk_core.run import EntryError, RunError, parse_entry
    from presk_syntax.diagnostics import DiagnosticError, emit
    from presk_syntax.pipeline import Context

    from presk_cli.commands import entry_fail
    from presk_cli.pipeline import PIPELINE, RUN

    if budget is not None and not (budget > 0 and budget < float("inf")):
        raise click.BadParameter(f"{budget!r} is not a positive number", param_hint="--budget")
    values = _dims(dims)
    ctx = Context(consts=_consts(consts))
    try:  # the entry must exist and take these dimensions: the rest is sections
        core = PIPELINE.run(RUN, file, ctx)
        e = parse_entry(entry, core, None, values)
    except DiagnosticError as err:
        emit(err.diagnostics, ctx.sources)
        sys.exit(1)
    except (EntryError, RunError) as err:
        entry_fail("explain", err, ctx.sources)
    from presk_core import data as D

    with D.atomic_dir(out) as work:  # DIR whole or not at all (an existing one replaced)
        doc = Document(work, out)
        flags = [a for d, v in values.items() for a in ("--dim", f"{d}={v}")]
        flags += [a for c in consts for a in ("--const", c)]
        made = write(doc, file, entry, flags, e, (core, ctx), budget, profile, form)
    n = len(doc.sections) - 1  # the appendix is not a section
    listings = f"{len(doc.listings)} listing{'s' if len(doc.listings) != 1 else ''}"
    artifacts = f"{len(made)} artifact{'s' if len(made) != 1 else ''}"
    click.echo(
        f"presk explain: wrote {os.path.join(out, 'explain.md')} ({n} sections, {listings}"
        f" under listings/, {artifacts})"
    )


def write(doc: Document, file, entry, flags, e, compiled, budget, profile, form="md") -> list[str]:
    """Every section into doc, explain.md and the artifacts into doc.folder; the artifacts'
    names. `compiled`: the entry's program after differentiation and its context."""
    from presk_cback.network import network_svg

    from presk_cli.native import NativeError, lower

    core, ctx = compiled
    name = e.function.name
    why = ""
    try:
        schedule = lower(core, name, dict(e.dims) | dict(e.prefix), None, "f64")
    except NativeError as err:
        schedule, why = None, f"[{err.code}] {err}"
    at = [file, "--entry", entry, *flags]
    doc.section(
        "The parameters",
        "| | |\n|---|---|\n"
        f"| file | `{file}` |\n| entry | `{entry}` |\n"
        f"| dimensions | {', '.join(f'{d} = {v}' for d, v in dict(e.dims).items()) or '—'} |\n"
        f"| budget | {budget if budget is not None else 'none: every site in f64'} |\n"
        f"| profile | {profile or 'none: every nest at its default layout'} |",
    )
    summary_at = len(doc.sections)
    source = open(file, encoding="utf-8").read()
    doc.section(
        "1 The source",
        f"`{file}`, {len(source.splitlines())} lines:",
        f"```presk\n{source.rstrip()}\n```",
    )
    _, elab = doc.listing(["dump", file, "--stage", "elab", *_consts_of(flags)], "elab")
    doc.section(
        "2 Elaboration",
        "The elaborated program: imports, constants, instances, signatures.",
        elab,
    )
    names = reached(core, name)
    from presk_syntax.pipeline import Context

    from presk_cli.pipeline import PIPELINE

    lowered = PIPELINE.run("core", file, Context(consts=ctx.consts))  # before differentiation
    before = reached(lowered, name)
    _, listing = doc.listing(
        ["dump", file, "--stage", "core", *_consts_of(flags)],
        "core",
        keep=lambda text: _functions(text, before),
    )
    doc.section(
        "3 PSK-Core",
        f"The functions `{name}` reaches ({len(before)}), one typed instruction per line,"
        " explicit parameter trees (docs/ir.md).",
        listing,
    )
    generated = [n for n in names if n not in before]
    _, listing = doc.listing(
        ["dump", file, "--stage", "core-after-ad", "--sites", *_consts_of(flags)],
        "core-after-ad",
        keep=lambda text: _functions(text, generated),
    )
    doc.section(
        "4 Differentiation",
        f"The functions differentiation made that `{name}` reaches ({len(generated)}): each"
        " `.vjp` a `.fwd` and a `.bwd` (`--remat residuals`), each instruction with its site"
        " and the rule that made it."
        if generated
        else f"`{name}` differentiates nothing: no function is generated.",
        listing,
    )
    _, listing = doc.listing(["run", *at, "--opt"], "optimizer", errors=True)
    doc.section(
        "5 The e-graph optimizer",
        "The program rewritten by the exact rules (docs/optimizer.md): its report, then the"
        " entry's value computed from the rewritten program.",
        listing,
    )
    doc.section("6 Precision: from a budget to a type per site", *_precision(doc, at, budget))
    code, listing = doc.listing(["dump", *at, "--stage", "sched"], "sched")
    doc.section(
        "7 Fusion",
        "The fusion groups: the kernels the entry launches, each with the steps it computes,"
        " and the narrowable sites (what a realization gives a type).",
        listing,
    )
    planned = []  # `--plan @DIR/plan.json` for §11, when §8 made one
    if profile is None:
        parts = ["Nothing is planned (no `--profile`): every nest runs at its default layout."]
    else:
        plan_path = os.path.join(doc.folder, "plan.json")
        code, listing = doc.listing(["plan", *at, "--profile", profile, "--out", plan_path], "plan")
        parts = [
            f"Every point of every nest's layout space costed by the layout model of `{profile}`"
            " (docs/plans.md), the best chosen; nothing is compiled or timed:",
            listing,
        ]
        if code == 0:
            planned = ["--plan", "@" + plan_path]
    _, listing = doc.listing(["dump", *at, "--stage", "layout"], "layout")
    parts += ["The default layouts, as the `layout` pass applies them:", listing]
    doc.section("8 The machine and the layout plan", *parts)
    _, kernels = doc.listing(["dump", *at, "--stage", "kernel"], "kernels")
    _, c = doc.listing(["dump", *at, "--stage", "c"], "c")
    doc.section(
        "9 The kernels and the host",
        "PSK-Kernel: the kernels the entry launches, each under the site that launches it;"
        " then their C and the host function that calls them.",
        kernels,
        c,
    )
    doc.section("10 Targets", *_targets(doc, file, at, flags))
    _, listing = doc.listing(["bench", *at, "--repeat", "3", *planned], "bench")
    doc.section(
        "11 Measured",
        "The entry timed on every executor (median and best of 3 calls after an untimed"
        " one); the times are this machine's, at the moment explain ran.",
        listing,
    )
    doc.section("12 Sites through every stage", _sites(core, ctx, name, schedule, why))
    doc.sections.insert(summary_at, _summary(doc, file, name, names, before, code))
    doc.section(
        "Appendix: the commands",
        "Each listing above is the output of one of these, run from the same folder:",
        "```sh\n" + "\n".join(doc.commands) + "\n```",
    )
    # the commands name DIR, where their files end up, not the folder explain writes in
    text = ("\n\n".join(doc.sections) + "\n").replace(doc.folder, doc.out)
    with open(os.path.join(doc.folder, "explain.md"), "w", encoding="utf-8") as f:
        f.write(text)
    if schedule is None:
        return []
    with open(os.path.join(doc.folder, "network.svg"), "w", encoding="utf-8") as f:
        f.write(network_svg(schedule))
    if form != "html":
        return ["network.svg"]
    with open(os.path.join(doc.folder, "explain.html"), "w", encoding="utf-8") as f:
        f.write(_html(file, entry, (lowered, core), ctx, before, names, schedule))
    return ["network.svg", "explain.html"]


def _html(file, entry, programs, ctx, before, names, schedule) -> str:
    """explain.html (presk_cli.explain_html): `programs`, the entry's program before and after
    differentiation; the entry's C; each function's share of the peak of live bytes."""
    from presk_cback.host import entry_source
    from presk_cback.memory import memory

    from presk_cli.explain_html import page

    core, after = programs
    m = memory(schedule, ())
    shares = {f.function: f.at_peak / m.peak if m.peak else 0.0 for f in m.functions}
    return page(
        file, entry, core, after, ctx, before, names, schedule, entry_source(schedule), shares
    )


def _consts_of(flags: list[str]) -> list[str]:
    out = []
    for i in range(0, len(flags) - 1, 2):
        if flags[i] == "--const":
            out += flags[i : i + 2]
    return out


def _precision(doc: Document, at: list[str], budget) -> list[str]:
    env = os.path.join(doc.out, "envelope.json")
    tmp_env = os.path.join(doc.folder, "envelope.json")
    parts = ["The envelope: every site's magnitude on the exact interpreter."]
    code, listing = doc.listing(["calibrate", "--precision", *at, "--out", tmp_env], "envelope")
    parts.append(listing.replace(tmp_env, env))
    if code != 0:
        return parts
    realize = "f64"
    if budget is not None:
        tmp_real = os.path.join(doc.folder, "realization.json")
        real = os.path.join(doc.out, "realization.json")
        code, listing = doc.listing(
            [
                "solve",
                at[0],
                "--precision",
                tmp_env,
                "--budget",
                repr(budget),
                "--out",
                tmp_real,
                *_consts_of(at[3:]),
            ],  # fmt: skip
            "solve",
        )
        parts += [
            f"The realization of least bytes within the budget {budget}:",
            listing.replace(tmp_env, env).replace(tmp_real, real),
        ]
        if code == 0:
            realize = "@" + tmp_real
    else:
        parts.append("No budget: every site is in f64.")
    code, listing = doc.listing(
        ["check", "--precision", tmp_env, at[0], "--realize", realize, *_consts_of(at[3:])],
        "bound",
    )
    real_shown = "@" + os.path.join(doc.out, "realization.json")
    listing = listing.replace(tmp_env, env).replace(
        realize, real_shown if realize != "f64" else realize
    )
    parts += ["A sound bound on the error of that realization (docs/precision.md):", listing]
    return parts


def _targets(doc: Document, file, at, flags) -> list[str]:
    parts = []
    with tempfile.TemporaryDirectory() as tmp:
        for target, argv, label in (
            ("pytorch", ["export", file, "--target", "pytorch", *_consts_of(flags)], "PyTorch"),
            ("c", ["export", *at, "--target", "c"], "C"),
        ):
            where = os.path.join(tmp, target)
            shown = os.path.join(doc.out, "targets", target)
            _, listing = doc.listing([*argv, "-o", where], f"export-{target}")
            doc.commands[-1] = doc.commands[-1].replace(where, shown)
            parts += [f"{label}:", listing.replace(where, shown)]
    parts.append(
        "(explain runs each export in a temporary folder: run the command to keep its files.)"
    )
    return parts


def _sites(program, ctx, name: str, schedule, why: str) -> str:
    """The table of every site of the entry's functions after differentiation: what it was
    made from, its source, and the kernel that computes it."""
    from presk_core.ir import format_instr

    if schedule is None:
        return f"The kernels cannot be made for this entry: `{why}`."
    kernel_of: dict[str, str] = {}
    for i, launch in enumerate(schedule.launches):
        for site in launch.kernel.steps or (launch.kernel.site,):
            kernel_of.setdefault(site, f"k{i}")
    rows = ["| site | instruction | made from | source | kernel |", "|---|---|---|---|---|"]
    for fn in reached(program, name):
        for ins in program.function(fn).body:
            if ins.op in ("field", "get", "tuple", "record"):
                continue
            made = str(ins.origin) if ins.origin is not None else "the source"
            where = _span_text(ctx, ins.span) if ins.span is not None else ""
            text = format_instr(ins).strip().replace("|", "\\|")
            rows.append(
                f"| `{ins.site}` | `{text}` | {made} | {where} | {kernel_of.get(ins.site, '—')} |"
            )
    return (
        "Every instruction of the functions the entry reaches, after differentiation: its"
        " site, what it was made from (the source, or a rule of a pass and the site it"
        " started from), its place in the source, and the kernel that computes it (`—`: a"
        " value no kernel computes, fused away or folded).\n\n" + "\n".join(rows)
    )


def _span_text(ctx, span) -> str:
    """`file:line:col` and the source's text there (its first line, shortened)."""
    source = ctx.sources.get(span.file)
    if source is None:
        return f"{os.path.basename(span.file)}"
    line, col = source.line_col(span.start)
    text = source.text.encode("utf-8")[span.start : span.end].decode("utf-8", "replace")
    text = text.splitlines()[0] if text.strip() else ""
    text = text if len(text) <= 40 else text[:39] + "…"
    shown = f" `{text}`".replace("|", "\\|") if text.strip() else ""
    return f"{os.path.basename(span.file)}:{line}:{col}{shown}"


def _summary(doc, file, name, names, before, sched_code) -> str:
    """§0: the entry's path through the stages in a few counts, each read from the listing
    of the section that shows it."""
    import re

    facts = doc.facts
    rows = [
        ("PSK-Core", f"{len(before)} functions reached (§3)"),
        ("differentiation", f"{len(names)} functions after it (§4)"),
    ]
    opt = re.search(r"^presk-opt: (.*)$", facts.get("optimizer", ""), re.M)
    if opt:
        rows.append(("e-graph optimizer", f"{opt.group(1)} (§5)"))
    bound = re.search(r"^  bound +(\S+) +(\S+)", facts.get("bound", ""), re.M)
    if bound:
        rows.append(("precision", f"bound {bound.group(2)} ({bound.group(1)}, §6)"))
    sched = re.search(r"^-- entry .*?: (.*)$", facts.get("sched", ""), re.M)
    if sched:
        rows.append(("fusion", f"{sched.group(1)} (§7)"))
    sites = re.search(r"^-- (\d+) narrowable sites", facts.get("sched", ""), re.M)
    if sites:
        rows.append(("narrowable sites", f"{sites.group(1)} (§6, §7)"))
    native = re.search(r"^native f64 +(\S+)", facts.get("bench", ""), re.M)
    if native:
        rows.append(("measured", f"native f64 {native.group(1)} ms a call, the median (§11)"))
    table = "| stage | |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)
    return "\n\n".join(
        [
            "## 0 Summary",
            f"`{name}` of `{file}`, from the source to the kernels and the targets; each"
            " section below shows one stage with the command that prints it (the appendix"
            " lists them all).",
            table,
        ]
    )


__all__ = ["capture", "explain", "reached"]
