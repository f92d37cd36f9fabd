"""The `core` document: a PSK-Core program in msgpack (docs/ir.md). Decoding checks every
field's kind (presk_syntax.codec) and then the program itself (presk_core.verify: each
operand defined before use, each instruction typed by its operation's rule): a document
that passes is one a pass could have written."""

from __future__ import annotations

from presk_syntax.codec import Codec, DocumentError, FileTable, decode_root, dump_document
from presk_syntax.span import Source
from presk_types.presburger import Lin
from presk_types.types import (
    AxisT,
    Bool,
    FnT,
    Idx,
    Instance,
    KeyT,
    Machine,
    ModuleT,
    ParamsT,
    Real,
    Shape,
    TupleT,
)

from presk_core.ir import Function, Instr, Leaf, Lit, Origin, ParamLayout, Program, Training, Value

# 2: sites and origins of instructions; 3: layouts, bounds, trainings; 4: `ParamLayout`
CORE_VERSION = 4
TYPES = (Lin, AxisT, Shape, Real, Idx, Bool, Machine, KeyT, Instance, ParamsT, ModuleT, TupleT, FnT)
CORE_CODEC = Codec(
    (*TYPES, Value, Lit, Origin, Instr, Function, Leaf, ParamLayout, Training, Program)
)


def encode_core(program: Program, sources: list[Source]) -> bytes:
    files = FileTable(sources)
    return dump_document(
        "core", CORE_VERSION, {"program": CORE_CODEC.encode(program, files)}, files
    )


def decode_core(data: bytes, verified: bool = True) -> tuple[Program, FileTable]:
    """The program and the files of a `core` document; DocumentError if it is malformed or
    (unless `verified` is False: the codec's own tests of nodes no program holds together)
    its program does not verify."""
    from presk_core.verify import VerifyError, verify

    program, files = decode_root(
        data, "core", CORE_VERSION, "program", CORE_CODEC, Program, "program"
    )
    try:
        if verified:
            verify(program)
    except VerifyError as e:
        raise DocumentError(f"the `core` document's program is not well formed: {e}") from None
    except RecursionError:
        raise DocumentError("the `core` document's program is nested too deeply") from None
    except Exception as e:  # the verifier meeting what no pass writes
        raise DocumentError(
            f"the `core` document's program is not well formed ({type(e).__name__}: {e})"[:300]
        ) from None
    return program, files
