"""Extraction: the cheapest term of each function's returned e-class, read from egglog's
serialized e-graph, deterministic (docs/optimizer.md, "Extraction").

`Graph(egraph)` reads the e-graph's nodes once (`EGraph._egraph.serialize`, as JSON: each
node its operation, its children's nodes and its e-class; strings and rationals as
primitive nodes), without egglog-python's decoding of terms (which mixes up the strings
its sorts share, docs/optimizer.md).

`Graph.extract(price)` chooses, for every e-class at once, its cheapest node by Knuth's
generalisation of Dijkstra: a node is priced once its children's classes are settled, the
class of least cost is settled next. A node's cost is a tuple compared in order:

1. the cost model's (`price(node)`: operations, or the roofline's seconds), summed over
   the tree (a value read twice counted twice, as egglog's own extraction does);
2. the operations, summed: among nodes of equal price, the fewer operations;
3. the rule-made parts (`Made.by`, and a rational `num` over its `lit`): on a tie, the
   program's own instruction stays;
4. the node's digest: a hash of its operation, its strings and its children's digests, a
   total order that depends on the terms only, not on egglog's numbering or the process.

Every cost of a node is larger than its children's (an operation adds one to 2, a rule's
`Made.by` one to 3), so a class is settled at its cheapest node.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

PREFIX = "presk_opt_terms_"
RATIO = re.compile(r"Ratio \{ numer: (-?\d+), denom: (-?\d+) \}")
SKIP = {PREFIX + "Term_part"}  # never extracted


@dataclass(frozen=True)
class Node:
    """A node of the e-graph: `kind` (`n2`, `param`, `lit`, `num`, `at`, `by`, `vec`,
    `str`, `rat`), its value (a string's text, a rational) and its children's classes."""

    id: str
    kind: str
    value: object
    children: tuple[str, ...]
    eclass: str


@dataclass(frozen=True)
class Cost:
    price: float
    ops: int
    made: int
    digest: bytes

    def key(self) -> tuple:
        return (self.price, self.ops, self.made, self.digest)


def _text(op: str) -> str:
    try:
        return json.loads(op)
    except json.JSONDecodeError:
        return op[1:-1]


class Graph:
    def __init__(self, egraph) -> None:
        doc = json.loads(egraph._egraph.serialize([]).to_json())
        raw = doc["nodes"]
        self.nodes: dict[str, Node] = {}
        self.classes: dict[str, list[str]] = {}
        for nid, n in raw.items():
            op = n["op"]
            if op in SKIP:
                continue
            children = tuple(raw[c]["eclass"] for c in n["children"])
            if op.startswith('"'):
                kind, value = "str", _text(op)
            elif (m := RATIO.fullmatch(op)) is not None:
                kind, value = "rat", Fraction(int(m[1]), int(m[2]))
            elif op == "vec-of":
                kind, value = "vec", None
            elif op.startswith(PREFIX + "Term_") or op.startswith(PREFIX + "Made_"):
                kind, value = op.rsplit("_", 1)[-1], None
            else:  # type_of, entry, maps, bigrat's own functions: not terms
                continue
            self.nodes[nid] = Node(nid, kind, value, children, n["eclass"])
            self.classes.setdefault(n["eclass"], []).append(nid)
        self.roots = {
            d["let"][1:]: c
            for c, d in doc["class_data"].items()
            if d.get("let", "").startswith("$")
        }
        self.type_of: dict[str, str] = {}  # a Term class's type key
        self.site_of: dict[str, str] = {}  # a Made class's site
        for n in self.nodes.values():
            if n.kind in ("param", "lit", "num"):
                self.type_of[n.eclass] = self.string(n.children[1])
            elif n.kind in ("n0", "n1", "n2", "n3", "nv"):
                self.type_of[n.eclass] = self.string(n.children[2])
            elif n.kind == "at":
                self.site_of[n.eclass] = self.string(n.children[0])
        changed = True
        while changed:  # a `by` class's site: its first `at`'s
            changed = False
            for n in self.nodes.values():
                if n.kind == "by" and n.eclass not in self.site_of:
                    site = self.site_of.get(n.children[0])
                    if site is not None:
                        self.site_of[n.eclass] = site
                        changed = True

    def string(self, c: str) -> str:
        return self.nodes[self.classes[c][0]].value  # a primitive's class is its one node

    def extract(self, price: Callable[[Node, dict], float]) -> dict[str, str]:
        """The chosen node of every class reachable from the leaves (see the module's
        docstring); `price(node, chosen)` the cost model's price of an operation node,
        `chosen` the settled classes' nodes (its operands' among them)."""
        cost: dict[str, Cost] = {}
        chosen: dict[str, str] = {}
        parents: dict[str, list[str]] = {}
        waiting: dict[str, int] = {}
        heap: list[tuple] = []
        for nid, n in self.nodes.items():
            kids = set(n.children)
            waiting[nid] = len(kids)
            for c in kids:
                parents.setdefault(c, []).append(nid)
            if not kids:
                heapq.heappush(heap, (*self._cost(n, cost, chosen, price).key(), n.eclass, nid))
        while heap:
            *key, c, nid = heapq.heappop(heap)
            if c in chosen:
                continue
            chosen[c] = nid
            cost[c] = Cost(*key)
            for p in parents.get(c, ()):
                waiting[p] -= 1
                if waiting[p] == 0 and self.nodes[p].eclass not in chosen:
                    pc = self._cost(self.nodes[p], cost, chosen, price)
                    heapq.heappush(heap, (*pc.key(), self.nodes[p].eclass, p))
        return chosen

    def _cost(self, n: Node, cost: dict, chosen: dict, price) -> Cost:
        h = hashlib.blake2b(digest_size=12)
        h.update(n.kind.encode())
        h.update(repr(n.value).encode())
        total, ops, made = 0.0, 0, 0
        for c in n.children:
            k = cost[c]
            h.update(k.digest)
            total += k.price
            ops += k.ops
            made += k.made
        if n.kind in ("n0", "n1", "n2", "n3", "nv"):
            total += price(n, chosen)
            ops += 1
        elif n.kind == "by":
            made += 1
        elif n.kind == "num":
            made += 2
        return Cost(total, ops, made, h.digest())
