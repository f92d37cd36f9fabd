"""Randomness: Threefry against published answers, keys as JAX derives them, the distributions.

Sources of the known answers (docs/randomness.md, "Test vectors"):
- Random123's `kat_vectors` (threefry2x32, 20 rounds), which JAX's own `testThreefry2x32`
  checks with the same key/counter orientation;
- `jax.random.split(key(0), n)` printed by JAX >= 0.5 (partitionable Threefry, the default);
- outputs JAX < 0.5 documented (its tutorial's `split(PRNGKey(0))`, `random_test.py`'s
  `_random_bits(PRNGKey(1701), …)`), reproduced here from our hash by JAX's old rule.
"""

from __future__ import annotations

from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from presk_core.random import (
    MASK32,
    Key,
    _block,
    fans,
    fold_in,
    fold_in_name,
    fold_path,
    init_param,
    init_rules,
    name_words,
    normal,
    normal_init,
    ones,
    randint,
    random_bits,
    root_key,
    sample,
    split,
    threefry2x32,
    threefry_2x32,
    uniform,
    xavier_uniform,
    zeros,
)

# ---- Threefry-2x32-20: Random123's known answers -------------------------------------------

# (key, counter, result), from Random123's kat_vectors `threefry2x32 20 CTR KEY EXPECTED`.
KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("key, counter, expected", KAT)
def test_threefry_known_answers(key, counter, expected):
    y0, y1 = threefry2x32(Key(*key), *counter)
    assert (int(y0), int(y1)) == expected
    assert _block(Key(*key), *counter) == expected  # the scalar path keys use
    # JAX's wrapper hashes the first half of the counts with the second.
    assert threefry_2x32(Key(*key), np.array(counter)).tolist() == list(expected)


def test_threefry_vectorized_matches_scalar():
    # JAX's testThreefry2x32Large, smaller: every lane of a long array gives the known answer.
    key, (c0, c1), (e0, e1) = KAT[2]
    n = 100_000
    y0, y1 = threefry2x32(Key(*key), np.full(n, c0), np.full(n, c1))
    assert y0.dtype == np.uint32 and (y0 == e0).all() and (y1 == e1).all()


@given(st.lists(st.tuples(*[st.integers(0, MASK32)] * 4), min_size=1, max_size=20))
def test_block_on_ints_and_arrays_agree(rows):
    for k0, k1, c0, c1 in rows:
        y0, y1 = threefry2x32(Key(k0, k1), np.array([c0, c0]), np.array([c1, c1]))
        assert _block(Key(k0, k1), c0, c1) == (int(y0[1]), int(y1[1]))


def test_threefry_rejects_wide_words():
    with pytest.raises(ValueError):
        threefry2x32(Key(0, 0), 2**32, 0)
    with pytest.raises(ValueError):
        fold_in(Key(2**32, 0), 1)


# ---- keys: seed, split, fold_in ----------------------------------------------------------------


def test_root_key_is_jax_key():
    assert root_key(0) == (0, 0)
    assert root_key(1701) == (0, 1701)
    assert root_key(2**32 + 5) == (1, 5)
    assert root_key(-1) == (MASK32, MASK32)  # the int64's bits
    for bad in (2**64, -(2**63) - 1):
        with pytest.raises(ValueError):
            root_key(bad)


# jax.random.split(jax.random.key(0), 8) under JAX >= 0.5 (partitionable Threefry).
SPLIT_KEY0 = [
    (1797259609, 2579123966),
    (928981903, 3453687069),
    (4146024105, 2718843009),
    (2467461003, 3840466878),
    (2285895361, 433833334),
    (1524306142, 1887795613),
    (3792494674, 2909014575),
    (2716826189, 292468403),
]


def test_split_matches_jax():
    assert split(root_key(0), 8) == SPLIT_KEY0
    assert split(root_key(0), 3) == SPLIT_KEY0[:3]  # key i never depends on n
    assert split(root_key(0)) == SPLIT_KEY0[:2]
    assert split(root_key(0), 0) == []
    # Its first key is Random123's first answer: the hash of counter (0, 0) under key (0, 0).
    assert SPLIT_KEY0[0] == KAT[0][2]


def test_split_by_hand():
    key = Key(0xDEADBEEF, 12345)
    for i, k in enumerate(split(key, 5)):
        assert k == _block(key, 0, i)


def _legacy_split(key: Key, n: int) -> list[tuple[int, int]]:
    # JAX < 0.5: the hash of iota(2n) halved, reshaped to n keys (`_threefry_split_original`).
    return [tuple(map(int, r)) for r in threefry_2x32(key, np.arange(2 * n)).reshape(n, 2)]


def _legacy_bits(key: Key, width: int, n: int) -> list[int]:
    # JAX < 0.5 `_threefry_random_bits_original`, for 32- and 64-bit draws.
    words = threefry_2x32(key, np.arange(n * width // 32)).astype(np.uint64)
    if width == 32:
        return words.tolist()
    hi, lo = np.split(words, 2)
    return ((hi << np.uint64(32)) | lo).tolist()


def test_hash_reproduces_jax_legacy_outputs():
    # The JAX tutorial's split of PRNGKey(0): "new key [4146024105 967050713]".
    assert _legacy_split(root_key(0), 2) == [(4146024105, 967050713), (2718843009, 1272950319)]
    assert _legacy_split(root_key(0), 3) == [
        (2467461003, 428148500),
        (3186719485, 3840466878),
        (2562233961, 1946702221),
    ]
    # JAX's random_test.py testRngRandomBits, PRNGKey(1701).
    assert _legacy_bits(root_key(1701), 32, 3) == [56197195, 4200222568, 961309823]
    assert _legacy_bits(root_key(1701), 64, 3) == [
        3982329540505020460,
        16822122385914693683,
        7882654074788531506,
    ]


def test_fold_in_by_hand():
    key = root_key(7)
    assert fold_in(key, 3) == _block(key, 0, 3)
    assert fold_in(key, 3) == split(key, 4)[3]  # JAX's identity, partitionable split
    assert fold_in(root_key(0), 0) == KAT[0][2]
    for bad in (-1, 2**32):
        with pytest.raises(ValueError):
            fold_in(key, bad)


# ---- names and paths ---------------------------------------------------------------------------


def test_name_words():
    assert name_words("x") == [0x78, 1]
    assert name_words("proj") == [0x6A6F7270, 4]
    assert name_words("θ") == [0xB8CE, 2]  # UTF-8 CE B8, little-endian
    assert name_words("blocks") == [0x636F6C62, 0x736B, 6]
    assert name_words("") == [0]


def test_fold_in_name_and_path_by_hand():
    k = root_key(0)
    assert fold_in_name(k, "x") == fold_in(fold_in(k, 0x78), 1)
    path = fold_path(k, "θ.blocks.proj.w")
    by_hand = k
    for part in ("θ", "blocks", "proj", "w"):
        by_hand = fold_in_name(by_hand, part)
    assert path == by_hand
    assert fold_path(k, "θ.proj.w") == fold_path(fold_in_name(k, "θ"), "proj.w")
    for bad in ("", "a..b", ".a", "a."):
        with pytest.raises(ValueError):
            fold_path(k, bad)


def test_names_give_independent_keys():
    k = root_key(0)
    names = [f"p{i}" for i in range(300)] + ["x", "θ", "key", "logits", "ab", "ab\0", "a.b"]
    keys = {fold_in_name(k, n) for n in names}
    assert len(keys) == len(names)  # "ab" and "ab\0" differ by their length word
    assert fold_path(k, "a.b") != fold_in_name(k, "a.b")
    assert fold_path(k, "θ.proj.w") != fold_in_name(k, "x")
    a, b = uniform(fold_path(k, "θ.proj.w"), 1000), uniform(fold_in_name(k, "x"), 1000)
    assert not np.any(a == b)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.15
    assert fold_in_name(root_key(1), "x") != fold_in_name(root_key(0), "x")


# ---- bits and uniforms -------------------------------------------------------------------------


def test_random_bits_by_hand_and_prefix():
    key = fold_in_name(root_key(0), "x")
    bits = random_bits(key, 100)
    assert bits.dtype == np.uint64
    for i in (0, 1, 57, 99):
        y0, y1 = _block(key, 0, i)
        assert int(bits[i]) == (y0 << 32) | y1
    assert (random_bits(key, 10) == bits[:10]).all()  # draw i never depends on n
    assert (random_bits(key, 100) == bits).all()
    assert random_bits(key, 0).shape == (0,)
    assert int(random_bits(root_key(0), 1)[0]) == (0x6B200159 << 32) | 0x99BA4EFE


def test_uniform_is_53_bit_exact():
    key = root_key(3)
    u = uniform(key, (100, 1000))
    assert u.shape == (100, 1000) and u.dtype == np.float64
    assert u.min() >= 0.0 and u.max() < 1.0
    k = u * 2.0**53
    assert (k == np.floor(k)).all()
    assert (k.astype(np.uint64) == random_bits(key, 100_000).reshape(100, 1000) >> 11).all()
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert (uniform(key, 7) == u.ravel()[:7]).all()  # row-major, whatever the shape


def test_randint():
    key = root_key(4)
    r = randint(key, 10, (40_000,))
    assert r.dtype == np.int64 and r.min() == 0 and r.max() == 9
    k = random_bits(key, 40_000) >> np.uint64(11)
    assert r.tolist() == [(int(x) * 10) >> 53 for x in k]  # floor(u · bound), exactly
    assert (r == np.floor(uniform(key, 40_000) * 10)).all()
    counts = np.bincount(r, minlength=10)
    assert (np.abs(counts - 4000) < 300).all()  # ~4.7σ each
    assert (randint(key, 1, (5, 3)) == 0).all()
    assert randint(key, 2**53, 100).max() < 2**53
    for bad in (0, 2**53 + 1):
        with pytest.raises(ValueError):
            randint(key, bad, 3)


# ---- normals -----------------------------------------------------------------------------------


def test_normal_against_mpmath():
    key = fold_in_name(root_key(0), "x")
    z = normal(key, 40)
    u = uniform(key, 40)
    with mpmath.workprec(400):  # an outside oracle, at more bits than ours
        for j in range(20):
            r = mpmath.sqrt(-2 * mpmath.log(1 - mpmath.mpf(u[2 * j])))
            theta = 2 * mpmath.pi * mpmath.mpf(u[2 * j + 1])
            assert z[2 * j] == float(r * mpmath.cos(theta))
            assert z[2 * j + 1] == float(r * mpmath.sin(theta))


def test_normal_odd_counts_and_shapes():
    key = root_key(5)
    six = normal(key, 6)
    assert (normal(key, 5) == six[:5]).all()  # an odd count drops the last sine
    assert (normal(key, 1) == six[:1]).all()
    assert (normal(key, (2, 3)) == six.reshape(2, 3)).all()
    assert normal(key, (0, 4)).shape == (0, 4)
    assert (normal(key, 6) == six).all()  # deterministic


def test_normal_moments():
    z = normal(root_key(6), 10_000)
    assert abs(z.mean()) < 0.05  # σ of the mean: 0.01
    assert abs(z.var() - 1) < 0.07  # σ of the variance: ~0.014
    assert abs((z**3).mean()) < 0.15 and abs((z**4).mean() - 3) < 0.4
    assert np.abs(z).max() < 8.6  # √(−2 ln 2^-53)


# ---- initializers ------------------------------------------------------------------------------


def test_fans():
    assert fans(()) == (1, 1)
    assert fans((7,)) == (7, 7)
    assert fans((3, 2)) == (3, 2)  # [In, Out]
    assert fans((5, 3, 2)) == (15, 10)  # a receptive field of 5, as JAX's variance_scaling


def test_xavier_uniform():
    key = fold_path(root_key(0), "θ.w")
    w = xavier_uniform(key, (3, 2), 3, 2)
    a = float(gmpy2.sqrt(gmpy2.mpfr(6) / 5))
    assert a == pytest.approx(1.0954451150103321, abs=0, rel=1e-16)
    u = uniform(key, (3, 2))
    with mpmath.workprec(400):
        a_exact = mpmath.sqrt(mpmath.mpf(6) / 5)
        expect = [float(a_exact * (2 * mpmath.mpf(x) - 1)) for x in u.ravel()]
    assert w.ravel().tolist() == expect
    big = xavier_uniform(root_key(8), (100, 100), 100, 100)
    bound = float(gmpy2.sqrt(gmpy2.mpfr(6) / 200))
    assert np.abs(big).max() <= bound and np.abs(big).max() > 0.99 * bound
    assert abs(big.mean()) < 0.01 * bound and abs(big.var() / (bound**2 / 3) - 1) < 0.05
    assert xavier_uniform(key, (0, 3), 0, 3).shape == (0, 3)


def test_constant_initializers():
    assert (zeros(root_key(0), (2, 3), 2, 3) == 0).all()
    assert (ones(root_key(0), (4,), 4, 4) == 1).all()
    assert init_param("zeros", root_key(0), (2,)).tolist() == [0.0, 0.0]


def test_normal_init():
    key = root_key(9)
    assert (normal_init(1)(key, (50,), 1, 1) == normal(key, 50)).all()
    z, w = normal(key, 1000), normal_init(0.02)(key, (1000,), 1, 1)
    assert np.allclose(w, 0.02 * z, rtol=2**-51, atol=0)
    exact = normal_init(Fraction(1, 50))(key, (1000,), 1, 1)
    assert np.allclose(exact, w, rtol=2**-51, atol=0)
    assert (init_param("normal", key, (1000,), std=0.02) == w).all()
    # The lowering passes the literal's text: 0.02 exactly, not the double 0.02.
    assert (init_param("normal", key, (1000,), std="0.02") == exact).all()
    assert (normal_init("1")(key, (9,), 1, 1) == normal(key, 9)).all()


def test_init_param_stacked_uses_slice_fans():
    key = fold_path(root_key(0), "θ.blocks.proj.w")
    stacked = init_param("xavier_uniform", key, (3, 4, 4), stack=1)
    assert (stacked == xavier_uniform(key, (3, 4, 4), 4, 4)).all()
    assert np.abs(stacked).max() <= float(gmpy2.sqrt(gmpy2.mpfr(6) / 8))
    one = init_param("xavier_uniform", key, (1, 4, 4), stack=1)
    assert (one[0] == stacked[0]).all()  # --const L=1 keeps the first block's weights
    unstacked = init_param("xavier_uniform", key, (3, 4, 4))  # fans (12, 12): narrower
    assert np.abs(unstacked).max() <= float(gmpy2.sqrt(gmpy2.mpfr(6) / 24))
    with pytest.raises(ValueError):
        init_param("glorot", key, (2, 2))
    with pytest.raises(ValueError):
        init_param("zeros", key, (2, 2), stack=3)


def test_init_rules_cover_the_language():
    assert set(init_rules) == {"xavier_uniform", "zeros", "ones", "normal"}


# ---- sample ------------------------------------------------------------------------------------


def test_sample_uniform_logits_is_floor():
    # With 4 equal logits the cumulative probabilities are exact: index = floor(4u).
    key = fold_in_name(root_key(0), "key")
    s = sample(key, np.zeros((2, 3, 500, 4)))
    assert s.shape == (2, 3, 500) and s.dtype == np.int64
    flat = np.floor(uniform(key, 3000) * 4).astype(np.int64)
    assert (s.ravel() == flat).all()  # one uniform per position, row-major
    assert (s.ravel() == randint(key, 4, 3000)).all()


def test_sample_distribution():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    s = sample(root_key(10), np.tile(np.log(p), (10_000, 1)))
    freq = np.bincount(s, minlength=4) / 10_000
    assert np.abs(freq - p).max() < 0.025  # σ ≤ 0.005
    peaked = sample(root_key(11), np.tile([0.0, 0.0, 12.0, 0.0, -np.inf], (2000, 1)))
    assert (peaked != 4).all()  # probability 0 is never drawn
    assert (peaked == 2).mean() > 0.99


def test_sample_deterministic_and_mpfr_inputs():
    key = root_key(12)
    logits = normal(root_key(13), (20, 8))
    first = sample(key, logits)
    assert (sample(key, logits) == first).all()
    with gmpy2.context(precision=64):
        as_mpfr = np.array([[gmpy2.mpfr(x) for x in row] for row in logits], dtype=object)
    assert (sample(key, as_mpfr) == first).all()  # at 64 bits: far from any boundary here
    assert sample(key, np.zeros(8)).shape == ()
    assert sample(key, np.zeros((0, 8))).shape == (0,)


def test_sample_rejects_bad_logits():
    key = root_key(0)
    for bad in ([[np.nan, 0.0]], [[np.inf, 0.0]], [[-np.inf, -np.inf]]):
        with pytest.raises(ValueError):
            sample(key, np.array(bad))
    with pytest.raises(ValueError):
        sample(key, np.zeros((3, 0)))


def test_a_draw_beyond_max_elements_is_a_size_error_before_any_memory():
    from presk_core.random import MAX_ELEMENTS, SizeError, uniform

    key = Key(0, 7)
    with pytest.raises(SizeError, match=r"2 × 1073741825 = 2147483650 elements"):
        normal(key, (2, MAX_ELEMENTS // 2 + 1))
    with pytest.raises(SizeError):
        randint(key, 3, (10**12,))
    with pytest.raises(SizeError):
        uniform(key, (2**40, 2**40))
    with pytest.raises(SizeError):
        init_param("zeros", key, (2**16, 2**16))
    assert uniform(key, (0, 2**40)).shape == (0, 2**40)  # an empty draw of any shape
