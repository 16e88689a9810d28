"""Sphinx extension for handing the book out (listed in ``_config.yml``'s ``extra_extensions``).

* **Executed notebooks for download.** Every chapter page offers its executed ``.ipynb`` in the
  theme's download menu. sphinx-book-theme adds the ``.ipynb`` entry for a MyST notebook only
  when a launch service (Binder, JupyterHub, ...) is configured; the book has none, so this
  extension copies the notebook that MyST-NB executed (``_build/jupyter_execute/<page>.ipynb``)
  next to the page's source in ``_sources/`` and sets the ``ipynb_source`` the theme reads.
* **Exercises numbered by chapter.** sphinx-exercise numbers exercises across the book; this
  extension renumbers them per chapter page (``notebooks/NN-...``) as ``C.k`` ("Exercise 10.2"),
  which the titles, the solutions' titles and ``{ref}`` / ``{numref}`` read.
* **Nothing from the network.** Progress-bar widgets (a notebook's ``tqdm.auto`` output) are
  dropped from the pages, and a page's scripts are cleaned: no script or stylesheet from
  ``http(s)`` (require.js and the jupyter-widgets embed script that MyST-NB adds for widgets),
  no Thebe (the book offers no live kernel) and each script once (MathJax was loaded twice).
* **The downloaded notebook reads as plain Markdown**: glued values filled in, exercises titled
  "Exercise C.k", citations and cross-references as text
  (:func:`itemsampling.exercises.reader_notebook`).
* **Readable API types.** Napoleon sets a numpy-style entry's type in italics, where reST shows
  inline code (````(N,)````) as raw backquotes; the type lines of the Parameters / Returns / ...
  sections lose their backquotes before napoleon reads them (``plain_type_lines``).
* **Student notebooks.** At the end of an HTML build every chapter's student notebook (solutions
  replaced by stubs, Markdown plain, glued values of this build, check cells that check the
  digests the build's checks glued and carry no expected value) is written to
  ``exercises/<chapter>.ipynb`` in the HTML folder, with all of them in
  ``exercises/itemsampling-student-notebooks.zip``; the ``{student-notebooks}`` directive (used by
  ``book/teaching.md``) lists them with their links. Teacher versions are never published.
* **One citation style.** The text cites author-year (``bibtex_reference_style: author_year``);
  the pybtex style ``authoryear`` registered here labels the reference list the same way,
  "[Krichene and Rendle, 2020]", instead of numbers.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

# the reference labels live with the plain-Markdown citations that use them (``exercises``); this
# module imports ``exercises``, never the other way round
from .exercises import author_year_label, classroom_notebook, glue_values, read_notebook, reader_notebook

__all__ = ["setup", "author_year_label", "chapter_of", "plain_type_lines", "write_student_notebooks",
           "WIDGET_VIEW", "STUDENT_FOLDER", "STUDENT_ZIP"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_CHAPTER = re.compile(r"(?:^|/)(\d+)-[^/]*$")


def chapter_of(docname: str) -> int | None:
    """The chapter number of a page (``notebooks/10-candidate-sets`` is 10), ``None`` for a page
    that is not a numbered chapter."""
    m = _CHAPTER.search(docname)
    return int(m.group(1)) if m else None


def _register_pybtex_style() -> None:
    import pybtex.plugin
    from pybtex.style.formatting.plain import Style as PlainStyle
    from pybtex.style.labels import BaseLabelStyle
    from pybtex.style.sorting.author_year_title import SortingStyle

    class AuthorYearLabelStyle(BaseLabelStyle):
        def format_labels(self, sorted_entries):
            # equal labels get a, b, ... after the year ("Li et al., 2020a"), as author-year styles do
            entries = list(sorted_entries)
            labels = [author_year_label(entry) for entry in entries]
            counts = {label: labels.count(label) for label in labels}
            seen: dict = {}
            for label in labels:
                if counts[label] > 1:
                    seen[label] = seen.get(label, 0) + 1
                    yield f"{label}{chr(ord('a') + seen[label] - 1)}"
                else:
                    yield label

    class AuthorYearStyle(PlainStyle):
        default_label_style = AuthorYearLabelStyle
        default_sorting_style = SortingStyle

    try:
        pybtex.plugin.find_plugin("pybtex.style.formatting", "authoryear")
    except pybtex.plugin.PluginNotFound:
        pybtex.plugin.register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)


def _offer_ipynb(app, pagename, templatename, context, doctree) -> None:
    if doctree is None:
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.exists():
        return
    import nbformat


    nb = nbformat.read(executed, as_version=4)
    glue_file = executed.with_name(executed.stem + ".glue.json")
    source = Path(app.env.doc2path(pagename))
    if glue_file.exists():
        glue = glue_values(glue_file)
    elif source.suffix == ".ipynb":   # a page from an executed notebook (a rerun's page)
        glue = glue_values(source)
    else:
        glue = {}
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(reader_notebook(nb, glue), target)
    context["ipynb_source"] = f"{pagename}.ipynb"
    if source.suffix == ".ipynb":
        # the page's own source is this notebook: offer it once (the reader's version), not also
        # as the raw source Sphinx would copy over it
        context["sourcename"] = ""


def _number_exercises_by_chapter(app, env):
    """Exercise numbers ``(chapter, k)`` on every chapter page, in the page's order."""
    for docname, numbers in env.toc_fignumbers.items():
        chapter = chapter_of(docname)
        exercises = numbers.get("exercise")
        if chapter is None or not exercises:
            continue
        for k, node_id in enumerate(sorted(exercises, key=lambda i: exercises[i]), start=1):
            exercises[node_id] = (chapter, k)
    return []


def _drop_widget_views(app, doctree) -> None:
    """Remove widget outputs (a progress bar's ``tqdm.auto`` display in a kernel): offline they
    are empty boxes and they need scripts from the network."""
    from docutils import nodes

    for raw in list(doctree.findall(nodes.raw)):
        if WIDGET_VIEW in raw.astext():
            parent = raw.parent
            parent.remove(raw)
            if isinstance(parent, nodes.container) and not parent.children:
                parent.parent.remove(parent)


_TYPED_SECTIONS = {"parameters", "other parameters", "returns", "yields", "receives", "attributes",
                   "raises", "warns"}
_INLINE_CODE = re.compile(r"``([^`]+)``")


def plain_type_lines(lines: list[str]) -> list[str]:
    """``lines`` of a numpy-style docstring with the backquotes of inline code removed from the
    entry lines (``name : type`` or a bare type, at the section's indentation) of its typed
    sections; the descriptions below them are left alone."""
    out = list(lines)
    in_typed, base = False, 0
    for i, line in enumerate(out):
        stripped = line.strip()
        underline = i + 1 < len(out) and out[i + 1].strip() and set(out[i + 1].strip()) == {"-"}
        if stripped and underline:
            in_typed = stripped.lower() in _TYPED_SECTIONS
            base = len(line) - len(line.lstrip())
            continue
        if not in_typed or not stripped or set(stripped) == {"-"}:
            continue
        indent = len(line) - len(line.lstrip())
        if indent < base:
            in_typed = False
            continue
        if indent > base:
            continue
        # an entry line: right below the underline, or "name : type", or with its description
        # indented below it (a paragraph after the section is none of these)
        after_underline = set(out[i - 1].strip()) == {"-"}
        following = out[i + 1] if i + 1 < len(out) else ""
        described = following.strip() and len(following) - len(following.lstrip()) > base
        if after_underline or " : " in line or described:
            out[i] = _INLINE_CODE.sub(r"\1", line)
        else:
            in_typed = False
    return out


def _plain_types(app, what, name, obj, options, lines) -> None:
    lines[:] = plain_type_lines(lines)


def _external(url) -> bool:
    return isinstance(url, str) and url.lstrip().lower().startswith(("http:", "https:", "//"))


def _clean_assets(app, pagename, templatename, context, doctree) -> None:
    """Each script once, none from the network, no Thebe; no stylesheet from the network; a
    colour mode on a reader's first visit (the theme logs a console error on an empty one)."""
    if not context.get("default_mode"):
        context["default_mode"] = "auto"
    scripts, seen = [], set()
    for js in context.get("script_files", []):
        filename = getattr(js, "filename", js)
        body = getattr(js, "attributes", {}).get("body", "") if hasattr(js, "attributes") else ""
        key = (str(filename).split("?")[0] if filename else None, body)
        if _external(filename) or "THEBE_JS_URL" in body or "sphinx-thebe" in str(filename or ""):
            continue
        if key in seen:
            continue
        seen.add(key)
        scripts.append(js)
    context["script_files"] = scripts
    context["css_files"] = [css for css in context.get("css_files", [])
                            if not _external(getattr(css, "filename", css))]


STUDENT_FOLDER = "exercises"
STUDENT_ZIP = "itemsampling-student-notebooks.zip"


def _chapters(env) -> list[str]:
    """The chapter pages of the book (``notebooks/NN-...``), in chapter order."""
    return sorted((d for d in env.found_docs if chapter_of(d) is not None), key=lambda d: (chapter_of(d), d))


class student_notebooks(nodes.General, nodes.Element):
    """Placeholder for the list of student notebooks, filled in once every title is known."""


class StudentNotebooksDirective(SphinxDirective):
    """``{student-notebooks}``: a list linking every chapter's student notebook and the zip."""

    has_content = False

    def run(self):
        return [student_notebooks()]


def _fill_student_notebooks(app, doctree, docname) -> None:
    up = "../" * docname.count("/")
    for node in list(doctree.findall(student_notebooks)):
        items = nodes.bullet_list()
        for chapter in _chapters(app.env):
            title = app.env.titles[chapter].astext() if chapter in app.env.titles else chapter
            stem = chapter.rsplit("/", 1)[-1]
            para = nodes.paragraph()
            para += nodes.reference("", f"{title}", refuri=f"{up}{STUDENT_FOLDER}/{stem}.ipynb", internal=False)
            para += nodes.Text(f" ({stem}.ipynb)")
            items += nodes.list_item("", para)
        para = nodes.paragraph()
        para += nodes.Text("All of them in one file: ")
        para += nodes.reference("", STUDENT_ZIP, refuri=f"{up}{STUDENT_FOLDER}/{STUDENT_ZIP}", internal=False)
        para += nodes.Text(".")
        node.replace_self([items, para])


def write_student_notebooks(app, exception) -> None:
    """Write each chapter's student notebook and their zip into the HTML folder (build-finished)."""
    if exception is not None or app.builder.format != "html":
        return
    import zipfile

    import nbformat


    out = Path(app.outdir) / STUDENT_FOLDER
    out.mkdir(parents=True, exist_ok=True)
    executed = Path(app.outdir).parent / "jupyter_execute"
    written = []
    for chapter in _chapters(app.env):
        source = Path(app.env.doc2path(chapter))
        glue_file = executed / f"{chapter}.glue.json"
        glue = glue_values(glue_file) if glue_file.exists() else {}
        # the chapter as executed (its text matches its glued values even if the source changed
        # during the build), without the build's outputs: the student runs it
        ran = executed / f"{chapter}.ipynb"
        chapter_nb = nbformat.read(ran, as_version=4) if ran.exists() else read_notebook(source)
        chapter_nb.metadata.pop("widgets", None)
        for cell in chapter_nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        try:
            nb = classroom_notebook(chapter_nb, "student", glue)
        except ValueError as err:
            raise RuntimeError(f"student notebook of {chapter}: {err}") from None
        target = out / f"{source.stem}.ipynb"
        nbformat.write(nb, target)
        written.append(target)
    with zipfile.ZipFile(out / STUDENT_ZIP, "w", zipfile.ZIP_DEFLATED) as z:
        for path in written:
            z.write(path, f"itemsampling-exercises/{path.name}")


def setup(app):
    _register_pybtex_style()
    # before sphinx-book-theme builds its header buttons (priority 501)
    app.connect("html-page-context", _offer_ipynb, priority=400)
    # and again after its launch buttons (priority 501), which may copy the raw executed notebook
    # over ours
    app.connect("html-page-context", _offer_ipynb, priority=950)
    # after every extension has added its scripts
    app.connect("html-page-context", _clean_assets, priority=999)
    # after Sphinx's own TocTreeCollector has numbered figures and exercises (priority 500)
    app.connect("env-get-updated", _number_exercises_by_chapter, priority=900)
    app.connect("doctree-read", _drop_widget_views)
    app.add_node(student_notebooks)
    app.add_directive("student-notebooks", StudentNotebooksDirective)
    app.connect("doctree-resolved", _fill_student_notebooks)
    app.connect("build-finished", write_student_notebooks)
    # before sphinx.ext.napoleon turns the numpy sections into fields (priority 500)
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-docstring", _plain_types, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

