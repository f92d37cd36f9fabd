"""Integer weights computed in the kernels (issue 22; docs/precision.md, "Quantised
weights"): a `quant` map's parameters stored as i8 with their binary32 scales, dequantised
in the operand read — bit for bit the weights dequantised when loaded, on the kernel
interpreter and natively — and a kernel that reads them otherwise refused (E7150)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from presk_cli.native import entry_inputs, executor, lower, storage
from presk_cli.pipeline import PIPELINE, RUN
from presk_core.run import parse_entry
from presk_kernel.ir import Arg, Axis, Buffer
from presk_kernel.lower import argument_leaves
from presk_kernel.quant import IntegerWeightError, integer_weights, quantise
from presk_kernel.realization import parse_realization
from presk_syntax.pipeline import Context


@pytest.fixture(scope="module")
def tutorial():
    core = PIPELINE.run(RUN, "tutorial/07_train.psk", Context())
    entry = parse_entry("loss", core, None, {"B": 4})
    values = [v for _, _, v in entry_inputs(core, entry, 0, 64)]
    return core, entry, values


def _realization(tmp_path, default, quant=None):
    doc = {"presk": "realization", "version": 1, "default": default}
    if quant:
        doc["quant"] = quant
    path = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(doc, ensure_ascii=False))
    return parse_realization(f"@{path}")


def _bits(outputs):
    return [np.atleast_1d(np.asarray(x)).tobytes() for x in outputs]


@pytest.mark.parametrize(
    "default, scheme, native",
    [("f64", "int8", False), ("f32", "int4", True), ("bf16", "int8", False)],
)
def test_the_bits_of_the_weights_dequantised_when_loaded(
    tutorial, tmp_path, default, scheme, native
):
    core, entry, values = tutorial
    j = next(i for i, v in enumerate(values) if isinstance(v, dict))
    quant = {p: scheme for p in values[j]}  # every path: matrices, stacked vectors, a vector
    dims = dict(entry.dims) | dict(entry.prefix)
    moved = list(values)
    moved[j] = {
        p: quantise(np.asarray(v, dtype=object).astype(np.float64), scheme).dequantised
        for p, v in values[j].items()
    }
    loaded = lower(core, "loss", dims, moved, _realization(tmp_path, default))
    want = executor(loaded, "kernel")(storage(loaded, argument_leaves(moved)))
    ints = lower(core, "loss", dims, values, _realization(tmp_path, default, quant))
    assert sum(b.dtype == "i8" for b in ints.buffers) == len(quant)
    assert sum(b.name.endswith(f".scale:{scheme}") for b in ints.buffers) == len(quant)
    leaves = storage(ints, argument_leaves(values))
    got = executor(ints, "kernel")(leaves)
    assert _bits(got) == _bits(want)
    if native:
        assert _bits(executor(ints, "native")(leaves)) == _bits(got)


def test_a_kernel_reading_across_rows_is_refused(tutorial, tmp_path):
    core, entry, values = tutorial
    dims = dict(entry.dims) | dict(entry.prefix)
    s = lower(core, "loss", dims, values, _realization(tmp_path, "f32"))
    w = next(b for b in s.buffers if b.name.endswith(".blocks.proj.w"))
    i, launch = next((i, x) for i, x in enumerate(s.launches) if any(a.buf == w.id for a in x.args))
    k = launch.kernel
    at = next(n for n, a in enumerate(launch.args) if a.buf == w.id)
    wide = replace(k.inputs[at], axes=(Axis(None, 5),))  # 5 elements from element 2: two rows
    kernel = replace(k, inputs=(*k.inputs[:at], wide, *k.inputs[at + 1 :]))
    args = (*launch.args[:at], Arg(w.id, 2), *launch.args[at + 1 :])
    bad = replace(
        s,
        launches=(*s.launches[:i], replace(launch, kernel=kernel, args=args), *s.launches[i + 1 :]),
    )
    with pytest.raises(IntegerWeightError, match="read by rows or whole matrices") as e:
        integer_weights(bad, (("blocks.proj.w", "int8"),))
    assert e.value.code == "E7150"
    assert isinstance(wide, Buffer)


def test_the_c_export_reads_the_integers_and_c1_holds(tmp_path):
    import subprocess

    from helpers import presk

    q = tmp_path / "q.json"
    doc = {"presk": "realization", "version": 1, "default": "f32"}
    q.write_text(json.dumps({**doc, "quant": {"blocks.proj.w": "int8"}}, ensure_ascii=False))
    out = tmp_path / "c"
    r = presk(
        "export", "tutorial/07_train.psk", "--target", "c", "--entry", "loss",
        "--dim", "B=4", "--realize", f"@{q}", "--out", out,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    # f32's arena is 1,088 bytes (presk memory): 48 weights of 1 byte and 12 scales of 4 less
    assert int(re.search(r"an arena of (\d+) bytes", r.stdout).group(1)) < 1088
    assert "const int8_t *θ_blocks_proj_w" in (out / "model.c").read_text()
    c = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True, text=True)
    assert c.returncode == 0 and "C1 holds" in c.stdout, c.stdout + c.stderr


def test_a_training_step_takes_no_integer_weights(tmp_path):
    from helpers import presk

    q = tmp_path / "q.json"
    doc = {"presk": "realization", "version": 1, "default": "f32"}
    q.write_text(json.dumps({**doc, "quant": {"blocks.proj.w": "int8"}}, ensure_ascii=False))
    ckpt = tmp_path / "ckpt"
    r = presk(
        "train", "tutorial/07_train.psk", "--steps", "2", "--backend", "native",
        "--realize", f"@{q}", "--ckpt", ckpt,
    )  # fmt: skip
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.startswith("[E7151] Error: ") and "Traceback" not in r.stderr
    assert not ckpt.exists()
