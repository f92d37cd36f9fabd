"""`presk bench FILE --entry E --calibrate P --space calib`: the layout cost model calibrated
(L1011–L1034; docs/plans.md, "Calibration").

The entry's first contraction nest (`gemm/%2` of experiments/gemm.psk) is laid out under
every point of the space (presk_kernel.layout_space.points, at the machine's worker count),
each compiled with its launches clocked (`NativeEntry(timed=True)`), called once untimed,
then `--repeat` times; the nest's launch times are the sample. The samples already in P (of
this machine's kind) are kept unless timed again (the same nest, operands, type, layout and
dimensions), and the model is fitted to all of them (presk_kernel.layout_fit).
"""

from __future__ import annotations

import statistics
import sys

import click
import numpy as np

HEAD = f"{'layout':<65}{'group':<20}{'measured µs':>11} {'predicted µs':>12}"


def row(text: str, group: str, measured: float, predicted: float) -> str:
    """A row of the table: the layout in the spec's words (cut at 64 characters and `…`),
    its group, the median of its calls and the fitted model's prediction, in µs."""
    text = text if len(text) <= 64 else text[:63] + "…"
    return f"{text:<65}{group:<20}{measured:>11.2f} {predicted:>12.2f}"


def calibrate_layouts(core, run, realize, repeat, out, space, combine, rules, sources) -> None:
    """`--calibrate OUT --space S`: print the block of R17.5 and write the layout profile.
    `run`: (file, entry, dims, seed, bits, weights)."""
    import os

    from presk_core.run import EntryError, RunError, parse_entry
    from presk_kernel.layout import LayoutError, lay_out
    from presk_kernel.layout_fit import fit_line, fit_samples
    from presk_kernel.layout_model import (
        ModelError,
        Profile,
        count_all,
        counts_for,
        gemm_shape,
        load_profile,
        parse_combine,
        parse_rules,
        read_machine,
        rules_text,
        sample_key,
        save_profile,
    )
    from presk_kernel.layout_space import kind, points
    from presk_kernel.lower import argument_leaves

    from presk_cli.bench import arguments, timed_entry
    from presk_cli.commands import entry_fail
    from presk_cli.native import NativeError, fail, lower, storage

    file, entry, dims, seed, bits, weights = run
    try:
        form, how = parse_combine(combine), parse_rules(rules)
        machine = read_machine()
        old = load_profile(out) if os.path.exists(out) else None
        if old is not None:
            old.check_machine(machine, out)
    except ModelError as e:
        fail(NativeError(e.code, str(e), e.help), sources)
    try:
        e = parse_entry(entry, core, None, dims)
        args = arguments(core, e, seed, bits, weights)
        all_dims = dict(e.dims) | dict(e.prefix)
        schedule = lower(core, e.function.name, all_dims, args, realize, machine.workers)
        nests = [i for i, lc in enumerate(schedule.launches) if kind(lc.kernel) == "contraction"]
        if not nests:
            raise NativeError(
                "E7126",
                f"`{e.shown}` launches no contraction: the layout model is calibrated on one",
                "calibrate on experiments/gemm.psk's `gemm`",
            )
        at = nests[0]
        kernel = schedule.launches[at].kernel
        site = kernel.site
        inputs = storage(schedule, argument_leaves(args))
        click.echo(machine.line_text(site, realize))
        click.echo(f"-- costed under the rules {rules_text(how)}")
        sys.stdout.flush()
        operands = [list(b.shape) for b in kernel.inputs]
        samples, ill = [], 0
        pts = points(kernel, "calib" if space == "gemm" else space, machine.workers)
        if space == "gemm":  # the GEMM statement's points alone: point 0 and its splits
            pts = [p for p in pts if p.why is None and p.layout.gemm is not None]
        for p in pts:
            if p.why is not None:
                ill += 1
                continue
            try:
                laid = lay_out(schedule, machine.workers, {site: p.layout})
            except LayoutError:
                ill += 1
                continue
            native = timed_entry(laid)
            times = _times(native, inputs, repeat, at)
            lk = laid.launches[at].kernel
            samples.append({
                "nest": site, "operands": operands, "type": realize, "decisions": p.decisions,
                "layout": p.text, "counts": count_all(lk, machine),
                "times_us": times, "dims": {k: int(v) for k, v in all_dims.items()},
            })  # fmt: skip
            shape = gemm_shape(lk)
            if shape is not None:
                samples[-1]["gemm"] = shape
    except (EntryError, RunError) as err:
        entry_fail("bench", err, sources)
    except NativeError as err:
        fail(err, sources)
    new = {sample_key(s) for s in samples}
    kept = [s for s in (old.samples if old else []) if sample_key(s) not in new]
    every = kept + samples
    try:
        model = fit_samples(every, form, how)
        save_profile(Profile(machine, every, model), out)
    except ModelError as err:
        fail(NativeError(err.code, str(err), err.help), sources)
    lines = [HEAD]
    for s in samples:
        c = counts_for(s["counts"], how)
        pred = model.predict(c) * 1e6
        lines.append(row(s["layout"], c.group, statistics.median(s["times_us"]), pred))
    lines.append(
        f"-- {len(samples)} layouts timed ({ill} ill-formed at these shapes), {len(kept)} "
        f"samples kept from {out}, {repeat} calls each"
    )
    lines.append(fit_line(model))
    lines.append(f"-- profile written to {out}")
    click.echo("\n".join(lines))
    sys.stdout.flush()


def _times(native, inputs: list, repeat: int, at: int) -> list[float]:
    """The launch `at`'s µs in each of `repeat` calls, after an untimed one."""
    ns = np.zeros(len(native.schedule.launches) + 1)
    native.run_timed(inputs, ns)
    out = []
    for _ in range(repeat):
        ns[:] = 0.0
        native.run_timed(inputs, ns)
        out.append(max(float(ns[at]) / 1000.0, 1e-3))  # a clock's nanosecond at least
    return out


__all__ = ["HEAD", "calibrate_layouts", "row"]
