"""The conformance test of an export: the interpreter's inputs and result for one entry,
and a pytest file that runs the exported code on the same inputs in float64.

The inputs are what `presk run` would synthesize (DESIGN §5: doubles, so the export sees
exactly the interpreter's inputs); the expected result is the interpreter's at `bits`.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
from presk_ad import differentiate
from presk_core import random as R
from presk_core.interp import Interpreter
from presk_core.run import parse_entry, synthesize, to_json
from presk_types.types import Instance, ModuleT, ParamsT, TupleT, Type

from presk_export.body import linked_modules
from presk_export.pyexpr import ExportError, identifier
from presk_export.pytorch import TEMPLATES, Export


def conformance_files(
    export: Export, entry_text: str, dims: dict[str, int], seed: int = 0, bits: int = 256
) -> dict[str, str]:
    """`test_conformance.py`, `conformance/inputs.json` and `conformance/expected.json`."""
    core = differentiate(export.core)
    entry = parse_entry(entry_text, core, export.program, dims)
    interp = Interpreter(core, bits)
    inputs = synthesize(entry, interp, seed)
    result = interp.run(entry.function.name, [v for _, _, v in inputs], entry.dims)
    values = {**entry.dims, **dict(entry.prefix)}
    doc = {"entry": entry.shown, "dims": entry.dims, "prefix": dict(entry.prefix), "seed": seed}
    inputs_doc = {**doc, "inputs": {n: to_json(entry, t, v) for n, t, v in inputs}}
    expected_doc = {
        **doc,
        "bits": bits,
        "result": to_json(entry, entry.function.result, result),
    }
    for d, value in (
        (inputs_doc, {"inputs": {n: v for n, _, v in inputs}}),
        (expected_doc, {"result": result}),
    ):
        if empty := _empty(value, ()):
            d["empty"] = empty
    test = Test(export, values)
    lines = test.lines(entry.function.name)
    at = ", ".join(f"{k} = {v}" for k, v in values.items())
    name = entry.function.name
    text = TEMPLATES.get_template("test_conformance.py.j2").render(
        entry=entry.shown,
        at=f" at {at}" if at else "",
        seed=seed,
        bits=bits,
        source=os.path.basename(export.program.main.path),
        imports=test.import_lines(),
        test_name=re.sub(r"\W", "_", name).lower(),
        lines=lines,
    )
    return {
        "test_conformance.py": text,
        "conformance/inputs.json": _json(inputs_doc),
        "conformance/expected.json": _json(expected_doc),
    }


def _empty(value: object, path: tuple) -> list:
    """The tensors of `value` with no element, as [path, shape, dtype]: nested lists, which
    the documents hold, lose a shape after its first 0 (`[]` is every shape (0, …))."""
    match value:
        case R.Key():  # a NamedTuple of its two words, never empty
            return []
        case dict():
            return [e for k, v in value.items() for e in _empty(v, (*path, k))]
        case tuple():
            return [e for i, v in enumerate(value) for e in _empty(v, (*path, i))]
        case np.ndarray() if value.size == 0:
            kind = value.dtype.kind
            dtype = "bool" if kind == "b" else "int64" if kind in "iu" else "float64"
            return [[list(path), list(value.shape), dtype]]
    return []


def _json(doc: object) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


class Test:
    """The lines of the test's body: build the modules, load θ, call the entry, compare."""

    def __init__(self, export: Export, values: dict[str, int]) -> None:
        self.export = export
        self.values = values
        self.imports: dict[str, list[str]] = {}

    def use(self, name: str) -> str:
        owner = self.export.owner.get(name, self.export.program.main.path)
        py = identifier(name.split(".")[0])
        names = self.imports.setdefault(self.export.modules[owner], [])
        if py not in names:
            names.append(py)
        return py

    def import_lines(self) -> list[str]:
        return [f"from {m} import {', '.join(ns)}" for m, ns in self.imports.items()]

    def build(self, inst: Instance) -> str:
        """`Linear(3, 1)`: a module at the entry's dimensions."""
        inst = inst.inner if inst.stack is not None else inst
        info = self.export.module_info(inst.name)
        given = dict(zip(info.dims, inst.args, strict=True))
        args = []
        for d in self.export.ctor_dims(inst.name):
            length = given.get(d)
            try:
                args.append(
                    str(length.value(self.values) if length is not None else self.values[d])
                )
            except KeyError:
                raise ExportError(
                    f"the conformance test needs the dimension `{d}` of `{inst.name}`:"
                    f" give it with --dim {d}=N"
                ) from None
        return f"{self.use(inst.name + '.init')}({', '.join(args)})"

    def dim_arguments(self, name: str) -> list[str]:
        """`T=3`: the dimensions the exported function takes by keyword, at the entry's."""
        out = []
        for d in self.export.dim_params(name):
            if d not in self.values:
                raise ExportError(
                    f"the conformance test needs the dimension `{d}` of `{name}`:"
                    f" give it with --dim {d}=N"
                )
            out.append(f"{d}={self.values[d]}")
        return out

    def lines(self, name: str) -> list[str]:
        self.export.refuse_if_left_out(name)
        info = self.export.infos[name]
        fn = self.export.core.function(name)
        defaults = dict(fn.defaults)
        out: list[str] = []
        if info.module is not None:
            module, method = name.rsplit(".", 1)
            theta = fn.params[0]
            out.append(f"model = {self.build(theta.type.instance)}")
            out.append(f'model.load_state_dict(state_of(model, inputs["{theta.name}"]))')
            args = [_read(p.name, p.type) for p in fn.params[1:] if p.name not in defaults]
            args += self.dim_arguments(name)
            target = "model" if method == "apply" else f"model.{identifier(method)}"
            out.append(f"got = {target}({', '.join(args)})")
            out.append("assert_close(got, expected)")
            return out
        linked = linked_modules(info.params)
        modules: dict[Instance, str] = {}
        args = []
        for pname, t in info.params:
            py = identifier(pname)
            if isinstance(t, ModuleT):
                out.append(f"{py} = {self.build(t.instance)}")
                modules[t.instance] = py
                args.append(py)
            elif isinstance(t, ParamsT) and pname in linked:
                out.append(f'{py} = state_of({identifier(linked[pname])}, inputs["{pname}"])')
                args.append(py)
            elif isinstance(t, ParamsT):
                out.append(f"{py} = {self.build(t.instance)}")
                out.append(f'{py}.load_state_dict(state_of({py}, inputs["{pname}"]))')
                modules[t.instance] = py
                args.append(py)
            elif pname not in defaults:
                args.append(_read(pname, t))
        self.use(name)
        args += self.dim_arguments(name)
        out.append(f"got = {identifier(name)}({', '.join(args)})")
        if isinstance(fn.result, ParamsT):
            owner = modules.get(fn.result.instance)
            if owner is None:
                raise ExportError(f"no module to name the parameters `{name}` returns")
            out.append(f"assert_close(got, state_of({owner}, expected))")
        else:
            out.append("assert_close(got, expected)")
        return out


def _read(name: str, t: Type) -> str:
    if isinstance(t, TupleT):
        return f'tuple(tensor(v) for v in inputs["{name}"])'
    return f'tensor(inputs["{name}"])'


__all__ = ["conformance_files"]
