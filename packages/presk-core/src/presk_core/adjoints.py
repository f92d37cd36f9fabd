"""The evaluation of the operations differentiation writes (presk-ad): the adjoints that are
not themselves primitives of the language. They are operations of PSK-Core, declared with
the others in the operation set (`presk_types.ops.ADJOINT_OPS`: kind, arity, attributes),
and the interpreter's table (`interp.eval_rules`) evaluates them with these kernels.

- `zeros_like x`, `accum a, b`: zeros of x's structure; a + b leaf by leaf;
- `sum_to ct, x`: ct summed back to the shape of an operand that broadcast to it;
- `expand ct, x` (attributes `axes`, `mean`): a reduction's cotangent spread back over x;
- `put tree, a` (`path`), `put_slice tree, a` (`index`), `put_item t, a` (`index`):
  zeros of the structure with `a` at one place;
- `dot_left ct, b`, `dot_right a, ct`: the adjoints of `a · b`;
- `gelu_grad ct, x`, `silu_grad ct, x`, `relu_grad ct, x`, `abs_grad ct, x`;
- `softmax_grad ct, y`, `log_softmax_grad ct, y` (`axes`): with y the forward's result;
- `spread ct, x` (`_names`: ct's axes, x's): ct laid out on x's axes, repeated along
  those it lacks (an `ein`'s adjoint over an axis one operand summed alone);
- `reduce_pick ct, x` (`axes`, `kind`): the adjoint of `max`/`min` over an axis;
- `pick2 ct, a, b` (`which`, `kind`): the adjoint of `maximum`/`minimum` in one operand;
- `embed_grad ct, table, ids`, `take_grad ct, x, ids` (`axes`), `reshape_like ct, x`.

The derivatives at the kinks are PyTorch's: relu'(0) = 0, abs'(0) = 0; the gradient of
`max` over an axis goes to its first maximum, and `maximum(a, b)` gives half to each at a
tie.
"""

from __future__ import annotations

import numpy as np

from presk_core import mpfr as M


def zeros_like(x: object) -> object:
    match x:
        case dict():
            return {k: zeros_like(v) for k, v in x.items()}
        case tuple():
            return tuple(zeros_like(v) for v in x)
    return M.zeros(np.shape(x))


def accum(a: object, b: object) -> object:
    match a:
        case dict():
            return {k: accum(a[k], b[k]) for k in a}
        case tuple():
            return tuple(accum(x, y) for x, y in zip(a, b, strict=True))
    return M.add(a, b)


def sum_to(ct: np.ndarray, targets: list[int], shape: tuple[int, ...]) -> np.ndarray:
    """ct summed over its axes that are not `targets` (the operand's axes' places in ct, in
    the operand's order) and over those where the operand has length 1."""
    others = [d for d in range(np.ndim(ct)) if d not in targets]
    for d in sorted(others, reverse=True):
        ct = M.sum(ct, d)
    kept = sorted(targets)
    ct = np.transpose(ct, [kept.index(t) for t in targets]) if np.ndim(ct) else ct
    for i, n in enumerate(shape):
        if n == 1 and ct.shape[i] != 1:
            ct = np.expand_dims(M.sum(ct, i), i)
    return ct


def expand(ct: np.ndarray, x: np.ndarray, axis: int | None, mean: bool) -> np.ndarray:
    shape = np.shape(x)
    spread = np.expand_dims(ct, axis) if axis is not None else ct
    out = np.array(np.broadcast_to(spread, shape), dtype=object)
    if mean:
        count = shape[axis] if axis is not None else int(np.prod(shape))
        out = M.div(out, count)  # ∘(x / n), n exact: MPFR by the integer
    return out


def put(tree: dict, path: str, a: object) -> dict:
    out = zeros_like(tree)
    if isinstance(a, dict):
        out.update({f"{path}.{k}": v for k, v in a.items()})
    else:
        out[path] = a
    return out


def put_slice(tree: dict, index: int, a: dict) -> dict:
    out = zeros_like(tree)
    for k, v in a.items():
        out[k][index] = v
    return out


def put_item(t: tuple, index: int, a: object) -> tuple:
    return tuple(a if i == index else zeros_like(v) for i, v in enumerate(t))


def dot_left(ct: np.ndarray, b: np.ndarray) -> np.ndarray:
    """∂(a·b)/∂a: ct[..., t] against b[n, t…] over b's axes after the first."""
    k = np.ndim(b) - 1
    return M.contract(ct, b, list(range(np.ndim(ct) - k, np.ndim(ct))), list(range(1, k + 1)))


def dot_right(a: np.ndarray, ct: np.ndarray) -> np.ndarray:
    """∂(a·b)/∂b: a[..., n] against ct[..., t…] over a's axes before the last."""
    lead = list(range(np.ndim(a) - 1))
    return M.contract(a, ct, lead, lead)


def _map(fn, *arrays) -> np.ndarray:
    return M.real(np.vectorize(fn, otypes=[object])(*arrays))


def gelu_grad(ct: np.ndarray, x: np.ndarray) -> np.ndarray:
    """ct · (Φ(x) + x·φ(x)), Φ rounded as `gelu` rounds it (presk_core.mpfr's docstring)."""
    return M.gelu_grad(ct, M.real(x))


def silu_grad(ct: np.ndarray, x: np.ndarray) -> np.ndarray:
    """ct · σ(x)(1 + x(1 − σ(x)))."""
    import gmpy2

    def d(v):
        s = 1 / (1 + gmpy2.exp(-v))
        return s * (1 + v * (1 - s))

    return M.mul(ct, _map(d, x))


def relu_grad(ct: np.ndarray, x: np.ndarray) -> np.ndarray:
    return M.select(np.vectorize(lambda v: v > 0, otypes=[bool])(x), ct, M.zeros(np.shape(ct)))


def abs_grad(ct: np.ndarray, x: np.ndarray) -> np.ndarray:
    sign = _map(lambda v: 1 if v > 0 else -1 if v < 0 else 0, x)
    return M.mul(ct, sign)


def softmax_grad(ct: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    """y · (ct − Σ ct·y)."""
    inner = np.expand_dims(M.sum(M.mul(ct, y), axis), axis)
    return M.mul(y, M.sub(ct, inner))


def log_softmax_grad(ct: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    """ct − exp(y) · Σ ct (masked positions, where y = −inf, get 0)."""
    total = np.expand_dims(M.sum(ct, axis), axis)
    return M.sub(ct, M.mul(M.exp(y), total))


def embed_grad(ct: np.ndarray, table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Each row of ct added to the row of the table its index read, in index order."""
    out = M.zeros(np.shape(table))
    rows = ct.reshape((-1,) + np.shape(table)[1:])
    for row, i in zip(rows, np.asarray(ids).reshape(-1), strict=True):
        out[i] = M.add(out[i], row)
    return out


def take_grad(ct: np.ndarray, x: np.ndarray, ids: np.ndarray, axis: int, places) -> np.ndarray:
    """`take`'s adjoint in x: zeros of x's shape, each element of ct added at the element of
    x it was taken from, in ct's row-major order (the loop nest's order). `places` is the
    take's alignment (presk_core.prepare.TakePlaces): ct has the take's result's axes."""
    n = np.shape(x)[axis]
    rest = np.shape(np.moveaxis(np.empty(np.shape(x), dtype=bool), axis, -1))[:-1]
    rows = np.arange(int(np.prod(rest, dtype=np.int64))).reshape(rest + (1,))
    ct = np.asarray(ct, dtype=object)
    placed, ids = places.place(rows, np.asarray(ids, dtype=np.int64), ct.ndim)
    placed = placed[..., 0]
    shape = np.broadcast_shapes(placed.shape, ids.shape, ct.shape)
    placed, ids, cts = (np.broadcast_to(v, shape) for v in (placed, ids, ct))
    acc = M.zeros((len(rows.reshape(-1)), n))
    for pos in np.ndindex(shape):
        r, c = int(placed[pos]), int(ids[pos])
        if not 0 <= c < n:
            raise IndexError(f"index {c} out of range for length {n}")
        acc[r, c] = np.asarray(M.add(acc[r, c], cts[pos]))[()]
    return np.moveaxis(acc.reshape(rest + (n,)), -1, axis).copy()


def spread(ct: np.ndarray, ct_names: tuple, x: np.ndarray, x_names: tuple) -> np.ndarray:
    p = np.ndim(x) - len(x_names)
    order = list(range(p)) + [p + ct_names.index(n) for n in x_names if n in ct_names]
    moved = np.transpose(ct, order)
    shape = list(np.shape(x))
    for i, n in enumerate(x_names):
        if n not in ct_names:
            shape[p + i] = 1
    return np.array(np.broadcast_to(moved.reshape(shape), np.shape(x)), dtype=object)


def reduce_pick(ct: np.ndarray, x: np.ndarray, axis: int | None, kind: str) -> np.ndarray:
    """The adjoint of `max`/`min` over an axis (or all): ct at the first extremum, as
    `argmax` finds it (PyTorch's `torch.max(x, dim)` routes its gradient the same way)."""
    key = x if kind == "max" else M.neg(x)
    out = M.zeros(np.shape(x))
    if axis is None:
        i = int(M.argmax(key.reshape(-1), 0))
        out.reshape(-1)[i] = np.asarray(ct).reshape(())[()]
        return out
    idx = np.expand_dims(np.asarray(M.argmax(key, axis), dtype=np.int64), axis)
    np.put_along_axis(out, idx, np.expand_dims(np.asarray(ct, dtype=object), axis), axis)
    return out


def pick2(ct: np.ndarray, a: np.ndarray, b: np.ndarray, which: int, kind: str) -> np.ndarray:
    """The adjoint of `maximum(a, b)` (or `minimum`) in operand `which`, on the result's
    shape: ct where that operand wins, half of it at a tie (as `torch.maximum`)."""
    wins = np.vectorize(lambda x, y: x > y if kind == "max" else x < y, otypes=[bool])
    ties = np.vectorize(lambda x, y: x == y, otypes=[bool])(a, b)
    mine = wins(a, b) if which == 0 else wins(b, a)
    half = M.div(ct, M.real(2))
    zero = M.zeros(np.shape(ct))
    return M.select(mine, ct, M.select(ties, half, zero))
