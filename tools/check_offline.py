#!/usr/bin/env python
"""Check that the built book works offline and hands out plain notebooks (run after `make book`).

Usage: ``python tools/check_offline.py [_build/html]``; exits 1 listing every problem.

* **Nothing from the network.** No page loads a script, stylesheet, font, image, frame or other
  resource from ``http(s)://`` or ``//``: every ``src=`` / ``href=`` / ``srcset=`` / ``data=`` of
  an element that loads something (``<script>``, ``<link>``, ``<img>``, ``<iframe>``, ``<source>``,
  ``<video>``, ``<audio>``, ``<embed>``, ``<object>``, ``<input>``), every ``url(...)`` and
  ``@import`` in inline styles and in the book's ``.css`` files, and every ``.js`` / ``.css`` URL
  an inline script names (``THEBE_JS_URL = "https://..."``). Plain links (``<a href>``: prose, the
  references) are allowed: they load nothing.
* **Plain notebooks.** Every notebook the book hands out (``*.ipynb`` under the HTML folder: the
  executed chapters of the download menu, the student notebooks of the teaching page) has no MyST
  role or directive left in its Markdown cells (``{glue:md}``, ``{cite:p}``, ``{ref}``,
  ``` ```{exercise} ``` ...).
"""

from __future__ import annotations

import argparse
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOADING_TAGS = {"script", "link", "img", "iframe", "source", "video", "audio", "embed", "object", "input",
                "track", "frame"}
URL_ATTRIBUTES = {"src", "href", "srcset", "data", "poster"}
_EXTERNAL = re.compile(r"^\s*(?:https?:)?//", re.I)
_CSS_URL = re.compile(r"""url\(\s*['"]?\s*((?:https?:)?//[^'")\s]+)""", re.I)
_CSS_IMPORT = re.compile(r"""@import\s+(?:url\()?\s*['"]?\s*((?:https?:)?//[^'")\s;]+)""", re.I)
_SCRIPT_URL = re.compile(r"""['"]((?:https?:)?//[^'"\s]+\.(?:js|css|woff2?|ttf|otf))(?:\?[^'"\s]*)?['"]""", re.I)


def _srcset_urls(value: str) -> list[str]:
    return [part.strip().split()[0] for part in value.split(",") if part.strip()]


class _Scanner(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems: list[tuple[int, str]] = []
        self._in = None  # "script" / "style" while inside one

    def handle_starttag(self, tag, attrs):
        line = self.getpos()[0]
        values = dict(attrs)
        if tag in LOADING_TAGS:
            for name, value in attrs:
                if name not in URL_ATTRIBUTES or not value:
                    continue
                urls = _srcset_urls(value) if name == "srcset" else [value]
                for url in urls:
                    if _EXTERNAL.match(url):
                        self.problems.append((line, f"<{tag} {name}={url!r}> loads from the network"))
        style = values.get("style") or ""
        for rx in (_CSS_URL, _CSS_IMPORT):
            for url in rx.findall(style):
                self.problems.append((line, f"<{tag} style=...> loads {url!r} from the network"))
        if tag in ("script", "style"):
            self._in = tag

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        line = self.getpos()[0]
        if self._in == "style":
            for rx in (_CSS_URL, _CSS_IMPORT):
                for url in rx.findall(data):
                    self.problems.append((line, f"<style> loads {url!r} from the network"))
        elif self._in == "script":
            for url in _SCRIPT_URL.findall(data):
                self.problems.append((line, f"inline <script> names {url!r} to load from the network"))


def scan_html(text: str) -> list[tuple[int, str]]:
    """``(line, problem)`` for every resource ``text`` (an HTML page) would load from the network."""
    scanner = _Scanner()
    scanner.feed(text)
    scanner.close()
    return list(dict.fromkeys(scanner.problems))   # @import url(...) matches both patterns


def scan_css(text: str) -> list[tuple[int, str]]:
    """``(line, problem)`` for every ``url(...)`` / ``@import`` of a stylesheet that is external."""
    out = []
    for rx in (_CSS_URL, _CSS_IMPORT):
        for m in rx.finditer(text):
            out.append((text.count("\n", 0, m.start()) + 1, f"stylesheet loads {m.group(1)!r} from the network"))
    return sorted(set(out))


def scan_notebook(path: Path) -> list[tuple[int, str]]:
    """``(cell index, problem)`` for every MyST role or directive left in a notebook's Markdown."""
    import nbformat

    sys.path.insert(0, str(ROOT / "src"))
    from itemsampling.exercises import myst_markup

    nb = nbformat.read(path, as_version=4)
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for markup in myst_markup(cell.source):
                out.append((i, f"MyST left in a Markdown cell: {markup[:80]}"))
    return out


def check(html_dir: Path) -> list[str]:
    """Every problem of the built book in ``html_dir``, as ``file:line: problem`` lines."""
    html_dir = Path(html_dir)
    if not (html_dir / "index.html").is_file():
        raise ValueError(f"{html_dir} is not a built book (no index.html); run `make book` first")
    problems = []
    for path in sorted(html_dir.rglob("*.html")):
        for line, problem in scan_html(path.read_text(errors="replace")):
            problems.append(f"{path.relative_to(html_dir)}:{line}: {problem}")
    for path in sorted(html_dir.rglob("*.css")):
        for line, problem in scan_css(path.read_text(errors="replace")):
            problems.append(f"{path.relative_to(html_dir)}:{line}: {problem}")
    for path in sorted(html_dir.rglob("*.ipynb")):
        for cell, problem in scan_notebook(path):
            problems.append(f"{path.relative_to(html_dir)}: cell {cell}: {problem}")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", nargs="?", type=Path, default=ROOT / "_build" / "html",
                        help="the built book (default: _build/html)")
    args = parser.parse_args(argv)
    try:
        problems = check(args.html)
    except ValueError as err:
        print(f"check_offline: {err}", file=sys.stderr)
        return 1
    pages = len(list(args.html.rglob("*.html")))
    notebooks = len(list(args.html.rglob("*.ipynb")))
    if problems:
        print(f"check_offline: {len(problems)} problem(s) in {args.html}:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(f"check_offline: {pages} pages load nothing from the network; {notebooks} notebooks are plain Markdown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
