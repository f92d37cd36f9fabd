"""`presk plan` (L1040–L1054) and `presk autotune` (L1065–L1078): every nest's layout space
costed by the profile's layout model, or measured point by point (presk_cli.plans)."""

from __future__ import annotations

import json
import os
import time

import click

from presk_cli.plans import (
    DEFAULT_MARK,
    HEADER,
    PlanError,
    choose,
    costed,
    departs_measured,
    measured_gemms,
    row,
    the_default,
)
from presk_cli.precision import fail

WARMUP = 1
TIMED = 7


def _setup(file, entry, dims, consts, realize, profile_path, command="plan"):
    """(core, entry name, dims, profile, model, machine): the program checked, the entry
    and its dims, the profile read and of this machine's kind (H2's E7120–E7129)."""
    from presk_core.run import EntryError, check_dim_names, parse_entry
    from presk_syntax.diagnostics import DiagnosticError
    from presk_syntax.pipeline import Context

    from presk_cli.commands import _consts, _dims, entry_fail
    from presk_cli.commands import _fail as fail_diag
    from presk_cli.pipeline import PIPELINE, RUN

    if realize not in ("f64", "f32", "bf16"):
        raise click.BadParameter(
            f"{realize!r}: a plan carries one of f64, f32, bf16", param_hint="--realize"
        )
    ctx = Context(consts=_consts(consts))
    dim_values = _dims(dims)
    if entry is None:
        raise click.UsageError("--entry is required")
    profile, machine = _profile(profile_path)
    try:
        core = PIPELINE.run(RUN, file, ctx)
    except DiagnosticError as e:
        fail_diag(e, ctx.sources)
    try:
        e = parse_entry(entry, core, None, dim_values)
        check_dim_names(e)
    except EntryError as err:
        entry_fail(command, err, ctx.sources)
    all_dims = dict(e.dims) | dict(e.prefix)
    return core, e.function.name, all_dims, profile, profile.model, machine


def _profile(profile_path):
    from presk_kernel.layout_model import ModelError, load_profile, read_machine

    try:
        profile = load_profile(profile_path)
        machine = read_machine()
        profile.check_machine(machine, profile_path)
    except ModelError as e:
        fail(e.code, str(e), help=e.help)
    if profile.model is None:
        fail(
            "E7118",
            f"the profile `{profile_path}` holds no fitted model",
            help="fit one: presk bench experiments/gemm.psk --entry gemm … --calibrate"
            f" {profile_path} --space calib",
        )
    return profile, machine


def _setup_train(file, consts, realize, profile_path):
    """(step program, its name, dims, args, profile, model) of `plan --train`."""
    from presk_cli.commands import _consts
    from presk_cli.native import NativeError
    from presk_cli.plans import step_entry

    if realize not in ("f64", "f32", "bf16"):
        raise click.BadParameter(
            f"{realize!r}: a plan carries one of f64, f32, bf16", param_hint="--realize"
        )
    profile, _ = _profile(profile_path)
    try:
        program, name, dims, args = step_entry(file, _consts(consts), realize)
    except (NativeError, PlanError) as e:
        fail(e.code, str(e), help=getattr(e, "help", None))
    return program, name, dims, args, profile, profile.model


def _capture(core, name, dims, realize, args=None):
    from presk_cli.native import NativeError
    from presk_cli.plans import capture

    try:
        schedule, nests, seconds = capture(core, name, dims, realize, args)
    except NativeError as e:
        fail(e.code, str(e), help=e.help)
    if not nests:
        fail("E7117", f"`{name}` launches no nest (no kernel reads an operand): nothing to lay out")
    return schedule, nests, seconds


def _write_text(path: str, text: str) -> None:
    from presk_core.data import write_text

    try:
        write_text(path, text)
    except OSError as e:
        fail("E7114", f"cannot write `{path}`: {e.strerror or e}")


ENTRY_OPTIONS = [
    click.argument("file", type=click.Path(dir_okay=False)),
    click.option("--entry", help="The entry whose nests are laid out."),
    click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="A dimension."),
    click.option("--const", "consts", multiple=True, metavar="NAME=V", help="Override a constant."),
    click.option(
        "--realize",
        default="f64",
        show_default=True,
        metavar="f64|f32|bf16",
        help="The type of every real (the plan carries it).",
    ),
    click.option(
        "--profile",
        "profile_path",
        required=True,
        type=click.Path(dir_okay=False),
        metavar="P",
        help="A layout profile (presk bench … --calibrate P --space calib): its model costs"
        " every point.",
    ),
]


def _space_option(default: str):
    """`--space`, the layout space of every nest, `default` unless given."""
    return click.option(
        "--space",
        type=click.Choice(["full", "small", "calib"]),
        default=default,
        show_default=True,
        help="The layout space of every nest (docs/plans.md).",
    )


def _entry_options(command):
    for option in reversed(ENTRY_OPTIONS):
        command = option(command)
    return command


@click.command(
    short_help="Choose a realization plan statically: every nest's layout space costed by the"
    " profile's layout model"
)
@_entry_options
@_space_option("full")
@click.option(
    "--train",
    is_flag=True,
    help="Plan FILE's training step (objective, gradient and AdamW: what presk train"
    " --backend native runs) instead of --entry.",
)
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The plan (JSON).")
def plan(file, entry, dims, consts, realize, profile_path, space, train, out) -> None:
    """Cost every point of every nest's layout space under the profile's model, choose the
    best of each, print the table and write the plan (docs/plans.md)."""
    from presk_kernel.layout import run_layout
    from presk_kernel.layout_space import describe, points

    from presk_cli.plans import PLAN_KIND, PLAN_VERSION, layout_fields

    wall = time.perf_counter()
    if train == (entry is not None):
        raise click.UsageError("give --entry E, or --train for the file's training step")
    args = None
    if train:
        core, name, all_dims, args, profile, model = _setup_train(
            file, consts, realize, profile_path
        )
    else:
        core, name, all_dims, profile, model, _ = _setup(
            file, entry, dims, consts, realize, profile_path
        )
    _, nests, captured_s = _capture(core, name, all_dims, realize, args)
    workers = profile.machine.workers
    t0 = time.perf_counter()
    rows, planned, total = [], [], 0
    measured = measured_gemms(profile.samples)
    for nest in nests:
        pts = points(nest.kernel, space, workers)
        seconds = costed(nest, pts, profile.machine, model)
        default = the_default(nest, pts, workers, profile.machine, model)
        best, within = choose(seconds, model.u, default)
        if (
            best is not None
            and default[0] is not None
            and best != default[0]
            and not departs_measured(nest, pts[best].layout, workers, measured)
        ):  # the default's GEMM statement on other workers, not measured faster: the default
            best = default[0]
            within = max(1, sum(1 for x in seconds if x <= seconds[best] * (1 + model.u)))
        total += len(pts)
        if best is None:  # the default layout, priced below every point: the run's own
            text = describe(nest.kernel, run_layout(nest.kernel, workers)) + DEFAULT_MARK
            rows.append(row(nest, len(pts), default[1], within, text))
            continue
        pt = pts[best]
        rows.append(row(nest, len(pts), seconds[best], within, pt.text))
        planned.append(
            {
                "nest": nest.site,
                "operands": [list(s) for s in nest.operands],
                "layout": pt.text,
                "decisions": pt.decisions,
                "fields": layout_fields(pt.layout),
                "points": len(pts),
                "predicted_us": seconds[best] * 1e6,
                "undecided": within,
            }
        )
    costed_s = time.perf_counter() - t0
    doc = {
        "presk": PLAN_KIND,
        "version": PLAN_VERSION,
        "entry": name,
        "dims": all_dims,
        "realize": realize,
        "space": space,
        "workers": workers,
        "profile": {"path": profile_path, "machine": profile.machine.kind, "u": model.u},
        "nests": planned,
    }
    _write_text(out, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    lines = [HEADER, *rows]
    lines.append(
        f"-- {len(nests)} nests, {total} points costed in {costed_s:.3f} s, the entry captured"
        f" in {captured_s:.3f} s; u = {model.u:.3f}"
    )
    lines.append(f"-- wall time {time.perf_counter() - wall:.3f} s")
    lines.append(f"-- plan written to {out}")
    click.echo("\n".join(lines))


# ---- autotune -------------------------------------------------------------------------------


def nest_schedule(kernel):
    """One nest's launch as an entry of its own: its operands the entry's inputs, its
    results the outputs."""
    from presk_kernel.ir import Arg, HostBuffer, Launch, Schedule

    n_in = len(kernel.inputs)
    buffers = tuple(
        HostBuffer(i, b.dtype, b.axes, f"%{i}", "input" if i < n_in else "output")
        for i, b in enumerate(kernel.buffers)
    )
    launch = Launch(kernel, tuple(Arg(i) for i in range(len(buffers))))
    return Schedule(
        kernel.site, (), buffers, (launch,), tuple(range(n_in)), tuple(range(n_in, len(buffers)))
    )


def captured_inputs(schedule, args) -> dict[str, list]:
    """Each nest's operands at its first launch, from the entry run on the kernel
    interpreter over `args` (the run's synthesized inputs): by site, as floats (bf16
    widened), which the nest's own entry stores again exactly."""
    import numpy as np
    from presk_kernel.interp import NUMPY, from_storage, run_kernel, to_storage
    from presk_kernel.ir import elements

    memory = {b.id: np.zeros(elements(b.axes), dtype=NUMPY[b.dtype]) for b in schedule.buffers}
    for buf, value in zip(schedule.inputs, args, strict=True):
        memory[buf][...] = to_storage(value, schedule.buffers[buf].dtype).reshape(-1)
    out: dict[str, list] = {}
    for launch in schedule.launches:
        views = []
        for buffer, arg in zip(launch.kernel.buffers, launch.args, strict=True):
            flat = memory[arg.buf][arg.offset : arg.offset + buffer.size]
            views.append(flat.reshape(buffer.shape))
        k = launch.kernel
        if k.inputs and k.site not in out:
            out[k.site] = [
                np.array(from_storage(v, b.dtype)) for v, b in zip(views, k.inputs, strict=False)
            ]
        with np.errstate(all="ignore"):
            run_kernel(k, views)
    return out


@click.command(
    short_help="Measure every point of every nest's layout space on the entry's own buffers,"
    " asserting each computes point 0's bits"
)
@_entry_options
@_space_option("small")
@click.option(
    "--interp", is_flag=True, help="Also run every point on the kernel interpreter, bit for bit."
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="The root of the inputs' draws."
)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="The day's directory.")
def autotune(file, entry, dims, consts, realize, profile_path, space, interp, seed, out) -> None:
    """Compile every point of every nest's space, time it seven times after a warm-up on the
    nest's operands captured from the entry, compare its output bit for bit with point 0's
    (natively, and on the kernel interpreter with --interp), and write the day to --out
    (docs/plans.md, docs/ir.md "autotune-day")."""
    import numpy as np
    from presk_core.data import atomic_dir
    from presk_kernel.interp import from_storage, to_storage
    from presk_kernel.interp_laid import run_laid_kernel
    from presk_kernel.layout import apply_layout, with_gemm
    from presk_kernel.layout_model import count_all, counts_for
    from presk_kernel.layout_space import default_060, describe, kind, points

    from presk_cli.native import entry_inputs
    from presk_cli.plans import DAY_KIND, DAY_VERSION, layout_fields

    core, name, all_dims, profile, model, machine = _setup(
        file, entry, dims, consts, realize, profile_path, "autotune"
    )
    schedule, nests, captured_s = _capture(core, name, all_dims, realize)
    from presk_core.run import parse_entry

    e = parse_entry(entry, core, None, {k: v for k, v in all_dims.items()})
    args = [v for _, _, v in entry_inputs(core, e, seed, 256)]
    from presk_kernel.lower import argument_leaves

    from presk_cli.native import storage

    captured = captured_inputs(schedule, storage(schedule, argument_leaves(args)))
    workers = profile.machine.workers
    sweep0 = time.perf_counter()
    costed_s = 0.0
    day_nests, lines_of, rows, checked, measured_total = [], {}, [], 0, 0
    aside = 0.0  # seconds spent on the 0.6.0 defaults (statement P), outside the sweep
    for nest in nests:
        pts = points(nest.kernel, space, workers)
        inputs = captured[nest.site]
        ref = None
        lines = []
        for i, pt in enumerate(pts):
            if pt.why is not None:
                continue
            layout = pt.layout
            if layout.pack and layout.gemm is None:
                layout = with_gemm(nest.kernel, layout)
            laid = apply_layout(nest.kernel, layout)
            t0 = time.perf_counter()
            counts = count_all(laid, profile.machine)
            predicted = model.predict(counts_for(counts, model.rules)) * nest.launches
            costed_s += time.perf_counter() - t0
            sched = nest_schedule(laid)
            got, times = _time_point(sched, inputs)
            bits = _stored_bits(nest.kernel, got)
            if ref is None:
                ref = bits
            same = bits == ref
            if same and interp:
                views = [
                    to_storage(x, b.dtype).reshape(b.shape)
                    for x, b in zip(inputs, laid.inputs, strict=True)
                ]
                views += [
                    np.zeros(b.shape, dtype=to_storage(0.0, b.dtype).dtype) for b in laid.outputs
                ]
                run_laid_kernel(laid, views)
                outs = _stored_bits(
                    nest.kernel,
                    [
                        np.array(from_storage(v, b.dtype))
                        for v, b in zip(views[len(laid.inputs) :], laid.outputs, strict=True)
                    ],
                )
                same = outs == ref
                checked += 1
            if not same:
                where = "natively" if bits != ref else "on the kernel interpreter"
                fail(
                    "E7115",
                    f"point {i} of `{nest.site}` ({pt.text}) does not compute point 0's bits"
                    f" {where}: the sweep stops, nothing is written",
                    help="a layout must not change a bit (DESIGN §11): this is a bug of presk's",
                )
            lines.append(
                {
                    "point": i,
                    "decisions": pt.decisions,
                    "text": pt.text,
                    "layout": layout_fields(pt.layout),
                    "predicted_us": predicted * 1e6,
                    "counts": counts,
                    "times_us": times,
                    "warmup": WARMUP,
                    "launches": nest.launches,
                    "same_bits": same,
                }
            )
        measured = len(lines)
        measured_total += measured
        lines_of[nest.file] = lines
        day_nests.append(
            {
                "nest": nest.site,
                "file": nest.file,
                "operands": [list(s) for s in nest.operands],
                "points": len(pts),
                "kind": kind(nest.kernel),
            }
        )
        old_default = default_060(nest.kernel)
        if old_default is not None and ref is not None:  # statement P's side, not a point
            t0 = time.perf_counter()
            laid = apply_layout(nest.kernel, old_default)
            counts = count_all(laid, profile.machine)
            predicted = model.predict(counts_for(counts, model.rules)) * nest.launches
            got, times = _time_point(nest_schedule(laid), inputs)
            text = describe(nest.kernel, old_default)
            if _stored_bits(nest.kernel, got) != ref:
                fail(
                    "E7115",
                    f"the 0.6.0 default of `{nest.site}` ({text}) does not compute point 0's"
                    " bits natively: the sweep stops, nothing is written",
                    help="a layout must not change a bit (DESIGN §11): this is a bug of presk's",
                )
            day_nests[-1]["default_060"] = {
                "text": text,
                "layout": layout_fields(old_default),
                "predicted_us": predicted * 1e6,
                "counts": counts,
                "times_us": times,
                "warmup": WARMUP,
                "launches": nest.launches,
                "same_bits": True,
            }
            aside += time.perf_counter() - t0
        rows.append(
            f"{nest.site:<28} {nest.operands_text:<24}{measured:>6} of {len(pts):>5} points"
            f"  {os.path.join(out, nest.file)}"
        )
    sweep_s = time.perf_counter() - sweep0 - aside  # the 0.6.0 defaults are not the sweep's
    day = {
        "presk": DAY_KIND,
        "version": DAY_VERSION,
        "entry": name,
        "dims": all_dims,
        "realize": realize,
        "space": space,
        "profile": {"path": profile_path, "machine": profile.machine.kind, "u": model.u},
        "sweep_s": sweep_s,
        "costed_s": costed_s,
        "captured_s": captured_s,
        "interp": interp,
        "checked_interp": checked,
        "differing": 0,
        "nests": day_nests,
    }
    try:
        with atomic_dir(out) as tmp:
            with open(os.path.join(tmp, "day.json"), "w", encoding="utf-8") as f:
                f.write(json.dumps(day, indent=1, ensure_ascii=False) + "\n")
            for fname, lines in lines_of.items():
                with open(os.path.join(tmp, fname), "w", encoding="utf-8") as f:
                    for line in lines:
                        f.write(json.dumps(line, ensure_ascii=False) + "\n")
    except OSError as e:
        fail("E7114", f"cannot write the day `{out}`: {e.strerror or e}")
    where = "natively and on the kernel interpreter" if interp else "natively"
    rows.append(
        f"-- {measured_total} points of {len(nests)} nests measured in {sweep_s:.1f} s, costed in"
        f" {costed_s:.3f} s; every output bit-identical to point 0, {where}: yes"
    )
    click.echo("\n".join(rows))


def _time_point(schedule, inputs) -> tuple[list, list[float]]:
    """A nest's entry (compiled with its launch's clock, as the point lays it out: no
    GEMM's consumer or prologue fused, `epilogues=False`) run `WARMUP` times, then `TIMED`
    times timed: the last run's outputs and each timed run's microseconds (the entry's own
    clock, `run_timed`)."""
    import numpy as np
    from presk_cback.native import NativeEntry

    compiled = NativeEntry(schedule, timed=True, epilogues=False, rows=False)

    ns = np.zeros(2)
    for _ in range(WARMUP):
        compiled.run_timed(inputs, ns)
    times = []
    for _ in range(TIMED):
        ns[:] = 0
        got = compiled.run_timed(inputs, ns)
        times.append(ns[0] / 1e3)
    return got, times


def _stored_bits(kernel, outputs: list) -> list[bytes]:
    """A nest's outputs as bytes, the positions a narrowed store leaves to the executor
    (presk_kernel.narrow.unstored: dead, which a GEMM's block of rows may compute and a
    loop leaves as it found them) as zeros: the bits every point must agree on."""
    import numpy as np
    from presk_kernel.narrow import unstored

    out = []
    for i, x in enumerate(outputs):
        hidden = unstored(kernel, len(kernel.inputs) + i)
        if hidden is not None:
            x = np.where(hidden.reshape(np.shape(x)), np.zeros((), np.asarray(x).dtype), x)
        out.append(np.asarray(x).tobytes())
    return out
