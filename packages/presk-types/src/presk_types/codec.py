"""The `elab` document: a program's files, parsed, in import order, and its overrides.

`{"presk": "elab", "version": 1, "files": [[PATH, TEXT], …], "main": PATH,
"trees": [SourceFile, …], "overrides": {NAME: VALUE}}`. A reader elaborates it again
(`load_program` with the trees given), which is cheap and exact: the document holds
everything the elaboration reads, and nothing it derives.
"""

from __future__ import annotations

from presk_syntax import ast as A
from presk_syntax.codec import (
    AST_CODEC,
    DocumentError,
    FileTable,
    check_version,
    dump_document,
    load_document,
)
from presk_syntax.span import Source

from presk_types.elab import Program, load_program

ELAB_VERSION = 1


def encode_elab(program: Program, overrides: dict[str, str]) -> bytes:
    files = FileTable(env.source for env in program.files)
    trees = [AST_CODEC.encode(env.ast, files) for env in program.files]
    payload = {"main": program.main.path, "trees": trees, "overrides": dict(overrides)}
    return dump_document("elab", ELAB_VERSION, payload, files)


def decode_elab(data: bytes) -> tuple[str, dict[str, tuple[Source, A.SourceFile]], dict[str, str]]:
    """The main path, the parsed files by path, and the constant overrides; DocumentError
    when a field is missing or of another kind: `trees` an array of source files, each of
    the file table and once, `main` the path of one of them, `overrides` a map of strings."""
    _, doc, files = load_document(data, ["elab"])
    check_version(doc, "elab", ELAB_VERSION)
    raw, main, overrides = doc.get("trees"), doc.get("main"), doc.get("overrides", {})
    if not isinstance(raw, list):
        raise DocumentError(f"an `elab` document's `trees` is {_kind(raw)}, not an array")
    if not isinstance(main, str):
        raise DocumentError(f"an `elab` document's `main` is {_kind(main)}, not a path")
    if not isinstance(overrides, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in overrides.items()
    ):
        raise DocumentError("an `elab` document's `overrides` is not a map of strings to strings")
    try:
        trees = [AST_CODEC.decode(t, files) for t in raw]
    except RecursionError:
        raise DocumentError("the document is nested too deeply") from None
    sources = {s.path: s for s in files.sources}
    parsed = {}
    for tree in trees:
        if not isinstance(tree, A.SourceFile) or tree.path not in sources:
            raise DocumentError("an `elab` document's trees must be source files of its table")
        if tree.path in parsed:
            raise DocumentError(f"an `elab` document holds the tree of `{tree.path}` twice")
        parsed[tree.path] = (sources[tree.path], tree)
    if main not in parsed:
        raise DocumentError("an `elab` document names its main file among its trees")
    return main, parsed, dict(overrides)


def _kind(value) -> str:
    return "missing" if value is None else f"a `{type(value).__name__}`"


def program_of(data: bytes, sources=None) -> Program:
    main, parsed, overrides = decode_elab(data)
    return load_program(main, overrides, sources, parsed)
