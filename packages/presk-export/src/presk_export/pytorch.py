"""The readable PyTorch export: one Python file per Presk file, a class per module.

A module is an `nn.Module` whose constructor takes its dimensions (and the file's
dimensions its parameters' shapes use: `MiniGPT(T)`), makes each `param` an
`nn.Parameter` drawn by its initializer and each `use` an attribute (a `stack{L}` an
`nn.ModuleList`); `fn apply` is `forward`, its other functions methods. A free function
is a function whose module arguments are `nn.Module`s and whose parameter trees are dicts
of tensors (or the module itself, when no module argument names it). Each file imports the
others as its source does. The text is rendered from jinja2 templates written in ruff's
format, its long statements broken as ruff breaks them (presk_export.pyformat), so that it
reads as written by hand and `ruff format` leaves it unchanged.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass, field

import jinja2
from presk_core.ir import Function, Instr
from presk_core.ir import Program as Core
from presk_types.elab import FileEnv, ModuleInfo, Program
from presk_types.presburger import Lin
from presk_types.types import ModuleT, ParamsT, Real, TupleT, Type, shape_of
from presk_types.values import FnInfo

from presk_export.body import Body, Tree, linked_modules
from presk_export.pyexpr import ExportError, Expr, axis_index, identifier, lin

TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("presk_export", "templates"),
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)


# Python modules an exported file must not be named after: the export's own files (a source
# `test_conformance.psk` next to the generated test) and what they import.
TAKEN_MODULES = ("test_conformance", "train", "conformance", "torch", "numpy", "math", "json")
TAKEN_MODULES += ("pytest", "pathlib", "struct", "argparse", "time", "os", "sys")


@dataclass(frozen=True, slots=True)
class Options:
    check_shapes: bool = False  # --shapes=check
    unroll: bool = False  # --stack=unroll


def python_module(path: str) -> str:
    """The stem of a Presk file as a Python module name: `01_linear.psk` → `_01_linear`."""
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    return f"_{stem}" if not stem or stem[0].isdigit() else identifier(stem)


def where(span, sources: dict[str, str]) -> str:
    """`06_tower.psk:16`: a span's file and line."""
    text = sources[span.file]
    line = text.encode("utf-8")[: span.start].count(b"\n") + 1
    return f"{os.path.basename(span.file)}:{line}"


@dataclass
class Export:
    """What every file of one export shares: the program, its PSK-Core, the checker's
    signatures, where each function and module is written."""

    program: Program
    core: Core
    infos: dict[str, FnInfo]
    options: Options
    modules: dict[str, str] = field(default_factory=dict)  # Presk file -> Python module
    owner: dict[str, str] = field(default_factory=dict)  # function or class -> Presk file
    sources: dict[str, str] = field(default_factory=dict)
    needs: dict[str, list[str]] = field(default_factory=dict)  # function -> dims it takes
    kept: dict[str, list[str]] = field(default_factory=dict)  # module -> dims it keeps
    # functions, methods and modules the export cannot write, and why: each is left out
    # (a comment in its place), and so is whatever calls it; an entry that reaches one is
    # refused (E8001) by its conformance test
    left_out: dict[str, ExportError] = field(default_factory=dict)

    def __post_init__(self) -> None:
        taken: set[str] = set(TAKEN_MODULES)
        for env in self.program.files:
            name = python_module(env.path)
            while name in taken:
                name += "_"
            taken.add(name)
            self.modules[env.path] = name
            self.sources[env.path] = env.source.text
            for m in env.modules:
                self.owner[m] = env.path
                self.owner[f"{m}.init"] = env.path
        for key, info in self.infos.items():
            self.owner.setdefault(key, info.file.path)

    def beside(self, path: str, out: str | None) -> str:
        """A file named by the main file (a run's data, a serve block's weights): relative
        to the export's folder `out` when it is known, else absolute."""
        folder = os.path.dirname(os.path.abspath(self.program.main.path))
        target = os.path.normpath(os.path.join(folder, path))
        if out is None:
            return target
        try:
            return os.path.relpath(target, os.path.abspath(out))
        except ValueError:  # another drive (Windows): no relative path
            return target

    def ctor_dims(self, module: str) -> list[str]:
        """The constructor's arguments of a module: its dimensions, then the file's that its
        parameters' shapes (or its sub-modules' constructors) use."""
        info = self.module_info(module)
        init = self.core.function(f"{module}.init")
        used: list[str] = []
        for ins in init.body:
            if ins.op == "init":
                used += [d for a in shape_of(ins.out.type).axes for d, _ in a.length.coeffs]
            elif ins.op in ("call", "fold_init"):
                callee = ins.attr("fn").rsplit(".", 1)[0]
                binds = dict(ins.attr("dims"))
                for d in self.ctor_dims(callee):
                    used += [v for v, _ in binds[d].coeffs] if d in binds else [d]
        extra = [d for d in init.dims if d in used and d not in info.dims]
        return list(info.dims) + list(dict.fromkeys(extra))

    def needed(self, name: str) -> list[str]:
        """The dimensions function `name` reads that no argument's shape gives (memoized:
        its body is translated once, for that)."""
        if name not in self.needs:
            fn, info = self.core.function(name), self.infos[name]
            writer = FileWriter(self, info.file)
            if info.module is not None:
                writer.method(fn, info)
            else:
                writer.function(fn, info)
        return self.needs[name]

    def dim_params(self, name: str) -> list[str]:
        """The dimensions a call of `name` passes by keyword: those it needs, except, for a
        method, the module's own (which the module keeps)."""
        info = self.infos.get(name)
        if info is None:
            return []
        own = info.module.dims if info.module is not None else ()
        return [d for d in self.needed(name) if d not in own]

    def module_info(self, name: str) -> ModuleInfo:
        return next(env.modules[name] for env in self.program.files if name in env.modules)

    def files(self) -> dict[str, str]:
        """Python file name -> its text, for every Presk file the program reaches; again
        while a pass leaves out more (a caller written before its callee was left out)."""
        while True:
            known = len(self.left_out)
            out = {}
            for env in self.program.files:
                out[f"{self.modules[env.path]}.py"] = FileWriter(self, env).render()
            if len(self.left_out) == known:
                return out

    def leave_out(self, name: str, error: ExportError, span) -> str:
        """Record `name` as not exported; the comment that stands in its place."""
        if error.span is None:
            error.span = span
        self.left_out.setdefault(name, error)
        at = where(span, self.sources) if span is not None else "?"
        text = f"`{name}` ({at}) is not exported: {_one_line(str(error))}"
        return "\n".join("# " + line for line in textwrap.wrap(text, 86))

    def notes(self) -> list[ExportError]:
        """What was left out, each as its warning (W8001), where it could not be written."""
        return [
            ExportError(f"`{name}` is left out of the export: {e}", "W8001", e.span)
            for name, e in self.left_out.items()
            if name in self.infos or name in self.owner
        ]

    def refuse_if_left_out(self, name: str) -> None:
        """E8001 for an entry the export could not write (or that calls what it could not)."""
        if name in self.left_out:
            raise self.left_out[name]


class FileWriter:
    """One Python file: its imports, classes and functions."""

    def __init__(self, export: Export, env: FileEnv) -> None:
        self.export = export
        self.env = env
        self.core = export.core
        self.infos = export.infos
        self.options = export.options
        self.imports: set[str] = set()
        self.from_imports: dict[str, list[str]] = {}

    def ref(self, name: str) -> str:
        """A function or class of the program, by the name this file knows it by."""
        owner = self.export.owner.get(name, self.env.path)
        py = name.split(".")[0] if "." in name and not name.endswith(".init") else name
        py = identifier(py.removesuffix(".init"))
        if owner != self.env.path:
            names = self.from_imports.setdefault(self.export.modules[owner], [])
            if py not in names:
                names.append(py)
        return py

    def render(self) -> str:
        blocks = []
        for name, info in self.env.modules.items():
            try:
                blocks.append(self.module_class(name, info))
            except ExportError as e:
                note = self.export.leave_out(name, e, info.decl.span)
                for method in self._methods(name):
                    self.export.left_out.setdefault(method, e)
                blocks.append(note)
        for fn in self.core.functions:
            info = self.infos.get(fn.name)
            if info is None or info.module is not None or info.decl is None:
                continue
            if info.file is not self.env or ".lambda" in fn.name:
                continue
            try:
                if fn.name in self.export.left_out:
                    raise self.export.left_out[fn.name]
                blocks.append(self.function(fn, info))
            except ExportError as e:
                blocks.append(self.export.leave_out(fn.name, e, fn.span))
        if "random" in self.imports:  # the draws' Threefry, before the code that calls it
            blocks.insert(0, TEMPLATES.get_template("_random.py.j2").render())
        imports = ["import math", ""] if "math" in self.imports else []
        imports.append("import torch")
        if "F" in self.imports:
            imports.append("import torch.nn.functional as F")
        imports.append("from torch import nn")
        ours = [self.export.modules[env.path] for env in self.export.program.files]
        for module in sorted(self.from_imports, key=ours.index):
            imports.append(f"from {module} import {', '.join(self.from_imports[module])}")
        text = TEMPLATES.get_template("module.py.j2").render(
            source=os.path.basename(self.env.path),
            imports=imports,
            blocks=[b.rstrip("\n") for b in blocks],
        )
        return text

    # ---- a module as a class -----------------------------------------------------------------

    def module_class(self, name: str, info: ModuleInfo) -> str:
        ctor = self.export.ctor_dims(name)
        init = self.core.function(f"{name}.init")
        keys = dict(zip(init.body[-1].attr("keys"), init.body[-1].args, strict=True))
        made = {ins.out.id: ins for ins in init.body}
        lines = []
        for key, value in keys.items():
            ins = made[value.id]
            lines.append(f"self.{key} = {self.member(ins, name)}")
        methods, notes = [], []
        for fn in self.core.functions:
            if fn.name.startswith(f"{name}.") and fn.name in self.infos:
                try:
                    if fn.name in self.export.left_out:
                        raise self.export.left_out[fn.name]
                    methods.append(self.method(fn, self.infos[fn.name]))
                except ExportError as e:
                    notes.append(self.export.leave_out(fn.name, e, fn.span))
        written = [f for f in self._methods(name) if f not in self.export.left_out]
        kept = [d for d in info.dims if any(d in self.export.needed(f) for f in written)]
        lines = [f"self.{d} = {d}" for d in kept] + lines
        text = TEMPLATES.get_template("class.py.j2").render(
            name=name,
            where=where(info.decl.span, self.export.sources),
            ctor=ctor,
            init=lines,
            methods=methods,
        )
        return text + "".join(f"\n\n{note}" for note in notes)

    def _methods(self, module: str) -> list[str]:
        return [
            f.name
            for f in self.core.functions
            if f.name.startswith(f"{module}.") and f.name in self.infos
        ]

    def member(self, ins: Instr, module: str) -> str:
        """The constructor's line for a parameter or a sub-module."""
        if ins.op == "init":
            return f"nn.Parameter({self.initializer(ins)})"
        callee = ins.attr("fn").rsplit(".", 1)[0]
        if callee in self.export.left_out:
            raise ExportError(f"its sub-module `{callee}` is not exported", span=ins.span)
        binds = dict(ins.attr("dims"))
        args = ", ".join(
            lin(binds.get(d, Lin(((d, 1),), 0))) for d in self.export.ctor_dims(callee)
        )
        made = f"{self.ref(callee + '.init')}({args})"
        if ins.op == "fold_init":
            return f"nn.ModuleList([{made} for _ in range({lin(ins.attr('count'))})])"
        return made

    def initializer(self, ins: Instr) -> str:
        shape = shape_of(ins.out.type)
        dims = ", ".join(lin(a.length) for a in shape.axes) or "()"  # a scalar: torch.ones(())
        kind = ins.attr("init")
        match kind:
            case "zeros" | "ones":
                return f"torch.{kind}({dims})"
            case "normal":
                return f"nn.init.normal_(torch.empty({dims}), std={ins.attr('std', '1')})"
            case "xavier_uniform" if shape.rank == 2:
                return f"nn.init.xavier_uniform_(torch.empty({dims}))"
        raise ExportError(
            f"the initializer `{kind}` of a parameter of rank {shape.rank} has no PyTorch export",
            span=ins.span,
        )

    # ---- functions -----------------------------------------------------------------------

    def method(self, fn: Function, info: FnInfo) -> dict:
        method_name = fn.name.rsplit(".", 1)[1]
        bound = {fn.params[0].id: Tree("self")}
        lines = self.body(fn, bound, [(p.name, p.type) for p in fn.params[1:]])
        own = info.module.dims
        keep = [f"{d} = self.{d}" for d in self.export.needs[fn.name] if d in own]
        params = self.signature(fn, [(p.name, p.type) for p in fn.params[1:]])
        params += _keyword_only([d for d in self.export.needs[fn.name] if d not in own])
        lines = keep + lines
        return {
            "name": "forward" if method_name == "apply" else identifier(method_name),
            "params": params,
            "source": method_name,
            "where": where(fn.span, self.export.sources),
            "lines": lines,
        }

    def function(self, fn: Function, info: FnInfo) -> str:
        linked = linked_modules(info.params)
        bound = {}
        for p in fn.params:
            if isinstance(p.type, ParamsT):
                owner = linked.get(p.name)
                name = identifier(p.name)
                bound[p.id] = Tree(identifier(owner), name) if owner else Tree(name)
        lines = self.body(fn, bound, info.params)
        return TEMPLATES.get_template("function.py.j2").render(
            name=identifier(fn.name),
            params=self.signature(fn, info.params) + _keyword_only(self.export.needs[fn.name]),
            where=where(fn.span, self.export.sources),
            lines=lines,
        )

    def signature(self, fn: Function, params: list[tuple[str, Type]]) -> list[str]:
        defaults = dict(fn.defaults)
        out = []
        for name, _ in params:
            if name in defaults:
                out.append(f"{identifier(name)}={defaults[name]}")
            else:
                out.append(identifier(name))
        return out

    def body(self, fn: Function, bound: dict, params: list[tuple[str, Type]]) -> list[str]:
        """The comments of the parameters, the dimensions read from their shapes, the body's
        statements and its return."""
        linked = linked_modules(params)
        dims: dict[str, str] = {}
        head: list[str] = []
        for name, t in params:
            py = identifier(name)
            head.append(f"# {name} : {t}{_role(t, name, linked)}")
            for path, s in _tensors(py, t):
                for i, a in enumerate(s.axes):
                    d = _single(a.length)
                    if d is not None and d in fn.dims and d not in dims:
                        dims[d] = d
                        head.append(f"{d} = {path}.shape[{axis_index(s, i)}]")
        for name, t in params:  # then `seq: P*N`, P constant: N = x.shape[0] // P
            for path, s in _tensors(identifier(name), t):
                for i, a in enumerate(s.axes):
                    scaled = _scaled(a.length)
                    if scaled is not None and scaled[0] in fn.dims and scaled[0] not in dims:
                        d, c, k = scaled
                        dims[d] = d
                        read = f"{path}.shape[{axis_index(s, i)}]"
                        read = f"({read} - {k})" if k > 0 else f"({read} + {-k})" if k else read
                        head.append(f"{d} = {read} // {c}" if c != 1 else f"{d} = {read}")
        for p in fn.params:
            if p.id not in bound:
                bound[p.id] = Expr(identifier(p.name))
        b = Body(self, fn, bound, dims)
        b.taken |= {identifier(n) for n, _ in params} | set(dims)
        result = b.run()
        self.export.needs[fn.name] = b.needed
        if isinstance(result, Tree):
            raise ExportError(f"`{fn.name}` returns a parameter tree", span=fn.span)
        result = _as_declared(result, fn.result)
        ret = _tuple_text(result) if isinstance(result, tuple) else str(result)
        return [*head, *b.lines, f"return {ret}"]


def _as_declared(value, t: Type):
    """A result the body computes as a Python number (a function of constants, `1.5 + 2`,
    or of hyperparameters) returned as the tensor its type declares (of the default
    dtype: `2` is no int64 tensor), each element of a tuple apart."""
    if isinstance(value, tuple) and isinstance(t, TupleT):
        return tuple(_as_declared(v, e) for v, e in zip(value, t.elements, strict=True))
    if isinstance(value, Expr) and value.scalar and isinstance(t, Real):
        return Expr(f"torch.tensor({value}, dtype=torch.get_default_dtype())")
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _keyword_only(dims: list[str]) -> list[str]:
    return ["*", *dims] if dims else []


def _tuple_text(v: tuple) -> str:
    items = [str(e) for e in v]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _role(t: Type, name: str, linked: dict[str, str]) -> str:
    if isinstance(t, ModuleT):
        return "  (a module, passed as an nn.Module)"
    if isinstance(t, ParamsT) and name not in linked:
        return "  (an nn.Module holding the parameters)"
    return ""


def _tensors(py: str, t: Type):
    """The tensors an argument holds, each with the Python expression that reads it."""
    if isinstance(t, TupleT):
        for i, e in enumerate(t.elements):
            yield from _tensors(f"{py}[{i}]", e)
        return
    s = shape_of(t)
    if s is not None:
        yield py, s


def _scaled(e: Lin) -> tuple[str, int, int] | None:
    """(d, c, k) for a length c·d + k of one dimension, c positive."""
    if len(e.coeffs) == 1 and e.coeffs[0][1] > 0:
        return e.coeffs[0][0], e.coeffs[0][1], e.constant
    return None


def _single(e: Lin) -> str | None:
    if len(e.coeffs) == 1 and e.coeffs[0][1] == 1 and e.constant == 0:
        return e.coeffs[0][0]
    return None


__all__ = ["Export", "Options", "python_module"]
