"""A GEMM's epilogues at emission (presk_kernel.epilogue, docs/native.md): the compiled
entry, its products taking their elementwise consumers as their GEMM statements' epilogues,
computes the bits of the unfused schedule on the kernel interpreter — over several of the
GEMM's blocks of k (the partial sums in C, the epilogue after the last), edge tiles, rows
merged from a batch, one and two threads — while the schedule every stage before emission
prints keeps the spec's nests."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from kernel_entries import MINIGPT, lowered
from presk_cback.native import NativeEntry
from presk_cli.native import entry_inputs, executor, lower, storage
from presk_cli.pipeline import PIPELINE, RUN
from presk_core.run import parse_entry
from presk_kernel.contract import contraction, gemm_kstop, gemm_stop
from presk_kernel.epilogue import gemm_epilogues
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_schedule
from presk_kernel.ir import GemmStmt, Let, Loop, Op, Store
from presk_kernel.layout import default_layout, lay_out, nest_names, with_gemm
from presk_kernel.lower import argument_leaves
from presk_kernel.narrow import narrow
from presk_kernel.realization import parse_realization
from presk_syntax.pipeline import Context


def _gemms(schedule):
    return [lc.kernel.body[0].gemm for lc in schedule.launches if lc.kernel.layout.gemm]


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_an_epilogue_over_the_parts_of_wide_blocks_gives_the_unfused_bits(compiler, realize):
    # the generated GEMM calls an epilogue on each block of C's finished columns, EPI_PANELS
    # panels at a time (presk_cback.gemm): 1100 columns are several such parts (512 or 256
    # columns), 200 rows two blocks of MC and an edge, k = 300 two blocks of k
    schedule, args, _ = lowered(
        "tutorial/01_linear.psk", "Linear{300, 1100}.apply", (("batch", 200),), realize
    )
    rng = np.random.default_rng(5)
    for threads in (1, 2):
        laid = lay_out(fuse(schedule)[0], threads)
        inputs = storage(laid, args)
        (bias,) = [i for i, x in enumerate(inputs) if x.shape == (1100,)]
        inputs[bias] = rng.standard_normal(1100).astype(inputs[bias].dtype)  # θ₀'s is 0
        fused = NativeEntry(laid)
        assert len(fused.schedule.launches) == 1
        want = [x.tobytes() for x in NativeEntry(laid, epilogues=False).run(inputs)]
        assert [x.tobytes() for x in fused.run(inputs)] == want, threads


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_a_product_with_its_epilogue_gives_the_unfused_bits(compiler, realize):
    # k = 400: two of the GEMM's blocks of k (KC 384 or 256); 45 rows, 40 columns: edge tiles
    schedule, args, _ = lowered(
        "tutorial/01_linear.psk", "Linear{400, 40}.apply", (("batch", 45),), realize
    )
    args[1] = np.random.default_rng(4).standard_normal(40).astype(args[1].dtype)  # θ₀'s is 0
    want = [x.tobytes() for x in run_schedule(schedule, args)]
    fused = fuse(schedule)[0]
    assert len(fused.launches) == 2  # what the stages print: the product, then the bias
    for threads in (1, 2):
        laid = lay_out(fused, threads)
        emitted = gemm_epilogues(laid)
        (g,) = _gemms(emitted)
        assert len(emitted.launches) == 1 and g.epilogue and (g.rows, g.cols, g.depth) == (
            45, 40, 400,
        )  # fmt: skip
        assert emitted.launches[0].kernel.site == laid.launches[0].kernel.site
        inputs = storage(laid, args)
        for lanes in (False, True):
            entry = NativeEntry(laid, lanes=lanes)
            assert len(entry.schedule.launches) == 1
            assert [x.tobytes() for x in entry.run(inputs)] == want, (threads, lanes)
        # the laid-out interpreter runs a GEMM statement's epilogue after its sums
        assert [x.tobytes() for x in run_schedule(emitted, inputs, laid=True)] == want
        assert [x.tobytes() for x in executor(laid, "kernel")(inputs)] == want
        # without epilogues (a caller timing the plan's nests): the plan's two launches
        assert len(NativeEntry(laid, epilogues=False).schedule.launches) == 2


def test_an_epilogue_of_a_batched_product_gives_the_unfused_bits(compiler):
    # the attention's scores: a product per (batch, head), divided by √hd in its epilogue
    schedule, args, _ = lowered("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 40)), "f32")
    want = [x.tobytes() for x in run_schedule(schedule, args)]
    fused = fuse(schedule)[0]
    plan = {}
    for lc, name in zip(fused.launches, nest_names(fused.launches), strict=True):  # all packed
        g = contraction(lc.kernel)
        if g is not None and name not in plan:
            plan[name] = with_gemm(
                lc.kernel, dataclasses.replace(default_layout(lc.kernel), pack=(g.a, g.b))
            )
    laid = lay_out(fused, 1, plan)
    assert len(laid.launches) == 5  # the spec's five nests, planned
    emitted = gemm_epilogues(laid)
    assert len(emitted.launches) == 4
    assert any(g.epilogue and g.batch for g in _gemms(emitted))
    inputs = storage(laid, args)
    assert [x.tobytes() for x in executor(laid, "native")(inputs)] == want


def test_a_chain_of_epilogues_and_the_gelu(compiler):
    dims = (("V", "64"), ("D", "48"), ("H", "2"), ("L", "1"))
    assert dims[0] == MINIGPT[0]
    schedule, args, _ = lowered(
        "tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 16)), "f32", False,
        dims,
    )  # fmt: skip
    want = run_schedule(schedule, args)
    laid = lay_out(fuse(schedule)[0], 1)
    emitted = gemm_epilogues(laid)
    fused = [lc.kernel for lc in emitted.launches if lc.kernel.layout.gemm and lc.kernel.steps]
    assert len(emitted.launches) < len(laid.launches) and fused
    # the bias then the caller's residual add: a chain, across a call (Block's)
    assert any(len(k.steps) >= 3 and k.steps[-1].startswith("Block.") for k in fused)
    assert all(isinstance(k.body[0], GemmStmt) for k in fused)
    # the GELU (erfc) after the bias: an epilogue that reads no array along the rows
    assert [lc for lc in laid.launches if lc.kernel.name == "gelu"]
    assert not [lc for lc in emitted.launches if lc.kernel.name == "gelu"]
    (up,) = [k for k in fused if k.steps[-1].startswith("MLP.")]
    assert up.steps[-2:] == ("Linear.apply/%5", "MLP.apply/%5")
    inputs = storage(laid, args)
    got = NativeEntry(laid).run(inputs)
    assert [x.tobytes() for x in got] == [x.tobytes() for x in want]
    # the laid-out interpreter computes the GELU in the GEMM statement's epilogue too
    got = run_schedule(emitted, inputs, laid=True)
    assert [x.tobytes() for x in got] == [x.tobytes() for x in want]
    # the norms whose rows only a product reads go into its packed panels (prologues)
    normed = [k for k in fused if k.steps[0].startswith("LayerNorm.")]
    assert normed and all(k.body[0].gemm.prologue[0] is not None for k in normed)


def _ops(body) -> set[str]:
    out: set[str] = set()

    def walk(e) -> None:
        if isinstance(e, Op):
            out.add(e.op)
            for a in e.args:
                walk(a)

    for s in body:
        if isinstance(s, Loop):
            out |= _ops(s.body)
        elif isinstance(s, (Let, Store)):
            walk(s.expr)
    return out


def _same(got, want) -> bool:
    """The same bits, a NaN's sign and payload aside (the interpreter's numpy and the C
    give NaNs of either sign)."""
    return all(
        np.array_equal(np.isnan(x), np.isnan(y))
        and x[~np.isnan(x)].tobytes() == y[~np.isnan(y)].tobytes()
        for x, y in zip(got, want, strict=True)
    )


@pytest.mark.parametrize("realize, threads", [("f64", 1), ("f32", 2)])
def test_the_steps_gelu_stores_its_operand_too(compiler, realize, threads):
    # in the training step the forward's h = x·W + b is read by the GELU and later by the
    # backward's gelu_grad: the up-projection's epilogue stores both (`merge_epilogue(keep=
    # True)`), then gelu_grad's factor of h in h's place (`_factors_forward`), the bits of
    # the unfused schedule's, natively and on the laid-out interpreter; then with ±inf, NaN
    # and −0 in its bias
    dims = (("V", "64"), ("D", "48"), ("H", "2"), ("L", "1"))
    schedule, args, _ = lowered(
        "tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 16)), realize,
        True, dims,
    )  # fmt: skip
    laid = lay_out(fuse(schedule)[0], threads)
    emitted = gemm_epilogues(laid)
    names = [lc.kernel.name for lc in emitted.launches]
    assert "gelu" in [lc.kernel.name for lc in laid.launches] and "gelu" not in names
    (up,) = [lc for lc in emitted.launches if "MLP.apply.fwd/%5" in lc.kernel.steps]
    g = up.kernel.body[0].gemm
    stores = [s for s in g.epilogue if isinstance(s, Store)]
    assert len(stores) == 2 and stores[0].buf == g.c and len(up.kernel.outputs) == 2
    # gelu_grad(ct, h) = ct · (erfc(−h/√2)·½ + h·exp(−h²/2)/√(2π)): its factor, which reads
    # only h, computed in that epilogue and stored in h's place; the backward a product,
    # then the epilogue of the product that makes ct (no transcendental left in it)
    assert "exp" in _ops(g.epilogue) and "erfc" in _ops(g.epilogue)
    assert "gelu_grad" not in names
    (gg,) = [lc.kernel for lc in emitted.launches if lc.kernel.name.endswith("+gelu_grad")]
    assert _ops(gg.body[0].gemm.epilogue) == {"mul"}
    entry = NativeEntry(laid)
    inputs = storage(laid, args)
    want = [x.tobytes() for x in run_schedule(schedule, args)]
    assert [x.tobytes() for x in entry.run(inputs)] == want
    laid_run = realize == "f32"  # the interpreter's f64 GEMM (gmpy2's fma) is slow
    if laid_run:
        assert [x.tobytes() for x in run_schedule(emitted, inputs, laid=True)] == want
    bias = laid.inputs.index(up.args[2].buf)  # h = ±inf, NaN, x·W − 0 in four columns
    inputs[bias] = inputs[bias].copy()
    inputs[bias].reshape(-1)[:4] = [np.inf, -np.inf, np.nan, -0.0]
    if laid_run:
        want = run_schedule(schedule, inputs)
        assert _same(entry.run(inputs), want)
        assert _same(run_schedule(emitted, inputs, laid=True), want)
    else:  # the interpreter's f64 fma of arbitrary doubles is slow: the unfused natively
        # (a NaN's sign aside: gelu_grad's product, an epilogue here and a kernel there,
        # meets ct's NaN and E(h)'s of the other sign, and which comes out is the C
        # compiler's operand order: docs/spec-questions.md, issue 26 helper H6)
        assert _same(entry.run(inputs), NativeEntry(laid, epilogues=False).run(inputs))


@pytest.mark.parametrize("realize, scheme", [("f64", "int8"), ("f32", "int4")])
def test_integer_weights_keep_the_gemm_and_their_bits(compiler, tmp_path, realize, scheme):
    # the weight dequantised where the GEMM packs its panel of B: the bits of the weight
    # dequantised in the loops' operand read (docs/precision.md), over two blocks of k
    core = PIPELINE.run(RUN, "tutorial/01_linear.psk", Context())
    entry = parse_entry("Linear{400, 12}.apply", core, None, {"batch": 9})  # edge tiles
    values = [v for _, _, v in entry_inputs(core, entry, 0, 64)]
    path = tmp_path / "r.json"
    doc = {"presk": "realization", "version": 1, "default": realize, "quant": {"w": scheme}}
    path.write_text(json.dumps(doc))
    dims = dict(entry.dims) | dict(entry.prefix)
    ints = lower(core, entry.function.name, dims, values, parse_realization(f"@{path}"))
    assert not any(lc.kernel.layout.gemm for lc in ints.launches)  # the plan's nests: loops
    leaves = storage(ints, argument_leaves(values))
    want = [x.tobytes() for x in run_schedule(ints, leaves)]
    emitted = gemm_epilogues(ints)
    (g,) = _gemms(emitted)
    assert g.prologue[0] is None and "dequant" in str(g.prologue[1]) and g.epilogue
    assert [x.tobytes() for x in run_schedule(emitted, leaves, laid=True)] == want
    for lanes in (True, False):
        assert [x.tobytes() for x in executor(ints, "native", lanes)(leaves)] == want


@pytest.mark.parametrize("timed", [True, "cpu", "threads"])
def test_a_timed_entry_clocks_each_launch_and_the_zeroing(compiler, timed):
    # presk_cback.host._timed_host, the one writer of presk_entry_timed: each launch's slot
    # (three clocks under "threads": wall, the calling thread's CPU time, the process's) and
    # the zeroing's after them; the entry clocks the schedule the untimed one runs (the bias
    # the product's epilogue: one launch, named for both) and gives its bits
    schedule, args, _ = lowered(
        "tutorial/01_linear.psk", "Linear{64, 24}.apply", (("batch", 33),), "f32"
    )
    laid = lay_out(fuse(schedule)[0], 2)
    inputs = storage(laid, args)
    untimed = NativeEntry(laid)
    want = [x.tobytes() for x in untimed.run(inputs)]
    entry = NativeEntry(laid, timed=timed)
    assert entry.schedule == untimed.schedule
    assert [lc.kernel.name for lc in laid.launches] == ["dot", "add"]
    assert [lc.kernel.name for lc in entry.schedule.launches] == ["dot+add"]
    per = 3 if timed == "threads" else 1
    n = len(entry.schedule.launches)
    source = entry.source[-1]
    assert source.count("int presk_entry_timed_io(") == 2  # declared, then defined once
    ns = np.zeros(per * (n + 1))
    for calls in (1, 2):  # each call adds into ns
        assert [x.tobytes() for x in entry.run_timed(inputs, ns)] == want
        walls = ns[: per * n : per]
        assert (walls > 0).all() and ns[per * n :].min() >= 0, (calls, ns)
    if timed == "threads":  # the process's CPU time holds the calling thread's (its clocks
        clocks = ns.reshape(n + 1, 3)  # read just after the thread's: within 10 µs)
        assert (clocks[:n, 2] >= clocks[:n, 1] - 1e4).all()


@pytest.mark.parametrize("step", [False, True], ids=["forward", "step"])
def test_the_heads_split_and_merged_are_the_products_strides(compiler, step):
    # split_heads (a copy of [B, T, D] into [B, H, T, HD]) read only by the attention's
    # products that fold whole: q's and k's absorbed as the scores' operands' strides in
    # the forward pass (v's kept: a·v folds B's rows by prefix, slower strided); in the
    # step the backward's dS·K and dSᵀ·Q fold by prefix too (dS is +0 where the mask hides),
    # so all three are kept; the heads' merge (a copy of a·v's result) and the adjoint's
    # transposition (dQ, dK, dV stored at [B, T, H, HD]) the products' C strides, no
    # epilogue; the causal bands kept; the unfused schedule's bits natively and on the
    # laid-out interpreter
    dims = (("V", "64"), ("D", "48"), ("H", "2"), ("L", "1"))
    schedule, args, _ = lowered(
        "tests/examples/minigpt/train_minigpt.psk", "loss", (("B", 2), ("T", 16)), "f32",
        step, dims,
    )  # fmt: skip
    narrowed = narrow(fuse(schedule)[0])[0]
    plan = {}  # every product a GEMM statement, small as they are here
    for lc, name in zip(narrowed.launches, nest_names(narrowed.launches), strict=True):
        g = contraction(lc.kernel)
        if g is not None and name not in plan:
            layout = dataclasses.replace(default_layout(lc.kernel), pack=(g.a, g.b))
            plan[name] = with_gemm(lc.kernel, layout)
    laid = lay_out(narrowed, 2, plan)
    emitted = gemm_epilogues(laid)

    def splits(s):
        return [lc for lc in s.launches if lc.kernel.site == "split_heads/%2"]

    assert len(splits(laid)) == 3 and len(splits(emitted)) == (3 if step else 1)
    attention = [
        lc.kernel for lc in emitted.launches
        if lc.kernel.layout.gemm and lc.kernel.site.startswith("SelfAttention.")
    ]  # fmt: skip
    assert len(attention) == (6 if step else 2)
    assert not any(k.layout.gemm.epilogue for k in attention)
    # q and k read where the projections stored them: [B, T, D], heads along D
    assert sum(b.shape == (2, 16, 48) for k in attention for b in k.inputs) == (0 if step else 2)
    # the merge and the adjoint's transposition: stored at [B, T, H, HD] by the products
    assert sum(k.outputs[0].shape == (2, 16, 2, 24) for k in attention) == (4 if step else 1)
    gemms = [k.body[0] for k in attention]
    assert any(gemm_kstop(s.gemm, s.nest) for s in gemms)  # a·v's, aᵀ·g's prefixes
    assert any(gemm_stop(s.gemm, s.nest) is not None for s in gemms)  # the scores' band
    inputs = storage(laid, args)
    want = [x.tobytes() for x in run_schedule(schedule, args)]
    assert [x.tobytes() for x in NativeEntry(laid).run(inputs)] == want
    assert [x.tobytes() for x in run_schedule(emitted, inputs, laid=True)] == want
