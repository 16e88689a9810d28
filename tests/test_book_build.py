"""`make book` must fail when a notebook raises: tools/build_book.sh on a two-page throwaway book."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from myst_header import MYST_HEADER

ROOT = Path(__file__).resolve().parents[1]
JB = Path(sys.executable).with_name("jupyter-book")

NB = MYST_HEADER + textwrap.dedent("""
    # Page

    ```{code-cell} ipython3
    print(1 + 1)
    ```
    """)


def _book(tmp_path, extra_cell=""):
    book = tmp_path / "book"
    (book / "book").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", book / "_config.yml")
    shutil.copytree(ROOT / "_static", book / "_static")
    (book / "book" / "references.bib").write_text((ROOT / "book" / "references.bib").read_text())
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: page\n")
    (book / "intro.md").write_text("# Intro\n\nText {cite:p}`krichene2020sampled`.\n\n```{bibliography}\n```\n")
    (book / "page.md").write_text(NB + extra_cell)
    return book


def _build(book):
    env = dict(os.environ, JUPYTER_BOOK=str(JB))
    return subprocess.run(["bash", str(ROOT / "tools" / "build_book.sh"), str(book)],
                          capture_output=True, text=True, env=env, timeout=600)


def test_book_build_fails_on_notebook_error_and_passes_otherwise(tmp_path):
    assert JB.exists(), "jupyter-book must be installed in the test environment"
    good = _build(_book(tmp_path / "g"))
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-3000:]
    assert (tmp_path / "g" / "book" / "_build" / "html" / "page.html").exists()
    bad = _build(_book(tmp_path / "b", "\n```{code-cell} ipython3\nraise ValueError('a chapter broke')\n```\n"))
    assert bad.returncode != 0
    assert "a chapter broke" in bad.stdout + bad.stderr
