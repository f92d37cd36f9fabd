"""`presk explain` (issue 25, L517–L540): the document's headings and summary line as the
specification prints them, each section's command printing what the section shows, a
stage that cannot run said in a sentence, the network diagram and its outline, and bad
input refused with nothing written."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRESK = [sys.executable, "-m", "presk_cli.main"]
HEADINGS = """## The parameters
## 0 Summary
## 1 The source
## 2 Elaboration
## 3 PSK-Core
## 4 Differentiation
## 5 The e-graph optimizer
## 6 Precision: from a budget to a type per site
## 7 Fusion
## 8 The machine and the layout plan
## 9 The kernels and the host
## 10 Targets
## 11 Measured
## 12 Sites through every stage
## Appendix: the commands
""".splitlines()


def presk(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PRESK, *map(str, args)], capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="module")
def grad(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("explain") / "tutorial_explain"
    done = presk("explain", "tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3",
                 "--dim", "B=2", "--out", out)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"presk explain: wrote {out}/explain.md (14 sections, 1 listing under listings/,"
        " 1 artifact)\n"
    )
    return out


def test_the_headings_in_the_specifications_order(grad):
    text = (grad / "explain.md").read_text(encoding="utf-8")
    assert [line for line in text.splitlines() if line.startswith("## ")] == HEADINGS
    assert "This stage cannot run" not in text  # every stage runs for this entry
    assert str(grad.parent) not in text.replace(str(grad), "DIR")  # no temporary folder named


def test_each_listing_is_its_commands_output(grad):
    """The section's listing is what its command prints (a stage whose output does not
    depend on the machine): run again, compared byte for byte."""
    text = (grad / "explain.md").read_text(encoding="utf-8")
    for stage in ("sched", "kernel", "elab"):
        m = re.search(
            rf"```sh\n(presk dump [^\n]*--stage {stage})\n```\n\n```text\n(.*?)\n```", text, re.S
        )
        assert m is not None, stage
        argv = m.group(1).split()[1:]
        assert presk(*argv).stdout.rstrip("\n") == m.group(2), stage


def test_the_long_listing_and_the_appendix(grad):
    text = (grad / "explain.md").read_text(encoding="utf-8")
    (listing,) = (grad / "listings").iterdir()
    assert listing.name == "c.txt" and "[listings/c.txt](listings/c.txt)" in text
    assert listing.read_text() == presk("dump", "tutorial/04_grad.psk", "--entry", "loss_grad",
                                        "--dim", "D=3", "--dim", "B=2", "--stage", "c").stdout  # fmt: skip
    appendix = text.split("## Appendix: the commands", 1)[1]
    commands = re.findall(r"^presk .*$", appendix, re.M)
    assert len(commands) == len(re.findall(r"^```sh\npresk ", text.split("## Appendix")[0], re.M))


def test_the_summary_reads_its_sections(grad):
    text = (grad / "explain.md").read_text(encoding="utf-8")
    summary = text.split("## 0 Summary", 1)[1].split("## 1 ", 1)[0]
    sched = presk("dump", "tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3",
                  "--dim", "B=2", "--stage", "sched").stdout  # fmt: skip
    launches = re.search(r"^-- entry .*?: (.*)$", sched, re.M).group(1)
    assert f"| fusion | {launches} (§7) |" in summary
    assert "| PSK-Core | 4 functions reached (§3) |" in summary
    assert re.search(r"\| precision \| bound \S+ \(cond, §6\) \|", summary)


def test_the_sites_table_names_a_kernel_for_each_computed_site(grad):
    text = (grad / "explain.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([^`]+)` \| .* \| (k\d+|—) \|$", text, re.M)
    assert ("Linear.apply/%3", "k0") in rows  # x · w, the first kernel
    assert any(site.startswith("loss.bwd/") and k != "—" for site, k in rows)
    assert "01_linear.psk:7:5 `x · w`" in text


def test_the_network_diagram(grad):
    svg = ET.parse(grad / "network.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    boxes = svg.findall(f"{ns}g")
    arrows = svg.findall(f"{ns}path")
    assert len(arrows) == len(boxes) - 1  # a tree: every call but the entry's has a caller
    first = [t.text for t in boxes[0].findall(f"{ns}text")]
    assert first[0] == "loss_grad{D=3,B=2}"
    outline = presk("dump", "tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3",
                    "--dim", "B=2", "--stage", "network").stdout.splitlines()  # fmt: skip
    assert len(outline) == len(boxes)
    assert outline[0].startswith("loss_grad{D=3,B=2}  (0 kernels, ")


def test_a_budget_solves_a_realization_and_bounds_it(tmp_path):
    out = tmp_path / "e"
    done = presk("explain", "tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3",
                 "--dim", "B=2", "--out", out, "--budget", "1e-6")  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (out / "explain.md").read_text(encoding="utf-8")
    assert f"--realize @{out}/realization.json" in text and (out / "realization.json").exists()
    assert "inside the budget" in text


def test_a_stage_that_cannot_run_says_why(tmp_path):
    """A section's command that fails leaves the section a sentence with its diagnostic."""
    from presk_cli.explain import Document

    doc = Document(str(tmp_path), "DIR")
    code, text = doc.listing(["dump", "missing.psk", "--stage", "core"], "core")
    assert code == 1
    assert text == (
        "```sh\npresk dump missing.psk --stage core\n```\n\nThis stage cannot run for this"
        " entry: `[E0001] Error: cannot read `missing.psk`: no such file or directory`."
    )
    assert doc.commands == ["presk dump missing.psk --stage core"]


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["tutorial/04_grad.psk", "--entry", "nope", "--out", "{out}"], 2, "no function `nope`"),
        (["missing.psk", "--entry", "f", "--out", "{out}"], 1, "[E0001]"),
        (
            [
                "tutorial/04_grad.psk",
                "--entry",
                "loss_grad",
                "--dim",
                "D=3",
                "--dim",
                "B=2",
                "--out",
                "{out}",
                "--budget",
                "0",
            ],
            2,
            "--budget",
        ),  # fmt: skip
        (["tutorial/04_grad.psk", "--entry", "loss_grad", "--out", "{out}"], 1, "[E7001]"),
    ],
)
def test_bad_input_writes_nothing(tmp_path, args, code, words):
    out = tmp_path / "e"
    done = presk("explain", *[a.replace("{out}", str(out)) for a in args])
    assert done.returncode == code and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not out.exists()
    assert not list(tmp_path.glob(".psk-*"))


def test_a_profile_plans_section_8_and_times_the_plan(tmp_path):
    profile = tmp_path / "layout.json"
    made = presk("bench", "experiments/gemm.psk", "--entry", "gemm", "--dim", "N=32", "--realize",
                 "f32", "--calibrate", profile, "--space", "calib", "--repeat", "3")  # fmt: skip
    assert made.returncode == 0, made.stderr
    out = tmp_path / "e"
    done = presk("explain", "tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=2",
                 "--dim", "T=16", "--out", out, "--profile", profile)  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (out / "explain.md").read_text(encoding="utf-8")
    section = text.split("## 8 ", 1)[1].split("## 9 ", 1)[0]
    assert (
        f"presk plan tutorial/03_attention.psk --entry attend --dim B=2 --dim T=16 --profile {profile} --out {out}/plan.json"
        in section
    )
    assert re.search(r"^-- \d+ nests, \d+ points costed in ", section, re.M)
    assert (out / "plan.json").exists()
    measured = text.split("## 11 ", 1)[1].split("## 12 ", 1)[0]
    assert f"--plan @{out}/plan.json" in measured and "native f64 --plan" in measured
