"""`presk run --backend native|kernel` against the reference interpreter on every entry
`tests/run` runs and the tutorial's: f64 and f32 within the tolerance docs/native.md derives
from the entry's sizes ("Running natively"), the kernel interpreter and the compiled
kernels bit for bit, lanes on and off and one or two threads bit for bit, the result printed
by the interpreter's printer, and the diagnostics of what the kernels cannot run."""

import functools
import json

import numpy as np
import pytest
from helpers import close, presk, reference
from helpers import core_of as core
from helpers import json_leaves as leaves
from kernel_entries import CASE_IDS as IDS
from kernel_entries import CASES
from presk_cli.native import NativeError, entry_inputs, executor, lower, run_text, storage
from presk_core.run import parse_entry
from presk_kernel.ir import Loop, Reduce, plain
from presk_kernel.lower import argument_leaves

UNIT = {"f64": 2.0**-53, "f32": 2.0**-24}


@functools.cache
def kernels(case, backend: str, realize: str) -> list[np.ndarray]:
    file, entry, dims, consts = case
    options = (backend, realize, 1)
    text = run_text(core(file, consts), entry, dict(dims), 0, 256, 12, False, True, None, options)
    return leaves(json.loads(text)["result"])


@functools.cache
def sizes(case) -> tuple[int, int]:
    """(the schedule's launches, its longest fold): what the tolerance is made of."""
    file, entry, dims, consts = case
    c = core(file, consts)
    e = parse_entry(entry, c, None, dict(dims))
    args = [v for _, _, v in entry_inputs(c, e, 0, 53)]
    s = lower(c, e.function.name, dict(e.dims) | dict(e.prefix), args, "f64")
    longest = 1

    def walk(body):
        nonlocal longest
        for st in body:
            if isinstance(st, Reduce):
                n = 1
                for v in st.vars:
                    n *= v[2]
                longest = max(longest, n)
                walk(st.body)
            elif isinstance(st, Loop):
                walk(st.body)

    for launch in s.launches:
        walk(plain(launch.kernel.body))  # laid out: the nest it lays out
    return len(s.launches), longest


def tolerance(case, realize: str) -> float:
    """docs/native.md: launches × longest fold × the unit roundoff, relative to the largest
    magnitude of each output."""
    launches, longest = sizes(case)
    return launches * longest * UNIT[realize]


@pytest.mark.parametrize("realize", ["f64", "f32"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_native_is_the_interpreter_within_the_tolerance(compiler, case, realize):
    got, want = kernels(case, "native", realize), reference(case)
    assert close(got, want, tolerance(case, realize))


def test_the_tolerance_can_fail(compiler):
    # f32's outputs are outside f64's tolerance: the comparison sees a change of type
    case = CASES[6]
    assert not close(kernels(case, "native", "f32"), reference(case), tolerance(case, "f64"))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_kernel_interpreter_gives_the_native_bits(compiler, case):
    native, kernel = kernels(case, "native", "f64"), kernels(case, "kernel", "f64")
    assert [x.tobytes() for x in native] == [x.tobytes() for x in kernel]


def test_bf16_runs_and_rounds(compiler):
    case = CASES[2]
    got, want = kernels(case, "native", "bf16"), reference(case)
    assert close(got, want, 2.0**-6) and not close(got, want, 2.0**-20)
    as_bf16 = [x.astype(np.float32).view(np.uint32) & 0xFFFF for x in got]
    assert all(not np.any(x) for x in as_bf16)  # every output a bf16


BIG = [  # launches of at least 2**15 elements: split among threads; a contraction packed
    ("tutorial/01_linear.psk", "Linear{64, 64}.apply", {"batch": 600}),
    ("tutorial/02_norm.psk", "RMSNorm{64}.apply", {"batch": 600}),
]


@pytest.mark.parametrize("realize", ["f64", "f32"])
@pytest.mark.parametrize("big", BIG, ids=lambda b: b[1])
def test_lanes_and_threads_change_no_bit(compiler, big, realize):
    file, entry, dims = big
    c = core(file, ())
    e = parse_entry(entry, c, None, dims)
    args = [v for _, _, v in entry_inputs(c, e, 0, 53)]
    runs = []
    for threads in (1, 2):
        s = lower(c, e.function.name, dict(e.dims) | dict(e.prefix), args, realize, threads)
        split = [lc.kernel.layout.threads for lc in s.launches if lc.kernel.layout.split]
        assert split == ([] if threads == 1 else [2] * len(split)) and (threads == 1 or split)
        inputs = storage(s, argument_leaves(args))
        for lanes in (False, True):
            runs.append([x.tobytes() for x in executor(s, "native", lanes)(inputs)])
        runs.append([x.tobytes() for x in executor(s, "kernel")(inputs)])  # laid out alike
    assert all(run == runs[0] for run in runs) and len(runs) == 6


# ---- through the command ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("tutorial/04_grad.psk", "--entry", "loss_grad", "--dim", "D=3", "--dim", "B=2"),
        ("tutorial/06_tower.psk", "--entry", "Tower.apply", "--dim", "batch=2", "--digits", "6"),
    ],
)
def test_the_result_is_printed_as_the_interpreter_prints_it(compiler, args):
    interp = presk("run", *args)
    native = presk("run", *args, "--backend", "native")
    assert native.returncode == 0, native.stderr
    assert native.stdout == interp.stdout and native.stderr == ""


def test_data_feeds_the_last_argument(compiler):
    args = ("tutorial/07_train.psk", "--entry", "loss", "--data", "tutorial/data/pairs.psk.d")
    interp, native = (
        presk("run", *args, "--digits", "9"),
        presk("run", *args, "--digits", "9", "--backend", "native"),
    )
    assert native.returncode == 0, native.stderr
    assert native.stdout == interp.stdout


def test_an_entry_that_draws_prints_the_interpreters_digits():
    """Issue 29: `sample` is a kernel; tutorial step 5's `pick` draws the same tokens."""
    for seed in ("0", "3"):
        args = ("run", "tutorial/05_sample.psk", "--entry", "pick", "--dim", "B=5", "--seed", seed)
        want = presk(*args)
        got = presk(*args, "--backend", "native")
        assert (got.returncode, got.stdout, got.stderr) == (0, want.stdout, "")


def test_an_initializer_that_draws_prints_the_interpreters_digits():
    """Issue 29: xavier_uniform lowered (it was E7002): Linear's init natively is the
    interpreter's, digit for digit."""
    args = ("run", "tutorial/01_linear.psk", "--entry", "Linear{3, 2}.init", "--seed", "5")
    want = presk(*args)
    got = presk(*args, "--backend", "native")
    assert (got.returncode, got.stdout, got.stderr) == (0, want.stdout, "")
    assert want.returncode == 0 and "w = " in want.stdout


def test_no_compiler_is_e9001(tmp_path):
    r = presk(
        "run", "tutorial/04_grad.psk", "--entry", "loss", "--dim", "D=3", "--dim", "B=2",
        "--backend", "native", env={"CC": str(tmp_path / "no-cc"), "PRESK_CACHE": str(tmp_path)},
    )  # fmt: skip
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr.startswith("[E9001] Error: no C compiler for the native backend: ")
    assert "Help: install a C compiler" in r.stderr and "Traceback" not in r.stderr


def test_an_unknown_backend_is_a_usage_error():
    r = presk("run", "tutorial/04_grad.psk", "--entry", "loss", "--backend", "gpu")
    assert r.returncode == 2 and "--backend" in r.stderr


@pytest.mark.parametrize("backend", ["kernel", "native"])
def test_a_gather_out_of_range_is_e7003(compiler, backend):
    file, entry, dims, consts = CASES[9]  # MiniGPT.apply: an embedding reads token ids
    c = core(file, consts)
    e = parse_entry(entry, c, None, dict(dims))
    args = [v for _, _, v in entry_inputs(c, e, 0, 53)]
    s = lower(c, e.function.name, dict(e.dims) | dict(e.prefix), args, "f64")
    inputs = storage(s, argument_leaves(args))
    ids = [i for i, b in enumerate(s.inputs) if s.buffers[b].dtype == "i64"]
    assert ids
    inputs[ids[0]] = np.full_like(inputs[ids[0]], 64)  # V = 64: one past the last token
    with pytest.raises(NativeError) as err:
        executor(s, backend)(inputs)
    assert err.value.code == "E7003"
