"""Which buffers a launch writes whole, so that the entry need not zero them first
(presk_kernel.written; issue 26): a softmax row's loop after its folds, a loop split at the
causal bound, heads merged in mixed radix, and the scores' allowed triangle (positions no
launch reads but under the mask's select) — and what is still zeroed."""

from __future__ import annotations

from kernel_entries import lowered
from presk_kernel.fuse import fuse
from presk_kernel.ir import Affine, Axis, Buffer, Const, Kernel, Let, Load, Loop, Store
from presk_kernel.layout import lay_out
from presk_kernel.narrow import dead_stores, narrow
from presk_kernel.written import covers, zeroed

V = Affine.var


def _kernel(body, shape=(4, 4)) -> Kernel:
    out = Buffer(1, "f64", tuple(Axis(None, n) for n in shape))
    return Kernel("k", "f/%1", (Buffer(0, "f64", (Axis(None, 4),)),), (out,), body)


def test_a_store_in_a_row_loop_or_split_at_a_bound_covers_its_output():
    st = Store(1, (V("i"), V("j")), Load(0, (V("j"),)))
    row = (Let("m", Const(1.0, "f64")), Loop("j", None, 4, (st,)))  # its folds, then its loop
    assert covers(_kernel((Loop("i", None, 4, row),))) == {1}
    bound = Affine((("i", 1),), 1)
    zero = Store(1, (V("i"), V("j")), Const(0.0, "f64"))
    split = (Loop("j", None, 4, (st,), stop=bound), Loop("j", None, 4, (zero,), start=bound))
    assert covers(_kernel((Loop("i", None, 4, split),))) == {1}
    # the allowed part alone covers only when its output's other positions are dead
    half = (Loop("i", None, 4, split[:1]),)
    assert covers(_kernel(half)) == set() and covers(_kernel(half), frozenset({1})) == {1}
    # a split whose parts store different elements is no cover
    other = Store(1, (V("i"), V("i")), Const(0.0, "f64"))
    bad = (Loop("i", None, 4, (split[0], Loop("j", None, 4, (other,), start=bound))),)
    assert covers(_kernel(bad)) == set()


def test_heads_merged_in_mixed_radix_cover_their_axis():
    merged = Store(1, (V("i"), Affine((("h", 2), ("d", 1)))), Load(0, (V("d"),)))
    nest = Loop("i", None, 4, (Loop("h", None, 2, (Loop("d", None, 2, (merged,)),)),))
    assert covers(_kernel((nest,))) == {1}
    short = Store(1, (V("i"), Affine((("h", 3), ("d", 1)))), Load(0, (V("d"),)))
    gaps = Loop("i", None, 4, (Loop("h", None, 2, (Loop("d", None, 2, (short,)),)),))
    assert covers(_kernel((gaps,))) == set()  # 3h + d over 0 … 4 misses 2 and 5


def test_the_narrowed_attention_zeroes_nothing():
    schedule, _, _ = lowered("tutorial/03_attention.psk", "attend", (("B", 1), ("T", 8)), "f32")
    fused = fuse(schedule)[0]
    narrowed, _ = narrow(fused)
    laid = lay_out(narrowed, 1)
    at = {lc.kernel.site: i for i, lc in enumerate(laid.launches)}
    assert dead_stores(laid) == {at["scores/%2"]: {2}, at["scores/%5"]: {1}}
    assert zeroed(laid) == []
    # unnarrowed, the scale's output is read whole: its writer's loop is its own
    assert dead_stores(lay_out(fused, 1)) == {}
