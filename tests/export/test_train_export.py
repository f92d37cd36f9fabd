"""The export of a training run: train.py, and with `train:K` its K-step conformance test.

The tutorial's run (07_train.psk) is exported once; its conformance test and train.py run
side by side in two subprocesses (torch takes seconds to import). The rest reads what the
export writes, without torch.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import python_run, python_start
from presk_core.run import EntryError
from presk_export import Options, export_pytorch, write_files
from presk_export.train_export import train_steps
from presk_syntax.diagnostics import DiagnosticError
from presk_types.elab import load_program

ROOT = Path(__file__).resolve().parents[2]
PRESK = [sys.executable, "-m", "presk_cli.main"]
TINY = {"V": "64", "D": "16", "H": "2", "L": "2"}
HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    out = tmp_path_factory.mktemp("tutorial_train")
    program = load_program(str(ROOT / "tutorial/07_train.psk"))
    files = export_pytorch(program, Options(), "train:10", out=str(out))
    write_files(str(out), files)
    return out, files


def test_the_files_of_a_training_export(tutorial):
    out, files = tutorial
    assert list(files) == [
        "_01_linear.py",
        "_02_norm.py",
        "_06_tower.py",
        "_07_train.py",
        "train.py",
        "test_conformance.py",
        "conformance/train.json",
    ]
    script = files["train.py"]
    assert "from _06_tower import Tower\nfrom _07_train import loss\n" in script
    assert "    return Tower()\n" in script
    assert "        return loss(self.model, batch)\n" in script
    assert "LR = 0.01\nBETAS = (0.9, 0.999)\nEPS = 1e-08\nWEIGHT_DECAY = 0.0\nWARMUP = 20\n" in (
        script
    )
    # the data file, relative to the export's folder
    data = re.search(r'^DATA = "(.*)"$', script, re.M).group(1)
    assert not data.startswith("/")
    assert (out / data).resolve() == (ROOT / "tutorial/data/pairs.psk.d").resolve()


def test_the_interpreter_steps_recorded(tutorial):
    _, files = tutorial
    doc = json.loads(files["conformance/train.json"])
    assert doc["horizon"] == 160  # 10 epochs of 128 // 8 batches, as presk train counts them
    assert (doc["batch"], doc["shuffle"], doc["seed"], doc["bits"]) == (8, 3, 0, 256)
    steps = doc["steps"]
    assert [s["step"] for s in steps] == list(range(1, 11))
    seen = [i for s in steps for i in s["indices"]]
    assert len(seen) == len(set(seen)) == 80 and all(0 <= i < 128 for i in seen)  # one epoch
    rates = dict(doc["lr"])
    assert rates[1] == pytest.approx(0.01 / 20, rel=1e-15) and rates[20] == 0.01
    assert abs(rates[160]) < 1e-70  # 0 up to the rounding of π at 256 bits
    assert rates[90] == pytest.approx(0.005, rel=1e-15)  # halfway down the cosine
    assert [s["lr"] for s in steps] == [rates[t] for t in range(1, 11)]
    assert steps[-1]["loss"] < steps[0]["loss"]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_the_conformance_test_and_train_py_run(tutorial):
    out, _ = tutorial
    test = ["-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]
    runs = [
        python_start(*test, "test_conformance.py", cwd=out),
        python_start("train.py", "--steps", "100", "--log-every", "25", "--ckpt", "ckpt", cwd=out),
    ]
    runs = [p.wait(timeout=600) for p in runs]
    (conformance, log, err) = (runs[0].stdout, runs[1].stdout, runs[1].stderr)
    assert runs[0].returncode == 0 and "1 passed" in conformance, conformance
    m = re.search(r"^K-step conformance: 10 steps, worst relative gap (\S+)$", conformance, re.M)
    assert m is not None, conformance
    assert float(m.group(1)) < 1e-12

    assert runs[1].returncode == 0, err
    lines = log.splitlines()
    assert re.fullmatch(r"train\.py: torch \S+ on cpu, \d+ threads?, float32", lines[0])
    steps = [
        re.fullmatch(r"step (\d+)/100  epoch (\d+)  loss (\d+\.\d{6})  lr (\d\.\d{3}e[-+]\d\d)", x)
        for x in lines[1:5]
    ]
    assert all(steps), lines
    assert [int(s.group(1)) for s in steps] == [25, 50, 75, 100]
    assert [int(s.group(2)) for s in steps] == [2, 4, 5, 7]  # 16 batches an epoch
    assert [s.group(4) for s in steps] == ["9.904e-03", "6.913e-03", "2.222e-03", "0.000e+00"]
    losses = [float(s.group(3)) for s in steps]
    assert losses[-1] < losses[0]
    assert re.fullmatch(
        r"train\.py: \d+\.\d ms a step, median of 99 \(the first excluded\)", lines[5]
    )
    final = out / "ckpt" / "final.pt"
    assert lines[6] == (
        f"train.py: 100 steps in {lines[6].split(' steps in ')[1].split(' s,')[0]} s,"
        f" final loss {steps[-1].group(3)}, weights in {final}"
    )
    assert len(lines) == 7
    assert final.stat().st_size > 0 and (out / "ckpt" / "step_50.pt").exists()
    assert not list((out / "ckpt").glob(".train-*"))  # no temporary file left


def test_train_entries():
    assert train_steps("train:10") == 10 and train_steps(" train : 3 ") == 3
    assert train_steps("Tower.apply") is None and train_steps("loss") is None
    for bad in ("train:x", "train:0", "train:", "train:-2", "train:1.5", "train:²"):
        with pytest.raises(EntryError, match="write `train:K`") as e:
            train_steps(bad)
        assert e.value.usage


def test_bad_training_entries_are_clean_errors(tmp_path):
    tower = load_program(str(ROOT / "tutorial/06_tower.psk"))
    with pytest.raises(EntryError, match="`06_tower.psk` has no `training run`") as e:
        export_pytorch(tower, Options(), "train:3")
    assert e.value.usage
    run = load_program(str(ROOT / "tutorial/07_train.psk"))
    with pytest.raises(EntryError, match=r"the run has 160 steps \(10 epochs of 16 batches\)"):
        export_pytorch(run, Options(), "train:161")
    with pytest.raises(EntryError, match="the training run fixes B = 8"):
        export_pytorch(run, Options(), "train:1", {"B": 4})
    # the command: a usage error, exit 2, nothing written
    done = subprocess.run(
        [*PRESK, "export", "tutorial/07_train.psk", "--target", "pytorch",
         "--conformance-entry", "train:x", "-o", str(tmp_path / "o")],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("presk export: `train:x` is not a training entry")
    assert not (tmp_path / "o").exists()


def test_a_run_whose_data_do_not_fit_is_its_diagnostic():
    # train_minigpt.psk at tiny constants: its data are windows of GPT-2's vocabulary
    program = load_program(str(ROOT / "tests/examples/minigpt/train_minigpt.psk"), TINY)
    with pytest.raises(DiagnosticError) as e:
        export_pytorch(program, Options(), "train:1")
    assert [d.code for d in e.value.diagnostics] == ["E1011"]


def test_a_file_named_train_is_exported_as_train_(tmp_path):
    source = (ROOT / "tutorial/07_train.psk").read_text(encoding="utf-8")
    source = source.replace('"06_tower.psk"', f'"{ROOT / "tutorial/06_tower.psk"}"')
    source = source.replace('"data/pairs.psk.d"', f'"{ROOT / "tutorial/data/pairs.psk.d"}"')
    (tmp_path / "train.psk").write_text(source, encoding="utf-8")
    files = export_pytorch(load_program(str(tmp_path / "train.psk")), Options(), "train:1")
    assert "train_.py" in files and "from train_ import loss" in files["train.py"]


def test_minigpt_takes_T_from_its_data_and_a_constant_schedule(tmp_path):
    """Tiny MiniGPT on windows of 8 tokens: indices in the samples, T read from the file for
    the constructor (`MiniGPT(T)`), the block's betas and weight decay, a constant rate."""
    minigpt = ROOT / "tests/examples/minigpt"
    (tmp_path / "tiny.psk").write_text(
        f"""import "{minigpt / "minigpt.psk"}" as m
dim B
dim T <= 1024

fn loss(θ : params m.MiniGPT,
        batch : (idx[m.V][batch: B, seq: T], idx[m.V][batch: B, seq: T])) -> ℝ[] =
  let (x, y) = batch
  let logits = (m.MiniGPT.apply(θ, x) : ℝ[batch: B, seq: T, vocab: m.V])
  -mean(take(axis vocab, log_softmax(axis vocab, logits), y))

optimizer adamw {{
  lr           : f64 = 3e-3
  weight_decay : f64 = 0.1
  betas        = (0.9, 0.95)
  schedule     : constant
}}

training run {{
  model     = m.MiniGPT
  objective = loss
  optimizer = adamw
  data      = stream "{minigpt / "data/tiny_T8.psk.d"}" |> shuffle(seed = 7) |> batch(B = 4)
}}
""",
        encoding="utf-8",
    )
    files = export_pytorch(load_program(str(tmp_path / "tiny.psk"), TINY), Options(), "train:1")
    script = files["train.py"]
    assert '    return MiniGPT(dims["T"])\n' in script
    assert 'SAMPLE = [("idx", 64, ("T",)), ("idx", 64, ("T",))]\n' in script
    assert "BETAS = (0.9, 0.95)\n" in script and "WEIGHT_DECAY = 0.1\n" in script
    assert "WARMUP = None\n" in script and "    return 1.0\n" in script
    assert "EPOCHS = 1\n" in script and "CKPT = None\n" in script
    doc = json.loads(files["conformance/train.json"])
    assert doc["dims"] == {"B": 4, "T": 8} and doc["horizon"] == 8  # 32 windows, batches of 4
    assert all(rate == 0.003 for _, rate in doc["lr"])
    (step,) = doc["steps"]
    assert step["loss"] == pytest.approx(math.log(64), rel=1e-12)  # the head starts at zeros
    assert [len(leaf) for leaf in step["batch"]] == [4, 4]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_train_py_under_torchrun_is_the_one_process_run(tutorial):
    """Two processes (torchrun, gloo on CPU), each a slice of every batch of 8, log the losses
    of one process on the whole batch (float64: equal to six decimals), and only the first
    writes checkpoints, 0644 under a umask of 022 as `open` creates them."""
    out, _ = tutorial
    script = ["train.py", "--steps", "12", "--log-every", "4", "--float64", "--threads", "1"]
    one = [sys.executable, *script, "--ckpt", "one"]
    two = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        *script, "--ckpt", "two",
    ]  # fmt: skip
    # a rank that dies of a signal dumps its threads' Python stacks (faulthandler): where a
    # teardown abort struck, should one recur (docs/export.md)
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    runs = [
        subprocess.Popen(
            cmd,
            cwd=out,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: os.umask(0o022),
        )  # fmt: skip
        for cmd in (one, two)
    ]
    (log1, err1), (log2, err2) = (p.communicate(timeout=600) for p in runs)
    assert runs[0].returncode == 0, err1
    assert runs[1].returncode == 0, (log2, err2)
    lines1, lines2 = log1.splitlines(), log2.splitlines()
    assert lines2[0].endswith("1 thread in each of 2 processes, float64"), lines2
    losses = [re.findall(r"^step \d+/12 .*  loss (\S+)", log, re.M) for log in (log1, log2)]
    assert len(losses[0]) == 3 and losses[0] == losses[1], (log1, log2)
    assert len(lines2) == len(lines1)  # one process logs
    final = out / "two" / "final.pt"
    assert sorted(p.name for p in (out / "two").iterdir()) == ["final.pt"]
    assert final.stat().st_mode & 0o777 == 0o644


def test_train_py_refuses_a_batch_that_does_not_split(tutorial, monkeypatch):
    out, _ = tutorial
    done = python_run("train.py", "--steps", "1", cwd=out, env={"WORLD_SIZE": "3"})
    assert done.returncode == 1
    assert done.stderr == "train.py: a batch of 8 does not split among 3 processes\n"
