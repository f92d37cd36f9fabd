"""`presk export --target c --mode scop` (issue 24, step 18, L1223–L1259): each nest at point
zero as a static-control part, the summary line as the specification prints it, every nest
compared bit for bit with the native backend by the folder's own `make check` (gcc, and
clang where present), Polly finding a SCoP in each static nest, a gather said to be none,
and the mode's usage errors."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRESK = [sys.executable, "-m", "presk_cli.main"]
CLANG = shutil.which("clang-16") or shutil.which("clang")


def presk(*args) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PRESK, *map(str, args)], capture_output=True, text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def attention(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scop") / "tut_scop"
    done = presk("export", "tutorial/03_attention.psk", "--target", "c", "--mode", "scop",
                 "--entry", "attend", "--dim", "B=16", "--dim", "T=256", "--realize", "f32",
                 "-o", out)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "presk export: `attend` at B = 16, T = 256 in f32: 4 nests at 4 shapes at point zero,"
        " a C function each, 4 of them static-control parts and 0 not (`nests.json` says why),"
        f" into {out}; `make -C {out} check` builds them and compares each with the native"
        " backend\n"
    )
    return out


@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_every_nest_computes_the_native_bits(attention, cc):
    compiler = shutil.which(cc) or (CLANG if cc == "clang" else None)
    if compiler is None:
        pytest.skip(f"no {cc}")
    subprocess.run(["make", "-s", "-C", attention, "clean"], check=True)
    done = subprocess.run(["make", "-s", "-C", attention, "check", f"CC={compiler}"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "the 4 nests compute the native backend's bits\n"


def test_the_nests_form(attention):
    doc = json.loads((attention / "nests.json").read_text())
    assert [n["site"] for n in doc["nests"]] == [
        "scores/%2", "attend/%4", "attend/%5", "attend/%6",
    ]  # fmt: skip
    softmax = (attention / "nests" / "attend_5.c").read_text()
    head = re.search(r"^void attend_5\((.*)\) \{$", softmax, re.M).group(1)
    assert head.startswith("const float in0[restrict 16][2][256][256], ")
    assert head.endswith("float out[restrict 16][2][256][256]")
    region = softmax.split("#pragma scop\n", 1)[1].split("#pragma endscop", 1)[0]
    assert "int64_t" not in region and "float " not in region  # nothing declared inside
    assert "for (v_i0 = 0; v_i0 < 16; v_i0++) {" in region
    # every access affine in the iterators: subscripts of iterators and integers alone
    for sub in re.findall(r"\[([^\[\]]*)\]", region):
        assert re.fullmatch(r"[v_i0-9*+ ]+", sub), sub


@pytest.mark.skipif(CLANG is None, reason="no clang with Polly (clang-16, libpolly-16-dev)")
def test_polly_finds_a_scop_in_each_nest(attention):
    done = subprocess.run(["make", "-s", "-C", attention, "polly", f"POLLY={CLANG}"],
                          capture_output=True, text=True)  # fmt: skip
    if "Unknown command line argument" in done.stdout + done.stderr:
        pytest.skip("this clang has no Polly")
    files = re.findall(r"^== (\S+)$", done.stdout, re.M)
    assert len(files) == 4
    for f in files:
        assert f"{f}:" in done.stdout and "SCoP begins here" in done.stdout, f


def test_a_gather_is_not_static_control(tmp_path):
    out = tmp_path / "mg"
    done = presk("export", "tests/examples/minigpt/minigpt.psk", "--target", "c", "--mode",
                 "scop", "--entry", "MiniGPT.apply", "--const", "V=64", "--const", "D=16",
                 "--const", "H=2", "--const", "L=2", "--dim", "T=8", "--dim", "B=2",
                 "-o", out)  # fmt: skip
    assert done.returncode == 0, done.stderr
    m = re.search(r"(\d+) of them static-control parts and (\d+) not", done.stdout)
    assert m and int(m.group(2)) >= 1
    doc = json.loads((out / "nests.json").read_text())
    gathers = [n for n in doc["nests"] if not n["static_control"]]
    assert all("gather" in n["why_not"] for n in gathers)
    assert all("#pragma scop" not in (out / n["file"]).read_text() for n in gathers)
    check = subprocess.run(["make", "-s", "-C", out, "check"], capture_output=True, text=True)
    assert check.returncode == 0 and "compute the native backend's bits" in check.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["--target", "pytorch", "--mode", "scop", "-o", "{o}"], "--mode scop is for --target c"),
        (
            ["--target", "c", "--mode", "readable", "--entry", "attend", "-o", "{o}"],
            "--mode readable is for --target pytorch",
        ),  # fmt: skip
        (
            ["--target", "c", "--mode", "scop", "--entry", "attend", "--threads", "2", "-o", "{o}"],
            "on one thread",
        ),  # fmt: skip
    ],
)
def test_usage(tmp_path, args, words):
    out = tmp_path / "o"
    done = presk("export", "tutorial/03_attention.psk", *[a.replace("{o}", str(out)) for a in args])
    assert done.returncode == 2 and words in done.stderr and not out.exists()
