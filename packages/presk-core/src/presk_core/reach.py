"""The dimensions a function needs: those of its signature and of what it reaches.

Every function of a file takes all the file's dimensions (`Function.dims`: `fn f{B T}`),
so that a call can bind them; most use a few. `presk run` asks a value only for the
dimensions an entry needs (issue 16): the names in the types and attributes of its
parameters, result and instructions, the dimensions a call, fold or `grad` binds for
what its callee needs, and the dimensions of the parameter trees it holds (their
module's initializer, which `presk run` calls to draw a tree). A dimension no path
reaches does not change the entry's value, whatever value it is given.
"""

from __future__ import annotations

import dataclasses

from presk_types.presburger import Lin
from presk_types.types import Instance

from presk_core.ir import Function, Lit, Program


def needed_dims(program: Program, name: str) -> set[str]:
    """The dimensions of the function `name` (of `Function.dims`) that its value needs."""
    return _Reach(program).needs(name)


def tree_dims(program: Program, name: str) -> set[str]:
    """The dimensions the parameter trees of `name`'s arguments need from the caller that
    are not `name`'s own (an imported module's file dimensions: minigpt's `pos : ℝ[seq: T,
    D]` in a tree passed to a function of another file): `presk run` takes them by `--dim`."""
    reach = _Reach(program)
    fn = reach.functions.get(name)
    if fn is None:
        return set()
    names: set[str] = set()
    instances: list[Instance] = []
    for p in fn.params:
        _walk(p.type, names, instances)
    out = set().union(*(reach.tree(inst) for inst in instances)) if instances else set()
    return out - set(fn.dims)


class _Reach:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.functions = {f.name: f for f in program.functions}
        self.done: dict[str, set[str]] = {}

    def needs(self, name: str) -> set[str]:
        if name in self.done:
            return self.done[name]
        fn = self.functions.get(name)
        if fn is None:
            return set()
        self.done[name] = set()  # a cycle (refused at check) reaches nothing more
        found = self._own(fn)
        self.done[name] = found & set(fn.dims)
        return self.done[name]

    def _own(self, fn: Function) -> set[str]:
        names: set[str] = set()
        instances: list[Instance] = []
        for p in fn.params:
            _walk(p.type, names, instances)
        _walk(fn.result, names, instances)
        for ins in fn.body:
            _walk(ins.out.type, names, instances)
            for a in ins.args:
                _walk(a, names, instances)
            for key, value in ins.attrs:
                if key == "dims" and isinstance(ins.attr("fn"), str):
                    callee = self.needs(ins.attr("fn"))
                    for d, e in value:
                        if d in callee:
                            _walk(e, names, instances)
                elif key != "fn":
                    _walk(value, names, instances)
        for inst in instances:
            names |= self.tree(inst)
        return names

    def tree(self, inst: Instance) -> set[str]:
        """The dimensions a tree of `inst` needs beyond its arguments: those its
        initializer takes from the caller (a module's file dimensions)."""
        target = inst.inner if inst.stack is not None and inst.inner is not None else inst
        init = self.functions.get(f"{target.name}.init")
        if init is None:
            return set()
        return self.needs(init.name) & set(init.dims[len(target.args) :])


def _walk(obj: object, names: set[str], instances: list[Instance]) -> None:
    """Every dimension named by a Lin in obj (types, operands, attributes), and the
    instances of modules it holds."""
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, Lin):
            names.update(o.names)
        elif isinstance(o, Lit):  # `(T : ℝ)`: a dimension as a number
            names.add(o.text)
            stack.append(o.type)
        elif isinstance(o, tuple | list):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif dataclasses.is_dataclass(o) and not isinstance(o, type):
            if isinstance(o, Instance):
                instances.append(o)
            if isinstance(o, Function):
                continue
            stack.extend(getattr(o, f.name) for f in dataclasses.fields(o))


__all__ = ["needed_dims", "tree_dims"]
