"""The native backend's objects in presk-core's content cache (presk_core.cc.cache: the key,
the digests, the owner and mode checks, the diagnostics), under this generator's version."""

from __future__ import annotations

from pathlib import Path

from presk_core.cc import cache as _cache
from presk_core.cc.cache import cache_dir, entry_path, looks_complete, trusted
from presk_core.cc.toolchain import Toolchain

# Bump when the generated C or its calling convention changes meaning.
CODEGEN_VERSION = "presk-cback 2"

__all__ = ["CODEGEN_VERSION", "build", "cache_dir", "entry_key", "entry_path", "looks_complete"]
__all__ += ["trusted", "Path"]


def entry_key(tc: Toolchain, flags: tuple[str, ...], source: str | tuple[str, ...]) -> str:
    """The content key of one of the native backend's objects."""
    return _cache.entry_key(CODEGEN_VERSION, tc, flags, source)


def build(
    tc: Toolchain, flags: tuple[str, ...], source: str | tuple[str, ...], *, rebuild: bool = False
) -> Path:
    """The object of `source` compiled with `flags`, from the cache or compiled into it."""
    return _cache.build(CODEGEN_VERSION, tc, flags, source, rebuild=rebuild)
