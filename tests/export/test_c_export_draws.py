"""`presk export --target c` of entries that draw (issue 24): a key is an input leaf of
`inputs.psk.d` (its two words, `idx[4294967296][2]`) and may be an output; split_key,
bernoulli, normal (MPFR linked), uniform and sample give `presk run --backend native`'s
bits; a fold by name (a module's init) and a drawing initializer export. One build (gcc)."""

from __future__ import annotations

import json
import subprocess

import numpy as np
from helpers import presk_ok
from presk_core import data as D

KEYED = "tests/export/programs/keyed.psk"
DIMS = ("--dim", "B=3", "--dim", "D=5")


def test_a_keyed_entry_gives_the_native_backend_s_bits(tmp_path):
    out = tmp_path / "c"
    done = presk_ok("export", KEYED, "--target", "c", "--entry", "noisy", *DIMS, "-o", out)
    assert done.stdout.startswith("presk export: `noisy` at B = 3, D = 5 in f64: ")
    makefile = (out / "Makefile").read_text()
    assert "MPFR_LIBS = " in makefile  # the normal draws link MPFR
    check = subprocess.run(["make", "-s", "-C", str(out), "check", "CC=gcc"],
                           capture_output=True, text=True)  # fmt: skip
    assert check.stdout == "C1 holds: the outputs are the native backend's, bit for bit\n", (
        check.stdout + check.stderr
    )
    run = json.loads(presk_ok("run", KEYED, "--entry", "noisy", *DIMS, "--backend", "native",
                              "--json").stdout)  # fmt: skip
    path = str(out / "conformance" / "inputs.psk.d")
    head = D.read_header(path)
    assert head.type_text == "(idx[4294967296][2], ℝ[3, 5])"
    ((key, x),) = D.read(path, D.type_of(head.type_text))
    assert [int(w) for w in key] == run["inputs"]["key"]
    assert (
        np.asarray(x).tobytes()
        == np.array(run["inputs"]["x"], dtype=object).astype(float).tobytes()
    )
    result = str(out / "out.psk.d")
    ((y, tokens, k3),) = D.read(result, D.type_of(D.read_header(result).type_text))
    want_y, want_tokens, want_key = run["result"]
    assert np.asarray(y).tobytes() == np.array(want_y, dtype=object).astype(float).tobytes()
    assert np.asarray(tokens).tolist() == want_tokens
    assert [int(w) for w in k3] == want_key


def test_a_fold_by_name_and_a_drawing_initializer_export(tmp_path):
    """Z.init folds its key by each parameter's name (the fills need no draw); Linear.init
    draws xavier_uniform through the MPFR the Makefile links (issue 29's kernels). Both
    exported, built by the suite's other builds' code."""
    presk_ok("export", KEYED, "--target", "c", "--entry", "Z.init", *DIMS, "-o", tmp_path / "z")
    assert "fold" in (tmp_path / "z" / "kernels.c").read_text()
    presk_ok("export", "tutorial/01_linear.psk", "--target", "c", "--entry",
             "Linear{3, 2}.init", "-o", tmp_path / "x")  # fmt: skip
    assert "presk_xavier_at(" in (tmp_path / "x" / "kernels.c").read_text()
    assert "gmpy2.libs" in (tmp_path / "x" / "Makefile").read_text()  # MPFR linked
