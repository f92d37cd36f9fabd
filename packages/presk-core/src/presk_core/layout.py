"""The program's metadata, from the elaborated source: each module's parameter tree (its
leaves' paths, types and stacks), the dimensions' bounds and the main file's training
runs (`Program.layouts`, `Program.bounds`, `Program.trainings`), written once by lowering
so that the consumers of a core document (`presk run`, `presk train`, the export,
`flatten`) need not go back to the source."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from presk_syntax import ast as A
from presk_types.elab import (
    ModuleInfo,
    Program,
    instance_of,
    module_info,
    module_scope,
    resolve_type,
)
from presk_types.presburger import Lin
from presk_types.types import Idx, ParamsT, Type, shape_of, subst, subst_lin

from presk_core.ir import Leaf, ParamLayout, Training, Value
from presk_core.ir import Program as Core

Tree = tuple[tuple[str, ...], tuple[tuple[str, Type], ...]]
"""A module's tree as its `.init` builds it: its dimensions, and (name, type) of each
parameter and sub-module (a sub-module's type `params …`)."""


def module_layout(info: ModuleInfo, program: Program) -> ParamLayout:
    """`params M{dims}` as its leaves in the order of the declaration (the interpreter's
    order too): a parameter `w`, then a sub-module's leaves under its name (`proj.w`),
    a stacked sub-module's with the stack (its path and count) first in their `stack`."""
    scope = module_scope(info)
    leaves: list[Leaf] = []
    for item in info.decl.items:
        if isinstance(item, A.Param):
            leaves.append(Leaf(item.name, resolve_type(item.type, scope)))
        elif isinstance(item, A.Use):
            sub = instance_of(item.module, scope)
            inner = sub.inner if sub.stack is not None else sub
            callee = module_info(inner, program)
            values = dict(zip(callee.dims, inner.args, strict=True))
            outer = ((item.name, sub.stack),) if sub.stack is not None else ()
            for leaf in module_layout(callee, program).leaves:
                inner = tuple((f"{item.name}.{p}", subst_lin(s, values)) for p, s in leaf.stack)
                stack = outer + inner
                leaves.append(Leaf(f"{item.name}.{leaf.path}", subst(leaf.type, values), stack))
    return ParamLayout(info.key, info.decl.name, tuple(info.dims), tuple(leaves))


def layouts(program: Program) -> tuple[ParamLayout, ...]:
    """Every module's layout, in the order of the files (imports first), then of the source."""
    return tuple(
        module_layout(info, program) for env in program.files for info in env.modules.values()
    )


def bounds(program: Program) -> tuple[tuple[str, int | None], ...]:
    """Each dimension's bound (`dim T <= 1024`: 1024; None for none), over every file."""
    out: dict[str, int | None] = {}
    for env in program.files:
        out.update(env.dim_bounds)
    return tuple(out.items())


def lowers(program: Program) -> tuple[tuple[str, int], ...]:
    """Each dimension's lower bound above 0 (`dim T >= 2`: 2), over every file."""
    out: dict[str, int] = {}
    for env in program.files:
        out.update(env.dim_lowers)
    return tuple(out.items())


def training_of(run) -> Training:
    """A checked run (`presk_types.training.Run`) as the program's `Training`."""
    ckpt = (run.checkpoint.dir, run.checkpoint.every) if run.checkpoint is not None else None
    return Training(
        run.model,
        run.objective.key,
        run.optimizer,
        run.data,
        run.shuffle,
        tuple(run.batch.items()),
        run.epochs,
        ckpt,
        run.batch_type,
        run.sample_type,
        run.file_type,
        tuple(run.bound.items()),
    )


def trainings(program: Program, checker) -> tuple[Training, ...]:
    """The main file's training runs that check (their data files not opened)."""
    from presk_types.training import Run, check_training

    runs = [check_training(block, program.main, checker) for block in program.main.trainings]
    return tuple(training_of(r) for r in runs if isinstance(r, Run))


# ---- a module's file dimensions --------------------------------------------------------------


def free_dims(layout: ParamLayout) -> frozenset[str]:
    """The dimensions a module's leaves use beyond its own parameters: its file's (`T` of
    minigpt's `pos : ℝ[seq: T, D]`), which `params MiniGPT` does not carry."""
    names: set[str] = set()
    for leaf in layout.leaves:
        names.update(_names(leaf.type))
        for _, count in leaf.stack:
            names.update(count.names)
    return frozenset(names - set(layout.dims))


def bound_layout(layout: ParamLayout, values: Mapping[str, int]) -> ParamLayout:
    """The layout with its file dimensions in `values` replaced by their numbers (its own
    dimensions stay: `params M{…}` binds them)."""
    lins = {d: Lin.const(v) for d, v in values.items() if d not in layout.dims}
    if not lins:
        return layout
    leaves = tuple(
        Leaf(
            leaf.path,
            subst(leaf.type, lins),
            tuple((p, subst_lin(c, lins)) for p, c in leaf.stack),
        )
        for leaf in layout.leaves
    )
    return replace(layout, leaves=leaves)


def _names(t: Type) -> set[str]:
    s = shape_of(t)
    out = {n for a in s.axes for n in a.length.names} if s is not None else set()
    if isinstance(t, Idx):
        out.update(t.bound.names)
    return out


def init_trees(*programs: Core) -> dict[str, Tree]:
    """Each module's tree as its `.init` builds it (the `record` it returns), by module key,
    from the first program that has it (a specialized program keeps no `.init`)."""
    trees: dict[str, Tree] = {}
    for f in (f for p in programs for f in p.functions):
        if not isinstance(f.result, ParamsT) or f.result.instance.stack is not None:
            continue
        made = {i.out.id: i for i in f.body}
        last = made.get(f.ret.id) if isinstance(f.ret, Value) else None
        if last is None or last.op != "record":
            continue
        inst = f.result.instance
        dims = tuple(str(a) for a in inst.args)  # the .init's own dimensions, as variables
        entries = tuple((k, a.type) for k, a in zip(last.attr("keys"), last.args, strict=True))
        trees.setdefault(inst.module, (dims, entries))
    return trees
