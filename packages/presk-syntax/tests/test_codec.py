"""The AST document: every program round-trips, every node class is exercised, and a
malformed document is refused with DocumentError, never another exception."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from presk_syntax import ast as A
from presk_syntax.codec import AST_VERSION, DocumentError, decode_ast, encode_ast, load_document
from presk_syntax.parse import parse_file, parse_source
from presk_syntax.span import Source, Span

REPO = Path(__file__).resolve().parents[3]
PROGRAMS = sorted(
    str(p.relative_to(REPO))
    for pattern in ("tutorial/*.psk", "tests/diag/*.psk", "tests/examples/mlp/mlp.psk")
    for p in REPO.glob(pattern)
    if p.name != "bad_syntax.psk"
)

# Every construct the tutorial programs may lack: a serve block, an ascription, a unary minus...
SYNTHETIC = """\
import "01_linear.psk" as lin
const D : nat = 8
const S : nat = -(2 - 4)
static assert D % 2 == 0
dim B
dim T <= 4 * D
type Q = ℝ[batch: B, hd: D / 2]
type P = (idx[8][batch: B], bool[seq: T, seq2: T], params lin.Linear{D, 1}, key, ℝ[], ℝ)

module Init{In Out : dim} {
  param w : ℝ[In, Out]  init = normal(std = 0.02)
  param b : ℝ[Out]
  use blocks : stack{2}(lin.Linear{In, In})
  fn apply(x : ℝ[..., In]) -> ℝ[..., Out] uses Rand = x · w + b
}

fn f{N : dim}(x : ℝ[batch: N, ctx: 3, emb: 8], e : f64 = 1e-6) -> ℝ[] =
  let (a, (b, c)) = (x, (x, "s"))
  let m = merge(axis ctx, axis emb, x)
  let g = grad(λ θ. (θ : ℝ) ^ 2)(1.5)
  let w = x[ctx: 1 .. 3, emb: N - N .. 4]
  mean(softmax(axis emb, m, where = causal_mask(seq: T))) + ein[](a * b)

optimizer adamw {
  lr : f64 = 0.01
}

training run {
  data = stream "data/pairs.psk.d" |> batch(B = 8)
  checkpoint every 50 steps to "ckpt/"
}

inference serve {
  model = t.Tower
}
"""


def node_types(node: object) -> set[type]:
    if isinstance(node, tuple):
        return set().union(*(node_types(v) for v in node))
    if not dataclasses.is_dataclass(node):
        return set()
    found = {type(node)}
    for field in dataclasses.fields(node):
        found |= node_types(getattr(node, field.name))
    return found


def round_trip(source: Source, tree: A.SourceFile) -> A.SourceFile:
    data = encode_ast(tree, source)
    back, files = decode_ast(data)
    assert back == tree
    assert [(s.path, s.text) for s in files.sources] == [(source.path, source.text)]
    assert encode_ast(back, source) == data
    return back


@pytest.mark.parametrize("path", PROGRAMS)
def test_round_trip(path: str):
    source, tree = parse_file(str(REPO / path))
    round_trip(source, tree)


def test_every_node_class_round_trips():
    seen: set[type] = set()
    for path in PROGRAMS:
        seen |= node_types(round_trip(*parse_file(str(REPO / path))))
    source = Source("synthetic.psk", SYNTHETIC)
    seen |= node_types(round_trip(source, parse_source(source)))
    missing = sorted(t.__name__ for t in set(A.NODE_TYPES) - seen)
    assert not missing, f"node classes no round-tripped tree holds: {missing}"


# ---- malformed documents -------------------------------------------------------------------


def linear_document() -> dict:
    source, tree = parse_file(str(REPO / "tutorial" / "01_linear.psk"))
    return msgpack.unpackb(encode_ast(tree, source), raw=False)


def first(node: object, name: str) -> dict:
    """The first map of class `name` in a document's tree, depth first."""
    if isinstance(node, dict):
        if node.get("@") == name:
            return node
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        children = []
    for child in children:
        found = first(child, name)
        if found is not None:
            return found
    return None


def corrupt(edit) -> bytes:
    doc = linear_document()
    edit(doc)
    return msgpack.packb(doc, use_bin_type=True)


def deep_list(depth: int) -> bytes:
    return b"\x91" * depth + b"\x90"  # [[[...[]...]]]: msgpack's nesting limit is above 600


MALFORMED = {
    "empty": b"",
    "not msgpack": b"\xc1\xc1\xc1",
    "truncated": msgpack.packb({"presk": "ast", "version": 1})[:-3],
    "trailing bytes": msgpack.packb({"presk": "ast", "version": 1}) + b"\x00",
    "an array": msgpack.packb([1, 2, 3]),
    "a map without header": msgpack.packb({"tree": {}, "files": []}),
    "a map without version": msgpack.packb({"presk": "ast", "files": []}),
    "another kind": msgpack.packb({"presk": "core", "version": 1, "files": []}),
    "version 999": corrupt(lambda d: d.update(version=999)),
    "no tree": corrupt(lambda d: d.pop("tree")),
    "a tree that is not a file": corrupt(lambda d: d.update(tree={"@": "Var", "name": "x"})),
    "a file table that is not a list": corrupt(lambda d: d.update(files=5)),
    "a file entry of three items": corrupt(lambda d: d.update(files=[["a", "b", "c"]])),
    "a span to a file out of range": corrupt(lambda d: first(d["tree"], "Span").update(file=7)),
    "a span to a negative file": corrupt(lambda d: first(d["tree"], "Span").update(file=-1)),
    "a node missing a field": corrupt(lambda d: first(d["tree"], "Module").pop("name")),
    "an unknown node class": corrupt(lambda d: first(d["tree"], "Var").update({"@": "Nope"})),
    "a set where a value goes": corrupt(lambda d: d["tree"].update(decls={"a": 1})),
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_document(data: bytes):
    with pytest.raises(DocumentError):
        decode_ast(data)


def _deep_document() -> bytes:
    # {"presk": "ast", "version": 1, "files": [], "tree": [[[...]]]}
    head = msgpack.packb("presk") + msgpack.packb("ast") + msgpack.packb("version")
    head += msgpack.packb(AST_VERSION) + msgpack.packb("files") + msgpack.packb([])
    return b"\x84" + head + msgpack.packb("tree") + deep_list(600)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda s: s.update(start=10, end=2), id="end before start"),
        pytest.param(lambda s: s.update(start=-1), id="negative start"),
    ],
)
def test_malformed_span_is_a_document_error(edit):
    with pytest.raises(DocumentError):
        decode_ast(corrupt(lambda d: edit(first(d["tree"], "Span"))))


def test_deeply_nested_document_is_a_document_error():
    data = _deep_document()
    assert load_document(data)[0] == "ast"  # msgpack itself reads it
    with pytest.raises(DocumentError):
        decode_ast(data)


@settings(max_examples=100, deadline=2000)
@given(st.binary(max_size=200))
def test_random_bytes_are_refused(data: bytes):
    try:
        decode_ast(data)
    except DocumentError:
        pass


@settings(max_examples=50, deadline=2000)
@given(st.integers(0, 2000))
def test_truncated_documents_are_refused(cut: int):
    data = msgpack.packb(linear_document(), use_bin_type=True)
    with pytest.raises(DocumentError):
        decode_ast(data[: min(cut, len(data) - 1)])


# ---- big integers (issue 27: a literal ≥ 2⁶⁴ was fatal to msgpack's encoder) ----------------


@settings(max_examples=100, deadline=2000)
@given(st.integers(-(10**40), 10**40) | st.sampled_from([2**64, 2**64 - 1, -(2**63) - 1, 10**5000]))
def test_an_integer_literal_of_any_size_round_trips(n: int):
    source = Source("big.psk", "fn f() -> ℝ = 0\n")
    tree = parse_source(source)
    lit = first_lit(tree)
    big = dataclasses.replace(lit, value=abs(n))
    tree = replace_node(tree, lit, big)
    assert round_trip(source, tree) == tree


def first_lit(node):
    for f in dataclasses.fields(node):
        v = getattr(node, f.name)
        for child in v if isinstance(v, tuple) else (v,):
            if isinstance(child, A.IntLit):
                return child
            if dataclasses.is_dataclass(child):
                found = first_lit(child)
                if found is not None:
                    return found
    return None


def replace_node(node, old, new):
    if node is old:
        return new
    if isinstance(node, tuple):
        return tuple(replace_node(v, old, new) for v in node)
    if not dataclasses.is_dataclass(node) or isinstance(node, Span):
        return node
    changes = {
        f.name: replace_node(getattr(node, f.name), old, new) for f in dataclasses.fields(node)
    }
    return dataclasses.replace(node, **changes)


def test_a_source_with_a_literal_of_2_to_the_64_is_a_document(tmp_path):
    source = Source("big.psk", "fn f() -> ℝ = 18446744073709551616 + 2\n")
    tree = parse_source(source)
    data = encode_ast(tree, source)
    assert decode_ast(data)[0] == tree
    assert {"@": "Int", "hex": "10000000000000000"} == first(msgpack.unpackb(data), "IntLit")[
        "value"
    ]


@pytest.mark.parametrize("text", ["", "0x10", "1 2", "z", "-", "10" * 600_000, 5])
def test_a_malformed_big_integer_is_a_document_error(text):
    source = Source("big.psk", "fn f() -> ℝ = 18446744073709551616\n")
    doc = msgpack.unpackb(encode_ast(parse_source(source), source))
    first(doc["tree"], "IntLit")["value"]["hex"] = text
    with pytest.raises(DocumentError):
        decode_ast(msgpack.packb(doc))
