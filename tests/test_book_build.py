"""`make book` must fail when a notebook raises, and what it builds must work offline and show no
Python internals: tools/build_book.sh on a small throwaway book (a page with stray outputs, a chapter
with glued values, exercises and a tqdm.auto progress bar, the teaching page); the offline scan of
tools/check_offline.py and the rendered-page scan of tools/check_rendered.py on it and on tiny HTML
fixtures."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
from myst_header import MYST_HEADER

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import check_offline  # noqa: E402
import check_rendered  # noqa: E402

JB = Path(sys.executable).with_name("jupyter-book")

NB = MYST_HEADER + textwrap.dedent("""
    # Page

    ```{code-cell} ipython3
    print(1 + 1)
    ```
    """)


CHAPTER = MYST_HEADER + textwrap.dedent("""
    # A chapter

    ```{code-cell} ipython3
    from myst_nb import glue
    from tqdm.auto import tqdm
    for _ in tqdm(range(3)):
        pass
    n_runs = 7
    glue("n_runs", n_runs, display=False)
    ```

    We ran {glue:text}`n_runs` runs, as {cite:t}`krichene2020sampled` do; see {ref}`ex-03-2`.

    ## Exercises

    ```{code-cell} ipython3
    from itemsampling.exercises import check
    ```

    ```{exercise}
    :label: ex-03-1
    What is 1/3? Give it to 3 significant digits.
    ```

    ```{solution-start} ex-03-1
    :class: dropdown
    ```

    ```{code-cell} ipython3
    :tags: [solution]

    answer_03_1 = 1 / 3
    ```

    ```{solution-end}
    ```

    ```{code-cell} ipython3
    :tags: [check, remove-input]

    check("ex-03-1", globals().get("answer_03_1"), expected=0.3333333, digits=3);
    ```

    ```{exercise}
    :label: ex-03-2
    Open-ended: why?
    ```
    """)


# what a careless cell leaves on a page: a string as the cell's value, a Markdown value glued as text,
# a NumPy scalar's repr, a parameter's name where its value belongs
STRAY = textwrap.dedent("""
    ```{code-cell} ipython3
    import numpy as np
    from IPython.display import Markdown
    from myst_nb import glue
    glue("as_markdown", Markdown("**bold**"), display=False)
    'a stray string'
    ```

    ```{code-cell} ipython3
    np.float64(0.5)
    ```

    Glued as text: {glue:text}`as_markdown`; a mean over `n_repeats` repetitions.
    """)


def _book(tmp_path, extra_cell="", chapter=False):
    book = tmp_path / "book"
    (book / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", book / "_config.yml")
    shutil.copytree(ROOT / "_static", book / "_static")
    (book / "book" / "references.bib").write_text((ROOT / "book" / "references.bib").read_text())
    toc = "format: jb-book\nroot: intro\nchapters:\n  - file: page\n"
    if chapter:
        (book / "notebooks").mkdir()
        (book / "notebooks" / "03-a-chapter.md").write_text(CHAPTER)
        shutil.copy(ROOT / "book" / "teaching.md", book / "book" / "teaching.md")
        toc += "  - file: notebooks/03-a-chapter\n  - file: book/teaching\n"
    (book / "_toc.yml").write_text(toc)
    (book / "intro.md").write_text("# Intro\n\nText {cite:p}`krichene2020sampled`.\n\n```{bibliography}\n```\n")
    (book / "page.md").write_text(NB + extra_cell)
    return book


def _why(run) -> str:
    """What made a build fail: the lines build_book.sh looks for (a notebook's failure) and the end of its
    output."""
    out = run.stdout + run.stderr
    hits = [line for line in out.splitlines()
            if re.search(r"Executing notebook failed|Notebook exception|Traceback|CellExecutionError|execution failed|"
                         r"book: |error", line, re.I)]
    return "\n".join(hits[:40]) + "\n---\n" + out[-3000:]


def _build(book):
    env = dict(os.environ, JUPYTER_BOOK=str(JB))
    return subprocess.run(["bash", str(ROOT / "tools" / "build_book.sh"), str(book)],
                          capture_output=True, text=True, env=env, timeout=600)


def test_book_build_fails_on_notebook_error_and_passes_otherwise(tmp_path):
    assert JB.exists(), "jupyter-book must be installed in the test environment"
    good = _build(_book(tmp_path / "g", STRAY, chapter=True))
    assert good.returncode == 0, _why(good)
    html = tmp_path / "g" / "book" / "_build" / "html"
    assert (html / "page.html").exists()
    # chapter-numbered exercises, hidden check code, no widget, nothing from the network
    chapter = (html / "notebooks" / "03-a-chapter.html").read_text()
    assert "Exercise 3.1" in chapter and "Exercise 3.2" in chapter and "Exercise 1<" not in chapter
    assert "Exercise 3.1: correct." in chapter and "expected=0.3333333" not in chapter
    assert "widget-view" not in chapter and "THEBE_JS_URL" not in chapter
    assert chapter.count("mathjax/tex-chtml-full.js") == 1
    assert check_offline.check(html) == []
    # the rendered-page scan finds each stray output of the page, and on the chapter only the text form of
    # its tqdm.auto bar: the widget is dropped, its text stays on the page, frozen at 0 %
    rendered = check_rendered.check(html)
    on_chapter = [p for p in rendered if p.startswith("notebooks/03-a-chapter.html:")]
    assert len(on_chapter) == 1 and "a frozen progress bar" in on_chapter[0] and "0/3" in on_chapter[0], rendered
    assert all(p.startswith("page.html:") for p in rendered if p not in on_chapter), rendered
    found = " | ".join(rendered)
    for what in ("a quoted string printed as a cell's only output: 'a stray string'",
                 "an IPython display object printed as text: '<IPython.core.display.Markdown object>'",
                 "a NumPy scalar's repr", "a variable name where its value belongs: 'over n_repeats'"):
        assert what in found, (what, rendered)
    assert check_rendered.main([str(html)]) == 1
    # the downloadable notebook and the student notebook are plain Markdown with the glued value
    offered = nbformat.read(html / "_sources" / "notebooks" / "03-a-chapter.ipynb", as_version=4)
    student = nbformat.read(html / "exercises" / "03-a-chapter.ipynb", as_version=4)
    for nb in (offered, student):
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert "We ran 7 runs, as Krichene and Rendle (2020) do; see Exercise 3.2." in text
        assert "**Exercise 3.1.** What is 1/3?" in text
    assert "answer_03_1 = ...  # your answer" in "\n".join(c.source for c in student.cells)
    assert "1 / 3" not in "\n".join(c.source for c in student.cells)
    # its check checks the digest the build's check glued, with no expected value
    assert 'check_digest("ex-03-1", globals().get("answer_03_1"), "' in "\n".join(c.source for c in student.cells)
    assert "expected=" not in "\n".join(c.source for c in student.cells) and "0.333" not in str(student)
    # linked from the teaching page, with the zip; no teacher version published
    teaching = (html / "book" / "teaching.html").read_text()
    assert 'href="../exercises/03-a-chapter.ipynb"' in teaching
    assert 'href="../exercises/itemsampling-student-notebooks.zip"' in teaching
    import zipfile

    with zipfile.ZipFile(html / "exercises" / "itemsampling-student-notebooks.zip") as z:
        assert z.namelist() == ["itemsampling-exercises/03-a-chapter.ipynb"]
    assert not list(html.rglob("*teacher*"))
    assert not any("BEGIN SOLUTION" in p.read_text() for p in html.rglob("*.ipynb"))
    bad = _build(_book(tmp_path / "b", "\n```{code-cell} ipython3\nraise ValueError('a chapter broke')\n```\n"))
    assert bad.returncode != 0
    assert "a chapter broke" in bad.stdout + bad.stderr


# --- the offline scan on tiny fixtures ---------------------------------------------------------------

PAGE = """<!DOCTYPE html><html><head>
<script src="_static/doctools.js"></script>
<script src="https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js"></script>
<script src="//cdnjs.cloudflare.com/ajax/libs/require.js/2.3.4/require.min.js"></script>
<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Lato">
<link rel="stylesheet" href="_static/custom.css">
<script>const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js";</script>
<style>@import url("https://example.org/x.css"); .a { background: url(data:image/svg+xml;utf8,http://www.w3.org/2000/svg) }</style>
</head><body>
<p>See <a href="https://arxiv.org/abs/2106.10621">the paper</a> and <a href="page.html">a page</a>.</p>
<img src="_images/fig.png" srcset="_images/fig.png 1x, https://example.org/fig2.png 2x">
<div style="background-image: url('https://example.org/bg.png')"></div>
<iframe src="https://www.youtube.com/embed/x"></iframe>
</body></html>"""


def test_offline_scan_flags_what_loads_from_the_network_and_allows_plain_links():
    problems = [p for _, p in check_offline.scan_html(PAGE)]
    flagged = " | ".join(problems)
    for url in ("embed-amd.js", "require.min.js", "fonts.googleapis.com", "unpkg.com/thebe", "example.org/x.css",
                "example.org/fig2.png", "example.org/bg.png", "youtube.com"):
        assert url in flagged, url
    assert len(problems) == 8, problems
    assert "arxiv.org" not in flagged and "doctools" not in flagged and "w3.org" not in flagged
    assert check_offline.scan_html("<p><a href='https://doi.org/10.1/x'>ref</a></p>") == []
    assert [p for _, p in check_offline.scan_css('@font-face { src: url("https://x.org/f.woff2") }\n'
                                                 '.b { background: url(../img.png) }')] == \
        ["stylesheet loads 'https://x.org/f.woff2' from the network"]


def test_offline_check_of_a_folder(tmp_path):
    html = tmp_path / "html"
    (html / "_static").mkdir(parents=True)
    (html / "index.html").write_text("<html><body><a href='https://example.org'>x</a></body></html>")
    (html / "_static" / "a.css").write_text("body { color: red }")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("plain $x$ and `code`")]
    nbformat.write(nb, html / "ok.ipynb")
    assert check_offline.check(html) == []
    (html / "page.html").write_text('<script src="https://cdn.example.org/x.js"></script>')
    nb.cells.append(nbformat.v4.new_markdown_cell("model {glue:md}`ch09_boot_model`"))
    nbformat.write(nb, html / "bad.ipynb")
    problems = check_offline.check(html)
    assert len(problems) == 2
    assert problems[0].startswith("page.html:1:") and "cdn.example.org" in problems[0]
    assert problems[1].startswith("bad.ipynb: cell 1:") and "{glue:md}`ch09_boot_model`" in problems[1]
    assert check_offline.main([str(html)]) == 1
    import pytest

    with pytest.raises(ValueError, match="not a built book"):
        check_offline.check(tmp_path / "nothing")


def test_browser_check_reads_console_errors_from_devtools_events():
    """The events tools/browser_check.py turns into problems (its page run needs Chromium and runs
    in CI after the book build)."""
    import browser_check

    events = [
        {"method": "Runtime.exceptionThrown", "params": {"exceptionDetails": {
            "text": "Uncaught", "exception": {"description": "SyntaxError: Identifier 'THEBE_JS_URL' has already been declared\n at x"}}}},
        {"method": "Runtime.consoleAPICalled", "params": {"type": "error", "args": [{"type": "string", "value": "boom"}]}},
        {"method": "Runtime.consoleAPICalled", "params": {"type": "log", "args": [{"type": "string", "value": "fine"}]}},
        {"method": "Log.entryAdded", "params": {"entry": {"level": "error", "source": "network",
                                                          "text": "Failed to load resource: net::ERR_NAME_NOT_RESOLVED",
                                                          "url": "https://cdn.jsdelivr.net/npm/x.js"}}},
        {"method": "Log.entryAdded", "params": {"entry": {"level": "error", "source": "network",
                                                          "text": "404", "url": "http://127.0.0.1:1/favicon.ico"}}},
        {"method": "Log.entryAdded", "params": {"entry": {"level": "warning", "source": "other", "text": "meh"}}},
    ]
    assert browser_check._errors(events) == [
        "uncaught exception: SyntaxError: Identifier 'THEBE_JS_URL' has already been declared",
        "console.error: boom",
        "network error: Failed to load resource: net::ERR_NAME_NOT_RESOLVED https://cdn.jsdelivr.net/npm/x.js",
    ]
    import pytest

    with pytest.raises(ValueError, match="not a built book"):
        browser_check.check(Path("/nonexistent-book"))


# --- the rendered-page scan on tiny fixtures -----------------------------------------------------------

def _page(body: str) -> str:
    return f"<html><body><article>{body}</article></body></html>"


def _cell(output: str, source: str = "x") -> str:
    return (f'<div class="cell docutils container"><div class="cell_input docutils container"><pre>{source}</pre></div>'
            f'<div class="cell_output docutils container">{output}</div></div>')


def _plain(text: str) -> str:
    return f'<div class="output text_plain highlight-myst-ansi notranslate"><div class="highlight"><pre>{text}</pre></div></div>'


PARAMETERS = ('<div class="cell tag_parameters docutils container"><div class="cell_input docutils container">'
              "<pre>n_repeats = 100  # repetitions\nwinner_sample_size = 1000</pre></div></div>")


def test_rendered_scan_flags_python_internals():
    problems = check_rendered.scan_html(_page(
        PARAMETERS
        + _cell(_plain("'is approximately correct: 0.9'"))
        + _cell(_plain("&lt;__main__.Thing object at 0x7f3a2b1c&gt;"))
        + _cell(_plain("np.float64(1.0)"))
        + "<p>The Gini index is &lt;IPython.core.display.Markdown object&gt;.</p>"
        + "<p>Table 1.2 \u2014 our Monte Carlo over <code><span>n_repeats</span></code> repetitions; "
          "$B$ = <code>n_repeats</code>.</p>"
        + "<p>With \\(n\\) = <code>winner_sample_size</code> decoys.</p>"
        + "<ul><li>the top-heavy one\u2019s for \\(n\\) = none</li></ul>"))
    flagged = " | ".join(p for _, p in problems)
    for what in ("quoted string printed as a cell's only output: 'is approximately correct: 0.9'",
                 "an object's default repr: '<__main__.Thing object at 0x7f3a2b1c>'",
                 "a NumPy scalar's repr (print the number, not np.float64(...)): 'np.float64('",
                 "an IPython display object printed as text: '<IPython.core.display.Markdown object>'",
                 "'over n_repeats'", "'n_repeats repetitions'", "'= n_repeats'", "'= winner_sample_size'",
                 "'winner_sample_size decoys'", "a missing value printed as text"):
        assert what in flagged, (what, problems)
    assert len(problems) == 10, problems


def test_rendered_scan_passes_plain_results_and_code():
    page = _page(
        PARAMETERS
        + _cell(_plain("0.25"), source="np.float64(0.25)  # code may say anything")
        + _cell(_plain("'a'") + _plain("'b'"))                      # two outputs: not a stray value
        + _cell('<div class="output stream"><pre>\'quoted\' by print</pre></div>')
        + "<p>Change the parameter <code>n_repeats</code> to rerun with more draws (1,000 by default).</p>"
        + "<p>Over 1,000 repetitions; \\(n\\) = 100; 0 of 12 pairs differ; none of the models.</p>"
        + "<p>With <code>corrected_metric(r, gamma=your_gamma)</code>; the NCF file's \\(n\\) = <code>num_items</code> + 1.</p>"
        + "<p>Its steps, as <code>truth_experiment</code> runs them; \\(k\\) = <code>truth_k</code>, not a parameter.</p>"
        + "<table><tr><td>None</td><td>= nan</td></tr></table>")
    assert check_rendered.scan_html(page) == []


def test_rendered_scan_flags_dicts_progress_bars_and_unrounded_floats():
    problems = check_rendered.scan_html(_page(
        _cell(_plain("{'A': 0.9963, 'B': 0.9867}"))                              # a solution's dict, line 1
        + "\n" + _cell('<div class="output stderr"><pre>sampled evaluations:   0%|          | 0/200 '
                        "[00:00&lt;?, ?it/s]</pre></div>")                       # a frozen tqdm bar
        + "\n" + _cell(_plain("20.54014879500005"))                             # a returned float
        + "\n<p>The command prints method ratio {'design': 'with_replacement'} for each model.</p>"
        + "\n<p>The run took 20.54014879500005 s.</p>"
        + "\n" + _cell("<table><tr><td>0.12345678901</td></tr></table>")       # a table cell unrounded
        + "\n<p>Progress: 45%|####      | 90/200 [00:02&lt;00:03]</p>"))
    flagged = [(line, p.split(":")[0]) for line, p in problems]
    assert flagged == [(1, "a dict's repr (print its values, not the dict)"),
                       (2, "a frozen progress bar (keep progress bars off the page)"),
                       (3, "a float printed unrounded (10+ digits; format it)"),
                       (6, "a float printed unrounded (10+ digits; format it)"),
                       (4, "a dict's repr (print its values, not the dict)"),
                       (5, "a float printed unrounded (10+ digits; format it)"),
                       (7, "a frozen progress bar (keep progress bars off the page)")], problems
    assert "'20.54014879500005'" in problems[2][1] and "'0.12345678901'" in problems[3][1]


def test_rendered_scan_passes_rounded_numbers_ids_and_typed_code():
    page = _page(
        _cell(_plain("expected sampled NDCG@10, one decoy: A 0.9963, B 0.7812, C 0.8459"),
              source="expected = {'A': 0.9963458391442719}  # code may say anything")
        + _cell(_plain("[0.12345679 0.23456789]"))                 # NumPy's 8 decimals: 9 digits
        + _cell(_plain("recall,0.000899226,0.0000123457"))          # %.6g of small values: 6 significant
        + _cell("<table><tr><td>123456</td><td>0.123457</td></tr></table>")   # cells are read one by one
        + "<p>Data set SHA-256 3f2a9c0d81.4477e12aa9, commit 1.2.3.4567890123, run 1234567890 users.</p>"
        + '<p>KDD 2020, <a href="https://doi.org/10.1145/3394486.3403226">doi:10.1145/3394486.3403226</a>.</p>'
        + "<p>A set {r: r &gt; 1} and the mean 0.47 [0.44, 0.50]; 95 % of 200; 100 % | 0 of 3 rows.</p>"
        + '<div class="highlight-python"><pre>options = {\'gamma\': 0.1}; x = 0.12345678901234</pre></div>'
        + "<p>Call <code>estimate(r, options={'gamma': 0.1})</code>; about 1.2345e-05 of the mass.</p>")
    assert check_rendered.scan_html(page) == []


def test_rendered_check_of_a_folder(tmp_path):
    html = tmp_path / "html"
    (html / "notebooks").mkdir(parents=True)
    (html / "_sources").mkdir()
    (html / "index.html").write_text(_page("<p>Intro.</p>"))
    (html / "notebooks" / "ok.html").write_text(_page("<p>A mean over 200 repeats.</p>"))
    (html / "_sources" / "ignored.html").write_text(_page("<p>over n_repeats</p>"))
    assert check_rendered.check(html) == []
    assert check_rendered.main([str(html)]) == 0
    (html / "notebooks" / "bad.html").write_text(_page("\n<p>a mean over n_repeats draws</p>"))
    problems = check_rendered.check(html)
    assert problems == ["notebooks/bad.html:2: a variable name where its value belongs: 'over n_repeats'"]
    assert check_rendered.main([str(html)]) == 1
    import pytest

    with pytest.raises(ValueError, match="not a built book"):
        check_rendered.check(tmp_path / "nothing")
