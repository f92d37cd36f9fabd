"""A markdown document as a PDF (`make explain-pdf`): the markdown rendered to HTML by
Python-Markdown (tables, fenced code), printed by Debian's chromium through Playwright.

    python tools/md_pdf.py DOC.md OUT.pdf

Chromium renders the Unicode of the listings (ℝ, θ, ⊙, ⟵) with the system's fonts; no
LaTeX is needed. Relative links and images resolve against DOC.md's folder. Exit 1 with a
message when chromium or Python-Markdown is absent (the make target installs the latter)."""

from __future__ import annotations

import argparse
import html
import shutil
import sys
import tempfile
from pathlib import Path

FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
STYLE = """
body { font: 10.5pt/1.45 "DejaVu Sans", "Liberation Sans", sans-serif; margin: 0; }
h1, h2 { color: #243447; } h2 { border-bottom: 1px solid #ccd; padding-bottom: 2px; }
pre, code { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: 8.5pt; }
pre { background: #f5f7f9; padding: 6px; white-space: pre-wrap; word-break: break-all; }
table { border-collapse: collapse; font-size: 8.5pt; } td, th { border: 1px solid #ccd; padding: 2px 4px; }
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("doc", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("md_pdf: no chromium (apt-get install chromium)", file=sys.stderr)
        return 1
    try:
        import markdown
    except ImportError:
        print("md_pdf: no Python-Markdown (pip install markdown)", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    body = markdown.markdown(
        args.doc.read_text(encoding="utf-8"), extensions=["tables", "fenced_code"]
    )
    title = html.escape(args.doc.name)
    page_html = (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{STYLE}</style></head><body>{body}</body></html>"
    )
    from presk_core.data import atomic_path

    # the page beside the document, so that its relative links resolve
    with tempfile.TemporaryDirectory(dir=args.doc.parent) as tmp:
        page_path = Path(tmp) / "page.html"
        page_path.write_text(page_html, encoding="utf-8")
        with sync_playwright() as p, atomic_path(str(args.out)) as pdf:
            browser = p.chromium.launch(executable_path=chromium, args=FLAGS)
            page = browser.new_page()
            page.goto(page_path.resolve().as_uri())
            page.pdf(path=pdf, format="A4", margin={"top": "15mm", "bottom": "15mm",
                     "left": "14mm", "right": "14mm"}, print_background=True)  # fmt: skip
            browser.close()
    print(f"md_pdf: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
