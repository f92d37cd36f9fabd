"""`presk quantize FILE --precision ENV --realize @R.json [--out CKPT]` (spec L67, L1266;
docs/precision.md, "Quantised weights"): the parameter paths of the realization's `quant`
map quantised (presk_kernel.quant: int8 or int4, per-channel binary32 scales), and the gap
to the exact reference measured in two parts on the envelope's inputs:

- the weights' rounding: the exact entry on the dequantised weights against the exact
  entry on the original ones (no arithmetic rounds);
- the arithmetic: the realization (its sites' and parameters' types) run on the kernel
  interpreter or natively on the dequantised weights, against the exact entry on them.

The integers are stored as such (i8, with their binary32 scales) and dequantised in the
operand read of each kernel that reads them (presk_kernel.quant.integer_weights): the bits of
w̃ = q·s stored in the parameter's type, on the kernel interpreter and natively.
"""

from __future__ import annotations

import click

from presk_cli.precision import PrecisionError, envelope_option, exp_text, fail, load_envelope


@click.command(
    short_help="Quantise parameters as a realization's `quant` map says, and measure the gap"
    " in two parts: the weights' rounding and the arithmetic"
)
@click.argument("file", type=click.Path(dir_okay=False))
@envelope_option("The envelope of the entry (presk calibrate --precision): its inputs and weights.")
@click.option(
    "--realize",
    required=True,
    metavar="@FILE",
    help="The realization: its `quant` map (a parameter path to int8 or int4) and types.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    metavar="CKPT",
    help="Write the dequantised weights here (a `.psk.d` checkpoint: --weights reads it).",
)
@click.option(
    "--backend",
    type=click.Choice(["kernel", "native"]),
    default="kernel",
    show_default=True,
    help="Where the arithmetic is measured: the kernel interpreter or compiled C (the same bits).",
)
@click.option("--const", "consts", multiple=True, metavar="NAME=V", help="Override a constant.")
def quantize(file, envelope_path, realize, out, backend, consts) -> None:
    """Quantise the parameters the realization's `quant` map names and measure the gap to the
    exact reference in two parts: the weights' rounding and the arithmetic."""
    from presk_core.envelope import EnvelopeError
    from presk_kernel.realization import RealizationError, as_realization

    from presk_cli.commands import _consts

    try:
        r = as_realization(realize)
    except RealizationError as e:
        fail(e.code, str(e))
    if not r.quant:
        fail("E7141", f"the realization `{realize}` quantises nothing: its `quant` map is empty")
    envelope, core, ctx = load_envelope(envelope_path, file, _consts(consts))
    try:
        found = measure(core, envelope, r, backend)
    except EnvelopeError as e:
        fail(e.code, str(e), ctx.sources)
    except PrecisionError as e:
        fail(e.code, str(e), ctx.sources)
    if out is not None:
        from presk_core import data as D

        try:
            D.write_tree(out, f"params {found['model']}", list(found["tree"].values()),
                         list(found["tree"]))  # fmt: skip
        except OSError as e:
            fail("E7142", f"cannot write the weights `{out}`: {e.strerror or e}")
    click.echo("\n".join(lines(envelope, realize, r, found, out)))


def measure(core, envelope, r, backend: str) -> dict:
    """The quantised weights and the three gaps (the largest over the envelope's samples)."""
    import numpy as np
    from presk_core.envelope import _reals
    from presk_core.interp import Interpreter
    from presk_core.run import EntryError, RunError, interp_real, parse_entry
    from presk_kernel.lower import argument_leaves
    from presk_kernel.quant import quantise

    from presk_cli.native import NativeError, executor, lower, storage
    from presk_cli.precision import _tree_index, envelope_inputs

    try:
        entry = parse_entry(envelope.entry, core, None, dict(envelope.dims))
        inputs = envelope_inputs(core, entry, envelope)
        samples = [inputs(i) for i in range(envelope.samples)]
    except (EntryError, RunError) as e:
        code = getattr(e, "code", None) or "E7101"
        raise PrecisionError(code, f"the envelope's entry: {e}") from None
    j = _tree_index(samples[0])
    if j is None:
        raise PrecisionError("E7141", f"`{entry.shown}` takes no parameter tree to quantise")
    theta = samples[0][j][2]
    unknown = [p for p, _ in r.quant if p not in theta]
    if unknown:
        have = ", ".join(theta)
        raise PrecisionError(
            "E7038", f"`quant` names `{unknown[0]}`, not a parameter path of this entry's"
            f" tree (its paths: {have})",
        )  # fmt: skip
    quantised = {}
    tree = {}
    for path, value in theta.items():
        w = np.asarray(value, dtype=object).astype(np.float64)
        scheme = dict(r.quant).get(path)
        if scheme is not None:
            quantised[path] = quantise(w, scheme)
            w = quantised[path].dequantised
        tree[path] = w
    with_q = {p: interp_real(w, envelope.bits) for p, w in tree.items()}
    interp = Interpreter(core, envelope.bits)
    name, dims = entry.function.name, dict(entry.dims) | dict(entry.prefix)
    rounding = arithmetic = total = 0.0
    for args in samples:
        values = [v for _, _, v in args]
        moved = list(values)
        moved[j] = with_q
        try:
            exact = [
                np.asarray(a, dtype=object) for a in _reals(interp.run(name, values, entry.dims))
            ]
            exact_q = [
                np.asarray(a, dtype=object) for a in _reals(interp.run(name, moved, entry.dims))
            ]
            # the integers in the kernels: the weights given as they are, quantised as the
            # schedule's inputs (presk_kernel.quant.integer_inputs), dequantised when read
            laid = lower(core, name, dims, values, r)
            got = executor(laid, backend)(storage(laid, argument_leaves(values)))
        except (EntryError, RunError) as e:
            raise PrecisionError(getattr(e, "code", None) or "E7001", str(e)) from None
        except NativeError as e:
            raise PrecisionError(e.code, str(e)) from None
        rounding = max(rounding, _gap(exact_q, exact))
        got = [np.asarray(g, dtype=np.float64).astype(object) for g in got]
        arithmetic = max(arithmetic, _gap(got, exact_q))
        total = max(total, _gap(got, exact))
    model = args[j][1].instance.name
    return {
        "quantised": quantised, "tree": tree, "model": model, "rounding": rounding,
        "arithmetic": arithmetic, "total": total,
        "f64": sum(np.size(v) for v in theta.values()) * 8,
        "at_rest": sum(q.bytes_at_rest for q in quantised.values())
        + sum(np.size(tree[p]) * _width(r.param_type(p)) for p in tree if p not in quantised),
    }  # fmt: skip


def _width(t: str) -> int:
    return {"f64": 8, "f32": 4, "bf16": 2}[t]


def _gap(a: list, b: list) -> float:
    import gmpy2
    import numpy as np

    worst = 0.0
    with gmpy2.context(precision=256):
        for x, y in zip(a, b, strict=True):
            d = np.abs(np.ravel(x) - np.ravel(y))
            worst = max(worst, float(max(d, default=0)))
    return worst


def lines(envelope, realize, r, found, out) -> list[str]:
    q = found["quantised"]
    n8 = sum(1 for x in q.values() if x.scheme == "int8")
    scales = sum(x.scales.size for x in q.values())
    mag = envelope.output
    rel = lambda x: exp_text(x / mag, 2) if mag > 0 else "inf"  # noqa: E731
    out_lines = [
        f"presk quantize: `{envelope.entry}` under {realize}: {len(q)} path(s) quantised"
        f" ({n8} int8, {len(q) - n8} int4), {scales} per-channel scales",
        f"  weights     {exp_text(found['at_rest'], 4)} bytes at rest against"
        f" {exp_text(found['f64'], 4)} in f64",
        f"  rounding    {exp_text(found['rounding'], 3)} ({rel(found['rounding'])} relative):"
        " the weights' rounding alone, exact arithmetic on them",
        f"  arithmetic  {exp_text(found['arithmetic'], 3)} ({rel(found['arithmetic'])} relative):"
        " the realization's arithmetic on the quantised weights",
        f"  total       {exp_text(found['total'], 3)} ({rel(found['total'])} relative) against"
        f" the exact reference, over {envelope.samples} samples",
    ]
    for path, x in q.items():
        out_lines.append(f"    {path:<28} {x.scheme:<5} {x.scales.size:>6} scales")
    if out is not None:
        out_lines.append(f"presk quantize: wrote {out} — the dequantised weights (--weights {out})")
    return out_lines
