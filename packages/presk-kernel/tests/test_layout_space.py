"""Layout spaces (presk_kernel.layout_space, step 17): the points of every nest's space are
legal layouts that pass the verifier and compute point 0's bits on the laid-out kernel
interpreter (L1007, L1078); the calib space is L1036's; the texts are the spec's words
(R17.13); a k-block resumes one accumulator through its blocks and a two-pass softmax gives
the three passes' bits."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from kernel_entries import ENTRIES, contraction_schedule, lowered
from presk_kernel.fuse import fuse
from presk_kernel.interp import run_kernel
from presk_kernel.interp_laid import run_laid_kernel
from presk_kernel.ir import Load, Reduce, Tile, TwoPass
from presk_kernel.layout import apply_layout, check_layout, default_layout
from presk_kernel.layout_space import (
    SpaceError,
    find_point,
    kind,
    points,
    workers_options,
)
from presk_kernel.spec import problems
from test_laid import launches_with_views


def outputs(k, views, layout) -> list[bytes]:
    mine = [v.copy() for v in views]
    run_laid_kernel(apply_layout(k, layout), mine)
    return [mine[i].tobytes() for i in range(len(k.inputs), len(k.buffers))]


def attention(realize: str, t: int = 40):
    schedule, args, _ = lowered(
        "tutorial/03_attention.psk", "attend", (("B", 2), ("T", t)), realize
    )
    return {lc.kernel.site: (lc.kernel, views) for lc, (_, views) in _views(schedule, args)}


def _views(schedule, args):
    fused = fuse(schedule)[0]
    return zip(fused.launches, launches_with_views(fused, args), strict=True)


SAMPLES = 3  # points a nest and space, besides point 0, on the kernel interpreter


@pytest.mark.parametrize("realize", ["f64", "bf16"])
def test_sampled_points_pass_the_verifier_and_give_point_0s_bits(realize):
    rng = random.Random(f"points {realize}")
    ran = 0
    for file, entry, dims, consts in ENTRIES:
        schedule, args, _ = lowered(file, entry, dims, realize, consts=consts)
        for k, views in launches_with_views(fuse(schedule)[0], args):
            for space in ("full", "small", "calib"):
                pts = points(k, space, 4)
                assert pts[0].layout == dataclasses.replace(
                    default_layout(k, 1), lanes=None, width=1
                )
                good = [p for p in pts if p.why is None]
                for p in good:
                    assert check_layout(k, p.layout) is None, p.text
                reference = outputs(k, views, pts[0].layout)
                for p in rng.sample(good, min(SAMPLES, len(good))):
                    laid = apply_layout(k, p.layout)
                    assert problems(laid) == [], (entry, k.site, p.text)
                    assert outputs(k, views, p.layout) == reference, (entry, k.site, p.text)
                    ran += 1
    print(f"{ran} sampled points of {realize} nests ran on the kernel interpreter")
    assert ran > 100


def test_every_point_of_the_attention_gives_point_0s_bits():
    for realize in ("f32",):  # f64's in the sampled test
        for k, views in attention(realize, 12).values():
            pts = points(k, "full", 2)
            reference = outputs(k, views, pts[0].layout)
            for p in pts:
                assert outputs(k, views, p.layout) == reference, (k.site, p.text)


def test_the_attention_spaces_have_every_decision():
    nests = attention("f32")
    # the scores' product with its division by √hd as its epilogue (at the product's site)
    scores, softmax, values = (nests[s][0] for s in ("scores/%2", "attend/%5", "attend/%6"))
    assert (kind(scores), kind(softmax), kind(values)) == ("contraction", "softmax", "contraction")
    assert scores.steps == ("scores/%2", "scores/%4", "scores/%5")
    texts = {p.text for p in points(scores, "full", 20)}
    assert "tiled, tile [4, 16], kblock none, order IJ, lanes 1, split none, no pack" in texts
    assert "tiled, tile [4, 16], kblock none, order IJ, lanes 8, split (0, 20), pack" in texts
    assert "tiled, tile [4, 4], kblock none, order JI, lanes 1, split (0, 20), no pack" in {
        p.text for p in points(values, "full", 20)
    }
    # the values ein sums over seq2 = 40: blocks of 32 (not 128, longer than the sum)
    blocked = {p.decisions["kblock"] for p in points(values, "full", 20)}
    assert blocked == {0, 32}
    orders = {p.decisions["order"] for p in points(values, "full", 20)}
    assert orders == {"IJ", "JI", "IJK", "IKJ", "JIK", "JKI", "KIJ", "KJI"}
    # hd = 4 is read across the lanes by the scores (k[…, seq2, hd]) only: a pack there
    assert any(p.decisions["pack"] for p in points(scores, "full", 20))
    assert not any(p.decisions["pack"] for p in points(values, "full", 20))
    sm = points(softmax, "full", 20)
    assert {p.decisions["passes"] for p in sm} == {2, 3}
    assert sm[0].text == "lanes 1, split none, passes 3"
    assert "lanes 8, split (2, 20), passes 2" in {p.text for p in sm}
    # an epilogue is applied once, to the finished sum: no k-block (its partial sums)
    assert {p.decisions["kblock"] for p in points(scores, "full", 20)} == {0}
    gemms = [p.layout.gemm for p in points(scores, "full", 20) if p.layout.gemm is not None]
    assert gemms and all(g.epilogue for g in gemms)


def test_workers_are_half_and_all_of_the_machine():
    assert workers_options(20) == [10, 20]
    assert workers_options(2) == [2]  # half of two is one worker: no split
    assert workers_options(1) == []


def gemm_kernel(n: int, dtype: str = "f32"):
    return contraction_schedule(n, n, n, dtype).launches[0].kernel


def test_the_calib_space_is_l1036s():
    k = gemm_kernel(256)
    pts = points(k, "calib", 20)
    calib = pts  # point 0 (tile [4, 16], IJ, one lane, one worker) among the 300, first
    assert len(calib) == 300 and all(p.why is None for p in calib)
    assert {tuple(p.decisions["tile"]) for p in calib} == {
        (1, 4), (2, 8), (4, 4), (4, 8), (4, 16)
    }  # fmt: skip
    orders = {(p.decisions["order"], p.decisions["kblock"]) for p in calib}
    assert orders == {("IJ", 0), ("JI", 0), ("IJK", 32), ("JIK", 32)} | {
        (o, 128) for o in ("IJK", "IKJ", "JIK", "JKI", "KIJ", "KJI")
    }
    assert {p.decisions["lanes"] for p in calib} == {1, 8}
    assert {None if p.decisions["split"] is None else p.decisions["split"][1] for p in calib} == {
        None, 10, 20
    }  # fmt: skip
    assert len(points(k, "calib", 2)) == 200  # one worker is half of two
    # at N = 64 the blocks of 128 are longer than the sum: counted, not run
    small = points(gemm_kernel(64), "calib", 2)
    assert len(small) == 200
    bad = [p for p in small if p.why is not None]
    assert len(bad) == 5 * 6 * 2 * 2 and all("k-block of 128" in p.why for p in bad)


def test_a_point_outside_its_space_is_refused():
    k = gemm_kernel(64)
    d = dict(points(k, "small", 2)[0].decisions)
    assert find_point(k, d, "small", 2).decisions == d
    with pytest.raises(SpaceError, match="not a point of the small space"):
        find_point(k, d | {"tile": [3, 3]}, "small", 2)
    with pytest.raises(SpaceError, match="no space `huge`"):
        points(k, "huge", 2)


def test_a_k_block_resumes_one_accumulator_through_the_blocks():
    k = gemm_kernel(40, "f64")
    p = next(q for q in points(k, "full", 1) if q.decisions["kblock"] == 32)
    laid = apply_layout(k, p.layout)
    text = repr(laid.body)
    assert "Tile(var='p_t', of='p'" in text  # the summed axis's block loop
    folds = []

    def walk(body):
        for s in body:
            if isinstance(s, Reduce):
                folds.append(s)
            walk(getattr(s, "body", ()))

    walk(laid.body)
    (fold,) = folds
    assert fold.block == "p_t" and fold.size == 32 and isinstance(fold.resume, Load)
    rng = np.random.default_rng(0)
    views = [rng.standard_normal((40, 40)), rng.standard_normal((40, 40)), np.zeros((40, 40))]
    plain = [v.copy() for v in views]
    run_kernel(k, plain)
    assert outputs(k, views, p.layout) == [plain[2].tobytes()]


def test_a_two_pass_softmax_gives_the_three_passes_bits_and_not_in_bf16():
    for realize in ("f32", "f64"):
        k, views = attention(realize)["attend/%5"]
        two = next(p for p in points(k, "full", 1) if p.decisions["passes"] == 2)
        laid = apply_layout(k, two.layout)
        assert "TwoPass" in repr(laid.body)
        assert outputs(k, views, two.layout) == outputs(k, views, points(k, "full", 1)[0].layout)
    k, _ = attention("bf16")["attend/%5"]  # the terms would be rounded to bf16 when stored
    assert {p.decisions["passes"] for p in points(k, "full", 4)} == {3}
    two = dataclasses.replace(points(k, "full", 1)[0].layout, passes=2)
    assert "two passes" in check_layout(k, two)
    _ = (Tile, TwoPass)
