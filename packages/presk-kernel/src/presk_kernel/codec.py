"""The `kernel` document: an entry's schedule (its buffers and launched kernels) in msgpack.
Decoding checks every field's kind (presk_syntax.codec), then the schedule (presk_kernel
.spec: buffers bound within their host buffers, indices in range, types agreeing)."""

from __future__ import annotations

from presk_syntax.codec import Codec, DocumentError, FileTable, decode_root, dump_document

from presk_kernel.ir import NODE_TYPES, Schedule

# 2: Layout.gemm; 3: the host functions; 4: laid-out bodies (Tile, For, GemmStmt);
# 5: layout plans (Layout.kblock, blocks, depth, passes; a fold's block; TwoPass)
# 6: triangular bounds (Loop.start, Loop.stop, Reduce.stop: presk_kernel.narrow);
# 7: a GEMM statement's epilogue and prologues (Gemm.acc, epilogue, prologue)
# 8: a GEMM statement's threads over its batch (GemmStmt.batched), a contraction's zero
#    terms (Reduce.zeros: presk_kernel.narrow.zero_operands)
# 9: slice groups (Layout.parts, GemmStmt.bound: presk_kernel.slices)
# 10: a slice group's scratch buffers, one slice a point (Layout.scratch)
KERNEL_VERSION = 10
KERNEL_CODEC = Codec(NODE_TYPES)


def encode_kernel(schedule: Schedule) -> bytes:
    files = FileTable()
    payload = {"schedule": KERNEL_CODEC.encode(schedule, files)}
    return dump_document("kernel", KERNEL_VERSION, payload, files)


def decode_kernel(data: bytes) -> Schedule:
    """The schedule of a `kernel` document; DocumentError if it is malformed or does not
    verify."""
    from presk_kernel.spec import KernelVerifyError, schedule_problems

    schedule = decode_root(
        data, "kernel", KERNEL_VERSION, "schedule", KERNEL_CODEC, Schedule, "schedule"
    )[0]
    try:
        found = schedule_problems(schedule)
    except KernelVerifyError as e:
        found = [str(e)]
    except RecursionError:
        found = ["nested too deeply"]
    except Exception as e:  # the verifier meeting what no pass writes
        found = [f"{type(e).__name__}: {e}"[:200]]
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise DocumentError(
            f"the `kernel` document's schedule is not well formed: {found[0]}{more}"
        )
    return schedule
