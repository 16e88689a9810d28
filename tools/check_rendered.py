#!/usr/bin/env python
"""Check that no built page shows the reader Python's internals in place of a result (run after
`make book`, like tools/check_offline.py).

Usage: ``python tools/check_rendered.py [_build/html]``; exits 1 listing every problem as
``page:line: problem``.

What a page may not show, outside the code a cell shows as its input:

* **an object's default repr**: ``<... object at 0x7f...>``;
* **an IPython display object as text**: ``<IPython.core.display.Markdown object>`` (what
  ``{glue:text}`` prints for a value glued as Markdown, which needs ``{glue:md}``);
* **a NumPy scalar's repr**: ``np.float64(1.0)``, ``np.int64(3)``, ``np.True_`` (NumPy 2 prints
  these where a plain number was meant);
* **a quoted string as a cell's only output**: ``'the simulated dataset ...'``, the value of a
  string left as the last line of a cell;
* **a glued value rendered as a variable name or as "none"**: a parameter's name where its value
  belongs (``over `n_repeats` repetitions``, "n = `winner_sample_size`", "B = n_repeats": a name of
  the page's parameters cell, or on a page without one any snake_case name after "=" or "over"), or
  ``= none`` / ``= None`` / ``= nan`` in the prose (an empty list or a missing value printed as
  text).

* **a dict's repr**: ``{'A': 0.9963458391442719, ...}``, a dictionary printed where its values
  were meant (a key in single quotes, then a colon), in a cell's output or in the prose;
* **a frozen progress bar**: ``sampled evaluations:   0%|          | 0/200`` (a tqdm bar, or the
  text form of its widget, left on the page by a cell);
* **a bare float with 10 or more significant digits**: ``20.54014879500005`` (a value printed unrounded, e.g.
  the last line of a cell returning it), in a cell's output or in the prose; a number with a
  letter, a dot or a slash next to it (a hash, an id, a version ``1.2.3``, a DOI
  ``10.1145/3394486.3403226``) is not one, nor are the leading zeros of a small value (``0.000899226``).

The prose checks read paragraphs, list items, headings and captions (with inline code that is
more than a bare name left out); the output checks read every cell output. Code typed on the page
(a cell's source, a code block) is never read by the dict, progress-bar and float checks. Tables of
data are not searched for "none" (a table may print a missing cell as such); they are searched
for the reprs above.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]

_REPRS = [
    (re.compile(r"<[^<>\n]{0,200}\bobject at 0x[0-9a-fA-F]+>?"), "an object's default repr"),
    (re.compile(r"<IPython\.[\w.]+[^<>\n]{0,80}>?"), "an IPython display object printed as text"),
    (re.compile(r"\bnp\.(?:float|int|uint|complex|bool|str)\w*\(|\bnp\.(?:True_|False_)\b"),
     "a NumPy scalar's repr (print the number, not np.float64(...))"),
]
# the main text's leaks: a dict's repr, a progress bar, an unrounded float
_DICT_REPR = re.compile(r"\{'[^'\n]{0,80}':\s")
_PROGRESS_BAR = re.compile(r"\b\d{1,3}%\|[^|\n]{0,120}\|\s*\d+(?:\.\d+)?[kMG]?/\d+(?:\.\d+)?[kMG]?")
_FLOAT = re.compile(r"(?<![\w./])(\d+\.\d+)(?:[eE][-+]?\d+)?(?![\w/]|\.\d)")
LONG_FLOAT_DIGITS = 10
_IDENT = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+"   # a snake_case variable name (it has an underscore)
_COUNT_NOUNS = (r"(?:repetitions|repeats|draws|runs|users|items|decoys|samples|evaluations|studies|"
                r"data sets|datasets|models)")
# a name after "=" or "over" (not a term of a formula: "n = num_items + 1"), or a name followed by
# what it counts ("`n_repeats` simulated evaluations"); on a page with a parameters cell, only the
# names that cell assigns count (a function named in the prose, "`truth_experiment` runs them", is not one)
_AFTER_EQUALS = re.compile(rf"(?:=|\bover)\s*({_IDENT})\b(?!\s*[-+*/×·^]|\()")
_BEFORE_COUNT = re.compile(rf"\b({_IDENT})(?:\s+[a-z]+){{0,2}}\s+{_COUNT_NOUNS}\b")
_ASSIGNED = re.compile(r"^([A-Za-z_]\w*)\s*=", re.M)
_NONE_AS_VALUE = re.compile(r"=\s*(none|None|nan|NaN)\b")
_QUOTED = re.compile(r"""^\s*(['"]).*\1\s*$""", re.S)
PROSE_TAGS = ["p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "figcaption", "caption", "dt", "dd"]


def _line(el) -> int:
    return getattr(el, "sourceline", None) or 0


def _short(text: str, n: int = 80) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= n else text[: n - 1] + "…"


def _prose_piece(t) -> str:
    """A text node of the prose; inside inline code that is more than a bare name (a call, an
    expression: `f(x, gamma=my_gamma)`), a placeholder, since code may name variables freely."""
    code = t.find_parent("code")
    if code is not None and not re.fullmatch(r"\s*[A-Za-z_]\w*\s*", code.get_text()):
        return " ‹code› "
    return str(t)


def _main_text_leaks(text: str) -> list[str]:
    """The dict reprs, progress bars and unrounded floats in one piece of the page's main text."""
    found = []
    m = _DICT_REPR.search(text)
    if m:
        found.append(f"a dict's repr (print its values, not the dict): {_short(text[m.start():m.start() + 60])!r}")
    m = _PROGRESS_BAR.search(text)
    if m:
        found.append(f"a frozen progress bar (keep progress bars off the page): {_short(m.group(0))!r}")
    for m in _FLOAT.finditer(text):
        # significant digits: a small value at %.6g ("0.000899226") is rounded, its leading zeros
        # are not digits of precision
        if len(m.group(1).replace(".", "").lstrip("0")) >= LONG_FLOAT_DIGITS:
            found.append(f"a float printed unrounded ({LONG_FLOAT_DIGITS}+ digits; format it): {m.group(0)!r}")
            break
    return found


def scan_html(text: str) -> list[tuple[int, str]]:
    """(line, problem) for every leak of Python's internals on one HTML page."""
    soup = BeautifulSoup(text, "html.parser")
    body = soup.select_one("article") or soup.body or soup
    parameters = {name for cell in body.select("div.cell.tag_parameters div.cell_input")
                  for name in _ASSIGNED.findall(cell.get_text())}
    for el in body.select("div.cell_input, script, style"):
        el.decompose()
    problems = []
    seen = set()

    def add(line, problem):
        if (line, problem) not in seen:
            seen.add((line, problem))
            problems.append((line, problem))

    # reprs, anywhere on the page outside the code of the cells (outputs, prose, tables)
    for el in body.find_all(string=True):
        s = str(el)
        for rx, what in _REPRS:
            m = rx.search(s)
            if m:
                add(_line(el.parent), f"{what}: {_short(m.group(0))!r}")
    # dict reprs, progress bars and unrounded floats in the cells' outputs (tables of outputs too)
    # (a block of printed text is read whole, as highlighting may split it; a table cell by cell)
    for out in body.select("div.cell_output"):
        pieces = [(_line(pre), pre.get_text()) for pre in out.find_all("pre")]
        pieces += [(_line(t.parent), str(t)) for t in out.find_all(string=True) if not t.find_parent("pre")]
        for line, piece in pieces:
            for problem in _main_text_leaks(piece):
                add(line, problem)
    # a quoted string as a cell's only output
    for out in body.select("div.cell_output"):
        outputs = out.find_all("div", class_="output", recursive=False) or out.select("div.output")
        if len(outputs) == 1 and "text_plain" in outputs[0].get("class", []):
            value = outputs[0].get_text()
            if _QUOTED.match(value):
                add(_line(outputs[0]), f"a quoted string printed as a cell's only output: {_short(value)}")
    # a glued value rendered as a variable name or as "none", in the prose
    for el in body.find_all(PROSE_TAGS):
        if el.find_parent(["table", "pre"]):   # Markdown outputs of cells are prose, and read
            continue
        # the element's own text: nested prose elements (a list inside a list item) are read on their own
        own = " ".join(_prose_piece(t) for t in el.find_all(string=True)
                       if t.find_parent(PROSE_TAGS) is el and not t.find_parent(["table", "pre"]))
        own = re.sub(r"\s+", " ", own)
        for m in _AFTER_EQUALS.finditer(own):
            if not parameters or m.group(1) in parameters:
                add(_line(el), f"a variable name where its value belongs: {_short(m.group(0))!r}")
        for m in _BEFORE_COUNT.finditer(own):
            if m.group(1) in parameters:
                add(_line(el), f"a variable name where its value belongs: {_short(m.group(0))!r}")
        for m in _NONE_AS_VALUE.finditer(own):
            add(_line(el), f"a missing value printed as text: {_short(own[max(0, m.start() - 40):m.end()])!r}")
        if not el.find_parent("div", class_="cell_output"):   # outputs were read above
            for problem in _main_text_leaks(own):
                add(_line(el), problem)
    return problems


#: pages generated from the docstrings (autodoc): their signatures ``k : int | None = None`` and the
#: parameter names in their prose are the API itself, not glued values gone wrong
API_PAGES = ("book/api.html",)


def check(html_dir: Path) -> list[str]:
    """Every problem of the built book in ``html_dir``, as ``page:line: problem`` lines."""
    html_dir = Path(html_dir)
    if not (html_dir / "index.html").is_file():
        raise ValueError(f"{html_dir} is not a built book (no index.html); run `make book` first")
    problems = []
    for path in sorted(html_dir.rglob("*.html")):
        rel = path.relative_to(html_dir)
        if rel.parts[0] in ("_static", "_sources", "_images") or rel.name in ("genindex.html", "search.html"):
            continue
        if rel.as_posix() in API_PAGES:  # the docstrings' signatures and defaults ("rng = None") are meant
            continue
        for line, problem in scan_html(path.read_text(errors="replace")):
            problems.append(f"{rel}:{line}: {problem}")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", nargs="?", type=Path, default=ROOT / "_build" / "html",
                        help="the built book (default: _build/html)")
    args = parser.parse_args(argv)
    try:
        problems = check(args.html)
    except ValueError as err:
        print(f"check_rendered: {err}", file=sys.stderr)
        return 1
    if problems:
        print(f"check_rendered: {len(problems)} problem(s) in {args.html}:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    pages = len([p for p in args.html.rglob("*.html") if p.relative_to(args.html).parts[0] not in ("_static", "_sources")])
    print(f"check_rendered: {pages} pages show no object repr, IPython object, NumPy repr, dict repr, progress "
          "bar, unrounded float, stray quoted output or variable name in place of a value")
    return 0


if __name__ == "__main__":
    sys.exit(main())
