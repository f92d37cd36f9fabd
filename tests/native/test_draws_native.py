"""Random draws on the kernels (issue 29): `split_key`, a module's `init` (its keys folded
by name), `uniform` and `bernoulli` lowered to kernels give presk_core.random's bits, on
the kernel interpreter and natively (with lanes and threads), in f64 and f32; `presk run
--backend native` of an entry that draws prints the interpreter's digits; a dropout
objective trains natively with the interpreter's log."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import presk_ok
from presk_core import random as R
from presk_core.lower import lower_program
from presk_kernel.interp import run_schedule
from presk_kernel.layout import apply_layout, check_layout, parallel_loops
from presk_kernel.lower import argument_leaves, lower_entry
from presk_syntax.span import SourceMap
from presk_types.elab import load_program

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packages" / "presk-kernel" / "tests"))
from kernel_entries import same_bits  # noqa: E402

SOURCE = """\
dim B
dim D

module Z {
  param b : ℝ[model: 4]
  param c : ℝ[model: 3] init = ones
  fn apply(x : ℝ[model: 4]) -> ℝ[model: 4] = x + b
}

module X {
  param w : ℝ[model: 4, out: 2] init = xavier_uniform
  fn apply(x : ℝ[model: 4]) -> ℝ[out: 2] = x · w
}

module N {
  param w : ℝ[model: 4, out: 2] init = xavier_uniform
  param g : ℝ[k: 3, out: 5] init = normal(std = 0.3)
  param h : ℝ[7] init = normal
}

fn keys(key : key) -> (key, key) = split_key(key)

fn gauss(key : key) -> ℝ[batch: B, model: D] uses Rand = normal(key, batch: B, model: D)

fn pick(key : key, logits : ℝ[batch: B, vocab: 7]) -> idx[7][batch: B] uses Rand =
  sample(key, logits)

fn unif(key : key) -> ℝ[batch: B, model: D] uses Rand = uniform(key, batch: B, model: D)

fn drop(key : key, x : ℝ[batch: B, model: D]) -> ℝ[batch: B, model: D]
    uses Rand =
  let (k1, k2) = split_key(key)
  x * bernoulli(k1, 0.75, batch: B, model: D) + bernoulli(k2, 1 - max(x)^2, batch: B, model: D)
"""


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    path = tmp_path_factory.mktemp("draws") / "draws.psk"
    path.write_text(SOURCE)
    return lower_program(load_program(str(path), {}, SourceMap()))


KEYS = [R.root_key(0), R.Key(0xFFFFFFFF, 0xFFFFFFFF), R.fold_in_name(R.root_key(7), "key")]


def laid(schedule, lanes: bool):
    """Every kernel with its innermost loop in vector lanes (8) and the outermost split over
    two threads where it has one: a layout changes no bit."""
    launches = []
    for launch in schedule.launches:
        k = launch.kernel
        loops = parallel_loops(k)
        if not loops:
            launches.append(launch)
            continue
        more = {"lanes": loops[-1].var, "width": 8} if lanes else {}
        if len(loops) > 1:
            more |= {"split": loops[0].var, "threads": 2}
        layout = dataclasses.replace(k.layout, **more)
        if check_layout(k, layout) is not None:
            launches.append(launch)
            continue
        launches.append(dataclasses.replace(launch, kernel=apply_layout(k, layout)))
    return dataclasses.replace(schedule, launches=tuple(launches))


def executors(schedule, leaves):
    """The outputs of the kernel interpreter and of the compiled entry (lanes, threads)."""
    from presk_cback.native import NativeEntry

    out = [run_schedule(schedule, leaves)]
    out.append(NativeEntry(laid(schedule, True)).run(leaves))
    out.append(NativeEntry(laid(schedule, False)).run(leaves))
    return out


@pytest.mark.parametrize("key", KEYS)
def test_split_key_is_the_interpreters(compiler, core, key):
    s = lower_entry(core, "keys", {"B": 1, "D": 1}, [key])
    for outs in executors(s, argument_leaves([key])):
        got = [R.Key(*map(int, np.asarray(o).reshape(2))) for o in outs]
        assert got == R.split(key, 2)


def test_a_modules_init_folds_its_names(compiler, core):
    s = lower_entry(core, "Z.init", {"B": 1, "D": 1}, [KEYS[0]])
    for b, c in executors(s, argument_leaves([KEYS[0]])):
        assert same_bits(b, np.zeros(4)) and same_bits(c, np.ones(3))
    fold = lower_entry(core, "Z.init", {"B": 1, "D": 1}, [KEYS[0]]).launches
    assert any(launch.kernel.name == "fold_key" for launch in fold)


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_the_initializers_that_draw_are_the_interpreters(compiler, core, realize):
    """Issue 29: xavier_uniform and normal(std = …) (the default std the double 0.02, a
    literal its decimal value) lowered with the interpreter's bits, element by element."""
    for key in KEYS[:2]:
        s = lower_entry(core, "N.init", {"B": 1, "D": 1}, [key], realize)
        k = R.fold_in_name(key, "w")
        want = [
            R.init_param("xavier_uniform", k, (4, 2)),
            R.init_param("normal", R.fold_in_name(key, "g"), (3, 5), std="0.3"),
            R.init_param("normal", R.fold_in_name(key, "h"), (7,)),
        ]
        if realize == "f32":
            want = [w.astype(np.float32) for w in want]
        for outs in executors(s, argument_leaves([key])):
            for got, w in zip(outs, want, strict=True):
                assert same_bits(np.asarray(got).reshape(w.shape), w)


@pytest.mark.parametrize("realize", ["f64", "f32"])
@pytest.mark.parametrize(("b", "d"), [(1, 1), (3, 5), (4, 33)])
def test_uniform_is_the_interpreters(compiler, core, realize, b, d):
    for key in KEYS:
        s = lower_entry(core, "unif", {"B": b, "D": d}, [key], realize)
        want = R.uniform(key, (b, d))
        want = want if realize == "f64" else want.astype(np.float32)
        for (got,) in executors(s, argument_leaves([key])):
            assert same_bits(got, want)


@pytest.mark.parametrize("realize", ["f64", "f32"])
@pytest.mark.parametrize(("b", "d"), [(1, 1), (3, 5)])
def test_normal_is_the_interpreters(compiler, core, realize, b, d):
    for key in KEYS:
        s = lower_entry(core, "gauss", {"B": b, "D": d}, [key], realize)
        want = R.normal(key, (b, d))
        want = want if realize == "f64" else want.astype(np.float32)
        for (got,) in executors(s, argument_leaves([key])):
            assert same_bits(got, want)


def test_sample_is_the_interpreters(compiler, core):
    """The kernels' softmax is f64's where the interpreter's is MPFR's: the same token
    unless a uniform falls within rounding of a cumulative probability (never, here); a
    logit of −∞ is never drawn, and a row of equal logits is randint."""
    rng = np.random.default_rng(2)
    x = rng.normal(scale=3.0, size=(300, 7))
    x[::3, 2] = -np.inf
    x[1::7] = 0.5
    for key in KEYS:
        s = lower_entry(core, "pick", {"B": 300, "D": 1}, [key, x])
        want = R.sample(key, x)
        for (got,) in executors(s, argument_leaves([key, x])):
            assert same_bits(got, want)
        assert not np.any(want[np.isneginf(x[:, 2])] == 2)


@pytest.mark.parametrize("realize", ["f64", "f32"])
def test_bernoulli_is_the_interpreters(compiler, core, realize):
    rng = np.random.default_rng(1)
    for key in KEYS:
        x = rng.uniform(-1, 1, (6, 7))
        s = lower_entry(core, "drop", {"B": 6, "D": 7}, [key, x], realize)
        k1, k2 = R.split(key, 2)
        xr = x if realize == "f64" else x.astype(np.float32)
        p = 1 - xr.max() * xr.max()  # the program's probability, in the realization's type
        m1 = R.bernoulli(k1, 0.75, (6, 7))
        m2 = R.bernoulli(k2, float(p), (6, 7))
        want = (xr * m1.astype(xr.dtype)) + m2.astype(xr.dtype)
        for (got,) in executors(s, argument_leaves([key, x])):
            assert same_bits(got, want)


def test_presk_run_prints_the_interpreters_digits(compiler, tmp_path):
    path = tmp_path / "draws.psk"
    path.write_text(SOURCE)
    for entry in ("unif", "gauss", "drop", "keys", "Z.init"):
        args = ("run", str(path), "--entry", entry, "--dim", "B=3", "--dim", "D=4", "--seed", "5")
        want = presk_ok(*args).stdout
        for backend in ("kernel", "native"):
            assert presk_ok(*args, "--backend", backend).stdout == want, (entry, backend)


def test_a_normal_draw_natively_without_mpfr_is_e7160(compiler, tmp_path):
    from helpers import presk

    path = tmp_path / "draws.psk"
    path.write_text(SOURCE)
    args = ("run", path, "--entry", "gauss", "--dim", "B=2", "--dim", "D=2", "--backend", "native")
    done = presk(*args, env={"PRESK_INTERP_C": "0"})
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("[E7160] Error: a normal draw compiles against gmpy2's MPFR")
