"""The PSK-Kernel verifier: hand-broken kernels, each problem class refused and its near miss
accepted; every lowered, fused and laid-out entry accepted; the scalar operations' table and
the kernel interpreter's rules."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kernel_entries import ENTRIES, lowered
from presk_kernel.contract import recognize
from presk_kernel.epilogue import gemm_epilogues
from presk_kernel.fuse import fuse
from presk_kernel.interp import OP_RULES
from presk_kernel.ir import (
    SCALAR_OPS,
    SCALAR_TABLE,
    TRANSCENDENTAL,
    Affine,
    Arg,
    Axis,
    Buffer,
    Const,
    Gemm,
    HostBuffer,
    Index,
    Kernel,
    Launch,
    Layout,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    Var,
)
from presk_kernel.layout import apply_layout, lay_out
from presk_kernel.rows import fuse_rows
from presk_kernel.spec import KernelVerifyError, problems, schedule_problems, verify_schedule

v = Affine.var


def ax(*ns: int) -> tuple[Axis, ...]:
    return tuple(Axis(None, n) for n in ns)


def matmul(**change) -> Kernel:
    """out[i, j] = (fold fma over p of x[i, p]·w[p, j]) · 0.5, the near miss of every test; `change` replaces a part."""
    parts = dict(
        a_index=(v("i"), v("p")),
        term=None,
        acc="f64",
        fold_op="fma",
        extent_j=3,
        store_buf=2,
        let=Let("t", Op("mul", (Var("s"), Const(0.5, "f64")))),
        out=Var("t"),
        layout=Layout(order=("i", "j")),
    )
    assert set(change) <= set(parts)
    parts |= change
    a_index, term, acc, fold_op, extent_j, store_buf, let, out, layout = parts.values()
    terms = term or (Load(0, a_index), Load(1, (v("p"), v("j"))))
    fold = Reduce("s", fold_op, (("p", None, 4),), (), terms, acc)
    body = (
        Loop(
            "i",
            None,
            2,
            (Loop("j", None, extent_j, (fold, let, Store(store_buf, (v("i"), v("j")), out))),),
        ),
    )
    return Kernel(
        "ein",
        "e/%1",
        (Buffer(0, "f64", ax(2, 4)), Buffer(1, "f64", ax(4, 3))),
        (Buffer(2, "f64", ax(2, 3)),),
        body,
        "f64",
        layout,
    )


def test_the_near_miss_is_accepted():
    assert problems(matmul()) == []


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        # buffers
        (dict(store_buf=0), "not an output"),
        (dict(store_buf=5), "not an output"),
        (dict(term=(Load(7, (v("i"), v("p"))), Load(1, (v("p"), v("j"))))), "not a buffer"),
        (dict(a_index=(v("i"),)), "1 indices for its 2 axes"),
        # indices in bounds: j runs to 3 but w has 3 columns only (j < 3 is the near miss)
        (dict(extent_j=4), "runs over 0 … 3, outside axis 1 of length 3"),
        (dict(a_index=(v("i"), Affine((("p", 1),), 1))), "runs over 1 … 4"),
        (dict(a_index=(v("i"), Affine((("p", -1),), 0))), "runs over -3 … 0"),
        # bound variables
        (dict(out=Var("u")), "`u` is read where no let or fold defines it"),
        (dict(a_index=(v("i"), v("q"))), "reads `q`, not a loop variable"),
        (dict(let=Let("t", Op("add", (Var("s"), Index("q"))))), "`index q` is not a loop"),
        # operations: arity, kinds, attrs, unknown
        (dict(let=Let("t", Op("mul", (Var("s"),)))), "takes 2 operands, not 1"),
        (dict(let=Let("t", Op("fma", (Var("s"), Var("s"))))), "takes 3 operands, not 2"),
        (dict(let=Let("t", Op("frobnicate", (Var("s"),)))), "not a scalar operation"),
        (dict(let=Let("t", Op("select", (Var("s"), Var("s"), Var("s"))))), "not a bool"),
        (dict(let=Let("t", Op("compare", (Var("s"), Var("s")), "<>"))), "a comparison's attr"),
        (dict(let=Let("t", Op("pow", (Var("s"),), 2.5))), "integer exponent"),
        (dict(let=Let("t", Op("exp", (Var("s"),), 2))), "takes no attr"),
        # accumulators
        (dict(acc="f32"), "accumulator `s` is of type `f32`"),
        (dict(acc="i64"), "contraction `s` accumulates in `i64`"),
        (dict(fold_op="mul"), "folds by `mul`"),
        (dict(fold_op="add"), "has 2 terms"),
        # layouts
        (dict(layout=Layout(order=("i", "p"))), "permutation"),
        (dict(layout=Layout(order=("i", "j"), lanes="p", width=4)), "reduction keeps its order"),
        (dict(layout=Layout(order=("i", "j"), pack=(2,))), "only inputs are packed"),
        (dict(layout=Layout(order=("i", "j"), pack=(0, 1))), "only a GEMM statement packs"),
    ],
)
def test_each_problem_is_refused(broken, says):
    found = problems(matmul(**broken))
    assert found and any(says in p for p in found), found


def test_an_index_buffer_stores_integers():
    k = matmul(store_buf=3)
    k = replace(k, outputs=(Buffer(2, "f64", ax(2, 3)), Buffer(3, "i64", ax(2, 3))))
    assert "a store of a real into %3 : i64" in problems(k)[0]
    as_int = Let("t", Op("compare", (Var("s"), Const(0.0, "f64")), "<"))
    assert "a store of a bool into %3 : i64" in problems(replace(k, body=_relet(k, as_int)))[0]
    floats = replace(k, outputs=(Buffer(2, "f64", ax(2, 3)), Buffer(3, "f64", ax(2, 3))))
    assert problems(replace(floats, body=_relet(floats, as_int))) == []  # a truth as a real


def _relet(k: Kernel, let: Let) -> tuple:
    (outer,) = k.body
    (inner,) = outer.body
    fold, _, store = inner.body
    return (replace(outer, body=(replace(inner, body=(fold, let, store)),)),)


def test_a_legal_layout_is_accepted():
    layout = Layout(order=("j", "i"), tiles=(("i", 1),), lanes="i", width=2, split="j", threads=2)
    laid = apply_layout(matmul(), layout)
    assert problems(laid) == []
    assert [type(s).__name__ for s in laid.body] == ["Tile"]  # i in tiles of 1, j split


def test_a_layout_is_applied_to_the_body_it_says():
    layout = Layout(order=("j", "i"), tiles=(("i", 1),), lanes="i", width=2, split="j", threads=2)
    (p,) = problems(matmul(layout=layout))  # the near miss above, not laid out
    assert "is not applied to its body (the `layout` pass)" in p
    laid = apply_layout(matmul(), layout)
    (tile,) = laid.body
    (point,) = tile.body
    wrong = replace(laid, body=(replace(tile, body=(replace(point, threads=4),)),))
    (p,) = problems(wrong)  # threads on the wrong loop: not what the layout says
    assert "its laid-out body is not its layout" in p
    assert problems(apply_layout(matmul(), Layout(order=("i", "j")))) == []


def test_a_gathered_index_from_an_integer_buffer_is_accepted():
    term = (Load(0, (Load(2, (v("i"),)), v("p"))), Load(1, (v("p"), v("j"))))
    k = matmul(term=term, store_buf=3)
    k = replace(
        k, inputs=(*k.inputs, Buffer(2, "i64", ax(2))), outputs=(Buffer(3, "f64", ax(2, 3)),)
    )
    assert problems(k) == []
    floats = replace(k, inputs=(k.inputs[0], k.inputs[1], Buffer(2, "f64", ax(2))))
    assert any("not an integer" in p for p in problems(floats))


# ---- a GEMM statement with a prologue and an epilogue (presk_kernel.epilogue's forms) -----


def emitted_nest(**change) -> Kernel:
    """h[i, j] = (fold fma over p of (x[i, p]·2)·w[p, j]) + bias[j], y[i, j] = h[i, j]·0.5,
    not laid out: the nest of a GEMM statement whose A is computed into its panel (a
    prologue) and whose epilogue stores C then y (`gemm_epilogues`' `keep`); `change`
    replaces a part."""
    parts = dict(
        a_term=Op("mul", (Load(0, (v("i"), v("p"))), Const(2.0, "f64"))),
        let=Let("e", Op("add", (Var("s"), Load(2, (v("j"),))))),
        c_store=Store(3, (v("i"), v("j")), Var("e")),
        y_let=Let("t", Op("mul", (Var("e"), Const(0.5, "f64")))),
        y_store=Store(4, (v("i"), v("j")), Var("t")),
    )
    assert set(change) <= set(parts)
    parts |= change
    a_term, *after = parts.values()
    fold = Reduce("s", "fma", (("p", None, 4),), (), (a_term, Load(1, (v("p"), v("j")))), "f64")
    return Kernel(
        "dot+add+mul",
        "e/%1",
        (Buffer(0, "f64", ax(2, 4)), Buffer(1, "f64", ax(4, 3)), Buffer(2, "f64", ax(3))),
        (Buffer(3, "f64", ax(2, 3)), Buffer(4, "f64", ax(2, 3))),
        (Loop("i", None, 2, (Loop("j", None, 3, (fold, *after)),)),),
        "f64",
        Layout(order=("i", "j")),
    )


def emitted(gemm: Gemm | None = None, **change) -> Kernel:
    """`emitted_nest(**change)` laid out as a GEMM statement: `gemm`, or the near miss's."""
    g = recognize(emitted_nest(), prologues=True) if gemm is None else gemm
    k = emitted_nest(**change)
    return apply_layout(replace(k, layout=Layout(order=("i", "j"), pack=(0, 1), gemm=g)))


def test_a_gemm_statement_with_a_prologue_and_an_epilogue_is_accepted():
    k = emitted()
    (stmt,) = k.body
    g = stmt.gemm
    assert g.prologue[0] is not None and g.prologue[1] is None and g.acc == "s"
    assert [type(s).__name__ for s in g.epilogue] == ["Let", "Store", "Let", "Store"]
    assert problems(k) == []


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        # the record is not its nest's contraction
        (dict(gemm="depth"), "the GEMM statement is not the kernel's contraction"),
        (dict(gemm="no epilogue"), "the GEMM statement is not the kernel's contraction"),
        (dict(gemm="no epilogue"), "its epilogue is not the statements after its fold"),
        (dict(gemm="no prologue"), "its prologue of A is not its fold's term"),
        # an epilogue's statements: lets and stores, C's first, at the element the GEMM
        # finished; each element of each output stored once
        (dict(y_store=Let("u", Var("t"))), "the epilogue's last statement is not a store"),
        (
            dict(c_store=Store(3, (Affine.constant(1), v("j")), Var("e"))),
            "the epilogue stores C (%3) at `1, j`, not where the GEMM leaves the element",
        ),
        (
            dict(y_store=Store(4, (v("i"), Affine.constant(0)), Var("t"))),
            "the epilogue stores %4 at `i, 0`: one element for several of the GEMM's points",
        ),
        (dict(y_store=Store(3, (v("i"), v("j")), Var("t"))), "the epilogue stores %3 twice"),
        (
            dict(y_store=Store(4, (v("i"), Load(2, (v("j"),))), Var("t"))),
            "the epilogue stores %4 at a gathered index",
        ),
        # what an epilogue reads: its product, and no output (C holds partial sums)
        (
            dict(y_let=Let("t", Op("mul", (Var("e"), Load(3, (v("i"), v("j"))))))),
            "the epilogue reads %3, an output",
        ),
        (
            dict(let=Let("e", Load(2, (v("j"),))), y_let=Let("t", Var("e"))),
            "the epilogue does not read the product `s`",
        ),
        # a prologue: exact arithmetic on A's loads, one value per row and term
        (dict(a_term=Op("exp", (Load(0, (v("i"), v("p"))),))), "its prologue of A computes `exp`"),
        (
            dict(a_term=Op("mul", (Load(0, (v("i"), v("p"))), Load(2, (v("j"),))))),
            "its prologue of A reads `j`",
        ),
    ],
)
def test_an_illegal_gemm_epilogue_or_prologue_is_refused(broken, says):
    """Each broken form is refused with its rule, the GEMM statement's record matching its
    nest (its epilogue and prologue the nest's) where the rule is the nest's."""
    g = recognize(emitted_nest(), prologues=True)
    match broken.pop("gemm", None):
        case "depth":
            g = replace(g, depth=3)
        case "no epilogue":
            g = replace(g, acc="", epilogue=())
        case "no prologue":
            g = replace(g, prologue=())
        case None:
            (outer,) = emitted_nest(**broken).body
            (inner,) = outer.body
            fold, *after = inner.body
            term = None if isinstance(fold.terms[0], Load) else fold.terms[0]
            g = replace(g, epilogue=tuple(after), prologue=(term, None))
    found = problems(emitted(g, **broken))
    assert found and any(says in p for p in found), found


def _schedule(k: Kernel, args=None, w="f64") -> Schedule:
    bufs = (
        HostBuffer(0, "f64", ax(2, 4), "x", "input"),
        HostBuffer(1, w, ax(4, 3), "w", "input"),
        HostBuffer(2, "f64", ax(2, 3), "out", "output"),
    )
    args = (Arg(0), Arg(1), Arg(2)) if args is None else args
    return Schedule("e", (), bufs, (Launch(k, tuple(args)),), (0, 1), (2,))


def test_a_schedule_binds_each_buffer_to_a_host_buffer_that_holds_it():
    assert schedule_problems(_schedule(matmul())) == []
    assert "binds 2 buffers to 3" in schedule_problems(_schedule(matmul(), (Arg(0), Arg(1))))[0]
    assert (
        "not a host buffer" in schedule_problems(_schedule(matmul(), (Arg(0), Arg(1), Arg(9))))[0]
    )
    assert (
        "from element 1" in schedule_problems(_schedule(matmul(), (Arg(0), Arg(1), Arg(2, 1))))[0]
    )
    assert "`w` : f32" in schedule_problems(_schedule(matmul(), w="f32"))[0]


def test_the_verifier_names_the_pass():
    with pytest.raises(KernelVerifyError, match=r"after the kernel pass `fusion`: `ein` at e/%1"):
        verify_schedule(_schedule(matmul(extent_j=4)), "fusion")
    assert verify_schedule(_schedule(matmul()), "fusion") is not None


@pytest.mark.parametrize("realize", ["f64", "f32", "bf16"])
def test_every_entry_is_well_formed_after_every_kernel_pass(realize):
    for file, entry, dims, consts in ENTRIES:
        schedule, _, _ = lowered(file, entry, dims, realize, consts=consts)
        for after, s in [("kernel", schedule), ("fusion", fuse(schedule)[0])]:
            assert schedule_problems(s) == [], (entry, after)
        for threads in (1, 2):
            assert schedule_problems(lay_out(fuse(schedule)[0], threads)) == [], entry


def test_the_training_steps_are_well_formed():
    for file, entry, dims, consts in [ENTRIES[5], ENTRIES[7]]:
        schedule, _, _ = lowered(file, entry, dims, "f32", True, consts)
        assert schedule_problems(lay_out(fuse(schedule)[0], 2)) == [], entry


# ---- the table of scalar operations --------------------------------------------------------


def test_the_table_is_of_record():
    assert SCALAR_OPS == {n: op.arity for n, op in SCALAR_TABLE.items()}
    assert all(len(op.operands) == op.arity and op.name == n for n, op in SCALAR_TABLE.items())
    assert TRANSCENDENTAL == {"exp", "log", "tanh", "erf", "erfc", "sin", "cos", "powf"}
    assert {n for n, op in SCALAR_TABLE.items() if op.attr} == {
        "compare",
        "pow",
        "xavier",
        "normal_std",
        "dequant",
    }


def test_the_kernel_interpreter_has_a_rule_for_every_operation():
    missing = sorted(set(SCALAR_TABLE) - set(OP_RULES))
    assert not missing, f"the kernel interpreter's OP_RULES lack {missing}"
    assert not set(OP_RULES) - set(SCALAR_TABLE)


def test_the_passes_run_the_verifier_under_presk_verify(monkeypatch):
    broken = _schedule(matmul(extent_j=4))
    monkeypatch.setenv("PRESK_VERIFY", "1")
    with pytest.raises(KernelVerifyError, match="after the kernel pass `fusion`"):
        fuse(broken)
    with pytest.raises(KernelVerifyError, match="after the kernel pass `layout`"):
        lay_out(broken)
    with pytest.raises(KernelVerifyError, match="after the kernel pass `epilogues`"):
        gemm_epilogues(broken)
    with pytest.raises(KernelVerifyError, match="after the kernel pass `row fusion`"):
        fuse_rows(broken)
    monkeypatch.setenv("PRESK_VERIFY", "0")
    assert fuse(broken)[0] == broken and lay_out(broken).launches[0].kernel.name == "ein"
