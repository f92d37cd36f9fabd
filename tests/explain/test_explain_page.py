"""`presk explain --format html` in a real browser (issue 25): Playwright for Python driving
Debian's chromium (its own browser download cannot work here). The page loads without a
console error or a request, every link resolves, a click on a kernel highlights its sites in
every column, the Network tab opens and "Expand all" opens every box, and a screenshot is
taken (`make explain` writes docs/explain.png with tools/screenshot.py). Skipped, with a message, where chromium or playwright is absent
(`apt-get install chromium`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium (apt-get install chromium): the page is not opened"
)


@pytest.fixture(scope="module")
def page_path(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("page") / "tower"
    done = subprocess.run(
        [sys.executable, "-m", "presk_cli.main", "explain", "tutorial/06_tower.psk", "--entry",
         "Tower.apply", "--dim", "batch=2", "--out", str(out), "--format", "html"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(" 2 artifacts)\n")
    return out / "explain.html"


@pytest.fixture(scope="module")
def browser():
    sync = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def test_the_page_in_a_browser(page_path, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(page_path.as_uri())
    assert errors == []
    assert requests == [page_path.as_uri()]  # self-contained: nothing else is fetched
    # every link resolves to an element of the page
    targets = page.eval_on_selector_all("a[href^='#']", "els => els.map(a => a.hash.slice(1))")
    assert targets and all(page.query_selector(f"[id='{t}']") for t in set(targets))
    # four columns; a click on a kernel highlights its sites in every column
    assert page.locator(".col h2").all_inner_texts()[:3] == [
        "Source", "PSK-Core", "After differentiation",
    ]  # fmt: skip
    kernel = page.locator(".el.kernel").filter(has_text="dot at Linear.apply/%3").first
    kernel.click(position={"x": 5, "y": 5})
    lit = page.eval_on_selector_all(
        ".el.hl", "els => els.map(e => e.closest('.col').querySelector('h2').textContent)"
    )
    for column in ("Source", "PSK-Core", "After differentiation"):
        assert column in lit, (column, lit)
    assert page.locator("#core-Linear_apply__3").get_attribute("class").split().count("hl") == 1
    # each kernel carries its C and its machine code
    kernel.locator("summary", has_text="C").first.click()
    assert "presk_kernel_" in kernel.locator("details pre").nth(1).inner_text()
    # the Network tab: boxes that open in place, all at once
    page.click("nav button[data-tab=network]")
    assert page.locator("#network").is_visible() and not page.locator("#pipeline").is_visible()
    boxes = page.locator("details.box")
    assert boxes.count() >= 4
    page.click("#expand-all")
    assert page.eval_on_selector_all("details.box", "bs => bs.every(b => b.open)")
    page.click("#memory")
    assert page.eval_on_selector_all("details.box", "bs => bs.some(b => b.style.background)")
    page.locator("details.box a", has_text="in the columns").first.click()  # back to the columns
    assert page.locator("#pipeline").is_visible()
    page.click("nav button[data-tab=pipeline]")
    kernel.click(position={"x": 5, "y": 5})
    shot = tmp_path / "explain.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    page.close()
