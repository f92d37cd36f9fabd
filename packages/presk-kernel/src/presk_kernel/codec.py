"""The `kernel` document: an entry's schedule (its buffers and launched kernels) in msgpack."""

from __future__ import annotations

from presk_syntax.codec import (
    Codec,
    DocumentError,
    FileTable,
    check_version,
    dump_document,
    load_document,
)

from presk_kernel.ir import NODE_TYPES, Schedule

KERNEL_VERSION = 1
KERNEL_CODEC = Codec(NODE_TYPES)


def encode_kernel(schedule: Schedule) -> bytes:
    files = FileTable()
    payload = {"schedule": KERNEL_CODEC.encode(schedule, files)}
    return dump_document("kernel", KERNEL_VERSION, payload, files)


def decode_kernel(data: bytes) -> Schedule:
    _, doc, files = load_document(data, ["kernel"])
    check_version(doc, "kernel", KERNEL_VERSION)
    try:
        schedule = KERNEL_CODEC.decode(doc.get("schedule"), files)
    except (RecursionError, TypeError) as e:
        raise DocumentError(f"the `kernel` document is malformed ({type(e).__name__})") from None
    if not isinstance(schedule, Schedule):
        raise DocumentError("the `kernel` document holds no schedule")
    return schedule
