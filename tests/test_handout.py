"""Hand-out: the licence, the offline MathJax, the executed notebooks in the download menu (plain
Markdown), the author-year reference list, exercises numbered by chapter, no script from the
network, readable API types."""

import json
from pathlib import Path
from types import SimpleNamespace

import nbformat

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
    """The download menu's notebook is the executed chapter with plain Markdown: glued values of
    the build, citations and exercise titles written out."""
    outdir = tmp_path / "_build" / "html"
    executed = tmp_path / "_build" / "jupyter_execute" / "notebooks" / "01-x.ipynb"
    executed.parent.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("We ran {glue:text}`n_runs` runs {cite:p}`krichene2020sampled`."),
                nbformat.v4.new_markdown_cell("```{exercise}\n:label: ex-01-2\nCompute it.\n```"),
                nbformat.v4.new_code_cell("1 + 1")]
    nbformat.write(nb, executed)
    executed.with_name("01-x.glue.json").write_text(json.dumps({"n_runs": {
        "output_type": "display_data", "data": {"text/plain": "300"},
        "metadata": {"scrapbook": {"name": "n_runs", "mime_prefix": "application/papermill.record/"}}}}))
    env = SimpleNamespace(doc2path=lambda name: str(tmp_path / f"{name}.md"))
    app = SimpleNamespace(outdir=str(outdir), env=env)
    context = {"sourcename": "notebooks/01-x.md"}
    handout._offer_ipynb(app, "notebooks/01-x", "page.html", context, doctree=object())
    assert context["ipynb_source"] == "notebooks/01-x.ipynb" and context["sourcename"] == "notebooks/01-x.md"
    offered = nbformat.read(outdir / "_sources" / "notebooks" / "01-x.ipynb", as_version=4)
    assert offered.cells[0].source == "We ran 300 runs (Krichene and Rendle, 2020)."
    assert offered.cells[1].source == "**Exercise 1.2.** Compute it."
    context = {}
    handout._offer_ipynb(app, "book/intro", "page.html", context, doctree=object())  # not a notebook
    assert "ipynb_source" not in context


def test_exercises_numbered_by_chapter():
    """sphinx-exercise numbers exercises across the book (41, 42 in chapter 10); the extension
    makes them (chapter, k) on every chapter page, in the page's order."""
    env = SimpleNamespace(toc_fignumbers={
        "notebooks/10-candidate-sets": {"exercise": {"b": (42,), "a": (41,), "c": (43,)}, "figure": {"f": (7,)}},
        "notebooks/02-sampling-theorem": {"exercise": {"x": (5,)}},
        "book/intro": {"exercise": {"y": (1,)}},
    })
    assert handout._number_exercises_by_chapter(None, env) == []
    numbers = env.toc_fignumbers
    assert numbers["notebooks/10-candidate-sets"]["exercise"] == {"a": (10, 1), "b": (10, 2), "c": (10, 3)}
    assert numbers["notebooks/10-candidate-sets"]["figure"] == {"f": (7,)}
    assert numbers["notebooks/02-sampling-theorem"]["exercise"] == {"x": (2, 1)}
    assert numbers["book/intro"]["exercise"] == {"y": (1,)}   # not a chapter: left alone
    assert handout.chapter_of("notebooks/11-popularity-sampled-evaluations") == 11
    assert handout.chapter_of("notebooks/guide-correcting-your-evaluation") is None


def test_scripts_once_none_from_the_network_no_thebe():
    from sphinx.builders.html._assets import _CascadingStyleSheet, _JavaScript

    mathjax = _JavaScript("mathjax/tex-chtml-full.js", priority=500, defer="defer")
    scripts = [_JavaScript("_static/doctools.js", priority=200),
               _JavaScript(None, priority=500, body='const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"'),
               _JavaScript("_static/sphinx-thebe.js", priority=500, **{"async": "async"}),
               _JavaScript(None, priority=500, body="window.MathJax = {}"),
               mathjax,
               _JavaScript("https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.4/require.min.js", priority=200),
               _JavaScript("https://cdn.jsdelivr.net/npm/@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js",
                           priority=200),
               _JavaScript(None, priority=500, body='const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"'),
               _JavaScript("mathjax/tex-chtml-full.js?v=1", priority=500)]
    context = {"script_files": scripts,
               "css_files": [_CascadingStyleSheet("_static/custom.css", priority=500),
                             _CascadingStyleSheet("https://fonts.googleapis.com/css?family=Lato", priority=500)]}
    handout._clean_assets(None, "index", "page.html", context, None)
    names = [(js.filename, js.attributes.get("body")) for js in context["script_files"]]
    assert names == [("_static/doctools.js", None), (None, "window.MathJax = {}"), ("mathjax/tex-chtml-full.js", None)]
    assert [css.filename for css in context["css_files"]] == ["_static/custom.css"]
    assert context["default_mode"] == "auto"


def test_widget_views_dropped():
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document

    doc = new_document("page", get_default_settings(Parser))
    only_widget = nodes.container(classes=["cell_output"])
    only_widget += nodes.raw("", '<script type="application/vnd.jupyter.widget-view+json">{}</script>', format="html")
    mixed = nodes.container(classes=["cell_output"])
    mixed += nodes.raw("", '<script type="application/vnd.jupyter.widget-view+json">{}</script>', format="html")
    mixed += nodes.raw("", "<table></table>", format="html")
    doc += [only_widget, mixed]
    handout._drop_widget_views(None, doc)
    raws = [r.astext() for r in doc.findall(nodes.raw)]
    assert raws == ["<table></table>"]
    assert len(list(doc.findall(nodes.container))) == 1


def test_api_types_lose_their_backquotes():
    lines = ["Summary with ``code``.", "", "Parameters", "----------", "x : array of ``int``",
             "    Its ``description`` keeps them.", "", "Returns", "-------", "ndarray of shape ``(N,)``",
             "    Entry ``R - 1``.", "", "Notes", "-----", "A ``literal`` in the notes."]
    out = handout.plain_type_lines(lines)
    assert out[4] == "x : array of int" and out[9] == "ndarray of shape (N,)"
    assert out[0] == lines[0] and out[5] == lines[5] and out[10] == lines[10] and out[14] == lines[14]
    # a paragraph right after a typed section is not an entry
    para = ["Returns", "-------", "float", "    The value.", "", "What is shared: ``(n_u, r_u)`` pairs", "of users."]
    assert handout.plain_type_lines(para)[5] == para[5]


def test_mathjax_readme_names_its_source():
    readme = (ROOT / "_static" / "mathjax" / "README.md").read_text()
    assert "mathjax@3.2.2" in readme and (ROOT / "_static" / "mathjax" / "LICENSE").is_file()
