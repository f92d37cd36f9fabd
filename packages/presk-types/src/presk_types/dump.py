"""`presk dump --stage elab`: the elaborated program, as step 6 of the tutorial shows it.

The main file's declarations, resolved (imports to paths, constants to values, modules
to their instances, types with the constants folded), then `== instances`: every module
instance a `use` of the main file reaches, each with its parameter tree.
"""

from __future__ import annotations

from presk_syntax import ast as A

from presk_types.elab import (
    ConstError,
    FileEnv,
    Program,
    TypeScope,
    format_q,
    instance_of,
    instance_tree,
    module_info,
    module_scope,
    resolve_type,
)
from presk_types.types import Instance


def dump_elab(program: Program) -> str:
    env = program.main
    lines = [f"== {env.path} (main)"]
    for alias, path in env.import_paths.items():
        lines.append(f"import {alias} = {path}")
    for decl in env.ast.decls:
        lines.extend(_decl(decl, env))
    lines.append("== instances")
    for inst in _instances(program):
        lines.append(f"{inst}:")
        try:
            lines.extend(f"  {path} : {t}" for path, t in instance_tree(inst, program))
        except ConstError:
            lines.append("  (in error)")
    return "\n".join(lines) + "\n"


def _type(t: A.Type, scope: TypeScope) -> str:
    try:
        return str(resolve_type(t, scope))
    except ConstError:
        return "(in error)"


def _fn(fn: A.Fn, env: FileEnv, dims: tuple[str, ...], indent: str) -> str:
    scope = TypeScope(env, set(env.dims) | set(dims) | {p.name for p in fn.type_params})
    scope.allow_implicit = True
    generic = "".join(
        f"{{{' '.join(p.name for p in fn.type_params)}}}" for _ in [0] if fn.type_params
    )
    params = []
    for p in fn.params:
        text = f"{p.name} : {_type(p.type, scope)}"
        if isinstance(p.type, A.NamedType):
            try:
                t = resolve_type(p.type, scope)
                if hasattr(t, "instance"):
                    scope.modules[p.name] = t.instance
            except ConstError:
                pass
        params.append(text)
    ret = "" if fn.return_type is None else f" -> {_type(fn.return_type, scope)}"
    uses = f" uses {', '.join(fn.effects)}" if fn.effects else ""
    return f"{indent}fn {fn.name}{generic}({', '.join(params)}){ret}{uses}"


def _decl(decl: A.Decl, env: FileEnv) -> list[str]:
    match decl:
        case A.Const(name):
            value = format_q(env.consts[name]) if name in env.consts else "(in error)"
            return [f"const {name} = {value}"]
        case A.DimDecl(name):
            bound, lower = env.dim_bounds.get(name), env.dim_lowers.get(name)
            head = f"dim {lower} <= {name}" if lower and bound is not None else f"dim {name}"
            tail = f" >= {lower}" if lower and bound is None else ""
            return [head + tail + (f" <= {bound}" if bound is not None else "")]
        case A.TypeAliasDecl(name, t):
            return [f"type {name} = {_type(t, TypeScope(env, set(env.dims)))}"]
        case A.Module(name, type_params, items):
            dims = tuple(p.name for p in type_params)
            scope = TypeScope(env, set(env.dims) | set(dims))
            head = f"module {name}" + (f"{{{' '.join(dims)}}}" if dims else "")
            lines = [head + " {"]
            for item in items:
                match item:
                    case A.Param(pname, t):
                        lines.append(f"  param {pname} : {_type(t, scope)}")
                    case A.Use(uname, ref):
                        try:
                            lines.append(f"  use {uname} : {instance_of(ref, scope)}")
                        except ConstError:
                            lines.append(f"  use {uname} : (in error)")
                    case A.Fn():
                        lines.append(_fn(item, env, dims, "  "))
            return [*lines, "}"]
        case A.Fn():
            return [_fn(decl, env, (), "")]
    return []


def _instances(program: Program) -> list[Instance]:
    found: list[Instance] = []

    def visit(inst: Instance) -> None:
        if inst.stack is not None and inst.inner is not None:
            visit(inst.inner)
            return
        if inst in found:
            return
        info = module_info(inst, program)
        scope = module_scope(info)
        from presk_types.types import subst_instance

        values = dict(zip(info.dims, inst.args, strict=True))
        for use in info.uses:
            try:
                visit(subst_instance(instance_of(use.module, scope), values))
            except ConstError:
                pass
        found.append(inst)

    env = program.main
    for mod in env.modules.values():
        scope = TypeScope(env, set(env.dims) | set(mod.dims))
        for use in mod.uses:
            try:
                visit(instance_of(use.module, scope))
            except ConstError:
                pass
    return found
