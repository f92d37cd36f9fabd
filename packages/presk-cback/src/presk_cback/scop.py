"""The SCoP mode of the C export (`presk export --target c --mode scop`, step 18, L1223–L1259):
each nest of an entry on its own, at point zero, as a C function a polyhedral tool reads.

A nest at point zero is its kernel with the default layout on one worker without lanes: its
plain loops (presk_kernel.ir.plain). It is written in the form pet, PPCG, PLUTO and Polly
take as a static-control part: its arrays with literal dimensions and `restrict`
(`const float in0[restrict 16][2][256][256]`), loops to literal bounds over iterators
declared at the top, every scalar assigned (never declared) inside the region, every
access affine in the iterators, selections (`?:`) where the kernel chooses, and the region
between `#pragma scop` and `#pragma endscop`. A reduction keeps its order: its first term
is selected by an affine test on its iterators (`i3 == 0 ? first : acc + term`), which
computes what the kernel's peeled first step computes, so the nest's bits are the native
backend's (DESIGN §11; `make check` compares them). A nest that reads at a computed index
(a gather: `table[ids[b][t]][d]`) is not static control: it is written all the same, its
index checked as the native kernel checks it, outside any `#pragma scop`, and
`nests.json` says why.

The folder also holds `check.c`, a driver that draws each nest's inputs (a fixed
counter-based generator), runs the nest and the native backend's kernel at point zero
(presk_cback.emit's C of the same kernel) and compares their outputs bit for bit; `make
check`, `make time` and `make polly` (each nest as Polly sees it, with clang and Polly).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from presk_kernel import libm
from presk_kernel.ir import (
    Affine,
    Const,
    Index,
    Kernel,
    Let,
    Load,
    Loop,
    Op,
    Reduce,
    Schedule,
    Store,
    Var,
    plain,
)
from presk_kernel.layout import apply_layout, natural_layout

from presk_cback.emit import CTYPE, PRELUDE, KernelC, _name, affine_c, fold_identity


@dataclass(frozen=True, slots=True)
class Nest:
    """A nest of the entry at one shape: its C function's name, its file's text, whether it
    is a static-control part (and why not), and the native kernel it is compared with."""

    name: str
    site: str
    kernel: Kernel
    text: str
    static: bool
    why: str


class ScopC(KernelC):
    """A kernel's plain nest as a SCoP (the module's docstring)."""

    def __init__(self, k: Kernel, fname: str) -> None:
        super().__init__(k, fname, lanes=False)
        self.iterators: dict[str, None] = {}
        self.scalars: dict[str, str] = {}  # name -> C type
        self.fixed: dict[str, str] = {}
        self.why: str | None = None
        names = [f"in{i}" for i in range(len(k.inputs))]
        names += ["out"] if len(k.outputs) == 1 else [f"out{i}" for i in range(len(k.outputs))]
        self.array = {b.id: n for b, n in zip(k.buffers, names, strict=True)}

    def subscript(self, buf: int, index: tuple) -> str:
        b = self.k.buffers[buf]
        if not b.axes:
            return "[0]"
        parts = []
        for ax, i in zip(b.axes, index, strict=True):
            if isinstance(i, Affine):
                terms = [
                    f"{c}*{self.fixed.get(v, _name(v))}" if c != 1 else self.fixed.get(v, _name(v))
                    for v, c in i.terms
                    if c
                ]
                if i.const or not terms:
                    terms.append(str(i.const))
                parts.append(" + ".join(terms))
            else:
                self.why = self.why or f"`{self.k.name}` reads at a computed index (a gather)"
                c, t = self.expr(i)
                parts.append(f"presk_checked({self.cast(c, t, 'i64')}, {ax.length}, &err)")
        return "".join(f"[{p}]" for p in parts)

    def expr(self, e) -> tuple[str, str]:
        match e:
            case Load(buf, index):
                dt = self.k.buffers[buf].dtype
                code = f"{self.array[buf]}{self.subscript(buf, index)}"
                if dt == "bf16":
                    return f"presk_bf16_load({code})", "f32"
                return code, dt
            case Index(var) if var in self.fixed:
                return self.fixed[var], "i64"
            case Var(name):
                return _name(name), self.scalars[name]
            case Const() | Index() | Op():
                return super().expr(e)
        raise TypeError(f"not a kernel expression: {e!r}")

    def stmt(self, s, depth: int) -> None:
        match s:
            case Let(name, expr):
                code, t = self.expr(expr)
                self.scalars[name] = t
                self.emit(f"{_name(name)} = {code};", depth)
            case Store(buf, index, expr):
                code, t = self.expr(expr)
                dt = self.k.buffers[buf].dtype
                value = (
                    f"presk_bf16_store({self.cast(code, t, 'f32')})"
                    if dt == "bf16"
                    else self.cast(code, t, dt)
                )
                self.emit(f"{self.array[buf]}{self.subscript(buf, index)} = {value};", depth)
            case Loop(var, _, extent, body, _, start, stop):
                v = _name(var)
                self.iterators[v] = None
                lo = "0" if start is None else affine_c(start)  # a triangular nest's affine
                hi = str(extent) if stop is None else affine_c(stop)  # bounds (verified in range)
                self.emit(f"for ({v} = {lo}; {v} < {hi}; {v}++) {{", depth)
                self.block(body, depth + 1)
                self.emit("}", depth)
            case Reduce():
                self.reduce(s, depth)
            case _:
                raise TypeError(f"not a statement of a plain nest: {s!r}")

    def reduce(self, r: Reduce, depth: int) -> None:
        acc, t = _name(r.acc), r.dtype
        self.scalars[r.acc] = t
        if math.prod(n for _, _, n in r.vars) == 0:
            self.emit(f"{acc} = {fold_identity(r.op, t)};", depth)
            return
        if r.stop is not None:  # a narrowed fold: its identity where its prefix is empty
            self.emit(f"{acc} = {fold_identity(r.op, t)};", depth)
        for i, (v, _, n) in enumerate(r.vars):
            self.iterators[_name(v)] = None
            hi = n if r.stop is None else affine_c(r.stop)
            self.emit(f"for ({_name(v)} = 0; {_name(v)} < {hi}; {_name(v)}++) {{", depth + i)
        inner = depth + len(r.vars)
        self.block(r.body, inner)
        terms = [self.expr(x) for x in r.terms]
        if r.op == "fma":
            from presk_cback.emit import SUFFIX, _promote

            (x, tx), (y, ty) = terms
            p = _promote(tx, ty)
            first = self.cast(f"({self.cast(x, tx, p)} * {self.cast(y, ty, p)})", p, t)
            step = f"fma{SUFFIX.get(t, '')}({self.cast(x, tx, t)}, {self.cast(y, ty, t)}, {acc})"
        else:
            ((x, tx),) = terms
            first = self.cast(x, tx, t)
            if r.op == "add":
                step = f"{acc} + {first}"
            else:
                fn = f"presk_{r.op}" + {"f64": "", "f32": "f", "i64": "i"}[t]
                step = f"{fn}({acc}, {first})"
        start = " && ".join(f"{_name(v)} == 0" for v, _, _ in r.vars)
        self.emit(f"{acc} = {start} ? {first} : {step};", inner)
        for i in reversed(range(len(r.vars))):
            self.emit("}", depth + i)

    def nest(self) -> str:
        k = self.k
        self.lines = []
        self.block(plain(k.body), 1)
        body = self.lines
        params = []
        for b in k.buffers:
            dims = "".join(f"[{a.length}]" for a in b.axes) or "[1]"
            dims = dims.replace("[", "[restrict ", 1)
            const = "const " if b in k.inputs else ""
            params.append(f"{const}{CTYPE[b.dtype]} {self.array[b.id]}{dims}")
        head = [f"/* {k.name} at {k.site} (point zero: its plain loops) */"]
        head.append(f"void {self.fname}({', '.join(params)}) {{")
        if self.iterators:
            head.append(f"    int64_t {', '.join(f'{v} = 0' for v in self.iterators)};")
        by_type: dict[str, list[str]] = {}
        for name, t in self.scalars.items():
            by_type.setdefault(CTYPE[t], []).append(_name(name))
        for ct, names in by_type.items():
            head.append(f"    {ct} {', '.join(f'{n} = 0' for n in names)};")
        if self.why is None:
            return "\n".join([*head, "#pragma scop", *body, "#pragma endscop", "}", ""])
        return "\n".join([*head, "    int err = 0;", *body, "    (void)err;", "}", ""])


def nest_name(site: str) -> str:
    """`attend/%5` -> `attend_5`: a C identifier."""
    return re.sub(r"\W+", "_", site).strip("_") or "nest"


def nests(schedule: Schedule) -> list[Nest]:
    """Each distinct nest of the schedule (a site at one shape), in launch order."""
    out: list[Nest] = []
    seen: dict[tuple, None] = {}
    names: set[str] = set()
    for launch in schedule.launches:
        k = launch.kernel
        key = (k.site, tuple((b.dtype, tuple(a.length for a in b.axes)) for b in k.buffers))
        if key in seen:
            continue
        seen[key] = None
        name = nest_name(k.site)
        while name in names:
            name += "_s"
        names.add(name)
        c = ScopC(k, name)
        text = c.nest()
        out.append(Nest(name, k.site, k, text, c.why is None, c.why or ""))
    return out


def _native(n: Nest) -> list[str]:
    """The native backend's kernel at point zero, as presk_cback.emit writes it."""
    k = apply_layout(n.kernel, natural_layout(n.kernel))
    return KernelC(k, f"native_{n.name}", lanes=False).function()


def check_c(all_nests: list[Nest]) -> str:
    """check.c: each nest against the native kernel on inputs it draws (`-t`: times them)."""
    lines = [
        "/* check.c (presk export --mode scop): each nest of nests/ against the native",
        " * backend's kernel at point zero, on inputs drawn by a fixed counter-based generator;",
        " * `./check` compares their outputs bit for bit, `./check -t` times each nest. */",
        "#define _POSIX_C_SOURCE 199309L",
        '#include "nests/presk_nest.h"',
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <string.h>",
        "#include <time.h>",
        "",
        "static uint64_t presk_draw_state = 0x9e3779b97f4a7c15u;",
        "static uint64_t presk_draw(void) { /* splitmix64 */",
        "    uint64_t z = (presk_draw_state += 0x9e3779b97f4a7c15u);",
        "    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;",
        "    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;",
        "    return z ^ (z >> 31);",
        "}",
        "static double presk_unit(void) { return (double)(presk_draw() >> 11) * 0x1p-53 * 4.0 - 2.0; }",
        "static double presk_seconds(void) {",
        "    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);",
        "    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;",
        "}",
        "",
    ]
    for n in all_nests:
        lines += [f"/* {n.name}: see nests/{n.name}.c */"]
        params = []
        for b in n.kernel.buffers:
            dims = "".join(f"[{a.length}]" for a in b.axes) or "[1]"
            const = "const " if b in n.kernel.inputs else ""
            params.append(f"{const}{CTYPE[b.dtype]} x{b.id}{dims.replace('[', '[restrict ', 1)}")
        lines.append(f"void {n.name}({', '.join(params)});")
        lines += _native(n)
    lines += [
        "",
        "int main(int argc, char **argv) {",
        '    int timing = argc > 1 && !strcmp(argv[1], "-t");',
        "    int differ = 0;",
    ]
    for n in all_nests:
        k = n.kernel
        lines.append(f"    {{ /* {n.name} */")
        for b in k.buffers:
            count = math.prod(a.length for a in b.axes) or 1
            lines.append(
                f"        {CTYPE[b.dtype]} *p{b.id} = calloc({count}, sizeof({CTYPE[b.dtype]}));"
            )
            lines.append(
                f"        {CTYPE[b.dtype]} *q{b.id} = calloc({count}, sizeof({CTYPE[b.dtype]}));"
            )
            if b in k.inputs:
                lines.append(f"        for (size_t i = 0; i < {count}; i++) {{")
                lines.append(f"            {_draw(b.dtype, f'p{b.id}')}")
                lines.append("        }")
        call_args = ", ".join(f"(void *)p{b.id}" for b in k.buffers)
        native_args = ", ".join(f"p{b.id}" if b in k.inputs else f"q{b.id}" for b in k.buffers)
        lines.append("        int err = 0;")
        lines.append(f"        native_{n.name}({native_args}, &err);")
        lines.append("        double t0 = presk_seconds();")
        lines.append(f"        {n.name}({call_args});")
        lines.append("        double t1 = presk_seconds();")
        outs = [b for b in k.buffers if b in k.outputs]
        same = " && ".join(
            f"!memcmp(p{b.id}, q{b.id}, {math.prod(a.length for a in b.axes) or 1} * sizeof({CTYPE[b.dtype]}))"
            for b in outs
        )
        lines.append(
            f'        if (!err && !({same})) {{ printf("{n.name}: the bits differ\\n"); differ++; }}'
        )
        lines.append(f'        if (timing) printf("{n.name:<24} %10.1f us\\n", (t1 - t0) * 1e6);')
        for b in k.buffers:
            lines.append(f"        free(p{b.id}); free(q{b.id});")
        lines.append("    }")
    lines += [
        "    if (differ) return 1;",
        f'    if (!timing) printf("the {len(all_nests)} nests compute the native backend\'s bits\\n");',
        "    return 0;",
        "}",
        "",
    ]
    return "\n".join(lines)


def _draw(dtype: str, array: str) -> str:
    """One input element: reals uniform in [-2, 2), indices and truth values 0 or 1."""
    if dtype in ("i64", "bool"):
        return f"{array}[i] = ({CTYPE[dtype]})(presk_draw() & 1);"
    if dtype == "bf16":
        return f"{array}[i] = presk_bf16_store((float)presk_unit());"
    return f"{array}[i] = ({CTYPE[dtype]})presk_unit();"


def scop_files(schedule: Schedule, entry: str) -> tuple[dict[str, str], list[Nest]]:
    """The folder's files (name -> text) and the nests."""
    found = nests(schedule)
    files = {f"nests/{n.name}.c": f'#include "presk_nest.h"\n\n{n.text}' for n in found}
    files["nests/presk_nest.h"] = (
        "/* presk_nest.h: presk libm and the helpers the nests and the driver call. */\n"
        "#ifndef PRESK_NEST_H\n#define PRESK_NEST_H\n"
        "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n"
        + libm.header()
        + PRELUDE
        + "\n#endif\n"
    )
    files["check.c"] = check_c(found)
    files["nests.json"] = (
        json.dumps(
            {
                "entry": entry,
                "nests": [
                    {
                        "name": n.name,
                        "site": n.site,
                        "kernel": n.kernel.name,
                        "file": f"nests/{n.name}.c",
                        "static_control": n.static,
                        **({"why_not": n.why} if not n.static else {}),
                    }
                    for n in found
                ],
            },
            indent=2,
            ensure_ascii=False,
        )
        + "\n"
    )
    files["Makefile"] = SCOP_MAKEFILE
    return files, found


SCOP_MAKEFILE = """\
# The nests of an entry at point zero, each a static-control part (presk export --mode scop).
# `make check` builds check.c with every nest and compares each with the native backend's
# kernel, bit for bit; `make time` times each nest; `make polly POLLY=clang-16` shows each
# nest as Polly sees it. CC= names another compiler.
CC = cc
CFLAGS = -std=c11 -ffp-contract=off -O2 -Wall -Wno-unused-function -Wno-unknown-pragmas
POLLY = clang
POLLYFLAGS = -O3 -std=c11 -ffp-contract=off -mllvm -polly -mllvm -polly-process-unprofitable -Rpass-analysis=polly-scops
NESTS = $(wildcard nests/*.c)

check: check-bin
\t./check-bin

time: check-bin
\t./check-bin -t

check-bin: check.c $(NESTS) nests/presk_nest.h
\t$(CC) $(CFLAGS) check.c $(NESTS) -lm -o $@

polly:
\t@for f in $(NESTS); do echo "== $$f"; $(POLLY) $(POLLYFLAGS) -c $$f -o /dev/null 2>&1 | grep -E 'SCoP (begins|ends) here'; done

clean:
\trm -f check-bin

.PHONY: check time polly clean
"""


__all__ = ["Nest", "ScopC", "nest_name", "nests", "scop_files"]
