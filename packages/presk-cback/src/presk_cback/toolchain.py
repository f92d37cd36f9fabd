"""The C toolchain of the native backend: presk-core's (presk_core.cc.toolchain), the one
toolchain of every C presk compiles. Its names stay importable from here."""

from presk_core.cc.toolchain import (
    BASE_FLAGS,
    INSTALL_HELP,
    OPENMP_FLAG,
    WARNINGS,
    CompileError,
    Toolchain,
    compile_shared,
    find_toolchain,
)

__all__ = [
    "BASE_FLAGS",
    "INSTALL_HELP",
    "OPENMP_FLAG",
    "WARNINGS",
    "CompileError",
    "Toolchain",
    "compile_shared",
    "find_toolchain",
]
