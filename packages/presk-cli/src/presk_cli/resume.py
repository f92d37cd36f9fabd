"""What `presk train --resume` continues from: a run's state after a completed step.

A state is written beside a checkpoint (`DIR/step_K.psk.d` gets `DIR/step_K.state`) when a
run stops before its horizon (a signal, `--stop-after`): θ, AdamW's moments m and v, the
step K, the horizon, the loss of step K and the settings that fix the run's bits. θ is there
again, exactly: the interpreter's θ has `--bits` bits (the checkpoint holds its doubles),
the kernels' θ is in the realization's storage types. The data order needs nothing more:
step t's batch is a function of the run's shuffle seed and t (presk_ad.step.Trainer.batch).

The file is an `.npz` (numpy's zip of `.npy` arrays, read without pickle): `settings`, a
JSON text, then `theta/PATH`, `m/PATH`, `v/PATH` for each leaf of the tree. An interpreter's
leaf is an array of texts, each mpfr in hexadecimal (`0x1.8p+3`, read back exactly at its
precision); a kernel's is the arena's array as it is (float64, float32, or bf16's uint16).
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

import gmpy2
import numpy as np
from presk_core import data as D

STATE_KIND = "presk-train-state"
STATE_VERSION = 1

COMPARED = ("backend", "realize", "bits", "seed", "opt", "model", "objective", "data", "layout")
"""The settings a resumed run must share with the run it continues: each changes the bits of
the steps after (the seed: the draws of an objective that draws, at step t)."""

FLAGS = {
    "backend": "--backend",
    "realize": "--realize",
    "bits": "--bits",
    "seed": "--seed",
    "opt": "--opt",
    "data": "the data (--data)",
    "model": "the model",
    "objective": "the objective",
    "layout": "the model's tree (its leaves' paths and shapes; --const)",
}


class ResumeError(Exception):
    """A state that cannot be resumed (E7070: missing or unreadable; E7071: another run's;
    E7072: a step to stop after that is already done)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class TrainState:
    """A run after step `t`: its settings (COMPARED, `horizon`, `loss`), θ, m and v as
    trees of leaves in their exact form (mpfr object arrays, or arrays in storage types)."""

    settings: dict
    t: int
    theta: dict
    m: dict
    v: dict


def state_path(ckpt: str) -> str:
    """The state beside a checkpoint: `step_K.psk.d` -> `step_K.state`."""
    stem = ckpt[: -len(".psk.d")] if ckpt.endswith(".psk.d") else ckpt
    return stem + ".state"


def _exact(leaf: np.ndarray) -> np.ndarray:
    """A leaf as the file holds it: mpfr as hexadecimal texts, machine numbers as they are."""
    leaf = np.asarray(leaf)
    if leaf.dtype == object:
        return np.vectorize(lambda x: format(x, "a"), otypes=[np.str_])(leaf)
    return np.ascontiguousarray(leaf)


def _leaf(stored: np.ndarray, bits: int) -> np.ndarray:
    if stored.dtype.kind == "U":  # mpfr texts, read back at the run's precision: exact
        out = np.empty(stored.shape, dtype=object)
        flat = out.reshape(-1)
        for i, text in enumerate(stored.reshape(-1)):
            flat[i] = gmpy2.mpfr(str(text), bits, 0)
        return out
    return stored


def write_state(path: str, state: TrainState) -> None:
    """The state, atomically (presk_core.data.atomic): E7004 when it cannot be written."""
    arrays = {"settings": np.array(json.dumps({**state.settings, "t": state.t}))}
    for part, tree in (("theta", state.theta), ("m", state.m), ("v", state.v)):
        for name, leaf in tree.items():
            arrays[f"{part}/{name}"] = _exact(leaf)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    try:
        D.write_bytes(path, buffer.getvalue())
    except OSError as e:
        why = (e.strerror or str(e)).lower()
        raise D.DataError("E7004", f"cannot write `{path}`: {why}") from None


def read_state(ckpt: str) -> TrainState:
    """The state beside checkpoint `ckpt` (E7070 when there is none or it cannot be read)."""
    path = state_path(ckpt)
    if not os.path.isfile(ckpt):
        raise ResumeError("E7070", f"no checkpoint `{ckpt}` to resume from")
    if not os.path.exists(path):
        raise ResumeError(
            "E7070",
            f"`{ckpt}` has no state beside it (`{path}`): a run saves one when it stops before"
            " its horizon (a signal, --stop-after); a periodic checkpoint holds θ alone unless the run had --resumable",
        )
    try:
        with np.load(path, allow_pickle=False) as z:
            stored = {name: z[name] for name in z.files}
        settings = json.loads(str(stored.pop("settings")))
        kind, version = settings.pop("presk", None), settings.pop("version", None)
        t = int(settings.pop("t"))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as e:
        raise ResumeError("E7070", f"`{path}` is not a training state: {e}") from None
    if kind != STATE_KIND or version != STATE_VERSION:
        raise ResumeError(
            "E7070",
            f"`{path}` is a state of version {version}, this presk reads version {STATE_VERSION}",
        )
    trees: dict[str, dict] = {"theta": {}, "m": {}, "v": {}}
    for name, leaf in stored.items():
        part, _, leaf_name = name.partition("/")
        if part in trees:
            trees[part][leaf_name] = _leaf(leaf, int(settings.get("bits", 53)))
    return TrainState(settings, t, trees["theta"], trees["m"], trees["v"])


def data_digest(path: str) -> str:
    """The data a run reads, named by its file and the start of its SHA-256: a resumed run
    must read the same samples."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return f"{os.path.basename(path)} (sha256 {digest.hexdigest()[:16]})"


def checkpoint_tree(ckpt: str, like: dict) -> dict:
    """A checkpoint's θ as a tree of doubles shaped as `like`'s leaves."""
    reals = D.read_reals(ckpt)
    tree, at = {}, 0
    for name, leaf in like.items():
        shape = np.shape(leaf)
        size = int(np.prod(shape, dtype=np.int64))
        tree[name] = reals[at : at + size].reshape(shape)
        at += size
    if at != reals.size:
        raise ResumeError("E7071", f"`{ckpt}` holds {reals.size} reals, the model's tree {at}")
    return tree


def _realization(realize: str | None) -> str | None:
    """`f32`, or a realization file named by its SHA-256 (`@r.json (sha256 …)`): a file of
    the same name with other types is another run."""
    if realize is None or not realize.startswith("@"):
        return realize
    try:
        return f"@{data_digest(realize[1:])}"
    except OSError:
        return realize


def settings(
    trainer, backend: str, realize: str | None, bits: int, seed: int, opt: bool = False
) -> dict:
    """The settings a state and a metrics file record: the run's and its flags'
    (`trainer` a presk_ad.step.Trainer)."""
    run = trainer.run
    layout = [[path, list(np.shape(leaf))] for path, leaf in trainer.theta.items()]
    return {
        "presk": STATE_KIND,
        "version": STATE_VERSION,
        "backend": backend,
        "realize": _realization(realize) if backend != "interp" else None,
        "bits": bits,
        "seed": seed,
        "opt": opt,
        "model": run.model,
        "objective": run.objective,
        "data": data_digest(os.path.join(trainer.folder, run.data)),
        "layout": layout,
        "horizon": trainer.horizon,
    }


def check(state: TrainState, ckpt: str, now: dict, stop_after: int | None = None) -> None:
    """E7071 when the run that wrote `state` differs from this one in a setting that changes
    the bits (COMPARED): the first such, with both values; E7072 when `--stop-after` is not
    after the step the state is at."""
    if stop_after is not None and stop_after <= state.t:
        raise ResumeError(
            "E7072",
            f"--stop-after {stop_after}: the run resumes after step {state.t} of `{ckpt}`",
        )
    for key in COMPARED:
        then = state.settings.get(key)
        if then != now.get(key):
            raise ResumeError(
                "E7071",
                f"`{ckpt}` was saved by a run with {FLAGS[key]} {_shown(then)}, this run has"
                f" {_shown(now.get(key))}: resume with the settings it was trained with",
            )


def _shown(value) -> str:
    if isinstance(value, list):  # a layout: its first leaves
        return (
            "["
            + ", ".join(f"{p} {tuple(s)}" for p, s in value[:3])
            + (", …]" if len(value) > 3 else "]")
        )
    return f"`{value}`"


@dataclass(slots=True)
class Completed:
    """The last completed step of a run (its update, log line and checkpoint done), and how
    to get its state: `exact()` -> (θ, m, v) as a state holds them, `doubles()` -> θ's tree
    of doubles (its checkpoint). Step 0 (no step done) saves nothing."""

    t: int
    loss: float | None
    exact: Callable[[], tuple[dict, dict, dict]] | None = None
    doubles: Callable[[], dict] | None = None
    saved: str | None = None
    """A step saved already: the checkpoint a resumed run started from (no step since)."""


def keep(done: Completed, ckpt_dir: str, model: str, run_settings: Callable[[], dict],
         written: set[int], save: Callable[[str, str, dict], None]) -> str | None:  # fmt: skip
    """Save the completed step for `--resume`: `DIR/step_K.psk.d` (unless this run wrote that
    checkpoint already, `written`) and its state beside, its settings `run_settings()`; the
    checkpoint's path, or None when no step is complete."""
    if done.saved is not None or done.t == 0:
        return done.saved
    path = os.path.join(ckpt_dir, f"step_{done.t}.psk.d")
    if done.t not in written:
        save(path, model, done.doubles())
    theta, m, v = done.exact()
    write_state(
        state_path(path), TrainState({**run_settings(), "loss": done.loss}, done.t, theta, m, v)
    )
    return path


__all__ = [
    "Completed",
    "ResumeError",
    "checkpoint_tree",
    "TrainState",
    "check",
    "keep",
    "read_state",
    "settings",
    "state_path",
    "write_state",
]
