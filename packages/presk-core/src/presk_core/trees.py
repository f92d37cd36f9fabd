"""Parameter trees as values: a dict from each leaf's dotted path (`blocks.0.norm.γ`) to the
leaf. The reference interpreter, `flatten` and the kernel lowering (presk_kernel.lower) make
and take them apart alike: `record` and `field`."""

from __future__ import annotations

from collections.abc import Iterable


def record(keys: Iterable[str], parts: Iterable[object]) -> dict:
    """The tree `record` makes: each part under its key, a subtree's leaves under `key.`."""
    tree: dict[str, object] = {}
    for key, v in zip(keys, parts, strict=True):
        if isinstance(v, dict):
            tree.update({f"{key}.{k}": x for k, x in v.items()})
        else:
            tree[key] = v
    return tree


def under(tree: dict, path: str) -> dict:
    """The subtree at `path` (a `field` that is no leaf): its leaves, their paths relative
    to it."""
    dotted = path + "."
    return {k[len(dotted) :]: v for k, v in tree.items() if k.startswith(dotted)}


__all__ = ["record", "under"]
