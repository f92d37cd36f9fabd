"""The Python API (`import presk`, issue 28): an entry called on numpy arrays gives the bits
`presk run --backend native` prints for the same inputs; each shape is compiled once; an
argument that does not fit is a PreskError with the code `presk run` gives for data that do
not fit (E7001) and for weights that do not (E7060); `.psk.d` files read and written as
numpy; a run trained from Python logs what `presk train` logs."""

import json
import re

import numpy as np
import presk
import pytest
from click.testing import CliRunner
from helpers import ROOT, json_leaves

TRAIN = str(ROOT / "tutorial" / "07_train.psk")
GRAD = str(ROOT / "tutorial" / "04_grad.psk")


def cli(*args):
    """`presk ARGS`, in this process: (exit code, stdout, stderr)."""
    from presk_cli.main import cli as group

    done = CliRunner().invoke(group, [str(a) for a in args], env={"NO_COLOR": "1"})
    return done.exit_code, done.stdout, done.stderr


def doubles(doc, t):
    """A JSON value of `presk run --json` of type `t` as the API takes it: reals as float64
    arrays (the doubles the kernels read), trees as dicts of dotted paths, tuples as tuples."""
    from presk_types.types import ParamsT, TupleT

    match t:
        case ParamsT():
            return {k: json_leaves(v)[0] for k, v in doc.items()}
        case TupleT(elements):
            return tuple(doubles(v, e) for v, e in zip(doc, elements, strict=True))
    return json_leaves(doc)[0]


def leaves_of(value) -> list:
    """A result's arrays in order: a tree's leaves in its layout's order."""
    from presk_cli.arguments import flat

    return list(flat(value).values()) if isinstance(value, dict) else [value]


def bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).view(np.uint64)


@pytest.mark.parametrize(
    "file, entry, dims, realize, model",
    [
        (TRAIN, "loss", {"B": 4}, "f64", "Tower"),
        (TRAIN, "loss", {"B": 3}, "f32", "Tower"),
        (GRAD, "loss_grad", {"D": 3, "B": 5}, "f64", "Linear{3, 1}"),
    ],
)
def test_an_entry_gives_the_bits_of_presk_run_native(file, entry, dims, realize, model) -> None:
    flags = [f for d, v in dims.items() for f in ("--dim", f"{d}={v}")]
    code, out, err = cli("run", file, "--entry", entry, *flags, "--backend", "native",
                         "--realize", realize, "--json")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    f = presk.load(file).entry(entry, backend="native", realize=realize)
    types = {p.name: p.type for p in f.function.params}
    inputs = {k: doubles(v, types[k]) for k, v in doc["inputs"].items()}
    got = f(**inputs)  # the dimensions solved from the arrays' shapes
    want = json_leaves(doc["result"])
    assert len(leaves_of(got)) == len(want)
    for a, b in zip(leaves_of(got), want, strict=True):
        assert np.array_equal(bits(a), bits(b))
    # the inputs `presk run` draws, drawn from Python: the same call, the same bits
    again = f(**f.inputs(seed=0, dims=dims))
    for a, b in zip(leaves_of(again), want, strict=True):
        assert np.array_equal(bits(a), bits(b))
    # θ₀ drawn as `presk run --seed 0` draws the argument θ
    theta = presk.load(file).init(model, seed=0)
    from presk_cli.arguments import flat

    assert list(flat(theta)) == list(inputs["θ"])
    for k, v in flat(theta).items():
        assert np.array_equal(bits(v), bits(inputs["θ"][k])), k


def test_the_kernel_interpreter_and_the_reference_agree_with_native() -> None:
    program = presk.load(TRAIN)
    theta = program.init("Tower", seed=1)
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    native = program.entry("loss")(theta, (x, 2 * x + 1))
    kernel = program.entry("loss", backend="kernel")(theta, (x, 2 * x + 1))
    exact = program.entry("loss", backend="interp")(theta, (x, 2 * x + 1))
    assert np.array_equal(bits(native), bits(kernel))  # the laid-out kernels, the same bits
    assert native.shape == () and abs(float(native) - float(exact)) < 1e-12 * float(exact)


def test_each_shape_is_compiled_once() -> None:
    program = presk.load(TRAIN)
    f = program.entry("loss")
    theta = program.init("Tower")
    x = np.ones((4, 4))
    first = f(theta, (x, x))
    assert f.compilations == 1
    assert np.array_equal(bits(f(theta, (x, x))), bits(first)) and f.compilations == 1
    f(theta, (np.ones((2, 4)), np.ones((2, 4))))  # B = 2: another shape
    assert f.compilations == 2
    f(theta, (x, 0 * x))
    assert f.compilations == 2
    # an entry with an open prefix `...`: its axes are a shape too
    apply = program.entry("Tower.apply")
    assert apply(theta, np.ones((2, 3, 4))).shape == (2, 3, 4)
    assert apply(theta, np.ones((5, 4))).shape == (5, 4) and apply.compilations == 2


def test_a_shape_that_does_not_fit_has_presk_runs_code(tmp_path) -> None:
    program = presk.load(TRAIN)
    f = program.entry("loss")
    theta = program.init("Tower")
    # presk run --data with samples of another shape: E7001
    bad = tmp_path / "three.psk.d"
    presk.write_data(bad, (np.ones((4, 3)), np.ones((4, 3))), type="(ℝ[model: 3], ℝ[model: 3])")
    code, _, err = cli("run", TRAIN, "--entry", "loss", "--data", bad)
    assert code == 1 and err.startswith("[E7001] Error:"), err
    with pytest.raises(presk.PreskError) as e:
        f(theta, (np.ones((4, 3)), np.ones((4, 3))))
    assert e.value.code == "E7001" and "`ℝ[batch: B, model: 4]` has 4" in e.value.message
    with pytest.raises(presk.PreskError) as e:
        f(theta, (np.ones((4, 4)), np.ones((5, 4))))  # B = 4 from x, 5 from y
    assert e.value.code == "E7001" and str(e.value).startswith("[E7001] Error: `batch.1`")
    with pytest.raises(presk.PreskError) as e:
        program.entry("loss", dims={"B": 8})(theta, (np.ones((4, 4)), np.ones((4, 4))))
    assert e.value.code == "E7001" and "at B = 8" in e.value.message
    # presk run --weights with a tree of other shapes: E7060
    small = presk.load(ROOT / "tutorial" / "06_tower.psk", const={"D": 3})
    ckpt = tmp_path / "small.psk.d"
    presk.write_data(ckpt, small.init("Tower"), model="Tower")
    code, _, err = cli("run", TRAIN, "--entry", "loss", "--dim", "B=4", "--weights", ckpt)
    assert code == 1 and err.startswith("[E7060] Error:"), err
    with pytest.raises(presk.PreskError) as e:
        f(presk.read_data(ckpt), (np.ones((4, 4)), np.ones((4, 4))))
    assert e.value.code == "E7060" and "blocks.norm.γ" in e.value.message
    with pytest.raises(presk.PreskError) as e:
        f({"final": theta["final"]}, (np.ones((4, 4)), np.ones((4, 4))))
    assert e.value.code == "E7060" and "no leaf `blocks.norm.γ`" in e.value.message


@pytest.mark.parametrize(
    "call, code",
    [
        (lambda p: p.entry("loss", backend="gpu"), "E7080"),
        (lambda p: p.entry("loss", backend="interp", realize="f32"), "E7080"),
        (lambda p: p.entry("loss", threads=0), "E7080"),
        (lambda p: p.entry("los"), "E7001"),
        (lambda p: p.entry("loss", dims={"b": 4}), "E7001"),
        (lambda p: p.entry("loss")(p.init("Tower")), "E7001"),
        (lambda p: p.entry("loss")(p.init("Tower"), (np.ones((2, 4)), "x")), "E7001"),
        (lambda p: p.init("Nothing"), "E7001"),
        (lambda p: p.train(steps=0), "E7080"),
        (lambda p: presk.load(GRAD).train(steps=1), "E7081"),
        (lambda p: presk.load(TRAIN, const={"D": "x"}), "E7080"),
        (lambda p: presk.load(ROOT / "tutorial" / "missing.psk"), None),
    ],
)
def test_bad_calls_are_diagnostics(call, code) -> None:
    with pytest.raises(presk.PreskError) as e:
        call(presk.load(TRAIN))
    assert re.fullmatch(r"E\d{4}", e.value.code)
    assert code is None or e.value.code == code
    assert e.value.message.startswith(f"[{e.value.code}] Error: ")


def test_a_presk_error_pickles_with_its_rendered_text() -> None:
    import pickle

    with pytest.raises(presk.PreskError) as e:
        presk.load(TRAIN, const={"D": 3})  # E2006, with the source lines of the file
    again = pickle.loads(pickle.dumps(e.value))
    assert (again.code, again.message, str(again)) == (e.value.code, e.value.message, str(e.value))
    assert "07_train.psk:7:26" in again.message


def test_data_files_as_numpy(tmp_path) -> None:
    pairs = ROOT / "tutorial" / "data" / "pairs.psk.d"
    x, y = presk.read_data(pairs)
    assert x.shape == y.shape == (x.shape[0], 4) and x.dtype == np.float64
    again = tmp_path / "pairs.psk.d"
    presk.write_data(again, (x, y), type="(ℝ[model: 4], ℝ[model: 4])")
    assert again.read_bytes() == pairs.read_bytes()
    tokens = tmp_path / "tokens.psk.d"
    presk.write_data(tokens, np.arange(6).reshape(3, 2), type="idx[8][seq: 2]")
    assert np.array_equal(presk.read_data(tokens), np.arange(6).reshape(3, 2))
    with pytest.raises(presk.PreskError) as e:
        presk.write_data(tokens, np.arange(6).reshape(3, 2) + 5, type="idx[8][seq: 2]")
    assert e.value.code == "E7007"
    with pytest.raises(presk.PreskError) as e:
        presk.read_data(tmp_path / "none.psk.d")
    assert e.value.code == "E7004"


def test_training_from_python_logs_what_presk_train_logs(tmp_path) -> None:
    x, y = presk.read_data(ROOT / "tutorial" / "data" / "pairs.psk.d")
    eight = tmp_path / "eight.psk.d"  # one batch of B = 8: an epoch a step
    presk.write_data(eight, (x[:8], y[:8]), type="(ℝ[model: 4], ℝ[model: 4])")
    code, out, err = cli("train", TRAIN, "--steps", 3, "--log-every", 1, "--backend", "native",
                         "--ckpt", tmp_path / "cli", "--data", eight)  # fmt: skip
    assert code == 0, err
    logged = re.findall(r"^step \d+ .*$", out, re.M)
    records, lines = [], []
    metrics = tmp_path / "m.jsonl"
    theta = presk.load(TRAIN).train(steps=3, backend="native", ckpt=str(tmp_path / "py"),
                                    data=eight, metrics=str(metrics), log_every=1,
                                    callback=records.append, log=lines.append)  # fmt: skip
    assert [r["step"] for r in records] == [1, 2, 3] and [r["epoch"] for r in records] == [1, 2, 3]
    assert [json.loads(line) for line in metrics.read_text().splitlines()[1:]] == records
    assert [line for line in lines if line.startswith("step ")] == logged
    assert lines[-1].startswith("presk train: 3 steps of Tower, final loss")
    final = presk.read_data(tmp_path / "cli" / "final.psk.d")
    from presk_cli.arguments import flat

    for k, v in flat(final).items():
        assert np.array_equal(bits(flat(theta)[k]), bits(v)), k


def test_a_run_stopped_by_presk_train_resumes_from_python(tmp_path) -> None:
    flags = ["--steps", 3, "--backend", "native", "--log-every", 1]
    code, out, err = cli("train", TRAIN, *flags, "--ckpt", tmp_path / "whole")
    assert code == 0, err
    code, out, err = cli("train", TRAIN, *flags, "--ckpt", tmp_path / "cut", "--stop-after", 1)
    assert code == 0, err
    where = re.search(r"--resume (\S+)", out).group(1)
    records = []
    theta = presk.load(TRAIN).train(steps=3, ckpt=str(tmp_path / "cut"), resume=where,
                                    callback=records.append)  # fmt: skip
    assert [r["step"] for r in records] == [2, 3]
    from presk_cli.arguments import flat

    whole = flat(presk.read_data(tmp_path / "whole" / "final.psk.d"))
    assert all(np.array_equal(bits(v), bits(whole[k])) for k, v in flat(theta).items())


def test_opt_from_python_is_presk_train_opt(tmp_path) -> None:
    flags = ["--steps", 2, "--backend", "native", "--opt"]
    code, _, err = cli("train", TRAIN, *flags, "--ckpt", tmp_path / "cli")
    assert code == 0, err
    theta = presk.load(TRAIN).train(steps=2, ckpt=str(tmp_path / "py"), opt=True)
    from presk_cli.arguments import flat

    final = flat(presk.read_data(tmp_path / "cli" / "final.psk.d"))
    assert all(np.array_equal(bits(v), bits(final[k])) for k, v in flat(theta).items())
    with pytest.raises(presk.PreskError) as e:
        presk.load(TRAIN).train(steps=1, ckpt=str(tmp_path / "p"), profile="x.json")
    assert e.value.code == "E7080" and not (tmp_path / "p").exists()


def test_an_interrupted_run_saves_its_last_step_and_gives_the_mask_back(tmp_path) -> None:
    import signal

    def stop(record):  # Ctrl-C during step 2
        if record["step"] == 2:
            raise KeyboardInterrupt

    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    with pytest.raises(KeyboardInterrupt) as e:
        presk.load(TRAIN).train(steps=4, ckpt=str(tmp_path), callback=stop)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before
    assert e.value.saved and (tmp_path / "step_1.psk.d").exists()
    records = []
    presk.load(TRAIN).train(steps=4, ckpt=str(tmp_path), resume=e.value.saved,
                            callback=records.append)  # fmt: skip
    assert [r["step"] for r in records] == [2, 3, 4]


def test_a_key_and_a_draw_on_the_reference_interpreter_as_presk_run() -> None:
    sample = ROOT / "tutorial" / "05_sample.psk"
    code, out, err = cli("run", sample, "--entry", "pick", "--dim", "B=5", "--json")
    assert code == 0, err
    doc = json.loads(out)
    pick = presk.load(sample).entry("pick", backend="interp")
    key = tuple(int(w) for w in doc["inputs"]["key"])
    got = pick(key, json_leaves(doc["inputs"]["logits"])[0])
    assert got.dtype == np.int64 and got.tolist() == doc["result"]
    native = presk.load(sample).entry("pick")  # draws natively too (issue 29), the same tokens
    assert native(key, json_leaves(doc["inputs"]["logits"])[0]).tolist() == doc["result"]
    apply = presk.load(TRAIN).entry("Tower.apply")
    with pytest.raises(presk.PreskError) as e:  # the kernels need an axis of `...`
        apply(presk.load(TRAIN).init("Tower"), np.ones(4))
    assert e.value.code == "E7001"


def test_any_arguments_give_a_result_or_a_diagnostic() -> None:
    """Robustness: arrays of any rank, length and kind, trees with leaves missing or reshaped,
    never a traceback of another kind."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    program = presk.load(TRAIN)
    f = program.entry("loss", backend="kernel")
    theta = program.init("Tower")
    kinds = st.sampled_from([np.float64, np.float32, np.int64, np.bool_, np.complex128, str])
    shapes = st.one_of(
        st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple),
        st.integers(0, 5).map(lambda b: (b, 4)),  # a batch of B, 0 included
    )
    arrays = st.builds(lambda s, k: np.zeros(s, dtype=k), shapes, kinds)
    batches = st.one_of(st.tuples(arrays, arrays), arrays, st.tuples(arrays), st.none())
    trees = st.sampled_from(["whole", "missing", "reshaped", "list"])

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(batches, trees)
    def call(batch, tree):
        t = {"whole": theta, "list": [1.0], "missing": {"final": theta["final"]},
             "reshaped": {**theta, "final": {"γ": np.ones(5)}}}[tree]  # fmt: skip
        try:
            value = f(t, batch)
        except presk.PreskError as e:
            assert re.fullmatch(r"E\d{4}", e.code) and e.message.startswith(f"[{e.code}]")
            return
        assert tree == "whole" and np.shape(value) == ()

    call()
