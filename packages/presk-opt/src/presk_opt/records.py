"""The rule `puts of zeros summed = record` (docs/optimizer.md, "Rules").

Differentiation writes the adjoint of a module's parameter tree as a sum (`accum`) of
`put`s, each a tree of zeros but for one entry (`put path b θ, u`). The sum of puts of
different entries, once it sets every entry of the tree, is the record of those entries
(`record {w = …, b = …}`): exact, since adding zeros is.

A sum of puts is also a `Term.part(T, entries)`, the entries it sets by name (a `Map`),
never extracted: a `put` is the part of its one entry (`entry(T, path=b) = b`, set from
the program's layouts for every tree type of the program), `accum` of a part and a put of
another entry the part with that entry more (either order). For each tree type, a part
that sets every entry is its record, its operands in the layout's order.
"""

from __future__ import annotations

from egglog import (
    BigRat,
    Map,
    String,
    Vec,
    eq,
    function,
    relation,
    rewrite,
    rule,
    ruleset,
    set_,
    union,
    vars_,
)
from presk_core.ir import Program
from presk_types.types import ParamsT, Real

from presk_opt.terms import SCALAR, Made, Tables, Term, type_of

NAME = "puts of zeros summed = record"
WHY = (
    "puts of zeros but for one entry each, every entry of the tree once: their sum is the "
    "record of those entries (adding zeros is exact)"
)


@function
def entry(ty: String, put: String) -> String:
    """The entry of tree type `ty` that a `put` with attribute key `put` sets."""
    ...


at, at2, t, k = vars_("at at2 t k", String)
x, y, u = vars_("x y u", Term)
(mp,) = vars_("mp", Map[String, Term])
(m,) = vars_("m", Made)
(mm,) = vars_("mm", Made)

tensor_type = relation("presk_tensor_type", String)  # a type key of a tensor (ℝ[…])
tree_type = relation("presk_tree_type", String)  # a type key of a parameter tree
(tu,) = vars_("tu", String)


def _inserted(u: Term, made: Made) -> list[tuple[Term, tuple]]:
    """What a put's value u enters the part as: u + 0, as the sum of puts computes it (a
    −0 entry becomes +0): `add u, 0` for a tensor, `accum u, zeros_like u` for a sub-tree;
    with the conditions that say which."""
    by = Made.by(made, NAME)
    typed = eq(type_of(u)).to(tu)
    zero = Term.num(BigRat(0, 1), SCALAR)
    return [
        (Term.n2("add", "", tu, by, u, zero), (typed, tensor_type(tu))),
        (Term.n2("accum", "", tu, by, u, Term.n1("zeros_like", "", tu, by, u)),
         (typed, tree_type(tu))),
    ]  # fmt: skip


REWRITES = tuple(
    rw
    for v, cond in _inserted(u, m)
    for rw in (
        rewrite(Term.n2("put", at, t, m, x, u)).to(
            Term.part(t, Map[String, Term].empty().insert(k, v)), eq(entry(t, at)).to(k), *cond
        ),
    )
) + tuple(
    rewrite(whole).to(
        Term.part(t, mp.insert(k, v)), eq(entry(t, at2)).to(k), mp.not_contains(k), *cond
    )
    for v, cond in _inserted(u, mm)
    for whole in (
        Term.n2("accum", at, t, m, Term.part(t, mp), Term.n2("put", at2, t, mm, x, u)),
        Term.n2("accum", at, t, m, Term.n2("put", at2, t, mm, x, u), Term.part(t, mp)),
    )
)


def entries(t: ParamsT, program: Program) -> list[str] | None:
    """The entries of tree type t in the layout's order (`w`, `b`), or None."""
    if t.instance.stack is not None or getattr(t.instance, "inner", None) is not None:
        return None
    layout = next((lay for lay in program.layouts if lay.module == t.instance.module), None)
    if layout is None:
        return None
    names: list[str] = []
    for leaf in layout.leaves:
        head = leaf.path.split(".")[0]
        if head not in names:
            names.append(head)
    return names


def for_program(tables: Tables, program: Program, counter: list[int] = [0]):  # noqa: B006
    """The `entry` facts and the ruleset making each tree type's full part its record."""
    facts, rules = [], []
    for key, t in list(tables.types.items()):
        if isinstance(t, Real):
            facts.append(tensor_type(key))
        if isinstance(t, ParamsT):
            facts.append(tree_type(key))
        if not isinstance(t, ParamsT):
            continue
        names = entries(t, program)
        if not names or len(names) < 2:
            continue
        for name in names:
            facts.append(set_(entry(key, tables.attrs_key((("path", name),)))).to(name))
        keys = tables.attrs_key((("keys", tuple(names)),))
        whole = Term.part(key, mp)
        record = Term.nv("record", keys, key, Made.by(m, NAME), Vec[Term](*(mp[n] for n in names)))
        rules.append(
            rule(
                eq(y).to(whole),
                eq(y).to(Term.n2("accum", at, key, m, x, u)),
                *(mp.contains(n) for n in names),
            ).then(union(y).with_(record))
        )
    counter[0] += 1
    return facts, ruleset(*rules, name=f"records{counter[0]}") if rules else None
