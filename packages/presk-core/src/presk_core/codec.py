"""The `core` document: a PSK-Core program in msgpack (docs/ir.md)."""

from __future__ import annotations

from presk_syntax.codec import Codec, FileTable, decode_root, dump_document
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

from presk_core.ir import Function, Instr, Layout, Leaf, Lit, Origin, Program, Training, Value

CORE_VERSION = 3  # 2: the sites and origins of instructions; 3: layouts, bounds, trainings
TYPES = (Lin, AxisT, Shape, Real, Idx, Bool, Machine, KeyT, Instance, ParamsT, ModuleT, TupleT, FnT)
CORE_CODEC = Codec((*TYPES, Value, Lit, Origin, Instr, Function, Leaf, Layout, Training, Program))


def encode_core(program: Program, sources: list[Source]) -> bytes:
    files = FileTable(sources)
    return dump_document(
        "core", CORE_VERSION, {"program": CORE_CODEC.encode(program, files)}, files
    )


def decode_core(data: bytes) -> tuple[Program, FileTable]:
    return decode_root(data, "core", CORE_VERSION, "program", CORE_CODEC, Program, "program")
