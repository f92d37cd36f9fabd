"""The verifier of PSK-Core: a program is well formed and every instruction well typed.

`verify(program)` checks, for every function:

- SSA: each parameter and each instruction's value is defined once; every operand is
  defined before it is read, with the type of its definition;
- types: each instruction's type equals the one its shape rule computes from its operands'
  types and attributes (presk_types.core_rules; lengths compared as normalized affine terms,
  `Lin`, with no isl); an operation without a rule is an error;
- operands and attributes: the arity and attribute schema of the operation's declaration
  (presk_types.ops), and what the rule reads (`fn` names a function of the program whose
  dimensions `dims` binds, a `field`'s path is in the tree, `_align` places each operand);
- sites: when instructions carry sites, every one has a site, unique in the program;
- the returned operand is defined and has the function's result type.

It raises `VerifyError`, naming the function, the instruction as `presk dump` prints it and
what failed. `problems(program)` lists every failure instead. It costs about 15 µs an
instruction; `PRESK_VERIFY=1` makes the CLI run it after every pass
(presk_core.passes.verified).
"""

from __future__ import annotations

from presk_types.core_rules import CORE_RULES
from presk_types.operands import CoreContext, Operands, Signature
from presk_types.ops import OPS
from presk_types.shapes import TypeErr
from presk_types.types import ParamsT, Type

from presk_core.ir import Function, Instr, Lit, Program, Value, format_instr
from presk_core.layout import init_trees

DECLARED = frozenset({"cast", "init", "record"})
"""Operations whose type is their annotation: their rules check the operands against it."""


class VerifyError(Exception):
    """A program that is not well formed: every failure, the first in the message."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        more = f"\n(and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(problems[0] + more)


def context_of(program: Program, made_from: Program | None = None) -> CoreContext:
    """The functions' signatures and the parameter trees' layouts of a program: a module's
    tree as its `.init` builds it (the `record` it returns), taken from `made_from` too
    when given (a specialized program keeps no `.init`), its leaves' types the program's
    (`Program.layouts`: specialize binds a module's file dimensions there, the `T` of
    minigpt's `pos : ℝ[seq: T, D]`)."""
    functions = {
        f.name: Signature(f.dims, tuple(p.type for p in f.params), f.result)
        for f in program.functions
    }
    sources = (program,) if made_from is None else (program, made_from)
    layouts = {}
    for key, (dims, entries) in init_trees(*sources).items():
        layout = program.layout(key)
        if layout is not None and layout.dims == dims:
            leaf = {x.path: x.type for x in layout.leaves if not x.stack}
            entries = tuple(
                (k, t if isinstance(t, ParamsT) else leaf.get(k, t)) for k, t in entries
            )
        layouts[key] = (dims, entries)
    return CoreContext(functions, layouts)


def operands_of(ins: Instr) -> Operands:
    """An instruction as its rule reads it."""
    types = tuple(a.type for a in ins.args)
    keywords: tuple[tuple[str, Type], ...] = ()
    if ins.attr("where"):
        types, keywords = types[:-1], (("where", types[-1]),)
    return Operands(
        ins.op,
        types,
        axes=tuple(ins.attr("axes", ())) if ins.op not in ("ein",) else (),
        keywords=keywords,
        shapes=tuple(ins.attr("shapes", ())),
        attrs=dict(ins.attrs),
        declared=ins.out.type if ins.op in DECLARED else None,
    )


def type_of(ins: Instr, ctx: CoreContext) -> Type:
    """The type of an instruction by its rule (TypeErr, KeyError if it has none)."""
    return CORE_RULES[ins.op](operands_of(ins), ctx)


def problems(program: Program, made_from: Program | None = None) -> list[str]:
    """Every failure of the program, each naming its function and instruction (empty when
    it verifies); `made_from`: the program a pass made it from, for its trees' layouts."""
    ctx = context_of(program, made_from)
    out: list[str] = []
    names = [f.name for f in program.functions]
    out.extend(f"`{n}` is defined twice" for n in sorted({n for n in names if names.count(n) > 1}))
    sited = any(getattr(i, "site", None) for f in program.functions for i in f.body)
    sites: dict[object, str] | None = {} if sited else None
    for fn in program.functions:
        out.extend(_function(fn, ctx, sites))
    return out


def _function(fn: Function, ctx: CoreContext, sites: dict[object, str] | None) -> list[str]:
    out: list[str] = []
    defined: dict[int, Value] = {}

    def fail(ins: Instr | None, what: str) -> None:
        where = f"\n{format_instr(ins)}" if ins is not None else ""
        out.append(f"in `{fn.name}`:{where}\n  {what}")

    for p in fn.params:
        if p.id in defined:
            fail(None, f"parameter `{p}` has the id of `{defined[p.id]}`")
        defined[p.id] = p
    for ins in fn.body:
        for a in ins.args:
            if isinstance(a, Value):
                d = defined.get(a.id)
                if d is None:
                    fail(ins, f"`{a}` is read before it is defined")
                elif d.type != a.type:
                    fail(ins, f"`{a}` is read as `{a.type}`, and is defined as `{d.type}`")
        if ins.out.id in defined:
            fail(ins, f"`{ins.out}` is defined twice (first as `{defined[ins.out.id]}`)")
        defined[ins.out.id] = ins.out
        if sites is not None:
            _site(ins, sites, fn, fail)
        rule = CORE_RULES.get(ins.op)
        if rule is None:
            fail(ins, f"`{ins.op}` has no shape rule")
            continue
        wrong = _schema(ins)
        if wrong is not None:
            fail(ins, wrong)
            continue
        try:
            t = rule(operands_of(ins), ctx)
        except TypeErr as e:
            d = e.diagnostics[0]
            fail(ins, f"{d.code}: {d.message}")
            continue
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            fail(ins, f"malformed `{ins.op}`: {type(e).__name__}: {e}")
            continue
        if t != ins.out.type:
            fail(ins, f"the rule of `{ins.op}` gives `{t}`")
    ret = fn.ret
    if isinstance(ret, Value) and ret.id not in defined:
        fail(None, f"returns `{ret}`, which is not defined")
    elif isinstance(ret, Value | Lit) and ret.type != fn.result:
        fail(None, f"returns `{ret} : {ret.type}`, and is declared `-> {fn.result}`")
    return out


def _schema(ins: Instr) -> str | None:
    """What is wrong with the instruction's operands and attributes by the declaration of
    its operation (presk_types.ops: arity, attributes and their types), if anything."""
    op = OPS.get(ins.op)
    if op is None:
        return f"`{ins.op}` is not an operation of PSK-Core"
    return op.check(len(ins.args), ins.attrs)


def _site(ins: Instr, sites: dict[object, str], fn: Function, fail) -> None:
    """Sites, once instructions carry them (an empty site is none): unique in the program;
    present on every instruction of a program where some instruction has one."""
    site = getattr(ins, "site", None)
    if not site:
        fail(ins, "has no site")
    elif site in sites:
        fail(ins, f"has the site `{site}` of an instruction of `{sites[site]}`")
    else:
        sites[site] = fn.name


def verify(program: Program, made_from: Program | None = None) -> Program:
    """The program, if it verifies; VerifyError otherwise."""
    found = problems(program, made_from)
    if found:
        raise VerifyError(found)
    return program
