"""The msgpack documents that stages exchange, and a codec for trees of frozen dataclasses.

A document is a msgpack map `{"presk": KIND, "version": N, "files": [...], ...}`. A node is
a map `{"@": "ClassName", field: value, ...}`; a tuple is an array; a `Span` is a map
`{"@": "Span", "file": i, "start": s, "end": e}` whose file is an index into the
document's `files` table (each file once, with its text, so that a later stage can render
diagnostics from the document alone); an integer outside msgpack's range (−2⁶³ to 2⁶⁴ − 1)
is a map `{"@": "Int", "hex": DIGITS}` (base 16, which has no length limit in Python). docs/ir.md describes every schema.

Decoding checks every field of every node against its annotation (`fits`), and every
structure around them (the header, the file table, spans): any other value is a
DocumentError saying which, never another exception.

Every stage builds its own `Codec` from its node classes; this module owns the mechanism.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

import msgpack

from presk_syntax import ast as A
from presk_syntax.literals import float_problem, name_problem
from presk_syntax.span import Source, Span

AST_VERSION = 1
INT_MIN, INT_MAX = -(2**63), 2**64 - 1  # what msgpack writes as an integer


class DocumentError(Exception):
    """A document that cannot be read: not msgpack, not presk's, or of another version."""


class FileTable:
    """The files a document's spans point into, each once, in order of first use."""

    def __init__(self, sources: Iterable[Source] = ()) -> None:
        self.sources: list[Source] = []
        self._index: dict[str, int] = {}
        self._sizes: dict[str, int] = {}
        for source in sources:
            self.add(source)

    def add(self, source: Source) -> int:
        if source.path not in self._index:
            self._index[source.path] = len(self.sources)
            self.sources.append(source)
        return self._index[source.path]

    def index(self, path: str) -> int:
        if path not in self._index:
            self.add(Source(path, ""))
        return self._index[path]

    def path(self, index: int) -> str:
        return self.sources[index].path

    def size(self, index: int) -> int | float:
        """The bytes of a file's text, or infinity when the table holds no text for it (a
        later stage's spans into files it was not given)."""
        source = self.sources[index]
        if not source.text:
            return float("inf")
        if source.path not in self._sizes:
            self._sizes[source.path] = len(source.text.encode("utf-8", errors="surrogatepass"))
        return self._sizes[source.path]

    def to_msgpack(self) -> list:
        return [[s.path, s.text] for s in self.sources]

    @classmethod
    def from_msgpack(cls, data: Any) -> FileTable:
        """The table of `[[PATH, TEXT], …]`, each a string, each path once."""
        if not isinstance(data, list):
            raise DocumentError(f"the document's file table is {_kind(data)}, not an array")
        table = cls()
        for entry in data:
            if not (
                isinstance(entry, list)
                and len(entry) == 2
                and all(isinstance(x, str) for x in entry)
            ):
                raise DocumentError(
                    "the document's file table is malformed: each entry is [PATH, TEXT],"
                    f" two strings, not {str(entry)[:60]}"
                )
            if entry[0] in table._index:
                raise DocumentError(f"the document's file table names `{entry[0]}` twice")
            table.add(Source(entry[0], entry[1]))
        return table


class Codec:
    """Encodes and decodes trees of the given frozen dataclasses (and Span)."""

    def __init__(
        self,
        node_types: Iterable[type],
        checks: dict[str, Callable[[Any], str | None]] | None = None,
    ) -> None:
        self.types = {t.__name__: t for t in node_types}
        self.checks = checks or {}  # a node's class -> why a decoded node is not one a stage makes
        self.fields = {
            name: [f.name for f in dataclasses.fields(t)] for name, t in self.types.items()
        }
        self._hints: dict[str, dict[str, Any]] = {}  # the schema, resolved at first use

    def encode(self, value: Any, files: FileTable) -> Any:
        match value:
            case bool():
                return value
            case int() if not INT_MIN <= value <= INT_MAX:  # a literal ≥ 2⁶⁴: as its digits
                return {"@": "Int", "hex": format(value, "x")}
            case None | int() | float() | str() | bytes():
                return value
            case Span(file, start, end):
                return {"@": "Span", "file": files.index(file), "start": start, "end": end}
            case tuple() | list():
                return [self.encode(v, files) for v in value]
            case _ if type(value).__name__ in self.types:
                name = type(value).__name__
                out = {"@": name}
                for field in self.fields[name]:
                    out[field] = self.encode(getattr(value, field), files)
                return out
        raise TypeError(f"cannot encode {type(value).__name__} in a presk document")

    def decode(self, data: Any, files: FileTable) -> Any:
        match data:
            case None | bool() | int() | float() | str() | bytes():
                return data
            case list():
                return tuple(self.decode(v, files) for v in data)
            case {"@": "Int", "hex": str(text)} if len(data) == 2:
                if not re.fullmatch(r"-?[0-9a-f]+", text) or len(text) > 1_000_000:
                    raise DocumentError(f"an `Int` is not an integer's hex digits: {text[:40]}")
                return int(text, 16)
            case {"@": "Span", "file": int(i), "start": int(s), "end": int(e)} if len(data) == 4:
                if any(isinstance(x, bool) for x in (i, s, e)):
                    raise DocumentError("a span's file, start and end are integers, not booleans")
                if not 0 <= i < len(files.sources):
                    raise DocumentError(f"a span points to file {i}, not in the file table")
                if not 0 <= s <= e:
                    raise DocumentError(f"a span runs from byte {s} to byte {e}")
                if e > files.size(i):
                    raise DocumentError(f"a span ends at byte {e}, after the end of its file")
                return Span(files.path(i), s, e)
            case {"@": str(name), **fields} if name in self.types:
                missing = [f for f in self.fields[name] if f not in fields]
                if missing:
                    raise DocumentError(f"a `{name}` node lacks its field `{missing[0]}`")
                extra = [f for f in fields if f not in self.fields[name]]
                if extra:
                    raise DocumentError(f"a `{name}` node has no field `{str(extra[0])[:40]}`")
                args = {f: self.decode(fields[f], files) for f in self.fields[name]}
                hints = self._hints.get(name)
                if hints is None:
                    hints = self._hints[name] = field_hints(self.types[name])
                for f, value in args.items():
                    if f in hints and not fits(value, hints[f]):
                        raise DocumentError(
                            f"a `{name}` node's field `{f}` holds {_kind(value)}, not"
                            f" {_show(hints[f])}"
                        )
                if (check := self.checks.get(name)) and (why := check(args)):
                    raise DocumentError(f"a `{name}` node is malformed ({why})")
                try:
                    return self.types[name](**args)
                except RecursionError:
                    raise
                except (
                    Exception
                ) as e:  # the class's own checks (__post_init__), whatever they raise
                    raise DocumentError(f"a `{name}` node is malformed ({e})") from None
            case {"@": str(name)}:
                raise DocumentError(f"a node of an unknown class `{name[:40]}`, or malformed")
        raise DocumentError(f"unexpected value in the document: {str(data)[:60]}")


# ---- the schema: each field's annotation, checked on the decoded value ----------------


def field_hints(cls: type) -> dict[str, Any]:
    """The annotations of a dataclass's fields as types (`Expr | None`, `tuple[Axis, ...]`),
    its module's string aliases (`Expr: TypeAlias = "Var | …"`) resolved; a field whose
    annotation does not resolve is left out (not checked)."""
    module = sys.modules[cls.__module__]
    names = _namespace(module)
    out = {}
    for f in dataclasses.fields(cls):
        try:
            out[f.name] = eval(f.type, names) if isinstance(f.type, str) else f.type  # noqa: S307
        except Exception:  # an annotation this schema cannot read: unchecked
            continue
    return out


_NAMESPACES: dict[str, dict[str, Any]] = {}


def _namespace(module: types.ModuleType) -> dict[str, Any]:
    """The module's globals, its string type aliases evaluated (in any order of definition)."""
    if module.__name__ in _NAMESPACES:
        return _NAMESPACES[module.__name__]
    names = dict(vars(module))
    pending = {
        k: v for k, v in names.items() if isinstance(v, str) and "|" in v and k[:1].isupper()
    }
    while pending:
        done = {}
        for k, v in pending.items():
            try:
                done[k] = eval(v, names)  # noqa: S307
            except Exception:
                continue
        if not done:
            break
        names.update(done)
        pending = {k: v for k, v in pending.items() if k not in done}
    _NAMESPACES[module.__name__] = names
    return names


def fits(value: Any, hint: Any) -> bool:
    """Whether a decoded value is of the annotated type (lists already made tuples)."""
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, arm) for arm in typing.get_args(hint))
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(fits(v, args[0]) for v in value)
        return len(args) == len(value) and all(fits(v, a) for v, a in zip(value, args, strict=True))
    if origin is not None or not isinstance(hint, type):
        return True  # a form this schema does not check
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    name = type(value).__name__
    return {"tuple": "an array", "str": "a string", "int": "an integer"}.get(name, f"a `{name}`")


def _show(hint: Any) -> str:
    text = str(hint) if not isinstance(hint, type) else hint.__name__
    return "`" + re.sub(r"\b[a-z_]+(\.[a-z_]+)*\.(?=[A-Z])", "", text)[:120] + "`"


AST_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "FloatLit": lambda f: float_problem(f["text"]),  # constants read it with gmpy2
    "QualName": lambda f: name_problem(f["parts"]),  # the elaborator looks up its parts
}
AST_CODEC = Codec(A.NODE_TYPES, AST_CHECKS)


def dump_document(kind: str, version: int, payload: dict, files: FileTable) -> bytes:
    """A document's bytes: the header, the file table and the payload's entries."""
    doc = {"presk": kind, "version": version, "files": files.to_msgpack(), **payload}
    return msgpack.packb(doc, use_bin_type=True)


def load_document(data: bytes, kinds: Iterable[str] | None = None) -> tuple[str, dict, FileTable]:
    """The kind, the map and the file table of a document; DocumentError when unreadable."""
    try:
        doc = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types for bad input
        raise DocumentError(f"not a presk document (msgpack: {e})") from None
    if not isinstance(doc, dict) or "presk" not in doc or "version" not in doc:
        raise DocumentError("not a presk document (no `presk` and `version` header)")
    kind = doc["presk"]
    if not isinstance(kind, str):
        raise DocumentError(f"not a presk document (its kind is {_kind(kind)}, not a string)")
    allowed = list(kinds) if kinds is not None else None
    if allowed is not None and kind not in allowed:
        raise DocumentError(f"expected a document of kind {' or '.join(allowed)}, got `{kind}`")
    return kind, doc, FileTable.from_msgpack(doc.get("files", []))


def encode_ast(tree: A.SourceFile, source: Source) -> bytes:
    """The AST document of one parsed file."""
    files = FileTable([source])
    return dump_document("ast", AST_VERSION, {"tree": AST_CODEC.encode(tree, files)}, files)


def decode_ast(data: bytes) -> tuple[A.SourceFile, FileTable]:
    """The tree and the files of an AST document."""
    _, doc, files = load_document(data, ["ast"])
    check_version(doc, "ast", AST_VERSION)
    try:
        tree = AST_CODEC.decode(doc.get("tree"), files)
    except RecursionError:
        raise DocumentError("the document is nested too deeply to be a syntax tree") from None
    if not isinstance(tree, A.SourceFile):
        raise DocumentError("the AST document holds no source file")
    return tree, files


def check_version(doc: dict, kind: str, version: int) -> None:
    """Refuse a document of another version than the one this stage reads."""
    given = doc.get("version")
    if type(given) is not int or given != version:  # not True, not 1.0
        raise DocumentError(
            f"this `{kind}` document is of version {str(given)[:40]}; this presk reads"
            f" version {version}: produce it again with this presk"
        )


def decode_root(
    data: bytes, kind: str, version: int, key: str, codec: Codec, cls: type, what: str
) -> tuple[Any, FileTable]:
    """The node a `kind` document of `version` holds under `key`, an instance of `cls`
    (`what` names it in the error), and the document's file table; DocumentError when the
    bytes are no such document (the `core` and `kernel` documents)."""
    _, doc, files = load_document(data, [kind])
    check_version(doc, kind, version)
    try:
        root = codec.decode(doc.get(key), files)
    except RecursionError:
        raise DocumentError(f"the `{kind}` document is nested too deeply") from None
    if not isinstance(root, cls):
        raise DocumentError(f"the `{kind}` document holds no {what}")
    return root, files
