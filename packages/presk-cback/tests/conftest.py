"""Every test of presk-cback compiles into one cache folder per session: an object is
compiled once per run of the tests, and nothing is left in the user's cache."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def session_cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("presk-cache")
    old = os.environ.get("PRESK_CACHE")
    os.environ["PRESK_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("PRESK_CACHE", None)
    else:
        os.environ["PRESK_CACHE"] = old
