"""What the serve tests share: the tiny MiniGPT's checkpoint, trained once a session."""

from pathlib import Path

import pytest
from helpers import presk

TINY = ("--const", "V=64", "--const", "D=16", "--const", "H=2", "--const", "L=2")


@pytest.fixture(scope="session")
def ckpt(tmp_path_factory) -> Path:
    """train_minigpt.psk's weights at V=64, D=16, H=2, L=2 after 2 steps of `presk train`
    on the kernel interpreter (T = 8; natively, the same bits): `final.psk.d`."""
    folder = tmp_path_factory.mktemp("ckpt")
    r = presk(
        "train", "tests/examples/minigpt/train_minigpt.psk", *TINY,
        "--data", "tests/examples/minigpt/data/tiny_T8.psk.d", "--steps", 2,
        "--log-every", 0, "--ckpt", folder, "--backend", "kernel",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return folder / "final.psk.d"
