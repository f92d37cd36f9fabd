"""The `kernel` document: an entry's schedule (its buffers and launched kernels) in msgpack."""

from __future__ import annotations

from presk_syntax.codec import Codec, FileTable, decode_root, dump_document

from presk_kernel.ir import NODE_TYPES, Schedule

KERNEL_VERSION = 1
KERNEL_CODEC = Codec(NODE_TYPES)


def encode_kernel(schedule: Schedule) -> bytes:
    files = FileTable()
    payload = {"schedule": KERNEL_CODEC.encode(schedule, files)}
    return dump_document("kernel", KERNEL_VERSION, payload, files)


def decode_kernel(data: bytes) -> Schedule:
    return decode_root(
        data, "kernel", KERNEL_VERSION, "schedule", KERNEL_CODEC, Schedule, "schedule"
    )[0]
