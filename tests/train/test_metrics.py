"""`presk train --metrics FILE.jsonl --plot FILE.png [--compare OTHER.jsonl]` (issue 28): the
settings then a line a step, the same numbers as the log lines; a PNG of loss and |g|; E7073
without matplotlib, E7074 for a file that is not a run's metrics."""

import json
import sys
from pathlib import Path

import pytest
from helpers import presk, tutorial_run
from presk_cli.metrics import MetricsError, MetricsWriter, read_metrics


@pytest.fixture
def run(tmp_path) -> Path:
    return tutorial_run(tmp_path)


@pytest.mark.parametrize("backend", ["interp", "native"])
def test_the_metrics_are_the_log_lines_numbers_a_line_a_step(run, backend):
    r = presk("train", "07_train.psk", "--steps", "12", "--log-every", "4", "--ckpt", "c",
              "--metrics", "m.jsonl", "--backend", backend, cwd=run)  # fmt: skip
    assert r.returncode == 0, r.stderr
    head, rows = read_metrics(str(run / "m.jsonl"))
    assert head["backend"] == backend and head["model"] == "Tower" and head["horizon"] == 12
    assert head["layout"][0] == ["blocks.norm.γ", [3, 4]] and head["seed"] == 0
    assert [row["step"] for row in rows] == list(range(1, 13))
    assert set(rows[0]) == {"step", "epoch", "loss", "lr", "grad_norm", "seconds"}
    logged = [line for line in r.stdout.splitlines() if line.startswith("step ")]
    from presk_cli.train import step_line

    assert logged == [  # the log's numbers, from the metrics' own
        step_line(row["step"], row["epoch"] - 1, row["loss"], row["lr"], row["grad_norm"])
        for row in rows
        if row["step"] % 4 == 0
    ]
    assert [row["lr"] for row in rows] == pytest.approx(
        [0.01 * t / 20 for t in range(1, 13)]
    )  # warm-up
    assert all(row["seconds"] >= 0 for row in rows)


def test_without_metrics_the_log_is_as_before(run):
    a = presk("train", "07_train.psk", "--steps", "6", "--log-every", "2", "--ckpt", "a", cwd=run)
    b = presk("train", "07_train.psk", "--steps", "6", "--log-every", "2", "--ckpt", "b",
              "--metrics", "m.jsonl", cwd=run)  # fmt: skip
    lines = [line for line in a.stdout.splitlines() if "ms a step" not in line]
    assert lines == [
        line.replace("b/final", "a/final")
        for line in b.stdout.splitlines()
        if "ms a step" not in line
    ]


def test_the_plot_and_its_comparison_are_pngs(run):
    pytest.importorskip("matplotlib")
    r = presk("train", "07_train.psk", "--steps", "20", "--log-every", "0", "--ckpt", "a",
              "--metrics", "a.jsonl", cwd=run)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = presk("train", "07_train.psk", "--steps", "20", "--log-every", "0", "--ckpt", "b",
              "--backend", "native", "--realize", "bf16", "--plot", "b.png", "--compare",
              "a.jsonl", cwd=run)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "presk train: the loss and |g| plotted in b.png"
    png = (run / "b.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # two panels of curves
    import matplotlib.image

    image = matplotlib.image.imread(str(run / "b.png"))
    assert image.shape[0] > 400 and image.shape[1] > 600
    colours = {tuple(px[:3]) for px in image.reshape(-1, image.shape[2])[::7]}
    assert len(colours) > 50  # lines drawn, not a blank canvas


def test_plot_without_matplotlib_is_E7073_before_the_run(run, monkeypatch, capsys):
    from presk_cli.main import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    monkeypatch.chdir(run)
    with pytest.raises(SystemExit) as stop:  # a command's exit, as the console script's
        main(["train", "07_train.psk", "--steps", "2", "--ckpt", "c", "--plot", "p.png"])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and err.startswith("[E7073] Error: --plot needs matplotlib"), err
    assert not (run / "c").exists()  # refused before the run


def test_compare_with_a_file_that_is_not_metrics_is_E7074(run):
    (run / "other.jsonl").write_text('{"step": 1}\n')
    r = presk("train", "07_train.psk", "--steps", "2", "--plot", "p.png", "--compare",
              "other.jsonl", cwd=run)  # fmt: skip
    assert r.returncode == 1 and r.stderr.startswith(
        "[E7074] Error: `other.jsonl` is not the metrics of a run (its first line has no settings)"
    ), r.stderr
    r = presk("train", "07_train.psk", "--steps", "2", "--compare", "other.jsonl", cwd=run)
    assert r.returncode == 2 and "--plot" in r.stderr


def test_a_reader_leaves_out_a_line_being_written(tmp_path):
    w = MetricsWriter(str(tmp_path / "m.jsonl"), {"model": "M"})
    w.step(1, 0, 0.5, 1e-3, 2.0, 0.01)
    w.close()
    with open(tmp_path / "m.jsonl", "a") as f:
        f.write('{"step": 2, "epo')  # cut in its write
    head, rows = read_metrics(str(tmp_path / "m.jsonl"))
    assert head["model"] == "M" and [r["step"] for r in rows] == [1]
    (tmp_path / "bad.jsonl").write_text(json.dumps(head) + "\nnot json\n")
    with pytest.raises(MetricsError, match=r"bad.jsonl`:2 is not a JSON object"):
        read_metrics(str(tmp_path / "bad.jsonl"))
