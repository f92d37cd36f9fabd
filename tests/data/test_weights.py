"""`presk data convert` (issue 28): a parameter checkpoint to and from safetensors and .npz,
the tree's paths as the tensors' names, bit for bit both ways; the state_dict of the exported
PyTorch module (a stack's blocks under their own names) read into the tree; names, shapes and
files that do not fit are E7076, E7077, E7078, a checkpoint without its paths E7075."""

import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, presk, python_run, tutorial_run
from presk_core import data as D
from safetensors.numpy import load_file, save_file

PATHS = ["blocks.norm.γ", "blocks.proj.w", "blocks.proj.b", "final.γ"]
SHAPES = [(3, 4), (3, 4, 4), (3, 4), (4,)]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    """The tutorial's tower after 3 steps: a checkpoint of `params Tower` with its paths."""
    run = tutorial_run(tmp_path_factory.mktemp("run"))
    r = presk("train", "07_train.psk", "--steps", "3", "--log-every", "0", "--ckpt", "c", cwd=run)
    assert r.returncode == 0, r.stderr
    return run / "c" / "final.psk.d"


def leaves(path: Path) -> dict[str, np.ndarray]:
    reals, tree, at = D.read_reals(str(path)), {}, 0
    for p, shape in zip(PATHS, SHAPES, strict=True):
        size = int(np.prod(shape))
        tree[p] = reals[at : at + size].reshape(shape)
        at += size
    return tree


@pytest.mark.parametrize("ext", ["safetensors", "npz"])
def test_a_checkpoint_out_and_back_is_the_same_file(ckpt, tmp_path, ext):
    out = tmp_path / f"w.{ext}"
    r = presk("data", "convert", ckpt, "-o", out)
    assert r.returncode == 0 and r.stdout == (
        f"presk data: wrote {out} (4 tensors, 76 reals of params Tower, from final.psk.d)\n"
    ), r.stderr
    tensors = load_file(str(out)) if ext == "safetensors" else dict(np.load(out))
    assert list(tensors) == PATHS or sorted(tensors) == sorted(PATHS)
    for p, x in leaves(ckpt).items():
        assert tensors[p].dtype == np.float64 and np.array_equal(tensors[p], x)
    back = tmp_path / "back.psk.d"
    r = presk("data", "convert", out, "-o", back, "--like", ckpt)
    assert r.returncode == 0, r.stderr
    assert back.read_bytes() == ckpt.read_bytes()


def test_safetensors_records_the_trees_type(ckpt, tmp_path):
    from safetensors import safe_open

    presk("data", "convert", ckpt, "-o", tmp_path / "w.safetensors")
    with safe_open(str(tmp_path / "w.safetensors"), framework="numpy") as f:
        assert f.metadata() == {"presk": "params Tower"}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_state_dict_of_the_exported_module_is_read_into_the_tree(ckpt, tmp_path, dtype):
    """The tutorial's run exported to PyTorch, its module built (seed 1, other weights than
    presk's), its state_dict saved as safetensors by torch: presk reads it into the tree, each
    block of the stack in its place, float32 widened exactly."""
    pytest.importorskip("torch")
    out = tmp_path / "export"
    r = presk("export", ROOT / "tutorial" / "07_train.psk", "--target", "pytorch",
              "--conformance-entry", "train:1", "-o", out)  # fmt: skip
    assert r.returncode == 0, r.stderr
    script = (
        "import sys, torch, numpy as np\n"
        f"sys.path.insert(0, {str(out)!r})\n"
        "import train\n"
        f"torch.set_default_dtype(torch.{dtype})\n"
        "torch.manual_seed(1)\n"
        "model = train.build_model(dict(train.DIMS))\n"
        "from safetensors.torch import save_file\n"
        f"save_file(model.state_dict(), {str(tmp_path / 'sd.safetensors')!r})\n"
        f"np.savez({str(tmp_path / 'sd.npz')!r}, **{{k: v.double().numpy() for k, v in"
        " model.state_dict().items()})\n"
    )
    done = python_run("-c", script, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    state = dict(np.load(tmp_path / "sd.npz"))
    assert "blocks.1.proj.w" in state and "blocks.proj.w" not in state  # PyTorch's names
    for source in ("sd.safetensors", "sd.npz"):
        r = presk("data", "convert", tmp_path / source, "-o", tmp_path / "w.psk.d", "--like", ckpt)
        assert r.returncode == 0, r.stderr
        tree = leaves(tmp_path / "w.psk.d")
        for i in range(3):
            assert np.array_equal(tree["blocks.proj.w"][i], state[f"blocks.{i}.proj.w"])
            assert np.array_equal(tree["blocks.norm.γ"][i], state[f"blocks.{i}.norm.γ"])
        assert np.array_equal(tree["final.γ"], state["final.γ"])
        assert not np.array_equal(tree["blocks.proj.w"], leaves(ckpt)["blocks.proj.w"])


def _tensors(ckpt: Path) -> dict[str, np.ndarray]:
    return {p: np.array(x) for p, x in leaves(ckpt).items()}


def _convert(tmp_path: Path, tensors: dict, ckpt: Path) -> subprocess.CompletedProcess:
    save_file(tensors, str(tmp_path / "bad.safetensors"))
    return presk("data", "convert", tmp_path / "bad.safetensors", "-o", tmp_path / "o.psk.d",
                 "--like", ckpt)  # fmt: skip


def test_names_that_do_not_fit_the_tree_are_E7076(ckpt, tmp_path):
    tensors = _tensors(ckpt)
    del tensors["final.γ"]
    r = _convert(tmp_path, tensors, ckpt)
    assert r.returncode == 1 and r.stderr.startswith(
        "[E7076] Error: `" + str(tmp_path / "bad.safetensors") + "` has no tensor `final.γ`"
    ), r.stderr
    tensors = {**_tensors(ckpt), "head.w": np.zeros(3)}
    r = _convert(tmp_path, tensors, ckpt)
    assert (
        r.returncode == 1 and "[E7076]" in r.stderr and "no leaf of the tree: `head.w`" in r.stderr
    )
    assert not (tmp_path / "o.psk.d").exists()


def test_shapes_and_types_that_do_not_fit_are_E7077(ckpt, tmp_path):
    tensors = {**_tensors(ckpt), "blocks.proj.w": np.zeros((3, 4, 5))}
    r = _convert(tmp_path, tensors, ckpt)
    assert (
        r.returncode == 1
        and r.stderr.startswith("[E7077] Error: `")
        and ("`blocks.proj.w` is [3, 4, 5], the tree's leaf is [3, 4, 4]" in r.stderr)
    ), r.stderr
    tensors = {**_tensors(ckpt), "final.γ": np.arange(4, dtype=np.int64)}
    r = _convert(tmp_path, tensors, ckpt)
    assert r.returncode == 1 and "`final.γ` holds int64 values, a parameter holds reals" in r.stderr


def test_files_that_are_not_weights_are_diagnostics_not_tracebacks(ckpt, tmp_path):
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 3)
    (tmp_path / "junk.npz").write_text("not a zip")
    for junk in ("junk.safetensors", "junk.npz"):
        r = presk("data", "convert", tmp_path / junk, "-o", tmp_path / "o.psk.d", "--like", ckpt)
        assert r.returncode == 1 and r.stderr.startswith("[E7078] Error: `"), r.stderr
    old = tmp_path / "old.psk.d"  # a checkpoint written before presk recorded its paths
    D.write_tree(str(old), "params Tower", list(_tensors(ckpt).values()))
    r = presk("data", "convert", old, "-o", tmp_path / "w.npz")
    assert r.returncode == 1 and r.stderr.startswith(
        f"[E7075] Error: `{old}` does not record its leaves' paths"
    )
    r = presk("data", "convert", tmp_path / "w.npz", "-o", tmp_path / "o.psk.d")
    assert r.returncode == 2 and "--like" in r.stderr
    r = presk("data", "convert", ckpt, "-o", tmp_path / "w.pt")
    assert r.returncode == 2 and "a weights file ends in .safetensors, .npz, .psk.d" in r.stderr
    assert "Traceback" not in r.stderr
