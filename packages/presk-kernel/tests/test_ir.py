"""The kernel IR: its printed form and its msgpack codec."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernel_entries import lowered
from presk_kernel.calls import signature
from presk_kernel.codec import KERNEL_CODEC, KERNEL_VERSION, decode_kernel, encode_kernel
from presk_kernel.contract import recognize
from presk_kernel.ir import (
    NODE_TYPES,
    Affine,
    Arg,
    Axis,
    Buffer,
    Call,
    Const,
    Gemm,
    GemmStmt,
    HostBuffer,
    Index,
    Inlined,
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
    Tile,
    TwoPass,
    Var,
    format_kernel,
    header,
)
from presk_kernel.layout import apply_layout, default_layout
from presk_syntax.codec import DocumentError, FileTable, dump_document

Q = Buffer(0, "f64", (Axis("batch", 1), Axis("heads", 2), Axis("seq", 3), Axis("hd", 4)))


def test_the_header_is_the_specs():
    out = Buffer(2, "f64", (Axis("batch", 1), Axis("heads", 2), Axis("seq", 3), Axis("seq2", 3)))
    k = Kernel(
        "ein[batch, heads, seq, seq2]", "scores/%2", (Q, Buffer(1, Q.dtype, Q.axes)), (out,), ()
    )
    assert header(k) == (
        "kernel ein[batch, heads, seq, seq2] (%0 : f64[batch: 1, heads: 2, seq: 3, hd: 4],"
        " %1 : f64[batch: 1, heads: 2, seq: 3, hd: 4]) -> %2 : f64[batch: 1, heads: 2, seq: 3,"
        " seq2: 3] {"
    )


def every_node() -> Schedule:
    """A schedule in which every node type of the IR occurs."""
    x = Buffer(0, "bf16", (Axis("batch", 2), Axis(None, 3)))
    ids = Buffer(1, "i64", (Axis("batch", 2),))
    out = Buffer(2, "bf16", (Axis("batch", 2),))
    red = Reduce(
        "s1",
        "max",
        (("i1", None, 3),),
        (Let("t2", Op("mul", (Load(0, (Affine.var("i0"), Affine.var("i1"))), Const(0.5, "f32")))),),
        (
            Op(
                "select",
                (
                    Op("compare", (Index("i1"), Load(1, (Affine.var("i0"),))), "<"),
                    Var("t2"),
                    Const(float("-inf"), "f32"),
                ),
            ),
        ),
        "f32",
    )
    body = (Loop("i0", "batch", 2, (red, Store(2, (Affine(((("i0", 1),)), 0),), Var("s1")))),)
    k = Kernel(
        "max axis x",
        "f/%3",
        (x, ids),
        (out,),
        body,
        "f32",
        Layout(("i0",), (("i0", 1),), "i0", 8, "i0", 2),  # a pack is a GEMM statement's (below)
        ("f/%2", "f/%3"),
    )
    k = apply_layout(k)  # a tile loop in threads around a loop in strips of rows
    assert [type(s).__name__ for s in k.body] == ["Tile"] and k.body[0].threads == 2
    # a gather at a loaded index, a serial loop, an integer attr, a truth value
    value = Op("pow", (Op("real", (Const(True, "bool"),)),), 1)
    gather = Store(1, (Load(0, (Affine.constant(1),)),), value)
    k2 = Kernel("fill", "f/%4", (Buffer(0, "i64", ids.axes),), (Buffer(1, "bf16", out.axes),),
                (Loop("i0", None, 2, (gather,), serial=True),), "f32")  # fmt: skip
    k2 = apply_layout(k2, default_layout(k2))
    # a contraction laid out as a GEMM statement (its operands packed)
    a, w, c = Buffer(0, "f32", (Axis(None, 2), Axis(None, 4))), Buffer(1, "f32", (Axis(None, 4),
              Axis(None, 3))), Buffer(2, "f32", (Axis(None, 2), Axis(None, 3)))  # fmt: skip
    v = Affine.var
    fold = Reduce("s", "fma", (("p", None, 4),), (), (Load(0, (v("i"), v("p"))),
                  Load(1, (v("p"), v("j")))), "f32")  # fmt: skip
    nest = (Loop("i", None, 2, (Loop("j", None, 3, (fold, Store(2, (v("i"), v("j")),
            Var("s")))),)),)  # fmt: skip
    gemm = Gemm(0, 1, 2, "i", "j", "p", 2, 3, 4, (), ((("i", 4), ("p", 1)), (("j", 1),
                ("p", 3)), (("j", 1), ("i", 3))), (0, 0, 0))  # fmt: skip
    k3 = Kernel(
        "ein", "f/%5", (a, w), (c,), nest, "f32", Layout(("i", "j"), pack=(0, 1), gemm=gemm)
    )
    assert recognize(k3) == gemm
    k3 = apply_layout(k3)  # the GEMM statement over its nest
    assert k3.body == (GemmStmt(gemm, 1, nest),)
    # the same contraction blocked over its sum (a fold resumed block by block)
    k5 = apply_layout(replace(k3, site="f/%6", layout=Layout(("i", "j"), kblock=2)))
    assert any(isinstance(s, Tile) and s.of == "p" for s in k5.body)
    # a softmax in two passes
    sx, sy = Buffer(0, "f32", (Axis(None, 2), Axis(None, 3))), Buffer(1, "f32", (Axis(None, 2),
              Axis(None, 3)))  # fmt: skip
    ld = Load(0, (v("i"), v("j")))
    e = Op("exp", (Op("sub", (ld, Var("m"))),))
    past = Affine((("i", 1),), 1)  # triangular bounds (issue 26): j ≤ i, then j > i
    rows = (Reduce("m", "max", (("j", None, 3),), (), (ld,), "f32", stop=past),
            Reduce("s", "add", (("j", None, 3),), (), (e,), "f32"),
            Loop("j", None, 3, (Store(1, (v("i"), v("j")), Op("div", (e, Var("s")))),)),
            Loop("j", None, 3, (Store(1, (v("i"), v("j")), Const(0.0, "f32")),), start=past))  # fmt: skip
    k4 = Kernel("softmax", "f/%7", (sx,), (sy,), (Loop("i", None, 2, rows),), "f32",
                Layout(("i",), passes=2))  # fmt: skip
    k4 = apply_layout(k4)
    assert any(isinstance(s, TwoPass) for s in k4.body[0].body)
    buffers = tuple(
        HostBuffer(i, b.dtype, b.axes, f"b{i}", "input" if i < 2 else "output")
        for i, b in enumerate((x, ids, out, a, w, c, sx, sy))
    )
    launches = (
        Launch(k, (Arg(0), Arg(1), Arg(2))),
        Launch(k2, (Arg(1), Arg(2, 0))),
        Launch(k3, (Arg(3), Arg(4), Arg(5))),
        Launch(k5, (Arg(3), Arg(4), Arg(5))),
        Launch(k4, (Arg(6), Arg(7))),
    )
    flat = Schedule("f", (("B", 2),), buffers, launches, (0, 1, 3, 4, 6), (2, 5, 7))
    # the host functions: f runs launches 0 and 1, calls g (launch 2), h was inlined
    g = Call("g", (Arg(3), Arg(4)), (Arg(5),), (2,))
    body = Call("f", tuple(Arg(b) for b in flat.inputs), (Arg(2), Arg(5), Arg(7)), (0, 1, g, 3, 4),
                (Inlined("h", "launches no kernel"),))  # fmt: skip
    functions = (signature(body, flat), signature(g, flat))
    return replace(flat, functions=functions, body=body)


def _types(value, seen: set) -> None:
    if dataclasses.is_dataclass(value):
        seen.add(type(value))
        for f in dataclasses.fields(value):
            _types(getattr(value, f.name), seen)
    elif isinstance(value, tuple):
        for v in value:
            _types(v, seen)


def test_the_codec_round_trips_every_node_type():
    s = every_node()
    seen: set = set()
    _types(s, seen)
    assert seen == set(NODE_TYPES)
    assert decode_kernel(encode_kernel(s)) == s


def test_the_codec_round_trips_lowered_entries():
    s, _, _ = lowered("tutorial/03_attention.psk", "attend", (("B", 2), ("T", 3)))
    assert decode_kernel(encode_kernel(s)) == s


def test_other_documents_and_versions_are_refused():
    with pytest.raises(DocumentError, match="kind kernel"):
        decode_kernel(
            dump_document("core", 1, {}, __import__("presk_syntax.codec").codec.FileTable())
        )
    old = dump_document(
        "kernel", KERNEL_VERSION + 1, {}, __import__("presk_syntax.codec").codec.FileTable()
    )
    with pytest.raises(DocumentError, match="version"):
        decode_kernel(old)
    with pytest.raises(DocumentError):
        decode_kernel(b"\x93garbage")


@given(
    st.lists(st.tuples(st.sampled_from(["i0", "i1", "i2"]), st.integers(-5, 5)), max_size=3),
    st.integers(-100, 100),
    st.floats(allow_nan=False),
)
def test_affine_maps_and_constants_round_trip(terms, const, value):
    k = Kernel(
        "k", "f/%1", (), (Q,), (Store(0, (Affine(tuple(terms), const),) * 4, Const(value, "f64")),)
    )
    s = Schedule("f", (), (), (Launch(k, (Arg(0),)),), (), ())
    # the codec alone: decode_kernel also verifies, and these indices are not in bounds
    files = FileTable()
    assert KERNEL_CODEC.decode(KERNEL_CODEC.encode(s, files), files) == s


def test_the_printed_form_shows_loops_folds_and_layouts():
    text = format_kernel(every_node().launches[0].kernel)
    assert (
        text.splitlines()[0]
        == "kernel max axis x (%0 : bf16[batch: 2, 3], %1 : i64[batch: 2]) -> %2 : bf16[batch: 2] {"
    )
    assert "// site f/%3, f32, order i0, tile [i0: 1], lanes i0 x8, split (i0, 2), no pack" in text
    assert "  tile i0_t < 2 by 1 (i0) threads 2 {" in text  # the layout applied
    assert "    for i0 < 2 in i0_t + 1 (batch), lanes 8, strip 8 rows {" in text
    gemm = format_kernel(every_node().launches[2].kernel)
    assert "  gemm 2x3x4 (a %0, b %1, c %2), threads 1, of {\n    for i < 2 {" in gemm
    assert "s1 : f32 = fold max over i1 < 3 {" in text
    assert "} of select(compare <(index i1, %1[i0]), t2, -inf)" in text
    assert "for serial i0 < 2 {" in format_kernel(every_node().launches[1].kernel)
