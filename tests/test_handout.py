"""Hand-out: the licence, the offline MathJax, the executed notebooks in the download menu and
the author-year reference list."""

from pathlib import Path
from types import SimpleNamespace

import yaml
from pybtex.database import Entry, Person, parse_file

from itemsampling import handout

ROOT = Path(__file__).resolve().parents[1]


def test_licence_stated():
    text = (ROOT / "LICENSE").read_text()
    assert "MIT License" in text and "CC BY 4.0" in text
    assert "MIT" in (ROOT / "README.md").read_text() and "CC BY 4.0" in (ROOT / "README.md").read_text()
    assert "CC BY 4.0" in (ROOT / "book" / "intro.md").read_text()


def test_mathjax_ships_with_the_book():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    path = config["config"]["mathjax_path"]
    assert not path.startswith(("http:", "https:", "//"))
    assert (ROOT / "_static" / path).is_file()
    fonts = ROOT / "_static" / Path(path).parent / "output" / "chtml" / "fonts" / "woff-v2"
    assert len(list(fonts.glob("*.woff"))) >= 20
    assert {"sphinx_exercise", "itemsampling.handout"} <= set(config["extra_extensions"])


def test_author_year_labels():
    two = Entry("article", fields={"year": "2020", "title": "On sampled metrics"},
                persons={"author": [Person("Krichene, Walid"), Person("Rendle, Steffen")]})
    many = Entry("article", fields={"year": "2024"},
                 persons={"author": [Person("Li, Dong"), Person("Jin, Ruoming"), Person("Liu, Zhenming")]})
    one = Entry("misc", fields={"year": "2021"}, persons={"author": [Person("Jin, Ruoming")]})
    assert handout.author_year_label(two) == "Krichene and Rendle, 2020"
    assert handout.author_year_label(many) == "Li et al., 2024"
    assert handout.author_year_label(one) == "Jin, 2021"


def test_reference_list_style_formats_the_book_bibliography():
    import pybtex.plugin

    handout._register_pybtex_style()
    style = pybtex.plugin.find_plugin("pybtex.style.formatting", "authoryear")()
    bib = parse_file(str(ROOT / "book" / "references.bib"))
    labels = [entry.label for entry in style.format_bibliography(bib)]
    assert labels and all(label.rsplit(", ", 1)[-1][:4].isdigit() for label in labels)
    assert any(label.startswith("Krichene and Rendle") for label in labels)


def test_equal_author_year_labels_get_letters():
    import pybtex.plugin
    from pybtex.database import BibliographyData

    handout._register_pybtex_style()
    style = pybtex.plugin.find_plugin("pybtex.style.formatting", "authoryear")()
    bib = BibliographyData({
        key: Entry("article", fields={"year": "2020", "title": title, "journal": "J"},
                   persons={"author": [Person("Li, Dong"), Person("Jin, Ruoming"), Person("Gao, Jing")]})
        for key, title in (("a", "One"), ("b", "Two"))})
    assert sorted(e.label for e in style.format_bibliography(bib)) == ["Li et al., 2020a", "Li et al., 2020b"]


def test_executed_notebook_offered_for_download(tmp_path):
    outdir = tmp_path / "_build" / "html"
    executed = tmp_path / "_build" / "jupyter_execute" / "notebooks" / "01-x.ipynb"
    executed.parent.mkdir(parents=True)
    executed.write_text('{"cells": []}')
    app = SimpleNamespace(outdir=str(outdir))
    context = {}
    handout._offer_ipynb(app, "notebooks/01-x", "page.html", context, doctree=object())
    assert context["ipynb_source"] == "notebooks/01-x.ipynb"
    assert (outdir / "_sources" / "notebooks" / "01-x.ipynb").read_text() == '{"cells": []}'
    context = {}
    handout._offer_ipynb(app, "book/intro", "page.html", context, doctree=object())  # not a notebook
    assert "ipynb_source" not in context


def test_mathjax_readme_names_its_source():
    readme = (ROOT / "_static" / "mathjax" / "README.md").read_text()
    assert "mathjax@3.2.2" in readme and (ROOT / "_static" / "mathjax" / "LICENSE").is_file()
