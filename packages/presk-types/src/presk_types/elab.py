"""Elaboration: the files of a program, their constants, dimensions, modules and instances.

`load_program(path, overrides)` parses the main file and every file it imports (relative
to the importing file), evaluates the constants exactly in ℚ (`--const NAME=V` overrides
a constant of any file), decides the `static assert`s and collects the declarations each
file's scope holds. Types are resolved by `resolve_type` for the checker; module
instances (`Linear{4, 4}`) and their parameter trees by `instance_tree`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

import gmpy2
from presk_syntax import ast as A
from presk_syntax.diagnostics import Diagnostic, DiagnosticError, Label, Severity
from presk_syntax.parse import parse_source, read_source
from presk_syntax.span import Source, SourceMap, Span

from presk_types.constants import (  # noqa: F401 (re-exported: the checker's names)
    MAX_CONST_BITS,
    ConstError,
    _parse_override,
    error,
    eval_const,
    format_q,
    keep,
)
from presk_types.numbers import NAT_MAX, check_double, check_natural
from presk_types.presburger import Dim, DimContext, Ge, Lin, Undecidable, holds_for_all
from presk_types.types import (
    F64,
    NAT,
    AxisT,
    Bool,
    Idx,
    Instance,
    KeyT,
    Machine,
    ModuleT,
    ParamsT,
    Real,
    Shape,
    TupleT,
    Type,
    subst,
)

MACHINE_TYPES = {"f64": F64, "nat": NAT}


@dataclass
class ModuleInfo:
    decl: A.Module
    file: FileEnv
    dims: tuple[str, ...]
    params: list[A.Param] = field(default_factory=list)
    uses: list[A.Use] = field(default_factory=list)
    fns: dict[str, A.Fn] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.file.key}:{self.decl.name}"


@dataclass
class FileEnv:
    """One file's scope: what its names mean."""

    path: str
    ast: A.SourceFile
    source: Source
    imports: dict[str, FileEnv] = field(default_factory=dict)
    # the file's path relative to the main file's folder (`04_grad.psk`, `lib/linear.psk`):
    # what module keys name, whatever the spelling of the path given (issue 12, item 5)
    key: str = ""
    import_paths: dict[str, str] = field(default_factory=dict)
    consts: dict[str, gmpy2.mpq] = field(default_factory=dict)
    const_decls: dict[str, A.Const] = field(default_factory=dict)
    dims: dict[str, A.DimDecl] = field(default_factory=dict)
    dim_bounds: dict[str, int | None] = field(default_factory=dict)
    dim_lowers: dict[str, int] = field(default_factory=dict)  # `dim T >= 2`: {T: 2}
    types: dict[str, A.TypeAliasDecl] = field(default_factory=dict)
    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    fns: dict[str, A.Fn] = field(default_factory=dict)
    trainings: list[A.Training] = field(default_factory=list)
    optimizers: dict[str, A.Optimizer] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass
class Program:
    main: FileEnv
    files: list[FileEnv]  # in import order: a file after the files it imports
    sources: SourceMap
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]


def load_program(
    path: str,
    overrides: dict[str, str] | None = None,
    sources: SourceMap | None = None,
    parsed: dict[str, tuple[Source, A.SourceFile]] | None = None,
) -> Program:
    """Parse and elaborate the program of `path`; DiagnosticError on a syntax or import error.

    Files already parsed (`parsed`, by path: an AST document's) are not read again.
    Errors of elaboration that do not stop it (a constant that is not natural, a failed
    assertion) are collected in `Program.diagnostics`, in source order.
    """
    sources = sources if sources is not None else SourceMap()
    files: list[FileEnv] = []
    loaded: dict[str, FileEnv] = {}
    given = {os.path.normpath(p): v for p, v in (parsed or {}).items()}
    main = _load(path, None, sources, files, loaded, [], given)
    root = os.path.dirname(os.path.abspath(path))
    for f in files:
        f.key = os.path.relpath(os.path.abspath(f.path), root).replace(os.sep, "/")
    program = Program(main, files, sources)
    overrides = dict(overrides or {})
    unknown = [n for n in overrides if not any(n in _const_names(f) for f in files)]
    if unknown:
        raise DiagnosticError(
            error("E1006", f"no constant `{unknown[0]}` in this program to override with --const")
        )
    for f in files:
        _collect(f, program, overrides)
    return program


def _const_names(f: FileEnv) -> set[str]:
    return {d.name for d in f.ast.decls if isinstance(d, A.Const)}


def _load(
    path: str,
    at: Span | None,
    sources: SourceMap,
    files: list[FileEnv],
    loaded: dict[str, FileEnv],
    stack: list[str],
    given: dict[str, tuple[Source, A.SourceFile]],
) -> FileEnv:
    key = os.path.normpath(path)
    if key in stack:
        cycle = " -> ".join([*stack[stack.index(key) :], key])
        raise DiagnosticError(
            error("E1002", f"import cycle: {cycle}", *([Label(at, "imported here")] if at else []))
        )
    if key in loaded:
        return loaded[key]
    if key in given:
        source, tree = given[key]
        sources.add(source)
    else:
        if at is not None:
            _importable(path, at)
        source = sources.add(read_source(path))
        tree = parse_source(source)
    env = FileEnv(tree.path, tree, source)
    stack.append(key)
    for decl in tree.decls:
        if isinstance(decl, A.Import):
            target = os.path.normpath(os.path.join(os.path.dirname(path), decl.path))
            env.imports[decl.alias] = _load(target, decl.span, sources, files, loaded, stack, given)
            env.import_paths[decl.alias] = target
    stack.pop()
    loaded[key] = env
    files.append(env)
    return env


def _importable(path: str, at: Span) -> None:
    """An import names a Presk source: a regular file whose name, and whose target through
    links, ends in `.psk` (E1001 when there is none, E1014 for anything else). Decided before
    the file is opened: `import "/proc/self/environ"` must not show a line of it, nor a FIFO
    hang the checker."""
    real = os.path.realpath(path)
    if not os.path.lexists(path) or not os.path.exists(real) and real.endswith(".psk"):
        raise DiagnosticError(
            error("E1001", f"cannot import `{path}`: no such file", Label(at, "imported here"))
        )
    why = None
    if not path.endswith(".psk") or not real.endswith(".psk"):
        why = (
            "its name does not end in `.psk`"
            if not path.endswith(".psk")
            else ("it is a link to a file whose name does not end in `.psk`")
        )
    else:
        try:
            mode = os.stat(real).st_mode
        except OSError as e:
            why = f"it cannot be read ({e.strerror})"
        else:
            if not stat.S_ISREG(mode):
                why = "it is a directory" if stat.S_ISDIR(mode) else "it is not a regular file"
    if why is not None:
        raise DiagnosticError(
            error(
                "E1014",
                f"cannot import `{path}`: not a Presk source file",
                Label(at, f"imported here: {why}"),
                help='an import names a Presk file: `import "lib/linear.psk" as lin`',
            )
        )


def _collect(env: FileEnv, program: Program, overrides: dict[str, str]) -> None:
    diags = program.diagnostics
    for decl in env.ast.decls:
        match decl:
            case A.Const(name, type_, value):
                env.const_decls[name] = decl
                try:
                    q = (
                        _parse_override(name, overrides[name])
                        if name in overrides
                        else eval_const(value, env)
                    )
                except ConstError as e:
                    keep(diags, e.diagnostic)
                    continue
                kind = type_.name.parts[-1] if isinstance(type_, A.NamedType) else "?"
                try:  # a machine constant's type must hold it (presk_types.numbers)
                    if kind == "nat":
                        check_natural(q, value.span, f"`{name}`")
                    elif kind == "f64":
                        check_double(q, value.span, "f64")
                except ConstError as e:
                    keep(diags, e.diagnostic)
                    continue
                env.consts[name] = q
            case A.DimDecl(name, bound, _, lower):
                env.dims[name] = decl
                env.dim_bounds[name] = _dim_bound(bound, env, diags)
                low = _dim_bound(lower, env, diags)
                if low:
                    env.dim_lowers[name] = low
                if low is not None and env.dim_bounds[name] is not None:
                    if low > env.dim_bounds[name]:
                        diags.append(
                            error(
                                "E1005",
                                f"no value of `{name}` is within its bounds",
                                Label(decl.span, f"{low} > {env.dim_bounds[name]}"),
                            )
                        )
            case A.TypeAliasDecl(name):
                env.types[name] = decl
            case A.Module(name, type_params, items):
                info = ModuleInfo(decl, env, tuple(p.name for p in type_params))
                for item in items:
                    match item:
                        case A.Param():
                            info.params.append(item)
                        case A.Use():
                            info.uses.append(item)
                        case A.Fn(fname):
                            info.fns[fname] = item
                env.modules[name] = info
            case A.Fn(name):
                env.fns[name] = decl
            case A.Training():
                env.trainings.append(decl)
            case A.Optimizer(name):
                env.optimizers[name] = decl
    for decl in env.ast.decls:
        if isinstance(decl, A.StaticAssert):
            d = check_assert(decl, env)
            if d is not None:
                diags.append(d)


# ---- static assertions -------------------------------------------------------------------


def _dim_bound(bound: A.Expr | None, env: FileEnv, diags: list[Diagnostic]) -> int | None:
    """A bound of `dim T <= …` or `dim T >= …`: a natural number written with constants."""
    if bound is None:
        return None
    try:
        q = eval_const(bound, env)
    except ConstError as e:
        keep(diags, e.diagnostic)
        return None
    if q.denominator != 1 or q < 0:
        diags.append(
            error(
                "E1005",
                "a dimension's bound is not a natural number",
                Label(bound.span, f"evaluates to {format_q(q)}"),
            )
        )
        return None
    try:
        return check_natural(q, bound.span, "a dimension's bound")
    except ConstError as e:
        keep(diags, e.diagnostic)
        return None


def file_dim(env: FileEnv, name: str) -> Dim:
    """The file's dimension `name` with its bounds (`dim 2 <= T <= 1024`)."""
    return Dim(name, env.dim_bounds.get(name), env.dim_lowers.get(name, 0))


def file_context(env: FileEnv) -> DimContext:
    return DimContext(tuple(file_dim(env, n) for n in env.dim_bounds))


def check_assert(decl: A.StaticAssert, env: FileEnv) -> Diagnostic | None:
    """E1004 when the assertion is false for some value of the file's dimensions."""
    from presk_types.formulas import formula_of  # the checker's translation of conditions

    text = env_text(env, decl.condition.span)
    try:
        formula = formula_of(decl.condition, lambda e: length_of(e, env, set(env.dims)))
        counter = holds_for_all(file_context(env), formula)
    except ConstError as e:
        return None if e.diagnostic.code == "E1000" else e.diagnostic
    except Undecidable:
        return error(
            "E1004",
            f"static assertion cannot be decided: {text}",
            Label(decl.span, "not a formula of Presburger arithmetic"),
        )
    if counter is None:
        return None
    where = "is false with the constants of this file" if not counter else f"is false for {counter}"
    return error(
        "E1004",
        f"static assertion fails: {text}",
        Label(decl.span, f"`{text}` {where}"),
    )


def env_text(env: FileEnv, span: Span) -> str:
    """The source text of a span of the file (as written)."""
    data = env.source.text.encode("utf-8")
    return data[span.start : span.end].decode("utf-8")


# ---- lengths and types -------------------------------------------------------------------


def length_of(e: A.Expr, env: FileEnv, dims: set[str]) -> Lin:
    """A length: constants folded to their values, dimensions kept symbolic, affine only."""
    match e:
        case A.IntLit(value):
            return Lin.const(value)
        case A.Var(name, span):
            if name in dims:
                return Lin.var(name)
            if name in env.consts:
                q = env.consts[name]
                if q.denominator != 1:
                    raise ConstError(
                        error("E2002", f"`{name}` = {format_q(q)} is not a length", Label(span, ""))
                    )
                return Lin.const(int(q))
            if name in env.const_decls:  # a constant whose value is in error: already reported
                raise ConstError(_REPORTED)
            raise ConstError(
                error(
                    "E2001",
                    f"unresolved name `{name}`",
                    Label(span, "not a dimension or constant in scope"),
                )
            )
        case A.FieldAccess(A.Var(alias), name) if alias in env.imports:
            return length_of(A.Var(name, e.span), env.imports[alias], set())
        case A.Unary("-", operand):
            return -length_of(operand, env, dims)
        case A.Binary(op, left, right, span) if op in "+-*/%":
            a, b = length_of(left, env, dims), length_of(right, env, dims)
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*" and (a.is_const or b.is_const):
                return a * b.constant if b.is_const else b * a.constant
            if op in "/%" and b.is_const and b.constant == 0:
                raise ConstError(
                    error(
                        "E1003",
                        f"division by zero in the length `{env_text(env, span)}`",
                        Label(right.span, "is 0"),
                    )
                )
            if op in "/%" and a.is_const and b.is_const:
                if op == "%":
                    return Lin.const(a.constant % b.constant)
                if a.constant % b.constant == 0:
                    return Lin.const(a.constant // b.constant)
            raise ConstError(
                error(
                    "E2002",
                    f"`{env_text(env, span)}` is not an affine length",
                    Label(span, "lengths are sums of dimensions times constants"),
                )
            )
    raise ConstError(error("E2002", "not a length", Label(e.span, "expected a length")))


_REPORTED = Diagnostic("E1000", Severity.ERROR, "(reported)")


@dataclass
class TypeScope:
    """What a type's names mean: the file, the dimensions in scope, module-typed values."""

    env: FileEnv
    dims: set[str]
    modules: dict[str, Instance] = field(default_factory=dict)  # `net` -> Linear{D, 1}
    implicit: list[tuple[str, Span]] = field(default_factory=list)  # W0001 candidates
    allow_implicit: bool = False


def lookup_module(name: A.QualName, env: FileEnv) -> ModuleInfo | None:
    parts = list(name.parts)
    while len(parts) > 1 and parts[0] in env.imports:
        env = env.imports[parts.pop(0)]
    if len(parts) == 1 and parts[0] in env.modules:
        return env.modules[parts[0]]
    return None


MAX_STACK = 65536
"""The most blocks a `stack{L}` holds: a count past it is refused, not allocated."""


def instance_of(ref: A.ModuleRef | A.StackRef, scope: TypeScope) -> Instance:
    if isinstance(ref, A.StackRef):
        count = scope_length(ref.count, scope)
        if count.is_const and not 1 <= count.constant <= MAX_STACK:
            text = env_text(scope.env, ref.count.span)
            raise ConstError(
                error(
                    "E2002",
                    f"a stack of {count.constant} blocks",
                    Label(ref.count.span, f"`{text}` is {count.constant}"),
                    note=f"a stack holds from 1 to {MAX_STACK} blocks",
                )
            )
        inner = instance_of(ref.module, scope)
        return Instance(inner.module, inner.name, (), count, inner)
    info = lookup_module(ref.name, scope.env)
    if info is None:
        raise ConstError(
            error(
                "E2001",
                f"unresolved module `{ref.name}`",
                Label(ref.name.span, "not a module in scope"),
            )
        )
    args = tuple(scope_length(a, scope) for a in (ref.args or ()))
    if len(args) != len(info.dims):
        raise ConstError(
            error(
                "E2004",
                f"`{info.decl.name}` takes {len(info.dims)} dimension argument(s), given {len(args)}",
                Label(ref.span, f"`{info.decl.name}{{{' '.join(info.dims)} : dim}}`"),
            )
        )
    return Instance(info.key, info.decl.name, args)


def scope_length(e: A.Expr, scope: TypeScope) -> Lin:
    if (
        scope.allow_implicit
        and isinstance(e, A.Var)
        and e.name not in scope.dims
        and e.name not in scope.env.consts
        and e.name not in scope.env.const_decls
    ):
        scope.dims.add(e.name)
        scope.implicit.append((e.name, e.span))
    lin = length_of(e, scope.env, scope.dims)
    if max((abs(k) for k in (lin.constant, *(c for _, c in lin.coeffs))), default=0) > NAT_MAX:
        raise ConstError(  # a length is an int64 wherever it is computed
            error(
                "E1013",
                f"the length `{env_text(scope.env, e.span)}` is outside the range of `nat`",
                Label(e.span, "a number over 2^63 - 1"),
                note="lengths are 64-bit machine integers: at most 2^63 - 1",
            )
        )
    return lin


def resolve_type(t: A.Type, scope: TypeScope) -> Type:
    """The elaborated type of a written one."""
    env = scope.env
    match t:
        case A.TensorType(element, shape):
            sh = Shape(False, ()) if shape is None else resolve_shape(shape, scope)
            return Bool(sh) if element == "bool" else Real(sh)
        case A.IdxType(bound, shape):
            return Idx(scope_length(bound, scope), resolve_shape(shape, scope))
        case A.ParamsType(ref):
            if ref.args is None and len(ref.name.parts) == 1 and ref.name.parts[0] in scope.modules:
                return ParamsT(scope.modules[ref.name.parts[0]])
            return ParamsT(instance_of(ref, scope))
        case A.TupleType(elements):
            return TupleT(tuple(resolve_type(e, scope) for e in elements))
        case A.NamedType(name, args):
            if len(name.parts) == 1 and args is None:
                word = name.parts[0]
                if word in MACHINE_TYPES:
                    return MACHINE_TYPES[word]
                if word == "key":
                    return KeyT()
                if word in env.types:
                    alias = env.types[word]
                    return resolve_type(alias.type, TypeScope(env, scope.dims, scope.modules))
            if len(name.parts) == 2 and args is None and name.parts[0] in env.imports:
                target = env.imports[name.parts[0]]
                if name.parts[1] in target.types:
                    inner = TypeScope(target, set(target.dims))
                    return resolve_type(target.types[name.parts[1]].type, inner)
            if lookup_module(name, env) is not None:
                return ModuleT(instance_of(A.ModuleRef(name, args, t.span), scope))
            raise ConstError(
                error("E2001", f"unresolved type `{name}`", Label(name.span, "not a type in scope"))
            )
    raise ConstError(error("E2002", "not a type", Label(t.span, "")))


def resolve_shape(dims: tuple[A.Dim, ...], scope: TypeScope) -> Shape:
    prefix = any(isinstance(d, A.Prefix) for d in dims)
    axes, seen = [], set()
    for d in dims:
        if not isinstance(d, A.Axis):
            continue
        length = scope_length(d.length, scope)
        if length.is_const and length.constant < 0:
            raise ConstError(
                error("E2002", f"a length of {length}", Label(d.span, "lengths are naturals"))
            )
        if length.constant < 0 or any(c < 0 for _, c in length.coeffs):
            _natural(length, d, scope)
        if d.name is not None and d.name in seen:
            raise ConstError(
                error(
                    "E2013",
                    f"the axis `{d.name}` appears twice in one shape",
                    Label(d.span, "the names of a shape's axes are distinct"),
                )
            )
        seen.add(d.name)
        axes.append(AxisT(d.name, length))
    return Shape(prefix, tuple(axes))


def _natural(length: Lin, d: A.Axis, scope: TypeScope) -> None:
    """E2002 when a length written with `-` is negative for some allowed dimensions."""
    ctx = DimContext(tuple(file_dim(scope.env, n) for n in sorted(length.names)))
    counter = holds_for_all(ctx, Ge(length, Lin.const(0)))
    if counter is not None:
        text = env_text(scope.env, d.length.span)
        raise ConstError(
            error(
                "E2002",
                f"the length `{text}` can be negative",
                Label(d.length.span, f"is {length.value(counter)} for {counter}"),
                help="bound the dimension from below (`dim T >= W - 1`), or write the other"
                " lengths from this one (`seq: N + W - 1` and `win: N`)",
            )
        )


# ---- instances and parameter trees -------------------------------------------------------


def module_scope(info: ModuleInfo) -> TypeScope:
    """What a module's items see: the file's dimensions and the module's own."""
    return TypeScope(info.file, set(info.file.dims) | set(info.dims))


def module_info(inst: Instance, program: Program) -> ModuleInfo:
    path, name = inst.module.rsplit(":", 1)
    for f in program.files:
        if f.key == path:
            return f.modules[name]
    raise KeyError(inst.module)


def instance_tree(inst: Instance, program: Program) -> list[tuple[str, Type]]:
    """The parameter tree of an instance: (path, type) for each leaf, in declaration order."""
    if inst.stack is not None and inst.inner is not None:
        return [(path, _stacked(t, inst.stack)) for path, t in instance_tree(inst.inner, program)]
    info = module_info(inst, program)
    values = dict(zip(info.dims, inst.args, strict=True))
    scope = module_scope(info)
    leaves: list[tuple[str, Type]] = []
    for item in info.decl.items:
        if isinstance(item, A.Param):
            leaves.append((item.name, subst(resolve_type(item.type, scope), values)))
        elif isinstance(item, A.Use):
            sub = _subst_instance(instance_of(item.module, scope), values)
            leaves.extend((f"{item.name}.{p}", t) for p, t in instance_tree(sub, program))
    return leaves


def _subst_instance(inst: Instance, values: dict[str, Lin]) -> Instance:
    from presk_types.types import subst_instance

    return subst_instance(inst, values)


def _stacked(t: Type, count: Lin) -> Type:
    if isinstance(t, Real | Bool | Idx):
        from dataclasses import replace

        return replace(t, shape=Shape(t.shape.prefix, (AxisT(None, count), *t.shape.axes)))
    return t


__all__ = [
    "ConstError",
    "FileEnv",
    "Machine",
    "ModuleInfo",
    "ModuleT",
    "Program",
    "TypeScope",
    "eval_const",
    "instance_of",
    "instance_tree",
    "length_of",
    "load_program",
    "resolve_type",
]


def type_from_text(text: str) -> Type:
    """A type written alone (`--type '(ℝ[model: 4], ℝ[model: 4])'`), its lengths constants.
    DiagnosticError or ConstError when it is not one."""
    source = Source("--type", f"type T = {text}\n")
    tree = parse_source(source)
    decl = tree.decls[0] if len(tree.decls) == 1 else None
    if not isinstance(decl, A.TypeAliasDecl):
        raise ConstError(error("E2002", f"`{text}` is not a type"))
    return resolve_type(decl.type, TypeScope(FileEnv("--type", tree, source), set()))
