"""A page's screenshot in Debian's chromium, driven by Playwright (`make explain`):

    python tools/screenshot.py PAGE.html OUT.png [--tab network] [--click SELECTOR]

Playwright's own browser download cannot work on this machine: the system's chromium is
used (`apt-get install chromium`). Exit 1 with a message when it is absent."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--tab", help="the tab to show (its button's data-tab)")
    parser.add_argument("--click", help="an element to click first (a CSS selector)")
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("screenshot: no chromium (apt-get install chromium)", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=FLAGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(args.page.resolve().as_uri())
        if args.tab:
            page.click(f"nav button[data-tab={args.tab}]")
        if args.click:
            page.locator(args.click).first.click(position={"x": 5, "y": 5})
        page.screenshot(path=str(args.out))
        browser.close()
    print(f"screenshot: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
