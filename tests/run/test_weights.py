"""`presk run --weights CKPT` and `presk bench --weights CKPT` (issue 29): the entry's
parameter tree bound from a checkpoint as `presk train` writes it. The oracle is the
trainer itself: after k steps on a data file of one batch, step k + 1 logs the loss of θ_k
on that batch, which `presk run --weights` of the k-step checkpoint must print."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import presk, presk_ok

TRAIN = "tutorial/07_train.psk"


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Path:
    """The first 8 pairs of the tutorial's data: one batch of B = 8, so each epoch is one
    step on all of them."""
    from presk_core import data as D

    src = "tutorial/data/pairs.psk.d"
    from helpers import ROOT

    header = D.read_header(str(ROOT / src))
    t = D.type_of(header.type_text)
    samples = D.read(str(ROOT / src), t)[:8]
    out = tmp_path_factory.mktemp("data") / "eight.psk.d"
    D.write(str(out), header.type_text, t, samples)
    return out


def _train(batch: Path, folder: Path, steps: int) -> list[float]:
    done = presk_ok(
        "train", TRAIN, "--data", batch, "--steps", steps, "--log-every", 1, "--ckpt", folder
    )
    return [float(x) for x in re.findall(r"^step \d+ .* loss (\S+)", done.stdout, re.M)]


@pytest.fixture(scope="module")
def trained(batch, tmp_path_factory) -> tuple[Path, list[float]]:
    """θ after 2 steps, and the losses of a 3-step run (the third is θ_2's on the batch)."""
    two, three = tmp_path_factory.mktemp("two"), tmp_path_factory.mktemp("three")
    _train(batch, two, 2)
    return two / "final.psk.d", _train(batch, three, 3)


def run(*args) -> str:
    return presk_ok("run", TRAIN, "--entry", "loss", *args).stdout


def test_run_with_the_weights_gives_the_trained_loss(trained, batch):
    ckpt, losses = trained
    loss = float(run("--data", batch, "--weights", ckpt).removeprefix("ℝ[] = "))
    assert f"{loss:.6f}" == f"{losses[2]:.6f}"
    assert f"{loss:.6f}" != f"{losses[0]:.6f}"  # the initial θ's loss: a near miss refused
    drawn = float(run("--data", batch).removeprefix("ℝ[] = "))
    assert f"{drawn:.6f}" == f"{losses[0]:.6f}"  # without --weights: θ from the initializers


def test_the_weights_are_the_checkpoints_leaves(trained, batch):
    from presk_core.data import read_header, read_reals

    ckpt, _ = trained
    doc = json.loads(run("--data", batch, "--weights", ckpt, "--json"))
    theta = doc["inputs"]["θ"]
    reals, at = read_reals(str(ckpt)), 0
    for path, shape in read_header(str(ckpt)).layout:
        n = int(np.prod(shape))
        got = np.array(theta[path], dtype=object).astype(float).reshape(shape)
        np.testing.assert_array_equal(got, reals[at : at + n].reshape(shape))
        at += n


def test_kernel_and_native_bind_the_same_weights(trained, batch):
    ckpt, _ = trained
    kernel = json.loads(run("--data", batch, "--weights", ckpt, "--backend", "kernel", "--json"))
    native = json.loads(run("--data", batch, "--weights", ckpt, "--backend", "native", "--json"))
    assert kernel["result"] == native["result"]  # bit for bit (DESIGN §11)
    exact = json.loads(run("--data", batch, "--weights", ckpt, "--json"))["result"]
    assert abs(float(kernel["result"]) - float(exact)) <= 1e-12 * abs(float(exact))


def test_bench_times_the_entry_on_the_weights(trained):
    ckpt, _ = trained
    done = presk_ok(
        "bench", TRAIN, "--entry", "loss", "--dim", "B=2", "--weights", ckpt,
        "--realize", "f64", "--repeat", 1,
    )  # fmt: skip
    assert done.stdout.startswith("backend") and "native f64" in done.stdout


def test_a_module_with_dimensions_is_bound_at_the_entrys(tmp_path):
    from presk_core import data as D

    ckpt = tmp_path / "lin.psk.d"
    D.write_tree(str(ckpt), "params Linear", [np.arange(3.0).reshape(3, 1), np.ones(1)], ["w", "b"])
    args = ("run", "tutorial/04_grad.psk", "--entry", "loss", "--dim", "B=2", "--weights", ckpt)
    doc = json.loads(presk_ok(*args, "--dim", "D=3", "--json").stdout)
    assert [[float(v) for v in row] for row in doc["inputs"]["θ"]["w"]] == [[0], [1], [2]]
    wrong = presk(*args, "--dim", "D=4")
    assert wrong.returncode == 1 and wrong.stdout == ""
    assert wrong.stderr == (
        f"[E7060] Error: `{ckpt}`: `w` is ℝ[3, 1] in the weights, and ℝ[4, 1] in the program's"
        " `params Linear` (weights of other constants or dimensions: give the ones they were"
        " trained with, --const or --dim)\n"
    )


MISMATCHES = [
    (  # samples, not weights
        ("--weights", "tutorial/data/pairs.psk.d"),
        "[E7060] Error: `tutorial/data/pairs.psk.d` holds samples of"
        " `(ℝ[model: 4], ℝ[model: 4])`, not the weights of a `params M`\n",
    ),
    (
        ("--weights", "no/such.psk.d"),
        "[E7004] Error: the weights: cannot read `no/such.psk.d`: no such file or directory\n",
    ),
]


@pytest.mark.parametrize(("args", "expected"), MISMATCHES)
def test_a_file_that_is_no_checkpoint_is_a_diagnostic_naming_it(args, expected):
    done = presk("run", TRAIN, "--entry", "loss", "--dim", "B=2", *args)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", expected)


def test_weights_of_another_tree_are_refused_naming_the_path(trained):
    ckpt, _ = trained
    done = presk("run", TRAIN, "--entry", "loss", "--dim", "B=2", "--weights", ckpt,
                 "--const", "L=2")  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        f"[E7060] Error: `{ckpt}`: `blocks.norm.γ` is ℝ[3, 4] in the weights, and ℝ[2, 4] in"
        " the program's `params Tower` (weights of other constants or dimensions: give the"
        " ones they were trained with, --const or --dim)\n"
    )
    other = presk("run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply",
                  "--dim", "batch=2", "--weights", ckpt)  # fmt: skip
    assert other.returncode == 1
    assert other.stderr == (
        f"[E7060] Error: `{ckpt}` holds a `params Tower`, and `Linear{{3, 2}}.apply` takes"
        " none (its trees: `θ : params Linear{In, Out}`)\n"
    )
    none = presk("run", "tutorial/05_sample.psk", "--entry", "pick", "--dim", "B=2",
                 "--weights", ckpt)  # fmt: skip
    assert (none.returncode, none.stderr) == (
        1,
        f"[E7060] Error: `{ckpt}`: `pick` takes no parameter tree for the weights to bind\n",
    )


def test_a_leaf_of_another_path_is_refused_naming_it(tmp_path):
    from presk_core import data as D

    ckpt = tmp_path / "lin.psk.d"
    D.write_tree(str(ckpt), "params Linear", [np.zeros((3, 1)), np.ones(1)], ["w", "bias"])
    done = presk("run", "tutorial/04_grad.psk", "--entry", "loss", "--dim", "B=2", "--dim", "D=3",
                 "--weights", ckpt)  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"[E7060] Error: `{ckpt}` holds a leaf `bias` that `params Linear` does not have"
        " (the program's: w, b)\n"
    )
