"""A module's declarations, checked whether or not a function reaches them.

A parameter's type and initializer, and each `use`: the module it names must exist, and a
module must not contain itself (through its `use`s, at any depth). The run builds every
parameter of an instance, so what the checker leaves unchecked here a run would crash on.
"""

from __future__ import annotations

from presk_syntax import ast as A
from presk_syntax.diagnostics import Diagnostic, Label

from presk_types.elab import (
    ConstError,
    ModuleInfo,
    Program,
    error,
    instance_of,
    module_scope,
    resolve_type,
)
from presk_types.numbers import check_real_literal
from presk_types.types import Instance

INITIALIZERS: dict[str, tuple[str, ...]] = {
    "xavier_uniform": (),
    "zeros": (),
    "ones": (),
    "normal": ("std",),
}
"""The initializers `init =` names, with the keyword arguments each takes (all numbers)."""

_KNOWN = ", ".join(f"`{n}`" for n in INITIALIZERS)


def check_modules(program: Program) -> list[Diagnostic]:
    """The diagnostics of every module's parameters and uses, in source order."""
    found: list[Diagnostic] = []
    for env in program.files:
        for info in env.modules.values():
            found.extend(_check_module(info, program))
    return found


def _check_module(info: ModuleInfo, program: Program) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    scope = module_scope(info)
    for item in info.decl.items:
        try:
            if isinstance(item, A.Param):
                resolve_type(item.type, scope)
                if item.init is not None:
                    _check_init(item.init)
            elif isinstance(item, A.Use):
                inst = instance_of(item.module, scope)
                cycle = _cycle(inst, program, [info.key])
                if cycle is not None:
                    names = " -> ".join(k.rsplit(":", 1)[1] for k in cycle)
                    found.append(
                        error(
                            "E2012",
                            f"the module `{info.decl.name}` contains itself: {names}",
                            Label(item.span, "a module cannot contain itself"),
                        )
                    )
        except ConstError as e:
            if e.diagnostic is not None and e.diagnostic.code != "E1000":
                found.append(e.diagnostic)
    return found


def _check_init(e: A.Expr) -> None:
    match e:
        case A.Var(name, span) if name in INITIALIZERS:
            return
        case A.Var(name, span):
            raise ConstError(
                error(
                    "E2001",
                    f"unknown initializer `{name}`",
                    Label(span, "not an initializer"),
                    help=f"the initializers are {_KNOWN}",
                )
            )
        case A.Call(A.Var(name, span), args) if name in INITIALIZERS:
            for a in args:
                ok = (
                    isinstance(a, A.KeywordArg)
                    and a.name in INITIALIZERS[name]
                    and _is_number(a.value)
                )
                if not ok:
                    takes = ", ".join(f"`{k} = NUMBER`" for k in INITIALIZERS[name]) or "nothing"
                    raise ConstError(
                        error(
                            "E2004",
                            f"`{name}` takes {takes}",
                            Label(a.span, "not an argument of this initializer"),
                        )
                    )
                check_real_literal(a.value)  # `normal(std = 1e400)`: no double
            return
        case A.Call(A.Var(name, span)):
            _check_init(A.Var(name, span))
    raise ConstError(
        error(
            "E2008",
            "an initializer is one of its names",
            Label(e.span, "not an initializer"),
            help=f"the initializers are {_KNOWN} (`normal(std = 0.02)`)",
        )
    )


def _is_number(e: A.Expr) -> bool:
    return isinstance(e, A.IntLit | A.FloatLit)


def _cycle(inst: Instance, program: Program, path: list[str]) -> list[str] | None:
    """The chain of modules from `path[0]` back to itself through `inst`, if there is one."""
    while inst.inner is not None:
        inst = inst.inner
    key = inst.module
    if key == path[0]:
        return [*path, key]
    if key in path:  # a cycle that does not pass through path[0]: its own module reports it
        return None
    info = _info(key, program)
    if info is None:
        return None
    scope = module_scope(info)
    for item in info.decl.items:
        if isinstance(item, A.Use):
            try:
                sub = instance_of(item.module, scope)
            except ConstError:
                continue  # reported at that module
            found = _cycle(sub, program, [*path, key])
            if found is not None:
                return found
    return None


def _info(key: str, program: Program) -> ModuleInfo | None:
    path, name = key.rsplit(":", 1)
    for f in program.files:
        if f.key == path:
            return f.modules.get(name)
    return None
