"""PSK-Core as mathematics (`presk dump --stage core|core-after-ad --format unicode`, L540):
each function a block of equations, one per instruction, in the notation a reader of the
program writes by hand, each made by a pass followed by the rule that made it.

`%5 : ℝ[batch: B, 1] = pow 2 %4` reads `%5 = %4²`; `%10 = mul %9, 2` reads `%10 = %9 ⊙ 2`
(elementwise, broadcast), `dot x, w` reads `x · w` (a contraction), a reduction its axis as
a subscript (`mean_model(%3)`). An operation without a notation of its own prints as a
function of its operands and attributes (`expand_mean(ct, %5)`), so that every instruction
prints. The types are left out (the text stage has them); a line is `name = expression`,
and, for an instruction a pass made, `⟵ rule, from site` after it.
"""

from __future__ import annotations

from presk_core.ir import Function, Instr, Lit, Program

SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
INFIX = {"add": "+", "sub": "−", "mul": "⊙", "div": "/", "dot": "·", "accum": "⊕"}
UNARY = {
    "exp", "log", "sqrt", "tanh", "gelu", "erf", "sigmoid", "relu", "abs", "sin", "cos",
    "log1p", "expm1", "rsqrt", "softplus",
}  # fmt: skip


def _power(base: str, k: object) -> str:
    text = str(k)
    if text.lstrip("-").isdigit():
        return f"{base}{text.translate(SUPERSCRIPT)}"
    return f"{base}^({text})"


def expression(ins: Instr) -> str:
    """The right-hand side of `ins` in the module's notation."""
    a = [str(x) for x in ins.args]
    op = ins.op
    axis = ",".join(ins.attr("axes", ()) or ())
    if op in INFIX and len(a) == 2:
        return f"{a[0]} {INFIX[op]} {a[1]}"
    if op == "neg" and len(a) == 1:
        return f"−{a[0]}"
    if op == "pow" and len(a) == 2 and isinstance(ins.args[1], Lit):
        return _power(a[0], a[1])
    if op == "dot_right" and len(a) == 2:
        return f"{a[0]}ᵀ · {a[1]}"
    if op in ("mean", "sum", "max", "min") and len(a) == 1:
        name = {"sum": "Σ"}.get(op, op)
        return f"{name}_{axis}({a[0]})" if axis else f"{name}({a[0]})"
    if op in UNARY and len(a) == 1:
        return f"{op}({a[0]})"
    if op == "scan":  # issue 29: `scan{T}[time] F(pre…, c, xs)`
        back = ", reverse" if ins.attr("reverse", False) else ""
        head = f"scan{{{ins.attr('count')}}}[{axis}{back}] "
        return f"{head}{ins.attr('fn', '?')}({', '.join(a)})"
    if op in ("call", "fold", "grad", "value_grad"):
        fn = ins.attr("fn", "?")
        head = f"fold{{{ins.attr('count')}}} " if op == "fold" else ("∇" if op == "grad" else "")
        return f"{head}{fn}({', '.join(a)})"
    if op == "field":
        return f"{a[0]}.{ins.attr('path')}"
    if op == "get" and len(a) == 1:
        return f"{a[0]}[{ins.attr('index')}]"
    if op == "tuple":
        return f"({', '.join(a)}{',' if len(a) == 1 else ''})"
    if op == "put" and len(a) == 2:
        return f"{a[0]} with {ins.attr('path')} = {a[1]}"
    if op == "fold_key" and len(a) == 1:
        return f'fold_key({a[0]}, "{ins.attr("name")}")'
    if op == "real" and len(a) == 1:
        return a[0]
    if op == "record":
        return (
            "{" + ", ".join(f"{k} = {v}" for k, v in zip(ins.attr("keys"), a, strict=False)) + "}"
        )
    if op == "ein":
        return f"ein[{', '.join(ins.attr('axes'))}]({', '.join(a)})"
    attrs = [
        f"{v}" for k, v in ins.attrs if k not in ("fn", "dims", "on", "axes") and v is not None
    ]
    if axis:
        op = f"{op}_{axis}"
    return f"{op}({', '.join([*a, *map(str, attrs)])})"


def _lhs(ins: Instr) -> str:
    return str(ins.out)


def format_function(fn: Function) -> str:
    dims = f"{{{' '.join(fn.dims)}}}" if fn.dims else ""
    params = ", ".join(str(p) for p in fn.params)
    lines = [(f"  {_lhs(i)} = {expression(i)}", i) for i in fn.body]
    width = max([len(text) for text, _ in lines], default=0)
    out = [f"{fn.name}{dims}({params}):"]
    for text, ins in lines:
        if ins.origin is not None:
            out.append(f"{text:<{width}}   ⟵ {ins.origin.rule}, from {ins.origin.site}")
        else:
            out.append(text)
    out.append(f"  ⇒ {fn.ret}")
    return "\n".join(out)


def format_equations(program: Program) -> str:
    """Every function of `program` as equations (the module's docstring)."""
    return "\n\n".join(format_function(fn) for fn in program.functions) + "\n"


__all__ = ["expression", "format_equations", "format_function"]
