"""main.c of an exported program (presk_cback.export_c): `model [-r N] INPUTS OUTPUTS`
reads the entry's inputs from a `.psk.d` file, narrows them to its buffers' types as the
native backend narrows them, calls the entry, and writes its outputs, widened back, as a
`.psk.d` file; `-r N` times N calls."""

from __future__ import annotations

import math

from presk_kernel.frames import HostFrame
from presk_kernel.ir import Schedule

from presk_cback.emit import CTYPE

FILE_ITEMSIZE = {"f64": 8, "f32": 8, "bf16": 8, "i64": 8, "bool": 1, "i8": 8}  # a .psk.d's leaves
FILE_CTYPE = {"bool": "uint8_t", "i64": "int64_t"}  # a leaf's element in a .psk.d (else double)
NARROW = {  # x to a buffer's type (integer weights: their integers as doubles in the file)
    "f32": "(float)x",
    "bf16": "presk_bf16_store((float)x)",
    "i8": "(int8_t)x",
}
WIDEN = {"f32": "(double)", "bf16": "(double)presk_bf16_load"}  # a buffer's element to a file's


def _c_bytes(blob: bytes) -> str:
    rows = [", ".join(f"0x{b:02x}" for b in blob[i : i + 16]) for i in range(0, len(blob), 16)]
    return ",\n    ".join(rows)


def main_c(schedule: Schedule, frame: HostFrame, cname: str, output_header: bytes) -> str:
    """main.c: the inputs from a .psk.d (reals as f64, indices as i64, truth values as u8),
    narrowed to the buffers' types as the native backend narrows them; the outputs widened
    back and written after `output_header`."""
    hb = schedule.buffers
    in_size = sum(
        math.prod(a.length for a in hb[b].axes) * FILE_ITEMSIZE[hb[b].dtype]
        for b in schedule.inputs
    )
    out_size = sum(
        math.prod(a.length for a in hb[b].axes) * FILE_ITEMSIZE[hb[b].dtype]
        for b in schedule.outputs
    )
    read, write = [], []
    at = 0
    for b, p in zip(schedule.inputs, frame.params, strict=True):
        n = math.prod(a.length for a in hb[b].axes)
        dt, ct = hb[b].dtype, CTYPE[hb[b].dtype]
        src = FILE_CTYPE.get(dt, "double")
        value = NARROW.get(dt, "x")
        read += [
            "{",
            f"    {ct} *p = presk_alloc(&arena, {n} * sizeof({ct}));",
            f"    for (int64_t i = 0; i < {n}; i++) {{",
            f"        {src} x;",
            f"        memcpy(&x, sample + {at} + i * sizeof x, sizeof x);",
            f"        p[i] = {value};",
            "    }",
            f"    in.{p.name} = p;",
            "}",
        ]
        at += n * FILE_ITEMSIZE[dt]
    at = 0
    for b, r in zip(schedule.outputs, frame.results, strict=True):
        n = math.prod(a.length for a in hb[b].axes)
        dt = hb[b].dtype
        dst = FILE_CTYPE.get(dt, "double")
        value = WIDEN.get(dt, "")
        write.append(f"for (int64_t i = 0; i < {n}; i++) {{")
        write.append(f"    {dst} x = {value}(out.{r.name}[i]);")
        write.append(f"    memcpy(result + {at} + i * sizeof x, &x, sizeof x);")
        write.append("}")
        at += n * FILE_ITEMSIZE[dt]
    bf16 = any(hb[b].dtype == "bf16" for b in (*schedule.inputs, *schedule.outputs))
    helpers = BF16_HELPERS if bf16 else ""
    return MAIN.format(
        cname=cname,
        in_size=in_size,
        out_size=out_size,
        header=_c_bytes(output_header),
        header_size=len(output_header),
        read="\n".join("    " + x for x in read),
        write="\n".join("        " + x for x in write),
        helpers=helpers,
    )


BF16_HELPERS = r"""
static inline float presk_bf16_load(uint16_t h) {
    uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t presk_bf16_store(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    uint16_t r = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    return f != f ? (uint16_t)0x7FC0 : r;
}
"""

MAIN = r"""/* main.c: `model [-r N] INPUTS.psk.d OUTPUTS.psk.d` runs {cname} on the inputs and writes
 * its outputs; with -r N it also calls it N times and prints the median and best time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"
{helpers}
static const unsigned char presk_out_header[{header_size}] = {{
    {header}
}};

static int presk_cmp(const void *a, const void *b) {{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}}

int main(int argc, char **argv) {{
    long repeat = 0;
    int at = 1;
    if (argc == 5 && strcmp(argv[1], "-r") == 0) {{
        repeat = strtol(argv[2], NULL, 10);
        at = 3;
    }}
    if (argc - at != 2 || (at == 3 && repeat < 1)) {{
        fprintf(stderr, "usage: %s [-r N] INPUTS.psk.d OUTPUTS.psk.d\n", argv[0]);
        return 2;
    }}
    static unsigned char sample[{in_size} + 1], result[{out_size} + 1];
    if (presk_read_sample(argv[at], sample, {in_size})) return 1;
    presk_arena arena;
    presk_arena_init(&arena, PRESK_ARENA_BYTES);
    {cname}_in in;
    {cname}_out out;
{read}
    const size_t mark = presk_mark(&arena);
    if (repeat > 0) {{
        double *ms = malloc((size_t)repeat * sizeof *ms);
        if (ms == NULL) return 1;
        for (long r = 0; r < repeat; r++) {{
            presk_release(&arena, mark);
            double t = presk_now_ms();
            {cname}(&arena, &in, &out);
            ms[r] = presk_now_ms() - t;
        }}
        qsort(ms, (size_t)repeat, sizeof *ms, presk_cmp);
        double median = repeat % 2 ? ms[repeat / 2] : (ms[repeat / 2 - 1] + ms[repeat / 2]) / 2;
        printf("{cname}: %ld calls, median %.3f ms, best %.3f ms\n", repeat, median, ms[0]);
        free(ms);
    }}
    presk_release(&arena, mark);
    {cname}(&arena, &in, &out);
    if (presk_error) {{
        fprintf(stderr, "{cname}: an index out of range\n");
        return 1;
    }}
    {{
{write}
    }}
    int status = presk_write_sample(argv[at + 1], presk_out_header, sizeof presk_out_header,
                                    result, {out_size});
    presk_arena_free(&arena);
    return status;
}}
"""


__all__ = ["BF16_HELPERS", "FILE_CTYPE", "FILE_ITEMSIZE", "NARROW", "WIDEN", "main_c"]
