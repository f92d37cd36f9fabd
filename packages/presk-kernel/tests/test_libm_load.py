"""The kernel interpreter's presk libm is a value loaded through presk_core.cc, with no
stand-in: where it cannot be loaded, a kernel with a transcendental fails with the
diagnostic (E9001 without a compiler, E9006/E9007 for a cache that cannot be used), and
never computes numpy's bits instead."""

import numpy as np
import pytest
from presk_kernel import libm
from presk_kernel.interp import presk_libm, run_kernel
from presk_kernel.ir import Affine, Axis, Buffer, Kernel, Load, Loop, Op, Store
from presk_syntax.diagnostics import DiagnosticError


def _exp_kernel(n: int = 5) -> Kernel:
    i = Affine.var("i0")
    body = (Loop("i0", None, n, (Store(1, (i,), Op("exp", (Load(0, (i,)),))),)),)
    vec = (Axis(None, n),)
    return Kernel("exp", "f/%1", (Buffer(0, "f64", vec),), (Buffer(1, "f64", vec),), body)


@pytest.fixture
def unloaded(monkeypatch):
    monkeypatch.setattr(libm, "_LOADED", {})


def test_the_interpreter_is_given_presk_libm():
    m = presk_libm()
    assert isinstance(m, libm.Libm)
    x = np.linspace(-3, 3, 5)
    out = np.zeros(5)
    run_kernel(_exp_kernel(), [x, out])
    assert out.tobytes() == m.apply("exp", x).tobytes()


def test_no_compiler_is_e9001_not_numpys_exp(unloaded, monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/presk-cc")
    with pytest.raises(DiagnosticError) as e:
        run_kernel(_exp_kernel(), [np.zeros(5), np.zeros(5)])
    assert e.value.diagnostics[0].code == "E9001"


@pytest.mark.parametrize("kind", ["file", "dangling"])
def test_a_cache_that_cannot_be_used_is_its_diagnostic(unloaded, monkeypatch, tmp_path, kind):
    path = tmp_path / "cache"
    if kind == "file":
        path.write_text("")
    else:
        path.symlink_to(tmp_path / "gone")
    monkeypatch.setenv("PRESK_CACHE", str(path))
    monkeypatch.setattr("presk_core.cc.load._loaded", {})
    with pytest.raises(DiagnosticError) as e:
        run_kernel(_exp_kernel(), [np.zeros(5), np.zeros(5)])
    assert e.value.diagnostics[0].code == {"file": "E9006", "dangling": "E9007"}[kind]
