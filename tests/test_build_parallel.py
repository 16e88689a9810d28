"""The book's parallel pre-execution (tools/preexecute_notebooks.py, run by tools/build_book.sh):
the longest-first order and its predicted wall time, the notebooks it finds in the book (read as
MyST-NB reads them), a failing notebook reported with its chapter while the others are cached
where MyST-NB's look-up finds them, the check that MyST-NB executed nothing itself, and the
cache-mode configuration handed to Sphinx. No full build here (tests/test_book_build.py builds a
small book through tools/build_book.sh)."""

import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from myst_header import MYST_HEADER

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import preexecute_notebooks as pre  # noqa: E402

TOC_ORDER = [  # the chapters in _toc.yml's order
    "notebooks/guide-correcting-your-evaluation",
    "notebooks/guide-evaluate-your-model",
    "notebooks/01-sampled-metrics-inconsistent",
    "notebooks/02-sampling-theorem",
    "notebooks/03-models-and-rank-distributions",
    "notebooks/04-mapping-functions",
    "notebooks/05-correcting-sampled-metrics",
    "notebooks/06-learning-rank-distribution",
    "notebooks/07-bv-vs-mn",
    "notebooks/08-adaptive-sampling",
    "notebooks/09-user-sampling",
    "notebooks/10-candidate-sets",
    "notebooks/11-popularity-sampled-evaluations",
]


def test_schedule_is_longest_first_with_unmeasured_pages_first_and_ties_in_toc_order():
    order = pre.schedule(TOC_ORDER, pre.DEFAULT_SECONDS)
    assert [Path(d).name[:5] for d in order] == [
        "08-ad", "10-ca", "09-us", "06-le", "11-po", "guide", "03-mo", "07-bv", "guide", "04-ma", "02-sa", "01-sa",
        "05-co"]
    assert pre.schedule(["a", "b", "c", "d"], {"a": 1, "b": 5, "d": 1}) == ["c", "b", "a", "d"]
    with pytest.raises(ValueError, match=r"seconds\['a'\] must be a non-negative number"):
        pre.schedule(["a"], {"a": -1})
    with pytest.raises(ValueError, match="docnames must not repeat"):
        pre.schedule(["a", "a"], {})


def test_makespan_of_the_greedy_schedule_by_hand():
    # a->w1 (5), b->w2 (4), c->w2 (7), d->w1 (8), e->w2 (10)
    assert pre.makespan(["a", "b", "c", "d", "e"], {"a": 5, "b": 4, "c": 3, "d": 3, "e": 3}, 2) == 10
    assert pre.makespan(["a", "b"], {"a": 5, "b": 4}, 1) == 9
    assert pre.makespan(["a", "b"], {"a": 5, "b": 4}, 3) == 5
    # the book at the measured seconds: longest first ends within 1 s of the bound max(longest, total / 2)
    # (723.5 s), where the table of contents' order on two workers takes 753 s and one worker 1,447 s
    s = pre.DEFAULT_SECONDS
    assert pre.makespan(pre.schedule(TOC_ORDER, s), s, 2) == 724
    assert pre.makespan(TOC_ORDER, s, 2) == 753
    assert pre.makespan(TOC_ORDER, s, 1) == sum(s.values()) == 1447
    with pytest.raises(ValueError, match="jobs must be an integer >= 1"):
        pre.makespan(["a"], {}, 0)


def test_the_book_notebooks_are_found_and_each_has_an_estimate():
    jobs = pre.collect_jobs(ROOT)
    assert [j.docname for j in jobs] == TOC_ORDER          # the prose pages are no notebooks
    assert set(pre.DEFAULT_SECONDS) == set(TOC_ORDER)
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]
    for job in jobs:
        assert job.path == ROOT / f"{job.docname}.md"
        assert job.timeout == config["timeout"] and job.allow_errors is False and job.in_temp is False
        assert job.notebook.metadata["kernelspec"]["name"] == "python3"
        assert any("parameters" in c.metadata.get("tags", []) for c in job.notebook.cells)


PAGE = MYST_HEADER + textwrap.dedent("""
    # {title}

    ```{{code-cell}} ipython3
    :tags: [hide-input]
    print(6 * 7)
    ```

    ```{{code-cell}} ipython3
    {body}
    ```
    """)


def _book(tmp_path):
    book = tmp_path / "book"
    (book / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", book / "_config.yml")
    shutil.copytree(ROOT / "_static", book / "_static")
    (book / "book").mkdir()
    shutil.copy(ROOT / "book" / "references.bib", book / "book" / "references.bib")
    (book / "intro.md").write_text("# Intro\n\nA page, no notebook.\n")
    (book / "notebooks" / "good.md").write_text(PAGE.format(title="Good", body="from itemsampling.book import record\nrecord('x', 1)"))
    (book / "notebooks" / "bad.md").write_text(PAGE.format(title="Bad", body="raise ValueError('a chapter broke')"))
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n"
                                   "  - file: notebooks/good\n  - file: notebooks/bad\n")
    return book


def test_a_failing_notebook_is_reported_by_chapter_and_the_others_are_cached(tmp_path, capsys, monkeypatch):
    from jupyter_cache import get_cache

    book = _book(tmp_path)
    monkeypatch.setenv("ITEMSAMPLING_RESULTS", str(tmp_path / "results.json"))   # dropped for the kernels
    stale = book / pre.CACHE_DIR / "stale"
    stale.mkdir(parents=True)
    assert pre.preexecute(book, jobs=2) == 1
    err = capsys.readouterr().err
    assert "notebooks/bad" in err and "failed to execute: CellExecutionError" in err
    assert "a chapter broke" in err
    report = book / "_build" / "html" / "reports" / "notebooks" / "bad.err.log"
    assert "a chapter broke" in report.read_text()
    assert not stale.exists()                          # the cache was emptied first
    cache = get_cache(str(book / pre.CACHE_DIR))
    good, bad = pre.collect_jobs(book)
    record = cache.match_cache_notebook(good.notebook)  # MyST-NB's own look-up of the page
    assert record.data["execution_seconds"] > 0
    _, merged = cache.merge_match_into_notebook(good.notebook)
    assert merged.cells[1].outputs[0]["text"] == "42\n"
    assert merged.cells[1].metadata["tags"] == ["hide-input"]
    with pytest.raises(KeyError):
        cache.match_cache_notebook(bad.notebook)       # nothing of a failed notebook is cached
    assert not (tmp_path / "results.json").exists()
    assert pre.read_seconds(book)["notebooks/good"] > 0 and "notebooks/bad" not in pre.read_seconds(book)
    # after Sphinx: a notebook that MyST-NB executed itself is named
    assert pre.verify(book) == []
    cache.add_nb_to_project(str(bad.path))
    assert pre.verify(book) == [str(bad.path)]
    assert pre.main([str(book), "--verify"]) == 1
    assert "executed " + str(bad.path) + " itself" in capsys.readouterr().err


def test_the_configuration_given_to_sphinx_is_the_book_s_in_cache_mode(tmp_path):
    target = pre.write_config(ROOT, tmp_path / "config.yml")
    written = yaml.safe_load(target.read_text())
    original = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert written["execute"].pop("execute_notebooks") == "cache"
    assert written["execute"].pop("cache") == str(ROOT / "_build" / ".jupyter_cache")
    assert written["sphinx"].pop("local_extensions") == {"preexecute_notebooks": str(ROOT / "tools")}
    original["execute"].pop("execute_notebooks")
    assert written == original
    assert yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]["execute_notebooks"] == "force"
    with pytest.raises(SystemExit):
        pre.main([str(ROOT), "--jobs", "0"])


def test_a_small_book_built_in_cache_mode_has_the_outputs_in_its_pages_and_downloads(tmp_path):
    """tools/build_book.sh end to end on two notebooks: pages and the offered .ipynb hold the
    outputs (MyST-NB 1.4.0 in cache mode writes the unexecuted notebook; restore_outputs puts the
    outputs back), MyST-NB executed nothing itself, the measured seconds are kept."""
    import os
    import subprocess

    import nbformat

    book = _book(tmp_path)
    (book / "notebooks" / "bad.md").write_text(PAGE.format(title="Bad", body="print('fine ' + 'after all')"))
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run(["bash", str(ROOT / "tools" / "build_book.sh"), str(book)], capture_output=True,
                          text=True, env=dict(os.environ, JUPYTER_BOOK=str(jb)), timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "2 notebooks on 2 workers" in log and "Using cached notebook" in log
    assert "Executing notebook using" not in log
    html = book / "_build" / "html"
    assert "fine after all" in (html / "notebooks" / "bad.html").read_text()
    offered = nbformat.read(html / "_sources" / "notebooks" / "bad.ipynb", as_version=4)
    code = [c for c in offered.cells if c.cell_type == "code"]
    assert [c.outputs[0]["text"] for c in code] == ["42\n", "fine after all\n"]
    assert [c.execution_count for c in code] == [1, 2]
    assert set(pre.read_seconds(book)) >= {"notebooks/good", "notebooks/bad"}
