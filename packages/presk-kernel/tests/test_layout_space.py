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
from presk_kernel.layout import apply_layout, check_layout, run_layout
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
            zero = dataclasses.replace(run_layout(k, 1), lanes=None, width=1)
            reference = outputs(k, views, zero)  # point 0's bits, of both spaces
            for space in ("full", "calib"):  # small's points are full's (a subset)
                pts = points(k, space, 4)
                assert pts[0].layout == zero
                good = [p for p in pts if p.why is None]
                for p in good:
                    assert check_layout(k, p.layout) is None, p.text
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
    scores, softmax, values = (nests[s][0] for s in ("scores/%2", "attend/%5", "attend/%6"))
    assert (kind(scores), kind(softmax), kind(values)) == ("contraction", "softmax", "contraction")
    assert kind(nests["scores/%5"][0]) == "elementwise"
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
    assert "lanes 1, split (2, 20), passes 2" in {p.text for p in sm}
    # lanes are a contraction's decision alone (L1007): the elementwise nest and the softmax
    # take splits (and passes), in the spec's words "lanes 1"
    assert {p.decisions["lanes"] for p in sm} == {1}
    assert {p.decisions["lanes"] for p in points(nests["scores/%5"][0], "full", 20)} == {1}


def space_size(kind_: str, loops: int, workers: int, i=0, j=0, k=0, lanes=False, pack=False):
    """The size of a full space by the formula of docs/spec-questions.md (issue 23, H7):
    S = 1 + 3·|ws| splits (none, or depths 0–2 over ws = {W/2, W} without 1); a
    contraction's T·L·(2·S + 6·k·S_k) + P: T tiles m ∈ {1, 2, 4} ≤ I by n ∈ {1, 2, 4, 8, 16}
    ≤ J, L lanes (2 when J holds a vector), k blocks of 32, 128 shorter than the sum, S_k =
    1 + 2·|ws| (the block loop is not split), P = 1 + |ws| pack points."""
    ws = len({w for w in (workers // 2, workers) if w > 1})
    s = 1 + min(3, loops) * ws
    if kind_ == "elementwise":
        return s
    if kind_ == "softmax":
        return 2 * s
    tiles = sum(m <= i for m in (1, 2, 4)) * sum(n <= j for n in (1, 2, 4, 8, 16))
    blocks = sum(b < k for b in (32, 128))
    return tiles * (1 + lanes) * (2 * s + 6 * blocks * (1 + 2 * ws)) + pack * (1 + ws)


def test_the_space_sizes_are_the_formulas():
    """On a fixed machine description (two workers, this project's machine; twenty, the
    spec's), each nest's full space has the formula's size: the spec's 1, 7 and 14 for the
    scalar, the elementwise nest and the softmax on twenty workers (L1044–L1052); its
    contractions' 413 and 577 are not derivable (docs/spec-questions.md, issue 23, H7)."""
    nests = attention("f32")  # B 2, T 40, hd 4: lanes of 8 on the scores, none on the values
    for workers in (2, 20):
        sizes = {
            site: len(points(k, "full", workers)) for site, (k, _) in nests.items() if k.inputs
        }
        assert sizes == {
            "scores/%2": space_size("contraction", 4, workers, 40, 40, 4, lanes=True, pack=True),
            "scores/%5": space_size("elementwise", 4, workers),
            "attend/%5": space_size("softmax", 3, workers),
            "attend/%6": space_size("contraction", 4, workers, 40, 4, 40),
        }, workers
    assert sizes == {"scores/%2": 423, "scores/%5": 7, "attend/%5": 14, "attend/%6": 396}
    # the small space: none, or depth 0 over half or all: the spec's 3 and 6 on twenty
    small = {site: len(points(k, "small", 20)) for site, (k, _) in nests.items()}
    assert (small["scores/%5"], small["attend/%5"]) == (3, 6)


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


def test_point_0_is_the_generated_gemm_statement_where_a_run_compiles_one():
    """A contraction a run lays out as the generated GEMM statement (run_layout: 32³
    multiply-adds, PACK_AT) has it as point 0, and split over the columns as point 0's
    decisions split at depth 0, so that a plan chooses among the default too; the space
    keeps its size (docs/spec-questions.md, issue 23); the statement gives the loops' bits."""
    k = gemm_kernel(32)
    full = space_size("contraction", 4, 2, 32, 32, 32, lanes=True)  # no pack: no transpose
    for space, size in (("calib", 200), ("small", 32), ("full", full)):
        pts = points(k, space, 2)
        assert len(pts) == size, space
        gemm = [p for p in pts if p.why is None and p.layout.gemm is not None]
        assert pts[0].layout.gemm is not None and pts[0].layout.threads == 1
        assert [p.text for p in gemm] == [
            "tiled, tile [4, 16], kblock none, order IJ, lanes 1, split none, pack",
            "tiled, tile [4, 16], kblock none, order IJ, lanes 1, split (0, 2), pack",
        ], space
        assert gemm[1].layout == dataclasses.replace(pts[0].layout, split="i", threads=2)
        assert find_point(k, gemm[1].decisions, space, 2) == gemm[1]
    # below PACK_AT point 0 is the loop nest, as before
    assert points(gemm_kernel(16), "small", 2)[0].layout.gemm is None
    rng = np.random.default_rng(0)
    bufs = [rng.standard_normal((32, 32)).astype(np.float32) for _ in range(2)]
    ref = bufs + [np.zeros((32, 32), np.float32)]
    run_kernel(k, ref)
    for p in (pts[0], gemm[1], pts[5]):
        mine = [b.copy() for b in ref[:2]] + [np.zeros((32, 32), np.float32)]
        run_laid_kernel(apply_layout(k, p.layout), mine)
        assert problems(apply_layout(k, p.layout)) == []
        assert mine[2].tobytes() == ref[2].tobytes(), p.text


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
