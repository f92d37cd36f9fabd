"""Every document kind's decoder (ast, elab, core, kernel) refuses garbage with a
DocumentError, never another exception (issue 27): a field of any node given a value of
any kind, the document cut anywhere, random bytes; and the stage programs print it and exit
1. The documents are 07_train.psk's, made by the stage programs as a user pipes them."""

from __future__ import annotations

import subprocess

import msgpack
import pytest
from helpers import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from presk_core.codec import decode_core
from presk_kernel.codec import decode_kernel, encode_kernel
from presk_syntax.codec import DocumentError, decode_ast
from presk_types.codec import decode_elab

BIN = ROOT / ".venv" / "bin"
PROGRAM = "tutorial/07_train.psk"
DECODERS = {"ast": decode_ast, "elab": decode_elab, "core": decode_core, "kernel": decode_kernel}
READERS = {"ast": "presk-elab", "elab": "presk-lower", "core": "presk-ad", "kernel": "presk-dump"}


def _piped(*programs: str) -> bytes:
    data = b""
    for i, program in enumerate(programs):
        argv = [str(BIN / program), *([PROGRAM] if i == 0 else [])]
        r = subprocess.run(argv, input=data, capture_output=True, cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stderr
        data = r.stdout
    return data


@pytest.fixture(scope="module")
def documents() -> dict[str, bytes]:
    from presk_kernel.fuse import fuse
    from presk_kernel.lower import lower_entry

    docs = {
        "ast": _piped("presk-parse"),
        "elab": _piped("presk-parse", "presk-elab"),
        "core": _piped("presk-parse", "presk-elab", "presk-lower"),
    }
    core, _ = decode_core(_piped("presk-parse", "presk-elab", "presk-lower", "presk-ad"))
    docs["kernel"] = encode_kernel(fuse(lower_entry(core, "loss", {"B": 8}, None, "f64"))[0])
    return docs


def _spots(value, out: list) -> list:
    """Every (container, key) of a msgpack value: a map's entries and an array's items."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for k, v in items:
        out.append((value, k))
        if isinstance(v, (dict, list)):
            _spots(v, out)
    return out


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
NODE = st.sampled_from(["Span", "Int", "SourceFile", "Instr", "Value", "Kernel", "Nope", 5])
VALUES = st.recursive(
    SCALARS | st.fixed_dictionaries({"@": NODE}),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.just("@"), inner, max_size=3)
    ),
    max_leaves=6,
)


def _decodes_or_refuses(kind: str, data: bytes) -> None:
    try:
        DECODERS[kind](data)
    except DocumentError as e:
        assert str(e)


@pytest.mark.parametrize("kind", sorted(DECODERS))
def test_the_documents_decode(documents, kind):
    DECODERS[kind](documents[kind])


@pytest.mark.parametrize("kind", sorted(DECODERS))
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_field_of_another_kind_is_refused_or_read(documents, kind, data):
    doc = msgpack.unpackb(documents[kind], strict_map_key=False)
    spots = _spots(doc, [])
    container, key = spots[data.draw(st.integers(0, len(spots) - 1), label="spot")]
    container[key] = data.draw(VALUES, label="value")
    _decodes_or_refuses(kind, msgpack.packb(doc, use_bin_type=True))


@pytest.mark.parametrize("kind", sorted(DECODERS))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.floats(0, 1, exclude_max=True))
def test_a_cut_document_is_refused(documents, kind, cut):
    data = documents[kind]
    with pytest.raises(DocumentError):
        DECODERS[kind](data[: int(cut * len(data))])


@pytest.mark.parametrize("kind", sorted(DECODERS))
@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=300))
def test_random_bytes_are_refused(kind, data):
    with pytest.raises(DocumentError):
        DECODERS[kind](data)


def _edited(documents, kind: str, **fields) -> bytes:
    doc = msgpack.unpackb(documents[kind], strict_map_key=False)
    doc.update(fields)
    return msgpack.packb(doc, use_bin_type=True)


@pytest.mark.parametrize(
    "fields",
    [
        {"trees": 5},
        {"trees": {"a": 1}},
        {"trees": "abc"},
        {"main": ["a"]},
        {"main": {"a": 1}},
        {"main": 7},
        {"overrides": [1, 2]},
        {"overrides": {"D": 3}},
        {"overrides": {1: "3"}},
        {"files": {"a": "b"}},
        {"files": [[1, 2]]},
        {"version": True},
        {"version": 1.0},
        {"presk": ["elab"]},
    ],
    ids=str,
)
def test_an_elab_document_of_the_wrong_field_types_is_refused(documents, fields):
    """Issue 27: `trees` or `main` of the wrong type was a raw TypeError in decode_elab."""
    with pytest.raises(DocumentError):
        decode_elab(_edited(documents, "elab", **fields))


def test_a_core_program_that_does_not_verify_is_refused(documents):
    """Well-typed fields, an ill-formed program: an operand no instruction defines."""
    doc = msgpack.unpackb(documents["core"], strict_map_key=False)
    uses = [c for c, k in _spots(doc, []) if isinstance(c, dict) and c.get("@") == "Value"]
    uses[-1]["id"] = 10**9
    with pytest.raises(DocumentError, match="not well formed"):
        decode_core(msgpack.packb(doc, use_bin_type=True))


@pytest.mark.parametrize("kind", sorted(DECODERS))
def test_the_stage_program_prints_a_bad_document_and_exits_1(documents, kind):
    doc = msgpack.unpackb(documents[kind], strict_map_key=False)
    first = next(c for c, _ in _spots(doc, []) if isinstance(c, dict) and len(c) > 1)
    first[next(k for k in first if k != "@")] = {"@": "Span", "file": 99, "start": 0, "end": 1}
    r = subprocess.run([str(BIN / READERS[kind])], input=msgpack.packb(doc), capture_output=True,
                       cwd=ROOT, timeout=300)  # fmt: skip
    assert r.returncode == 1 and r.stdout == b"", r.stderr
    assert r.stderr.decode().startswith(f"{READERS[kind]}: "), r.stderr
    assert b"Traceback" not in r.stderr


def _nodes(value, name: str) -> list[dict]:
    """Every node of class `name` in a msgpack value."""
    found = [value] if isinstance(value, dict) and value.get("@") == name else []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for v in items:
        found += _nodes(v, name)
    return found


@pytest.mark.parametrize(
    "node, field, value",
    [
        ("FloatLit", "text", "1.5.3"),  # a string, but no decimal (found by fuzz: constants)
        ("FloatLit", "text", "1e999999999"),  # a decimal too long to read (GMP aborts)
        ("QualName", "parts", []),  # a name of no part (found by fuzz: elab.py)
        ("QualName", "parts", ["not a name"]),
    ],
)
@pytest.mark.parametrize("kind", ["ast", "elab"])
def test_a_tree_holds_only_what_the_parser_makes(documents, kind, node, field, value) -> None:
    """A field of the right type whose contents the parser could not have made is refused
    (a `FloatLit` that is not a decimal, a `QualName` that is not identifiers)."""
    doc = msgpack.unpackb(documents[kind], raw=False, strict_map_key=False)
    targets = _nodes(doc, node)
    assert targets, f"07_train.psk has a {node}"
    targets[0][field] = value
    with pytest.raises(DocumentError, match="malformed"):
        DECODERS[kind](msgpack.packb(doc, use_bin_type=True))
